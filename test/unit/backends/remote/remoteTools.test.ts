// Function tools and reasoning on remote engines (issue #19 items 2 and 3): the request mapping per engine kind
// (tools, tool_choice, parallel_tool_calls, the history's calls, reasoning_effort — or a refusal naming the field),
// the stream mapping over streams recorded from the real llama.cpp server (remoteRecordedStreams.ts) and over the
// documented shapes of engines we cannot run here (Ollama's delta.reasoning, a whole call in one delta), malformed
// tool-call deltas failing the task with a clear error (never a crash, never the key), and the whole path through the
// runtime to Responses function_call and reasoning items with their stream events.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { applyChatEvent, type ChatStreamState } from '../../../../src/backends/remote/chatStream';
import { ENGINE_KINDS, ENGINE_PROFILES } from '../../../../src/backends/remote/quirks';
import { chatMessages, checkForKind, requestFields, RemoteBackend } from '../../../../src/backends/remote/remoteBackend';
import { BackendError, RequestRefusedError, type GenerateRequest, type OutputChannel } from '../../../../src/runtime/backend';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { sseHead, startFakeEngine, usageChunk, type ChatHandler, type FakeEngine } from '../../../fixtures/fakeEngine';
import { tempDir } from '../../runtime/helpers';
import { LLAMA_SERVER_FORCED_CALL, LLAMA_SERVER_PARALLEL_CALLS, LLAMA_SERVER_REASONING } from './remoteRecordedStreams';

const KEY = 'sk-test-19a0c3e5f7b9d1e3a5c7e9f1b3d5f7a9';
const root = tempDir('tr-remote-tools-');
let dirs = 0;
const engines: FakeEngine[] = [];
const runtimes: TaskRuntime[] = [];
after(async () => {
  for (const r of runtimes) await r.close();
  for (const e of engines) await e.close();
});

const TOOL = {
  name: 'get_weather',
  description: 'Weather',
  parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] } }, required: ['city'], additionalProperties: false },
  strict: true,
};

const base = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({ model: 'x/m', messages: [{ role: 'user', content: 'Hi' }], ...over });

interface Piece {
  text: string;
  channel?: OutputChannel;
}

/** Feeds event data strings through applyChatEvent; returns the pieces and the state (or throws its error). */
function replay(events: readonly string[], st: ChatStreamState = { chunks: 0 }): { pieces: Piece[]; st: ChatStreamState; done: boolean } {
  const pieces: Piece[] = [];
  let done = false;
  for (const data of events) {
    done = applyChatEvent(data, st, (text, _lp, channel) => pieces.push(channel ? { text, channel } : { text }));
    if (done) break;
  }
  return { pieces, st, done };
}

/** The calls a list of pieces makes, by the contract: a call starts with a piece on its channel, arguments follow. */
function callsOf(pieces: Piece[]): Array<{ callId: string; name: string; arguments: string }> {
  const out: Array<{ callId: string; name: string; arguments: string }> = [];
  for (const p of pieces) {
    if (p.channel?.kind !== 'function_call') continue;
    const last = out[out.length - 1];
    if (last && last.callId === p.channel.callId) last.arguments += p.text;
    else out.push({ callId: p.channel.callId, name: p.channel.name, arguments: p.text });
  }
  return out;
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] });
const callDelta = (entry: Record<string, unknown>) => chunk({ tool_calls: [entry] });

describe('request mapping', () => {
  it('tools, a required choice and parallel_tool_calls go as chat/completions takes them', () => {
    const r = base({ tools: [TOOL, { name: 'noop' }], toolChoice: 'required', parallelToolCalls: false });
    const out = requestFields('openai', r);
    assert.deepEqual(out.tools, [
      { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: TOOL.parameters, strict: true } },
      { type: 'function', function: { name: 'noop' } },
    ]);
    assert.equal(out.tool_choice, 'required');
    assert.equal(out.parallel_tool_calls, false);
    // auto is the default with tools: not sent.
    assert.equal(requestFields('vllm', base({ tools: [TOOL], toolChoice: 'auto' })).tool_choice, undefined);
    assert.equal(requestFields('vllm', base({})).tools, undefined);
  });

  it('a named choice: OpenAI\'s object where the engine reads it, the tool alone with "required" on llama.cpp server', () => {
    const r = base({ tools: [TOOL, { name: 'noop' }], toolChoice: { name: 'noop' } });
    const openai = requestFields('openai', r);
    assert.deepEqual(openai.tool_choice, { type: 'function', function: { name: 'noop' } });
    assert.equal((openai.tools as unknown[]).length, 2);
    const llama = requestFields('llama.cpp', r);
    assert.equal(llama.tool_choice, 'required');
    assert.deepEqual(llama.tools, [{ type: 'function', function: { name: 'noop' } }]);
  });

  it('the history: assistant tool_calls (content null when it said nothing) and tool messages with tool_call_id', () => {
    const messages = chatMessages(
      base({
        instructions: 'Use tools.',
        messages: [
          { role: 'user', content: 'Weather in Oslo and Paris?' },
          {
            role: 'assistant',
            content: '',
            toolCalls: [
              { callId: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
              { callId: 'call_2', name: 'get_weather', arguments: '{"city":"Paris"}' },
            ],
          },
          { role: 'tool', content: 'cold', callId: 'call_1' },
          { role: 'tool', content: 'mild', callId: 'call_2' },
          { role: 'assistant', content: 'Let me check.', toolCalls: [{ callId: 'call_3', name: 'noop', arguments: '{}' }] },
          { role: 'developer', content: 'Be brief.' },
        ],
      }),
    );
    assert.deepEqual(messages, [
      { role: 'system', content: 'Use tools.' },
      { role: 'user', content: 'Weather in Oslo and Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: 'tool', content: 'cold', tool_call_id: 'call_1' },
      { role: 'tool', content: 'mild', tool_call_id: 'call_2' },
      { role: 'assistant', content: 'Let me check.', tool_calls: [{ id: 'call_3', type: 'function', function: { name: 'noop', arguments: '{}' } }] },
      { role: 'system', content: 'Be brief.' },
    ]);
  });

  it('reasoning effort goes as reasoning_effort where the kind takes it; elsewhere, or a value it does not take, is refused naming reasoning.effort', () => {
    assert.equal(requestFields('llama.cpp', base({ reasoningEffort: 'low' })).reasoning_effort, 'low');
    assert.equal(requestFields('vllm', base({ reasoningEffort: 'high' })).reasoning_effort, 'high');
    assert.equal(requestFields('ollama', base({ reasoningEffort: 'none' })).reasoning_effort, 'none');
    assert.equal(requestFields('openai', base({ reasoningEffort: 'minimal' })).reasoning_effort, 'minimal');
    const refused = (kind: (typeof ENGINE_KINDS)[number], r: GenerateRequest, param: string, msg: RegExp) =>
      assert.throws(
        () => checkForKind(kind, r),
        (e: unknown) => e instanceof RequestRefusedError && e.code === 'unsupported_capability' && e.param === param && msg.test(e.message),
      );
    refused('lmstudio', base({ reasoningEffort: 'low' }), 'reasoning.effort', /"reasoning.effort" is not supported by engines of kind "lmstudio"/);
    refused('vllm', base({ reasoningEffort: 'minimal' }), 'reasoning.effort', /"minimal".*it takes low, medium, high/);
    // Tool choices an engine kind would ignore are refused, never sent.
    refused('ollama', base({ tools: [TOOL], toolChoice: 'required' }), 'tool_choice', /tool_choice "required"/);
    refused('ollama', base({ tools: [TOOL], toolChoice: { name: 'get_weather' } }), 'tool_choice', /named tool_choice/);
    refused('lmstudio', base({ tools: [TOOL], toolChoice: { name: 'get_weather' } }), 'tool_choice', /named tool_choice/);
    refused(
      'lmstudio',
      base({ tools: [TOOL], toolChoice: 'required' }),
      'tool_choice',
      /tool_choice "required" is not supported by engines of kind "lmstudio"/,
    );
    checkForKind('llama.cpp', base({ tools: [TOOL], toolChoice: { name: 'get_weather' }, parallelToolCalls: false }));
    refused('ollama', base({ tools: [TOOL], parallelToolCalls: false }), 'parallel_tool_calls', /parallel_tool_calls/);
    for (const kind of ENGINE_KINDS) {
      checkForKind(kind, base({ tools: [TOOL] }));
      assert.ok(ENGINE_PROFILES[kind].request.tools, kind);
    }
    assert.equal(requestFields('ollama', base({ tools: [TOOL], parallelToolCalls: true })).parallel_tool_calls, undefined, 'not sent where not read');
  });

  it('on_restart "resume" is refused with tools or a reasoning effort on an engine that resumes; "retry" is taken', () => {
    const b = new RemoteBackend([{ name: 'x', urls: ['http://127.0.0.1:9/v1'], kind: 'llama.cpp' }]);
    for (const r of [base({ tools: [TOOL] }), base({ reasoningEffort: 'low' })]) {
      assert.throws(
        () => b.checkRequest(r, { onRestart: 'resume' }),
        (e: unknown) => e instanceof RequestRefusedError && e.param === 'on_restart' && /use "retry"/.test(e.message),
      );
      b.checkRequest(r, { onRestart: 'retry' });
    }
  });

  it('a resume point inside a call or a thought fails the run (nothing is sent): the engine continues text only', async () => {
    const b = new RemoteBackend([{ name: 'x', urls: ['http://127.0.0.1:9/v1'], kind: 'llama.cpp' }]);
    for (const channel of [{ kind: 'reasoning' as const }, { kind: 'function_call' as const, callId: 'call_1', name: 'f' }]) {
      const resumeFrom = { text: '', outputTokens: 3, segments: [{ channel, text: 'abc' }] };
      await assert.rejects(
        b.generate(base(), { signal: new AbortController().signal, onText: () => assert.fail('no output'), resumeFrom }),
        (e: unknown) => e instanceof BackendError && e.kind === 'failed' && /cannot resume inside a function call or reasoning/.test(e.message),
      );
    }
  });
});

describe('stream mapping over recorded llama.cpp server streams', () => {
  it("a forced call: one function_call piece run with the engine's id and name, arguments the JSON; finish tool_calls is a normal stop", () => {
    const { pieces, st, done } = replay(LLAMA_SERVER_FORCED_CALL);
    assert.ok(done);
    assert.equal(st.finishReason, 'stop');
    assert.ok(
      pieces.every((p) => p.channel?.kind === 'function_call'),
      'no answer text',
    );
    const calls = callsOf(pieces);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assert.equal(calls[0].callId, JSON.parse(LLAMA_SERVER_FORCED_CALL[1]).choices[0].delta.tool_calls[0].id);
    assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Oslo', days: 1 });
  });

  it('parallel calls: each index one call with its own id, in order; pieces never go back to an earlier call', () => {
    const { pieces, st } = replay(LLAMA_SERVER_PARALLEL_CALLS);
    assert.equal(st.finishReason, 'max_output_tokens');
    const calls = callsOf(pieces);
    assert.equal(calls.length, 3);
    assert.equal(new Set(calls.map((c) => c.callId)).size, 3);
    assert.deepEqual(
      calls.map((c) => JSON.parse(c.arguments)),
      [{ city: 'Paris' }, { city: 'Oslo' }, { city: 'Oslo' }],
    );
    // Each callId appears in one contiguous run (the runtime's contract: a piece of another call ends a call).
    const runs = pieces.map((p) => (p.channel as { callId: string }).callId).filter((id, i, a) => i === 0 || a[i - 1] !== id);
    assert.deepEqual(
      runs,
      calls.map((c) => c.callId),
    );
  });

  it('reasoning_content pieces go on the reasoning channel, apart from the answer', () => {
    const { pieces, st } = replay(LLAMA_SERVER_REASONING);
    assert.equal(st.finishReason, 'max_output_tokens');
    assert.ok(pieces.length > 0);
    assert.ok(pieces.every((p) => p.channel?.kind === 'reasoning'));
    assert.equal(pieces.map((p) => p.text).join(''), ') world4;h`');
  });
});

describe("stream mapping over other engines' documented shapes", () => {
  it('Ollama: delta.reasoning, then the answer; a whole call in one delta; an engine without ids gets call_ + random', () => {
    const { pieces, st } = replay([
      chunk({ role: 'assistant', content: '', reasoning: 'Let me think' }),
      chunk({ content: '', reasoning: '.' }),
      chunk({ content: 'Checking.' }),
      chunk({
        content: '',
        tool_calls: [{ id: 'call_abc', index: 0, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      }),
      chunk({ tool_calls: [{ index: 1, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] }),
      chunk({ content: '' }, 'tool_calls'),
      '[DONE]',
    ]);
    assert.equal(st.finishReason, 'stop');
    assert.deepEqual(pieces.slice(0, 3), [
      { text: 'Let me think', channel: { kind: 'reasoning' } },
      { text: '.', channel: { kind: 'reasoning' } },
      { text: 'Checking.' },
    ]);
    const calls = callsOf(pieces);
    assert.deepEqual(
      calls.map((c) => [c.name, c.arguments]),
      [
        ['get_weather', '{"city":"Oslo"}'],
        ['get_weather', '{"city":"Paris"}'],
      ],
    );
    assert.equal(calls[0].callId, 'call_abc');
    assert.match(calls[1].callId, /^call_[0-9a-f]{24}$/);
  });

  it('reasoning_content is taken before reasoning when an engine sends both (never twice); a repeated id gets a fresh one', () => {
    const { pieces } = replay([
      chunk({ reasoning_content: 'a', reasoning: 'a' }),
      callDelta({ index: 0, id: 'same', function: { name: 'f', arguments: '' } }),
      callDelta({ index: 0, id: 'same', function: { name: 'f', arguments: '{}' } }),
      callDelta({ index: 1, id: 'same', function: { name: 'f', arguments: '{}' } }),
    ]);
    assert.deepEqual(pieces[0], { text: 'a', channel: { kind: 'reasoning' } });
    const calls = callsOf(pieces);
    assert.deepEqual(
      calls.map((c) => c.arguments),
      ['{}', '{}'],
    );
    assert.equal(calls[0].callId, 'same');
    assert.notEqual(calls[1].callId, 'same');
  });

  it('malformed tool-call deltas are ChatEventErrors that say what is wrong', () => {
    const bad: Array<[string[], RegExp]> = [
      [[callDelta({ index: 0, id: 'c', function: { arguments: '{}' } })], /tool call 0 without a function name/],
      [[callDelta({ index: 0, function: { name: 'f', arguments: { a: 1 } } })], /arguments that are not text/],
      [[callDelta({ index: 1, function: { name: 'f', arguments: '' } })], /tool call 1 before tool call 0 \(the index skipped\)/],
      [
        [
          callDelta({ index: 0, function: { name: 'f' } }),
          callDelta({ index: 1, function: { name: 'g' } }),
          callDelta({ index: 0, function: { arguments: '{}' } }),
        ],
        /went back to tool call 0/,
      ],
      [
        [callDelta({ index: 0, function: { name: 'f' } }), chunk({ content: 'x' }), callDelta({ index: 0, function: { arguments: '{}' } })],
        /went back to tool call 0/,
      ],
      [[callDelta({ function: { name: 'f' } })], /without a valid "index"/],
      [[callDelta({ index: 0, type: 'custom', function: { name: 'f' } })], /type "custom"/],
      [[callDelta({ index: 0, function: { name: 'f' } }), callDelta({ index: 0, function: { name: 'g' } })], /renamed tool call 0/],
      [[chunk({ tool_calls: { index: 0 } })], /"tool_calls" that is not a list/],
      [[chunk({ reasoning_content: 7 })], /"reasoning_content" is not text/],
      [[callDelta({ index: 0, id: 5, function: { name: 'f' } })], /"id" is not text/],
    ];
    for (const [events, msg] of bad)
      assert.throws(
        () => replay(events),
        (e: Error) => e.name === 'ChatEventError' && msg.test(e.message),
        `${events.join(' ')} → ${msg}`,
      );
  });
});

function streamOf(events: readonly string[]): ChatHandler {
  return (_q, res) => {
    sseHead(res);
    for (const e of events) res.write(`data: ${e}\n\n`);
    res.end();
  };
}

async function runtimeOn(handler: ChatHandler, kind: 'llama.cpp' | 'openai' = 'llama.cpp'): Promise<{ r: TaskRuntime; e: FakeEngine }> {
  const e = await startFakeEngine(handler, ['m']);
  engines.push(e);
  const b = new RemoteBackend([{ name: 'x', urls: [e.base], kind, apiKey: KEY }]);
  await b.refresh();
  const r = await TaskRuntime.open({ dataDir: `${root}/${++dirs}`, backend: b, backendRetry: { attempts: 1, baseMs: 10, maxMs: 50 } });
  runtimes.push(r);
  return { r, e };
}

describe('through the runtime', () => {
  it('a recorded forced call becomes a function_call item with its events; the request carried the tools', async () => {
    const { r, e } = await runtimeOn(
      streamOf([
        ...LLAMA_SERVER_FORCED_CALL.slice(0, -1),
        usageChunk(30, 27)
          .replace(/^data: /, '')
          .trim(),
        '[DONE]',
      ]),
    );
    // The schema the recording was made with.
    const parameters = {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'],
      additionalProperties: false,
    };
    const input = {
      model: 'x/m',
      input: 'Weather?',
      max_output_tokens: 200,
      tools: [{ type: 'function' as const, name: 'get_weather', parameters }],
      tool_choice: 'required' as const,
    };
    const t = r.createTask({ origin: 'lmsp', principal: 'p', input }).task;
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const output = (done.response as { output: Array<Record<string, unknown>> }).output;
    // The message item (output_index 0, opened with the attempt: runtime/outputItems.ts) has no text; the call follows.
    assert.deepEqual(
      output.map((o) => o.type),
      ['message', 'function_call'],
    );
    assert.equal((output[0].content as Array<{ text: string }>).map((c) => c.text).join(''), '');
    const call = output[1];
    assert.equal(call.name, 'get_weather');
    assert.equal(call.call_id, JSON.parse(LLAMA_SERVER_FORCED_CALL[1]).choices[0].delta.tool_calls[0].id);
    assert.deepEqual(JSON.parse(call.arguments as string), { city: 'Oslo', days: 1 });
    const types = r.readEvents(t.id).map((ev) => ev.type);
    for (const ty of [
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
    ])
      assert.ok(types.includes(ty), ty);
    const body = e.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
    assert.equal(body.tool_choice, 'required');
    assert.deepEqual(body.tools, [{ type: 'function', function: { name: 'get_weather', parameters } }]);
  });

  it('reasoning then an answer: a reasoning item beside the message, with reasoning events', async () => {
    const { r } = await runtimeOn(streamOf([chunk({ reasoning_content: 'Hmm' }), chunk({ content: 'Yes.' }), chunk({}, 'stop'), '[DONE]']));
    const t = r.createTask({ origin: 'lmsp', principal: 'p', input: { model: 'x/m', input: 'Q?', max_output_tokens: 20 } }).task;
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const output = (done.response as { output: Array<{ type: string; content?: Array<{ text: string }> }> }).output;
    assert.deepEqual(
      output.map((o) => o.type),
      ['message', 'reasoning'],
    );
    assert.equal(output[0].content![0].text, 'Yes.');
    assert.equal(output[1].content![0].text, 'Hmm');
    assert.ok(r.readEvents(t.id).some((ev) => ev.type === 'response.reasoning_text.delta'));
  });

  it('a malformed tool-call delta fails the task with backend_error naming the problem, never the key it echoes', async () => {
    const { r } = await runtimeOn(
      streamOf([callDelta({ index: 0, id: 'c1', function: { name: 'f', arguments: '{' } }), callDelta({ index: 0, function: { name: `g ${KEY}` } })]),
    );
    const t = r.createTask({
      origin: 'lmsp',
      principal: 'p',
      input: { model: 'x/m', input: 'Q?', max_output_tokens: 20, tools: [{ type: 'function' as const, name: 'f' }] },
    }).task;
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'backend_error');
    assert.match(done.error?.detail ?? '', /renamed tool call 0 from "f" to "g /);
    assert.ok(!JSON.stringify([done, r.readEvents(t.id)]).includes(KEY));
  });
});
