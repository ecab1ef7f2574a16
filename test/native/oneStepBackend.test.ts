// Through our whole generation path (LlamaBackend on the patched native build: chat template, stop strings, the JSON
// schema grammar, seeded sampling, top logprobs — sampleToken's probabilities — and 3 requests batched on one
// context), one native step per token (oneStep.ts) gives the same text, token counts, finish reasons and logprobs as
// node-llama-cpp's two round trips on the same build. Like oneStep.test.ts it builds the engine into its cache when
// missing and never skips; a file of its own, since each runs in its own process with one native Llama.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LlamaBackend } from '../../src/backends/llama/llamaBackend';
import { writeTestModel } from '../../src/backends/llama/demoModel';
import { buildNativeEngine, findNativeBuild, machineIdentity, nativeBuildKey, nodeLlamaCppPackage } from '../../src/backends/llama/nativeBuild';
import type { GenerateRequest, TokenLogprob } from '../../src/runtime/backend';

const root = process.env.TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR
  ? path.resolve(process.env.TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR)
  : path.join(os.homedir(), '.cache', 'task-runtime', 'test-native-builds');

let bindingPath: string;
let tmp: string;
let modelPath: string;

before(
  async () => {
    const key = nativeBuildKey(nodeLlamaCppPackage().version, machineIdentity());
    let state = findNativeBuild(root, key);
    if (state.state !== 'ready') {
      process.stderr.write(`oneStepBackend.test: building the patched native engine into ${root} (minutes, once)\n`);
      state = await buildNativeEngine({
        root,
        onProgress: (p) => p.phase !== 'compile' && process.stderr.write(`oneStepBackend.test: ${p.message}\n`),
      });
    }
    assert.equal(state.state, 'ready');
    bindingPath = state.state === 'ready' ? state.bindingPath : '';
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-onestep-backend-'));
    modelPath = path.join(tmp, 'model.gguf');
    writeTestModel(modelPath, { seed: 4 });
  },
  { timeout: 3_600_000 },
);

after(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const SCHEMA = {
  type: 'object',
  properties: { title: { type: 'string', maxLength: 12 }, year: { type: 'integer' }, done: { type: 'boolean' } },
  required: ['title', 'year', 'done'],
  additionalProperties: false,
};

const requests: Array<Partial<GenerateRequest>> = [
  { format: { type: 'json_schema', name: 'item', schema: SCHEMA, strict: true }, temperature: 0.9, seed: 7, maxOutputTokens: 80 },
  // The demo vocabulary's text is noise: one-letter stops are met within a few dozen tokens.
  { stop: ['e', 'a'], temperature: 0, maxOutputTokens: 60 },
  { temperature: 0.8, seed: 3, topLogprobs: 3, maxOutputTokens: 40 },
];

interface Outcome {
  text: string;
  outputTokens: number;
  finishReason: string;
  stopSequence?: string;
  logprobs: TokenLogprob[];
}

/** The three requests at once on a backend whose context takes `way` (two-step: decodeBatchAndSample hidden). */
async function runBackend(way: 'one-step' | 'two-step'): Promise<{ outcomes: Outcome[]; oneStep: boolean | undefined }> {
  // hardware.ts requires the addon through require's cache: its exports object is the one changed here, while the
  // model loads and its context is made, and put back after.
  const bindings = createRequire(__filename)(bindingPath) as Record<string, unknown>;
  const Original = bindings.AddonContext as new (...args: unknown[]) => object;
  if (way === 'two-step') {
    bindings.AddonContext = function AddonContext(...args: unknown[]) {
      const ctx = new Original(...args);
      Object.defineProperty(ctx, 'decodeBatchAndSample', { value: undefined, configurable: true, writable: true });
      return ctx;
    };
  }
  const backend = new LlamaBackend({ models: [{ source: modelPath }], gpu: 'off', threads: 1, concurrency: 3, nativeBuilds: root });
  try {
    const id = backend.resolveModel(undefined)!;
    try {
      await backend.load(id);
    } finally {
      bindings.AddonContext = Original;
    }
    const hw = backend.listModels()[0]!.hardware!;
    assert.equal(hw.build?.kind, 'native');
    const outcomes = await Promise.all(
      requests.map(async (over, i) => {
        const logprobs: TokenLogprob[] = [];
        let text = '';
        const r = await backend.generate(
          { model: id, instructions: 'You are a test.', messages: [{ role: 'user', content: `Request ${i}: answer.` }], ...over },
          {
            signal: new AbortController().signal,
            onText: (t, _n, lp) => {
              text += t;
              if (lp) logprobs.push(...lp);
            },
          },
        );
        return {
          text,
          outputTokens: r.outputTokens,
          finishReason: r.finishReason,
          ...(r.stopSequence !== undefined ? { stopSequence: r.stopSequence } : {}),
          logprobs,
        };
      }),
    );
    return { outcomes, oneStep: hw.build?.oneStep };
  } finally {
    await backend.dispose();
  }
}

describe('through our backend: one native step per token gives what the two-step path gives', () => {
  it('JSON schema, stop strings, seeded sampling with top logprobs — 3 requests batched', async () => {
    const two = await runBackend('two-step');
    const one = await runBackend('one-step');
    assert.equal(two.oneStep, undefined, 'the two-step arm runs without decodeBatchAndSample');
    assert.equal(one.oneStep, true, 'the one-step arm takes the combined path');
    const [json, stopped, withLogprobs] = one.outcomes;
    assert.doesNotThrow(() => JSON.parse(json!.text), `the schema constrains the output: ${json!.text}`);
    assert.equal(stopped!.finishReason, 'stop', `a stop string ended the second: ${JSON.stringify(stopped)}`);
    assert.ok(withLogprobs!.logprobs.length > 0 && withLogprobs!.logprobs[0]!.top_logprobs.length > 0, 'top logprobs came back');
    assert.deepEqual(one.outcomes, two.outcomes);
  });
});
