// The real coding agents against `serve`: installs Claude Code and Codex CLI (pinned) from npm into a cache outside
// the repository (~/.cache/task-runtime-agents, or TASK_RUNTIME_AGENTS_DIR), once, then runs test/agents with
// Node's test runner on the tsc output. Nothing here downloads at test time: both clients run offline against
// loopback (their telemetry and update checks are switched off by the tests' environment).
// Usage: node scripts/agents/run.mjs [--install-only]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = process.env.TASK_RUNTIME_AGENTS_DIR ?? join(homedir(), '.cache', 'task-runtime-agents');
// Keep in step with test/support/agents.ts AGENT_VERSIONS.
const PINS = { '@anthropic-ai/claude-code': '2.1.328', '@openai/codex': '0.169.0' };

function installedVersion(name) {
  const p = join(dir, 'node_modules', name, 'package.json');
  return existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')).version : undefined;
}

if (Object.entries(PINS).some(([name, version]) => installedVersion(name) !== version)) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'task-runtime-agents', private: true, dependencies: PINS }, null, 2));
  console.log(
    `agents: installing ${Object.entries(PINS)
      .map(([n, v]) => `${n}@${v}`)
      .join(', ')} into ${dir}`,
  );
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock'], { cwd: dir, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
if (process.argv.includes('--install-only')) process.exit(0);

const testDir = join(root, 'out/test/agents');
const files = existsSync(testDir)
  ? readdirSync(testDir)
      .filter((f) => f.endsWith('.test.js'))
      .map((f) => join(testDir, f))
  : [];
if (!files.length) {
  console.error(`agents: no tests under ${testDir}: run \`npm run build\` first`);
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=300000', ...files], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, TASK_RUNTIME_AGENTS_DIR: dir },
});
process.exit(r.status ?? 1);
