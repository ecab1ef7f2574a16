// Function calls and thought segments of LlamaBackend on the demo model (random weights: whatever it generates under
// the call grammar must still validate), with and without the demo's tool chat template.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import Ajv from 'ajv';
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { REASONING_CHAT_TEMPLATE, TOOLS_CHAT_TEMPLATE } from '../../../fixtures/chatTemplates';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { OutputSplitter, PLAIN_CALL_SYNTAX, type ChannelPiece } from '../../../../src/backends/llama/toolCalls';
import { RequestRefusedError, type GenerateRequest, type OutputChannel, type ToolDefinition } from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';
import { callsOf, collector, segmentsOf } from '../../../support/pieces';

const never = () => new AbortController().signal;
const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
const TOOLS: ToolDefinition[] = [
  {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: obj({ city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } }),
    strict: true,
  },
  {
    name: 'add',
    parameters: obj({ a: { type: 'integer' }, b: { type: 'number' }, tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 3 } }),
  },
  { name: 'noop' },
];
const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
  model: '',
  instructions: 'You are a test.',
  messages: [{ role: 'user', content: 'Call a tool.' }],
  tools: TOOLS,
  ...over,
});

describe('LlamaBackend function calls on the demo model', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-tools-'));
  const toolsModel = path.join(tmp, 'tools.gguf');
  const reasoningModel = path.join(tmp, 'reasoning.gguf');
  writeTestModel(toolsModel, { seed: 1, chatTemplate: TOOLS_CHAT_TEMPLATE });
  writeTestModel(reasoningModel, { seed: 1, chatTemplate: REASONING_CHAT_TEMPLATE });
  const backend = new LlamaBackend({ models: [{ source: testModelPath(), demo: true }, { source: toolsModel }, { source: reasoningModel }] });
  after(async () => {
    await backend.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const ajv = new Ajv({ strict: false });
  const validators = new Map(TOOLS.map((t) => [t.name, ajv.compile(t.parameters ?? { type: 'object' })]));

  it('50 forced calls (required and named, plain prompt and template) carry arguments valid against their parameters', async () => {
    let n = 0;
    const choices: Array<GenerateRequest['toolChoice']> = ['required', { name: 'get_weather' }, { name: 'add' }, 'required', { name: 'noop' }];
    for (const [i, toolChoice] of choices.entries()) {
      for (let seed = 1; seed <= 10; seed++, n++) {
        const model = seed % 2 ? 'tiny-test' : 'tools';
        const { pieces, onText } = collector();
        const r = await backend.generate(request({ model, toolChoice, seed: seed + 10 * i, temperature: 1 }), { signal: never(), onText });
        const where = `${JSON.stringify(toolChoice)}/${model}/${seed}`;
        assert.equal(r.finishReason, 'stop', `${where} did not end: ${JSON.stringify(pieces)}`);
        assert.equal(
          pieces.reduce((s, p) => s + p.tokens, 0),
          r.outputTokens,
          where,
        );
        assert.ok(
          pieces.every((p) => p.channel?.kind === 'function_call'),
          `${where}: only calls, no answer text`,
        );
        const calls = callsOf(pieces);
        assert.ok(calls.length >= 1, where);
        if (typeof toolChoice === 'object') assert.equal(calls.length, 1, `${where}: a named choice is one call`);
        for (const c of calls) {
          assert.match(c.callId, /^call_[0-9a-f]{24}$/);
          if (typeof toolChoice === 'object') assert.equal(c.name, toolChoice.name);
          const validate = validators.get(c.name);
          assert.ok(validate, `${where}: unknown tool ${c.name}`);
          const args = JSON.parse(c.arguments) as unknown;
          assert.ok(validate(args), `${where}: ${JSON.stringify(validate.errors)} in ${c.arguments}`);
        }
        assert.equal(new Set(calls.map((c) => c.callId)).size, calls.length, 'callIds are unique');
      }
    }
    assert.equal(n, 50);
  });

  it('parallel_tool_calls false gives exactly one call', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { pieces, onText } = collector();
      const r = await backend.generate(request({ toolChoice: 'required', parallelToolCalls: false, seed, temperature: 1, maxOutputTokens: 600 }), {
        signal: never(),
        onText,
      });
      assert.equal(r.finishReason, 'stop');
      assert.equal(callsOf(pieces).length, 1, JSON.stringify(pieces));
    }
  });

  it('resumes a forced call mid-arguments: the same callId, nothing emitted again, valid JSON', async () => {
    let resumed = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const req = request({ toolChoice: { name: 'add' }, seed, temperature: 1, maxOutputTokens: 600 });
      const ac = new AbortController();
      const first = collector();
      const r1 = await backend.generate(req, {
        signal: ac.signal,
        onText: (t, n, l, ch) => {
          first.onText(t, n, l, ch);
          if ((callsOf(first.pieces)[0]?.arguments.length ?? 0) >= 8) ac.abort();
        },
      });
      if (r1.finishReason !== 'aborted') continue;
      const before = callsOf(first.pieces);
      assert.equal(before.length, 1);
      assert.throws(() => JSON.parse(before[0]!.arguments) as unknown, 'cut mid-arguments');
      const rest = collector();
      const tokens = first.pieces.reduce((s, p) => s + p.tokens, 0);
      const r2 = await backend.generate(
        { ...req, seed: seed + 100 },
        {
          signal: never(),
          onText: rest.onText,
          resumeFrom: { text: '', segments: segmentsOf(first.pieces), outputTokens: tokens },
        },
      );
      assert.equal(r2.finishReason, 'stop');
      const after = callsOf(rest.pieces);
      assert.equal(after.length, 1, JSON.stringify(rest.pieces));
      assert.equal(after[0]!.callId, before[0]!.callId, 'the call continues in the same callId');
      const args = before[0]!.arguments + after[0]!.arguments;
      assert.ok(!after[0]!.arguments.startsWith(before[0]!.arguments), 'delivered text is not emitted again');
      assert.ok(validators.get('add')!(JSON.parse(args)), args);
      resumed++;
    }
    assert.ok(resumed >= 2, `only ${resumed} generations were cut mid-arguments`);
  });

  for (const model of ['tools', 'tiny-test'])
    it(`auto (${model === 'tools' ? 'tool template' : 'plain-text prompt'}): the functions are in the prompt; a call in its syntax becomes a function_call channel`, async () => {
      const withTools = await backend.generate(request({ model, toolChoice: 'auto', seed: 1, maxOutputTokens: 1 }), {
        signal: never(),
        onText: () => undefined,
      });
      const without = await backend.generate(request({ model, tools: undefined, seed: 1, maxOutputTokens: 1 }), {
        signal: never(),
        onText: () => undefined,
      });
      // The template's "# Tools" block with the three signatures.
      assert.ok(withTools.inputTokens > without.inputTokens + 200, `${withTools.inputTokens} vs ${without.inputTokens}`);
      // A call the model had begun in the template's syntax (delivered before a restart): it goes on in the call grammar
      // under the same callId, and the arguments end valid.
      for (const seed of [1, 2, 3, 4]) {
        const rest = collector();
        const channel: OutputChannel = { kind: 'function_call', callId: 'call_0123456789abcdef01234567', name: 'get_weather' };
        const r = await backend.generate(request({ model, toolChoice: 'auto', seed, temperature: 1, maxOutputTokens: 300 }), {
          signal: never(),
          onText: rest.onText,
          resumeFrom: { text: 'Let me see. ', segments: [{ text: 'Let me see. ' }, { channel, text: '{"city": "Pa' }], outputTokens: 20 },
        });
        const call = rest.pieces.filter((p) => p.channel?.kind === 'function_call');
        assert.ok(call.length > 0 && call.every((p) => JSON.stringify(p.channel) === JSON.stringify(channel)), JSON.stringify(rest.pieces));
        assert.ok(rest.pieces.indexOf(call.at(-1)!) === call.length - 1, 'the call comes first, then answer text');
        const args = '{"city": "Pa' + call.map((p) => p.text).join('');
        assert.ok(validators.get('get_weather')!(JSON.parse(args)), args);
        assert.equal(
          rest.pieces.reduce((s, p) => s + p.tokens, 0),
          r.outputTokens - 20,
        );
      }
    });

  it('auto with parallel_tool_calls false ends after the call', async () => {
    const channel: OutputChannel = { kind: 'function_call', callId: 'call_aaaaaaaaaaaaaaaaaaaaaaaa', name: 'noop' };
    const rest = collector();
    const r = await backend.generate(
      request({ model: 'tools', toolChoice: 'auto', parallelToolCalls: false, seed: 3, temperature: 1, maxOutputTokens: 300 }),
      {
        signal: never(),
        onText: rest.onText,
        resumeFrom: { text: '', segments: [{ channel, text: '{' }], outputTokens: 10 },
      },
    );
    assert.equal(r.finishReason, 'stop');
    assert.ok(
      rest.pieces.every((p) => JSON.stringify(p.channel) === JSON.stringify(channel)),
      JSON.stringify(rest.pieces),
    );
    JSON.parse('{' + rest.pieces.map((p) => p.text).join(''));
  });

  it('history with tool calls and tool results renders into the prompt (template and plain text)', async () => {
    const messages: GenerateRequest['messages'] = [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', toolCalls: [{ callId: 'call_1', name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' }] },
      { role: 'tool', callId: 'call_1', content: 'sunny and 21 degrees' },
    ];
    for (const model of ['tools', 'tiny-test']) {
      const bare = await backend.generate(request({ model, messages: messages.slice(0, 1), seed: 1, maxOutputTokens: 1 }), {
        signal: never(),
        onText: () => undefined,
      });
      const full = await backend.generate(request({ model, messages, seed: 1, maxOutputTokens: 1 }), { signal: never(), onText: () => undefined });
      // The call (≈ 60 characters in its syntax) and the result (20) are in the prompt: one token per character here.
      assert.ok(full.inputTokens >= bare.inputTokens + 70, `${model}: ${full.inputTokens} vs ${bare.inputTokens}`);
    }
  });

  it('refuses bad tool parameters naming the keyword, and an unknown named tool', () => {
    const refused = (req: GenerateRequest, code: string, param: string) =>
      assert.throws(
        () => backend.checkRequest(req),
        (e: unknown) => e instanceof RequestRefusedError && e.code === code && e.param === param,
      );
    refused(
      request({ tools: [TOOLS[0]!, { name: 'bad', parameters: obj({ s: { type: 'string', pattern: 'a+' } }) }] }),
      'invalid_json_schema',
      'tools[1].parameters.properties.s.pattern',
    );
    refused(
      request({ tools: [{ name: 'bad', parameters: { type: 'array', items: { type: 'string' } } }] }),
      'invalid_json_schema',
      'tools[0].parameters.type',
    );
    refused(request({ toolChoice: { name: 'missing' } }), 'invalid_request', 'tool_choice');
    refused(request({ tools: [{ name: 'a b' }] }), 'invalid_request', 'tools[0].name');
    backend.checkRequest(request({ toolChoice: 'required' }));
  });

  it('a template with thought segments: reasoning is emitted under its channel', async () => {
    // Delivered reasoning (the model had opened <think>) goes on as reasoning until the template's thought suffix.
    const rest = collector();
    await backend.generate(request({ model: 'reasoning', tools: undefined, seed: 2, temperature: 1, maxOutputTokens: 40 }), {
      signal: never(),
      onText: rest.onText,
      resumeFrom: { text: '', segments: [{ channel: { kind: 'reasoning' }, text: 'Let me think' }], outputTokens: 5 },
    });
    assert.ok(rest.pieces.length > 0);
    assert.equal(rest.pieces[0]!.channel?.kind, 'reasoning', JSON.stringify(rest.pieces));
  });

  it('reasoning.effort: refused without a thought segment, a budget where there is one (none closes the thought at once)', async () => {
    await backend.load('tiny-test');
    await backend.load('reasoning');
    assert.throws(
      () => backend.checkRequest(request({ model: 'tiny-test', reasoningEffort: 'low' })),
      (e: unknown) => e instanceof RequestRefusedError && e.code === 'unsupported_capability' && e.param === 'reasoning.effort',
    );
    backend.checkRequest(request({ model: 'reasoning', reasoningEffort: 'low' }));
    for (const seed of [1, 2, 3]) {
      const rest = collector();
      const r = await backend.generate(
        request({ model: 'reasoning', tools: undefined, reasoningEffort: 'none', seed, temperature: 1, maxOutputTokens: 40 }),
        {
          signal: never(),
          onText: rest.onText,
          resumeFrom: { text: '', segments: [{ channel: { kind: 'reasoning' }, text: 'Let me think' }], outputTokens: 5 },
        },
      );
      // The suffix ("\n</think>\n\n") is forced: no more reasoning text, then answer text.
      assert.ok(
        rest.pieces.every((p) => p.channel?.kind !== 'reasoning' || p.text === ''),
        JSON.stringify(rest.pieces),
      );
      assert.ok(r.outputTokens - 5 >= 10, 'the suffix and more were generated');
    }
  });
});

describe('OutputSplitter', () => {
  const run = (mode: 'auto' | 'forced', chunks: string[], single = false) => {
    let n = 0;
    const s = new OutputSplitter({
      mode,
      syntax: PLAIN_CALL_SYNTAX,
      single,
      newCallId: () => `call_${++n}`,
      thought: { prefix: '<think>\n', suffix: '\n</think>', openOnStart: false },
    });
    const out: ChannelPiece[] = [];
    for (const c of chunks) out.push(...s.push({ text: c, tokens: 1 }));
    out.push(...s.finish());
    return { out, tokens: out.reduce((a, p) => a + p.tokens, 0) };
  };

  it('parses auto calls in the template syntax out of answer text, split anywhere', () => {
    const text =
      'Hi <think>\nhmm\n</think>there <tool_call>\n{"name": "f", "arguments": {"a": "}"}}\n</tool_call> bye<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>';
    for (const size of [1, 2, 3, 7, text.length]) {
      const chunks = text.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g'))!;
      const { out, tokens } = run('auto', chunks);
      assert.equal(tokens, chunks.length, 'every token is carried');
      const by = (k: string | undefined) =>
        out
          .filter((p) => (p.channel?.kind ?? undefined) === k)
          .map((p) => p.text)
          .join('');
      assert.equal(by(undefined), 'Hi there  bye');
      assert.equal(by('reasoning'), 'hmm');
      const calls = out.filter((p) => p.channel?.kind === 'function_call');
      assert.deepEqual(
        [...new Set(calls.map((p) => JSON.stringify(p.channel)))],
        [
          JSON.stringify({ kind: 'function_call', callId: 'call_1', name: 'f' }),
          JSON.stringify({ kind: 'function_call', callId: 'call_2', name: 'g' }),
        ],
      );
      assert.equal(calls.map((p) => p.text).join(''), '{"a": "}"}{}');
    }
  });

  it('forced: calls only, the separator between them hidden; single stops after one', () => {
    const text = '<tool_call>\n{"name": "f", "arguments": {"x": [1, 2]}}\n</tool_call>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>';
    const { out } = run('forced', [...text]);
    assert.ok(out.every((p) => p.channel?.kind === 'function_call'));
    assert.equal(out.map((p) => p.text).join(''), '{"x": [1, 2]}{}');
    const single = new OutputSplitter({ mode: 'forced', syntax: PLAIN_CALL_SYNTAX, single: true });
    for (const c of text.slice(0, text.indexOf('</tool_call>') + 12)) single.push({ text: c, tokens: 1 });
    assert.ok(single.done);
  });

  it('restore renders delivered segments in the syntax and continues the open call', () => {
    const s = new OutputSplitter({ mode: 'auto', syntax: PLAIN_CALL_SYNTAX, single: false });
    const ch: OutputChannel = { kind: 'function_call', callId: 'call_x', name: 'f' };
    const r = s.restore([{ text: 'Hi ' }, { channel: ch, text: '{"a": ' }]);
    assert.equal(r.text, 'Hi <tool_call>\n{"name": "f", "arguments": {"a": ');
    assert.equal(r.callText, 'f", "arguments": {"a": ');
    const out = [...s.push({ text: '1}}\n</tool_call> ok', tokens: 3 }), ...s.finish()];
    assert.deepEqual(
      out.map((p) => [p.text, p.channel && 'callId' in p.channel ? p.channel.callId : undefined]),
      [
        ['1}', 'call_x'],
        [' ok', undefined],
      ],
    );
  });
});
