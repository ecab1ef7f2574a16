// One native step per token (oneStep.ts, native/decode-and-sample.patch) gives exactly the tokens of node-llama-cpp's
// own two round trips (decodeBatch, then sampleToken per sequence), on the same native build — so the only
// difference is the path: greedy and seeded sampling, free and JSON-schema-constrained, 1 and 3 sequences batched,
// and speculative decoding (a predictor that always drafts: several outputs per sequence, the first sampled in the
// combined call, the rest one after another after it).
//
// It needs the patched native build. This suite (`node scripts/test.mjs native`, part of `npm test`) builds it when it
// is missing — minutes of CPU, once: into $TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR, else ~/.cache/task-runtime/
// test-native-builds, outside the repo and apart from the cache `serve` reads, so every other suite stays on the
// prebuilt binary — and reuses it after. Where it cannot be built (no cmake/compiler/git), it fails, naming what is
// missing: it never skips.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaContextSequence, LlamaModel, Token, TokenPredictor } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { BatchedContextPool } from '../../src/backends/llama/contextPool';
import { writeTestModel } from '../../src/backends/llama/demoModel';
import { selectLlama } from '../../src/backends/llama/hardware';
import { buildNativeEngine, findNativeBuild, machineIdentity, nativeBuildKey, nodeLlamaCppPackage } from '../../src/backends/llama/nativeBuild';
import { importNodeLlamaCpp, type NodeLlamaCpp } from '../../src/backends/llama/nodeLlamaCpp';
import { usesOneStep } from '../../src/backends/llama/oneStep';

const root = process.env.TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR
  ? path.resolve(process.env.TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR)
  : path.join(os.homedir(), '.cache', 'task-runtime', 'test-native-builds');

type Path = 'one-step' | 'two-step';

interface Scenario {
  sequences: number;
  /** Sampling: greedy (temperature 0) or seeded. */
  sampling: 'greedy' | 'seeded';
  json?: boolean;
  lookup?: boolean;
}

const SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, count: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } },
  required: ['name', 'count', 'tags'],
} as const;
const STEPS = 40;

let nlc: NodeLlamaCpp;
let llama: Llama;
let model: LlamaModel;
let tmp: string;

before(
  async () => {
    const key = nativeBuildKey(nodeLlamaCppPackage().version, machineIdentity());
    if (findNativeBuild(root, key).state !== 'ready') {
      const started = Date.now();
      process.stderr.write(`oneStep.test: building the patched native engine into ${root} (minutes, once)\n`);
      let shown = -1;
      await buildNativeEngine({
        root,
        onProgress: (p) => {
          const pct = p.fraction === undefined ? undefined : Math.floor(p.fraction * 10) * 10;
          if (p.phase === 'compile' && pct === shown) return;
          if (pct !== undefined) shown = pct;
          process.stderr.write(`oneStep.test: build: ${p.message}\n`);
        },
      });
      process.stderr.write(`oneStep.test: built in ${Math.round((Date.now() - started) / 1000)} s\n`);
    }
    nlc = await importNodeLlamaCpp();
    const selection = await selectLlama(nlc, 'off', () => undefined, root);
    assert.equal(selection.build.kind, 'native', `the patched native build did not load: ${JSON.stringify(selection.build)}`);
    llama = selection.llama;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-onestep-'));
    const modelPath = path.join(tmp, 'model.gguf');
    writeTestModel(modelPath, { seed: 3 });
    model = await llama.loadModel({ modelPath });
  },
  { timeout: 3_600_000 },
);

after(async () => {
  await model?.dispose();
  await llama?.dispose();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/**
 * A pool whose context takes `path`: 'two-step' hides the addon's decodeBatchAndSample from the context (an own
 * property over the prototype's method, while the context is made), so node-llama-cpp's own two calls run on the
 * same build; 'one-step' counts the combined calls.
 */
async function makePool(
  way: Path,
  sequences: number,
  predictor?: () => TokenPredictor,
): Promise<{ pool: BatchedContextPool; combined: () => number }> {
  const holder = llama as unknown as { _bindings: Record<string, unknown> };
  const real = holder._bindings;
  const Original = real.AddonContext as new (...args: unknown[]) => Record<string, unknown>;
  let calls = 0;
  function Made(...args: unknown[]) {
    const ctx = new Original(...args);
    const method = ctx.decodeBatchAndSample as ((...a: unknown[]) => unknown) | undefined;
    assert.equal(typeof method, 'function', 'the native build has decodeBatchAndSample');
    const value =
      way === 'two-step'
        ? undefined
        : (...a: unknown[]) => {
            calls++;
            return method!.apply(ctx, a);
          };
    Object.defineProperty(ctx, 'decodeBatchAndSample', { value, configurable: true, writable: true });
    return ctx;
  }
  holder._bindings = Object.assign(Object.create(real) as Record<string, unknown>, { AddonContext: Made });
  try {
    const pool = await BatchedContextPool.create(model, { contextSize: 512, threads: 1, sequences, ...(predictor ? { predictor } : {}) });
    return { pool, combined: () => calls };
  } finally {
    holder._bindings = real;
  }
}

async function generate(sequence: LlamaContextSequence, prompt: Token[], scenario: Scenario, index: number): Promise<Token[]> {
  const grammar = scenario.json ? await llama.createGrammarForJsonSchema(SCHEMA) : undefined;
  const grammarEvaluationState = grammar ? new nlc.LlamaGrammarEvaluationState({ model, grammar }) : undefined;
  const out: Token[] = [];
  const options = {
    ...(scenario.sampling === 'greedy' ? { temperature: 0 } : { temperature: 0.9, topK: 40, topP: 0.95, seed: 1234 + index }),
    ...(grammarEvaluationState ? { grammarEvaluationState } : {}),
  };
  for await (const token of sequence.evaluate(prompt, options)) {
    out.push(token);
    if (out.length >= STEPS) break;
  }
  return out;
}

/**
 * A predictor that always drafts (node-llama-cpp's input lookup drafts only on n-gram matches, which the noise model
 * rarely gives): the two tokens that followed the last earlier occurrence of the latest token, else the latest token
 * twice — so each step validates several outputs of a sequence, some accepted and some not.
 */
function lookupPredictor(): TokenPredictor {
  class Lookup extends nlc.TokenPredictor {
    private history: Token[] = [];
    reset(params: { stateTokens: Token[] }): void {
      this.history = [...params.stateTokens];
    }
    pushTokens(tokens: Token[]): void {
      this.history.push(...tokens);
    }
    predictTokens(): Token[] {
      const h = this.history;
      const last = h[h.length - 1];
      if (last === undefined) return [];
      const at = h.lastIndexOf(last, h.length - 2);
      return at >= 0 && at + 2 < h.length ? [h[at + 1]!, h[at + 2]!] : [last, last];
    }
  }
  return new Lookup();
}

async function run(way: Path, scenario: Scenario): Promise<{ tokens: Token[][]; combined: number; oneStep: boolean }> {
  const predictor = scenario.lookup ? () => lookupPredictor() : undefined;
  const { pool, combined } = await makePool(way, scenario.sequences, predictor);
  try {
    const acquired = await Promise.all(Array.from({ length: scenario.sequences }, () => pool.acquire()));
    const prompts = acquired.map((_, i) => {
      const text = scenario.lookup ? `the cat sat on the mat, the cat sat on the mat, the cat ${i}` : `prompt number ${i}: write`;
      return model.tokenize(text);
    });
    const oneStep = usesOneStep(acquired[0]!.sequence.context);
    const tokens = await Promise.all(acquired.map((a, i) => generate(a.sequence, prompts[i]!, scenario, i)));
    for (const a of acquired) await pool.release(a.sequence);
    return { tokens, combined: combined(), oneStep };
  } finally {
    await pool.dispose();
  }
}

describe('one native step per token gives the tokens of the two-step path (patched native build)', () => {
  const scenarios: Array<[string, Scenario]> = [
    ['greedy, 1 sequence', { sequences: 1, sampling: 'greedy' }],
    ['seeded, 1 sequence', { sequences: 1, sampling: 'seeded' }],
    ['greedy, 3 sequences batched', { sequences: 3, sampling: 'greedy' }],
    ['seeded, 3 sequences batched', { sequences: 3, sampling: 'seeded' }],
    ['JSON schema, greedy, 1 sequence', { sequences: 1, sampling: 'greedy', json: true }],
    ['JSON schema, seeded, 3 sequences batched', { sequences: 3, sampling: 'seeded', json: true }],
    ['speculative (drafts validated), greedy, 2 sequences', { sequences: 2, sampling: 'greedy', lookup: true }],
    ['speculative (drafts validated), seeded, 1 sequence', { sequences: 1, sampling: 'seeded', lookup: true }],
  ];
  for (const [name, scenario] of scenarios) {
    it(name, async () => {
      const two = await run('two-step', scenario);
      const one = await run('one-step', scenario);
      assert.equal(two.oneStep, false, 'the two-step arm runs without decodeBatchAndSample');
      assert.equal(two.combined, 0);
      assert.equal(one.oneStep, true, 'the one-step arm takes the combined path');
      assert.ok(one.combined > 0, 'decodeBatchAndSample was called');
      for (const t of two.tokens) assert.ok(t.length > 0, 'every sequence generated');
      if (scenario.json) {
        for (const t of one.tokens) assert.match(model.detokenize(t), /^\s*\{/, 'the grammar constrains the output');
      }
      assert.deepEqual(one.tokens, two.tokens);
    });
  }
});
