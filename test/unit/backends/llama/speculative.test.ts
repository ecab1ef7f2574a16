// Speculative decoding (src/backends/llama/speculative.ts) on the demo model: at temperature 0 the output is
// token-for-token what it is without speculation — free text, a JSON-schema-constrained answer and a forced tool call
// (grammar and UTF-8 guard under drafts) — while drafts are really made and accepted; several streams in one context
// and a resume from a snapshot taken while drafting give the same text too; and prompt lookup's own rules.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { utf8Guard } from '../../../../src/backends/llama/utf8Guard';
import { checkDraftModelFile, lookupPays, LOOKUP_PAYS_BELOW_TOKENS_PER_S } from '../../../../src/backends/llama/speculative';
import type { GenerateRequest, GenerateResult, GenerationSnapshot } from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';

const never = () => new AbortController().signal;
const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });

interface Out {
  text: string;
  /** Tokens per delivered piece: the same pieces and counts mean the same tokens came out. */
  pieces: Array<[string, number]>;
  r: GenerateResult;
}

async function run(b: LlamaBackend, req: GenerateRequest, extra: Partial<Parameters<LlamaBackend['generate']>[1]> = {}): Promise<Out> {
  const pieces: Array<[string, number]> = [];
  const r = await b.generate(req, { signal: never(), onText: (t, n) => pieces.push([t, n]), ...extra });
  return { text: pieces.map((p) => p[0]).join(''), pieces, r };
}

describe('speculative decoding on the demo model', () => {
  const model = testModelPath();
  const off = new LlamaBackend({ models: [{ source: model, demo: true }], promptLookup: 'off', threads: 1, concurrency: 3 });
  const on = new LlamaBackend({ models: [{ source: model, demo: true }], promptLookup: 'on', threads: 1, concurrency: 3 });
  const base: GenerateRequest = {
    model: '',
    instructions: 'You are a test.',
    messages: [{ role: 'user', content: 'Rewrite this.' }],
    temperature: 0,
  };
  /** A prompt holding an earlier greedy answer: the random model's greedy output repeats, so lookup drafts. */
  let copying: GenerateRequest;
  let tmp: string;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'spec-test-'));
    const first = await run(off, { ...base, maxOutputTokens: 200 });
    copying = { ...base, messages: [{ role: 'user' as const, content: first.text }], maxOutputTokens: 200 };
  });
  after(async () => {
    await off.dispose();
    await on.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const cases = (): Record<string, GenerateRequest> => ({
    'free text': copying,
    'a JSON-schema-constrained answer': {
      ...copying,
      format: {
        type: 'json_schema',
        name: 'x',
        schema: obj({ a: { type: 'string' }, b: { type: 'array', items: { type: 'integer' }, maxItems: 40 } }),
        strict: true,
      },
    },
    'a forced tool call': {
      ...copying,
      tools: [{ name: 'f', parameters: obj({ s: { type: 'string', maxLength: 60 }, n: { type: 'integer' } }) }],
      toolChoice: 'required',
    },
  });

  for (const name of ['free text', 'a JSON-schema-constrained answer', 'a forced tool call']) {
    it(`${name}: the same tokens with and without speculation at temperature 0, with drafts accepted`, async () => {
      const req = cases()[name]!;
      const a = await run(off, req);
      const b = await run(on, req);
      assert.equal(a.r.speculative, undefined, 'no speculation with prompt lookup off');
      assert.ok(b.r.speculative && b.r.speculative.accepted > 0, `drafts accepted: ${JSON.stringify(b.r.speculative)}`);
      assert.ok(b.r.speculative.accepted <= b.r.speculative.drafted);
      assert.deepEqual(b.pieces, a.pieces);
      assert.equal(b.r.outputTokens, a.r.outputTokens);
      assert.equal(b.r.finishReason, a.r.finishReason);
    });
  }

  it('three streams batched in one context give what each gives alone without speculation', async () => {
    const reqs = [
      copying,
      { ...copying, messages: [{ role: 'user' as const, content: copying.messages[0]!.content.slice(7) }] },
      { ...base, maxOutputTokens: 120 },
    ];
    const alone = [];
    for (const r of reqs) alone.push(await run(off, r));
    const together = await Promise.all(reqs.map((r) => run(on, r)));
    for (let i = 0; i < reqs.length; i++) assert.deepEqual(together[i]!.pieces, alone[i]!.pieces, `stream ${i}`);
    assert.ok(together.some((t) => (t.r.speculative?.accepted ?? 0) > 0));
  });

  it('a resume from a snapshot taken while drafting continues with the same text', async () => {
    const ref = await run(off, copying);
    const ac = new AbortController();
    const snaps: GenerationSnapshot[] = [];
    let tokens = 0;
    const part: string[] = [];
    const r = await on.generate(copying, {
      signal: ac.signal,
      onText: (t, n) => {
        part.push(t);
        tokens += n;
        if (tokens >= 120) ac.abort();
      },
      snapshots: { dir: tmp, everyMs: 0, minReevalMs: 0, onSnapshot: (s) => snaps.push(s) },
    });
    assert.equal(r.finishReason, 'aborted');
    assert.ok((r.speculative?.accepted ?? 0) > 0, 'it drafted before the abort');
    const snap = snaps.at(-1)!;
    assert.ok(snap && snap.outputTokens >= 40, `a late snapshot (${snap?.outputTokens})`);
    const rest = await run(on, copying, { resumeFrom: { snapshot: snap, text: snap.text, outputTokens: snap.outputTokens } });
    assert.equal(snap.text + rest.text, ref.text);
    assert.equal(rest.r.outputTokens, ref.r.outputTokens);
  });

  it("the UTF-8 guard biases a decode's k-th position as after its k drafts, and its first as after the delivered tokens", async () => {
    const nlc = await importNodeLlamaCpp();
    const llama = await nlc.getLlama({ gpu: false });
    const m = await llama.loadModel({ modelPath: model });
    try {
      const names = m.fileInfo.metadata.tokenizer.ggml.tokens as readonly string[];
      const byte = (b: number) => names.indexOf(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`) as Token;
      const guard = utf8Guard(nlc, m)!;
      const boundary = guard.bias();
      guard.accept(byte(0x41));
      // A decode drafting a three-byte lead: position 0 at a boundary, position 1 inside the character.
      guard.drafted([byte(0xe2), byte(0x82)]);
      assert.equal(guard.bias(), boundary);
      const inside = guard.bias();
      assert.notEqual(inside, boundary);
      const last = guard.bias();
      assert.notEqual(last, boundary, 'still inside after two of three bytes');
      // The draft was refused: the next decode starts from the delivered tokens again.
      guard.accept(byte(0x42));
      assert.equal(guard.bias(), boundary);
      guard.accept(byte(0xe2));
      assert.equal(guard.bias(), inside);
    } finally {
      await m.dispose();
    }
  });

  it('a draft model (the demo model drafting for itself) gives the same tokens, its drafts accepted; one of another vocabulary is not used', async () => {
    const logs: string[] = [];
    const drafted = new LlamaBackend({
      models: [{ source: model, demo: true }],
      draftModel: model,
      threads: 1,
      concurrency: 2,
      log: (m) => logs.push(m),
    });
    const other = path.join(tmp, 'other-vocab.gguf');
    writeTestModel(other, { seed: 5, vocabSize: 600 });
    const mismatched = new LlamaBackend({
      models: [{ source: model, demo: true }],
      draftModel: other,
      promptLookup: 'off',
      threads: 1,
      log: (m) => logs.push(m),
    });
    try {
      const req = { ...base, maxOutputTokens: 60 };
      const a = await run(off, req);
      const b = await run(drafted, req);
      assert.deepEqual(b.pieces, a.pieces);
      assert.ok((b.r.speculative?.accepted ?? 0) > 0, JSON.stringify(b.r.speculative));
      assert.ok(
        logs.some((l) => /loaded in .*speculative: draft model tiny-test\.gguf/.test(l)),
        logs.join('\n'),
      );
      const c = await run(mismatched, req);
      assert.deepEqual(c.pieces, a.pieces);
      assert.equal(c.r.speculative, undefined);
      assert.ok(
        logs.some((l) => /draft model other-vocab\.gguf not used: the vocabularies differ in size/.test(l)),
        logs.join('\n'),
      );
    } finally {
      await drafted.dispose();
      await mismatched.dispose();
    }
  });

  it('prompt lookup pays below the measured rate, not above or unmeasured', () => {
    assert.equal(lookupPays(60), true);
    assert.equal(lookupPays(LOOKUP_PAYS_BELOW_TOKENS_PER_S), false);
    assert.equal(lookupPays(2000), false);
    assert.equal(lookupPays(undefined), false);
  });

  it('a draft model file is checked: missing, a folder, not a GGUF', () => {
    assert.match(checkDraftModelFile(path.join(tmp, 'nope.gguf'))!, /not found: nope\.gguf/);
    assert.match(checkDraftModelFile(tmp)!, /is not a file/);
    const txt = path.join(tmp, 'x.gguf');
    fs.writeFileSync(txt, 'hello');
    assert.match(checkDraftModelFile(txt)!, /is not a GGUF file/);
    assert.equal(checkDraftModelFile(model), undefined);
  });
});
