// Output items after the message (reasoning, function calls): the assembler's steps and ids, the events and the
// response object a run writes, the chat messages a round trip gives the backend, and a call cut by a restart that
// `resume` continues in the same item. Real store and runtime, scripted backend (no model).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateOptions, OutputChannel, ResumeFrom } from '../../../src/runtime/backend';
import { OutputAssembler, itemsOf } from '../../../src/runtime/outputItems';
import { answerText, generateRequestOf } from '../../../src/runtime/responses';
import { TaskRuntime } from '../../../src/runtime/runtime';
import type { TaskEvent } from '../../../src/runtime/task';
import { ScriptedBackend } from '../../fixtures/scriptedBackend';
import { taskReaches } from '../../support/wait';
import { tempDir } from './helpers';

const call = (callId: string, name: string): OutputChannel => ({ kind: 'function_call', callId, name });
const REASONING: OutputChannel = { kind: 'reasoning' };

describe('OutputAssembler', () => {
  it('opens an item per run of another channel, closes it when the channel changes, and joins deltas', () => {
    const a = new OutputAssembler('msg_abc');
    const steps = [
      ...a.push('think', REASONING),
      ...a.push('ing', REASONING),
      ...a.push('Answer'),
      ...a.push('', call('call_1', 'f')),
      ...a.push('{"x":', call('call_1', 'f')),
      ...a.push('1}', call('call_1', 'f')),
      ...a.push('{"y":2}', call('call_2', 'g')),
      ...a.finish(),
    ];
    assert.deepEqual(
      steps.map((s) => (s.kind === 'text' ? `text:${s.delta}` : `${s.kind}:${s.index}${s.kind === 'delta' ? `:${s.delta}` : ''}`)),
      [
        'open:1',
        'delta:1:think',
        'delta:1:ing',
        'close:1',
        'text:Answer',
        'open:2',
        'delta:2:{"x":',
        'delta:2:1}',
        'close:2',
        'open:3',
        'delta:3:{"y":2}',
        'close:3',
      ],
    );
    assert.equal(a.text, 'Answer');
    assert.deepEqual(
      a.items.map((i) => (i.type === 'reasoning' ? [i.id, i.text] : [i.id, i.callId, i.name, i.arguments])),
      [
        ['rs_abc_1', 'thinking'],
        ['fc_1', 'call_1', 'f', '{"x":1}'],
        ['fc_2', 'call_2', 'g', '{"y":2}'],
      ],
    );
    // The segments give the same items back, with the same ids (what a restart reads).
    const again = itemsOf('msg_abc', a.segments);
    assert.deepEqual(
      again,
      a.items.map((i) => (i.id === 'fc_2' ? { ...i, done: false } : i)),
    );
  });

  it('has no segments when everything was answer text', () => {
    const a = new OutputAssembler('msg_x');
    a.push('a');
    a.push('b');
    assert.equal(a.segments, undefined);
    assert.equal(a.text, 'ab');
  });
});

describe('a round trip in the request', () => {
  it('gives the backend the tools, the choice and the calls and outputs as chat messages', () => {
    const request = generateRequestOf(
      {
        input: [
          { role: 'user', content: 'weather in Paris?' },
          { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' },
          { type: 'function_call_output', call_id: 'call_1', output: '{"c":21}' },
        ],
        tools: [{ type: 'function', name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
        tool_choice: { type: 'function', name: 'weather' },
        parallel_tool_calls: false,
      },
      'm',
    );
    assert.deepEqual(request.messages, [
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: '', toolCalls: [{ callId: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' }] },
      { role: 'tool', callId: 'call_1', content: '{"c":21}' },
    ]);
    assert.deepEqual(request.tools, [{ name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }]);
    assert.deepEqual(request.toolChoice, { name: 'weather' });
    assert.equal(request.parallelToolCalls, false);
  });

  it('offers no tools for tool_choice "none"', () => {
    const request = generateRequestOf({ input: 'hi', tools: [{ type: 'function', name: 'f' }], tool_choice: 'none' }, 'm');
    assert.equal(request.tools, undefined);
    assert.equal(request.toolChoice, undefined);
  });
});

const types = (events: TaskEvent[]) => events.map((e) => e.type);

describe('a run with items', () => {
  it('writes Responses events for reasoning and calls and shows them in the response, after the message', async () => {
    const backend = new ScriptedBackend(async (_req, o) => {
      o.onText('hmm', 1, undefined, REASONING);
      o.onText('Calling.', 1);
      o.onText('{"city":', 1, undefined, call('call_a', 'weather'));
      o.onText('"Paris"}', 1, undefined, call('call_a', 'weather'));
      return { finishReason: 'stop', inputTokens: 3, outputTokens: 4 };
    });
    const rt = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0 });
    try {
      const { task } = rt.createTask({
        origin: 'lmsp',
        principal: 'p',
        input: { model: 'm', input: 'hi', tools: [{ type: 'function', name: 'weather' }] },
      });
      const done = await taskReaches(rt, task.id, (t) => t.status === 'succeeded', 'succeeded');
      const events = rt.readEvents(task.id);
      const t = types(events);
      const after = (type: string, from = 0) => t.indexOf(type, from);
      // reasoning item: added, deltas, done; then the call: added, arguments deltas, done; then the message closes.
      const rsAdded = events.findIndex((e) => e.type === 'response.output_item.added' && (e.data.item as { type: string }).type === 'reasoning');
      assert.ok(rsAdded > 0);
      assert.ok(after('response.reasoning_text.delta') > rsAdded);
      assert.ok(after('response.reasoning_text.done') > after('response.reasoning_text.delta'));
      assert.ok(after('response.function_call_arguments.delta') > after('response.reasoning_text.done'));
      // OPENAI-WIRE §3.3: the reasoning item opens without content, its reasoning_text part is added before the
      // deltas and done after its text.
      assert.deepEqual((events[rsAdded].data.item as { content: unknown }).content, []);
      const partAdded = events.findIndex((e, i) => i > rsAdded && e.type === 'response.content_part.added');
      assert.equal(partAdded, rsAdded + 1);
      assert.deepEqual(events[partAdded].data.part, { type: 'reasoning_text', text: '' });
      const partDone = events.findIndex(
        (e) => e.type === 'response.content_part.done' && (e.data.part as { type: string }).type === 'reasoning_text',
      );
      assert.equal(partDone, after('response.reasoning_text.done') + 1);
      assert.deepEqual(events[partDone].data.part, { type: 'reasoning_text', text: 'hmm' });
      assert.equal(events[partDone + 1].type, 'response.output_item.done');
      const argsDone = events.find((e) => e.type === 'response.function_call_arguments.done')!;
      assert.deepEqual(argsDone.data, { item_id: 'fc_a', output_index: 2, name: 'weather', arguments: '{"city":"Paris"}' });
      assert.ok(after('response.output_text.done') > after('response.function_call_arguments.done'));
      assert.equal(t[t.length - 1], 'response.completed');
      const output = done.response!.output as Array<Record<string, unknown>>;
      assert.deepEqual(
        output.map((i) => i.type),
        ['message', 'reasoning', 'function_call'],
      );
      assert.equal((output[0].content as Array<{ text: string }>)[0].text, 'Calling.');
      // The one reader of the answer (MCP results, get_task_text, the editor's Open Result and Copy Text): the
      // message's text only, never the reasoning or the call's arguments.
      assert.equal(answerText(done.response), 'Calling.');
      assert.deepEqual(output[2], {
        id: 'fc_a',
        type: 'function_call',
        status: 'completed',
        call_id: 'call_a',
        name: 'weather',
        arguments: '{"city":"Paris"}',
      });
      assert.deepEqual(done.response!.tools, [{ type: 'function', name: 'weather', description: null, parameters: null, strict: null }]);
      assert.equal(done.response!.tool_choice, 'auto');
    } finally {
      await rt.close();
    }
  });

  it('continues a call cut by a restart in the same item (resume), with the delivered segments handed back', async () => {
    const dataDir = tempDir();
    let cut!: () => void;
    const started = new Promise<void>((resolve) => (cut = resolve));
    const first = new ScriptedBackend(
      async (_req, o: GenerateOptions) => {
        o.onText('plan', 1, undefined, REASONING);
        o.onText('{"city":"Pa', 2, undefined, call('call_r', 'weather'));
        cut();
        await new Promise((resolve) => o.signal.addEventListener('abort', resolve, { once: true }));
        return { finishReason: 'aborted', inputTokens: 1, outputTokens: 3 };
      },
      { resume: true },
    );
    const rt1 = await TaskRuntime.open({ dataDir, backend: first, deltaFlushMs: 0 });
    const { task } = rt1.createTask({
      origin: 'lmsp',
      principal: 'p',
      onRestart: 'resume',
      input: { model: 'm', input: 'hi', tools: [{ type: 'function', name: 'weather' }], tool_choice: 'required' },
    });
    await started;
    await taskReaches(rt1, task.id, (t) => t.outputTokens === 3, 'the call half written is stored');
    await rt1.close();

    let resumedFrom: ResumeFrom | undefined;
    const second = new ScriptedBackend(
      async (_req, o) => {
        resumedFrom = o.resumeFrom;
        o.onText('ris"}', 1, undefined, call('call_r', 'weather'));
        return { finishReason: 'stop', inputTokens: 1, outputTokens: 4 };
      },
      { resume: true },
    );
    const rt2 = await TaskRuntime.open({ dataDir, backend: second, deltaFlushMs: 0 });
    try {
      const done = await taskReaches(rt2, task.id, (t) => t.status === 'succeeded', 'succeeded after the restart');
      assert.deepEqual(resumedFrom?.segments, [
        { channel: REASONING, text: 'plan' },
        { channel: call('call_r', 'weather'), text: '{"city":"Pa' },
      ]);
      assert.equal(done.attempt, 1, 'the same attempt');
      const events = rt2.readEvents(task.id);
      const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => (e.data.item as { id: string }).id);
      assert.equal(added.filter((id) => id === 'fc_r').length, 1, 'the call item is opened once, across the restart');
      const output = done.response!.output as Array<Record<string, unknown>>;
      assert.equal(output[2].arguments, '{"city":"Paris"}');
      assert.deepEqual(JSON.parse(String(output[2].arguments)), { city: 'Paris' });
    } finally {
      await rt2.close();
    }
  });
});
