// Runs the Node test suites (unit, protocol, native) on the tsc output with Node's own test runner.
// Usage: node scripts/test.mjs [unit|protocol|native ...]   (default: all)
// `native` (test/native) needs the patched native engine build: its test builds it once into a cache outside the
// repo (minutes of CPU on a fresh machine; test/native/oneStep.test.ts says where), so it runs on its own, after the
// others, with a timeout that allows the build. The other suites run on node-llama-cpp's prebuilt binary.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const asked = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const suites = asked.length ? asked : ['unit', 'protocol', 'native'];

function collect(dir, acc) {
  if (!existsSync(dir)) return acc;
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, acc);
    else if (name.endsWith('.test.js')) acc.push(p);
  }
  return acc;
}
const filesOf = (names) => names.flatMap((s) => collect(join(root, 'out/test', s), []));
const runs = [
  { files: filesOf(suites.filter((s) => s !== 'native')), native: false, args: ['--test-concurrency=2', '--test-timeout=300000'] },
  // One file at a time; an hour covers a first build of the native engine on 2 cores.
  { files: filesOf(suites.filter((s) => s === 'native')), native: true, args: ['--test-concurrency=1', '--test-timeout=3600000'] },
].filter((r) => r.files.length);
if (!runs.length) {
  console.error('no test files found for', suites.join(', '));
  process.exit(1);
}
/**
 * The native suite's first run builds the engine: cmake, a C++ compiler, make and git. Where they are missing and
 * this is root (CI), they come from apt, as scripts/remote-engine/prepare.mjs does for llama-server; otherwise the
 * test fails naming them.
 */
function ensureBuildTools() {
  const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
  const missing = ['cmake', 'g++', 'make', 'git'].filter((c) => !have(c));
  if (!missing.length || process.platform !== 'linux' || process.getuid?.() !== 0) return;
  console.log(`[native] apt-get install ${missing.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
  spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], { stdio: 'inherit', env });
}

for (const { files, native, args } of runs) {
  if (native) ensureBuildTools();
  const r = spawnSync(process.execPath, ['--test', ...args, ...files], { stdio: 'inherit', cwd: root });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
