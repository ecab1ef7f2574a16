// Thought segments of local models become reasoning, never answer text (#39 item 3). Two levels:
// - where raw text becomes items: each family's real node-llama-cpp chat wrapper (Qwen 3's `<think>`, gpt-oss's
//   Harmony analysis channel) gives the thought syntax (thoughtSyntax.ts), the splitter cuts a raw output written in
//   that family's syntax — whitespace as the model may or may not write it, split at every size — and the runtime's
//   assembler makes the items: a reasoning item with the thought, an answer with none of it or its delimiters;
// - on the tiny random-weight model with a Qwen 3-style template that opens `<think>` in its generation prompt: the
//   prompt ends inside the thought, a seeded generation is reasoning until the thought budget forces `</think>`, then
//   answer text; with `reasoning.effort: "none"` there is no reasoning at all.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { importNodeLlamaCpp, type NodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { thoughtSyntaxOf, type ThoughtSyntax } from '../../../../src/backends/llama/thoughtSyntax';
import { OutputSplitter, PLAIN_CALL_SYNTAX, type ChannelPiece } from '../../../../src/backends/llama/toolCalls';
import type { GenerateRequest, OutputChannel } from '../../../../src/runtime/backend';
import { OutputAssembler } from '../../../../src/runtime/outputItems';
import { OPEN_THOUGHT_CHAT_TEMPLATE, REASONING_CHAT_TEMPLATE } from '../../../fixtures/chatTemplates';

/** Raw output through the splitter in chunks of `size` characters, then the runtime's assembler. */
function split(thought: ThoughtSyntax, raw: string, size: number) {
  const splitter = new OutputSplitter({ mode: 'none', syntax: PLAIN_CALL_SYNTAX, single: false, thought });
  const chunks = raw.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g')) ?? [];
  const pieces: ChannelPiece[] = [];
  for (const c of chunks) pieces.push(...splitter.push({ text: c, tokens: 1 }));
  pieces.push(...splitter.finish());
  const assembler = new OutputAssembler('msg_t');
  for (const p of pieces) assembler.push(p.text, p.channel);
  assembler.finish();
  const reasoning = assembler.items.filter((i) => i.type === 'reasoning').map((i) => (i.type === 'reasoning' ? i.text : ''));
  return { answer: assembler.text, reasoning, tokens: pieces.reduce((n, p) => n + p.tokens, 0), chunks: chunks.length };
}

describe('thought syntax per family, where raw text becomes items', () => {
  let nlc: NodeLlamaCpp;
  before(async () => {
    nlc = await importNodeLlamaCpp();
  });

  it('Qwen 3 (<think>): the thought is a reasoning item, with or without the newlines the template writes', () => {
    const thought = thoughtSyntaxOf(new nlc.QwenChatWrapper());
    assert.ok(thought, 'QwenChatWrapper has a thought segment');
    const outputs = [
      '<think>\nThe user greets me.\n</think>\n\nHello!',
      '<think>The user greets me.</think>Hello!',
      '<think>\n\nThe user greets me.\n\n</think>\n\n\nHello!',
    ];
    for (const raw of outputs) {
      for (const size of [1, 2, 3, 5, raw.length]) {
        const r = split(thought, raw, size);
        assert.equal(r.answer, 'Hello!', `${JSON.stringify(raw)} in chunks of ${size}`);
        assert.deepEqual(r.reasoning, ['The user greets me.'], `${JSON.stringify(raw)} in chunks of ${size}`);
        assert.equal(r.tokens, r.chunks, 'every token is carried');
      }
    }
  });

  it('gpt-oss (Harmony): the analysis channel is reasoning; message headers and ends never reach the answer', () => {
    const thought = thoughtSyntaxOf(new nlc.HarmonyChatWrapper());
    assert.ok(thought, 'HarmonyChatWrapper has a thought segment');
    const cases: Array<[string, string, string[]]> = [
      ['<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!', 'Hello!', ['User says hi.']],
      ['<|channel|>final<|message|>Hello!', 'Hello!', []],
      [
        '<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis<|message|>Two.<|end|><|start|>assistant<|channel|>final<|message|>Hi',
        'Hi',
        // Two analysis messages in a row are one run of reasoning: one item, a paragraph apart.
        ['One.\n\nTwo.'],
      ],
    ];
    for (const [raw, answer, reasoning] of cases) {
      for (const size of [1, 4, 9, raw.length]) {
        const r = split(thought, raw, size);
        assert.equal(r.answer, answer, `${JSON.stringify(raw)} in chunks of ${size}`);
        assert.deepEqual(r.reasoning, reasoning, `${JSON.stringify(raw)} in chunks of ${size}`);
      }
    }
  });

  it("gpt-oss through a Jinja rendering of its template (the thought's suffix found with the final header) splits the same", () => {
    // What JinjaTemplateChatWrapper reads out of a Harmony template: the suffix runs up to the answer's own header.
    const jinja = {
      wrapperName: 'JinjaTemplate',
      settings: {
        segments: { thought: { prefix: '<|channel|>analysis<|message|>', suffix: '<|end|><|start|>assistant<|channel|>final<|message|>' } },
      },
    };
    const thought = thoughtSyntaxOf(jinja as never);
    assert.equal(thought?.suffix, '<|end|>');
    const raw =
      '<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis<|message|>Two.<|end|><|start|>assistant<|channel|>final<|message|>Hi';
    for (const size of [1, 5, raw.length]) {
      const r = split(thought!, raw, size);
      assert.equal(r.answer, 'Hi');
      assert.deepEqual(r.reasoning, ['One.\n\nTwo.']);
    }
    const s = new OutputSplitter({ mode: 'none', syntax: PLAIN_CALL_SYNTAX, single: false, thought: thought! });
    assert.equal(
      s.restore([{ channel: { kind: 'reasoning' }, text: 'T' }, { text: 'A' }]).text,
      '<|channel|>analysis<|message|>T<|end|><|start|>assistant<|channel|>final<|message|>A',
    );
  });

  it('a resume renders delivered reasoning and answer back in the family syntax', () => {
    const harmony = new OutputSplitter({
      mode: 'none',
      syntax: PLAIN_CALL_SYNTAX,
      single: false,
      thought: thoughtSyntaxOf(new nlc.HarmonyChatWrapper()),
    });
    const reasoning: OutputChannel = { kind: 'reasoning' };
    assert.equal(
      harmony.restore([{ channel: reasoning, text: 'Think.' }, { text: 'Hel' }]).text,
      '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hel',
    );
    const qwen = new OutputSplitter({ mode: 'none', syntax: PLAIN_CALL_SYNTAX, single: false, thought: thoughtSyntaxOf(new nlc.QwenChatWrapper()) });
    assert.equal(qwen.restore([{ channel: reasoning, text: 'Think.' }, { text: 'Hel' }]).text, '<think>\nThink.\n</think>Hel');
  });

  it('a wrapper without a thought segment has no thought syntax (Llama 3.1)', () => {
    assert.equal(thoughtSyntaxOf(new nlc.Llama3_1ChatWrapper()), undefined);
  });
});

describe('a Qwen 3-style thinker on the tiny model (its template opens <think> in the generation prompt)', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-thoughts-'));
  const thinker = path.join(tmp, 'thinker.gguf');
  const hybrid = path.join(tmp, 'hybrid.gguf');
  writeTestModel(thinker, { seed: 1, chatTemplate: OPEN_THOUGHT_CHAT_TEMPLATE });
  writeTestModel(hybrid, { seed: 1, chatTemplate: REASONING_CHAT_TEMPLATE });
  const backend = new LlamaBackend({ models: [{ source: thinker }, { source: hybrid }], suppressEndOfGeneration: true });
  after(async () => {
    await backend.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const request = (model: string, over: Partial<GenerateRequest> = {}): GenerateRequest => ({
    model,
    messages: [{ role: 'user', content: 'Say hi.' }],
    seed: 7,
    temperature: 1,
    ...over,
  });
  const generate = async (req: GenerateRequest) => {
    const assembler = new OutputAssembler('msg_x');
    const channels: Array<OutputChannel | undefined> = [];
    const r = await backend.generate(req, {
      signal: new AbortController().signal,
      onText: (text, _tokens, _lp, channel) => {
        channels.push(channel);
        assembler.push(text, channel);
      },
    });
    assembler.finish();
    const reasoning = assembler.items.flatMap((i) => (i.type === 'reasoning' ? [i.text] : []));
    return { r, answer: assembler.text, reasoning, channels };
  };

  it('the prompt ends inside the thought only for the template that opens it', async () => {
    assert.notEqual(OPEN_THOUGHT_CHAT_TEMPLATE, REASONING_CHAT_TEMPLATE);
    await backend.load('thinker');
    await backend.load('hybrid');
    const opened = backend.countPromptTokens(request('thinker'))!;
    const plain = backend.countPromptTokens(request('hybrid'))!;
    const think = backend.countTokens('thinker', '<think>\n')!;
    // The same conversation; the thinker's prompt has `<think>\n` more (the demo vocabulary spells it in characters;
    // counted alone, the text gets the tokenizer's leading space too).
    assert.ok(opened > plain && opened - plain >= think - 1 && opened - plain <= think, `${opened} vs ${plain} (+${think})`);
    // A forced format starts the output outside any thought: no thought opened for it.
    const constrained = backend.countPromptTokens(request('thinker', { format: { type: 'json_object' } }))!;
    assert.equal(constrained, plain);
  });

  it('a seeded generation is reasoning until the thought budget closes it, then the answer', async () => {
    // reasoning.effort "minimal": 128 thought tokens, then the template's `\n</think>\n\n` is forced.
    const { r, answer, reasoning, channels } = await generate(request('thinker', { reasoningEffort: 'minimal', maxOutputTokens: 170 }));
    assert.equal(r.outputTokens, 170);
    assert.equal(channels[0]?.kind, 'reasoning', 'the output starts as reasoning');
    assert.equal(reasoning.length, 1, JSON.stringify(reasoning));
    assert.ok(reasoning[0]!.length > 20, JSON.stringify(reasoning));
    assert.ok(answer.length > 0, 'answer text follows the thought');
    assert.ok(!answer.includes('</think>') && !answer.includes(reasoning[0]!.slice(0, 20)), JSON.stringify(answer));
    assert.ok(!/^\s/.test(answer), `the newlines after </think> are syntax: ${JSON.stringify(answer)}`);
  });

  it('reasoning.effort "none" closes the thought at once: answer text only', async () => {
    const { answer, reasoning } = await generate(request('thinker', { reasoningEffort: 'none', maxOutputTokens: 30 }));
    assert.ok(
      reasoning.every((t) => t === ''),
      JSON.stringify(reasoning),
    );
    assert.ok(answer.length > 0);
    assert.ok(!answer.includes('</think>'), JSON.stringify(answer));
  });
});
