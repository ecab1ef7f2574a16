// llama.cpp server's router mode on the real engine (the release we build has it: `llama-server --models-dir`), as
// one engine with several models behind `serve --engine`: both models of the directory listed with their states;
// with room for one model at a time (--models-max 1) tasks alternating between them all succeed while the router
// swaps them; a model that went to sleep (--sleep-idle-seconds) is waited for, not failed; on a router that does not
// start models by itself (--no-models-autoload) a task for an unloaded model starts it (GET /props with autoload=true,
// answered once it runs) and runs.
// Run with: node scripts/remote-engine/run.mjs (builds llama-server on first use).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeTestModel } from '../../src/backends/llama/demoModel';
import { startLlamaServer, type LlamaServer } from '../fixtures/llamaServer';
import { lmspWaitTerminal, startServe, type Serve } from '../fixtures/serveProcess';

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The router's own word for a model's status (GET /models). */
async function routerStatus(s: LlamaServer, id: string): Promise<string | undefined> {
  const list = (await (await fetch(`${s.url}/models`)).json()) as { data: Array<{ id: string; status: { value: string } }> };
  return list.data.find((m) => m.id === id)?.status.value;
}

describe('a llama.cpp server in router mode as one engine with several models', () => {
  let dir: string;
  let router: LlamaServer;
  let manual: LlamaServer;
  let serve: Serve;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-router-models-'));
    writeTestModel(path.join(dir, 'alpha.gguf'), { seed: 1, embd: 64, layers: 2, contextLength: 2048 });
    writeTestModel(path.join(dir, 'beta.gguf'), { seed: 2, embd: 64, layers: 2, contextLength: 2048 });
    [router, manual] = await Promise.all([
      startLlamaServer({ modelsDir: dir, ctx: 2048, extraArgs: ['--models-max', '1', '--sleep-idle-seconds', '2'] }),
      startLlamaServer({ modelsDir: dir, ctx: 2048, extraArgs: ['--no-models-autoload'] }),
    ]);
    serve = await startServe(['--engine', `lc=${router.base}`, '--engine', `manual=${manual.base}`, '--engine-kind', 'lc=llama.cpp']);
  });
  after(async () => {
    await serve?.stop();
    await Promise.all([router?.kill(), manual?.kill()]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function run(model: string) {
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model, input: 'Hello', max_output_tokens: 6, temperature: 0 },
    });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    return lmspWaitTerminal(serve, created.json.id);
  }

  it('lists both models of the directory with their states, and says router mode in the log', async () => {
    const models = (await serve.lmspCall('GET', '/models')).json.data as Array<{ id: string; state: string }>;
    assert.deepEqual(
      models.filter((m) => m.id.startsWith('lc/')).map((m) => [m.id, m.state]),
      [
        ['lc/alpha', 'unloaded'],
        ['lc/beta', 'unloaded'],
      ],
    );
    assert.match(serve.stderr(), /engine lc: http:\/\/127\.0\.0\.1:\d+\/v1 up, 2 model\(s\) \(llama\.cpp router mode\)/);
  });

  it('tasks alternating between two models, one loaded at a time: all succeed while the router swaps them', async () => {
    for (const model of ['lc/alpha', 'lc/beta', 'lc/alpha', 'lc/beta']) {
      const done = await run(model);
      assert.equal(done.status, 'succeeded', `${model}: ${JSON.stringify(done.error)}`);
      assert.equal(done.response.usage.output_tokens, 6);
    }
    assert.equal(await routerStatus(router, 'alpha'), 'unloaded', '--models-max 1: alpha made room for beta');
  });

  it('a sleeping model is waited for, not failed', async () => {
    await until('beta asleep', async () => (await routerStatus(router, 'beta')) === 'sleeping');
    const done = await run('lc/beta');
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(await routerStatus(router, 'beta'), 'loaded');
  });

  it('without autoload, a task for an unloaded model starts it and runs', async () => {
    assert.equal(await routerStatus(manual, 'beta'), 'unloaded');
    const done = await run('manual/beta');
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(await routerStatus(manual, 'beta'), 'loaded');
  });
});
