// Gemma 3's template as our chat wrapper (gemmaTemplate.ts): chosen by what the file's template renders (the Gemma 3
// family file gets it; a template that renders otherwise keeps node-llama-cpp's choice), its prompt is the template's
// (no `---` rule, trimmed texts; offered tools documented in the first turn), and calls on the Gemma file are still written and parsed in the wrapper's
// syntax. Token-for-token identity with llama-server is test/remote/modelFamilies.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { gemma3WrapperFor } from '../../../../src/backends/llama/gemmaTemplate';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { promptTokens, type LoadedModel } from '../../../../src/backends/llama/loadedModel';
import { chatWrapperFor } from '../../../../src/backends/llama/modelLoad';
import { importNodeLlamaCpp, type NodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import type { ToolDefinition } from '../../../../src/runtime/backend';
import { familyModelPath } from '../../../fixtures/testModel';
import { callsOf, collector } from '../../../support/pieces';

const TOOLS: ToolDefinition[] = [
  {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false },
  },
];

describe("Gemma 3's template as a chat wrapper", () => {
  let nlc: NodeLlamaCpp;
  let model: LlamaModel;
  let template: string;
  before(async () => {
    nlc = await importNodeLlamaCpp();
    const llama = await nlc.getLlama({ gpu: false, logLevel: nlc.LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: familyModelPath('gemma3') });
    template = model.fileInfo.metadata.tokenizer!.chat_template!;
  });
  after(async () => {
    await model?.dispose();
  });

  it('is chosen for the Gemma 3 file, by what its template renders', () => {
    assert.equal(chatWrapperFor(nlc, model)?.constructor.name, 'Gemma3TemplateChatWrapper');
    assert.ok(gemma3WrapperFor(nlc, model, template));
    // The same markers, rendered otherwise: a rule after the system text (GemmaChatWrapper's), or no system text
    // at all (Gemma 2's template refuses it): not this wrapper.
    assert.equal(gemma3WrapperFor(nlc, model, template.replace("+ '\n\n' -%}", "+ '\n\n---\n\n' -%}")), undefined);
    assert.equal(
      gemma3WrapperFor(
        nlc,
        model,
        template.replace('{%- set loop_messages = messages[1:] -%}', '{{ raise_exception("System role not supported") }}'),
      ),
      undefined,
    );
    // Templates without Gemma's turn markers are not probed.
    assert.equal(gemma3WrapperFor(nlc, model, '{% for m in messages %}{{ m.content }}{% endfor %}'), undefined);
  });

  it("renders the template's prompt: system text and a blank line, trimmed texts", () => {
    const loaded = { model, chatWrapper: chatWrapperFor(nlc, model) } as LoadedModel;
    const tokens = promptTokens(loaded, {
      model: 'm',
      instructions: 'Be brief.',
      messages: [
        { role: 'user', content: ' Hi <end_of_turn> there \n' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: 'Weather?' },
      ],
    });
    const text = model.detokenize(tokens, true);
    assert.equal(
      text,
      '<bos><start_of_turn>user\nBe brief.\n\nHi <end_of_turn> there<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n' +
        '<start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n',
    );
    // The user's `<end_of_turn>` is text, not the control token: exactly the template's three turn ends.
    const end = model.tokenize('<end_of_turn>', true)[0]!;
    assert.equal(tokens.filter((t) => t === end).length, 3);
    // A system text alone (the template would drop it: it heads the first turn, and there is none) is the user's turn.
    const alone = model.detokenize(promptTokens(loaded, { model: 'm', instructions: 'Be brief.', messages: [] }), true);
    assert.equal(alone, '<bos><start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n');
  });

  it('documents offered tools at the head of the first turn, in the syntax its calls are parsed in', () => {
    const loaded = { model, chatWrapper: chatWrapperFor(nlc, model) } as LoadedModel;
    const request = { model: 'm', instructions: 'Be brief.', messages: [{ role: 'user' as const, content: 'Weather in Oslo?' }] };
    const without = model.detokenize(promptTokens(loaded, request), true);
    const text = model.detokenize(promptTokens(loaded, { ...request, tools: TOOLS }), true);
    // The same turns, and the tools (name, description, parameters, the call syntax) before the user's text.
    assert.ok(text.startsWith('<bos><start_of_turn>user\nBe brief.\n\n'), text);
    assert.ok(text.endsWith('Weather in Oslo?<end_of_turn>\n<start_of_turn>model\n'), text);
    const tools = text.slice(text.indexOf('Be brief.'), text.indexOf('Weather in Oslo?'));
    for (const part of ['get_weather', 'Weather of a city', 'city', '||call:'])
      assert.ok(tools.includes(part), `${part} in ${JSON.stringify(tools)}`);
    assert.equal(text.split('<start_of_turn>').length, without.split('<start_of_turn>').length);
  });

  it('a forced call on the Gemma file is written in the wrapper syntax and parsed into a call with valid arguments', async () => {
    const backend = new LlamaBackend({ models: [{ id: 'gemma3', source: familyModelPath('gemma3') }], threads: 1, concurrency: 1 });
    try {
      const out = collector();
      const r = await backend.generate(
        {
          model: 'gemma3',
          messages: [{ role: 'user', content: 'Weather in Oslo?' }],
          tools: TOOLS,
          toolChoice: { name: 'get_weather' },
          seed: 1,
          temperature: 1,
          maxOutputTokens: 120,
        },
        { signal: new AbortController().signal, onText: out.onText },
      );
      assert.equal(r.finishReason, 'stop', JSON.stringify(out.pieces));
      const calls = callsOf(out.pieces);
      assert.equal(calls.length, 1, JSON.stringify(out.pieces));
      assert.equal(calls[0]!.name, 'get_weather');
      const args = JSON.parse(calls[0]!.arguments) as { city: unknown };
      assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, calls[0]!.arguments);
      for (const p of out.pieces) assert.ok(!p.text.includes('||call:'), `call syntax in a piece: ${JSON.stringify(p)}`);
    } finally {
      await backend.dispose();
    }
  });
});
