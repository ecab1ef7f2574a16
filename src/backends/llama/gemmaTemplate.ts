// Gemma 3's chat template as a chat wrapper (issue 39): node-llama-cpp 3.21.1 resolves a Gemma file to its
// GemmaChatWrapper by the name, which joins the system text to the first user message with a `\n\n---\n\n` rule and
// documents offered functions in its own words in the first user turn, so the prompt we evaluated was not the one the
// file's template (and llama.cpp, which renders it) gives. This wrapper writes what Gemma 3's template writes: the
// system text and a blank line at the head of the first turn, each message's text trimmed, `<start_of_turn>user` /
// `<start_of_turn>model` turns ended by `<end_of_turn>\n`. Offered tools are the one thing added: the template has no
// place for them (llama.cpp leaves them out, so a model served there can make no `auto` call); here they are
// documented in the wrapper's call syntax as a system text at the head of the first turn. It is chosen by what the file's template renders, not by the file's name:
// `gemma3WrapperFor` renders probe conversations with the template itself (node-llama-cpp's Jinja wrapper) and takes
// this wrapper only where they come out token for token the same.
//
// What the template cannot render (llama.cpp refuses it: "Conversation roles must alternate"): calls and their results
// are written inside the model's turn in node-llama-cpp's default call syntax (`||call: NAME(ARGS)`, then
// `\n||result: …\n`), as GemmaChatWrapper writes them, so calls the model makes are parsed as before (toolCalls.ts
// reads the syntax from these settings). docs/model-families.md has the comparison against llama-server.

import type { ChatHistoryItem, ChatWrapper, LlamaModel, LlamaText } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { NodeLlamaCpp } from './nodeLlamaCpp';

/** Whitespace as the Jinja `trim` filter strips it. */
const trimStart = (s: string) => s.replace(/^[ \t\n\r\f\v]+/, '');
const trimEnd = (s: string) => s.replace(/[ \t\n\r\f\v]+$/, '');

/** A LlamaText without the whitespace at its two ends (only its plain-text ends; markup is left as it is). */
function trimText(nlc: NodeLlamaCpp, text: LlamaText): LlamaText {
  const values = [...text.values];
  while (values.length && typeof values[0] === 'string') {
    const v = trimStart(values[0]);
    if (v) {
      values[0] = v;
      break;
    }
    values.shift();
  }
  while (values.length && typeof values[values.length - 1] === 'string') {
    const v = trimEnd(values[values.length - 1] as string);
    if (v) {
      values[values.length - 1] = v;
      break;
    }
    values.pop();
  }
  return nlc.LlamaText(values);
}

/** Builds the wrapper class on the loaded node-llama-cpp (an ESM module imported at run time). */
export function createGemma3TemplateWrapper(nlc: NodeLlamaCpp): ChatWrapper {
  const { LlamaText, SpecialToken, SpecialTokensText } = nlc;

  class Gemma3TemplateChatWrapper extends nlc.ChatWrapper {
    public override readonly wrapperName = 'Gemma 3 template';
    public override readonly settings = { ...nlc.ChatWrapper.defaultSettings, supportsSystemMessages: true };

    public override generateContextState({
      chatHistory: history,
      availableFunctions,
      documentFunctionParams,
    }: {
      chatHistory: ChatHistoryItem[];
      availableFunctions?: Parameters<ChatWrapper['addAvailableFunctionsSystemMessageToHistory']>[1];
      documentFunctionParams?: boolean;
    }): {
      contextText: LlamaText;
      stopGenerationTriggers: LlamaText[];
    } {
      // Offered tools are documented in the wrapper's call syntax as a system text, as GemmaChatWrapper did: Gemma 3's
      // template has no place for tools (llama-server leaves them out), but a model never told of them could make
      // no `auto` call. Without tools the history is the caller's, and the prompt the template's.
      const chatHistory = this.addAvailableFunctionsSystemMessageToHistory(history, availableFunctions, { documentParams: documentFunctionParams });
      // The template's turns: system texts go at the head of the first turn; adjacent turns of one role are joined
      // (the template would refuse them).
      const systems: LlamaText[] = [];
      const turns: Array<{ role: 'user' | 'model'; texts: LlamaText[] }> = [];
      const push = (role: 'user' | 'model', text: LlamaText) => {
        const last = turns[turns.length - 1];
        if (last?.role === role) last.texts.push(text);
        else turns.push({ role, texts: [text] });
      };
      for (const item of chatHistory) {
        if (item.type === 'system') systems.push(LlamaText.fromJSON(item.text));
        else if (item.type === 'user') push('user', LlamaText(item.text));
        else push('model', this.generateModelResponseText(item.response));
      }
      const system = LlamaText.joinValues('\n\n', systems);
      // A system text with no turn to head (only the response to come): it is the user's turn.
      if (system.values.length && turns.length === 1 && turns[0].role === 'model' && turns[0].texts.every((t) => t.values.length === 0))
        turns.unshift({ role: 'user', texts: [] });
      const parts: LlamaText[] = [LlamaText(new SpecialToken('BOS'))];
      turns.forEach((turn, index) => {
        const last = index === turns.length - 1;
        const text = LlamaText.joinValues('\n\n', turn.texts);
        // The template writes the system text (untrimmed) and a blank line, then the first message's text trimmed.
        // (A system text alone, which the template would drop, stands as the user's turn by itself.)
        const head = index === 0 && system.values.length ? LlamaText(system, text.values.length ? '\n\n' : '') : LlamaText([]);
        parts.push(LlamaText(new SpecialTokensText(`<start_of_turn>${turn.role}\n`)));
        if (last && turn.role === 'model') {
          // The response under way: as written so far (the generation prompt when empty).
          parts.push(LlamaText(head, text));
          return;
        }
        parts.push(LlamaText(head, trimText(nlc, text)), LlamaText(new SpecialTokensText('<end_of_turn>\n')));
      });
      if (turns[turns.length - 1]?.role !== 'model') parts.push(LlamaText(new SpecialTokensText('<start_of_turn>model\n')));
      return {
        contextText: LlamaText(parts),
        stopGenerationTriggers: [LlamaText(new SpecialToken('EOS')), LlamaText(new SpecialTokensText('<end_of_turn>\n')), LlamaText('<end_of_turn>')],
      };
    }
  }
  return new Gemma3TemplateChatWrapper();
}

/**
 * Conversations the template must render as this wrapper does: system + user, a multi-turn history, no system text.
 * Their texts have no whitespace at the ends: node-llama-cpp's Jinja wrapper renders a message's text in after the
 * template ran, so the template's `trim` does not reach it there (llama.cpp trims; the fidelity test compares that).
 */
const PROBES: ChatHistoryItem[][] = [
  [
    { type: 'system', text: 'System text.' },
    { type: 'user', text: 'Hello' },
    { type: 'model', response: [] },
  ],
  [
    { type: 'system', text: 'Be brief.' },
    { type: 'user', text: 'First question?' },
    { type: 'model', response: ['An answer.'] },
    { type: 'user', text: 'Second' },
    { type: 'model', response: [] },
  ],
  [
    { type: 'user', text: 'No system text' },
    { type: 'model', response: ['Fine'] },
    { type: 'user', text: 'Again' },
    { type: 'model', response: [] },
  ],
];

/** A rendering as one string, markup and text alike (the two wrappers split it into parts differently). */
function rendered(wrapper: ChatWrapper, history: ChatHistoryItem[]): string {
  return wrapper
    .generateContextState({ chatHistory: history })
    .contextText.values.map((v) => {
      if (typeof v === 'string') return v;
      const part = v.toJSON() as { type: string; value: string };
      return part.type === 'specialToken' ? `\u0000${part.value}\u0000` : part.value;
    })
    .join('');
}

/**
 * This wrapper, where the file's template is Gemma 3's by what it renders: the probe conversations rendered by the
 * template (node-llama-cpp's Jinja wrapper over the file's template) and by this wrapper are the same text and markup.
 * Undefined otherwise (node-llama-cpp's resolution stands).
 */
export function gemma3WrapperFor(nlc: NodeLlamaCpp, model: LlamaModel, template: string): ChatWrapper | undefined {
  // Only a template that writes Gemma's turn markers can be rendered the same; the probes are skipped for the rest.
  if (!template.includes('<start_of_turn>') || !template.includes('<end_of_turn>')) return undefined;
  const ours = createGemma3TemplateWrapper(nlc);
  let jinja: ChatWrapper;
  try {
    jinja = new nlc.JinjaTemplateChatWrapper({ template, tokenizer: model.tokenizer, functionCallMessageTemplate: 'noJinja' });
  } catch {
    return undefined;
  }
  try {
    for (const history of PROBES) if (rendered(ours, history) !== rendered(jinja, history)) return undefined;
  } catch {
    return undefined;
  }
  return ours;
}
