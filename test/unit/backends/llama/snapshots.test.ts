// Resume snapshots on the demo model with real node-llama-cpp: the model fingerprint, when a save is due, the state
// file (named by fingerprint, replaced atomically), and restoring it into a fresh sequence or refusing it.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { oneSequenceContext } from '../../../../src/backends/llama/contextPool';
import { buildTestModel } from '../../../../src/backends/llama/demoModel';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { modelFingerprint, restoreSnapshot, SnapshotWriter } from '../../../../src/backends/llama/snapshots';
import type { GenerationSnapshot } from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';

describe('modelFingerprint', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-fp-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, bytes: Buffer) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, bytes);
    return p;
  };

  it('is the same for the same bytes anywhere, and differs for other weights or another size', () => {
    const bytes = buildTestModel({ seed: 1 });
    const a = modelFingerprint(write('a.gguf', bytes));
    assert.match(a, /^[0-9a-f]{16}$/);
    assert.equal(modelFingerprint(write('b.gguf', bytes)), a);
    assert.notEqual(modelFingerprint(write('c.gguf', buildTestModel({ seed: 2 }))), a);
    // Past the hashed head only the size tells them apart.
    assert.notEqual(modelFingerprint(write('d.gguf', Buffer.concat([bytes, Buffer.alloc(1)]))), a);
  });
});

describe('SnapshotWriter.due', () => {
  const options = (everyMs: number, minReevalMs: number) => ({ dir: os.tmpdir(), everyMs, minReevalMs, onSnapshot: () => undefined });

  it('is due once re-evaluating what no save covers would take minReevalMs', () => {
    const w = new SnapshotWriter(options(0, 1000), 'fp', 0);
    // 100 tokens/s: 99 tokens take 0.99 s, 100 take 1 s.
    assert.equal(w.due(99, 100), false);
    assert.equal(w.due(100, 100), true);
    assert.equal(new SnapshotWriter(options(0, 0), 'fp', 0).due(0, 100), true);
  });

  it('counts only the tokens past what a restored state covers', () => {
    const w = new SnapshotWriter(options(0, 1000), 'fp', 50);
    assert.equal(w.due(149, 100), false);
    assert.equal(w.due(150, 100), true);
  });

  it('waits everyMs from its start', () => {
    assert.equal(new SnapshotWriter(options(60_000, 0), 'fp', 0).due(1_000_000, 1), false);
  });

  it('names its state file by the model fingerprint, one file per generation', () => {
    const a = new SnapshotWriter(options(0, 0), 'abc', 0);
    const b = new SnapshotWriter(options(0, 0), 'abc', 0);
    assert.equal(path.dirname(a.statePath), os.tmpdir());
    assert.match(path.basename(a.statePath), /^abc-[0-9a-f-]{36}\.llstate$/);
    assert.notEqual(a.statePath, b.statePath);
  });
});

describe('saving and restoring on the demo model', () => {
  let dir: string;
  let llama: Llama;
  let model: LlamaModel;
  let fingerprint: string;
  const contexts: LlamaContext[] = [];
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-snap-'));
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath: testModelPath() });
    fingerprint = modelFingerprint(testModelPath());
  });
  after(async () => {
    for (const c of contexts) await c.dispose().catch(() => undefined);
    await llama?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function freshSequence(): Promise<LlamaContextSequence> {
    const context = await oneSequenceContext(model, 256, 1);
    contexts.push(context);
    return context.getSequence();
  }

  /** A sequence holding `prompt` plus `steps` generated tokens (all evaluated), and a snapshot of it. */
  async function saved(steps: number): Promise<{ snapshot: GenerationSnapshot; tokens: number[]; writes: GenerationSnapshot[] }> {
    const writes: GenerationSnapshot[] = [];
    const writer = new SnapshotWriter({ dir, everyMs: 0, minReevalMs: 0, onSnapshot: (s) => writes.push(s) }, fingerprint, 0);
    const sequence = await freshSequence();
    let n = 0;
    for await (const token of sequence.evaluate(model.tokenize('the task runs'), { temperature: 0, yieldEogToken: true })) {
      void token;
      // As in a generation: saved before the token is counted, when everything before it is evaluated.
      await writer.save(sequence, { text: `t${n}`, outputTokens: n });
      if (++n > steps) break;
    }
    return { snapshot: writes[writes.length - 1]!, tokens: [...sequence.contextTokens], writes };
  }

  it('saves into one file, replaced each time, reporting what it covers, and leaves no temp file', async () => {
    const { snapshot, tokens, writes } = await saved(3);
    assert.equal(writes.length, 4);
    assert.deepEqual(
      writes.map((w) => [w.text, w.outputTokens]),
      [
        ['t0', 0],
        ['t1', 1],
        ['t2', 2],
        ['t3', 3],
      ],
    );
    assert.equal(new Set(writes.map((w) => w.statePath)).size, 1);
    assert.ok(path.basename(snapshot.statePath).startsWith(`${fingerprint}-`));
    assert.ok(fs.statSync(snapshot.statePath).size > 0);
    assert.deepEqual(
      fs.readdirSync(dir).filter((f) => f.endsWith('.tmp')),
      [],
    );
    assert.ok(tokens.length > 3);
  });

  it('restores into a fresh sequence, all but the last token, which it hands back to evaluate again', async () => {
    const { snapshot, tokens } = await saved(4);
    const sequence = await freshSequence();
    const logs: string[] = [];
    const restored = await restoreSnapshot(sequence, fingerprint, snapshot, (m) => logs.push(m));
    assert.ok(restored, logs.join('\n'));
    // The last save came after the last evaluated token: the state holds what the sequence held at the end.
    assert.equal(restored.contextTokens, tokens.length);
    assert.equal(restored.lastToken, tokens[tokens.length - 1]);
    assert.deepEqual([...sequence.contextTokens], tokens.slice(0, -1));
    assert.deepEqual(logs, []);
  });

  it('refuses a state of another model file, a missing file and a state shorter than its token count, clearing the sequence', async () => {
    const { snapshot } = await saved(2);
    const cases: [GenerationSnapshot, string, RegExp][] = [
      [snapshot, 'other-fingerprint', /different model file/],
      [{ ...snapshot, statePath: path.join(dir, `${fingerprint}-gone.llstate`) }, fingerprint, /missing/],
      [{ ...snapshot, outputTokens: 10_000 }, fingerprint, /does not match its token count/],
    ];
    for (const [snap, fp, why] of cases) {
      const sequence = await freshSequence();
      const logs: string[] = [];
      assert.equal(await restoreSnapshot(sequence, fp, snap, (m) => logs.push(m)), undefined);
      assert.equal(logs.length, 1);
      assert.match(logs[0]!, why);
      assert.match(logs[0]!, /evaluating prompt \+ delivered text again/);
      assert.ok(!logs[0]!.includes(dir), 'no paths in the log line');
      assert.equal(sequence.contextTokens.length, 0);
    }
  });
});
