// The call grammar of a tool set is built once and served from the cache afterwards (issue 39: Codex CLI's tool set,
// 12 functions, 17 kB of schemas, on every turn): the same tools with the same call syntax (the model's wrapper) and
// the same mode get the same parsed grammar without the grammar worker being asked again; any change to what the
// grammar is made of (a schema, a name, the set of tools, the syntax of another model's template, the mode, the call
// limit) builds another. Observed by behaviour: how many schemas reach the grammar worker, and the grammar object.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { grammarCompiler } from '../../../../src/backends/llama/grammarCompiler';
import { chatWrapperFor } from '../../../../src/backends/llama/modelLoad';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { CallGrammarCache, callSyntaxOf, MAX_PARALLEL_CALLS, PLAIN_CALL_SYNTAX, type CallSyntax } from '../../../../src/backends/llama/toolCalls';
import type { ToolDefinition } from '../../../../src/runtime/backend';
import { codexTools } from '../../../fixtures/codexTools';
import { familyModelPath } from '../../../fixtures/testModel';

describe("the call grammar cache, on Codex CLI's tool set", () => {
  let llama: Llama;
  let gemma: LlamaModel;
  let gemmaSyntax: CallSyntax;
  let compiled = 0;
  const compiler = grammarCompiler();
  const compile = compiler.compile.bind(compiler);
  before(async () => {
    // Counts the schemas that reach the grammar worker (the real worker still builds them).
    compiler.compile = (schema: unknown) => {
      compiled++;
      return compile(schema);
    };
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, logLevel: nlc.LlamaLogLevel.error });
    gemma = await llama.loadModel({ modelPath: familyModelPath('gemma3') });
    gemmaSyntax = callSyntaxOf(chatWrapperFor(nlc, gemma));
  });
  after(async () => {
    compiler.compile = compile;
    await gemma?.dispose();
  });

  /** The grammar the cache gives, and how many schemas the worker compiled for it. */
  async function get(
    cache: CallGrammarCache,
    syntax: CallSyntax,
    tools: ToolDefinition[],
    mode: 'auto' | 'forced' = 'auto',
    max = MAX_PARALLEL_CALLS,
  ) {
    const before = compiled;
    const grammar = await cache.get(syntax, tools, mode, max);
    return { grammar, compiled: compiled - before };
  }

  it('the same tools and syntax: built once, then the same grammar without the worker', async () => {
    const tools = codexTools();
    assert.equal(tools.length, 12);
    const cache = new CallGrammarCache(llama);
    const first = await get(cache, gemmaSyntax, tools);
    assert.equal(first.compiled, tools.length, 'each tool schema compiled on first use');
    const second = await get(cache, gemmaSyntax, codexTools());
    assert.equal(second.compiled, 0, 'the second use reaches no compiler');
    assert.equal(second.grammar, first.grammar);
    // A description is not part of the grammar: still the cached one.
    const described = codexTools().map((t) => ({ ...t, description: `${t.description ?? ''} (edited)` }));
    const third = await get(cache, gemmaSyntax, described);
    assert.equal(third.compiled, 0);
    assert.equal(third.grammar, first.grammar);
  });

  it('any change to what the grammar is made of builds another', async () => {
    const tools = codexTools();
    const cache = new CallGrammarCache(llama);
    const base = await get(cache, gemmaSyntax, tools);
    const changes: Array<[string, () => ReturnType<typeof get>]> = [
      [
        'a parameter schema',
        () =>
          get(
            cache,
            gemmaSyntax,
            tools.map((t, i) => (i === 0 ? { ...t, parameters: { ...t.parameters, properties: { cmd: { type: 'integer' } } } } : t)),
          ),
      ],
      [
        'a tool name',
        () =>
          get(
            cache,
            gemmaSyntax,
            tools.map((t, i) => (i === 1 ? { ...t, name: 'write_stdin2' } : t)),
          ),
      ],
      ['one tool fewer', () => get(cache, gemmaSyntax, tools.slice(1))],
      ["another model's call syntax", () => get(cache, PLAIN_CALL_SYNTAX, tools)],
      ['forced instead of auto', () => get(cache, gemmaSyntax, tools, 'forced')],
      ['one call at most', () => get(cache, gemmaSyntax, tools, 'auto', 1)],
    ];
    for (const [what, change] of changes) {
      const r = await change();
      assert.ok(r.compiled > 0, `${what}: the worker was not asked`);
      assert.notEqual(r.grammar, base.grammar, `${what}: the cached grammar was served`);
      // …and that one is cached in turn.
      const again = await change();
      assert.equal(again.compiled, 0, `${what}: not cached after its first use`);
      assert.equal(again.grammar, r.grammar);
    }
  });
});
