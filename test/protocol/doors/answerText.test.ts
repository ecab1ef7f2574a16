// Reasoning never reaches answer text, through any door: a model that thinks before it answers (a backend that
// emits a thought segment, then the answer) is asked once per door with each door's real client — the OpenAI SDK on
// /responses (whole and streamed) and chat completions, the Anthropic SDK on /v1/messages, the MCP SDK's tools/call
// and get_task_text, LMSP's task object and event stream — and every answer field carries the answer alone, while the
// reasoning fields (where the door has them) carry the thought. The doors share one reader of answer text
// (runtime/responses.ts answerText, and answerTextDelta of responseEvents.ts for streams) and one of input text.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import OpenAI from 'openai';
import { writeTestModel } from '../../../src/backends/llama/demoModel';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { startEndpoint, type Endpoint } from '../../../src/protocols/endpoint';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { OPEN_THOUGHT_CHAT_TEMPLATE } from '../../fixtures/chatTemplates';
import { ScriptedBackend, type Script } from '../../fixtures/scriptedBackend';

const THOUGHT = 'THOUGHT-7f3a: the user wants a greeting, keep it short';
const ANSWER = 'Hello there.';
const TOKEN = 'tok-answer-text-0123456789';

/** A model that reasons first: the thought on the reasoning channel, then the answer. */
const thinksThenAnswers: Script = async (_req, o) => {
  o.onText(THOUGHT, 3, undefined, { kind: 'reasoning' });
  o.onText(ANSWER, 2);
  return { finishReason: 'stop', inputTokens: 4, outputTokens: 5 };
};

describe('answer text through every door', () => {
  let dataDir: string;
  let runtime: TaskRuntime;
  let endpoint: Endpoint;
  let mcp: Client;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-answer-text-'));
    runtime = await TaskRuntime.open({ dataDir, backend: new ScriptedBackend(thinksThenAnswers), deltaFlushMs: 0 });
    endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'alice']]) });
    mcp = new Client({ name: 'answer-text', version: '1.0.0' }, { capabilities: {} });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(endpoint.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
    );
  });

  after(async () => {
    await mcp?.close();
    await endpoint?.close();
    await runtime?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('/responses: output_text is the answer; the thought is a reasoning item', async () => {
    const openai = new OpenAI({ baseURL: endpoint.lmspUrl, apiKey: TOKEN, maxRetries: 0 });
    const r = await openai.responses.create({ model: 'm', input: 'hi' });
    assert.equal(r.output_text, ANSWER);
    const reasoning = r.output.filter((i) => i.type === 'reasoning');
    assert.ok(JSON.stringify(reasoning).includes(THOUGHT), JSON.stringify(r.output));
    // OPENAI-WIRE §3.2: the thought's tokens (3 of the 5) are counted as reasoning.
    assert.deepEqual(r.usage?.output_tokens_details, { reasoning_tokens: 3 });
    assert.equal(r.usage?.output_tokens, 5);
  });

  it('/responses streamed: output_text deltas are the answer, reasoning_text deltas the thought', async () => {
    const openai = new OpenAI({ baseURL: endpoint.lmspUrl, apiKey: TOKEN, maxRetries: 0 });
    let text = '';
    let thought = '';
    for await (const ev of await openai.responses.create({ model: 'm', input: 'hi', stream: true })) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      else if (ev.type === 'response.reasoning_text.delta') thought += ev.delta;
    }
    assert.equal(text, ANSWER);
    assert.equal(thought, THOUGHT);
    // The SDK's accumulator (content_part.added before reasoning_text deltas, OPENAI-WIRE §3.3) builds the same items.
    const final = await openai.responses.stream({ model: 'm', input: 'hi' }).finalResponse();
    const message = final.output.flatMap((i) => (i.type === 'message' ? i.content : []));
    assert.deepEqual(
      message.map((p) => (p.type === 'output_text' ? p.text : '')),
      [ANSWER],
    );
    const reasoning = final.output.find((i) => i.type === 'reasoning');
    assert.deepEqual(reasoning?.type === 'reasoning' ? reasoning.content : undefined, [{ type: 'reasoning_text', text: THOUGHT }]);
  });

  it("LMSP: the task's response and its event stream carry the answer in the message item alone", async () => {
    const openai = new OpenAI({ baseURL: endpoint.lmspUrl, apiKey: TOKEN, maxRetries: 0 });
    const r = await openai.responses.create({ model: 'm', input: 'hi' });
    const record = runtime.listTasks({ principal: 'alice' }).tasks.find((t) => t.responseId === r.id);
    assert.ok(record, 'the response has a task');
    const headers = { authorization: `Bearer ${TOKEN}` };
    const task = (await (await fetch(`${endpoint.lmspUrl}/tasks/${record.id}`, { headers })).json()) as { response: Record<string, unknown> };
    const output = task.response['output'] as Array<{ type: string; content?: Array<{ type: string; text: string }> }>;
    const message = output.filter((i) => i.type === 'message').flatMap((i) => i.content ?? []);
    assert.equal(message.map((p) => p.text).join(''), ANSWER);
    assert.ok(!JSON.stringify(message).includes(THOUGHT), JSON.stringify(output));
    const events = await (await fetch(`${endpoint.lmspUrl}/tasks/${record.id}/events`, { headers })).text();
    let streamed = '';
    for (const line of events.split('\n')) {
      if (!line.startsWith('data:')) continue;
      const ev = JSON.parse(line.slice(5)) as { type?: string; delta?: string };
      if (ev.type === 'response.output_text.delta') streamed += ev.delta ?? '';
    }
    assert.equal(streamed, ANSWER);
    assert.ok(events.includes('response.reasoning_text.delta'), 'the thought streams as reasoning');
  });

  it('chat completions: content is the answer, streamed or not', async () => {
    const openai = new OpenAI({ baseURL: endpoint.lmspUrl, apiKey: TOKEN, maxRetries: 0 });
    const c = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(c.choices[0].message.content, ANSWER);
    assert.equal(c.usage?.completion_tokens_details?.reasoning_tokens, 3);
    let streamed = '';
    for await (const chunk of await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })) {
      streamed += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(streamed, ANSWER);
  });

  it('Anthropic Messages: text blocks are the answer; the thought is a thinking block', async () => {
    const anthropic = new Anthropic({ baseURL: endpoint.anthropicUrl, apiKey: TOKEN, maxRetries: 0 });
    const m = await anthropic.messages.create({ model: 'm', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    const text = m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
    assert.equal(text, ANSWER);
    const thinking = m.content.flatMap((b) => (b.type === 'thinking' ? [b.thinking] : [])).join('');
    assert.equal(thinking, THOUGHT);
  });

  it('MCP: a tool result and get_task_text carry the answer alone (content and structuredContent)', async () => {
    const result = await mcp.callTool({ name: 'generate', arguments: { prompt: 'hi' } });
    const texts = (result.content as Array<{ type: string; text?: string }>).filter((c) => c.type === 'text').map((c) => c.text ?? '');
    assert.ok(texts.includes(ANSWER), JSON.stringify(result));
    assert.ok(!JSON.stringify(result).includes(THOUGHT), JSON.stringify(result));
    const [task] = runtime.listTasks({ principal: 'alice' }).tasks.filter((t) => t.origin === 'mcp');
    assert.ok(task, 'the MCP call made a task');
    const read = await mcp.callTool({ name: 'get_task_text', arguments: { taskId: task.id } });
    assert.ok(JSON.stringify(read).includes(ANSWER), JSON.stringify(read));
    assert.ok(!JSON.stringify(read).includes(THOUGHT), JSON.stringify(read));
  });
});

describe('a real thinker through the doors (the tiny model with a template that opens <think>)', () => {
  let dataDir: string;
  let runtime: TaskRuntime;
  let endpoint: Endpoint;
  let backend: LlamaBackend;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-answer-text-thinker-'));
    const model = path.join(dataDir, 'thinker.gguf');
    writeTestModel(model, { seed: 1, chatTemplate: OPEN_THOUGHT_CHAT_TEMPLATE });
    backend = new LlamaBackend({ models: [{ source: model }], suppressEndOfGeneration: true });
    runtime = await TaskRuntime.open({ dataDir: path.join(dataDir, 'store'), backend, deltaFlushMs: 0 });
    endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'alice']]) });
  });

  after(async () => {
    await endpoint?.close();
    await runtime?.close();
    await backend?.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('its thought streams as a reasoning item and stays out of output_text and chat content', async () => {
    const openai = new OpenAI({ baseURL: endpoint.lmspUrl, apiKey: TOKEN, maxRetries: 0 });
    // reasoning.effort "minimal": 128 thought tokens, then `</think>` is forced and the answer follows.
    const body = { model: 'thinker', input: 'Say hi.', reasoning: { effort: 'minimal' as const }, max_output_tokens: 170, temperature: 1 };
    const types: string[] = [];
    let thought = '';
    let text = '';
    const stream = openai.responses.stream({ ...body, ...({ task_runtime: { seed: 5 } } as object) });
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.reasoning_text.delta') thought += ev.delta;
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    const final = await stream.finalResponse();
    const at = (t: string) => types.indexOf(t);
    assert.ok(at('response.content_part.added') >= 0 && at('response.reasoning_text.delta') > 0, types.join(' '));
    assert.ok(thought.length > 20 && text.length > 0, JSON.stringify({ thought, text }));
    const reasoning = final.output.find((i) => i.type === 'reasoning');
    assert.deepEqual(reasoning?.type === 'reasoning' ? reasoning.content : undefined, [{ type: 'reasoning_text', text: thought }]);
    const message = final.output.flatMap((i) => (i.type === 'message' ? i.content : []));
    assert.equal(message.map((p) => (p.type === 'output_text' ? p.text : '')).join(''), text);
    assert.ok(!text.includes('</think>') && !text.includes(thought.slice(0, 16)), JSON.stringify(text));
    // 128 thought tokens (the budget), give or take the delimiters' tokens carried with the pieces around them.
    // (The output ends at max_output_tokens: `response.incomplete`, which the SDK's stream does not take as final.)
    const { usage } = await openai.responses.retrieve(final.id);
    const rt = usage?.output_tokens_details.reasoning_tokens ?? 0;
    assert.ok(rt >= 120 && rt <= 140 && rt < usage!.output_tokens, JSON.stringify(usage));

    const c = await openai.chat.completions.create({
      model: 'thinker',
      messages: [{ role: 'user', content: 'Say hi.' }],
      reasoning_effort: 'minimal',
      max_completion_tokens: 170,
      temperature: 1,
      seed: 5,
    });
    const content = c.choices[0].message.content ?? '';
    assert.ok(content.length > 0 && !content.includes('</think>'), JSON.stringify(content));
    assert.ok(!content.includes(thought.slice(0, 16)), 'no reasoning in chat content');
  });
});
