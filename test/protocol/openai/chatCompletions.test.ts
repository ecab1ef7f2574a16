// POST /lmsp/v1/chat/completions against the real `serve` process and the tiny model, with two independent
// unmodified clients: the `openai` npm SDK (create streamed and not, the stream helper's accumulator, models.list,
// typed errors) and the AI SDK's OpenAI-compatible provider (generateText / streamText). Each completion is a task:
// its id names the task, which /tasks shows with the same text. Bad input is a 400 in OpenAI's error shape and makes
// no task.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { until } from '../../support/wait';
import { call, openAiServer } from '../lmsp/harness';

/** The task a chat completion id names (chatcmpl-abc… ↔ task_abc…). */
const taskIdOf = (id: string) => `task_${id.slice('chatcmpl-'.length)}`;

async function storedText(ctx: ReturnType<typeof openAiServer>, id: string): Promise<{ task: any; text: string }> {
  const r = await call(ctx.server, 'GET', `/tasks/${taskIdOf(id)}`);
  assert.equal(r.status, 200, r.text);
  const message = r.json.response.output.find((o: any) => o.type === 'message');
  return { task: r.json, text: message.content.map((c: any) => c.text).join('') };
}

async function taskCount(ctx: ReturnType<typeof openAiServer>): Promise<number> {
  return (await call(ctx.server, 'GET', '/tasks?limit=100')).json.data.length;
}

describe('chat completions with the openai npm client', () => {
  const ctx = openAiServer();

  it('models.list answers OpenAI list shape at the same base URL', async () => {
    const page = await ctx.client.models.list();
    const model = page.data.find((m) => m.id === ctx.server.model)!;
    assert.ok(model);
    assert.equal(model.object, 'model');
    assert.equal(typeof model.created, 'number');
    assert.equal(typeof model.owned_by, 'string');
  });

  it('create (not streamed): text, usage, finish_reason, and a task /tasks shows with the same text', async () => {
    const c = await ctx.client.chat.completions.create({
      model: ctx.server.model,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
      max_tokens: 8,
    });
    assert.match(c.id, /^chatcmpl-/);
    assert.equal(c.object, 'chat.completion');
    assert.equal(c.model, ctx.server.model);
    assert.equal(c.choices.length, 1);
    const choice = c.choices[0];
    assert.equal(choice.message.role, 'assistant');
    assert.ok(typeof choice.message.content === 'string' && choice.message.content.length > 0);
    assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
    assert.ok(c.usage!.prompt_tokens > 0);
    assert.ok(c.usage!.completion_tokens > 0 && c.usage!.completion_tokens <= 8);
    assert.equal(c.usage!.total_tokens, c.usage!.prompt_tokens + c.usage!.completion_tokens);
    const { task, text } = await storedText(ctx, c.id);
    assert.equal(task.status, 'succeeded');
    assert.equal(task.task_runtime.origin, 'lmsp');
    assert.equal(text, choice.message.content);
    assert.equal(task.response.usage.output_tokens, c.usage!.completion_tokens);
  });

  it('create (stream, include_usage): role first, deltas, finish chunk, usage chunk with empty choices', async () => {
    const stream = await ctx.client.chat.completions.create({
      model: ctx.server.model,
      messages: [{ role: 'user', content: 'Stream please' }],
      max_completion_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length >= 3);
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
    assert.equal(finishes.length, 1);
    assert.ok(['stop', 'length'].includes(finishes[0].choices[0].finish_reason!));
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.ok(last.usage!.completion_tokens > 0 && last.usage!.completion_tokens <= 10);
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
    const stored = await storedText(ctx, chunks[0].id);
    assert.equal(stored.text, text);
    assert.equal(stored.task.response.usage.output_tokens, last.usage!.completion_tokens);
  });

  it('the SDK stream helper accumulates a valid final completion', async () => {
    const runner = ctx.client.chat.completions.stream({ model: ctx.server.model, messages: [{ role: 'user', content: 'again' }], max_tokens: 6 });
    let deltas = '';
    runner.on('content', (d) => (deltas += d));
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.content, deltas);
    assert.equal((await storedText(ctx, final.id)).text, deltas);
  });

  it('seed and the llama.cpp sampling extras reach the model: the same seed gives the same text', async () => {
    const ask = () =>
      ctx.client.chat.completions.create({
        model: ctx.server.model,
        messages: [{ role: 'user', content: 'Pick words' }],
        max_tokens: 8,
        temperature: 1.5,
        seed: 1234,
        top_k: 40,
        min_p: 0.01,
        repeat_penalty: 1.1,
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
    const [a, b] = [await ask(), await ask()];
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const { task } = await storedText(ctx, a.id);
    assert.equal(task.task_runtime.prompt, 'Pick words');
  });

  it('a completion whose task is cancelled elsewhere ends with 409 task_cancelled (not retried), streamed or not', async () => {
    // Greedy decoding never meets the demo model's end token: the task runs until it is cancelled.
    const long = { model: ctx.server.model, messages: [{ role: 'user' as const, content: 'Write a very long story' }], temperature: 0 };
    const cancelRunning = async () => {
      const task = await until(async () => (await call(ctx.server, 'GET', '/tasks?status=running')).json.data[0], 'the chat task to run');
      assert.equal((await call(ctx.server, 'POST', `/tasks/${task.id}/cancel`)).status, 200);
    };
    const plain = ctx.client.chat.completions.create(long);
    await cancelRunning();
    await assert.rejects(plain, (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError && e.status === 409, String(e));
      assert.equal(e.code, 'task_cancelled');
      assert.equal(e.headers.get('x-should-retry'), 'false');
      return true;
    });
    const stream = await ctx.client.chat.completions.create({ ...long, stream: true });
    let cancelled = false;
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) {
          if (!cancelled && chunk.choices[0]?.delta.content) {
            cancelled = true;
            await cancelRunning();
          }
        }
      })(),
      (e: unknown) => e instanceof OpenAI.APIError && e.code === 'task_cancelled',
    );
    assert.ok(cancelled, 'text streamed before the cancel');
  });

  it('bad input is a 400 in OpenAI error shape, named in chat fields, and makes no task', async () => {
    const before = await taskCount(ctx);
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ n: 2 }, 'n', 'unsupported_capability'],
      [{ max_tokens: 0 }, 'max_tokens', 'invalid_request'],
      [{ temperature: 9 }, 'temperature', 'invalid_request'],
      [{ messages: [] }, 'messages', 'invalid_request'],
      [
        { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] },
        'messages.0.content.0.type',
        'unsupported_capability',
      ],
      [{ stream_options: { include_usage: true } }, 'stream_options', 'invalid_request'],
      [{ response_format: { type: 'json_object' } }, 'response_format', 'invalid_request'],
      [{ logit_bias: { '5': 10 } }, 'logit_bias', 'unsupported_capability'],
      [{ seed: 'x' }, 'seed', 'invalid_request'],
    ];
    for (const [over, param, code] of cases) {
      const body = { model: ctx.server.model, messages: [{ role: 'user', content: 'hi' }], ...over } as any;
      await assert.rejects(
        () => ctx.client.chat.completions.create(body),
        (e: unknown) => {
          assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(over)}: ${String(e)}`);
          assert.equal(e.status, 400);
          assert.equal(e.param, param, JSON.stringify(over));
          assert.equal(e.code, code, JSON.stringify(over));
          assert.equal(e.type, 'invalid_request_error');
          return true;
        },
      );
    }
    // The raw answer: OpenAI's four error members, beside the problem object.
    const raw = await call(ctx.server, 'POST', '/chat/completions', { body: { model: ctx.server.model, messages: 'hi' } });
    assert.equal(raw.status, 400);
    assert.deepEqual(Object.keys(raw.json.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(raw.json.error.param, 'messages');
    await assert.rejects(
      () => ctx.client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && e.param === 'model',
    );
    assert.equal(await taskCount(ctx), before);
  });
});

describe('chat completions with the AI SDK (openai-compatible provider)', () => {
  const ctx = openAiServer();

  it('generateText and streamText', async () => {
    // ESM-only packages, loaded from this CommonJS test with import().
    const { generateText, streamText } = await import('ai');
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
    const provider = createOpenAICompatible({ name: 'task-runtime', baseURL: ctx.server.lmsp, apiKey: ctx.server.tokenA, includeUsage: true });
    const model = provider(ctx.server.model);

    const g = await generateText({ model, prompt: 'Say hello', maxOutputTokens: 8, maxRetries: 0 });
    assert.ok(g.text.length > 0);
    assert.ok(['stop', 'length'].includes(g.finishReason), g.finishReason);
    assert.ok((g.usage.outputTokens ?? 0) > 0 && (g.usage.outputTokens ?? 0) <= 8);
    assert.ok((g.usage.inputTokens ?? 0) > 0);
    assert.match(g.response.id, /^chatcmpl-/);
    assert.equal((await storedText(ctx, g.response.id)).text, g.text);

    const s = streamText({ model, system: 'Be brief.', prompt: 'Stream please', maxOutputTokens: 8, maxRetries: 0 });
    let text = '';
    for await (const piece of s.textStream) text += piece;
    const usage = await s.usage;
    assert.ok((usage.outputTokens ?? 0) > 0 && (usage.outputTokens ?? 0) <= 8);
    assert.ok(['stop', 'length'].includes(await s.finishReason));
    const id = (await s.response).id;
    assert.equal((await storedText(ctx, id)).text, text);
  });
});
