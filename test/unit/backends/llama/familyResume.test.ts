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
import { callsOf, collector, segmentsOf, type Piece } from '../../../support/pieces';

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

/** One family's file and what of its syntax may never reach reasoning or answer text. */
interface Family {
  id: 'qwen3' | 'gpt-oss';
  /** A tool choice that makes the generation a call from its first token. */
  forced: GenerateRequest['toolChoice'];
  /** Syntax strings of the family (in a call's own channel, Qwen 3's `<tool_call>` is its markup, not text). */
  syntax: string[];
  /** Tokens a "none" budget forces to close a cut thought (Qwen 3 `</think>`, Harmony `<|end|>` + the final header). */
  closeTokens: number;
}

const FAMILIES: Family[] = [
  {
    id: 'qwen3',
    forced: { name: 'get_weather' },
    syntax: ['<tool_call>', '</tool_call>', '<think>', '</think>', '<|im_end|>', '<|im_start|>'],
    closeTokens: 0,
  },
  {
    // Harmony: calls in the commentary channel end the generation with `<|call|>`; thoughts in the analysis channel
    // are closed by `<|end|><|start|>assistant<|channel|>final<|message|>` (6 tokens).
    id: 'gpt-oss',
    forced: 'required',
    syntax: ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|constrain|>', '<|call|>', '<|return|>', 'to=functions.'],
    closeTokens: 6,
  },
];

for (const family of FAMILIES) {
  describe(`resume on the ${family.id} family file`, () => {
    const backend = new LlamaBackend({ models: [{ id: family.id, source: familyModelPath(family.id) }], threads: 1, concurrency: 1 });
    after(() => backend.dispose());
    const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
      model: family.id,
      instructions: 'You are a test.',
      messages: [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }],
      ...over,
    });
    /** No family syntax in reasoning or answer text (a call's arguments are checked as JSON instead). */
    const noSyntax = (pieces: readonly Piece[]) => {
      for (const p of pieces) {
        if (p.channel?.kind === 'function_call') continue;
        for (const s of family.syntax) assert.ok(!p.text.includes(s), `${s} in ${JSON.stringify(p)}`);
      }
    };

    it('forced, cut mid-arguments: the same call goes on, nothing emitted twice, valid arguments, then the generation ends', async () => {
      let resumed = 0;
      for (const seed of [1, 2, 3, 4, 5, 6]) {
        const req = request({ tools: TOOLS, toolChoice: family.forced, seed, temperature: 1, maxOutputTokens: 200 });
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
        const resumedCalls = callsOf(rest.pieces);
        assert.equal(resumedCalls.length, 1, JSON.stringify(rest.pieces));
        assert.equal(resumedCalls[0]!.callId, before[0]!.callId, 'the call continues in the same callId');
        assert.ok(!resumedCalls[0]!.arguments.startsWith(before[0]!.arguments), 'delivered text is not emitted again');
        validArgs(before[0]!.arguments + resumedCalls[0]!.arguments);
        noSyntax([...first.pieces, ...rest.pieces]);
        resumed++;
      }
      assert.ok(resumed >= 2, `only ${resumed} generations were cut mid-arguments`);
    });

    it('cut mid-thought: "none" closes the thought at once, then answer text without the family\'s syntax', async () => {
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
        assert.ok(r.outputTokens > 6 + family.closeTokens, `${r.outputTokens} output tokens: the close and more were generated`);
        noSyntax(rest.pieces);
      }
    });

    it('resumed mid-thought with a budget left: reasoning first, no family syntax in reasoning or answer', async () => {
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

    if (family.id !== 'gpt-oss') return;

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
  });
}

/** Arguments of the get_weather call that keep its schema (a maxLength counted in code points, as JSON Schema counts). */
function validArgs(text: string): void {
  const args = JSON.parse(text) as Record<string, unknown>;
  assert.deepEqual(Object.keys(args).sort(), ['city', 'days', 'unit'], JSON.stringify(args));
  assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, JSON.stringify(args));
  assert.ok(Number.isInteger(args.days) && ['c', 'f'].includes(args.unit as string), JSON.stringify(args));
}
