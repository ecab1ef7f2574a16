// Runs the Node test suites (unit, protocol) on the tsc output with Node's own test runner.
// Usage: node scripts/test.mjs [unit|protocol ...]   (default: all)
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const suites = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const dirs = (suites.length ? suites : ['unit', 'protocol']).map((s) => join(root, 'out/test', s));

function collect(dir, acc) {
  if (!existsSync(dir)) return acc;
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, acc);
    else if (name.endsWith('.test.js')) acc.push(p);
  }
  return acc;
}
const files = dirs.flatMap((d) => collect(d, []));
if (!files.length) {
  console.error('no test files found under', dirs.join(', '));
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=2', '--test-timeout=300000', ...files], {
  stdio: 'inherit',
  cwd: root,
});
process.exit(r.status ?? 1);
