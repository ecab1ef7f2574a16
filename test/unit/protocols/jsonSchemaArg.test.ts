// The size bounds of a client's JSON Schema, checked before it is stored (jsonSchemaArg.ts): depth, members, and the
// characters of its names and strings (a 2 MB enum within the member cap held the event loop to store and echo).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonSchemaArg, SCHEMA_LIMITS } from '../../../src/protocols/jsonSchemaArg';

const enumOf = (n: number, len: number) => ({
  type: 'object',
  properties: { a: { type: 'string', enum: Array.from({ length: n }, (_, i) => `${i}`.padEnd(len, 'v')) } },
});

test('a schema within every bound passes; past the text bound it is refused by name', () => {
  assert.ok(jsonSchemaArg.safeParse(enumOf(1000, 200)).success);
  const big = jsonSchemaArg.safeParse(enumOf(9000, 200));
  assert.equal(big.success, false);
  assert.match(JSON.stringify(big.error?.issues), new RegExp(`exceed ${SCHEMA_LIMITS.maxTextChars} characters`));
  // Property names count too.
  const names = {
    type: 'object',
    properties: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`${i}`.padEnd(1000, 'k'), { type: 'string' }])),
  };
  assert.equal(jsonSchemaArg.safeParse(names).success, false);
  assert.match(JSON.stringify(jsonSchemaArg.safeParse({ a: Array.from({ length: 10_001 }, () => 1) }).error?.issues), /more than 10000 members/);
});
