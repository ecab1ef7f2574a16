// `npm run test:reliability`: runs test/reliability/*.test.ts (compiled to out/) one file at a time against the
// real headless server, then prints the summary table and writes it to bench/reliability.json (quick mode:
// test-results/reliability-quick.json).
// RELIABILITY_QUICK=1 runs the shortened mode (CI); the full mode takes up to ~15 minutes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = join(root, 'out/test/reliability');
const order = ['crash', 'faults', 'fuzz', 'load', 'security'];
const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.test.js')) : [];
if (!files.length) {
  console.error(`no compiled reliability tests in ${dir}; run npm run build first`);
  process.exit(1);
}
files.sort((a, b) => order.indexOf(a.replace('.test.js', '')) - order.indexOf(b.replace('.test.js', '')));
const outDir = mkdtempSync(join(tmpdir(), 'reliability-'));
const quick = process.env.RELIABILITY_QUICK === '1';
const started = Date.now();
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=1800000', ...files.map((f) => join(dir, f))], {
  stdio: 'inherit',
  cwd: root,
  env: { ...process.env, RELIABILITY_OUT_DIR: outDir },
});

const sections = readdirSync(outDir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(join(outDir, f), 'utf8')))
  .sort((a, b) => order.indexOf(a.section) - order.indexOf(b.section));
rmSync(outDir, { recursive: true, force: true });
const cols = ['iterations', 'faultsInjected', 'requestsTried', 'crashes', 'status5xx', 'dataLost'];
const total = Object.fromEntries(cols.map((c) => [c, sections.reduce((n, s) => n + (s[c] ?? 0), 0)]));
const rows = [
  ['section', ...cols],
  ...sections.map((s) => [s.section, ...cols.map((c) => String(s[c]))]),
  ['total', ...cols.map((c) => String(total[c]))],
];
const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
const line = (row) => row.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
console.log(
  `\nReliability summary (${quick ? 'quick' : 'full'} mode, ${Math.round((Date.now() - started) / 1000)} s; crashes = unexpected server deaths, faults include deliberate kills)`,
);
console.log(line(rows[0]));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const row of rows.slice(1)) console.log(line(row));
for (const s of sections) if (s.notes) console.log(`  ${s.section}: ${JSON.stringify(s.notes)}`);

// The full run's figures are the ones kept in the repository; quick runs (CI, npm test) go to test-results/.
const outFile = quick ? 'test-results/reliability-quick.json' : 'bench/reliability.json';
mkdirSync(join(root, dirname(outFile)), { recursive: true });
writeFileSync(
  join(root, outFile),
  JSON.stringify(
    { mode: quick ? 'quick' : 'full', date: new Date().toISOString(), node: process.version, testsPassed: r.status === 0, total, sections },
    null,
    2,
  ) + '\n',
);
console.log(`written to ${outFile}`);
const missing = order.filter((s) => !sections.some((x) => x.section === s));
if (missing.length) console.error(`sections without figures (failed early or skipped): ${missing.join(', ')}`);
process.exit(r.status ?? 1);
