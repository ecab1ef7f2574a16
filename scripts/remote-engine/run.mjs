// Runs the real-engine suite (test/remote: llama.cpp's llama-server behind `serve --engine`) after making sure
// llama-server is built (prepare.mjs: once, cached outside the repo, apt cmake/g++ when missing and root).
// Usage: node scripts/remote-engine/run.mjs      (after npm run build)
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './paths.mjs';

const prep = spawnSync(process.execPath, [join(repoRoot, 'scripts/remote-engine/prepare.mjs')], {
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
});
process.stdout.write(prep.stdout ?? '');
if (prep.status !== 0) {
  console.error('remote engine: llama-server could not be prepared (see above)');
  process.exit(prep.status ?? 1);
}
const binary = prep.stdout.trim().split('\n').pop();
const dir = join(repoRoot, 'out/test/remote');
const files = existsSync(dir)
  ? readdirSync(dir)
      .filter((f) => f.endsWith('.test.js'))
      .map((f) => join(dir, f))
  : [];
if (!files.length) {
  console.error(`no test files in ${dir}: run npm run build first`);
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=600000', ...files], {
  stdio: 'inherit',
  cwd: repoRoot,
  env: { ...process.env, TASK_RUNTIME_LLAMA_SERVER: binary },
});
process.exit(r.status ?? 1);
