// One refusal, the same words and wait through every door: LMSP's problem (Retry-After, seconds) and MCP's JSON-RPC
// error (data.retryAfterMs) are rendered from the same row of shared/refusals.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fromRuntimeError } from '../../../../src/protocols/lmsp/problems';
import { toMcpError } from '../../../../src/protocols/mcp/errors';
import { RuntimeError } from '../../../../src/runtime/errors';

const limit = { name: 'max_unfinished_tasks', max: 2, current: 2, unit: 'tasks' as const };

test('a per-principal cap: LMSP Retry-After and MCP retryAfterMs say the same wait; stored bytes say none', () => {
  const e = new RuntimeError('limit_exceeded', 'too many', undefined, limit);
  const lmsp = fromRuntimeError(e);
  const mcp = toMcpError(e).data as { retryAfterMs?: number };
  assert.ok(Number(lmsp.extra.headers?.['Retry-After']) > 0);
  assert.equal(Number(lmsp.extra.headers?.['Retry-After']) * 1000, mcp.retryAfterMs);
  const bytes = new RuntimeError('limit_exceeded', 'full', undefined, { ...limit, unit: 'bytes' });
  assert.equal(fromRuntimeError(bytes).extra.headers?.['Retry-After'], undefined);
  assert.equal((toMcpError(bytes).data as { retryAfterMs?: number }).retryAfterMs, undefined);
});

test('an unwritable store: the same text and wait through both doors', () => {
  const e = new RuntimeError('store_unwritable', 'ENOSPC at /home/alice/store');
  const lmsp = fromRuntimeError(e);
  const mcp = toMcpError(e);
  assert.ok(mcp.message.includes(lmsp.detail), `${mcp.message} / ${lmsp.detail}`);
  assert.doesNotMatch(lmsp.detail, /alice/);
  assert.equal(Number(lmsp.extra.headers?.['Retry-After']) * 1000, (mcp.data as { retryAfterMs: number }).retryAfterMs);
});
