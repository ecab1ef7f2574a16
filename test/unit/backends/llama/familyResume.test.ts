// Resume on a real vocabulary (issue 39 item 6): the Qwen 3 family file (151 669 tokens, Qwen 3's own template and
// `<tool_call>` / `<think>` syntax) and the gpt-oss file (200 019 tokens, Harmony: commentary-channel calls that end
// the generation with `<|call|>`, analysis-channel thoughts; familyModel.ts) cut mid-call and mid-thought go on into
// valid output. A generation is stopped where a SIGKILL would leave it (its delivered pieces are what the store
// holds) and resumed from them in the way a restarted runtime resumes one without a snapshot: prompt + delivered text
// evaluated again (resume.test.ts covers the SIGKILL and the store around it on the demo model). The random weights
// write whatever they write; the grammar and the thought budget must still make it valid, with no family syntax in
// answer text. What gpt-oss writes that random weights do not (auto calls in its own syntax) is harmonyOutput.test.ts.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import type { GenerateRequest, OutputChannel, ToolDefinition } from '../../../../src/runtime/backend';
import { familyModelPath } from '../../../fixtures/testModel';
import { callsOf, collector, segmentsOf } from '../../../support/pieces';

const never = () => new AbortController().signal;

const TOOLS: ToolDefinition[] = [
  {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' }, unit: { enum: ['c', 'f'] } },
      required: ['city', 'days', 'unit'],
      additionalProperties: false,
    },
  },
];

const SYNTAX = ['<tool_call>', '</tool_call>', '<think>', '</think>', '<|im_end|>', '<|im_start|>'];

describe('resume on the Qwen 3 family file', () => {
  const backend = new LlamaBackend({ models: [{ id: 'qwen3', source: familyModelPath('qwen3') }], threads: 1, concurrency: 1 });
  after(() => backend.dispose());
  const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
    model: 'qwen3',
    instructions: 'You are a test.',
    messages: [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }],
    ...over,
  });

  it('cut mid-<tool_call> arguments: the same call goes on, nothing emitted twice, valid arguments', async () => {
    let resumed = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const req = request({ tools: TOOLS, toolChoice: { name: 'get_weather' }, seed, temperature: 1, maxOutputTokens: 200 });
      const ac = new AbortController();
      const first = collector((pieces) => (callsOf(pieces)[0]?.arguments.length ?? 0) >= 6, ac);
      const r1 = await backend.generate(req, { signal: ac.signal, onText: first.onText });
      if (r1.finishReason !== 'aborted') continue;
      const before = callsOf(first.pieces);
      assert.equal(before.length, 1);
      assert.throws(() => JSON.parse(before[0]!.arguments) as unknown, 'cut mid-arguments');
      const rest = collector();
      const r2 = await backend.generate(
        { ...req, seed: seed + 100 },
        {
          signal: never(),
          onText: rest.onText,
          resumeFrom: { text: '', segments: segmentsOf(first.pieces), outputTokens: first.pieces.reduce((s, p) => s + p.tokens, 0) },
        },
      );
      assert.equal(r2.finishReason, 'stop', JSON.stringify(rest.pieces));
      const after = callsOf(rest.pieces);
      assert.equal(after.length, 1, JSON.stringify(rest.pieces));
      assert.equal(after[0]!.callId, before[0]!.callId, 'the call continues in the same callId');
      assert.ok(!after[0]!.arguments.startsWith(before[0]!.arguments), 'delivered text is not emitted again');
      const args = JSON.parse(before[0]!.arguments + after[0]!.arguments) as Record<string, unknown>;
      assert.deepEqual(Object.keys(args).sort(), ['city', 'days', 'unit'], JSON.stringify(args));
      assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, JSON.stringify(args)); // code points, as JSON Schema counts
      assert.ok(Number.isInteger(args.days) && ['c', 'f'].includes(args.unit as string), JSON.stringify(args));
      for (const p of [...first.pieces, ...rest.pieces]) {
        for (const s of SYNTAX) assert.ok(!p.text.includes(s) || p.channel?.kind === 'function_call', `${s} in ${JSON.stringify(p)}`);
      }
      resumed++;
    }
    assert.ok(resumed >= 2, `only ${resumed} generations were cut mid-arguments`);
  });

  it('cut mid-<think>: the thought goes on as reasoning, the budget closes it, the answer holds no thought syntax', async () => {
    for (const seed of [1, 2, 3]) {
      const rest = collector();
      const r = await backend.generate(request({ reasoningEffort: 'none', seed, temperature: 1, maxOutputTokens: 40 }), {
        signal: never(),
        onText: rest.onText,
        resumeFrom: { text: '', segments: [{ channel: { kind: 'reasoning' }, text: 'Let me think about Par' }], outputTokens: 6 },
      });
      // 'none' closes the thought at once: Qwen 3's suffix is forced, then answer text.
      assert.ok(
        rest.pieces.every((p) => p.channel?.kind !== 'reasoning' || p.text === ''),
        JSON.stringify(rest.pieces),
      );
      assert.ok(r.outputTokens > 6, 'the suffix and more were generated');
      const answer = rest.pieces
        .filter((p) => !p.channel)
        .map((p) => p.text)
        .join('');
      for (const s of SYNTAX) assert.ok(!answer.includes(s), `${s} in the answer: ${JSON.stringify(answer)}`);
    }
  });

  it('resumed mid-<think> with a budget left: reasoning first, never in the answer', async () => {
    const rest = collector();
    await backend.generate(request({ reasoningEffort: 'low', seed: 4, temperature: 1, maxOutputTokens: 60 }), {
      signal: never(),
      onText: rest.onText,
      resumeFrom: { text: '', segments: [{ channel: { kind: 'reasoning' }, text: 'Let me think' }], outputTokens: 4 },
    });
    const firstText = rest.pieces.find((p) => p.text !== '');
    assert.equal(firstText?.channel?.kind, 'reasoning', JSON.stringify(rest.pieces));
    const answer = rest.pieces
      .filter((p) => !p.channel)
      .map((p) => p.text)
      .join('');
    for (const s of SYNTAX) assert.ok(!answer.includes(s), `${s} in the answer: ${JSON.stringify(answer)}`);
  });
});

// The same on the gpt-oss family file (200 019 tokens, HarmonyChatWrapper): calls in Harmony's commentary channel,
// `<|call|>` ending the generation, thoughts in the analysis channel closed by `<|end|>` and the final header.
const HARMONY_SYNTAX = ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>', 'to=functions.'];

describe('resume on the gpt-oss family file', () => {
  const backend = new LlamaBackend({ models: [{ id: 'gpt-oss', source: familyModelPath('gpt-oss') }], threads: 1, concurrency: 1 });
  after(() => backend.dispose());
  const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
    model: 'gpt-oss',
    instructions: 'You are a test.',
    messages: [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }],
    ...over,
  });
  const noSyntax = (pieces: readonly { text: string; channel?: { kind: string } }[]) => {
    for (const p of pieces) for (const s of HARMONY_SYNTAX) assert.ok(!p.text.includes(s), `${s} in ${JSON.stringify(p)}`);
  };
  const validArgs = (text: string) => {
    const args = JSON.parse(text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(args).sort(), ['city', 'days', 'unit'], JSON.stringify(args));
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, JSON.stringify(args));
    assert.ok(Number.isInteger(args.days) && ['c', 'f'].includes(args.unit as string), JSON.stringify(args));
  };

  it('forced, cut mid-arguments: the same call goes on, nothing emitted twice, valid arguments, then the generation ends', async () => {
    let resumed = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const req = request({ tools: TOOLS, toolChoice: 'required', seed, temperature: 1, maxOutputTokens: 200 });
      const ac = new AbortController();
      const first = collector((pieces) => (callsOf(pieces)[0]?.arguments.length ?? 0) >= 6, ac);
      const r1 = await backend.generate(req, { signal: ac.signal, onText: first.onText });
      if (r1.finishReason !== 'aborted') continue;
      const before = callsOf(first.pieces);
      assert.equal(before.length, 1);
      assert.throws(() => JSON.parse(before[0]!.arguments) as unknown, 'cut mid-arguments');
      const rest = collector();
      const r2 = await backend.generate(
        { ...req, seed: seed + 100 },
        {
          signal: never(),
          onText: rest.onText,
          resumeFrom: { text: '', segments: segmentsOf(first.pieces), outputTokens: first.pieces.reduce((s, p) => s + p.tokens, 0) },
        },
      );
      assert.equal(r2.finishReason, 'stop', JSON.stringify(rest.pieces));
      const after = callsOf(rest.pieces);
      assert.equal(after.length, 1, JSON.stringify(rest.pieces));
      assert.equal(after[0]!.callId, before[0]!.callId, 'the call continues in the same callId');
      assert.ok(!after[0]!.arguments.startsWith(before[0]!.arguments), 'delivered text is not emitted again');
      validArgs(before[0]!.arguments + after[0]!.arguments);
      noSyntax([...first.pieces, ...rest.pieces]);
      resumed++;
    }
    assert.ok(resumed >= 2, `only ${resumed} generations were cut mid-arguments`);
  });

  it('auto, cut mid-arguments of a call after an analysis message: the call goes on under its grammar and ends the output', async () => {
    const channel: OutputChannel = { kind: 'function_call', callId: 'call_0123456789abcdef01234567', name: 'get_weather' };
    for (const seed of [1, 2, 3, 4]) {
      const rest = collector();
      const r = await backend.generate(request({ tools: TOOLS, toolChoice: 'auto', seed, temperature: 1, maxOutputTokens: 200 }), {
        signal: never(),
        onText: rest.onText,
        resumeFrom: {
          text: '',
          segments: [
            { channel: { kind: 'reasoning' }, text: 'The user wants the weather.' },
            { channel, text: '{"city": "Pa' },
          ],
          outputTokens: 12,
        },
      });
      // The grammar, complete after the arguments, admits only an end of generation (`<|call|>`).
      assert.equal(r.finishReason, 'stop', JSON.stringify(rest.pieces));
      assert.ok(
        rest.pieces.every((p) => JSON.stringify(p.channel) === JSON.stringify(channel)),
        JSON.stringify(rest.pieces),
      );
      validArgs('{"city": "Pa' + rest.pieces.map((p) => p.text).join(''));
      noSyntax(rest.pieces);
      assert.equal(
        rest.pieces.reduce((s, p) => s + p.tokens, 0),
        r.outputTokens - 12,
      );
    }
  });

  it('cut mid-analysis: "none" forces <|end|> and the final header at once, then answer text without Harmony syntax', async () => {
    for (const seed of [1, 2, 3]) {
      const rest = collector();
      const r = await backend.generate(request({ reasoningEffort: 'none', seed, temperature: 1, maxOutputTokens: 40 }), {
        signal: never(),
        onText: rest.onText,
        resumeFrom: { text: '', segments: [{ channel: { kind: 'reasoning' }, text: 'Let me think about Par' }], outputTokens: 6 },
      });
      assert.ok(
        rest.pieces.every((p) => p.channel?.kind !== 'reasoning' || p.text === ''),
        JSON.stringify(rest.pieces),
      );
      // `<|end|><|start|>assistant<|channel|>final<|message|>` is 6 tokens: more were generated after it.
      assert.ok(r.outputTokens > 6 + 6, `${r.outputTokens} output tokens`);
      noSyntax(rest.pieces);
    }
  });

  it('resumed mid-analysis with a budget left: reasoning first, never Harmony syntax in reasoning or answer', async () => {
    const rest = collector();
    await backend.generate(request({ reasoningEffort: 'low', seed: 4, temperature: 1, maxOutputTokens: 60 }), {
      signal: never(),
      onText: rest.onText,
      resumeFrom: { text: '', segments: [{ channel: { kind: 'reasoning' }, text: 'Let me think' }], outputTokens: 4 },
    });
    const firstText = rest.pieces.find((p) => p.text !== '');
    assert.equal(firstText?.channel?.kind, 'reasoning', JSON.stringify(rest.pieces));
    noSyntax(rest.pieces);
  });
});
