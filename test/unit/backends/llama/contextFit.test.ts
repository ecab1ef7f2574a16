// Prompt + max_output_tokens must fit a local model's context (issue #19 item 4, src/backends/llama/contextFit.ts):
// an explicit budget that cannot fit is refused at create (RequestRefusedError context_length_exceeded, param
// max_output_tokens) with the model loaded (exactly, to the token) and before a load as far as the context's bound
// (--context-size N, the trained context from the file header) decides; what create could not decide fails the task when it starts; an "up to" budget (capMaxOutputTokens) is
// never refused for its size and is capped to the room. Real tiny demo model (trained context 2048).
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { KeepAliveTimers } from '../../../../src/backends/llama/keepAlive';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { BackendError, RequestRefusedError, type GenerateRequest } from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';

const never = () => new AbortController().signal;
const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({
  model: '',
  messages: [{ role: 'user', content: 'Tell a story.' }],
  temperature: 0,
  ...over,
});
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
});
