// Builds llama.cpp's `llama-server` once, from the llama.cpp source node-llama-cpp ships
// (node_modules/node-llama-cpp/llama/gitRelease.bundle, a git bundle of the release tag in llama.cpp.info.json),
// into a cache outside the repo, for the remote-engine tests (test/remote) and the bench's `remote` section.
// Idempotent: a ready.json marker holding the tag and the binary path short-circuits later runs.
// Installs Debian cmake + g++ via apt when missing (root only; otherwise says what to run). CPU only, server
// target only, -j2: measured 9-14 min on a loaded 2-core machine (load average ~9 while other builds ran).
// Usage: node scripts/remote-engine/prepare.mjs        prints the llama-server path on its last line
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir, engineMarker, llamaSource, serverBinary } from './paths.mjs';

class PrepareError extends Error {}
const fail = (step, cause) => {
  throw new PrepareError(`remote engine: ${step} failed: ${cause}`);
};
function run(step, cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.error) fail(step, `${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(step, `${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}`);
}
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

function ensureTools() {
  const missing = [];
  if (!have('cmake')) missing.push('cmake');
  if (!have('g++')) missing.push('g++');
  if (!have('git')) missing.push('git');
  if (!have('make')) missing.push('make');
  if (!missing.length) return;
  if (process.getuid?.() !== 0) {
    fail('apt', `${missing.join(', ')} missing and this user is not root; run: sudo apt-get update && sudo apt-get install -y ${missing.join(' ')}`);
  }
  console.log(`[remote-engine] apt-get install ${missing.join(' ')}`);
  run('apt-get update', 'apt-get', ['update']);
  run('apt-get install', 'apt-get', ['install', '-y', '--no-install-recommends', ...missing, 'make'], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
}

function main() {
  const info = JSON.parse(readFileSync(join(llamaSource, 'llama.cpp.info.json'), 'utf8'));
  const tag = String(info.tag);
  if (existsSync(engineMarker)) {
    const m = JSON.parse(readFileSync(engineMarker, 'utf8'));
    if (m.tag === tag && existsSync(m.binary)) {
      console.log(m.binary);
      return;
    }
  }
  ensureTools();
  const src = join(cacheDir, `llama.cpp-${tag}`);
  const build = join(src, 'build');
  const bundle = join(llamaSource, 'gitRelease.bundle');
  if (!existsSync(join(src, 'CMakeLists.txt'))) {
    if (!existsSync(bundle)) fail('source', `${bundle} not found (node-llama-cpp ships it; is node_modules installed?)`);
    rmSync(src, { recursive: true, force: true });
    mkdirSync(cacheDir, { recursive: true });
    console.log(`[remote-engine] cloning ${bundle} -> ${src}`);
    run('git clone', 'git', ['clone', '--quiet', bundle, src]);
  }
  const t0 = Date.now();
  run('cmake configure', 'cmake', [
    '-S',
    src,
    '-B',
    build,
    '-DCMAKE_BUILD_TYPE=Release',
    '-DBUILD_SHARED_LIBS=OFF',
    '-DLLAMA_CURL=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_EXAMPLES=OFF',
    '-DLLAMA_BUILD_SERVER=ON',
    '-DGGML_NATIVE=ON',
  ]);
  run('cmake build', 'cmake', ['--build', build, '--target', 'llama-server', '-j', process.env.ENGINE_BUILD_JOBS || '2']);
  const binary = serverBinary(tag);
  if (!existsSync(binary)) fail('build', `${binary} not produced`);
  const seconds = Math.round((Date.now() - t0) / 1000);
  writeFileSync(engineMarker, JSON.stringify({ tag, binary, buildSeconds: seconds, builtAt: new Date().toISOString() }, null, 2));
  console.log(`[remote-engine] built in ${seconds} s`);
  console.log(binary);
}

try {
  main();
} catch (e) {
  console.error(e instanceof PrepareError ? e.message : e);
  process.exit(1);
}
