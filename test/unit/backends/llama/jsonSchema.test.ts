import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkGrammarRepetitions,
  hardenGrammar,
  MAX_LENGTH_BOUND,
  MAX_SCHEMA_DEPTH,
  translateJsonSchema,
} from '../../../../src/backends/llama/jsonSchema';
import { RequestRefusedError } from '../../../../src/runtime/backend';

const refused = (schema: Record<string, unknown>, param: string, word?: RegExp) =>
  assert.throws(
    () => translateJsonSchema(schema),
    (e: unknown) => {
      assert.ok(e instanceof RequestRefusedError, String(e));
      assert.equal(e.code, 'invalid_json_schema');
      assert.equal(e.param, param);
      if (word) assert.match(e.message, word);
      return true;
    },
  );
const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });

describe('translateJsonSchema', () => {
  it('rewrites what zodTextFormat emits: $schema dropped, anyOf → oneOf, nullable, int bounds, definitions', () => {
    const out = translateJsonSchema({
      $schema: 'http://json-schema.org/draft-07/schema#',
      ...obj({
        name: { type: 'string', description: 'who' },
        age: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
        tag: { anyOf: [{ type: 'string', enum: ['a', 'b'] }, { type: 'null' }] },
        when: { type: ['string', 'null'], format: 'date' },
        items: { type: 'array', items: { $ref: '#/definitions/item' }, minItems: 1, maxItems: 3 },
      }),
      definitions: { item: obj({ id: { type: 'number' } }) },
    });
    assert.deepEqual(out, {
      type: 'object',
      additionalProperties: false,
      properties: {
        name: { description: 'who', type: 'string' },
        age: { type: 'integer' },
        tag: { oneOf: [{ enum: ['a', 'b'] }, { type: 'null' }] },
        when: { oneOf: [{ type: 'string', format: 'date' }, { type: 'null' }] },
        items: { type: 'array', items: { $ref: '#/$defs/item' }, minItems: 1, maxItems: 3 },
      },
      $defs: { item: { type: 'object', properties: { id: { type: 'number' } }, additionalProperties: false } },
    });
  });

  it('keeps root recursion ($ref "#") through a hoisted definition', () => {
    const out = translateJsonSchema(obj({ kids: { type: 'array', items: { $ref: '#' }, maxItems: 2 } }));
    assert.equal(out.$ref, '#/$defs/__root');
    assert.deepEqual((out.$defs as Record<string, unknown>).__root, {
      type: 'object',
      additionalProperties: false,
      properties: { kids: { type: 'array', items: { $ref: '#/$defs/__root' }, maxItems: 2 } },
    });
  });

  it('a free-form object keeps its value schema; json_object-like objects stay open', () => {
    assert.deepEqual(translateJsonSchema({ type: 'object', additionalProperties: { type: 'boolean' }, maxProperties: 3 }), {
      type: 'object',
      additionalProperties: { type: 'boolean' },
      maxProperties: 3,
    });
  });

  it('refuses every keyword it cannot enforce, naming the keyword and where', () => {
    const p = 'text.format.schema';
    refused(obj({ age: { type: 'integer', minimum: 0 } }), `${p}.properties.age.minimum`, /minimum/);
    refused(obj({ n: { type: 'number', maximum: 3 } }), `${p}.properties.n.maximum`, /maximum/);
    refused(obj({ n: { type: 'number', multipleOf: 2 } }), `${p}.properties.n.multipleOf`);
    refused(obj({ n: { type: 'number', exclusiveMinimum: 2 } }), `${p}.properties.n.exclusiveMinimum`);
    refused(obj({ s: { type: 'string', pattern: '^a' } }), `${p}.properties.s.pattern`, /pattern/);
    refused(obj({ s: { type: 'string', format: 'email' } }), `${p}.properties.s.format`, /email/);
    refused(obj({ s: { type: 'string', format: 'date-time', pattern: 'x' } }), `${p}.properties.s.pattern`);
    refused(obj({ a: { allOf: [{ type: 'string' }] } }), `${p}.properties.a.allOf`, /allOf/);
    refused(obj({ a: { type: 'string', not: { const: 'x' } } }), `${p}.properties.a.not`);
    refused({ ...obj({}), if: { type: 'object' }, then: {} }, `${p}.if`);
    refused(obj({ a: { $ref: 'https://example.com/s.json' } }), `${p}.properties.a.$ref`, /\$ref/);
    refused(obj({ a: { $ref: '#/$defs/missing' } }), `${p}.properties.a.$ref`, /no definition/);
    refused(obj({ a: { anyOf: [{ type: 'string', pattern: 'x' }, { type: 'null' }] } }), `${p}.properties.a.anyOf[0].pattern`);
    refused(obj({ a: { type: 'array', items: { type: 'string' }, uniqueItems: true } }), `${p}.properties.a.uniqueItems`);
    refused(obj({ a: { type: 'array', items: { type: 'string' }, contains: { const: 'x' } } }), `${p}.properties.a.contains`);
    refused(obj({ a: {} }), `${p}.properties.a`, /type/);
    refused(obj({ a: true }), `${p}.properties.a`);
    refused(obj({ a: { type: 'string', enum: ['x', 1] } }), `${p}.properties.a.enum[1]`);
    refused(obj({ a: { enum: [{ x: 1 }] } }), `${p}.properties.a.enum[0]`);
    refused({ type: 'object', properties: { a: { type: 'string' } }, required: ['a', 'b'] }, `${p}.required[1]`, /"b"/);
    refused({ type: 'object', properties: { a: { type: 'string' } }, minProperties: 2 }, `${p}.minProperties`);
    refused(obj({ 'odd key': { type: 'string', maxLength: 2, minLength: 3 } }), `${p}.properties["odd key"].minLength`);
    refused({ anyOf: [obj({}), { type: 'null' }] }, `${p}.type`, /root/);
    refused({ type: 'string' }, `${p}.type`, /root/);
    refused(obj({ a: { type: 'string', nullable: true } }), `${p}.properties.a.nullable`);
    refused({ ...obj({ a: { $ref: '#/$defs/x' } }), $defs: { x: { type: 'string', pattern: 'y' } } }, `${p}.$defs.x.pattern`);
  });
});

describe('hardenGrammar', () => {
  it('narrows integers, exponents and dates; refuses a grammar of another shape', () => {
    const g = [
      'root ::= integer-number-rule',
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
      'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
      'string-format-date-rule ::= "\\"" [0-9]{4} "-" ("0" [1-9] | "1" [012]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) "\\""',
    ].join('\n');
    const h = hardenGrammar(g).split('\n');
    assert.equal(h[0], 'root ::= integer-number-rule');
    assert.ok(!h[1]!.includes('eE'));
    assert.ok(h[2]!.endsWith('([eE] [-+]? [0-9]{1,2})?'));
    assert.ok(h[3]!.includes('"02" "-"') && h[3]!.includes('"2" [0-8]'));
    assert.throws(() => hardenGrammar('fractional-number-rule ::= [0-9]+'));
  });
});

describe('schemas the grammar could only fail on are refused at create, the param named', () => {
  const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, ...extra });
  it('control characters and lone surrogates in property names and values', () => {
    refused(obj({ 'a\u0000b': { type: 'string' } }), 'text.format.schema.properties["a\\u0000b"]', /control character/);
    refused(obj({ tab: { type: 'string', enum: ['ok', 'x\u0007y'] } }), 'text.format.schema.properties.tab.enum[1]', /control character/);
    refused(obj({ s: { const: 'half \ud800' } }), 'text.format.schema.properties.s.const', /surrogate/);
    // A whole pair (an emoji) is text like any other.
    assert.doesNotThrow(() => translateJsonSchema(obj({ 'é😀': { type: 'string', enum: ['😀'] } })));
  });
  it("length, item and property bounds past llama.cpp's grammar parser (fewer than 2000 repetitions)", () => {
    refused(obj({ s: { type: 'string', maxLength: 100_000 } }), 'text.format.schema.properties.s.maxLength', /above 1999/);
    // 2000 exactly: llama.cpp fails a minimum and silently drops a maximum.
    refused(obj({ s: { type: 'string', minLength: 2000 } }), 'text.format.schema.properties.s.minLength', /above 1999/);
    refused(obj({ a: { type: 'array', items: { type: 'integer' }, minItems: 5000 } }), 'text.format.schema.properties.a.minItems', /above 1024/);
    refused(
      obj({ o: { type: 'object', additionalProperties: { type: 'string' }, minProperties: 5000 } }),
      'text.format.schema.properties.o.minProperties',
      /above 1024/,
    );
    assert.doesNotThrow(() => translateJsonSchema(obj({ s: { type: 'string', maxLength: MAX_LENGTH_BOUND } })));
  });
  it('nesting deeper than MAX_SCHEMA_DEPTH is refused, not a stack overflow', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 5000; i++) deep = { type: 'array', items: deep };
    assert.throws(
      () => translateJsonSchema(obj({ a: deep })),
      (e: unknown) => e instanceof RequestRefusedError && e.code === 'invalid_json_schema' && /nested deeper than 64/.test(e.message),
    );
    let ok: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < MAX_SCHEMA_DEPTH - 2; i++) ok = { type: 'array', items: ok };
    assert.doesNotThrow(() => translateJsonSchema(obj({ a: ok })));
  });
  it('checkGrammarRepetitions: a repetition of 2000 or more outside literals and classes', () => {
    assert.throws(() => checkGrammarRepetitions('root ::= [a-z]{0,2000}'), /\{0,2000\} times/);
    assert.throws(() => checkGrammarRepetitions('root ::= "x" ( a ){2500,}'), /fewer than 2000/);
    checkGrammarRepetitions('root ::= [a-z]{0,1999} "{5000}" [{}0-9] # {9999}\nr ::= "\\"{3000}"');
  });
  it('$ref cycles that read nothing before recursing; recursion through an object or array stays allowed', () => {
    refused({ $defs: { A: { $ref: '#/$defs/A' } }, ...obj({ a: { $ref: '#/$defs/A' } }) }, 'text.format.schema.$defs.A', /cycle/);
    refused(
      { $defs: { A: { anyOf: [{ $ref: '#/$defs/B' }, { type: 'null' }] }, B: { $ref: '#/$defs/A' } }, ...obj({ a: { $ref: '#/$defs/A' } }) },
      'text.format.schema.$defs.A',
      /cycle/,
    );
    const tree = {
      $defs: { node: obj({ children: { type: 'array', items: { $ref: '#/$defs/node' } } }) },
      ...obj({ root: { $ref: '#/$defs/node' } }),
    };
    assert.doesNotThrow(() => translateJsonSchema(tree));
  });
});
