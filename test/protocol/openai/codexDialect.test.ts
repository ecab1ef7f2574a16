// Codex CLI 0.169's Responses dialect through the real HTTP door and the unmodified `openai` SDK (issue #38;
// ANTHROPIC-WIRE §5). Codex's first request used to be a 400 ("The tool type "namespace" is not supported"), so the
// turn failed before it began. The request here has the captured shape: developer messages with client-minted ids, a
// namespace of functions, a hosted web_search, a freeform (custom) tool, reasoning effort "none", store: false with
// reasoning.encrypted_content, prompt_cache_key, client_metadata and Codex's headers. The demo model's weights are
// noise: what is checked is what the door guarantees (shapes, names, event order, the store:false policy) and what the
// call grammar guarantees (a forced call of the tool named). Generations whose content matters are seeded.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { call, toolsServer } from '../lmsp/harness';

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
// Small schemas and no descriptions: the demo model's context is 2 048 tokens and its tokenizer spends many on JSON.
const fn = (name: string, properties: Record<string, unknown> = {}) => ({ type: 'function', name, strict: false, parameters: obj(properties) });

/** Codex's tools: 4 functions, a namespace of 2, a hosted web_search, a custom (freeform) tool. */
const CODEX_TOOLS = [
  fn('exec_command', { cmd: { type: 'string', maxLength: 12 } }),
  fn('write_stdin'),
  fn('request_user_input'),
  fn('view_image'),
  {
    type: 'namespace',
    name: 'multi_agent_v1',
    description: 'Agents.',
    tools: [{ ...fn('spawn_agent', { task: { type: 'string', maxLength: 12 } }), defer_loading: true }, fn('wait_agent')],
  },
  { type: 'web_search', external_web_access: false },
  { type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: /[a-z]+/' } },
];
const WEB_SEARCH_INDEX = 5;

const CODEX_HEADERS = {
  originator: 'codex_exec',
  'session-id': '0199a000-0000-7000-8000-000000000001',
  'thread-id': '0199a000-0000-7000-8000-000000000001',
  'x-client-request-id': '0199a000-0000-7000-8000-000000000001',
  'x-codex-window-id': '0199a000-0000-7000-8000-000000000001:0',
  'x-codex-turn-metadata': JSON.stringify({ request_kind: 'turn', sandbox: 'read-only' }),
};

const CODEX_INPUT = [
  { type: 'message', id: 'msg_0199a000-dev-1', role: 'developer', content: [{ type: 'input_text', text: 'Agent.' }] },
  {
    type: 'message',
    id: 'msg_0199a000-dev-2',
    role: 'developer',
    content: [
      { type: 'input_text', text: 'Skills.' },
      { type: 'input_text', text: 'Read-only.' },
    ],
  },
  { type: 'message', id: 'msg_0199a000-user-1', role: 'user', content: [{ type: 'input_text', text: '<env>/tmp</env>' }] },
  { type: 'message', id: 'msg_0199a000-user-2', role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] },
];

/** Codex's body, less what each test sets; `task_runtime.seed` makes the content of a generation reproducible. */
function codexBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    input: CODEX_INPUT,
    tools: CODEX_TOOLS,
    tool_choice: 'auto',
    parallel_tool_calls: true,
    reasoning: { effort: 'none', summary: 'auto' },
    store: false,
    stream: true,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: '0199a000-0000-7000-8000-000000000001',
    client_metadata: { root_turn_id: 'turn-1', thread_id: '0199a000-0000-7000-8000-000000000001' },
    text: { verbosity: 'low' },
    max_output_tokens: 200,
    task_runtime: { seed: 7 },
    ...extra,
  };
}

type Event = OpenAI.Responses.ResponseStreamEvent;

/** The SDK's stream of a Codex request: every event, in order; `onEvent` sees each as it arrives. */
async function codexStream(client: OpenAI, body: Record<string, unknown>, onEvent?: (e: Event) => Promise<void>): Promise<Event[]> {
  const stream = await client.responses.create(body as unknown as OpenAI.Responses.ResponseCreateParamsStreaming, { headers: CODEX_HEADERS });
  const events: Event[] = [];
  for await (const e of stream) {
    events.push(e);
    await onEvent?.(e);
  }
  return events;
}

function finalOf(events: Event[]): OpenAI.Responses.Response {
  const last = events.at(-1);
  assert.ok(last && last.type === 'response.completed', `ends with ${last?.type}: ${events.map((e) => e.type).join(',')}`);
  return last.response;
}

function notFound(e: unknown): boolean {
  assert.ok(e instanceof OpenAI.NotFoundError, String(e));
  return true;
}

describe("Codex CLI's Responses dialect (openai SDK, tool chat template)", () => {
  // Codex's tools take room: a context of 4 096 tokens rather than the test model's 2 048.
  const ctx = toolsServer({ contextLength: 4096 });

  it("Codex's first request: 200, a stream ending in response.completed, web_search ignored, store:false never retrievable", async () => {
    let listedWhileStreaming: Array<{ response_id: string; status: string }> | undefined;
    // Stop sequences end the noise early, so that the response completes (Codex sends no max_output_tokens).
    const body = codexBody({ task_runtime: { seed: 7, stop: [' ', 'e', 'a', 'o'] } });
    const events = await codexStream(ctx.client, { model: ctx.model, ...body }, async (e) => {
      // The task is in the task list while its stream is open (observability), whatever store says.
      if (e.type === 'response.created') listedWhileStreaming = (await call(ctx.server, 'GET', '/tasks')).json.data;
    });
    const final = finalOf(events);
    assert.equal(final.status, 'completed');
    assert.ok(
      listedWhileStreaming?.some((t) => t.response_id === final.id),
      JSON.stringify(listedWhileStreaming),
    );
    // The vendor member: the hosted tool left out, and the stop string that ended the noise when one did.
    const { ignored_tools, stop_sequence, ...rest } = (final as unknown as { task_runtime: Record<string, unknown> }).task_runtime;
    assert.deepEqual(ignored_tools, [{ index: WEB_SEARCH_INDEX, type: 'web_search' }]);
    if (stop_sequence !== undefined) assert.ok([' ', 'e', 'a', 'o'].includes(stop_sequence as string), String(stop_sequence));
    assert.deepEqual(rest, {});
    assert.equal((final as unknown as { store: boolean }).store, false);
    assert.deepEqual(final.reasoning, { effort: 'none', summary: 'auto' });
    assert.equal((final.text as { verbosity?: string }).verbosity, 'low');
    assert.equal(final.prompt_cache_key, '0199a000-0000-7000-8000-000000000001');
    // The tools come back as they were sent (namespace, hosted and custom ones included).
    assert.deepEqual(
      final.tools.map((t) => t.type),
      CODEX_TOOLS.map((t) => t.type),
    );
    const created = events[0];
    assert.equal(created.type, 'response.created');
    // Not retrievable afterwards (OpenAI: 404), nor continued from, nor listed as input items.
    await assert.rejects(() => ctx.client.responses.retrieve(final.id), notFound);
    await assert.rejects(() => ctx.client.responses.inputItems.list(final.id), notFound);
    await assert.rejects(
      () => ctx.client.responses.create({ model: ctx.model, input: 'more', previous_response_id: final.id, max_output_tokens: 2 }),
      notFound,
    );
    // Still a task until its short retention passes (docs/lmsp.md, "store: false").
    const listed = (await call(ctx.server, 'GET', '/tasks')).json.data as Array<{ response_id: string; status: string }>;
    assert.equal(listed.find((t) => t.response_id === final.id)?.status, 'succeeded');
  });

  it('background with store:false stays a 400; a tool_choice naming a hosted tool is a 400 naming it', async () => {
    const r = await call(ctx.server, 'POST', '/responses', { body: { model: ctx.model, ...codexBody({ stream: false, background: true }) } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.param, 'store');
    const hosted = await call(ctx.server, 'POST', '/responses', {
      body: { model: ctx.model, ...codexBody({ stream: false, tool_choice: { type: 'web_search' } }) },
    });
    assert.equal(hosted.status, 400, hosted.text);
    assert.equal(hosted.json.code, 'unsupported_capability');
    assert.equal(hosted.json.param, 'tool_choice.type');
    assert.match(hosted.json.detail, /web_search/);
  });

  it('a namespace member that collides with a top-level function is a 400 naming it', async () => {
    const tools = [fn('multi_agent_v1__spawn_agent'), CODEX_TOOLS[4]];
    const r = await call(ctx.server, 'POST', '/responses', { body: { model: ctx.model, input: 'x', tools } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.param, 'tools.1.tools.0.name');
    assert.match(r.json.detail, /multi_agent_v1__spawn_agent/);
  });

  it('a forced namespaced call: function_call with the inner name and its namespace, in the stream and the final response; its replay is accepted', async () => {
    const choice = { type: 'function', name: 'spawn_agent', namespace: 'multi_agent_v1' };
    const events = await codexStream(ctx.client, { model: ctx.model, ...codexBody({ tool_choice: choice, parallel_tool_calls: false }) });
    const final = finalOf(events);
    const calls = final.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(final.output));
    const made = calls[0];
    assert.equal(made.name, 'spawn_agent');
    assert.equal(made.namespace, 'multi_agent_v1');
    assert.equal(typeof (JSON.parse(made.arguments) as { task: unknown }).task, 'string');
    for (const type of ['response.output_item.added', 'response.output_item.done'] as const) {
      const item = events.find((e) => e.type === type && e.item.type === 'function_call') as
        OpenAI.Responses.ResponseOutputItemAddedEvent | undefined;
      assert.equal(item?.item.type === 'function_call' && `${item.item.namespace}/${item.item.name}`, 'multi_agent_v1/spawn_agent', type);
    }
    const argsDone = events.find((e) => e.type === 'response.function_call_arguments.done');
    assert.equal(argsDone?.type === 'response.function_call_arguments.done' && argsDone.name, 'spawn_agent');

    // Codex's next turn: the history again with the call (namespace and all) and its output.
    const next = await codexStream(ctx.client, {
      model: ctx.model,
      ...codexBody({
        input: [...CODEX_INPUT, made, { type: 'function_call_output', call_id: made.call_id, output: 'agent started' }],
        max_output_tokens: 4,
      }),
    });
    assert.ok(['response.completed', 'response.incomplete'].includes(next.at(-1)?.type ?? ''), next.map((e) => e.type).join(','));
  });

  it('a forced custom tool call: custom_tool_call with its raw input, streamed as custom_tool_call_input deltas; its replay is accepted', async () => {
    const events = await codexStream(ctx.client, {
      model: ctx.model,
      ...codexBody({ tool_choice: { type: 'custom', name: 'apply_patch' }, parallel_tool_calls: false }),
    });
    const final = finalOf(events);
    const calls = final.output.filter((o): o is OpenAI.Responses.ResponseCustomToolCall => o.type === 'custom_tool_call');
    assert.equal(calls.length, 1, JSON.stringify(final.output));
    const made = calls[0];
    assert.equal(made.name, 'apply_patch');
    assert.equal(typeof made.input, 'string');
    assert.equal(
      final.output.some((o) => o.type === 'function_call'),
      false,
    );
    const deltas = events.filter(
      (e): e is OpenAI.Responses.ResponseCustomToolCallInputDeltaEvent => e.type === 'response.custom_tool_call_input.delta',
    );
    const done = events.find((e): e is OpenAI.Responses.ResponseCustomToolCallInputDoneEvent => e.type === 'response.custom_tool_call_input.done');
    assert.equal(done?.input, made.input);
    assert.equal(deltas.map((d) => d.delta).join(''), made.input);
    assert.equal(
      events.some((e) => e.type === 'response.function_call_arguments.delta'),
      false,
    );
    const itemDone = events.find((e) => e.type === 'response.output_item.done' && e.item.type === 'custom_tool_call') as
      OpenAI.Responses.ResponseOutputItemDoneEvent | undefined;
    assert.deepEqual(itemDone?.item, made);

    const next = await call(ctx.server, 'POST', '/responses', {
      body: {
        model: ctx.model,
        ...codexBody({
          stream: false,
          max_output_tokens: 4,
          input: [...CODEX_INPUT, made, { type: 'custom_tool_call_output', call_id: made.call_id, output: 'Done!' }],
        }),
      },
      headers: CODEX_HEADERS,
    });
    assert.equal(next.status, 200, next.text);
    // An output answering no call is refused, as for functions.
    const orphan = await call(ctx.server, 'POST', '/responses', {
      body: {
        model: ctx.model,
        input: [...CODEX_INPUT, { type: 'custom_tool_call_output', call_id: 'call_nowhere', output: 'x' }],
        max_output_tokens: 2,
      },
    });
    assert.equal(orphan.status, 400, orphan.text);
    assert.equal(orphan.json.param, 'input.4.call_id');
  });

  it('reasoning items given back are accepted: a foreign encrypted_content, an empty or missing summary and content', async () => {
    const input = [
      ...CODEX_INPUT,
      { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'gAAAAABforeign-blob' },
      { type: 'reasoning', id: 'rs_2', summary: [], content: [], encrypted_content: 'trs1.AAAAaltered' },
      { type: 'reasoning', id: 'rs_3' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello.' }] },
      { type: 'message', role: 'user', content: 'Again.' },
    ];
    const r = await call(ctx.server, 'POST', '/responses', {
      body: { model: ctx.model, ...codexBody({ stream: false, input, max_output_tokens: 2 }) },
      headers: CODEX_HEADERS,
    });
    assert.equal(r.status, 200, r.text);
  });
});
