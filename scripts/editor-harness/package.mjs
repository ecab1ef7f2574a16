// Packages a platform-specific .vsix: production build, then a staging copy of the extension whose node_modules
// holds only the runtime dependencies, with node-llama-cpp's prebuilt binaries pruned to the target's one variant
// (the real node_modules is never touched). No sources, tests or source maps go in.
// Usage: node scripts/editor-harness/package.mjs [target] [--out FILE] [--no-build]   (target default linux-x64)
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve, sep } from 'node:path';
import { repoRoot } from './paths.mjs';

/** vsce target → the @node-llama-cpp prebuilt package it needs (CPU build; GPU variants are not shipped). */
export const LLAMA_VARIANT = {
  'linux-x64': 'linux-x64',
  'linux-arm64': 'linux-arm64',
  'linux-armhf': 'linux-armv7l',
  'darwin-arm64': 'mac-arm64-metal',
  'darwin-x64': 'mac-x64',
  'win32-x64': 'win-x64',
  'win32-arm64': 'win-arm64',
};

/** Files inside runtime dependencies that are never loaded at run time. */
const DEPENDENCY_PRUNE = [
  // git bundle of llama.cpp sources and local build output: only for building from source, which we never do.
  'node-llama-cpp/llama/gitRelease.bundle',
  'node-llama-cpp/llama/localBuilds',
];
/** sql.js ships many builds; Node loads only main (dist/sql-wasm.js) and its .wasm. */
const SQLJS_KEEP = new Set(['sql-wasm.js', 'sql-wasm.wasm']);

const BUDGET_BYTES = 60 * 1024 * 1024;

function fail(msg) {
  console.error(`package: ${msg}`);
  process.exit(1);
}

function parseArgs() {
  const args = process.argv.slice(2);
  const outIdx = args.indexOf('--out');
  const out = outIdx >= 0 ? resolve(args[outIdx + 1]) : undefined;
  const positional = args.filter((a, i) => !a.startsWith('--') && (outIdx < 0 || i !== outIdx + 1));
  return { target: positional[0] ?? 'linux-x64', out, build: !args.includes('--no-build') };
}

/** Absolute paths of the installed production dependency packages (top of each node_modules chain only). */
function productionPackages() {
  const r = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
  const paths = r.stdout.split('\n').map((l) => l.trim()).filter((l) => l && l !== repoRoot);
  if (!paths.length) fail(`npm ls --omit=dev found no dependencies (exit ${r.status}): ${r.stderr}`);
  const top = join(repoRoot, 'node_modules') + sep;
  // Nested packages come along with their parent's directory copy.
  return paths.filter((p) => p.startsWith(top) && !relative(top, p).includes(`${sep}node_modules${sep}`));
}

function isOtherLlamaVariant(rel, variant) {
  const m = /^@node-llama-cpp\/([^/]+)/.exec(rel.split(sep).join('/'));
  return !!m && m[1] !== variant;
}

function stage(target, variant) {
  const staging = join(tmpdir(), `task-runtime-vsix-${target}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });

  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  // The dev-only parts of the manifest do not belong in the shipped one.
  delete pkg.devDependencies;
  delete pkg.scripts;
  writeFileSync(join(staging, 'package.json'), JSON.stringify(pkg, null, 2));
  for (const f of ['README.md', 'CHANGELOG.md', 'LICENSE', 'LICENSE.md', 'package-lock.json']) {
    if (existsSync(join(repoRoot, f))) cpSync(join(repoRoot, f), join(staging, f));
  }
  if (!existsSync(join(repoRoot, 'dist/extension.js'))) fail('dist/extension.js missing (the build did not produce the extension bundle)');
  cpSync(join(repoRoot, 'dist'), join(staging, 'dist'), { recursive: true, filter: (src) => !src.endsWith('.map') });
  for (const dir of ['media', 'l10n']) {
    if (existsSync(join(repoRoot, dir))) cpSync(join(repoRoot, dir), join(staging, dir), { recursive: true });
  }
  for (const f of readdirSync(repoRoot).filter((n) => /^package\.nls(\.[\w-]+)?\.json$/.test(n))) cpSync(join(repoRoot, f), join(staging, f));

  const nm = join(repoRoot, 'node_modules');
  let haveVariant = false;
  for (const dir of productionPackages()) {
    const rel = relative(nm, dir);
    if (isOtherLlamaVariant(rel, variant)) continue;
    if (rel === join('@node-llama-cpp', variant)) haveVariant = true;
    cpSync(dir, join(staging, 'node_modules', rel), {
      recursive: true,
      dereference: true,
      filter: (src) => {
        const r = relative(nm, src).split(sep).join('/');
        if (DEPENDENCY_PRUNE.some((p) => r === p || r.startsWith(`${p}/`))) return false;
        if (r.startsWith('sql.js/dist/') && !SQLJS_KEEP.has(basename(r))) return false;
        if (isOtherLlamaVariant(r.replace(/^.*node_modules\//, ''), variant)) return false;
        return true;
      },
    });
  }
  if (!haveVariant) {
    const version = JSON.parse(readFileSync(join(nm, 'node-llama-cpp/package.json'), 'utf8')).version;
    fail(
      `@node-llama-cpp/${variant} (the prebuilt binary for ${target}) is not installed, so a ${target} vsix would ` +
        `not run. Install it (npm only installs the host platform's binaries), e.g. on a ${target} machine: ` +
        `npm i --no-save @node-llama-cpp/${variant}@${version}`,
    );
  }

  writeFileSync(
    join(staging, '.vscodeignore'),
    ['**/*.map', '**/*.ts', '!**/*.d.ts', '**/.github/**', '**/test/**', '**/tests/**', 'package-lock.json', '.vscodeignore'].join('\n') + '\n',
  );
  return staging;
}

function listVsix(vsix) {
  const out = execFileSync('unzip', ['-Z1', vsix], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return out.split('\n').filter(Boolean);
}

/** The vsix must hold the target's binary package only, and no sources, tests or maps of ours. */
function checkContents(vsix, variant) {
  const entries = listVsix(vsix);
  const problems = [];
  const variants = new Set(entries.map((e) => /node_modules\/@node-llama-cpp\/([^/]+)\//.exec(e)?.[1]).filter(Boolean));
  if (variants.size !== 1 || !variants.has(variant)) problems.push(`node-llama-cpp binary packages: ${[...variants].join(', ') || 'none'} (want only ${variant})`);
  for (const e of entries) {
    if (e.endsWith('.map')) problems.push(`map: ${e}`);
    if (/^extension\/(src|test|out|bench|webview-ui|scripts)\//.test(e)) problems.push(`source/test: ${e}`);
  }
  if (!entries.includes('extension/dist/extension.js')) problems.push('extension/dist/extension.js missing');
  return { entries, problems };
}

export function packageVsix({ target = 'linux-x64', out, build = true } = {}) {
  const variant = LLAMA_VARIANT[target];
  if (!variant) fail(`unknown target ${target}; one of ${Object.keys(LLAMA_VARIANT).join(', ')}`);
  const started = Date.now();
  if (build) execFileSync(process.execPath, [join(repoRoot, 'scripts/build.mjs'), '--production', '--no-tsc'], { stdio: 'inherit', cwd: repoRoot });
  const staging = stage(target, variant);
  const pkg = JSON.parse(readFileSync(join(staging, 'package.json'), 'utf8'));
  const vsix = out ?? join(repoRoot, `${pkg.name}-${target}-${pkg.version}.vsix`);
  const vsce = join(repoRoot, 'node_modules/@vscode/vsce/vsce');
  const r = spawnSync(process.execPath, [vsce, 'package', '--target', target, '--out', vsix, '--allow-missing-repository', '--skip-license', '--no-rewrite-relative-links'], {
    cwd: staging,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) fail(`vsce package exited ${r.status}`);
  const { entries, problems } = checkContents(vsix, variant);
  const size = statSync(vsix).size;
  if (size > BUDGET_BYTES) problems.push(`size ${(size / 1048576).toFixed(1)} MB over the ${BUDGET_BYTES / 1048576} MB budget`);
  if (problems.length) fail(`${vsix} rejected:\n  ${problems.slice(0, 20).join('\n  ')}`);
  rmSync(staging, { recursive: true, force: true });
  console.log(`package: ${vsix} (${target}, ${(size / 1048576).toFixed(1)} MB, ${entries.length} files) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return vsix;
}

if (import.meta.url === `file://${process.argv[1]}`) packageVsix(parseArgs());
