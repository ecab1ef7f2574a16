// OpenAI background mode and previous_response_id on /lmsp/v1/responses, driven by the unmodified `openai` client:
// create (queued at once), retrieve, cancel (idempotent), stream resume from a sequence number, delete, input items,
// and conversation chains (principal-bound, expanded at create so a deleted ancestor breaks nothing).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { call, LONG_INPUT, openAiServer } from '../lmsp/harness';

type StreamEvent = OpenAI.Responses.ResponseStreamEvent;

/** Reads a Responses stream to its end, or until `stop` says so (which closes the connection). */
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

describe('OpenAI background mode on /responses (openai npm client)', () => {
  // One generation at a time: a queued response stays queued behind a running one (the default runs several).
  const ctx = openAiServer(['--concurrency', '1']);

  /** Follows a response's stored events from the start (GET ?stream=true) to its terminal one. */
  const replay = async (id: string, startingAfter?: number) =>
    collect(
      await ctx.client.responses.retrieve(id, startingAfter === undefined ? { stream: true } : { stream: true, starting_after: startingAfter }),
    );

  it('create({background: true}) answers queued at once; retrieve reaches a terminal status; the task is on /tasks', async () => {
    const r = await ctx.client.responses.create({ model: ctx.server.model, input: 'Say hello', max_output_tokens: 8, background: true });
    assert.match(r.id, /^resp_/);
    assert.equal(r.status, 'queued');
    assert.equal(r.background, true);
    assert.equal((r as unknown as { store: boolean }).store, true);
    assert.equal(r.previous_response_id, null);
    assert.deepEqual(r.output, []);
    assert.equal(r.usage, null);
    assert.equal(r.completed_at, null);
    const events = await replay(r.id);
    assert.equal(events[0].type, 'response.created');
    assert.ok(TERMINAL.has(events.at(-1)!.type));
    const done = await ctx.client.responses.retrieve(r.id);
    assert.ok(['completed', 'incomplete'].includes(done.status!), done.status!);
    assert.equal(done.background, true);
    assert.ok(done.output_text.length > 0);
    assert.ok(done.completed_at! >= done.created_at);
    // The same runtime task: listed on /tasks with the background restart policy (serve's default).
    const tasks = await call(ctx.server, 'GET', '/tasks?limit=100');
    const task = tasks.json.data.find((t: any) => t.response_id === r.id);
    assert.ok(task, 'the background response is a task');
    assert.equal(task.on_restart, 'retry');
    assert.equal(task.status, 'succeeded');
    // A synchronous response echoes background: false.
    const sync = await ctx.client.responses.create({ model: ctx.server.model, input: 'x', max_output_tokens: 2 });
    assert.equal(sync.background, false);
  });

  it('background with stream: true streams at once with sequence numbers; retrieve(stream, starting_after) resumes with no gap or duplicate', async () => {
    const stream = await ctx.client.responses.create({
      model: ctx.server.model,
      input: 'Tell a story',
      max_output_tokens: 40,
      temperature: 0,
      background: true,
      stream: true,
    });
    // Leave after the first text delta (the run goes on: a background response does not belong to its connection).
    // The first piece is written at once, the other 39 tokens after it; how many deltas they make depends on the
    // machine's speed (under load 40 tokens came as two), so only the first is sure to come before the end.
    const before = await collect(stream, (e) => e.type === 'response.output_text.delta');
    assert.equal(before[0].type, 'response.created');
    assert.equal((before[0] as OpenAI.Responses.ResponseCreatedEvent).response.background, true);
    assert.ok(before.every((e) => Number.isInteger(e.sequence_number)));
    const id = (before[0] as OpenAI.Responses.ResponseCreatedEvent).response.id;
    const last = before.at(-1)!.sequence_number;
    const resumed = await replay(id, last);
    assert.ok(resumed.length > 0 && resumed[0].sequence_number > last, 'resumed after the cursor');
    assert.ok(TERMINAL.has(resumed.at(-1)!.type));
    const full = await replay(id);
    assert.deepEqual([...before, ...resumed].map(key), full.map(key), 'what was seen, then the resumed tail, is the whole stream');
    for (let i = 1; i < full.length; i++) assert.ok(full[i].sequence_number > full[i - 1].sequence_number, 'increasing sequence numbers');
    const text = full.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    assert.equal((await ctx.client.responses.retrieve(id)).output_text, text);
    // Resuming after the last event: nothing more, and the stream ends.
    assert.deepEqual(await replay(id, full.at(-1)!.sequence_number), []);
  });

  it('cancel stops a running background response; cancelling again answers the same object; a synchronous one cannot be', async () => {
    // The tiny model writes its ~2 000 tokens in about a second: on a loaded machine the response may end before the
    // cancel lands (it then answers `incomplete`, which is right). Start another then, a few times at most.
    let r: OpenAI.Responses.Response | undefined;
    let cancelled: OpenAI.Responses.Response | undefined;
    for (let attempt = 0; attempt < 4 && cancelled?.status !== 'cancelled'; attempt++) {
      r = await ctx.client.responses.create({ model: ctx.server.model, ...LONG_INPUT, background: true });
      await collect(await ctx.client.responses.retrieve(r.id, { stream: true }), (e) => e.type === 'response.output_text.delta');
      cancelled = await ctx.client.responses.cancel(r.id);
      assert.equal(cancelled.id, r.id);
      if (cancelled.status !== 'cancelled') assert.equal(cancelled.status, 'incomplete', 'ended by itself before the cancel');
    }
    r = r!;
    assert.equal(cancelled!.status, 'cancelled');
    const again = await ctx.client.responses.cancel(r.id);
    assert.deepEqual(again, cancelled);
    assert.equal((await ctx.client.responses.retrieve(r.id)).status, 'cancelled');
    const events = await replay(r.id);
    assert.equal(events.at(-1)!.type, 'response.cancelled');
    // Cancelling a queued one is immediate too (one at a time on this server: it waits behind a running one). The
    // running one may end by itself first on a loaded machine (as above): then try again, a few times at most.
    let runningCancelled = false;
    for (let attempt = 0; attempt < 4 && !runningCancelled; attempt++) {
      const running = await ctx.client.responses.create({ model: ctx.server.model, ...LONG_INPUT, background: true });
      const queued = await ctx.client.responses.create({ model: ctx.server.model, input: 'later', max_output_tokens: 4, background: true });
      if (queued.status !== 'queued') {
        assert.equal((await ctx.client.responses.retrieve(running.id)).status, 'incomplete', 'nothing ahead of it: the long one ended');
        continue;
      }
      assert.equal((await ctx.client.responses.cancel(queued.id)).status, 'cancelled');
      const stopped = await ctx.client.responses.cancel(running.id);
      runningCancelled = stopped.status === 'cancelled';
      if (!runningCancelled) assert.equal(stopped.status, 'incomplete', 'ended by itself before the cancel');
    }
    assert.ok(runningCancelled, 'the running response was cancelled in one of the attempts');

    const sync = await ctx.client.responses.create({ model: ctx.server.model, input: 'x', max_output_tokens: 2 });
    await assert.rejects(
      () => ctx.client.responses.cancel(sync.id),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /synchronous/.test(e.message),
    );
    await assert.rejects(() => ctx.client.responses.cancel('resp_doesnotexist000'), OpenAI.NotFoundError);
  });

  it('delete removes a finished response (409 while it runs, 404 afterwards)', async () => {
    const running = await ctx.client.responses.create({ model: ctx.server.model, ...LONG_INPUT, background: true });
    await assert.rejects(() => ctx.client.responses.delete(running.id), OpenAI.ConflictError);
    await ctx.client.responses.cancel(running.id);
    await ctx.client.responses.delete(running.id);
    const raw = await call(ctx.server, 'DELETE', '/responses/' + running.id);
    assert.equal(raw.status, 404);
    assert.equal(raw.json.error.code, 'response_not_found');
    await assert.rejects(() => ctx.client.responses.retrieve(running.id), OpenAI.NotFoundError);
    await assert.rejects(() => ctx.client.responses.delete(running.id), OpenAI.NotFoundError);
    const done = await ctx.client.responses.create({ model: ctx.server.model, input: 'x', max_output_tokens: 2 });
    const answer = await call(ctx.server, 'DELETE', '/responses/' + done.id);
    assert.deepEqual(answer.json, { id: done.id, object: 'response', deleted: true });
  });

  it('inputItems.list: OpenAI list shape, newest first by default, pages with after=<id>', async () => {
    const r = await ctx.client.responses.create({
      model: ctx.server.model,
      input: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'one' },
        { role: 'user', content: [{ type: 'input_text', text: 'two' }] },
      ],
      max_output_tokens: 2,
    });
    const page = await ctx.client.responses.inputItems.list(r.id);
    assert.deepEqual(
      page.data.map((i: any) => [i.type, i.role, i.content[0].type, i.content[0].text]),
      [
        ['message', 'user', 'input_text', 'two'],
        ['message', 'user', 'input_text', 'one'],
        ['message', 'developer', 'input_text', 'Be brief.'],
      ],
    );
    const raw = await call(ctx.server, 'GET', `/responses/${r.id}/input_items?limit=2&order=asc`);
    assert.equal(raw.json.object, 'list');
    assert.equal(raw.json.has_more, true);
    assert.equal(raw.json.first_id, raw.json.data[0].id);
    assert.equal(raw.json.last_id, raw.json.data[1].id);
    // The SDK's auto-pagination follows after=<last id> to the end.
    const all: any[] = [];
    for await (const item of ctx.client.responses.inputItems.list(r.id, { order: 'asc', limit: 1 })) all.push(item);
    assert.deepEqual(
      all.map((i) => i.content[0].text),
      ['Be brief.', 'one', 'two'],
    );
    assert.equal(new Set(all.map((i) => i.id)).size, 3, 'every item has its own id');
    assert.deepEqual(
      all.map((i) => i.id),
      [...page.data].reverse().map((i: any) => i.id),
      'ids are stable',
    );
    const bad = await call(ctx.server, 'GET', `/responses/${r.id}/input_items?limit=101`);
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'limit');
  });

  it('previous_response_id builds the input from the stored chain, principal-bound; a deleted ancestor breaks nothing', async () => {
    const first = await ctx.client.responses.create({ model: ctx.server.model, input: 'My name is Ada.', max_output_tokens: 4 });
    const second = await ctx.client.responses.create({
      model: ctx.server.model,
      previous_response_id: first.id,
      input: 'What is my name?',
      max_output_tokens: 4,
    });
    assert.equal(second.previous_response_id, first.id);
    const firstInput = (await ctx.client.responses.inputItems.list(first.id)).data;
    const items = (await ctx.client.responses.inputItems.list(second.id, { order: 'asc' })).data as any[];
    assert.deepEqual(
      items.map((i) => [i.role, i.content[0].text]),
      [
        ['user', 'My name is Ada.'],
        ['assistant', first.output_text],
        ['user', 'What is my name?'],
      ],
    );
    assert.equal(items[0].id, firstInput[0].id, 'an item keeps its id along the chain');
    assert.equal(items[1].id, first.output[0].id, 'the earlier output is the message it was');
    // Background and chained at once; then the chain goes on from it.
    const third = await ctx.client.responses.create({
      model: ctx.server.model,
      previous_response_id: second.id,
      input: 'And again?',
      max_output_tokens: 4,
      background: true,
    });
    assert.equal(third.previous_response_id, second.id);
    await replay(third.id);
    assert.equal((await ctx.client.responses.inputItems.list(third.id)).data.length, 5);

    // Expanded at create: deleting an ancestor leaves the later responses whole.
    await ctx.client.responses.delete(first.id);
    assert.equal((await ctx.client.responses.inputItems.list(third.id)).data.length, 5);
    const notFound = (e: unknown) =>
      e instanceof OpenAI.NotFoundError &&
      e.code === 'previous_response_not_found' &&
      e.param === 'previous_response_id' &&
      /not found/.test(e.message);
    await assert.rejects(() => ctx.client.responses.create({ model: ctx.server.model, previous_response_id: first.id, input: 'x' }), notFound);
    await assert.rejects(
      () => ctx.client.responses.create({ model: ctx.server.model, previous_response_id: 'resp_doesnotexist000', input: 'x' }),
      notFound,
    );
    // Another principal's response does not exist for bob, as a chain start or to read.
    const bob = new OpenAI({ apiKey: ctx.server.tokenB, baseURL: ctx.server.lmsp, maxRetries: 0 });
    await assert.rejects(() => bob.responses.create({ model: ctx.server.model, previous_response_id: second.id, input: 'x' }), notFound);
    await assert.rejects(() => bob.responses.retrieve(second.id), OpenAI.NotFoundError);
    await assert.rejects(() => bob.responses.cancel(third.id), OpenAI.NotFoundError);
    await assert.rejects(() => bob.responses.inputItems.list(second.id), OpenAI.NotFoundError);
    // The /tasks door takes the same field, its param named inside `input`.
    const viaTasks = await call(ctx.server, 'POST', '/tasks', {
      body: { type: 'response', input: { model: ctx.server.model, input: 'x', previous_response_id: 'resp_doesnotexist000' } },
    });
    assert.equal(viaTasks.status, 404);
    assert.equal(viaTasks.json.error.code, 'previous_response_not_found');
    assert.equal(viaTasks.json.error.param, 'input.previous_response_id');
  });

  it('a running previous response cannot be continued yet; background needs store', async () => {
    const running = await ctx.client.responses.create({ model: ctx.server.model, ...LONG_INPUT, background: true });
    await assert.rejects(
      () => ctx.client.responses.create({ model: ctx.server.model, previous_response_id: running.id, input: 'x' }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id',
    );
    await ctx.client.responses.cancel(running.id);
    await assert.rejects(
      () => ctx.client.responses.create({ model: ctx.server.model, input: 'x', background: true, store: false }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'store' && e.code === 'invalid_request',
    );
    const badCursor = await call(ctx.server, 'GET', `/responses/${running.id}?stream=true&starting_after=-1`);
    assert.equal(badCursor.status, 400);
    assert.equal(badCursor.json.error.param, 'starting_after');
  });
});
