// A background response across a SIGKILL of `serve`, with the unmodified `openai` client: after the restart the
// response is still there and follows the background restart policy (retry: runs again and finishes; fail: failed
// with server_restarted), and a stream resumed with starting_after continues with no gap and no duplicate.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { call, LONG_INPUT, removeDir, startServer, type Server } from '../lmsp/harness';

type StreamEvent = OpenAI.Responses.ResponseStreamEvent;

async function collect(stream: AsyncIterable<StreamEvent>, stop?: (e: StreamEvent, all: StreamEvent[]) => boolean): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const e of stream) {
    out.push(e);
    if (stop?.(e, out)) break;
  }
  return out;
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);
const key = (e: StreamEvent) => `${e.sequence_number}:${e.type}`;
const clientOf = (server: Server) => new OpenAI({ apiKey: server.tokenA, baseURL: server.lmsp, maxRetries: 0 });

/**
 * Starts a background+stream response, reads it until its third text delta, SIGKILLs the server and starts it again
 * on the same data directory. Returns what was seen before the kill and the restarted server.
 */
async function killMidStream(args: string[], input: Record<string, unknown>): Promise<{ server: Server; id: string; before: StreamEvent[] }> {
  const first = await startServer({ args });
  const stream = await clientOf(first).responses.create({
    model: first.model,
    ...input,
    background: true,
    stream: true,
  } as OpenAI.Responses.ResponseCreateParamsStreaming);
  const before = await collect(stream, (_e, all) => all.filter((x) => x.type === 'response.output_text.delta').length === 3);
  await first.kill();
  assert.ok(!before.some((e) => TERMINAL.has(e.type)), 'still running when killed');
  const id = (before[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
  const server = await startServer({ dataDir: first.dataDir, args });
  return { server, id, before };
}

describe('background responses across a SIGKILL of serve', () => {
  it('retry (the default): the response runs again and finishes; the resumed stream has no gap or duplicate', async () => {
    const { server, id, before } = await killMidStream([], { ...LONG_INPUT, max_output_tokens: 1500 });
    try {
      const client = clientOf(server);
      const last = before.at(-1)!.sequence_number;
      const resumed = await collect(await client.responses.retrieve(id, { stream: true, starting_after: last }));
      assert.ok(resumed[0].sequence_number > last);
      assert.ok(['response.completed', 'response.incomplete'].includes(resumed.at(-1)!.type), resumed.at(-1)!.type);
      assert.ok(
        resumed.some((e) => e.type === 'response.created'),
        'the new attempt starts with a fresh response.created',
      );
      const full = await collect(await client.responses.retrieve(id, { stream: true }));
      assert.deepEqual([...before, ...resumed].map(key), full.map(key), 'seen before the kill + resumed = the whole stream');
      const done = await client.responses.retrieve(id);
      assert.ok(['completed', 'incomplete'].includes(done.status!), done.status!);
      assert.equal(done.background, true);
      const lastCreated = full.map((e) => e.type).lastIndexOf('response.created');
      assert.ok(lastCreated > 0, 'two attempts');
      const attempt2 = full.slice(lastCreated);
      const text = attempt2.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
      assert.equal(done.output_text, text, 'the final text is the second attempt');
      const task = (await call(server, 'GET', '/tasks?limit=10')).json.data.find((t: any) => t.response_id === id);
      assert.equal(task.on_restart, 'retry');
      assert.equal(task.task_runtime.attempt, 2);
    } finally {
      await server.stop();
      removeDir(server.dataDir);
    }
  });

  it('--background-restart fail: the response is failed with server_restarted, and its stream ends with response.failed', async () => {
    const { server, id, before } = await killMidStream(['--background-restart', 'fail'], LONG_INPUT);
    try {
      const client = clientOf(server);
      const failed = await client.responses.retrieve(id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'server_restarted');
      const last = before.at(-1)!.sequence_number;
      const resumed = await collect(await client.responses.retrieve(id, { stream: true, starting_after: last }));
      // Text the run wrote after the client left, then the end the restart gave it.
      assert.deepEqual(
        resumed.slice(-2).map((e) => e.type),
        ['error', 'response.failed'],
      );
      assert.ok(resumed.slice(0, -2).every((e) => e.type === 'response.output_text.delta'));
      const full = await collect(await client.responses.retrieve(id, { stream: true }));
      assert.deepEqual([...before, ...resumed].map(key), full.map(key));
      // What was delivered before the kill is kept in the failed response.
      const delivered = before.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
      assert.ok(failed.output_text.startsWith(delivered));
      // Cancel of a finished response answers it unchanged (the SDK adds output_text to retrieve's answer only).
      const { output_text: _added, ...stored } = failed;
      assert.deepEqual(await client.responses.cancel(id), stored);
    } finally {
      await server.stop();
      removeDir(server.dataDir);
    }
  });
});
