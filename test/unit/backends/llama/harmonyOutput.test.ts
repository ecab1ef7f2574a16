// gpt-oss's own output syntax on the real gpt-oss tokenizer (issue 39): what the model writes in Harmony —
// `auto` calls in each header form Harmony allows, several calls in one stream, a call after an analysis message, two
// analysis messages in a row — becomes function_call and reasoning items, and none of its syntax reaches answer text.
// The random-weight family file cannot be made to write these texts, so the texts are tokenized by the file's own
// tokenizer (special tokens parsed, as the model emits them) and fed token by token through the path a generation
// takes (sequenceGeneration.ts): the plan the backend makes for the request (outputPlan.ts: call syntax, grammar,
// splitter), the call grammar checking each token as sampling would (a token it rejects fails the test), the token
// text stream, an end-of-generation token ending the output (llama.cpp: `<|call|>` and `<|return|>`), and the
// runtime's assembler making the items every door shows (Responses items; chat completions' tool_calls, Messages'
// tool_use blocks and the editor's tool-call parts are made of the same items). The real backend on the same file
// (cut and resumed calls and thoughts) is familyResume.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ChatWrapper, Llama, LlamaModel, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { acceptDeliveredTokens } from '../../../../src/backends/llama/grammar';
import { chatWrapperFor } from '../../../../src/backends/llama/modelLoad';
import { importNodeLlamaCpp, type NodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { planOutput } from '../../../../src/backends/llama/outputPlan';
import { TokenTextStream } from '../../../../src/backends/llama/tokenTextStream';
import type { GenerateRequest, ToolDefinition } from '../../../../src/runtime/backend';
import { itemObject, OutputAssembler } from '../../../../src/runtime/outputItems';
import { familyModelPath } from '../../../fixtures/testModel';

const TOOLS: ToolDefinition[] = [
  {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer' } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
  { name: 'get_time', parameters: {} },
];

/** Harmony's tokens and call prefix: none of them is ever answer or reasoning text. */
const HARMONY_SYNTAX = ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>', 'to=functions.'];

const ARGS = '{"city":"Paris","days":3}';

describe('gpt-oss (Harmony) output through the backend plan, on the real tokenizer', () => {
  let nlc: NodeLlamaCpp;
  let llama: Llama;
  let model: LlamaModel;
  let chatWrapper: ChatWrapper | undefined;
  before(async () => {
    nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, logLevel: nlc.LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: familyModelPath('gpt-oss') });
    chatWrapper = chatWrapperFor(nlc, model);
  });
  after(async () => {
    await model?.dispose();
  });

  /**
   * `raw` as the model's tokens through the generation path. `yieldEog`: end-of-generation tokens are yielded as
   * text (LlamaBackendOptions.suppressEndOfGeneration) instead of ending the output.
   */
  async function generate(raw: string, over: Partial<GenerateRequest> = {}, yieldEog = false) {
    const request: GenerateRequest = { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], tools: TOOLS, toolChoice: 'auto', ...over };
    const tokenize = (t: string) => model.tokenize(t, false, 'trimLeadingSpace');
    const plan = await planOutput(nlc, { llama, model, ...(chatWrapper ? { chatWrapper } : {}) }, request, undefined, tokenize);
    assert.ok(plan);
    const stream = new TokenTextStream((t, last) => model.detokenize(t as Token[], plan.specialText, last as Token[]));
    const assembler = new OutputAssembler('msg_h');
    const pieces: Array<{ text: string; tokens: number; channel?: unknown }> = [];
    const route = (out: ReturnType<typeof plan.splitter.push>) => {
      for (const p of out) {
        pieces.push(p);
        assembler.push(p.text, p.channel);
      }
    };
    let tokens = 0;
    for (const token of model.tokenize(raw, true)) {
      const eog = model.isEogToken(token);
      if (eog && !yieldEog) break; // evaluate() ends on it: not yielded, not counted
      // Sampling under the call grammar where the plan has one now: the token must be one it admits.
      const grammar = plan.grammar();
      if (grammar && !eog) acceptDeliveredTokens(grammar, [token]);
      plan.onToken(token);
      tokens++;
      const piece = stream.push(token);
      if (piece) route(plan.splitter.push(piece));
      if (plan.splitter.done) break;
    }
    const rest = stream.flush();
    if (rest) route(plan.splitter.push(rest));
    route(plan.splitter.finish());
    assembler.finish();
    const items = assembler.items;
    for (const item of items) {
      const text = item.type === 'reasoning' ? item.text : item.arguments;
      for (const s of HARMONY_SYNTAX) assert.ok(!text.includes(s), `${s} in ${JSON.stringify(item)}`);
    }
    for (const s of HARMONY_SYNTAX) assert.ok(!assembler.text.includes(s), `${s} in the answer ${JSON.stringify(assembler.text)}`);
    assert.equal(
      pieces.reduce((n, p) => n + p.tokens, 0),
      tokens,
      'every token is carried by a piece',
    );
    return {
      answer: assembler.text,
      reasoning: items.filter((i) => i.type === 'reasoning').map((i) => (i.type === 'reasoning' ? i.text : '')),
      calls: items.filter((i) => i.type === 'function_call').map((i) => itemObject(i, 'completed')),
      done: plan.splitter.done,
    };
  }

  const call = (name: string, args: string) => ({ type: 'function_call', name, arguments: args, status: 'completed' });
  const shape = (calls: Array<Record<string, unknown>>) =>
    calls.map((c) => ({ type: c['type'], name: c['name'], arguments: c['arguments'], status: c['status'] }));

  it('auto: a call in each header form Harmony allows is a function_call item, none of its syntax in the answer', async () => {
    const forms = [
      // What gpt-oss writes: the recipient after the channel, a space, the JSON content type.
      `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}<|call|>`,
      // node-llama-cpp's HarmonyChatWrapper: no space before <|constrain|>.
      `<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>${ARGS}<|call|>`,
      // The recipient in the header before the channel (OpenAI's template), content type as a word.
      ` to=functions.get_weather<|channel|>commentary json<|message|>${ARGS}<|call|>`,
      ` to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>${ARGS}<|call|>`,
      // Without a content type.
      `<|channel|>commentary to=functions.get_weather<|message|>${ARGS}<|call|>`,
      ` to=functions.get_weather<|channel|>commentary<|message|>${ARGS}<|call|>`,
    ];
    for (const raw of forms) {
      const r = await generate(raw);
      assert.deepEqual(shape(r.calls), [call('get_weather', ARGS)], raw);
      assert.equal(r.answer, '', raw);
      assert.deepEqual(r.reasoning, [], raw);
      const callId = r.calls[0]!['call_id'] as string;
      assert.match(callId, /^call_[0-9a-f]{24}$/);
    }
  });

  it('a call after an analysis message: one reasoning item, then the call', async () => {
    const raw = `<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}<|call|>`;
    const r = await generate(raw, { reasoningEffort: 'high' });
    assert.deepEqual(r.reasoning, ['Need the weather.']);
    assert.deepEqual(shape(r.calls), [call('get_weather', ARGS)]);
    assert.equal(r.answer, '');
  });

  it('several calls in one stream (end-of-generation tokens yielded): each its own item; parallel_tool_calls false stops after one', async () => {
    const raw =
      `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}<|call|>` +
      `<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>` +
      `<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Oslo","days":1}<|call|>`;
    const r = await generate(raw, {}, true);
    assert.deepEqual(shape(r.calls), [call('get_weather', ARGS), call('get_time', '{}'), call('get_weather', '{"city":"Oslo","days":1}')]);
    assert.equal(new Set(r.calls.map((c) => c['call_id'])).size, 3);
    assert.equal(r.answer, '');
    const single = await generate(raw, { parallelToolCalls: false }, true);
    assert.deepEqual(shape(single.calls), [call('get_weather', ARGS)]);
    assert.ok(single.done);
  });

  it('a call ends the generation: <|call|> is an end-of-generation token, the call grammar ends at the arguments', async () => {
    // Without the call's end spelled out: the grammar, complete after the arguments, admits only the end of generation.
    const r = await generate(`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}`);
    assert.deepEqual(shape(r.calls), [call('get_weather', ARGS)]);
    const plan = await planOutput(
      nlc,
      { llama, model, ...(chatWrapper ? { chatWrapper } : {}) },
      { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], tools: TOOLS, toolChoice: 'auto' },
      undefined,
      (t) => model.tokenize(t, false),
    );
    plan!.splitter.push({ text: ` to=functions.get_time<|constrain|>json<|message|>{}`, tokens: 1 });
    const grammar = plan!.grammar()!;
    const text = model.tokenize('<', false);
    assert.throws(() => acceptDeliveredTokens(grammar, text), /does not fit/, 'nothing but the end may follow the arguments');
  });

  it('two analysis messages in one turn are one reasoning item; headers reach neither reasoning nor answer', async () => {
    const raw =
      '<|channel|>analysis<|message|>First, the city.<|end|><|start|>assistant<|channel|>analysis<|message|> Then the days.<|end|>' +
      '<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>';
    for (const over of [{}, { tools: undefined, toolChoice: undefined }]) {
      const r = await generate(raw, { reasoningEffort: 'high', ...over });
      // One item, the messages a paragraph apart (the space after a header is syntax, as after any thought delimiter).
      assert.deepEqual(r.reasoning, ['First, the city.\n\nThen the days.']);
      assert.equal(r.answer, 'It is sunny.');
      assert.deepEqual(r.calls, []);
    }
  });

  it('a commentary preamble before a call is answer text; its header is not', async () => {
    const raw =
      '<|channel|>commentary<|message|>Checking the weather.<|end|>' +
      `<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGS}<|call|>`;
    const r = await generate(raw);
    assert.equal(r.answer, 'Checking the weather.');
    assert.deepEqual(shape(r.calls), [call('get_weather', ARGS)]);
  });
});
