// The call grammar for the tool set Codex CLI really sends (issue 39; goal: ≤ 50 ms, or cached after the first use):
// test/fixtures/codexTools.json is the `tools` array of a request captured from Codex CLI 0.169.0 (`codex exec`,
// custom provider, 17.8 kB: 8 functions, a namespace of 5, a hosted web_search), turned into the tools a generation
// gets the way the Responses door turns it (validateResponseBody, generateRequestOf: 12 functions). Per model — the
// demo model (plain-text call syntax, 420 tokens) and family files of 151 k and 262 k tokens (their wrappers' call
// syntax) — the time to build the grammar a request with these tools uses (CallGrammarCache.get, what outputPlan.ts
// calls: the tools' schemas to GBNF in the grammar worker, joined, parsed by llama.cpp), the first use on a fresh cache
// and the second, and beside it the first token sampled under that grammar against one sampled freely (where the
// vocabulary's size shows: the grammar is checked against every candidate token). Figures: docs/model-families.md.
// Part of the families section: npm run bench -- families

import type { LlamaGrammar } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { grammarCompiler } from '../src/backends/llama/grammarCompiler';
import { JSON_OBJECT_SCHEMA } from '../src/backends/llama/jsonSchema';
import { chatWrapperFor } from '../src/backends/llama/modelLoad';
import { importNodeLlamaCpp } from '../src/backends/llama/nodeLlamaCpp';
import { CallGrammarCache, callSyntaxOf, MAX_PARALLEL_CALLS } from '../src/backends/llama/toolCalls';
import { codexTools } from '../test/fixtures/codexTools';

const ms = (since: number) => Number((performance.now() - since).toFixed(1));

export async function codexToolGrammarBench(models: Array<{ name: string; path: string }>): Promise<Record<string, unknown>> {
  const tools = codexTools();
  const nlc = await importNodeLlamaCpp();
  const llama = await nlc.getLlama({ gpu: false, logLevel: nlc.LlamaLogLevel.error });
  // The grammar worker starts at a process's first grammar (once): timed apart, so the figures below are the build.
  let started = performance.now();
  await grammarCompiler().compile({ ...JSON_OBJECT_SCHEMA });
  const out: Record<string, unknown> = { tools: tools.length, tools_json_bytes: JSON.stringify(tools).length, grammar_worker_start_ms: ms(started) };
  for (const m of models) {
    const model = await llama.loadModel({ modelPath: m.path });
    try {
      const syntax = callSyntaxOf(chatWrapperFor(nlc, model));
      const cache = new CallGrammarCache(llama);
      const build = async (mode: 'auto' | 'forced'): Promise<{ first: number; second: number; grammar: LlamaGrammar }> => {
        started = performance.now();
        const grammar = await cache.get(syntax, tools, mode, MAX_PARALLEL_CALLS);
        const first = ms(started);
        started = performance.now();
        const again = await cache.get(syntax, tools, mode, MAX_PARALLEL_CALLS);
        const second = ms(started);
        if (again !== grammar) throw new Error('the second use built the grammar again');
        return { first, second, grammar };
      };
      // `auto` is what Codex asks for (tool_choice auto); `forced` (required) grammars start at the call's prefix.
      const auto = await build('auto');
      const forced = await build('forced');
      // One token after a short prompt, freely and under the forced grammar (each on a cleared sequence, best of 3).
      const context = await model.createContext({ contextSize: 256, threads: 1 });
      const firstToken = async (grammar?: LlamaGrammar): Promise<number> => {
        let best = Infinity;
        for (let i = 0; i < 3; i++) {
          const sequence = context.getSequence();
          const state = grammar ? new nlc.LlamaGrammarEvaluationState({ model, grammar }) : undefined;
          const t = performance.now();
          for await (const token of sequence.evaluate(model.tokenize('Hello'), {
            temperature: 0.8,
            ...(state ? { grammarEvaluationState: state } : {}),
          })) {
            void token;
            break;
          }
          best = Math.min(best, performance.now() - t);
          await sequence.dispose();
        }
        return Number(best.toFixed(1));
      };
      const free = await firstToken();
      const constrained = await firstToken(forced.grammar);
      await context.dispose();
      out[m.name] = {
        vocabulary: (model.fileInfo.metadata.tokenizer?.ggml?.tokens as readonly string[] | undefined)?.length,
        call_prefix: syntax.prefix,
        auto_first_use_ms: auto.first,
        auto_second_use_ms: auto.second,
        forced_first_use_ms: forced.first,
        forced_second_use_ms: forced.second,
        first_token_free_ms: free,
        first_token_under_grammar_ms: constrained,
      };
    } finally {
      await model.dispose();
    }
  }
  return out;
}
