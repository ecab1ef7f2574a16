// The Codex dialect's mapping without a server (docs/lmsp.md, "Codex dialect"): what the model is offered for
// namespace and custom tools, how the runtime's output items and events are shown back on the Responses door, and the
// encrypted reasoning round trip (sealed on the way out, opened for the model on the way in; a foreign or altered blob
// and reasoning text a client wrote are dropped). The protocol test cannot make the demo model reason (its plain
// prompt has no thought segment), so the round trip is checked here through the same functions the door runs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chatHistory } from '../../../../src/backends/llama/prompt';
import { openSealedReasoning, ResponsesView } from '../../../../src/protocols/openai/responsesView';
import { validateResponseBody } from '../../../../src/protocols/lmsp/schemas';
import { ReasoningSeal } from '../../../../src/protocols/shared/reasoningSeal';
import { partialCustomInput } from '../../../../src/runtime/responseTools';
import { generateRequestOf, toChatMessages } from '../../../../src/runtime/responses';
import type { ResponseRequest, TaskEvent } from '../../../../src/runtime/task';

const TOOLS = [
  { type: 'function', name: 'exec', parameters: { type: 'object' } },
  { type: 'namespace', name: 'agents', description: 'Agent tools.', tools: [{ type: 'function', name: 'spawn', description: 'Start one.' }] },
  { type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: /x+/' } },
  { type: 'web_search', external_web_access: false },
];

function request(extra: Record<string, unknown> = {}): ResponseRequest {
  return validateResponseBody({ model: 'm', input: 'hi', tools: TOOLS, include: ['reasoning.encrypted_content'], store: false, ...extra }).input;
}

const event = (type: string, data: Record<string, unknown>, seq = 1): TaskEvent => ({ taskId: 'task_1', seq, type, data, createdAt: 0 });

describe('Codex dialect: tools as the model sees them', () => {
  it('namespace members flattened with the namespace description first; custom as an `input` string; hosted left out', () => {
    const g = generateRequestOf(request({ tool_choice: { type: 'function', name: 'spawn', namespace: 'agents' } }), 'm');
    assert.deepEqual(
      g.tools?.map((t) => t.name),
      ['exec', 'agents__spawn', 'apply_patch'],
    );
    assert.equal(g.tools?.[1].description, 'Agent tools.\n\nStart one.');
    assert.deepEqual(g.tools?.[2].parameters?.required, ['input']);
    assert.match(g.tools?.[2].description ?? '', /lark grammar:\nstart: \/x\+\//);
    assert.deepEqual(g.toolChoice, { name: 'agents__spawn' });
  });

  it('replayed calls map back to the flattened names (a custom call as its input argument)', () => {
    const messages = toChatMessages(
      request({
        input: [
          { role: 'user', content: 'go' },
          { type: 'function_call', call_id: 'c1', name: 'spawn', namespace: 'agents', arguments: '{}' },
          { type: 'custom_tool_call', call_id: 'c2', name: 'apply_patch', input: 'xx"y' },
          { type: 'function_call_output', call_id: 'c1', output: 'ok' },
          { type: 'custom_tool_call_output', call_id: 'c2', output: 'patched' },
        ],
      }),
    );
    assert.deepEqual(messages[1].toolCalls, [
      { callId: 'c1', name: 'agents__spawn', arguments: '{}' },
      { callId: 'c2', name: 'apply_patch', arguments: '{"input":"xx\\"y"}' },
    ]);
    assert.deepEqual(messages.slice(2), [
      { role: 'tool', callId: 'c1', content: 'ok' },
      { role: 'tool', callId: 'c2', content: 'patched' },
    ]);
  });

  it("a custom input's decoded start while its arguments grow, stopping before an unfinished escape", () => {
    assert.equal(partialCustomInput('{"input": "ab\\n'), 'ab\n');
    assert.equal(partialCustomInput('{"input": "ab\\'), 'ab');
    assert.equal(partialCustomInput('{"input": "a\\u00'), 'a');
    assert.equal(partialCustomInput('{"input": "a\\u00e9" }'), 'aé');
    assert.equal(partialCustomInput('{"other": 1'), '');
  });
});

describe('Codex dialect: output shown on the Responses door', () => {
  const seal = new ReasoningSeal();
  const task = { request: request(), model: 'm' };

  it('calls under the name the client offered: function_call{name, namespace}, custom_tool_call{input}', () => {
    const view = new ResponsesView(task, seal);
    const shown = view.response({
      output: [
        { id: 'fc_1', type: 'function_call', status: 'completed', call_id: 'c1', name: 'agents__spawn', arguments: '{}' },
        { id: 'fc_2', type: 'function_call', status: 'completed', call_id: 'c2', name: 'apply_patch', arguments: '{"input":"x\\ny"}' },
        { id: 'fc_3', type: 'function_call', status: 'completed', call_id: 'c3', name: 'exec', arguments: '{}' },
      ],
    });
    assert.deepEqual(shown.output, [
      { id: 'fc_1', type: 'function_call', status: 'completed', call_id: 'c1', name: 'spawn', namespace: 'agents', arguments: '{}' },
      { id: 'fc_2', type: 'custom_tool_call', status: 'completed', call_id: 'c2', name: 'apply_patch', input: 'x\ny' },
      { id: 'fc_3', type: 'function_call', status: 'completed', call_id: 'c3', name: 'exec', arguments: '{}' },
    ]);
  });

  it("a custom call's argument deltas become custom_tool_call_input deltas that add up to its input", () => {
    const view = new ResponsesView(task, seal);
    const item = { id: 'fc_2', type: 'function_call', status: 'in_progress', call_id: 'c2', name: 'apply_patch', arguments: '' };
    assert.equal(
      (view.event(event('response.output_item.added', { output_index: 1, item }))?.data.item as { type?: string }).type,
      'custom_tool_call',
    );
    const pieces = ['{"inp', 'ut": "a\\', 'nb', '"}'];
    const deltas = pieces.map((delta) => view.event(event('response.function_call_arguments.delta', { item_id: 'fc_2', output_index: 1, delta })));
    const shown = deltas.filter((d) => d !== undefined);
    assert.ok(shown.every((d) => d.type === 'response.custom_tool_call_input.delta'));
    assert.equal(shown.map((d) => d.data.delta).join(''), 'a\nb');
    const done = view.event(
      event('response.function_call_arguments.done', { item_id: 'fc_2', output_index: 1, name: 'apply_patch', arguments: pieces.join('') }),
    );
    assert.deepEqual(done && { type: done.type, data: done.data }, {
      type: 'response.custom_tool_call_input.done',
      data: { item_id: 'fc_2', output_index: 1, input: 'a\nb' },
    });
  });

  it('a synchronous stream cancelled elsewhere ends in response.failed; a background one keeps response.cancelled', () => {
    const response = { id: 'resp_1', status: 'cancelled', output: [], error: null };
    const sync = new ResponsesView(task, seal).event(event('response.cancelled', { response }));
    assert.equal(sync?.type, 'response.failed');
    assert.equal((sync?.data.response as { error: { code: string } }).error.code, 'cancelled');
    const background = new ResponsesView({ request: { ...task.request, store: true, background: true }, model: 'm' }, seal).event(
      event('response.cancelled', { response }),
    );
    assert.equal(background?.type, 'response.cancelled');
  });
});

describe('Codex dialect: encrypted reasoning round trip (store: false)', () => {
  const seal = new ReasoningSeal();
  const reasoning = {
    id: 'rs_1',
    type: 'reasoning',
    status: 'completed',
    summary: [],
    content: [{ type: 'reasoning_text', text: 'I should say hi.' }],
  };

  it('sealed when asked for (finished items only), given back to the model as the turn reasoning, shown to the template as a thought', () => {
    const view = new ResponsesView({ request: request(), model: 'm' }, seal);
    assert.equal(view.item(reasoning, false).encrypted_content, undefined, 'an item still open carries no blob');
    const out = view.item(reasoning, true);
    assert.equal(typeof out.encrypted_content, 'string');
    assert.equal(
      new ResponsesView({ request: request({ include: [] }), model: 'm' }, seal).item(reasoning, true).encrypted_content,
      undefined,
      'not asked for',
    );

    // Codex's next turn: the item back (its content dropped, as Codex may), then the answer of that turn.
    const { content: _gone, ...carried } = out;
    const next = openSealedReasoning(
      request({
        input: [
          { role: 'user', content: 'hi' },
          carried,
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hi!' }] },
          { role: 'user', content: 'again' },
        ],
      }),
      seal,
    );
    const messages = toChatMessages(next);
    assert.deepEqual(messages[1], { role: 'assistant', content: 'Hi!', reasoning: 'I should say hi.' });
    const history = chatHistory(undefined, messages);
    assert.deepEqual(history[1], {
      type: 'model',
      response: [{ type: 'segment', segmentType: 'thought', text: 'I should say hi.', ended: true }, 'Hi!'],
    });
  });

  it('a foreign or altered blob, another model, and text the client wrote are dropped silently', () => {
    const blob = seal.seal({ model: 'm', text: 'secret' });
    const altered = `${blob.slice(0, -2)}${blob.endsWith('A') ? 'B' : 'A'}A`;
    const items = [
      { type: 'reasoning', summary: [], encrypted_content: 'gAAAA-openai-blob' },
      { type: 'reasoning', summary: [], encrypted_content: altered },
      { type: 'reasoning', summary: [], encrypted_content: seal.seal({ model: 'other', text: 'theirs' }) },
      { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'client-written' }] },
      { type: 'reasoning' },
    ];
    const opened = openSealedReasoning(request({ input: [{ role: 'user', content: 'hi' }, ...items] }), seal);
    assert.deepEqual(toChatMessages(opened), [{ role: 'user', content: 'hi' }]);
    for (const it of (opened.input as Array<Record<string, unknown>>).slice(1)) {
      assert.equal(it.encrypted_content, undefined);
      assert.equal(it.content, undefined);
    }
  });
});
