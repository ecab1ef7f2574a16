// Which stop string ended a remote engine's output: vLLM names it in the finish chunk's `choices[0].stop_reason`
// (a number there is a stop token's id), llama.cpp server's chat stream names none. Through the real runtime on the
// scripted engine (fixtures/fakeEngine.ts): the string lands on the stored response as `task_runtime.stop_sequence`
// only when the engine names one of the request's stop strings (never guessed), and it is still there after the
// runtime is closed and opened again on the same data directory.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { RemoteBackend } from '../../../../src/backends/remote/remoteBackend';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import type { TaskRecord } from '../../../../src/runtime/task';
import { FLAVORS, flavorStream, startFakeEngine, type EngineFlavor, type FakeEngine } from '../../../fixtures/fakeEngine';
import { tempDir } from '../../runtime/helpers';

const root = tempDir('tr-remote-stop-');
let dirs = 0;
const engines: FakeEngine[] = [];
const runtimes: TaskRuntime[] = [];
after(async () => {
  for (const r of runtimes) await r.close();
  for (const e of engines) await e.close();
});

/** A runtime on an engine of `flavor` whose finish chunk's choice carries `finishFields`. */
async function setup(flavor: EngineFlavor, finishFields: Record<string, unknown>, finish = 'stop', dataDir = `${root}/${++dirs}`) {
  const e = await startFakeEngine(flavorStream(flavor, ['Hello', ', '], finish, { prompt: 7 }, finishFields), ['m1'], flavor);
  engines.push(e);
  const backend = new RemoteBackend([{ name: 'e', urls: [e.base], kind: flavor.name }]);
  await backend.refresh();
  const runtime = await TaskRuntime.open({ dataDir, backend });
  runtimes.push(runtime);
  return { runtime, backend, dataDir };
}

async function run(runtime: TaskRuntime, stop: string[] | undefined): Promise<TaskRecord> {
  const input = { model: 'e/m1', input: 'Hi', max_output_tokens: 16, ...(stop ? { task_runtime: { stop } } : {}) };
  const done = await runtime.waitForTerminal(runtime.createTask({ origin: 'lmsp', principal: 'p', input }).task.id);
  assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
  return done;
}

const vendor = (t: TaskRecord | undefined) => (t?.response as { task_runtime?: Record<string, unknown> } | undefined)?.task_runtime;

describe('the stop string a remote engine says ended the output', () => {
  it("vLLM names one of the request's stop strings: kept on the response, also after a restart", async () => {
    const { runtime, dataDir } = await setup(FLAVORS.vllm, { stop_reason: 'world' });
    const done = await run(runtime, ['\n\n', 'world']);
    assert.deepEqual(vendor(done), { stop_sequence: 'world' });
    const sent = engines.at(-1)!.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
    assert.deepEqual(sent.stop, ['\n\n', 'world']);
    await runtime.close();
    runtimes.splice(runtimes.indexOf(runtime), 1);
    const reopened = await TaskRuntime.open({ dataDir, backend: new RemoteBackend([{ name: 'e', urls: [engines.at(-1)!.base], kind: 'vllm' }]) });
    runtimes.push(reopened);
    assert.deepEqual(vendor(reopened.getTask(done.id)), { stop_sequence: 'world' }, 'part of the stored response');
  });

  it('names nothing when the engine names no string: a token id, null, a string the request did not give, no stop asked', async () => {
    for (const [finishFields, stop] of [
      [{ stop_reason: 2 }, ['world']],
      [{ stop_reason: null }, ['world']],
      [{ stop_reason: 'other' }, ['world']],
      [{ stop_reason: 'world' }, undefined],
    ] as const) {
      const { runtime } = await setup(FLAVORS.vllm, finishFields);
      const done = await run(runtime, stop ? [...stop] : undefined);
      assert.equal(vendor(done), undefined, JSON.stringify(finishFields));
      assert.equal((done.response as { status: string }).status, 'completed');
    }
  });

  it("llama.cpp server's chat stream names no stop string: none is guessed, though the request gave one", async () => {
    const { runtime } = await setup(FLAVORS['llama.cpp'], {});
    const done = await run(runtime, ['world']);
    assert.equal(vendor(done), undefined);
  });

  it('an output cut at the token limit names none, whatever the engine says', async () => {
    const { runtime } = await setup(FLAVORS.vllm, { stop_reason: 'world' }, 'length');
    const done = await run(runtime, ['world']);
    assert.equal((done.response as { status: string }).status, 'incomplete');
    assert.equal(vendor(done), undefined);
  });
});
