// Grammars are written off the host's thread and kept within bounds (grammar.ts, grammarCompiler.ts,
// grammarWorker.ts; hardening issue row 1, 5 and 6): every schema at the bounds jsonSchema.ts allows parses in the
// real llama.cpp, so none reaches its parser's failure path (which writes the grammar to stderr); a 100 000-value
// enum converts while the host keeps turning; a conversion past its budget ends the worker and the next one starts
// afresh; the kept grammars are bounded by count and by text.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaGrammar } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { GrammarCache, GrammarLru, parseGrammar } from '../../../../src/backends/llama/grammar';
import { GrammarBudgetError, GrammarCompiler } from '../../../../src/backends/llama/grammarCompiler';
import {
  checkGrammarRepetitions,
  MAX_ITEMS_BOUND,
  MAX_LENGTH_BOUND,
  MAX_PROPERTIES_BOUND,
  translateJsonSchema,
} from '../../../../src/backends/llama/jsonSchema';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { BackendError } from '../../../../src/runtime/backend';

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
const format = (schema: Record<string, unknown>) => ({ type: 'json_schema' as const, name: 'x', strict: true, schema });
const bigEnum = (n: number) => obj({ a: { type: 'string', enum: Array.from({ length: n }, (_, i) => `value_number_${i}_xyz`) } });

describe('grammars off the host thread, within llama.cpp limits', () => {
  let llama: Llama;
  const compiler = new GrammarCompiler();
  before(async () => {
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error, logger: () => {} });
  });
  after(async () => {
    compiler.dispose();
    await llama?.dispose();
  });

  it('every bound at its largest allowed value parses in llama.cpp, and the grammar keeps the bound', async () => {
    const item = obj({
      x: { type: 'string', maxLength: MAX_LENGTH_BOUND },
      y: { type: 'array', items: { type: 'integer' }, maxItems: MAX_ITEMS_BOUND },
    });
    const schemas = [
      obj({ s: { type: 'string', minLength: MAX_LENGTH_BOUND, maxLength: MAX_LENGTH_BOUND } }),
      obj({ a: { type: 'array', items: item, minItems: MAX_ITEMS_BOUND - 24, maxItems: MAX_ITEMS_BOUND } }),
      obj({
        a: { type: 'array', prefixItems: [{ type: 'string' }], items: { type: 'string' }, minItems: MAX_ITEMS_BOUND, maxItems: MAX_ITEMS_BOUND },
      }),
      obj({ o: { type: 'object', additionalProperties: item, minProperties: MAX_PROPERTIES_BOUND - 24, maxProperties: MAX_PROPERTIES_BOUND } }),
    ];
    const cache = new GrammarCache(llama);
    for (const schema of schemas) {
      const text = await compiler.compile(translateJsonSchema(schema));
      checkGrammarRepetitions(text);
      assert.match(
        text,
        new RegExp(`\\{(\\d+,)?(${MAX_LENGTH_BOUND}|${MAX_ITEMS_BOUND - 1}|${MAX_PROPERTIES_BOUND - 1})\\}`),
        'the bound is spelled out',
      );
      await cache.get(format(schema));
    }
  });

  it('a 100 000-value enum converts while the host thread keeps turning', async () => {
    let turns = 0;
    let running = true;
    const spin = () => {
      turns++;
      if (running) setImmediate(spin);
    };
    setImmediate(spin);
    const text = await compiler.compile(translateJsonSchema(bigEnum(100_000)));
    running = false;
    assert.ok(text.includes('value_number_99999_xyz'));
    // Converted on the host's thread, the conversion (~0.9 s) would hold every turn until it ended.
    assert.ok(turns > 20, `the host turned ${turns} times while the worker converted`);
  });

  it('a conversion past its budget ends the worker; the next one runs on a fresh worker', async () => {
    const strict = new GrammarCompiler(1);
    try {
      await assert.rejects(strict.compile(translateJsonSchema(bigEnum(50_000))), GrammarBudgetError);
    } finally {
      strict.dispose();
    }
    const after = await compiler.compile(translateJsonSchema(obj({ b: { type: 'boolean' } })));
    assert.match(after, /root ::=/);
  });

  it('a grammar past the parser limit is refused by the worker, never handed to llama.cpp, and fails as invalid_json_schema', async () => {
    // A schema past the bounds, given to the worker directly (requests are refused before this: jsonSchema.test.ts).
    const raw = obj({ s: { type: 'string', maxLength: MAX_LENGTH_BOUND + 1 } });
    await assert.rejects(compiler.compile(raw), /llama.cpp's parser allows fewer than 2000/);
    await assert.rejects(
      parseGrammar(llama, compiler.compile(raw)),
      (e: unknown) => e instanceof BackendError && e.code === 'invalid_json_schema' && /cannot be enforced/.test(e.message),
    );
    const lru = new GrammarLru();
    await assert.rejects(
      lru.get('k', () => parseGrammar(llama, compiler.compile(raw))),
      BackendError,
    );
    assert.equal(lru.size, 0, 'a failed build is not kept');
  });

  it('kept grammars are bounded by count and by text; the most recently used stay', async () => {
    const fake = (text: string) => Promise.resolve({ grammar: {} as LlamaGrammar, text });
    const lru = new GrammarLru(3, 100);
    for (const k of ['a', 'b', 'c', 'd']) await lru.get(k, () => fake('x'.repeat(10)));
    assert.deepEqual([lru.size, lru.textBytes], [3, 30]);
    let built = 0;
    await lru.get('b', () => (built++, fake('')));
    assert.equal(built, 0, 'b was kept');
    await lru.get('big', () => fake('x'.repeat(90)));
    // c went for the count, d for the text (110 > 100); b, used last, stays.
    assert.deepEqual([lru.size, lru.textBytes], [2, 100], 'text past the bound evicts the least recently used first');
    await lru.get('b', () => (built++, fake('')));
    assert.equal(built, 0, 'b is still kept');
  });
});
