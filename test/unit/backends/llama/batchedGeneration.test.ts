// Several generations in one batched context of the real tiny demo model (issue #20): each gets its own output
// (the same text as when it runs alone), a prompt prefix kept from the previous generation is reused and reported,
// resume continues its own text while other generations decode beside it, and an idle model unloads after the
// keep-alive (timers driven by the test) and loads again for the next generation.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { KeepAliveTimers } from '../../../../src/backends/llama/keepAlive';
import { parseKeepAlive } from '../../../../src/backends/llama/keepAlive';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import type { GenerateRequest, GenerateResult, GenerationSnapshot } from '../../../../src/runtime/backend';
import { testModelPath } from '../../../fixtures/testModel';

const never = () => new AbortController().signal;

/** Timers the test fires by hand. */
class ManualTimers implements KeepAliveTimers {
  readonly pending = new Map<number, { callback: () => void; ms: number }>();
  private next = 1;
  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.set(id, { callback, ms });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  fireAll(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    for (const t of due) t.callback();
  }
}

const ask = (content: string, over: Partial<GenerateRequest> = {}): GenerateRequest => ({
  model: '',
  instructions: 'You are a test.',
  messages: [{ role: 'user', content }],
  maxOutputTokens: 24,
  temperature: 0,
  ...over,
});

async function run(backend: LlamaBackend, request: GenerateRequest, signal = never()): Promise<{ text: string; result: GenerateResult }> {
  let text = '';
  const result = await backend.generate(request, { signal, onText: (t) => (text += t) });
  return { text, result };
}

describe('LlamaBackend: one batched context per model', () => {
  const timers = new ManualTimers();
  let backend: LlamaBackend;
  let tmp: string;
  const logs: string[] = [];
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-batch-'));
    backend = new LlamaBackend({
      models: [{ id: 'tiny', source: testModelPath() }],
      threads: 1,
      contextSize: 1024,
      concurrency: 4,
      keepAliveMs: 60_000,
      timers,
      suppressEndOfGeneration: true,
      log: (m) => logs.push(m),
    });
  });
  after(async () => {
    await backend?.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('runs four generations at once, each with the text it gets alone', async () => {
    const prompts = ['alpha beta', 'gamma delta epsilon', 'one two three four', 'the end'];
    assert.deepEqual(backend.concurrency('tiny'), { group: 'model:tiny', limit: 4 }, 'a numeric setting is known before the load');
    const alone: string[] = [];
    for (const p of prompts) alone.push((await run(backend, ask(p))).text);
    const together = await Promise.all(prompts.map((p) => run(backend, ask(p))));
    for (let i = 0; i < prompts.length; i++) {
      assert.equal(together[i]!.result.outputTokens, 24);
      assert.equal(together[i]!.text, alone[i], `generation ${i} has its own text`);
    }
    assert.equal(new Set(alone).size, prompts.length, 'the outputs differ by prompt');
    const info = backend.listModels()[0]!;
    assert.equal(info.state, 'loaded');
    assert.equal(info.concurrency, 4);
    assert.equal(info.hardware?.sequences, 4);
    assert.ok(
      logs.some((l) => /4 sequence\(s\) batched/.test(l)),
      'the load log says how many',
    );
  });

  it('reuses a long shared prompt prefix and reports it as cached input', async () => {
    const system = 'You are a careful assistant. ' + 'Follow the rules of the house and answer briefly. '.repeat(6);
    const first = await run(backend, ask('first question', { instructions: system }));
    const second = await run(backend, ask('second question', { instructions: system }));
    assert.ok((second.result.cachedInputTokens ?? 0) > 100, `cached ${second.result.cachedInputTokens}`);
    assert.ok(second.result.cachedInputTokens! < second.result.inputTokens);
    assert.ok((first.result.cachedInputTokens ?? 0) < 50, "only the template's opening was kept before");
    // Reused or not, the text is the same as from an empty sequence: rerun while the other sequences hold other text.
    const fresh = new LlamaBackend({
      models: [{ id: 'tiny', source: testModelPath() }],
      threads: 1,
      contextSize: 1024,
      concurrency: 1,
      keepAliveMs: 0,
      suppressEndOfGeneration: true,
    });
    try {
      const cold = await run(fresh, ask('second question', { instructions: system }));
      assert.equal(cold.result.cachedInputTokens, undefined);
      assert.equal(second.text, cold.text);
    } finally {
      await fresh.dispose();
    }
  });

  it('resume continues its own text while other generations decode in the same batch', async () => {
    const request = ask('resume me please', { maxOutputTokens: 40 });
    const reference = (await run(backend, request)).text;
    const ac = new AbortController();
    const snaps: GenerationSnapshot[] = [];
    let partial = '';
    let tokens = 0;
    const others = ['noise one', 'noise two', 'noise three'].map((p) => run(backend, ask(p, { maxOutputTokens: 40 })));
    const cut = await backend.generate(request, {
      signal: ac.signal,
      onText: (t, n) => {
        partial += t;
        tokens += n;
        if (tokens >= 15) ac.abort();
      },
      snapshots: { dir: tmp, everyMs: 0, minReevalMs: 0, onSnapshot: (s) => snaps.push(s) },
    });
    await Promise.all(others);
    assert.equal(cut.finishReason, 'aborted');
    assert.ok(reference.startsWith(partial));
    const snap = snaps[snaps.length - 1]!;
    for (const snapshot of [snap, undefined]) {
      let rest = '';
      const busy = ['noise four', 'noise five'].map((p) => run(backend, ask(p, { maxOutputTokens: 40 })));
      const resumed = await backend.generate(request, {
        signal: never(),
        onText: (t) => (rest += t),
        resumeFrom: { snapshot, text: partial, outputTokens: tokens },
      });
      await Promise.all(busy);
      assert.equal(partial + rest, reference, snapshot ? 'from the snapshot' : 'from prompt + delivered text');
      assert.equal(resumed.outputTokens, 40);
    }
  });

  it('unloads after the keep-alive with no task and loads again for the next one', async () => {
    assert.equal(backend.listModels()[0]!.state, 'loaded');
    assert.equal(timers.pending.size, 1, 'a keep-alive timer runs while the model is idle');
    assert.equal([...timers.pending.values()][0]!.ms, 60_000);
    const running = run(backend, ask('keep me'));
    assert.equal(timers.pending.size, 0, 'a task cancels it');
    await running;
    timers.fireAll();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(backend.listModels()[0]!.state, 'unloaded');
    assert.equal(backend.listModels()[0]!.concurrency, undefined);
    const again = await run(backend, ask('alpha beta'));
    assert.equal(again.result.outputTokens, 24);
    assert.equal(backend.listModels()[0]!.state, 'loaded');
  });

  it('parses keep-alive values like Ollama', () => {
    assert.equal(parseKeepAlive('5m'), 300_000);
    assert.equal(parseKeepAlive('0'), 0);
    assert.equal(parseKeepAlive(30), 30_000);
    assert.equal(parseKeepAlive('1h'), 3_600_000);
    assert.equal(parseKeepAlive('-1'), undefined);
    assert.equal(parseKeepAlive('soon'), undefined);
  });
});
