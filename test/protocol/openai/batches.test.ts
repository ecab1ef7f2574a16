// The Files and Batch APIs against the real `serve` process and the tiny model, with the unmodified `openai` SDK
// (issue 41 item 2; docs/batches.md): a JSONL file uploaded with `files.create` runs as a batch on chat completions,
// responses and embeddings; each line's answer in the output file equals the same request sent directly (temperature
// 0, seeded); malformed lines and refused bodies land in the error file, line by line, and never fail the batch; bad
// input to the routes is the SDK's typed error naming the param; files and batches are each principal's own; a
// cancelled batch ends with what finished; and a batch survives a SIGKILL of `serve`: after the restart every line is
// answered exactly once (the finished ones as they were, the interrupted ones run again to their end).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { openAiServer, removeDir, startServer, type Server } from '../lmsp/harness';
import { until } from '../../support/wait';

const FINAL = new Set(['completed', 'failed', 'expired', 'cancelled']);

const jsonl = (lines: unknown[]) => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';

async function upload(client: OpenAI, lines: unknown[], name = 'in.jsonl') {
  return client.files.create({ file: await toFile(Buffer.from(jsonl(lines)), name), purpose: 'batch' });
}

async function ended(client: OpenAI, id: string): Promise<OpenAI.Batches.Batch> {
  return until(async () => {
    const b = await client.batches.retrieve(id);
    return FINAL.has(b.status) ? b : undefined;
  }, `batch ${id} to end`);
}

/** The lines of a file, parsed, by custom_id. */
async function linesOf(client: OpenAI, fileId: string | null | undefined): Promise<Map<string, any>> {
  const out = new Map<string, any>();
  if (!fileId) return out;
  const text = await (await client.files.content(fileId)).text();
  for (const l of text.split('\n').filter((x) => x)) {
    const parsed = JSON.parse(l);
    assert.ok(!out.has(parsed.custom_id), `custom_id ${parsed.custom_id} answered once`);
    out.set(parsed.custom_id, parsed);
  }
  return out;
}

const chatBody = (model: string, n: number, maxTokens = 12, prompt = 'say something about the number') => ({
  model,
  messages: [{ role: 'user' as const, content: `${prompt} ${n}` }],
  temperature: 0,
  seed: 7,
  max_tokens: maxTokens,
});

const chatLine = (model: string, n: number, maxTokens?: number, prompt?: string) => ({
  custom_id: `c${n}`,
  method: 'POST',
  url: '/v1/chat/completions',
  body: chatBody(model, n, maxTokens, prompt),
});

/** A prompt the tiny model answers at length (lmsp/harness LONG_INPUT). */
const LONG = 'write a long report';

describe('batches with the openai npm client', () => {
  const ctx = openAiServer();

  it('a chat completions batch: output equals direct calls; malformed lines and refused bodies are per line', async () => {
    const { client, server } = ctx;
    const file = await upload(client, [
      chatLine(server.model, 1),
      '{"custom_id": "broken", "method": "POST"',
      chatLine(server.model, 2),
      { custom_id: 'no-messages', method: 'POST', url: '/v1/chat/completions', body: { model: server.model } },
      { ...chatLine(server.model, 3), custom_id: 'c1' },
      { ...chatLine(server.model, 4), url: '/v1/responses' },
      { ...chatLine(server.model, 5), body: { ...chatBody(server.model, 5), stream: true } },
      chatLine(server.model, 6),
    ]);
    assert.equal(file.purpose, 'batch');
    assert.equal(file.object, 'file');
    assert.deepEqual(await client.files.retrieve(file.id), file);

    const created = await client.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { job: 'nightly' },
    });
    assert.equal(created.object, 'batch');
    assert.deepEqual(created.metadata, { job: 'nightly' });
    const done = await ended(client, created.id);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.request_counts, { total: 8, completed: 3, failed: 5 });
    assert.ok(done.completed_at! >= done.created_at);
    assert.ok(done.usage!.output_tokens > 0 && done.usage!.input_tokens > 0);

    const out = await linesOf(client, done.output_file_id);
    assert.deepEqual([...out.keys()], ['c1', 'c2', 'c6'], 'output lines in input order');
    for (const n of [1, 2, 6]) {
      const line = out.get(`c${n}`);
      assert.equal(line.error, null);
      assert.equal(line.response.status_code, 200);
      assert.match(line.id, /^batch_req_/);
      const direct = await client.chat.completions.create(chatBody(server.model, n));
      assert.equal(line.response.body.object, 'chat.completion');
      assert.equal(line.response.body.choices[0].message.content, direct.choices[0].message.content, `line c${n} = its direct call`);
      const usage = (u: { prompt_tokens: number; completion_tokens: number }) => [u.prompt_tokens, u.completion_tokens];
      assert.deepEqual(usage(line.response.body.usage), usage(direct.usage!));
    }

    const err = await linesOf(client, done.error_file_id);
    assert.equal(err.size, 5, [...err.keys()].join());
    assert.equal(err.get(null as unknown as string)?.error.code, 'invalid_json', 'a line that is not JSON has no custom_id');
    const refused = err.get('no-messages');
    assert.equal(refused.error, null);
    assert.equal(refused.response.status_code, 400);
    assert.equal(refused.response.body.error.param, 'messages');
    assert.equal(err.get('c4').error.code, 'mismatched_url');
    assert.equal(err.get('c5').response.body.error.param, 'stream');
    // The duplicate of c1 is reported under its custom_id, in the error file (c1's answer is the first line's).
    assert.equal(err.get('c1').error.code, 'duplicate_custom_id');
    assert.equal(err.get('c1').error.line, 5);
    const files = await client.files.list();
    const ids = files.data.map((f) => f.id);
    for (const id of [file.id, done.output_file_id!, done.error_file_id!]) assert.ok(ids.includes(id), id);
    assert.equal((await client.files.retrieve(done.output_file_id!)).purpose, 'batch_output');
  });

  it('responses and embeddings batches answer as their routes do', async () => {
    const { client, server } = ctx;
    const respBody = { model: server.model, input: 'tell me about rivers', temperature: 0, max_output_tokens: 10 };
    const rFile = await upload(client, [{ custom_id: 'r1', method: 'POST', url: '/v1/responses', body: respBody }]);
    const rBatch = await ended(
      client,
      (await client.batches.create({ input_file_id: rFile.id, endpoint: '/v1/responses', completion_window: '24h' })).id,
    );
    assert.equal(rBatch.status, 'completed');
    const r1 = (await linesOf(client, rBatch.output_file_id)).get('r1');
    assert.ok(r1, JSON.stringify([...(await linesOf(client, rBatch.error_file_id)).values()]));
    assert.equal(r1.response.status_code, 200);
    assert.equal(r1.response.body.object, 'response');
    const direct = await client.responses.create(respBody);
    assert.equal(r1.response.body.output_text ?? textOf(r1.response.body), direct.output_text);

    const inputs = ['alpha', ['beta', 'gamma']];
    const eFile = await upload(
      client,
      inputs.map((input, i) => ({
        custom_id: `e${i}`,
        method: 'POST',
        url: '/v1/embeddings',
        body: { model: server.model, input, encoding_format: 'float' },
      })),
    );
    const eBatch = await ended(
      client,
      (await client.batches.create({ input_file_id: eFile.id, endpoint: '/v1/embeddings', completion_window: '24h' })).id,
    );
    assert.equal(eBatch.status, 'completed');
    assert.deepEqual(eBatch.request_counts, { total: 2, completed: 2, failed: 0 });
    const eOut = await linesOf(client, eBatch.output_file_id);
    for (const [i, input] of inputs.entries()) {
      const line = eOut.get(`e${i}`);
      const want = await client.embeddings.create({ model: server.model, input, encoding_format: 'float' });
      assert.equal(line.response.body.object, 'list');
      assert.deepEqual(
        line.response.body.data.map((d: { embedding: number[] }) => d.embedding),
        want.data.map((d) => d.embedding),
      );
    }
  });

  it('bad input is the typed error naming the param; files and batches are each principal’s own', async () => {
    const { client, server } = ctx;
    const file = await upload(client, [chatLine(server.model, 1)]);
    const badRequest = async (p: Promise<unknown>, param: string) =>
      assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.param, param, e.message);
        return true;
      });
    await badRequest(client.files.create({ file: await toFile(Buffer.from('{}\n'), 'x.jsonl'), purpose: 'assistants' }), 'purpose');
    await badRequest(client.batches.create({ input_file_id: file.id, endpoint: '/v1/completions' as never, completion_window: '24h' }), 'endpoint');
    await badRequest(
      client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '1h' as never }),
      'completion_window',
    );
    await badRequest(
      client.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        output_expires_after: { anchor: 'created_at', seconds: 3600 },
      }),
      'output_expires_after',
    );
    const empty = await client.files.create({ file: await toFile(Buffer.from('\n\n'), 'empty.jsonl'), purpose: 'batch' });
    await badRequest(client.batches.create({ input_file_id: empty.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), 'input_file_id');
    await assert.rejects(
      client.batches.create({ input_file_id: 'file-nope', endpoint: '/v1/chat/completions', completion_window: '24h' }),
      OpenAI.NotFoundError,
    );
    await assert.rejects(client.batches.retrieve('batch_nope'), OpenAI.NotFoundError);
    await assert.rejects(client.files.retrieve('file-nope'), OpenAI.NotFoundError);

    const bob = new OpenAI({ apiKey: server.tokenB, baseURL: server.lmsp, maxRetries: 0 });
    await assert.rejects(bob.files.retrieve(file.id), OpenAI.NotFoundError);
    await assert.rejects(bob.files.content(file.id), OpenAI.NotFoundError);
    await assert.rejects(
      bob.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      OpenAI.NotFoundError,
    );
    assert.ok(!(await bob.files.list()).data.some((f) => f.id === file.id));
    const anonymous = new OpenAI({ apiKey: 'not-a-token', baseURL: server.lmsp, maxRetries: 0 });
    await assert.rejects(anonymous.files.list(), OpenAI.AuthenticationError);

    const deleted = await client.files.delete(empty.id);
    assert.deepEqual(deleted, { id: empty.id, object: 'file', deleted: true });
    await assert.rejects(client.files.retrieve(empty.id), OpenAI.NotFoundError);
  });

  it('cancel ends the batch with what finished; the rest is in the error file as not run', async () => {
    const { client, server } = ctx;
    // More lines than a batch keeps unfinished (two per slot): some are never started.
    const LINES = 100;
    const file = await upload(
      client,
      Array.from({ length: LINES }, (_, i) => chatLine(server.model, i, 400)),
    );
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await until(async () => (await client.batches.retrieve(batch.id)).status === 'in_progress', 'the batch to start');
    const cancelling = await client.batches.cancel(batch.id);
    assert.ok(['cancelling', 'cancelled'].includes(cancelling.status), cancelling.status);
    const done = await ended(client, batch.id);
    assert.equal(done.status, 'cancelled');
    assert.ok(done.cancelled_at! >= done.cancelling_at!);
    assert.equal(done.request_counts!.total, LINES);
    assert.equal(done.request_counts!.completed + done.request_counts!.failed, LINES);
    const err = await linesOf(client, done.error_file_id);
    const notRun = [...err.values()].filter((l) => l.error?.code === 'batch_cancelled');
    assert.ok(notRun.length > 0, 'lines not run are reported');
    const out = await linesOf(client, done.output_file_id);
    assert.equal(out.size + err.size, LINES, 'every line is in one file');
    const list = await client.batches.list();
    assert.ok(list.data.some((b) => b.id === batch.id && b.status === 'cancelled'));
  });
});

/** A Responses object's text, as the SDK's output_text would read it. */
function textOf(body: { output: Array<{ type: string; content?: Array<{ type: string; text: string }> }> }): string {
  return body.output
    .filter((o) => o.type === 'message')
    .flatMap((o) => o.content ?? [])
    .filter((c) => c.type === 'output_text')
    .map((c) => c.text)
    .join('');
}

describe('a batch across a SIGKILL of serve', () => {
  it('after the restart every line is answered once, each equal to its direct call', async () => {
    // Two short lines first, then long ones: the kill comes with two lines finished and the long ones running.
    const N = 6;
    const lineArgs = (i: number): [number, string | undefined] => (i < 2 ? [16, undefined] : [1500, LONG]);
    let server: Server | undefined = await startServer();
    const dataDir = server.dataDir;
    try {
      let client = new OpenAI({ apiKey: server.tokenA, baseURL: server.lmsp, maxRetries: 0 });
      const model = server.model;
      const file = await upload(
        client,
        Array.from({ length: N }, (_, i) => chatLine(model, i, ...lineArgs(i))),
      );
      const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      const before = await until(async () => {
        const b = await client.batches.retrieve(batch.id);
        assert.ok(!FINAL.has(b.status), `the batch ended before the kill: ${JSON.stringify(b.request_counts)}`);
        return b.request_counts!.completed >= 2 ? b : undefined;
      }, 'two lines done');
      await server.kill();
      server = await startServer({ dataDir });
      client = new OpenAI({ apiKey: server.tokenA, baseURL: server.lmsp, maxRetries: 0 });
      const after = await client.batches.retrieve(batch.id);
      assert.ok(after.request_counts!.completed >= before.request_counts!.completed, 'no finished line is lost');
      const done = await ended(client, batch.id);
      assert.equal(done.status, 'completed');
      assert.deepEqual(done.request_counts, { total: N, completed: N, failed: 0 });
      const out = await linesOf(client, done.output_file_id);
      assert.equal(out.size, N);
      // The short lines equal their direct calls; a long line's text depends on which lines shared its decode
      // batches (llama.cpp's CPU kernels round differently by batch size), so it is checked by its length.
      for (let i = 0; i < N; i++) {
        const body = out.get(`c${i}`).response.body;
        if (i < 2) {
          const direct = await client.chat.completions.create(chatBody(model, i, ...lineArgs(i)));
          assert.equal(body.choices[0].message.content, direct.choices[0].message.content, `line c${i}`);
        } else {
          assert.equal(body.usage.completion_tokens, 1500, `line c${i}`);
          assert.equal(body.choices[0].finish_reason, 'length');
        }
      }
    } finally {
      await server?.stop();
      removeDir(dataDir);
    }
  });
});
