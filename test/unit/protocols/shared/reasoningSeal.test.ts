// The reasoning sealer: what it seals comes back whole; anything it did not seal (altered, another key's, not ours at
// all) reads as nothing rather than an error; a data directory's key survives a restart and is private to its owner.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { loadOrCreateReasoningKey, REASONING_KEY_FILE, ReasoningSeal } from '../../../../src/protocols/shared/reasoningSeal';

describe('ReasoningSeal', () => {
  it('gives back what it sealed, model and text (unicode included)', () => {
    const seal = new ReasoningSeal();
    const blob = seal.seal({ model: 'qwen3', text: 'think: 2+2 = 4 — 확인 🧠' });
    assert.deepEqual(seal.unseal(blob), { model: 'qwen3', text: 'think: 2+2 = 4 — 확인 🧠' });
    assert.ok(!blob.includes('think'), 'the blob does not show the reasoning');
  });

  it('reads anything else as nothing: altered, another key, not a blob', () => {
    const seal = new ReasoningSeal();
    const blob = seal.seal({ model: 'm', text: 'secret chain' });
    const flipped = blob.slice(0, -2) + (blob.at(-2) === 'A' ? 'B' : 'A') + blob.at(-1);
    assert.equal(seal.unseal(flipped), undefined);
    assert.equal(new ReasoningSeal().unseal(blob), undefined);
    for (const other of ['', 'EqQK…', 'trs1.', 'trs1.!!!', 42, null, undefined, { a: 1 }]) assert.equal(seal.unseal(other), undefined);
  });

  it('keeps a data directory key across restarts, mode 0600, and replaces one of the wrong size', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seal-'));
    try {
      const k1 = loadOrCreateReasoningKey(dir);
      const blob = new ReasoningSeal(k1).seal({ model: 'm', text: 'kept' });
      const k2 = loadOrCreateReasoningKey(dir);
      assert.deepEqual(new ReasoningSeal(k2).unseal(blob), { model: 'm', text: 'kept' });
      if (process.platform !== 'win32') assert.equal(fs.statSync(path.join(dir, REASONING_KEY_FILE)).mode & 0o777, 0o600);
      fs.writeFileSync(path.join(dir, REASONING_KEY_FILE), 'short');
      assert.equal(loadOrCreateReasoningKey(dir).length, 32);
      assert.throws(() => new ReasoningSeal(Buffer.alloc(5)), /32 bytes/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
