// `task-runtime serve` flags of issue #20: --concurrency (auto or 1-64 sequences per local model) and --keep-alive
// (0, seconds, or a duration), each bad value a usage error that names the flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseArgs, UsageError } from '../../../src/cli/args';

const serveArgs = (argv: string[]) => {
  const a = parseArgs(['serve', ...argv]);
  assert.equal(a.command, 'serve');
  return a as Extract<typeof a, { command: 'serve' }>;
};

test('--concurrency takes auto or 1-64', () => {
  assert.equal(serveArgs([]).concurrency, undefined);
  assert.equal(serveArgs(['--concurrency', 'auto']).concurrency, 'auto');
  assert.equal(serveArgs(['--concurrency', '8']).concurrency, 8);
  for (const bad of ['0', '65', 'many', '-1']) {
    assert.throws(
      () => serveArgs([`--concurrency=${bad}`]),
      (e: Error) => e instanceof UsageError && /--concurrency must be "auto"/.test(e.message),
    );
  }
});

test('--keep-alive takes 0, seconds or a duration up to 24h', () => {
  assert.equal(serveArgs([]).keepAliveMs, undefined);
  assert.equal(serveArgs(['--keep-alive', '0']).keepAliveMs, 0);
  assert.equal(serveArgs(['--keep-alive', '90']).keepAliveMs, 90_000);
  assert.equal(serveArgs(['--keep-alive', '5m']).keepAliveMs, 300_000);
  assert.equal(serveArgs(['--keep-alive', '250ms']).keepAliveMs, 250);
  for (const bad of ['forever', '25h', '5d']) {
    assert.throws(
      () => serveArgs([`--keep-alive=${bad}`]),
      (e: Error) => e instanceof UsageError && /--keep-alive must be/.test(e.message),
    );
  }
});
