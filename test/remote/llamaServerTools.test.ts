// Function tools, schemas and reasoning passed through the real llama.cpp server (issue #19 items 2, 3 and 7): a
// forced call (tool_choice "required", and a named one — sent as that tool alone with "required", quirks.ts) comes
// back as a function_call item whose arguments validate against the tool's schema (ajv); a text.format json_schema
// validates; a model whose chat template opens a thought gives a reasoning item; reasoning.effort is taken by kind
// llama.cpp and refused (400, param reasoning.effort) by a kind that has no such field.
// The noise model follows the grammar llama-server builds from the chat template (its "differential autoparser",
// common/chat-auto-parser-generator.cpp): with TOOLS_CHAT_TEMPLATE as is, that grammar lets any text that does not
// contain "<tool_call>" come before a required call, and the noise never writes it (measured: 120 tokens of text,
// finish "length"). The test template wraps assistant text in <answer>…</answer>, which the autoparser reads as
// "content always wrapped": then only "<answer>" or "<tool_call>" may start the output, and at temperature 0 this
// model takes "<tool_call>" (measured: the call ends after ~110 tokens, mostly whitespace the grammar allows).
// llama-server's jinja template engine is on by default in the bundled build (common.h use_jinja = true), so no
// --jinja flag is needed. Run with: node scripts/remote-engine/run.mjs.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import { writeTestModel } from '../../src/backends/llama/demoModel';
import { REASONING_CHAT_TEMPLATE, TOOLS_CHAT_TEMPLATE } from '../fixtures/chatTemplates';
import { RemoteBackend } from '../../src/backends/remote/remoteBackend';
import type { GenerateRequest, OutputChannel } from '../../src/runtime/backend';
import { startLlamaServer, type LlamaServer } from '../fixtures/llamaServer';
import { lmspWaitTerminal, startServe, type Serve } from '../fixtures/serveProcess';

const PLAIN_ASSISTANT = `        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}`;
const TEXT_BEFORE_CALLS = "        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n";

/** TOOLS_CHAT_TEMPLATE with assistant text wrapped in <answer>…</answer> and no text before a message's calls. */
function wrappedAnswerTemplate(): string {
  assert.ok(
    TOOLS_CHAT_TEMPLATE.includes(PLAIN_ASSISTANT) && TOOLS_CHAT_TEMPLATE.includes(TEXT_BEFORE_CALLS),
    'TOOLS_CHAT_TEMPLATE changed: update this test template',
  );
  return TOOLS_CHAT_TEMPLATE.replace(TEXT_BEFORE_CALLS, '').replace(
    PLAIN_ASSISTANT,
    `        {%- if message.role == "assistant" %}{{- '<|im_start|>assistant\\n<answer>' + message.content + '</answer><|im_end|>\\n' }}{%- else %}\n${PLAIN_ASSISTANT}\n        {%- endif %}`,
  );
}

/** REASONING_CHAT_TEMPLATE whose generation prompt opens the thought (as DeepSeek-R1's and Qwen 3's thinking templates do). */
function openThoughtTemplate(): string {
  const gen = "    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}";
  assert.ok(REASONING_CHAT_TEMPLATE.endsWith(gen), 'REASONING_CHAT_TEMPLATE changed: update this test template');
  return `${REASONING_CHAT_TEMPLATE.slice(0, -gen.length)}    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}`;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-engine-tools-'));
process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
function model(name: string, chatTemplate: string): string {
  const file = path.join(dir, name);
  writeTestModel(file, { seed: 1, embd: 256, layers: 4, contextLength: 8192, chatTemplate });
  return file;
}

const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const TIME = { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'], additionalProperties: false };

describe('function tools and schemas through a llama.cpp server', () => {
  let server: LlamaServer;
  let backend: RemoteBackend;
  let serve: Serve;
  before(async () => {
    server = await startLlamaServer({ model: model('tools.gguf', wrappedAnswerTemplate()) });
    backend = new RemoteBackend([{ name: 'x', urls: [server.base], kind: 'llama.cpp' }]);
    await backend.refresh();
    serve = await startServe(['--engine', `x=${server.base}`, '--engine-kind', 'x=llama.cpp']);
  });
  after(async () => {
    await serve?.stop();
    await server?.kill();
  });

  async function generate(over: Partial<GenerateRequest>) {
    const pieces: Array<{ text: string; channel?: OutputChannel }> = [];
    const request: GenerateRequest = {
      model: 'x/tiny',
      messages: [{ role: 'user', content: 'Weather?' }],
      maxOutputTokens: 300,
      temperature: 0,
      ...over,
    };
    backend.checkRequest(request, { onRestart: 'retry' });
    const result = await backend.generate(request, {
      signal: new AbortController().signal,
      onText: (text, _n, _lp, channel) => pieces.push({ text, channel }),
    });
    const calls = new Map<string, { name: string; arguments: string }>();
    for (const p of pieces) {
      if (p.channel?.kind !== 'function_call') continue;
      const c = calls.get(p.channel.callId) ?? { name: p.channel.name, arguments: '' };
      c.arguments += p.text;
      calls.set(p.channel.callId, c);
    }
    return {
      result,
      pieces,
      calls: [...calls.values()],
      text: pieces
        .filter((p) => !p.channel)
        .map((p) => p.text)
        .join(''),
    };
  }

  it('tool_choice "required": one call, arguments valid against the schema, finish stop; no answer text', async () => {
    const validate = new Ajv().compile(WEATHER);
    const { result, calls, text } = await generate({
      tools: [{ name: 'get_weather', description: 'The weather', parameters: WEATHER }],
      toolChoice: 'required',
      parallelToolCalls: false,
    });
    assert.equal(result.finishReason, 'stop');
    assert.equal(text, '');
    assert.equal(calls.length, 1, JSON.stringify(calls));
    assert.equal(calls[0].name, 'get_weather');
    const args: unknown = JSON.parse(calls[0].arguments);
    assert.ok(validate(args), `${calls[0].arguments}: ${JSON.stringify(validate.errors)}`);
  });

  it('a named choice among two tools: a call of that tool, valid against its schema', async () => {
    const validate = new Ajv().compile(TIME);
    const tools = [
      { name: 'get_weather', parameters: WEATHER },
      { name: 'get_time', parameters: TIME },
    ];
    const { calls } = await generate({ tools, toolChoice: { name: 'get_time' } });
    assert.ok(calls.length >= 1);
    for (const c of calls) {
      assert.equal(c.name, 'get_time');
      assert.ok(validate(JSON.parse(c.arguments)), c.arguments);
    }
  });

  it('through serve --engine: a forced call is a function_call item with its stream events; the next turn takes it back with its function_call_output', async () => {
    const validate = new Ajv().compile(WEATHER);
    const tools = [{ type: 'function', name: 'get_weather', parameters: WEATHER, strict: true }];
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: {
        model: 'x/tiny',
        input: 'Weather?',
        max_output_tokens: 300,
        temperature: 0,
        tools,
        tool_choice: { type: 'function', name: 'get_weather' },
      },
    });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const call = (done.response.output as Array<Record<string, string>>).find((o) => o.type === 'function_call');
    assert.ok(call, JSON.stringify(done.response.output));
    assert.equal(call.name, 'get_weather');
    assert.match(call.call_id, /^\S+$/);
    assert.ok(validate(JSON.parse(call.arguments)), `${call.arguments}: ${JSON.stringify(validate.errors)}`);
    const events = await fetch(`${serve.lmsp}/tasks/${created.json.id}/events`, { headers: { authorization: `Bearer ${serve.token}` } }).then((r) =>
      r.text(),
    );
    for (const ty of ['response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done'])
      assert.ok(events.includes(`event: ${ty}`), ty);
    // The round trip: the call and its output go back as assistant tool_calls and a tool message, which the
    // engine's template renders (it would answer 400 for a malformed history). The next turn is forced too: free
    // text of the noise model does not parse as this template's wrapped answer ("does not match the expected
    // peg-native format"), a call does.
    const next = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: {
        model: 'x/tiny',
        max_output_tokens: 300,
        temperature: 0,
        tools,
        tool_choice: 'required',
        input: [
          { role: 'user', content: 'Weather?' },
          { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
          { type: 'function_call_output', call_id: call.call_id, output: 'cold' },
        ],
      },
    });
    assert.equal(next.status, 202, JSON.stringify(next.json));
    const answered = await lmspWaitTerminal(serve, next.json.id);
    assert.equal(answered.status, 'succeeded', JSON.stringify(answered.error));
    const again = (answered.response.output as Array<Record<string, string>>).find((o) => o.type === 'function_call');
    assert.ok(again && validate(JSON.parse(again.arguments)), JSON.stringify(answered.response.output));
    assert.notEqual(again.call_id, call.call_id);
  });

  it('through serve --engine: a text.format json_schema task returns JSON valid against the schema', async () => {
    const schema = {
      type: 'object',
      properties: { color: { enum: ['red', 'green'] }, n: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['color', 'n'],
      additionalProperties: false,
    };
    const validate = new Ajv().compile(schema);
    for (const seed of [1, 2]) {
      const created = await serve.lmspCall('POST', '/tasks', {
        type: 'response',
        input: {
          model: 'x/tiny',
          input: 'JSON',
          max_output_tokens: 200,
          temperature: 1,
          task_runtime: { seed },
          text: { format: { type: 'json_schema', name: 'pick', schema, strict: true } },
        },
      });
      assert.equal(created.status, 202, JSON.stringify(created.json));
      const done = await lmspWaitTerminal(serve, created.json.id);
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      const text = done.response.output[0].content[0].text as string;
      assert.ok(validate(JSON.parse(text)), `${text}: ${JSON.stringify(validate.errors)}`);
    }
  });
});

describe('reasoning through a llama.cpp server', () => {
  let server: LlamaServer;
  let serve: Serve;
  before(async () => {
    server = await startLlamaServer({ model: model('reasoning.gguf', openThoughtTemplate()) });
    serve = await startServe([
      '--engine',
      `x=${server.base}`,
      '--engine-kind',
      'x=llama.cpp',
      '--engine',
      `y=${server.base}`,
      '--engine-kind',
      'y=lmstudio',
    ]);
  });
  after(async () => {
    await serve?.stop();
    await server?.kill();
  });

  it('reasoning_content becomes a reasoning item with reasoning events; reasoning.effort is taken', async () => {
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model: 'x/tiny', input: 'Think.', max_output_tokens: 8, temperature: 0, reasoning: { effort: 'low' } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const output = done.response.output as Array<{ type: string; content?: Array<{ text: string }> }>;
    const reasoning = output.find((o) => o.type === 'reasoning');
    assert.ok(reasoning, JSON.stringify(output));
    assert.ok(reasoning.content!.map((c) => c.text).join('').length > 0);
    assert.equal(done.response.usage.output_tokens, 8);
    const events = await fetch(`${serve.lmsp}/tasks/${created.json.id}/events`, { headers: { authorization: `Bearer ${serve.token}` } }).then((r) =>
      r.text(),
    );
    assert.ok(events.includes('event: response.reasoning_text.delta'));
  });

  it('reasoning.effort on an engine kind without the field: 400 unsupported_capability naming it', async () => {
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model: 'y/tiny', input: 'Think.', max_output_tokens: 8, reasoning: { effort: 'low' } },
    });
    assert.equal(created.status, 400, JSON.stringify(created.json));
    assert.match(JSON.stringify(created.json), /reasoning\.effort/);
    assert.match(JSON.stringify(created.json), /unsupported_capability/);
  });
});
