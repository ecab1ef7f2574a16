// VS Code chat requests as runtime input (src/extension/lm/chatMapping.ts): model limits, message and tool mapping
// (both directions of a tool round trip), trimming to the model's context, tool calls read back from a response.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  chatModelInfos,
  chatTitle,
  estimateTokens,
  fitToContext,
  functionCallsOf,
  toFunctionTools,
  toInputItems,
  toToolChoice,
  UNKNOWN_CONTEXT_TOKENS,
  type InputItem,
} from '../../../../src/extension/lm/chatMapping';

// Shapes of VS Code's part classes (LanguageModelTextPart, ToolCallPart, ToolResultPart).
const text = (value: string) => ({ value });
const call = (callId: string, name: string, input: object) => ({ callId, name, input });
const result = (callId: string, ...values: string[]) => ({ callId, content: values.map(text) });
const count = async (s: string) => estimateTokens(s);

describe('chat models', () => {
  it('each model gets its real context, split into input and output, and tool calling', () => {
    const [local, remote, unknown] = chatModelInfos([
      { id: 'qwen', source: 'x', state: 'loaded', demo: false, contextLength: 8192, maxContextLength: 32768 },
      { id: 'eng/gpt', source: 'eng/gpt', state: 'unloaded', demo: false, contextLength: null, maxContextLength: 128000, engine: 'eng' },
      { id: 'demo', source: 'demo', state: 'unloaded', demo: true, contextLength: null, maxContextLength: null },
    ]);
    assert.equal(local!.maxInputTokens + local!.maxOutputTokens, 8192);
    assert.equal(remote!.maxInputTokens + remote!.maxOutputTokens, 128000);
    assert.equal(remote!.family, 'eng');
    assert.equal(unknown!.maxInputTokens + unknown!.maxOutputTokens, UNKNOWN_CONTEXT_TOKENS);
    for (const m of [local!, remote!, unknown!]) {
      assert.equal(m.capabilities.toolCalling, true);
      assert.ok(m.maxInputTokens > 0 && m.maxOutputTokens > 0);
    }
  });
});

describe('messages and tools', () => {
  it('a tool round trip maps to function_call / function_call_output items in order', () => {
    const items = toInputItems([
      { role: 3, content: [text('You are helpful.')] },
      { role: 1, content: [text('Weather in Paris?')] },
      { role: 2, content: [text('Let me look.'), call('c1', 'get_weather', { city: 'Paris' })] },
      { role: 1, content: [result('c1', '18', ' °C'), text('And tomorrow?')] },
    ]);
    assert.deepEqual(items, [
      { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'You are helpful.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look.' }] },
      { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'c1', output: '18 °C' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'And tomorrow?' }] },
    ]);
  });

  it('tools become function tools (a name the runtime refuses is left out); Required forces a call', () => {
    const tools = toFunctionTools([
      { name: 'read_file', description: 'Reads', inputSchema: { type: 'object', properties: { p: { type: 'string' } } } },
      { name: 'no schema', description: 'bad name' },
      { name: 'ping' },
    ]);
    assert.deepEqual(
      tools.map((t) => t.name),
      ['read_file', 'ping'],
    );
    assert.deepEqual(tools[1]!.parameters, { type: 'object', properties: {} });
    assert.equal(toToolChoice(2), 'required');
    assert.equal(toToolChoice(1), 'auto');
  });

  it('function_call output items come back as tool calls with parsed input', () => {
    const calls = functionCallsOf({
      output: [
        { type: 'message', content: [{ type: 'output_text', text: 'x' }] },
        { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call', call_id: 'call_2', name: 'broken', arguments: '{"a":' },
      ],
    });
    assert.deepEqual(calls, [
      { callId: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
      { callId: 'call_2', name: 'broken', input: { arguments: '{"a":' } },
    ]);
  });
});

describe('fitting a request to the context', () => {
  const big = (n: number) => 'word '.repeat(n);
  const copilotLike = (): InputItem[] =>
    toInputItems([
      { role: 3, content: [text(big(6000))] }, // several thousand tokens of instructions
      { role: 1, content: [text('first question ' + big(400))] },
      { role: 2, content: [text('first answer ' + big(400)), call('old', 'read_file', { p: 'a' })] },
      { role: 1, content: [result('old', big(300))] },
      { role: 2, content: [text('second answer')] },
      { role: 1, content: [text('What does main.ts do?')] },
    ]);
  const manyTools = toFunctionTools(
    Array.from({ length: 40 }, (_, i) => ({
      name: `tool_${i}`,
      description: big(60),
      inputSchema: { type: 'object', properties: { a: { type: 'string', description: big(20) } } },
    })),
  );

  it('a request that fits is left alone', async () => {
    const items = toInputItems([{ role: 1, content: [text('hi')] }]);
    const fit = await fitToContext(items, manyTools.slice(0, 2), 4000, count);
    assert.deepEqual(fit.items, items);
    assert.equal(fit.tools.length, 2);
    assert.deepEqual(fit.dropped, { items: 0, tools: 0, cutTokens: 0 });
  });

  it("Copilot's large prompt and tool list fit a 4k model; the newest question survives whole", async () => {
    const budget = 3072;
    const fit = await fitToContext(copilotLike(), manyTools, budget, count);
    assert.ok(fit.tokens <= budget, `${fit.tokens} > ${budget}`);
    const last = fit.items[fit.items.length - 1]!;
    assert.deepEqual(last, { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What does main.ts do?' }] });
    assert.ok(fit.dropped.items > 0 && fit.dropped.tools > 0);
    // No call without its output, no output without its call.
    const calls = new Set(fit.items.filter((i) => i.type === 'function_call').map((i) => (i as { call_id: string }).call_id));
    const outputs = new Set(fit.items.filter((i) => i.type === 'function_call_output').map((i) => (i as { call_id: string }).call_id));
    assert.deepEqual([...calls].sort(), [...outputs].sort());
    // The system text keeps its head.
    const system = fit.items.find((i) => i.type === 'message' && i.role === 'system');
    assert.ok(system && system.type === 'message' && system.content[0]!.text.startsWith('word word'));
  });

  it('a required call keeps one tool', async () => {
    const fit = await fitToContext(copilotLike(), manyTools, 600, count, true);
    assert.equal(fit.tools.length, 1);
    assert.ok(fit.tokens <= 600, `${fit.tokens}`);
  });

  it('a newest message larger than the budget keeps its tail', async () => {
    const items = toInputItems([{ role: 1, content: [text('HEAD ' + big(3000) + ' TAIL')] }]);
    const fit = await fitToContext(items, [], 500, count);
    assert.ok(fit.tokens <= 500, `${fit.tokens}`);
    const only = fit.items[0]!;
    assert.ok(only.type === 'message' && only.content[0]!.text.endsWith('TAIL') && !only.content[0]!.text.includes('HEAD'));
  });
});

describe('chat task titles', () => {
  const user = (t: string): InputItem => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text: t }] });
  it("are the last user turn, short; a chat client's context blocks around what the user typed are left out", () => {
    assert.equal(
      chatTitle([user('first'), { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'a' }] }, user('Say  hello\nthere')]),
      'Chat: Say hello there',
    );
    // Copilot Chat's user message (VS Code 1.139): the date and reminders first, the typed text in <userRequest>.
    const copilot =
      '<context>\nThe current date is December 2, 2026.\n</context>\n<reminderInstructions>\nBe brief.\n</reminderInstructions>\n<userRequest>\nSay hello to the chat view\n</userRequest>';
    assert.equal(chatTitle([user(copilot)]), 'Chat: Say hello to the chat view');
    assert.equal(chatTitle([user('<user_query>fix the bug</user_query>')]), 'Chat: fix the bug');
    assert.equal(chatTitle([user('x'.repeat(80))]), `Chat: ${'x'.repeat(57)}…`);
    assert.equal(chatTitle([]), 'Chat: (tool results)');
  });
});
