// Structured output, sampling, stop strings, log-probabilities and context checks of LlamaBackend on the demo model
// (random weights: whatever it generates under a grammar must still validate).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import Ajv from 'ajv';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import {
  RequestRefusedError,
  type GenerateRequest,
  type GenerationSnapshot,
  type OutputFormat,
  type TokenLogprob,
} from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';

const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
  model: '',
  instructions: 'You are a test.',
  messages: [{ role: 'user', content: 'Answer in JSON.' }],
  ...over,
});
const never = () => new AbortController().signal;

interface Run {
  text: string;
  tokens: number;
  pieces: Array<{ text: string; tokens: number; logprobs?: TokenLogprob[] }>;
}
function collector(onPiece?: (r: Run) => void) {
  const run: Run = { text: '', tokens: 0, pieces: [] };
  return {
    run,
    onText(text: string, tokens: number, logprobs?: TokenLogprob[]) {
      run.text += text;
      run.tokens += tokens;
      run.pieces.push({ text, tokens, ...(logprobs ? { logprobs } : {}) });
      onPiece?.(run);
    },
  };
}

/** Ajv without ajv-formats: the three formats the grammar enforces, checked strictly (real calendar dates). */
function validator() {
  const ajv = new Ajv({ strict: false });
  const date = (s: string) => {
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
    if (!m) return false;
    const d = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!));
    return d.getUTCMonth() === +m[2]! - 1 && d.getUTCDate() === +m[3]!;
  };
  const time = (s: string) => /^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/i.test(s);
  ajv.addFormat('date', date);
  ajv.addFormat('time', time);
  ajv.addFormat('date-time', (s: string) => {
    const [d, t] = s.split(/T/i);
    return !!d && !!t && date(d) && time(t);
  });
  return ajv;
}

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
const str = (maxLength = 8) => ({ type: 'string', maxLength });
const SCHEMAS: Record<string, Record<string, unknown>> = {
  nested: obj({ person: obj({ name: str(), age: { type: 'integer' }, address: obj({ city: str(6), zip: str(5) }) }), active: { type: 'boolean' } }),
  arrays: obj({
    tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 4 },
    scores: { type: 'array', items: { type: 'number' }, minItems: 0, maxItems: 3 },
    grid: { type: 'array', items: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 2 }, maxItems: 2 },
  }),
  nullable: obj({
    color: { type: 'string', enum: ['red', 'green', 'blue'] },
    note: { anyOf: [str(10), { type: 'null' }] },
    count: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
    level: { enum: [1, 2, 3, null] },
  }),
  defs: {
    ...obj({ owner: { $ref: '#/$defs/item' }, items: { type: 'array', items: { $ref: '#/$defs/item' }, maxItems: 3 } }),
    $defs: { item: obj({ id: { type: 'integer' }, label: str(6), kind: { const: 'thing' } }) },
  },
  zodLike: {
    $schema: 'http://json-schema.org/draft-07/schema#',
    ...obj({
      when: { type: ['string', 'null'], format: 'date' },
      at: { type: 'string', format: 'date-time' },
      n: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
      ratio: { type: ['number', 'null'] },
      mode: { type: 'string', const: 'x' },
    }),
  },
};
const format = (name: string): OutputFormat => ({ type: 'json_schema', name, schema: SCHEMAS[name]!, strict: true });

describe('LlamaBackend structured output and sampling on the demo model', () => {
  const backend = new LlamaBackend({ models: [{ source: testModelPath(), demo: true }] });
  after(() => backend.dispose());

  it('50 schema-constrained generations all parse and validate against their schema', async () => {
    const ajv = validator();
    let n = 0;
    for (const name of Object.keys(SCHEMAS)) {
      const validate = ajv.compile(SCHEMAS[name]!);
      for (let seed = 1; seed <= 10; seed++, n++) {
        const { run, onText } = collector();
        const r = await backend.generate(request({ format: format(name), seed, temperature: 1, maxOutputTokens: 800 }), { signal: never(), onText });
        assert.equal(r.finishReason, 'stop', `${name}/${seed} did not end by itself: ${run.text}`);
        assert.equal(r.stopSequence, undefined, "the grammar's own end marker is no stop string of the request");
        assert.equal(run.tokens, r.outputTokens);
        assert.ok(!run.text.endsWith('\n'), 'the grammar end marker is not delivered');
        const doc = JSON.parse(run.text) as unknown;
        assert.ok(validate(doc), `${name}/${seed}: ${JSON.stringify(validate.errors)} in ${run.text}`);
      }
    }
    assert.equal(n, 50);
  });

  it('50 generations of short strings (maxLength) are valid UTF-8 that keeps the length (utf8Guard under text.format)', async () => {
    // Without the guard the grammar lets byte tokens form invalid UTF-8: U+FFFD in the text, and a maxLength broken
    // (measured without it: 3 of these 50 seeds, e.g. `" stream����"` against maxLength 8).
    const schema = obj({ a: str(), b: str(), c: { type: 'array', items: str(), minItems: 6, maxItems: 6 } });
    const validate = validator().compile(schema);
    for (let seed = 1; seed <= 50; seed++) {
      const { run, onText } = collector();
      const r = await backend.generate(
        request({ format: { type: 'json_schema', name: 'short', schema, strict: true }, seed, temperature: 1.5, maxOutputTokens: 600 }),
        { signal: never(), onText },
      );
      assert.equal(r.finishReason, 'stop', `${seed}: ${run.text}`);
      assert.ok(!run.text.includes('\uFFFD'), `${seed}: invalid UTF-8 in ${JSON.stringify(run.text)}`);
      const doc = JSON.parse(run.text) as unknown;
      assert.ok(validate(doc), `${seed}: ${JSON.stringify(validate.errors)} in ${run.text}`);
    }
  });

  it('json_object gives a JSON object', async () => {
    for (const seed of [1, 2, 3]) {
      const { run, onText } = collector();
      const r = await backend.generate(request({ format: { type: 'json_object' }, seed, temperature: 1, maxOutputTokens: 800 }), {
        signal: never(),
        onText,
      });
      if (r.finishReason !== 'stop') continue; // an open object may run to the token limit
      const doc = JSON.parse(run.text) as unknown;
      assert.ok(doc !== null && typeof doc === 'object' && !Array.isArray(doc), run.text);
      return;
    }
    assert.fail('no json_object generation ended');
  });

  it('resumes mid-JSON inside the grammar: delivered text + continuation is valid', async () => {
    const validate = validator().compile(SCHEMAS.nested!);
    let resumed = 0;
    for (const seed of [1, 2, 3, 4]) {
      const req = request({ format: format('nested'), seed, temperature: 1, maxOutputTokens: 800 });
      const ac = new AbortController();
      const part = collector((r) => {
        if (r.tokens >= 12) ac.abort();
      });
      const first = await backend.generate(req, { signal: ac.signal, onText: part.onText });
      if (first.finishReason !== 'aborted') continue;
      assert.throws(() => JSON.parse(part.run.text) as unknown, 'cut mid-document');
      const rest = collector();
      const second = await backend.generate(
        { ...req, seed: seed + 100 },
        {
          signal: never(),
          onText: rest.onText,
          resumeFrom: { text: part.run.text, outputTokens: part.run.tokens },
        },
      );
      assert.equal(second.finishReason, 'stop');
      const doc = JSON.parse(part.run.text + rest.run.text) as unknown;
      assert.ok(validate(doc), `${part.run.text}|${rest.run.text}`);
      resumed++;
    }
    assert.ok(resumed >= 2, `only ${resumed} generations were cut mid-JSON`);
  });

  it('resumes mid-JSON from a snapshot too (the grammar state is rebuilt from the delivered text)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-structured-'));
    try {
      const validate = validator().compile(SCHEMAS.defs!);
      const req = request({ format: format('defs'), seed: 7, temperature: 1, maxOutputTokens: 800 });
      const ac = new AbortController();
      const snaps: GenerationSnapshot[] = [];
      const part = collector((r) => {
        if (r.tokens >= 20) ac.abort();
      });
      const first = await backend.generate(req, {
        signal: ac.signal,
        onText: part.onText,
        snapshots: { dir, everyMs: 0, minReevalMs: 0, onSnapshot: (s) => snaps.push(s) },
      });
      assert.equal(first.finishReason, 'aborted');
      const snap = snaps.at(-1);
      assert.ok(snap && snap.outputTokens > 0 && part.run.text.startsWith(snap.text));
      const rest = collector();
      const second = await backend.generate(req, {
        signal: never(),
        onText: rest.onText,
        resumeFrom: { snapshot: snap, text: part.run.text, outputTokens: part.run.tokens },
      });
      assert.equal(second.finishReason, 'stop');
      const doc = JSON.parse(part.run.text + rest.run.text) as unknown;
      assert.ok(validate(doc), `${part.run.text}|${rest.run.text}`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses what the grammar cannot enforce, before anything runs', () => {
    const bad = (schema: Record<string, unknown>, param: string) =>
      assert.throws(
        () => backend.checkRequest(request({ format: { type: 'json_schema', name: 'x', schema } })),
        (e: unknown) => e instanceof RequestRefusedError && e.code === 'invalid_json_schema' && e.param === param,
      );
    bad(obj({ age: { type: 'integer', minimum: 0 } }), 'text.format.schema.properties.age.minimum');
    bad(obj({ s: { type: 'string', pattern: 'a+' } }), 'text.format.schema.properties.s.pattern');
    bad(obj({ s: { type: 'string', format: 'email' } }), 'text.format.schema.properties.s.format');
    bad(obj({ s: { allOf: [] } }), 'text.format.schema.properties.s.allOf');
    bad(obj({ s: { $ref: 'other.json#/x' } }), 'text.format.schema.properties.s.$ref');
    backend.checkRequest(request({ format: format('defs') }));
    backend.checkRequest(request({ format: { type: 'json_object' } }));
  });

  it("fills contextLength ('auto' = the trained context here) and refuses a prompt that leaves no room for output", async () => {
    await backend.load('tiny-test');
    const info = backend.listModels()[0]!;
    assert.equal(info.contextLength, info.maxContextLength);
    assert.equal(info.contextLength, 2048);
    // The caller's budget beyond the room is refused (contextFit.ts; the boundary in contextFit.test.ts), a default is capped.
    assert.throws(
      () => backend.checkRequest(request({ maxOutputTokens: 100_000 })),
      (e: unknown) => e instanceof RequestRefusedError && e.code === 'context_length_exceeded' && e.param === 'max_output_tokens',
    );
    backend.checkRequest(request({ maxOutputTokens: 100_000, capMaxOutputTokens: true }));
    assert.throws(
      () => backend.checkRequest(request({ messages: [{ role: 'user', content: 'word '.repeat(3000) }] })),
      (e: unknown) => e instanceof RequestRefusedError && e.code === 'context_length_exceeded' && e.param === 'input',
    );
    const capped = new LlamaBackend({ models: [{ source: testModelPath() }], contextSize: 1024 });
    try {
      await capped.load('tiny-test');
      assert.equal(capped.listModels()[0]!.contextLength, 1024);
      capped.checkRequest(request({ messages: [{ role: 'user', content: 'word '.repeat(100) }] }));
      assert.throws(() => capped.checkRequest(request({ messages: [{ role: 'user', content: 'word '.repeat(300) }] })), RequestRefusedError);
    } finally {
      await capped.dispose();
    }
  });

  it('the same seed at temperature 1 gives the same text, with top_k, min_p and penalties too; penalties change it', async () => {
    const gen = async (over: Partial<GenerateRequest>) => {
      const { run, onText } = collector();
      await backend.generate(request({ temperature: 1, maxOutputTokens: 40, ...over }), { signal: never(), onText });
      return run.text;
    };
    const sampling = { seed: 42, topK: 20, minP: 0.01, repeatPenalty: 1.1, frequencyPenalty: 0.5, presencePenalty: 0.5 };
    assert.equal(await gen(sampling), await gen(sampling));
    assert.equal(await gen({ seed: 42 }), await gen({ seed: 42 }));
    const texts = new Set<string>();
    for (const seed of [1, 2, 3]) texts.add(await gen({ seed }));
    assert.ok(texts.size > 1, 'seeds make no difference');
    let changed = false;
    for (const seed of [5, 6, 7]) {
      if ((await gen({ seed, frequencyPenalty: 2, presencePenalty: 2 })) !== (await gen({ seed }))) changed = true;
    }
    assert.ok(changed, 'penalties never changed the text');
  });

  it('without a seed, generations differ even when they start within the same second', async () => {
    // node-llama-cpp alone seeds an unseeded sampler with the current second: back-to-back generations were equal.
    const gen = async () => {
      const { run, onText } = collector();
      await backend.generate(request({ temperature: 1, maxOutputTokens: 40 }), { signal: never(), onText });
      return run.text;
    };
    for (let pair = 0; pair < 3; pair++) {
      const [a, b] = [await gen(), await gen()];
      assert.ok(a.length > 0);
      assert.notEqual(a, b, `pair ${pair}: two unseeded generations gave the same text`);
    }
  });

  it('ends at a stop string without delivering it, and names that string', async () => {
    const { run: ref } = await (async () => {
      const c = collector();
      await backend.generate(request({ temperature: 0, maxOutputTokens: 60 }), { signal: never(), onText: c.onText });
      return c;
    })();
    assert.ok(ref.text.length > 30, ref.text);
    const stop = ref.text.slice(20, 23);
    const expected = ref.text.slice(0, ref.text.indexOf(stop));
    const { run, onText } = collector();
    const r = await backend.generate(request({ temperature: 0, maxOutputTokens: 60, stop: ['\u0001never', stop] }), { signal: never(), onText });
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.stopSequence, stop);
    assert.equal(run.text, expected);
    assert.equal(run.tokens, r.outputTokens);
    assert.ok(r.outputTokens < 60);
    for (const p of run.pieces) assert.ok(!p.text.includes(stop));
    // Stop strings the output never contains: the same text, and no string named.
    const absent = ['\u0001never', `${stop}\u0002`];
    for (const s of absent) assert.ok(!ref.text.includes(s));
    const other = collector();
    const unmatched = await backend.generate(request({ temperature: 0, maxOutputTokens: 60, stop: absent }), {
      signal: never(),
      onText: other.onText,
    });
    assert.equal(other.run.text, ref.text);
    assert.equal(unmatched.stopSequence, undefined);
    assert.ok(!('stopSequence' in unmatched), 'absent, not undefined');
  });

  it('reports log-probabilities: one entry per token, logprob ≤ 0, alternatives sorted, greedy picks the top one', async () => {
    const { run, onText } = collector();
    const r = await backend.generate(request({ temperature: 0, maxOutputTokens: 30, topLogprobs: 3 }), { signal: never(), onText });
    let entries = 0;
    for (const p of run.pieces) {
      assert.ok(p.logprobs, 'every piece carries logprobs');
      assert.equal(p.logprobs.length, p.tokens);
      for (const e of p.logprobs) {
        entries++;
        assert.ok(e.logprob <= 0 && Number.isFinite(e.logprob));
        assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
        assert.equal(e.top_logprobs.length, 3);
        for (let i = 1; i < 3; i++) assert.ok(e.top_logprobs[i - 1]!.logprob >= e.top_logprobs[i]!.logprob);
        assert.equal(e.top_logprobs[0]!.token, e.token);
        assert.equal(e.top_logprobs[0]!.logprob, e.logprob);
        assert.ok(e.logprob < 0, 'random weights are never certain');
      }
    }
    assert.equal(entries, r.outputTokens);
    // Sampled (temperature 1) under a grammar: the chosen token is among the 20 alternatives when it is likely enough.
    const s = collector();
    await backend.generate(request({ temperature: 1, seed: 3, maxOutputTokens: 200, topLogprobs: 20, format: format('nullable') }), {
      signal: never(),
      onText: s.onText,
    });
    for (const p of s.run.pieces) {
      for (const e of p.logprobs ?? []) {
        assert.ok(e.top_logprobs.length >= 1 && e.top_logprobs.length <= 20);
        assert.ok(e.logprob <= e.top_logprobs[0]!.logprob);
        const same = e.top_logprobs.find((t) => t.token === e.token && t.logprob === e.logprob);
        if (e.logprob >= e.top_logprobs[e.top_logprobs.length - 1]!.logprob && e.top_logprobs.length === 20) assert.ok(same, JSON.stringify(e));
      }
    }
    // Without topLogprobs: no logprobs argument.
    const plain = collector();
    await backend.generate(request({ maxOutputTokens: 5, seed: 1 }), { signal: never(), onText: plain.onText });
    assert.ok(plain.run.pieces.every((p) => p.logprobs === undefined));
  });
});
