// Both doors while the task store cannot be written (a real fault: RLIMIT_FSIZE 0 on this process, so every
// journal write fails with EFBIG): MCP answers its store error (-32010, data.code store_unwritable, a retry hint),
// LMSP answers 503 problem+json `unavailable` with Retry-After; reads keep working; once writes work again the
// store's probe lets new work in.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { LMSP_PREFIX } from '../../../src/protocols/lmsp/lmspConstants';
import { STORE_UNWRITABLE } from '../../../src/protocols/mcp/errors';
import { fileSizeLimitUnavailable, limitFileSize, requireFault, skipOutsideCi } from '../../fixtures/fileFaults';
import { RawSession, startInProcess, TOKENS, type InProcessServer } from './harness';

const unavailable = fileSizeLimitUnavailable();
let server: InProcessServer;
let raw: RawSession;

before(async () => {
  server = await startInProcess();
  raw = new RawSession(server.mcpUrl, TOKENS.alice);
  await raw.initialize();
});
after(async () => {
  if (!unavailable) limitFileSize(process.pid, 'unlimited');
  await server?.close();
});

const generate = { name: 'generate', arguments: { prompt: 'x', temperature: 0, max_output_tokens: 1 }, task: {} };

function lmspCreate(): Promise<Response> {
  return fetch(`${server.url}${LMSP_PREFIX}/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKENS.alice}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'response', input: { model: 'test-256', input: 'x', max_output_tokens: 1 } }),
  });
}

test('store unwritable: MCP -32010 and LMSP 503, nothing created, both recover after a probe', { skip: skipOutsideCi(unavailable) }, async () => {
  requireFault(unavailable, 'limiting the file size with prlimit');
  const ok = await raw.call('tools/call', generate);
  assert.ok(ok.result?.task, JSON.stringify(ok));
  await raw.call('tasks/result', { taskId: ok.result.task.taskId });
  const before = server.runtime.listTasks({}).tasks.length;

  limitFileSize(process.pid, 0);
  try {
    const mcp = await raw.call('tools/call', generate);
    assert.equal(mcp.error?.code, STORE_UNWRITABLE, JSON.stringify(mcp));
    assert.equal(mcp.error.data.code, 'store_unwritable');
    assert.ok(mcp.error.data.retryAfterMs > 0);
    assert.match(mcp.error.message, /cannot write its task store/);
    assert.doesNotMatch(mcp.error.message, /\//, 'no paths');

    // The first failure marked the store unwritable; this one is refused by the store before any journal append.
    const lmsp = await lmspCreate();
    assert.equal(lmsp.status, 503);
    assert.match(lmsp.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.ok(lmsp.headers.get('retry-after'));
    const problem = (await lmsp.json()) as { code: string; detail: string };
    assert.equal(problem.code, 'unavailable');
    assert.match(problem.detail, /disk full or not writable/);

    const get = await raw.call('tasks/get', { taskId: ok.result.task.taskId });
    assert.ok(get.result, 'reads keep working');
    assert.equal(server.runtime.listTasks({}).tasks.length, before, 'nothing was created');
  } finally {
    limitFileSize(process.pid, 'unlimited');
  }

  const again = await raw.call('tools/call', generate);
  assert.ok(again.result?.task, `MCP creates again: ${JSON.stringify(again)}`);
  assert.equal((await lmspCreate()).status, 202);
});
