import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { buildTestModel, ensureDemoModel, writeTestModel, DEMO_MODEL_FILE } from '../../../../src/backends/llama/demoModel';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { TokenTextStream } from '../../../../src/backends/llama/tokenTextStream';
import type { GenerateRequest, GenerationSnapshot, ResumeFrom } from '../../../../src/runtime/backend';
import { errorText } from '../../../../src/runtime/problems';
import { testModelPath } from '../../../fixtures/testModel';

const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
  model: '',
  instructions: 'You are a test.',
  messages: [{ role: 'user', content: 'Say something.' }],
  ...over,
});

interface Collected {
  pieces: string[];
  tokens: number;
}
function collector(onPiece?: (c: Collected) => void) {
  const c: Collected = { pieces: [], tokens: 0 };
  return {
    c,
    onText(text: string, tokens: number) {
      c.pieces.push(text);
      c.tokens += tokens;
      onPiece?.(c);
    },
  };
}
const never = () => new AbortController().signal;

function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

describe('writeTestModel', () => {
  it('is deterministic for a seed and differs across seeds', () => {
    const a = buildTestModel({ seed: 7 });
    const b = buildTestModel({ seed: 7 });
    const c = buildTestModel({ seed: 8 });
    assert.ok(a.equals(b));
    assert.ok(!a.equals(c));
    assert.equal(a.length, c.length);
    assert.equal(a.toString('latin1', 0, 4), 'GGUF');
    assert.equal(a.readUInt32LE(4), 3);
    assert.ok(a.length > 300_000 && a.length < 1_000_000, `size ${a.length}`);
  });

  it('ensureDemoModel writes the demo file once', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-demo-'));
    try {
      const p = ensureDemoModel(dir);
      assert.equal(p, path.join(dir, DEMO_MODEL_FILE));
      const mtime = fs.statSync(p).mtimeMs;
      assert.equal(ensureDemoModel(dir), p);
      assert.equal(fs.statSync(p).mtimeMs, mtime);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('LlamaBackend on the tiny model', () => {
  const modelPath = testModelPath();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-llama-'));
  const missingPath = path.join(tmp, 'missing.gguf');
  const corruptPath = path.join(tmp, 'corrupt.gguf');
  fs.writeFileSync(corruptPath, Buffer.concat([buildTestModel().subarray(0, 4096), Buffer.alloc(4096, 0xab)]));
  const backend = new LlamaBackend({
    models: [
      { source: modelPath, demo: true },
      { id: 'missing', source: missingPath },
      { id: 'corrupt', source: corruptPath },
    ],
  });

  after(async () => {
    await backend.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('resolves models by id, defaulting to the first', () => {
    assert.equal(backend.resolveModel(undefined), 'tiny-test');
    assert.equal(backend.resolveModel(''), 'tiny-test');
    assert.equal(backend.resolveModel('corrupt'), 'corrupt');
    assert.equal(backend.resolveModel('nope'), undefined);
    const info = backend.listModels();
    assert.deepEqual(
      info.map((m) => [m.id, m.state, m.demo]),
      [
        ['tiny-test', 'unloaded', true],
        ['missing', 'unloaded', false],
        ['corrupt', 'unloaded', false],
      ],
    );
  });

  it('loads with progress, sharing one promise between concurrent calls', async () => {
    const progress: number[] = [];
    const p1 = backend.load('tiny-test', { onProgress: (p) => progress.push(p) });
    const p2 = backend.load('tiny-test');
    assert.equal(p1, p2);
    assert.equal(backend.listModels()[0]!.state, 'loading');
    await p1;
    assert.ok(backend.isLoaded('tiny-test'));
    const info = backend.listModels()[0]!;
    assert.equal(info.state, 'loaded');
    assert.ok((info.maxContextLength ?? 0) >= 1024);
    assert.ok(progress.length >= 2);
    assert.equal(progress[progress.length - 1], 1);
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i]! >= progress[i - 1]!);
  });

  it('streams text pieces whose tokens add up to the output count', async () => {
    const { c, onText } = collector();
    const r = await backend.generate(request({ maxOutputTokens: 64, seed: 3 }), { signal: never(), onText });
    assert.ok(r.inputTokens > 5);
    assert.ok(r.outputTokens > 0 && r.outputTokens <= 64);
    assert.ok(c.pieces.length > 1);
    assert.equal(c.tokens, r.outputTokens);
    const text = c.pieces.join('');
    assert.ok(text.length > 0);
    assert.ok(!hasLoneSurrogate(text));
    assert.equal(Buffer.from(text, 'utf8').toString('utf8'), text);
  });

  it('is reproducible for a seed', async () => {
    const a = collector();
    const b = collector();
    await backend.generate(request({ maxOutputTokens: 40, seed: 11 }), { signal: never(), onText: a.onText });
    await backend.generate(request({ maxOutputTokens: 40, seed: 11 }), { signal: never(), onText: b.onText });
    assert.equal(a.c.pieces.join(''), b.c.pieces.join(''));
  });

  it('stops at maxOutputTokens with exactly that many tokens', async () => {
    let hits = 0;
    for (const seed of [1, 2, 3, 4]) {
      const { c, onText } = collector();
      const r = await backend.generate(request({ maxOutputTokens: 12, seed }), { signal: never(), onText });
      assert.equal(c.tokens, r.outputTokens);
      if (r.finishReason === 'stop') {
        assert.ok(r.outputTokens < 12);
        continue;
      }
      assert.equal(r.finishReason, 'max_output_tokens');
      assert.equal(r.outputTokens, 12);
      hits++;
    }
    assert.ok(hits >= 1);
  });

  it('ends on the end-of-sequence token by itself', async () => {
    let stops = 0;
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = await backend.generate(request({ maxOutputTokens: 1500, seed }), {
        signal: never(),
        onText: () => undefined,
      });
      if (r.finishReason === 'stop') {
        assert.ok(r.outputTokens < 1500);
        stops++;
      } else assert.equal(r.finishReason, 'max_output_tokens');
    }
    assert.ok(stops >= 1, 'no generation ended by itself');
  });

  it('suppressEndOfGeneration: a generation that would end by itself runs on to max tokens, the same up to there', async () => {
    let ended: { seed: number; tokens: number; text: string } | undefined;
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const { c, onText } = collector();
      const r = await backend.generate(request({ maxOutputTokens: 1500, seed }), { signal: never(), onText });
      if (r.finishReason === 'stop') {
        ended = { seed, tokens: r.outputTokens, text: c.pieces.join('') };
        break;
      }
    }
    assert.ok(ended, 'no seed ended by itself: nothing to suppress');
    const suppressing = new LlamaBackend({ models: [{ source: modelPath }], suppressEndOfGeneration: true });
    try {
      const max = ended.tokens + 40;
      const { c, onText } = collector();
      const r = await suppressing.generate(request({ maxOutputTokens: max, seed: ended.seed }), { signal: never(), onText });
      assert.equal(r.finishReason, 'max_output_tokens');
      assert.equal(r.outputTokens, max);
      assert.equal(c.tokens, max, 'the end token counts as an output token');
      // Sampling is untouched: the same seed gives the same text up to where the model ended it.
      assert.ok(c.pieces.join('').startsWith(ended.text));
    } finally {
      await suppressing.dispose();
    }
  });

  it('stops promptly when aborted', async () => {
    const ac = new AbortController();
    const { c, onText } = collector((col) => {
      if (col.tokens >= 5) ac.abort();
    });
    const r = await backend.generate(request({ seed: 5, maxOutputTokens: 1000 }), {
      signal: ac.signal,
      onText,
    });
    if (r.finishReason === 'stop') assert.ok(r.outputTokens < 5);
    else {
      assert.equal(r.finishReason, 'aborted');
      assert.ok(r.outputTokens >= 5 && r.outputTokens <= 8, `outputTokens ${r.outputTokens}`);
      assert.equal(c.tokens, r.outputTokens);
    }
    const pre = new AbortController();
    pre.abort();
    const r2 = await backend.generate(request(), { signal: pre.signal, onText: () => assert.fail('no text') });
    assert.equal(r2.finishReason, 'aborted');
    assert.equal(r2.outputTokens, 0);
  });

  it('rejects a missing and a corrupt file without paths in the message, and keeps serving', async () => {
    await assert.rejects(backend.load('missing'), (err: Error) => {
      assert.match(err.message, /missing/);
      assert.ok(!err.message.includes(tmp), err.message);
      return true;
    });
    assert.equal(backend.listModels().find((m) => m.id === 'missing')!.state, 'error');
    await assert.rejects(backend.load('corrupt'), (err: Error) => {
      assert.match(err.message, /corrupt/);
      assert.ok(!err.message.includes(tmp), err.message);
      return true;
    });
    assert.equal(backend.listModels().find((m) => m.id === 'corrupt')!.state, 'error');
    await assert.rejects(backend.generate(request({ model: 'corrupt' }), { signal: never(), onText: () => undefined }));
    const { c, onText } = collector();
    const r = await backend.generate(request({ maxOutputTokens: 8, seed: 1 }), { signal: never(), onText });
    assert.ok(r.outputTokens > 0);
    assert.equal(c.tokens, r.outputTokens);
  });

  it("scrubs paths from load errors with the runtime's scrubber", async () => {
    // A unix socket passes the existence check, and opening it fails with an error that names the full path.
    const dir = fs.mkdtempSync(path.join(tmp, 'alice-'));
    const socketPath = path.join(dir, 'socket.gguf');
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    const local = new LlamaBackend({ models: [{ id: 'socket', source: socketPath }] });
    try {
      await assert.rejects(local.load('socket'), (err: Error) => {
        assert.match(err.message, /^cannot load model "socket": .*'<path>'/);
        assert.ok(!err.message.includes('alice-') && !err.message.includes('socket.gguf'), err.message);
        assert.equal(errorText(err, Infinity), err.message, 'nothing left for the runtime to scrub');
        return true;
      });
    } finally {
      await local.dispose();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('snapshots and resumes in a fresh process with the same continuation', async () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'snap-'));
    const greedy = request({ maxOutputTokens: 60, temperature: 0 });
    // Reference: one uninterrupted greedy generation.
    const full = collector();
    const ref = await backend.generate(greedy, { signal: never(), onText: full.onText });
    const refText = full.c.pieces.join('');
    assert.ok(ref.outputTokens >= 30, `reference too short (${ref.outputTokens})`);

    // Interrupted run with snapshots; abort after 20 tokens.
    const ac = new AbortController();
    const snaps: GenerationSnapshot[] = [];
    const part = collector((col) => {
      if (col.tokens >= 20) ac.abort();
    });
    const r = await backend.generate(greedy, {
      signal: ac.signal,
      onText: part.onText,
      snapshots: { dir, everyMs: 0, minReevalMs: 0, onSnapshot: (s) => snaps.push(s) },
    });
    assert.equal(r.finishReason, 'aborted');
    assert.ok(snaps.length >= 5);
    const snap = snaps[snaps.length - 1]!;
    assert.ok(snap.outputTokens >= 10 && snap.outputTokens <= 20);
    assert.ok(refText.startsWith(snap.text));
    assert.ok(fs.existsSync(snap.statePath));
    assert.deepEqual(
      fs.readdirSync(dir).filter((f) => f.endsWith('.tmp')),
      [],
    );

    const script = path.join(__dirname, '../../../fixtures/resumeGeneration.js');
    const resumeFrom: ResumeFrom = { snapshot: snap, text: snap.text, outputTokens: snap.outputTokens };
    const child = spawnSync(process.execPath, [script, JSON.stringify({ modelPath, request: greedy, resumeFrom })], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(child.status, 0, child.stderr);
    const resumed = JSON.parse(child.stdout) as {
      result: { finishReason: string; inputTokens: number; outputTokens: number };
      text: string;
      pieceTokens: number;
    };
    assert.equal(resumed.result.inputTokens, ref.inputTokens);
    assert.equal(resumed.result.outputTokens, ref.outputTokens);
    assert.equal(resumed.result.finishReason, ref.finishReason);
    assert.equal(resumed.pieceTokens, ref.outputTokens - snap.outputTokens);
    assert.equal(snap.text + resumed.text, refText);

    // Without the snapshot (or with one that cannot be used) the same continuation comes from prompt + text.
    for (const snapshot of [undefined, { ...snap, statePath: path.join(dir, 'other-model.llstate') }]) {
      const rest = collector();
      const again = await backend.generate(greedy, {
        signal: never(),
        onText: rest.onText,
        resumeFrom: { snapshot, text: part.c.pieces.join(''), outputTokens: part.c.tokens },
      });
      assert.equal(part.c.pieces.join('') + rest.c.pieces.join(''), refText);
      assert.equal(again.outputTokens, ref.outputTokens);
      assert.equal(again.inputTokens, ref.inputTokens);
    }
  });

  it('snapshots only when re-evaluating would take longer than minReevalMs', async () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'cadence-'));
    const count = async (minReevalMs: number) => {
      const snaps: GenerationSnapshot[] = [];
      await backend.generate(request({ maxOutputTokens: 40, temperature: 0 }), {
        signal: never(),
        onText: () => undefined,
        snapshots: { dir, everyMs: 0, minReevalMs, onSnapshot: (s) => snaps.push(s) },
      });
      return snaps.length;
    };
    assert.ok((await count(0)) >= 10);
    // Re-evaluating ~50 tokens of the demo model takes milliseconds, never ten minutes.
    assert.equal(await count(600_000), 0);
  });

  it('runs concurrent generations on separate sequences', async () => {
    const a = collector();
    const b = collector();
    const [ra, rb] = await Promise.all([
      backend.generate(request({ maxOutputTokens: 30, seed: 21 }), { signal: never(), onText: a.onText }),
      backend.generate(request({ maxOutputTokens: 30, seed: 21 }), { signal: never(), onText: b.onText }),
    ]);
    assert.equal(a.c.tokens, ra.outputTokens);
    assert.equal(b.c.tokens, rb.outputTokens);
    // Same seed and prompt on independent sequences: same text.
    assert.equal(a.c.pieces.join(''), b.c.pieces.join(''));
  });

  it('uses the chat template when the model has one', async () => {
    const templated = path.join(tmp, 'templated.gguf');
    writeTestModel(templated, {
      chatTemplate:
        "{% for m in messages %}{{ '[' + m['role'] + ']: ' + m['content'] + '\\n' }}{% endfor %}" +
        "{% if add_generation_prompt %}{{ '[assistant]: ' }}{% endif %}",
    });
    const local = new LlamaBackend({ models: [{ source: templated }, { source: modelPath }] });
    try {
      const req = request({ maxOutputTokens: 8, seed: 1 });
      const withTemplate = await local.generate(req, { signal: never(), onText: () => undefined });
      const plain = await local.generate({ ...req, model: 'tiny-test' }, { signal: never(), onText: () => undefined });
      assert.ok(withTemplate.outputTokens > 0);
      // "[user]: …" versus "User: …": the prompts differ in length.
      assert.notEqual(withTemplate.inputTokens, plain.inputTokens);
    } finally {
      await local.dispose();
    }
  });
});

describe('LlamaBackend context size auto', () => {
  it("makes the tasks' full-size context once at load (a 32 k-trained model)", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-ctx-'));
    const modelPath = path.join(dir, 'long.gguf');
    writeTestModel(modelPath, { seed: 1, contextLength: 32768 });
    // Every context node-llama-cpp makes for this load, by the size asked for (calibration's are small ones).
    const nlc = await importNodeLlamaCpp();
    const proto = nlc.LlamaModel.prototype as unknown as { createContext: (o?: { contextSize?: unknown }) => Promise<unknown> };
    const original = proto.createContext;
    const asked: unknown[] = [];
    proto.createContext = function (this: unknown, o) {
      asked.push(o?.contextSize);
      return original.call(this, o);
    };
    const backend = new LlamaBackend({ models: [{ id: 'long', source: modelPath }], contextSize: 'auto', concurrency: 1, threads: 1 });
    try {
      await backend.load('long');
      assert.equal(backend.listModels()[0]!.contextLength, 32768);
      const fullSize = asked.filter((s) => s === 'auto' || (typeof s === 'number' && s >= 32768));
      assert.deepEqual(fullSize, [32768], `contexts asked for: ${JSON.stringify(asked)}`);
    } finally {
      proto.createContext = original;
      await backend.dispose();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('TokenTextStream with the real tokenizer', () => {
  let llama: import('node-llama-cpp', { with: { 'resolution-mode': 'import' } }).Llama;
  let model: import('node-llama-cpp', { with: { 'resolution-mode': 'import' } }).LlamaModel;
  before(async () => {
    const nlc = await import('node-llama-cpp');
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath: testModelPath() });
  });
  after(async () => {
    await llama?.dispose();
  });

  it('never splits a multi-byte character across pieces', () => {
    const text = 'héllo 日本語 → 🙂 ok';
    const tokens = model.tokenize(text);
    // The tiny vocabulary has no CJK/emoji pieces: they arrive as byte tokens, one byte each.
    assert.ok(tokens.length > text.length);
    const stream = new TokenTextStream((t, last) => model.detokenize(t as never, false, last as never));
    const pieces: string[] = [];
    let counted = 0;
    for (const t of tokens) {
      const p = stream.push(t);
      if (p) {
        pieces.push(p.text);
        counted += p.tokens;
      }
    }
    const rest = stream.flush();
    if (rest) {
      pieces.push(rest.text);
      counted += rest.tokens;
    }
    assert.equal(counted, tokens.length);
    assert.equal(pieces.join(''), model.detokenize(tokens));
    assert.equal(pieces.join(''), text);
    for (const p of pieces) {
      assert.ok(!p.includes('\uFFFD'), JSON.stringify(p));
      assert.ok(!hasLoneSurrogate(p), JSON.stringify(p));
    }
    assert.ok(pieces.includes('🙂'));
  });

  it('matches a one-shot decode even for invalid byte runs', () => {
    // The test vocabulary puts byte token <0xNN> at id 3 + NN (after <unk>, <s>, </s>).
    const bytes = (hex: string[]) => hex.map((h) => 3 + parseInt(h, 16));
    assert.equal(model.detokenize(bytes(['C3', 'A9']) as never), 'é');
    // Truncated 3-byte sequence, a stray continuation byte, then a valid 2-byte character.
    const tokens = [...model.tokenize('a'), ...bytes(['E6', '97', '41', '80', 'C3', 'A9'])] as never[];
    const stream = new TokenTextStream((t, last) => model.detokenize(t as never, false, last as never));
    let out = '';
    for (const t of tokens) out += stream.push(t)?.text ?? '';
    out += stream.flush()?.text ?? '';
    assert.equal(out, model.detokenize(tokens));
    assert.ok(out.endsWith('é'));
  });
});
