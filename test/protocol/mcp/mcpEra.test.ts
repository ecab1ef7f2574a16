// Which era a POST to /mcp belongs to (modern/era.ts): the body decides, and everything that is not a single
// request carrying the 2026-07-28 envelope stays on the unchanged 2025-11-25 path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { classify } from '../../../src/protocols/mcp/modern/era';

const req = (headers: Record<string, string> = {}) => ({ headers }) as unknown as IncomingMessage;
const env = (version = '2026-07-28') => ({
  _meta: { 'io.modelcontextprotocol/protocolVersion': version, 'io.modelcontextprotocol/clientCapabilities': {} },
});

test('the envelope in the body makes a request modern, whatever its headers or session say', () => {
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, method: 'tools/list', params: env() }, false), 'modern');
  assert.equal(
    classify(req({ 'mcp-protocol-version': '2025-11-25' }), { jsonrpc: '2.0', id: 1, method: 'tools/list', params: env() }, true),
    'modern',
  );
  // An envelope naming a version we do not serve is still modern: answered -32022 there, not "initialize first".
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, method: 'server/discover', params: env('2099-01-01') }, false), 'modern');
});

test('legacy: initialize (unless its envelope names a modern version), batches, responses, no envelope', () => {
  const init = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } };
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, method: 'initialize', params: init }, false), 'legacy');
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { ...init, ...env('2025-11-25') } }, false), 'legacy');
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { ...init, ...env() } }, false), 'modern');
  assert.equal(classify(req(), [{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: env() }], false), 'legacy');
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, result: {} }, true), 'legacy');
  assert.equal(classify(req({ 'mcp-protocol-version': '2025-11-25' }), { jsonrpc: '2.0', id: 1, method: 'tools/list' }, true), 'legacy');
  assert.equal(classify(req(), { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { progressToken: 1 } } }, true), 'legacy');
  assert.equal(classify(req(), 'nonsense', false), 'legacy');
  assert.equal(classify(req(), null, false), 'legacy');
});

test('no envelope, no session, but a modern MCP-Protocol-Version header: told what is missing, not "initialize first"', () => {
  assert.equal(classify(req({ 'mcp-protocol-version': '2026-07-28' }), { jsonrpc: '2.0', id: 1, method: 'tools/list' }, false), 'modern-header-only');
  assert.equal(
    classify(req({ 'mcp-protocol-version': '2026-07-28' }), { jsonrpc: '2.0', id: 1, method: 'tools/list' }, true),
    'legacy',
    'with a session it is the legacy transport that answers',
  );
  assert.equal(classify(req({ 'mcp-protocol-version': '2026-07-28' }), { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, false), 'legacy');
});
