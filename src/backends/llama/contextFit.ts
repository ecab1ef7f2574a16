// Whether a request's prompt and output budget fit a local model's context: prompt + an explicit
// max_output_tokens beyond the context is context_length_exceeded, as llama.cpp's server and OpenAI answer it. A
// budget the caller did not give (capMaxOutputTokens: the MCP tools' defaults, the editor's chat provider) is an
// "up to" budget and only the prompt must leave room.
// When the request is decided:
//   - at create, with the model loaded: exactly (its tokenizer counts the prompt; its context is known);
//   - at create, not loaded: the context is at most min(trained context, --context-size N) — the trained one read
//     from a local file's header when serve starts (LlamaBackend.prepare; the editor keeps node-llama-cpp lazy and
//     learns it at the first load), for a model URI after its first load — and a prompt is at least one token, so a
//     budget of that bound or more is refused without a tokenizer. The prompt's own tokens are not known: a
//     vocab-only load (node-llama-cpp's `vocabOnly`) is asynchronous and create is not, and with
//     `--context-size auto` the context is fitted to free memory at load, so even a counted prompt would not decide;
//   - when the task starts (the model loaded by then): exactly, the same rule; a request that does not fit fails the
//     task with context_length_exceeded before any token is generated.
// Before either count, a floor decides without the tokenizer: no token stands for more bytes than the longest entry of
// the vocabulary (its stored text is never shorter than the bytes it decodes to: SentencePiece's "▁" is 3 bytes for a
// space, byte-level BPE's characters 1–2 bytes per byte, byte tokens "<0xAB>" 6), so a prompt holding B bytes of the
// caller's text takes at least B / longest tokens. A 3.8 MB prompt for a 4 096-token context is refused in
// microseconds, where tokenizing it held the event loop for 2–3 s (docs/security.md). Only text every template keeps
// whole is counted: instructions, system, user and tool messages, trimmed (templates may drop an assistant turn's
// earlier reasoning, and re-serialize call arguments).

import { BackendError, RequestRefusedError, type GenerateRequest } from '../../runtime/backend';
import { systemText } from './prompt';

export interface ContextMisfit {
  message: string;
  /** The request field to change (the Responses name; doors rename it). */
  param: 'input' | 'max_output_tokens';
}

/** The budget prompt + output must fit: the caller's own max_output_tokens, not a default (which is capped). */
export function explicitBudget(request: GenerateRequest): number | undefined {
  return request.capMaxOutputTokens ? undefined : request.maxOutputTokens;
}

/** With the context and the prompt's tokens known: what does not fit, or undefined. */
export function contextMisfit(contextSize: number, promptTokens: number, budget: number | undefined): ContextMisfit | undefined {
  if (promptTokens + 1 > contextSize) {
    return {
      message: `This model's context is ${contextSize} tokens; the input is ${promptTokens} tokens, which leaves no room for output.`,
      param: 'input',
    };
  }
  if (budget !== undefined && promptTokens + budget > contextSize) {
    return {
      message:
        `This model's context is ${contextSize} tokens; the input is ${promptTokens} tokens and the output budget ` +
        `${budget}, ${promptTokens + budget} in all. Ask for at most ${contextSize - promptTokens} output tokens, or shorten the input.`,
      param: 'max_output_tokens',
    };
  }
  return undefined;
}

/** The most bytes one token of `vocabulary` stands for (the longest stored text); undefined without a vocabulary. */
export function longestTokenBytes(vocabulary: readonly string[] | undefined): number | undefined {
  if (!vocabulary?.length) return undefined;
  let longest = 1;
  for (const token of vocabulary) if (token.length * 3 > longest) longest = Math.max(longest, Buffer.byteLength(token));
  return longest;
}

/** Bytes of the caller's text every template renders whole (see the header). */
export function keptTextBytes(request: GenerateRequest): number {
  let bytes = Buffer.byteLength(systemText(request.instructions, request.messages).trim());
  for (const m of request.messages) if (m.role === 'user' || m.role === 'tool') bytes += Buffer.byteLength(m.content.trim());
  return bytes;
}

/** Without the tokenizer: the fewest tokens the prompt can take decides that it cannot fit (see the header). */
export function floorMisfit(contextSize: number, request: GenerateRequest, longestToken: number | undefined): ContextMisfit | undefined {
  if (longestToken === undefined) return undefined;
  const bytes = keptTextBytes(request);
  const floor = Math.ceil(bytes / longestToken);
  const budget = explicitBudget(request);
  if (floor + 1 <= contextSize && (budget === undefined || floor + budget <= contextSize)) return undefined;
  const misfit = contextMisfit(contextSize, floor, budget)!;
  return { ...misfit, message: misfit.message.replace(` is ${floor} tokens`, ` is ${floor} tokens or more (${bytes} bytes of text)`) };
}

/** Before a load: only the bound on the context is known, and a prompt takes at least one token. */
export function budgetMisfit(contextBound: number | undefined, budget: number | undefined): ContextMisfit | undefined {
  if (contextBound === undefined || budget === undefined || budget + 1 <= contextBound) return undefined;
  return {
    message: `This model's context is at most ${contextBound} tokens; an output budget of ${budget} leaves no room for the input.`,
    param: 'max_output_tokens',
  };
}

/** At create: a 400 before anything is stored. */
export function refuse(misfit: ContextMisfit | undefined): void {
  if (misfit) throw new RequestRefusedError('context_length_exceeded', misfit.message, misfit.param);
}

/** When the task starts: the task fails with context_length_exceeded. */
export function failStart(misfit: ContextMisfit | undefined): void {
  if (misfit) throw new BackendError('failed', 'context_length_exceeded', misfit.message);
}
