// How a local model's thoughts are told apart from its answer in its raw output, per chat-template family, as data.
// node-llama-cpp resolves every model with a template to a chat wrapper: a specialised one (QwenChatWrapper,
// HarmonyChatWrapper for gpt-oss, DeepSeek, Seed, …) or the JinjaTemplateChatWrapper, which reads the thought
// delimiters out of the template by rendering it. Its settings.segments.thought gives the delimiters; what the settings
// do not say (LlamaChat handles it in code: prefix triggers, rerender on `<|end|>`) is the family quirks below.
// The output splitter (toolCalls.ts OutputSplitter) routes a thought to the reasoning channel — a `reasoning` item and
// `response.reasoning_text.*` events — and never into answer text.
//
// Rules every family shares:
// - a delimiter is matched without the whitespace at its ends (`<think>`, `</think>`), and whitespace next to it —
//   the newlines the templates write around a thought, which a model may or may not reproduce — is neither thought
//   nor answer; on resume the delimiters are written back as the template has them (`prefix`, `suffix`);
// - a template that opens the thought in its generation prompt (`openOnStart`) has the prompt end inside the thought
//   (loadedModel.ts promptTokens), as node-llama-cpp's LlamaChat does, and the output starts as reasoning.

import type { ChatWrapper, LlamaText } from 'node-llama-cpp' with { 'resolution-mode': 'import' };

export interface ThoughtSyntax {
  /** The thought's opening delimiter as the template writes it ('' when the template opens it itself). */
  prefix: string;
  /** Its closing delimiter as the template writes it. */
  suffix: string;
  /** The template opens the thought itself (the prompt ends inside it). */
  openOnStart: boolean;
  /**
   * Message syntax outside thoughts: dropped from answer text wherever the model writes it (Harmony's headers of the
   * final and commentary messages and their ends).
   */
  answerSyntax?: readonly string[];
  /** Written between a thought's suffix and the answer when a resume renders delivered output back. */
  answerHeader?: string;
  /** Written before a message that follows another when a resume renders delivered output back (Harmony's header). */
  messageStart?: string;
  /** Written after answer text that another message follows, on resume (Harmony's `<|end|>`). */
  messageEnd?: string;
}

/** What a family adds to the delimiters node-llama-cpp found. */
interface FamilyQuirks {
  /** Which family: `wrapper` is node-llama-cpp's wrapperName; `prefix` the thought prefix it found (Jinja templates). */
  matches(wrapper: string, prefix: string): boolean;
  quirks: Partial<Pick<ThoughtSyntax, 'suffix' | 'answerSyntax' | 'answerHeader' | 'messageStart' | 'messageEnd'>>;
}

/**
 * Engine quirks as data, one row per family whose output has more than `prefix thought suffix answer`.
 *
 * gpt-oss (Harmony, openai/harmony): the answer is a message of its own. The model writes
 * `<|channel|>analysis<|message|>THOUGHT<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>`, or the
 * final message alone, or a commentary message (a preamble shown to the user) before calls. node-llama-cpp's
 * HarmonyChatWrapper has the analysis channel as the thought; a Jinja rendering of gpt-oss's template finds the
 * thought suffix as `<|end|>` + the final header. Either way only `<|end|>` closes the thought (a second analysis
 * message may follow: the same reasoning, a paragraph apart), and the message headers and ends — every Harmony token,
 * and the `<|channel|>commentary` before a call's recipient (toolCalls.ts CALL_QUIRKS) — are syntax, never answer
 * text; a thought budget that runs out forces `<|end|>` and the final header (outputPlan.ts). `<|return|>` and
 * `<|call|>` end the generation (end-of-generation tokens of the vocabulary). On resume a message after another is
 * opened with `<|start|>assistant`, after answer text closed with `<|end|>`.
 *
 * Qwen 3, QwQ and DeepSeek R1 (`<think>` … `</think>`) and the others node-llama-cpp knows (Seed's `<seed:think>`,
 * Gemma 4's thought channel, Muse) need nothing beyond the shared rules.
 */
const FAMILIES: readonly FamilyQuirks[] = [
  {
    matches: (wrapper, prefix) => wrapper === 'Harmony' || prefix.startsWith('<|channel|>analysis'),
    quirks: {
      suffix: '<|end|>',
      answerSyntax: [
        '<|start|>assistant',
        '<|channel|>final<|message|>',
        '<|channel|>commentary<|message|>',
        // The header of a call's message before its recipient (toolCalls.ts CALL_QUIRKS), or of one in analysis.
        '<|channel|>commentary',
        '<|channel|>analysis',
        '<|end|>',
        // Ends of the generation, yielded as text only where end-of-generation tokens do not end it.
        '<|call|>',
        '<|return|>',
        // Any other Harmony token on its own: never answer text.
        '<|start|>',
        '<|channel|>',
        '<|message|>',
        '<|constrain|>',
      ],
      answerHeader: '<|start|>assistant<|channel|>final<|message|>',
      messageStart: '<|start|>assistant',
      messageEnd: '<|end|>',
    },
  },
];

/**
 * Thought delimiter pairs of the families above, as they appear in a chat template: what a template is searched for
 * before its wrapper is resolved (capabilities.ts). The same pairs node-llama-cpp looks for in a template it cannot
 * render, plus Harmony's analysis channel and Gemma 4's thought channel.
 */
export const KNOWN_THOUGHT_DELIMITERS: ReadonlyArray<readonly [string, string]> = [
  ['<think>', '</think>'], // Qwen 3, QwQ, DeepSeek R1
  ['<|channel|>analysis', '<|end|>'], // gpt-oss (Harmony)
  ['<seed:think>', '</seed:think>'], // Seed-OSS
  ['<|channel>thought', '<channel|>'], // Gemma 4
  ['<thought>', '</thought>'], // EXAONE Deep
  ['[THINK]', '[/THINK]'], // Mistral (Magistral)
  ['<|START_THINKING|>', '<|END_THINKING|>'], // Command R7B
];

const textOf = (t: unknown): string => (t == null ? '' : typeof t === 'string' ? t : String(t as LlamaText));

/** The thought syntax of a chat wrapper (settings.segments.thought plus its family's quirks), if the template has one. */
export function thoughtSyntaxOf(wrapper: ChatWrapper | undefined): ThoughtSyntax | undefined {
  const t = wrapper?.settings.segments?.thought;
  if (!t) return undefined;
  const opened = typeof t.prefix === 'object' && t.prefix !== null && (t.prefix as { type?: unknown }).type === 'openedOnStart';
  const prefix = opened ? '' : textOf(t.prefix);
  const suffix = textOf(t.suffix);
  if (!suffix.trim() || (!prefix.trim() && !opened)) return undefined;
  const family = FAMILIES.find((f) => f.matches(wrapper!.wrapperName, prefix));
  return { prefix, suffix, openOnStart: opened || t.openOnResponseStart === true, ...(family?.quirks ?? {}) };
}

/**
 * Whether the prompt ends with the thought's prefix: the template opens thoughts at the start of a response, the
 * prefix is ours to write, and the output is not constrained otherwise (a response format, forced calls).
 */
export function promptOpensThought(thought: ThoughtSyntax | undefined, constrained: boolean): boolean {
  return !!thought && thought.openOnStart && thought.prefix !== '' && !constrained;
}
