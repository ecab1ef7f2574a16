// `npm run test:editor`: prepare the harness (cached), then the integration suite inside code-server's extension
// host and the Playwright UI suite against the packaged .vsix. Prints how long each step took.
// Usage: node scripts/editor-harness/run.mjs [integration|e2e ...]   (default: both)
import { prepare } from './prepare.mjs';
import { runIntegration } from './runIntegration.mjs';
import { runE2E } from './runE2E.mjs';

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const suites = wanted.length ? wanted : ['integration', 'e2e'];
const timings = [];

async function step(name, fn) {
  const started = Date.now();
  try {
    return await fn();
  } finally {
    timings.push(`${name} ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

let failed = [];
try {
  await step('prepare', () => prepare());
  if (suites.includes('integration') && (await step('integration', () => runIntegration())) !== 0) failed.push('integration');
  if (suites.includes('e2e') && (await step('e2e (package + install + UI)', () => runE2E())) !== 0) failed.push('e2e');
} catch (e) {
  console.error(e?.message ?? e);
  failed.push('harness');
}
console.log(`[editor tests] ${timings.join(', ')}`);
if (failed.length) {
  console.error(`[editor tests] FAILED: ${failed.join(', ')}`);
  process.exit(1);
}
