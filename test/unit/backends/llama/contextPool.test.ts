// The batched context pool on the demo model with real node-llama-cpp: one context with N sequences of the given
// size and threads, sequences kept with their state after release and handed to the caller whose tokens share the
// longest prefix with them (the rest erased), a wait while every sequence is busy, everything freed on dispose; and
// with a real-size vocabulary, every sequence of a batch samples from its own logits.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BatchItem, Llama, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import {
  type AcquiredSequence,
  BatchedContextPool,
  chooseSequences,
  fitContextSize,
  oneSequenceContext,
} from '../../../../src/backends/llama/contextPool';
import { sequenceOrderStrategy } from '../../../../src/backends/llama/batchStrategy';
import { commonPrefix, pickSequence } from '../../../../src/backends/llama/sequenceChoice';
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { testModelPath } from '../../../fixtures/testModel';

/** Each sequence generates `steps` tokens from its prompt, all at once, started in `order` (indices into seqs). */
async function generateAll(seqs: AcquiredSequence[], prompts: Token[][], steps: number, order: number[]): Promise<void> {
  await Promise.all(
    order.map(async (i) => {
      let n = 0;
      for await (const token of seqs[i]!.sequence.evaluate(prompts[i]!, { temperature: 0, yieldEogToken: true })) {
        void token;
        if (++n >= steps) break;
      }
    }),
  );
}

/**
 * Puts the addon object of a sequence's context behind a proxy that calls `hooks[name](args)` before each call of
 * that native method; `stop()` puts the object back and returns `result()`.
 */
function watchNative<T>(sequence: LlamaContextSequence, hooks: Record<string, (args: unknown[]) => void>, result: () => T): { stop(): T } {
  const holder = sequence.context as unknown as { _ctx: Record<string | symbol, unknown> };
  const native = holder._ctx;
  holder._ctx = new Proxy(native, {
    get(target, key) {
      const v = target[key];
      if (typeof v !== 'function') return v;
      const bound = (v as (...a: unknown[]) => unknown).bind(target);
      const hook = typeof key === 'string' && Object.hasOwn(hooks, key) ? hooks[key] : undefined;
      return hook ? (...a: unknown[]) => (hook(a), bound(...a)) : bound;
    },
  });
  return {
    stop: () => {
      holder._ctx = native;
      return result();
    },
  };
}

/** node-llama-cpp's id of a sequence (an internal field of the pinned version). */
const idOf = (sequence: LlamaContextSequence): number => (sequence as unknown as { _sequenceId: number })._sequenceId;

/** Counts the native decodes of a sequence's context. */
function countDecodes(sequence: LlamaContextSequence): { stop(): number } {
  let n = 0;
  return watchNative(sequence, { decodeBatch: () => n++ }, () => n);
}

/** Records, for each native decode of the sequence's context, the thread count llama.cpp was given for it. */
function recordDecodeThreads(sequence: LlamaContextSequence): { stop(): number[] } {
  const perDecode: number[] = [];
  let threads = -1;
  return watchNative(sequence, { setThreads: (a) => (threads = a[0] as number), decodeBatch: () => perDecode.push(threads) }, () => perDecode);
}

/** Records, for each native decode of the sequence's context, the sequence ids added to its batch, in order. */
function recordBatches(sequence: LlamaContextSequence): { stop(): number[][] } {
  const batches: number[][] = [];
  let current: number[] = [];
  const hooks = {
    addToBatch: (a: unknown[]) => current.push(a[0] as number),
    decodeBatch: () => {
      batches.push(current);
      current = [];
    },
  };
  return watchNative(sequence, hooks, () => batches);
}

describe('pickSequence: which kept sequence a generation takes', () => {
  const t = (...n: number[]) => n as unknown as Token[];
  // Two agents' conversations share a head of 4 tokens (system and tools), then differ.
  const head = [1, 2, 3, 4];
  const convA = t(...head, 10, 11, 12, 13, 14, 15);
  const convB = t(...head, 20, 21);

  it('without keys: the longest shared prefix, the lowest id among equals, a fresh one when nothing is shared', () => {
    const c = [
      { id: 3, tokens: t(1, 2, 9) },
      { id: 1, tokens: t(1, 2, 3, 7) },
      { id: 0, tokens: t(1, 2, 3, 8) },
    ];
    assert.equal(pickSequence(c, t(1, 2, 3, 5), undefined, true), 2);
    assert.equal(pickSequence(c, t(6, 6), undefined, true), -1);
    assert.equal(pickSequence(c, t(6, 6), undefined, false), 2, 'no fresh one left: the lowest id');
    assert.equal(pickSequence([], t(1), undefined, true), -1);
  });

  it('goes back to the sequence its key last ran on, even when another shares more', () => {
    const c = [
      { id: 0, tokens: convA, owner: 'A' },
      { id: 1, tokens: t(...head, 30), owner: 'B' },
    ];
    assert.equal(pickSequence(c, t(...head, 30, 31), 'B', true), 1);
    assert.equal(pickSequence(c, t(...convA, 16), 'A', true), 0);
  });

  it("does not erase another conversation's history to save less than it costs: a fresh sequence instead", () => {
    const c = [{ id: 0, tokens: convA, owner: 'A' }];
    // B shares the 4-token head and would erase A's 6 tokens after it.
    assert.equal(pickSequence(c, convB, 'B', true), -1, 'a fresh sequence keeps A whole');
    assert.equal(pickSequence(c, convB, undefined, true), -1, 'also for a request without a key');
    assert.equal(pickSequence(c, convB, 'B', false), 0, 'no fresh one left: A is reused all the same');
    // A short conversation costs less than the head saves: reused.
    assert.equal(pickSequence([{ id: 0, tokens: t(...head, 10, 11), owner: 'A' }], convB, 'B', true), 0);
    // A sequence of no key that shares as much wins over one of another key.
    const both = [
      { id: 0, tokens: t(...head, 10), owner: 'A' },
      { id: 1, tokens: t(...head, 40) },
    ];
    assert.equal(pickSequence(both, convB, 'B', false), 1);
  });
});

describe('sequenceOrderStrategy', () => {
  const item = (n: number, evaluationPriority = 5): BatchItem =>
    ({ tokens: Array.from({ length: n }, (_, i) => i as Token), logits: [], evaluationPriority }) as unknown as BatchItem;

  it('puts the items in ascending sequence id and shares the batch as node-llama-cpp does', () => {
    const a = item(1);
    const b = item(100);
    const c = item(1);
    const queue = [
      { sequenceId: 5, tokens: a.tokens },
      { sequenceId: 2, tokens: b.tokens },
      { sequenceId: 0, tokens: c.tokens },
    ];
    const out = sequenceOrderStrategy(() => queue)({ items: [a, b, c], size: 30 });
    assert.deepEqual(
      out.map((p) => p.item),
      [c, b, a],
      'ids 0, 2, 5',
    );
    assert.deepEqual(
      out.map((p) => p.processAmount),
      [1, 28, 1],
      'one token each for the generating ones, the rest to the prompt',
    );
  });

  it('gives the clipped items what is left by evaluation priority, and keeps unknown items last', () => {
    const low = item(50, 1);
    const high = item(50, 9);
    const stray = item(3);
    const queue = [
      { sequenceId: 1, tokens: low.tokens },
      { sequenceId: 3, tokens: high.tokens },
    ];
    const out = sequenceOrderStrategy(() => queue)({ items: [stray, low, high], size: 40 });
    assert.deepEqual(
      out.map((p) => p.item),
      [low, high, stray],
    );
    assert.equal(
      out.reduce((n, p) => n + p.processAmount, 0),
      40,
      'the batch is full',
    );
    const [l, h] = [out[0]!.processAmount, out[1]!.processAmount];
    assert.ok(h > l, `higher priority gets more (${h} vs ${l})`);
    assert.equal(sequenceOrderStrategy(() => undefined)({ items: [low], size: 8 })[0]!.processAmount, 8, 'no queue: shares only');
  });
});

describe('BatchedContextPool on the demo model', () => {
  let llama: Llama;
  let model: LlamaModel;
  before(async () => {
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath: testModelPath() });
  });
  after(async () => {
    await llama?.dispose();
  });

  /** Evaluates `tokens` into the sequence (and one generated token). */
  async function use(sequence: LlamaContextSequence, tokens: Token[]): Promise<void> {
    for await (const token of sequence.evaluate(tokens, { temperature: 0, yieldEogToken: true })) {
      void token;
      break;
    }
  }

  it('hands out sequences of one context with the given size per sequence, threads and count', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 2, sequences: 3 });
    try {
      assert.equal(pool.size, 3);
      const got = [await pool.acquire(), await pool.acquire(), await pool.acquire()];
      assert.equal(pool.busy, 3);
      const context = got[0]!.sequence.context;
      for (const { sequence, reused } of got) {
        assert.equal(sequence.context, context, 'one context for all');
        assert.equal(reused, 0);
        assert.equal(sequence.contextTokens.length, 0);
      }
      assert.equal(context.contextSize, 256, 'the size is per sequence');
      assert.equal(context.idealThreads, 2);
      assert.equal(context.totalSequences, 3);
      for (const { sequence } of got) await pool.release(sequence);
      assert.equal(pool.busy, 0);
    } finally {
      await pool.dispose();
    }
  });

  it('reuses the kept sequence with the longest common prefix and erases the rest', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 2 });
    try {
      const a = model.tokenize('the quick brown fox jumps over the lazy dog');
      const b = model.tokenize('a completely different sentence here');
      const first = await pool.acquire(a);
      const second = await pool.acquire(b);
      await use(first.sequence, a);
      await use(second.sequence, b);
      await pool.release(first.sequence);
      await pool.release(second.sequence);
      const wanted = [...a.slice(0, 5), ...model.tokenize(' cat')];
      const again = await pool.acquire(wanted);
      assert.equal(again.sequence, first.sequence, 'the sequence that shares the prefix');
      assert.equal(again.reused, commonPrefix(a, wanted));
      assert.ok(again.reused >= 5);
      assert.deepEqual(again.sequence.contextTokens, wanted.slice(0, again.reused), 'what follows the prefix is erased');
      await pool.release(again.sequence);
      // The very same tokens: all but the last stay (it is evaluated again for logits).
      const same = await pool.acquire(b);
      assert.equal(same.sequence, second.sequence);
      assert.equal(same.reused, b.length - 1);
      await pool.release(same.sequence, false);
      assert.equal(same.sequence.contextTokens.length, 0, 'released without keep: cleared');
    } finally {
      await pool.dispose();
    }
  });

  it('waits while every sequence is busy and hands over the released one', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 1 });
    try {
      const held = await pool.acquire();
      let got: LlamaContextSequence | undefined;
      const waiting = pool.acquire().then((s) => (got = s.sequence));
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(got, undefined, 'no sequence free yet');
      await pool.release(held.sequence);
      await waiting;
      assert.equal(got, held.sequence);
    } finally {
      await pool.dispose();
    }
  });

  it('dispose frees the context and wakes waiters with an error', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 1 });
    const held = await pool.acquire();
    const waiting = assert.rejects(pool.acquire(), /unloaded/);
    await pool.dispose();
    await waiting;
    assert.equal(held.sequence.context.disposed, true);
    await pool.release(held.sequence);
  });

  it('batches the decodes of several sequences into shared steps, their prompts too', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 4 });
    try {
      const prompts = ['one two three', 'four five six', 'seven eight', 'nine ten eleven'].map((t) => model.tokenize(t));
      const seqs = await Promise.all(prompts.map((p) => pool.acquire(p)));
      const recorder = recordBatches(seqs[0]!.sequence);
      const steps = 16;
      await generateAll(seqs, prompts, steps, [...seqs.keys()]);
      const batches = recorder.stop();
      // Unbatched: 4 × (1 prompt + 15 token) decodes = 64; batched: about one per step.
      assert.ok(batches.length <= 2 * steps, `decodes ${batches.length} (unbatched: ${4 * steps})`);
      // Sequences handed out together: the gate waits for all of them, so the prompts share the first decode too
      // (without it the first prompt went alone: 8 streams of the bench model, first tokens 17 / 100 ms where one
      // batch gives all 78–79 ms).
      assert.deepEqual(batches[0], [0, 1, 2, 3], `batches: ${JSON.stringify(batches)}`);
      for (const { sequence } of seqs) await pool.release(sequence);
    } finally {
      await pool.dispose();
    }
  });

  it('builds every batch in ascending sequence id, whatever order the sequences queue in', async () => {
    // llama.cpp cuts a batch whose sequence ids do not ascend by one into one micro-batch per run (header): node-llama-
    // cpp's own order is the order the decodes were queued in, here the reverse of the ids.
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 4 });
    try {
      const prompts = ['one two three', 'four five six', 'seven eight', 'nine ten eleven'].map((t) => model.tokenize(t));
      const seqs: AcquiredSequence[] = [];
      for (const p of prompts) seqs.push(await pool.acquire(p));
      const recorder = recordBatches(seqs[0]!.sequence);
      const steps = 12;
      await generateAll(seqs, prompts, steps, [...seqs.keys()].reverse());
      const batches = recorder.stop();
      assert.ok(
        batches.some((b) => b.length === 4),
        `some batch holds all four: ${JSON.stringify(batches)}`,
      );
      for (const b of batches)
        assert.deepEqual(
          b,
          [...b].sort((x, y) => x - y),
          `ascending: ${JSON.stringify(batches)}`,
        );
      for (const { sequence } of seqs) await pool.release(sequence);
    } finally {
      await pool.dispose();
    }
  });

  it('hands out the lowest free sequence id when no kept prefix decides', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 4 });
    try {
      const got: AcquiredSequence[] = [];
      for (let i = 0; i < 4; i++) got.push(await pool.acquire());
      const ids = got.map(({ sequence }) => idOf(sequence));
      for (const i of [3, 1, 2, 0]) await pool.release(got[i]!.sequence, false);
      const next = await pool.acquire(model.tokenize('anything at all'));
      assert.equal(idOf(next.sequence), Math.min(...ids));
      await pool.release(next.sequence);
    } finally {
      await pool.dispose();
    }
  });

  it('generations that start one after another still share their decode steps', async () => {
    // Started in turn (requests arriving one by one), node-llama-cpp alone settles into a round robin of one-token
    // decodes: each sequence queues its next token while another's decode runs (measured through serve: 1.0–2.9
    // tokens per decode at 4 and 8 streams). The pool's gate brings them back to one decode per step.
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences: 4 });
    try {
      const prompts = ['one two three', 'four five six', 'seven eight', 'nine ten eleven'].map((t) => model.tokenize(t));
      const steps = 40;
      const lead = 3;
      let counter: ReturnType<typeof countDecodes> | undefined;
      const started: Array<Promise<void>> = [];
      const run = async (i: number, onToken: (n: number) => void): Promise<void> => {
        const { sequence } = await pool.acquire(prompts[i]);
        counter ??= countDecodes(sequence);
        let n = 0;
        for await (const token of sequence.evaluate(prompts[i]!, { temperature: 0, yieldEogToken: true })) {
          void token;
          onToken(++n);
          if (n >= steps) break;
        }
        await pool.release(sequence);
      };
      // Each one starts once the one before has generated `lead` tokens.
      const start = (i: number): void => {
        started.push(run(i, (n) => n === lead && i + 1 < prompts.length && start(i + 1)));
      };
      start(0);
      while (started.length < prompts.length) await Promise.race(started);
      await Promise.all(started);
      const decodes = counter!.stop();
      // Sharing every step: 40 + 3 × 3 lead-in steps + the prompts (50 seen); without the gate 69 were seen here (and a
      // full round robin would be 4 × 40 = 160).
      const shared = steps + lead * (prompts.length - 1) + prompts.length;
      assert.ok(decodes <= shared + prompts.length + 3, `decodes ${decodes} (sharing every step: ${shared})`);
    } finally {
      await pool.dispose();
    }
  });

  it('chooseSequences takes a number as given and sizes auto by memory within the CPU cap', async () => {
    const fixed = await chooseSequences(model, llama, { setting: 3, contextSize: 256, onGpu: false });
    assert.equal(fixed.sequences, 3);
    assert.ok(fixed.perSequenceBytes > 0);
    const auto = await chooseSequences(model, llama, { setting: 'auto', contextSize: 256, onGpu: false });
    assert.ok(auto.sequences >= 1 && auto.sequences <= 8, `auto ${auto.sequences}`);
  });

  it('decodes a prompt-sized batch on promptThreads and the one-token steps on threads', async () => {
    const prompt = model.tokenize('A prompt long enough to fill one batch of well over thirty-two tokens, '.repeat(4));
    assert.ok(prompt.length >= 64, `prompt of ${prompt.length} tokens`);
    for (const [promptThreads, expected] of [
      [2, 2],
      [undefined, 1],
    ] as const) {
      const pool = await BatchedContextPool.create(model, { contextSize: 512, threads: 1, promptThreads, sequences: 2 });
      try {
        const { sequence } = await pool.acquire(prompt);
        const rec = recordDecodeThreads(sequence);
        let n = 0;
        for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
          void token;
          if (++n >= 4) break;
        }
        const perDecode = rec.stop();
        // The prompt's decode, then one per generated token after the first (sampled from the prompt's logits).
        assert.deepEqual(perDecode, [expected, 1, 1, 1], `promptThreads ${promptThreads}: ${JSON.stringify(perDecode)}`);
        await pool.release(sequence);
      } finally {
        await pool.dispose();
      }
    }
  });

  it("fitContextSize gives the size node-llama-cpp's 'auto' context gets, without making one", async () => {
    const fitted = await fitContextSize(model);
    const made = await oneSequenceContext(model, 'auto', 1);
    try {
      assert.equal(fitted, made.contextSize);
      assert.equal(fitted, model.trainContextSize);
    } finally {
      await made.dispose();
    }
  });

  it('oneSequenceContext makes a context of one sequence', async () => {
    const c = await oneSequenceContext(model, 512, 1);
    try {
      assert.equal(c.contextSize, 512);
      assert.equal(c.totalSequences, 1);
    } finally {
      await c.dispose();
    }
  });
});

describe('BatchedContextPool with a 32 000-token vocabulary', () => {
  let llama: Llama;
  let model: LlamaModel;
  let dir: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-vocab-'));
    const modelPath = path.join(dir, 'vocab-32k.gguf');
    writeTestModel(modelPath, { seed: 1, vocabSize: 32_000 });
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath });
    assert.equal(model.fileInfo.metadata.tokenizer.ggml.tokens.length, 32_000);
  });
  after(async () => {
    await llama?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The probabilities of the first token sampled after `tokens` on the sequence. */
  async function firstToken(sequence: LlamaContextSequence, tokens: Token[]): Promise<Map<Token, number>> {
    const it = sequence.evaluateWithMetadata(tokens, { probabilities: true }, { temperature: 0, yieldEogToken: true });
    const step = await it.next();
    await it.return(undefined);
    assert.ok(!step.done);
    return step.value.probabilities;
  }

  it('each sequence of a batch samples from its own logits, also when llama.cpp computes them out of order', async () => {
    // Prompts of 8, 7, … 1 tokens on sequences 0…7: llama.cpp's micro-batches end sequence 7 first, so its outputs
    // come out in reverse batch order and are swapped back on the first read. Without the guard (contextPool.ts,
    // sampleFirstAlone) about 1 sampling in 6 here read another sequence's row.
    const sequences = 8;
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, sequences });
    const single = await oneSequenceContext(model, 256, 1);
    try {
      const held = await Promise.all(Array.from({ length: sequences }, () => pool.acquire()));
      assert.deepEqual(
        held.map((h) => idOf(h.sequence)),
        [0, 1, 2, 3, 4, 5, 6, 7],
      );
      // The pool's gate holds each decode of a handed-out sequence until all eight are there: one batch per trial.
      const reference = single.getSequence();
      let seed = 7;
      const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
      const wrong: string[] = [];
      for (let trial = 0; trial < 60; trial++) {
        const prompts = held.map((_, i) => Array.from({ length: sequences - i }, () => (300 + (next() % 90)) as Token));
        for (const h of held) await h.sequence.clearHistory();
        const batches = recordBatches(held[0]!.sequence);
        const batched = await Promise.all(held.map((h, i) => firstToken(h.sequence, prompts[i]!)));
        assert.deepEqual(batches.stop()[0], [0, 1, 2, 3, 4, 5, 6, 7], 'the eight prompts share one batch');
        for (let i = 0; i < sequences; i++) {
          await reference.clearHistory();
          const [token, p] = [...(await firstToken(reference, prompts[i]!))][0]!;
          const got = batched[i]!.get(token) ?? 0;
          if (Math.abs(got - p) > 0.01) wrong.push(`trial ${trial}, sequence ${i}: p(${token}) ${got.toFixed(4)}, alone ${p.toFixed(4)}`);
        }
      }
      assert.deepEqual(wrong, [], 'every sampling saw the distribution its own prompt gives');
    } finally {
      await single.dispose();
      await pool.dispose();
    }
  });
});
