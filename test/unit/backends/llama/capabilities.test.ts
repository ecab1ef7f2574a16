// The rule behind a local model's `tools` and `reasoning` (capabilities.ts) on header metadata as GGUF files carry it:
// a decoder without pooling is a chat model (tools); an encoder-only architecture or a pooled one (embeddings,
// reranking) is not; reasoning needs a chat model whose template names a known pair of thought delimiters (before a
// load) or whose resolved chat wrapper has a thought segment (after).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { headerCapabilities, headerFacts, loadedCapabilities } from '../../../../src/backends/llama/capabilities';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';

const meta = (architecture: string, extra: Record<string, unknown> = {}, template?: string) => ({
  general: { architecture },
  [architecture]: { context_length: 4096, ...extra },
  ...(template ? { tokenizer: { chat_template: template } } : {}),
});

describe('model capabilities from the file', () => {
  it('before a load: from the header', () => {
    const cases: Array<[string, unknown, { tools: boolean; reasoning: boolean }]> = [
      ['llama without a template', meta('llama'), { tools: true, reasoning: false }],
      ['qwen3 with <think> in its template', meta('qwen3', {}, "{{ '<think>\\n' + r + '\\n</think>' }}"), { tools: true, reasoning: true }],
      ['gpt-oss (Harmony analysis channel)', meta('gpt-oss', {}, '<|channel|>analysis<|message|>{{ t }}<|end|>'), { tools: true, reasoning: true }],
      ['llama 3.1 template', meta('llama', {}, '<|start_header_id|>{{ role }}<|end_header_id|>'), { tools: true, reasoning: false }],
      ['pooling none (0) is a chat model', meta('llama', { pooling_type: 0 }), { tools: true, reasoning: false }],
      [
        'a decoder with mean pooling is an embedding model',
        meta('qwen3', { pooling_type: 1 }, '<think></think>'),
        { tools: false, reasoning: false },
      ],
      ['rank pooling is a reranker', meta('qwen3', { pooling_type: 4 }), { tools: false, reasoning: false }],
      ['an encoder-only architecture', meta('bert'), { tools: false, reasoning: false }],
      ['no metadata at all', undefined, { tools: true, reasoning: false }],
    ];
    for (const [what, metadata, expected] of cases) assert.deepEqual(headerCapabilities(headerFacts(metadata)), expected, what);
  });

  it('after a load: the resolved wrapper decides reasoning', async () => {
    const nlc = await importNodeLlamaCpp();
    const facts = headerFacts(meta('qwen3'));
    assert.deepEqual(loadedCapabilities(facts, new nlc.QwenChatWrapper()), { tools: true, reasoning: true });
    assert.deepEqual(loadedCapabilities(facts, new nlc.Llama3_1ChatWrapper()), { tools: true, reasoning: false });
    assert.deepEqual(loadedCapabilities(facts, undefined), { tools: true, reasoning: false });
    assert.deepEqual(loadedCapabilities(headerFacts(meta('bert')), new nlc.QwenChatWrapper()), { tools: false, reasoning: false });
  });
});
