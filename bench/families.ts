// The real model families (issue 39 bench): per family file (familyModel.ts: the family's tokenizer — 128 k to 262 k
// tokens — and template on tiny random weights), free and schema-constrained tokens/s against llama.cpp's own
// llama-server on the same GGUF and thread count, side by side in one run, and the grammar's first use (compile) on
// that vocabulary: the structured section's measurement (bench/structured.ts) run on each family's file. What a large
// vocabulary costs per token is the gap to the demo model's figures (its ~420 tokens) in the structured section.
// Also the call grammar of the tool set Codex CLI sends (bench/toolGrammar.ts). Figures: docs/model-families.md.
// Run: npm run bench -- families

import { MODEL_FAMILIES } from '../src/backends/llama/familyModel';
import { familyModelPath } from '../test/fixtures/testModel';
import { structuredBench } from './structured';
import { codexToolGrammarBench } from './toolGrammar';

export async function familiesBench(opts: { modelPath?: string; threads?: number; seeds?: number } = {}): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  // The call grammar of Codex CLI's tool set (bench/toolGrammar.ts), on the demo model and two large vocabularies.
  out.codex_tool_grammar = await codexToolGrammarBench([
    ...(opts.modelPath ? [{ name: 'demo', path: opts.modelPath }] : []),
    { name: 'qwen3', path: familyModelPath('qwen3') },
    { name: 'gemma3', path: familyModelPath('gemma3') },
  ]);
  for (const family of MODEL_FAMILIES) {
    out[family] = await structuredBench({ modelPath: familyModelPath(family), threads: opts.threads ?? 1, seeds: opts.seeds ?? 2 });
  }
  return out;
}
