// The chat completions mapping without a server: a chat body → the Responses request it becomes (and refusals named
// in chat's fields), and a task's Responses object / events → chat.completion and chunks. Tool calls are mapped over
// recorded Responses objects and events in the runtime's function-call vocabulary (output items `function_call`,
// `response.function_call_arguments.delta/.done`), so this holds before the runtime generates calls itself.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HttpProblem } from '../../../../src/protocols/http/problem';
import {
  ChatChunkTranslator,
  chatCompletionId,
  chatCompletionOf,
  chatUsage,
  endProblem,
  finishReasonOf,
  taskIdOfChatCompletion,
} from '../../../../src/protocols/openai/chatCompletionsFormat';
import {
  chatParam,
  inChatTerms,
  toResponsesBody,
  validateChatBody,
  chatCompletionSchema,
} from '../../../../src/protocols/openai/chatCompletionsRequest';
import { newTaskRecord } from '../../../../src/runtime/newTask';
import { responseObject } from '../../../../src/runtime/responses';
import type { ResponseRequest, TaskRecord } from '../../../../src/runtime/task';

function refusal(body: unknown): HttpProblem {
  try {
    validateChatBody(body);
  } catch (e) {
    assert.ok(e instanceof HttpProblem, String(e));
    return e;
  }
  assert.fail('accepted');
}

const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe('chat completions request → Responses request', () => {
  it('messages, sampling, llama.cpp extras, logprobs and response_format land where /responses has them', () => {
    const r = validateChatBody({
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'developer', content: [{ type: 'text', text: 'Use json.' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
          name: 'me',
        },
        { role: 'assistant', content: 'earlier' },
        { role: 'user', content: 'now' },
      ],
      max_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      seed: 3,
      stop: ['x'],
      frequency_penalty: 0.1,
      presence_penalty: 0.2,
      top_k: 40,
      min_p: 0.05,
      repeat_penalty: 1.1,
      logprobs: true,
      top_logprobs: 2,
      response_format: { type: 'json_object' },
      stream: true,
      stream_options: { include_usage: true },
      user: 'u',
      n: 1,
      store: false,
      // Clients send null for "unset".
      max_completion_tokens: null,
    });
    assert.equal(r.stream, true);
    assert.equal(r.includeUsage, true);
    assert.deepEqual(r.input, {
      model: 'm',
      input: [
        { role: 'system', content: 'Be brief.' },
        { role: 'developer', content: [{ type: 'input_text', text: 'Use json.' }] },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'a' },
            { type: 'input_text', text: 'b' },
          ],
        },
        { role: 'assistant', content: 'earlier' },
        { role: 'user', content: 'now' },
      ],
      max_output_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      user: 'u',
      include: ['message.output_text.logprobs'],
      top_logprobs: 2,
      task_runtime: { seed: 3, stop: ['x'], frequency_penalty: 0.1, presence_penalty: 0.2, top_k: 40, min_p: 0.05, repeat_penalty: 1.1 },
      text: { format: { type: 'json_object' } },
    } satisfies ResponseRequest);
  });

  it('max_completion_tokens wins over max_tokens; json_schema loses its wrapper', () => {
    const r = validateChatBody({
      ...base,
      max_tokens: 9,
      max_completion_tokens: 4,
      response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object' }, strict: true } },
    });
    assert.equal(r.input.max_output_tokens, 4);
    assert.deepEqual(r.input.text, { format: { type: 'json_schema', name: 'n', schema: { type: 'object' }, strict: true } });
  });

  it('tools, tool_choice and a tool round trip become flat tools and function_call / function_call_output items', () => {
    const chat = chatCompletionSchema.parse({
      model: 'm',
      messages: [
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '12:00' }] },
      ],
      tools: [
        { type: 'function', function: { name: 'get_weather', description: 'd', parameters: { type: 'object' }, strict: true } },
        { type: 'function', function: { name: 'get_time' } },
      ],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    const { body, names } = toResponsesBody(chat);
    assert.deepEqual(body.input, [
      { role: 'user', content: 'weather?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call', call_id: 'call_2', name: 'get_time', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      { type: 'function_call_output', call_id: 'call_2', output: '12:00' },
    ]);
    assert.deepEqual(body.tools, [
      { type: 'function', name: 'get_weather', description: 'd', parameters: { type: 'object' }, strict: true },
      { type: 'function', name: 'get_time' },
    ]);
    assert.deepEqual(body.tool_choice, { type: 'function', name: 'get_weather' });
    assert.equal(body.parallel_tool_calls, false);
    // Params of the translated body point back into the chat body.
    assert.equal(chatParam('input.2', names), 'messages.1.tool_calls.1');
    assert.equal(chatParam('input.4.output', names), 'messages.3');
    assert.equal(chatParam('input.0.content', names), 'messages.0.content');
    assert.equal(chatParam('tools.1.parameters.properties', names), 'tools.1.function.parameters.properties');
    assert.equal(chatParam('tool_choice.name', names), 'tool_choice.function.name');
  });

  it('refusals of the shared validation name the chat field', () => {
    let e = refusal({ ...base, max_tokens: 0 });
    assert.equal(e.status, 400);
    assert.equal(e.extra.param, 'max_tokens');
    assert.match(e.detail, /"max_tokens"/);
    assert.equal(refusal({ ...base, max_completion_tokens: 1.5 }).extra.param, 'max_completion_tokens');
    assert.equal(refusal({ ...base, temperature: 3 }).extra.param, 'temperature');
    assert.equal(refusal({ ...base, seed: 'x' }).extra.param, 'seed');
    assert.equal(refusal({ ...base, top_k: -1 }).extra.param, 'top_k');
    assert.equal(refusal({ ...base, stop: ['a', 'b', 'c', 'd', 'e'] }).extra.param, 'stop');
    assert.equal(refusal({ ...base, logprobs: true, top_logprobs: 21 }).extra.param, 'top_logprobs');
    e = refusal({ ...base, response_format: { type: 'json_object' } });
    assert.equal(e.extra.param, 'response_format');
    assert.equal(e.detail, "'messages' must contain the word 'json' in some form to use 'response_format' of type 'json_object'.");
    assert.equal(
      refusal({ ...base, response_format: { type: 'json_schema', json_schema: { name: 'bad name!', schema: {} } } }).extra.param,
      'response_format.json_schema.name',
    );
    assert.equal(
      refusal({
        model: 'm',
        messages: [
          { role: 'user', content: 'a' },
          { role: 'user', content: 7 },
        ],
      }).extra.param,
      'messages.1.content',
    );
  });

  it('what only chat has is checked in chat terms', () => {
    assert.deepEqual([refusal({ ...base, n: 2 }).code, refusal({ ...base, n: 2 }).extra.param], ['unsupported_capability', 'n']);
    assert.equal(refusal({ ...base, stream_options: { include_usage: true } }).extra.param, 'stream_options');
    assert.equal(refusal({ ...base, top_logprobs: 2 }).extra.param, 'top_logprobs');
    assert.equal(refusal({ ...base, logit_bias: { '1': 5 } }).extra.param, 'logit_bias');
    assert.equal(refusal({ ...base, functions: [] }).extra.param, 'functions');
    assert.equal(refusal({ ...base, messages: [] }).extra.param, 'messages');
    assert.equal(refusal({ ...base, messages: [{ role: 'function', content: 'x', name: 'f' }] }).extra.param, 'messages.0.role');
    const image = refusal({ ...base, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] });
    assert.deepEqual([image.code, image.extra.param], ['unsupported_capability', 'messages.0.content.0.type']);
    assert.equal(refusal({ ...base, bogus: 1 }).extra.param, 'bogus');
    assert.equal(refusal({ ...base, model: '' }).extra.param, 'model');
    // Empty logit_bias and text-only modalities ask for nothing and pass.
    assert.doesNotThrow(() => validateChatBody({ ...base, logit_bias: {}, modalities: ['text'] }));
  });

  it('a refusal at create (the runtime names a Responses param) is renamed the same way', () => {
    const names = { items: ['messages.0'], maxTokens: 'max_tokens' };
    const e = inChatTerms(
      new HttpProblem(400, 'invalid_json_schema', 'bad at "text.format.schema.properties"', { param: 'text.format.schema.properties' }),
      names,
    ) as HttpProblem;
    assert.equal(e.extra.param, 'response_format.json_schema.schema.properties');
    assert.match(e.detail, /"response_format.json_schema.schema.properties"/);
    // A tool call's refusal points at the chat tool call it came from.
    const tools = { items: ['messages.0', 'messages.1.tool_calls.0'], maxTokens: 'max_tokens' };
    const call = inChatTerms(
      new HttpProblem(400, 'invalid_request', 'Invalid value for "input.1.name"', { param: 'input.1.name' }),
      tools,
    ) as HttpProblem;
    assert.equal(call.extra.param, 'messages.1.tool_calls.0');
    const same = new HttpProblem(404, 'model_not_found', 'x', { param: 'model' });
    assert.equal(inChatTerms(same, names), same);
  });
});

function task(input: Partial<ResponseRequest> = {}): TaskRecord {
  return newTaskRecord({
    origin: 'lmsp',
    principal: 'p',
    title: 't',
    input: { model: 'm', input: 'hi', ...input },
    onRestart: 'fail',
    ttlMs: null,
    deadlineAt: null,
    meta: {},
    now: 1_700_000_000_123,
  });
}

const usage = { input_tokens: 5, output_tokens: 3, total_tokens: 8 };

describe('Responses object → chat.completion', () => {
  it('text, usage, finish_reason stop / length, an id that names the task', () => {
    const t = task();
    t.status = 'succeeded';
    t.response = responseObject(t, { status: 'completed', text: 'Hello', messageId: 'msg_1', usage });
    const c = chatCompletionOf(t);
    assert.equal(c.id, chatCompletionId(t.id));
    assert.equal(taskIdOfChatCompletion(c.id as string), t.id);
    assert.match(c.id as string, /^chatcmpl-/);
    assert.deepEqual(c, {
      id: c.id,
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
      system_fingerprint: null,
    });
    t.response = responseObject(t, { status: 'incomplete', text: 'Hel', messageId: 'msg_1', usage, incompleteReason: 'max_output_tokens' });
    assert.equal((chatCompletionOf(t).choices as any)[0].finish_reason, 'length');
  });

  it('log-probs when asked for, in chat shape', () => {
    const t = task({ include: ['message.output_text.logprobs'], top_logprobs: 1 });
    const lp = [{ token: 'Hi', logprob: -0.5, bytes: [72, 105], top_logprobs: [{ token: 'Ho', logprob: -1, bytes: [72, 111] }] }];
    t.status = 'succeeded';
    t.response = responseObject(t, { status: 'completed', text: 'Hi', messageId: 'msg_1', usage, logprobs: lp });
    assert.deepEqual((chatCompletionOf(t).choices as any)[0].logprobs, { content: lp, refusal: null });
  });

  it('function_call output items become tool_calls with finish_reason tool_calls and null content', () => {
    const t = task();
    t.status = 'succeeded';
    t.response = {
      ...responseObject(t, { status: 'completed', usage }),
      output: [
        { id: 'fc_1', type: 'function_call', status: 'completed', call_id: 'call_a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { id: 'fc_2', type: 'function_call', status: 'completed', call_id: 'call_b', name: 'get_time', arguments: '{}' },
      ],
    };
    const choice = (chatCompletionOf(t).choices as any)[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.deepEqual(choice.message, {
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [
        { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        { id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{}' } },
      ],
    });
    assert.equal(finishReasonOf({ status: 'incomplete', incomplete_details: { reason: 'content_filter' }, output: [] }), 'content_filter');
  });

  it('a failed task is its problem; a cancelled one a 409 the SDK does not retry', () => {
    const failed = endProblem({
      status: 'failed',
      error: { type: 't', title: 'x', status: 400, detail: 'too long', code: 'context_length_exceeded', param: 'input' },
    });
    assert.deepEqual([failed.status, failed.code, failed.detail], [400, 'context_length_exceeded', 'too long']);
    const cancelled = endProblem({ status: 'cancelled', error: null });
    assert.deepEqual([cancelled.status, cancelled.code, cancelled.extra.headers], [409, 'task_cancelled', { 'x-should-retry': 'false' }]);
  });
});

describe('Responses events → chat.completion.chunk', () => {
  const ctx = { taskId: 'task_abc', createdAt: 1_700_000_000_999, model: 'm', includeUsage: true, logprobs: false };
  const run = (events: Array<[string, Record<string, unknown>]>, over: Partial<typeof ctx> = {}) => {
    const tr = new ChatChunkTranslator({ ...ctx, ...over });
    return events.flatMap(([type, data]) => tr.next(type, data));
  };
  const deltas = (chunks: any[]) => chunks.filter((c) => c.choices?.length).map((c) => c.choices[0].delta);

  it('text: role first, content pieces, finish chunk, then the usage chunk with empty choices', () => {
    const chunks: any[] = run([
      ['response.created', { response: {} }],
      ['response.in_progress', { response: {} }],
      ['response.output_item.added', { output_index: 0, item: { id: 'msg_1', type: 'message' } }],
      ['response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hel', logprobs: [] }],
      ['response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'lo', logprobs: [] }],
      ['response.output_text.done', { text: 'Hello' }],
      ['response.completed', { response: { status: 'completed', output: [], usage } }],
    ]);
    assert.deepEqual(deltas(chunks), [{ role: 'assistant', content: '' }, { content: 'Hel' }, { content: 'lo' }, {}]);
    for (const c of chunks) {
      assert.equal(c.id, 'chatcmpl-abc');
      assert.equal(c.object, 'chat.completion.chunk');
      assert.equal(c.created, 1_700_000_000);
    }
    assert.equal(chunks[3].choices[0].finish_reason, 'stop');
    assert.equal(chunks[0].usage, null);
    assert.deepEqual(chunks.at(-1), {
      id: 'chatcmpl-abc',
      object: 'chat.completion.chunk',
      created: 1_700_000_000,
      model: 'm',
      system_fingerprint: null,
      choices: [],
      usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
    });
    // Without include_usage: no usage member and no usage chunk.
    const plain = run(
      [['response.incomplete', { response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [], usage } }]],
      { includeUsage: false },
    );
    assert.equal(plain.length, 1);
    assert.equal('usage' in plain[0], false);
    assert.equal((plain[0] as any).choices[0].finish_reason, 'length');
  });

  it('log-probs on text deltas, with bytes', () => {
    const chunks: any[] = run(
      [['response.output_text.delta', { delta: 'é', logprobs: [{ token: 'é', logprob: -0.1, top_logprobs: [{ token: 'e', logprob: -2 }] }] }]],
      { logprobs: true },
    );
    assert.deepEqual(chunks[0].choices[0].logprobs, {
      content: [{ token: 'é', logprob: -0.1, bytes: [195, 169], top_logprobs: [{ token: 'e', logprob: -2, bytes: [101] }] }],
      refusal: null,
    });
  });

  it('function calls: id, type and name on the first delta of each index, argument pieces after, finish tool_calls', () => {
    const call = (i: number, id: string, name: string, args = '') => ({
      output_index: i,
      item: { id, type: 'function_call', status: 'in_progress', call_id: `call_${id}`, name, arguments: args },
    });
    const chunks: any[] = run([
      ['response.created', { response: {} }],
      ['response.output_item.added', call(0, 'fc_1', 'get_weather')],
      ['response.function_call_arguments.delta', { output_index: 0, item_id: 'fc_1', delta: '{"city":' }],
      ['response.function_call_arguments.delta', { output_index: 0, item_id: 'fc_1', delta: '"Oslo"}' }],
      ['response.function_call_arguments.done', { output_index: 0, item_id: 'fc_1', arguments: '{"city":"Oslo"}' }],
      ['response.output_item.done', call(0, 'fc_1', 'get_weather', '{"city":"Oslo"}')],
      // A second call whose arguments come only with its done events (no deltas), found by item_id alone.
      ['response.output_item.added', call(1, 'fc_2', 'get_time')],
      ['response.function_call_arguments.done', { item_id: 'fc_2', arguments: '{}' }],
      ['response.output_item.done', call(1, 'fc_2', 'get_time', '{}')],
      ['response.completed', { response: { status: 'completed', output: [], usage } }],
    ]);
    assert.deepEqual(deltas(chunks), [
      { role: 'assistant', content: '' },
      { tool_calls: [{ index: 0, id: 'call_fc_1', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] },
      { tool_calls: [{ index: 1, id: 'call_fc_2', type: 'function', function: { name: 'get_time', arguments: '' } }] },
      { tool_calls: [{ index: 1, function: { arguments: '{}' } }] },
      {},
    ]);
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'tool_calls');
  });

  it('failed and cancelled responses end with an error chunk in OpenAI shape', () => {
    const failed = run([
      ['error', { code: 'context_length_exceeded', message: 'too long', param: null }],
      ['response.failed', { response: { status: 'failed' } }],
    ]);
    assert.deepEqual(failed, [{ error: { message: 'too long', type: 'invalid_request_error', param: null, code: 'context_length_exceeded' } }]);
    const cancelled: any[] = run([['response.cancelled', { response: { status: 'cancelled' } }]]);
    assert.equal(cancelled[0].error.code, 'task_cancelled');
  });
});

describe('chat usage', () => {
  it("maps speculative decoding's drafts to Predicted Outputs' accepted and rejected prediction tokens", () => {
    const usage = { input_tokens: 10, output_tokens: 40, total_tokens: 50, task_runtime: { speculative: { drafted: 30, accepted: 24 } } };
    assert.deepEqual(chatUsage(usage), {
      prompt_tokens: 10,
      completion_tokens: 40,
      total_tokens: 50,
      completion_tokens_details: { accepted_prediction_tokens: 24, rejected_prediction_tokens: 6 },
    });
    assert.equal(chatUsage({ input_tokens: 1, output_tokens: 2, total_tokens: 3 })!.completion_tokens_details, undefined);
  });
});
