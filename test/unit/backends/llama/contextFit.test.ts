// Prompt + max_output_tokens must fit a local model's context (issue #19 item 4, src/backends/llama/contextFit.ts):
// an explicit budget that cannot fit is refused at create (RequestRefusedError context_length_exceeded, param
// max_output_tokens) with the model loaded (exactly, to the token) and before a load as far as the context's bound
// (--context-size N, the trained context from the file header) decides; what create could not decide fails the task when it starts; an "up to" budget (capMaxOutputTokens) is
// never refused for its size and is capped to the room. Real tiny demo model (trained context 2048).
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { KeepAliveTimers } from '../../../../src/backends/llama/keepAlive';
import { keptTextBytes, longestTokenBytes } from '../../../../src/backends/llama/contextFit';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { BackendError, RequestRefusedError, type GenerateRequest } from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';

const never = () => new AbortController().signal;
const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
  model: '',
  messages: [{ role: 'user', content: 'Tell a story.' }],
  temperature: 0,
  ...over,
});
/** The test model's vocabulary as its file stores it. */
async function tinyVocabulary(): Promise<string[]> {
  const info = await (await importNodeLlamaCpp()).readGgufFileInfo(testModelPath(), { readTensorInfo: false });
  return info.metadata.tokenizer.ggml.tokens as string[];
}
const refusedFor = (param: string) => (e: unknown) => e instanceof RequestRefusedError && e.code === 'context_length_exceeded' && e.param === param;

/** Keep-alive timers fired by the test. */
function manualTimers(): KeepAliveTimers & { fire(): void } {
  const due = new Map<number, () => void>();
  let next = 1;
  return {
    setTimeout: (callback) => (due.set(next, callback), next++),
    clearTimeout: (handle) => void due.delete(handle as number),
    fire: () => {
      const all = [...due.values()];
      due.clear();
      for (const f of all) f();
    },
  };
}

describe('LlamaBackend: prompt + max_output_tokens within the context', () => {
  const backends: LlamaBackend[] = [];
  const make = (over: Partial<ConstructorParameters<typeof LlamaBackend>[0]> = {}) => {
    const b = new LlamaBackend({ models: [{ source: testModelPath() }], threads: 1, suppressEndOfGeneration: true, ...over });
    backends.push(b);
    return b;
  };
  after(async () => {
    for (const b of backends) await b.dispose();
  });

  it('loaded: refuses one token over the context, to the token, naming max_output_tokens; an "up to" budget is capped', async () => {
    const backend = make({ contextSize: 256 });
    const first = await backend.generate(request({ maxOutputTokens: 1 }), { signal: never(), onText: () => {} });
    const room = 256 - first.inputTokens;
    backend.checkRequest(request({ maxOutputTokens: room }));
    assert.throws(() => backend.checkRequest(request({ maxOutputTokens: room + 1 })), refusedFor('max_output_tokens'));
    assert.throws(
      () => backend.checkRequest(request({ maxOutputTokens: room + 1 })),
      new RegExp(`context is 256 tokens; the input is ${first.inputTokens} tokens and the output budget ${room + 1}`),
    );
    assert.throws(() => backend.checkRequest(request({ messages: [{ role: 'user', content: 'word '.repeat(300) }] })), refusedFor('input'));
    // A default the caller did not choose: accepted, and the output ends where the context does.
    const upTo = request({ maxOutputTokens: 100_000, capMaxOutputTokens: true });
    backend.checkRequest(upTo);
    const capped = await backend.generate(upTo, { signal: never(), onText: () => {} });
    assert.deepEqual([capped.finishReason, capped.outputTokens], ['max_output_tokens', room]);
  });

  it('not loaded, --context-size N: a budget of N or more is refused without a load; a closer call fails at start', async () => {
    const backend = make({ contextSize: 256 });
    assert.throws(() => backend.checkRequest(request({ maxOutputTokens: 256 })), refusedFor('max_output_tokens'));
    assert.throws(() => backend.checkRequest(request({ maxOutputTokens: 256 })), /context is at most 256 tokens/);
    backend.checkRequest(request({ maxOutputTokens: 100_000, capMaxOutputTokens: true }));
    // 255 + a prompt of more than one token cannot fit, but the prompt's tokens are unknown before the load.
    backend.checkRequest(request({ maxOutputTokens: 255 }));
    assert.equal(backend.listModels()[0]!.state, 'unloaded', 'create never loads the model');
    await assert.rejects(
      backend.generate(request({ maxOutputTokens: 255 }), { signal: never(), onText: () => assert.fail('no token is generated') }),
      (e: unknown) =>
        e instanceof BackendError && e.kind === 'failed' && e.code === 'context_length_exceeded' && /the output budget 255/.test(e.message),
    );
  });

  it('not loaded, --context-size auto: bounded by the trained context from the file header (prepare), kept after an unload', async () => {
    const timers = manualTimers();
    const backend = make({ keepAliveMs: 60_000, timers });
    // Nothing known yet (a backend no runtime has opened): decided when the task starts.
    backend.checkRequest(request({ maxOutputTokens: 100_000 }));
    await backend.prepare();
    assert.deepEqual([backend.listModels()[0]!.state, backend.listModels()[0]!.maxContextLength], ['unloaded', 2048]);
    assert.throws(() => backend.checkRequest(request({ maxOutputTokens: 2048 })), refusedFor('max_output_tokens'));
    backend.checkRequest(request({ maxOutputTokens: 2047 }));
    await assert.rejects(
      backend.generate(request({ maxOutputTokens: 2047 }), { signal: never(), onText: () => {} }),
      (e: unknown) => e instanceof BackendError && e.code === 'context_length_exceeded',
    );
    assert.equal(backend.listModels()[0]!.state, 'loaded');
    timers.fire();
    assert.equal(backend.listModels()[0]!.state, 'unloaded', 'the keep-alive unloaded it');
    assert.throws(() => backend.checkRequest(request({ maxOutputTokens: 2048 })), refusedFor('max_output_tokens'));
  });

  it('a prompt whose bytes alone cannot fit is refused before the tokenizer: at start before a load, at create after', async () => {
    const backend = make({ contextSize: 256 });
    const huge = request({ messages: [{ role: 'user', content: 'ab '.repeat(1_300_000) }] });
    const bytes = 3 * 1_300_000 - 1;
    // Before a load the vocabulary is unknown: accepted at create, refused when the task starts, no token generated.
    backend.checkRequest(huge);
    await assert.rejects(
      backend.generate(huge, { signal: never(), onText: () => assert.fail('no token is generated') }),
      (e: unknown) =>
        e instanceof BackendError && e.code === 'context_length_exceeded' && e.message.includes(`tokens or more (${bytes} bytes of text)`),
    );
    // Loaded: the floor's wording (the exact count would say "the input is N tokens, which").
    assert.throws(() => backend.checkRequest(huge), refusedFor('input'));
    assert.throws(
      () => backend.checkRequest(huge),
      new RegExp(`context is 256 tokens; the input is \\d+ tokens or more \\(${bytes} bytes of text\\)`),
    );
    // An assistant turn's text is not counted (a template may drop it): the exact count decides that one.
    const history = request({
      messages: [
        { role: 'assistant', content: 'ab '.repeat(1_000) },
        { role: 'user', content: 'hi' },
      ],
    });
    assert.throws(
      () => backend.checkRequest(history),
      (e: unknown) => refusedFor('input')(e) && !/or more/.test((e as Error).message),
    );
  });

  it('the floor never exceeds the exact count (ASCII, accents, CJK, emoji, whitespace runs)', async () => {
    const backend = make({ contextSize: 4096 });
    await backend.load('tiny-test');
    const longest = longestTokenBytes(await tinyVocabulary())!;
    const texts = ['Tell a story.', 'é'.repeat(500), '日本語のテキスト'.repeat(40), '😀🎉'.repeat(100), ' \n\t '.repeat(200), 'x'.repeat(1500)];
    for (const content of texts) {
      const r = request({ instructions: 'Be brief.', messages: [{ role: 'user', content }] });
      const exact = backend.countPromptTokens(r)!;
      assert.ok(Math.ceil(keptTextBytes(r) / longest) <= exact, `floor ≤ ${exact} for ${JSON.stringify(content.slice(0, 12))}`);
    }
  });
});

describe('longestTokenBytes', () => {
  it('is the longest stored token in UTF-8 bytes, never shorter than what it decodes to', () => {
    assert.equal(longestTokenBytes(['a', '\u2581the', '<0x0A>', 'é']), 6);
    assert.equal(longestTokenBytes(['\u2581\u2581\u2581']), 9);
    assert.equal(longestTokenBytes([]), undefined);
    assert.equal(longestTokenBytes(undefined), undefined);
  });
});
