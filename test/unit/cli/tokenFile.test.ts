// The headless server's token file: created 0600, refused when others can read or write it; the store folder is
// made (or tightened to) 0700.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UsageError } from '../../../src/cli/args';
import { loadOrCreateTokens, parseTokens } from '../../../src/cli/tokenFile';
import { DurableDatabase } from '../../../src/runtime/store/database';

const dir = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-token-'));
  process.once('exit', () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
};

test('a missing token file is created with mode 0600 and one token', () => {
  const file = path.join(dir(), 'sub', 'token');
  const tokens = loadOrCreateTokens(file);
  assert.equal(tokens.size, 1);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.deepEqual(loadOrCreateTokens(file), tokens, 'read back the same');
});

test('a token file other users can read or write is refused, naming its mode', () => {
  const file = path.join(dir(), 'token');
  fs.writeFileSync(file, 'alice 0123456789abcdef0123\n', { mode: 0o600 });
  for (const mode of [0o644, 0o604, 0o620]) {
    fs.chmodSync(file, mode);
    assert.throws(
      () => loadOrCreateTokens(file),
      (e: Error) => e instanceof UsageError && e.message.includes(mode.toString(8)) && /chmod 600/.test(e.message),
    );
  }
  fs.chmodSync(file, 0o600);
  assert.equal(loadOrCreateTokens(file).get('0123456789abcdef0123'), 'alice');
});

test('the store folder is made 0700, and an existing 0755 one is tightened', async () => {
  const fresh = path.join(dir(), 'store');
  await (await DurableDatabase.open(fresh)).close();
  assert.equal(fs.statSync(fresh).mode & 0o777, 0o700);
  const loose = path.join(dir(), 'store');
  fs.mkdirSync(loose, { mode: 0o755 });
  fs.chmodSync(loose, 0o755);
  await (await DurableDatabase.open(loose)).close();
  assert.equal(fs.statSync(loose).mode & 0o777, 0o700);
});

test('one token given to two principals is refused, naming both lines and never the token', () => {
  const token = 'a'.repeat(24);
  const text = `# team tokens\nalice ${token}\nbob bbbbbbbbbbbbbbbbbbbbbbbb\ncarol ${token}\n`;
  assert.throws(
    () => parseTokens(text, 'tokens'),
    (e) => e instanceof UsageError && /lines 2 and 4/.test(e.message) && e.message.includes('"alice"') && !e.message.includes(token),
  );
  // The same line twice is the same grant, not a conflict.
  assert.equal(parseTokens(`alice ${token}\nalice ${token}\n`, 'tokens').get(token), 'alice');
});
