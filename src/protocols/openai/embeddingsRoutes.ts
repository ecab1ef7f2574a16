// POST /lmsp/v1/embeddings: OpenAI's embeddings (an OpenAI client's baseURL is /lmsp/v1; /v1/embeddings reaches it
// through the Anthropic door's forwarding). A direct call, not a task: the runtime embeds while the client waits and
// stores nothing (runtime/embeddings.ts); durable bulk embedding is the Batch API's (docs/embeddings.md). Errors are
// the listener's problem+json with OpenAI's `{error: {message, type, param, code}}` member, as on the other routes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { readJsonBody } from '../http/body';
import { HttpProblem } from '../http/problem';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from '../lmsp/deps';
import { BackendError } from '../../runtime/backend';
import { FAILURES } from '../../runtime/problems';
import { translateAsync } from '../lmsp/problems';
import { parseBody } from '../lmsp/schemas';
import { sendJson } from '../lmsp/wire';
import type { EmbedOutcome } from '../../runtime/embeddings';

/** Limits of one request (docs/embeddings.md): OpenAI's count of inputs, and sizes that bound the work before tokenizing. */
export const EMBEDDING_LIMITS = {
  /** Inputs in one request (OpenAI's limit). */
  maxInputs: 2048,
  /** Characters of one text input (its tokens are bounded by the model's embedding context, checked by the backend). */
  maxInputChars: 200_000,
  /** Token ids in one token-array input. */
  maxInputTokens: 8192,
} as const;

const text = z.string().min(1).max(EMBEDDING_LIMITS.maxInputChars);
const tokenId = z
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);
const tokens = z.array(tokenId).min(1).max(EMBEDDING_LIMITS.maxInputTokens);

export const embeddingsSchema = z.strictObject({
  model: z.string().min(1).max(256),
  input: z.union([text, z.array(text).min(1).max(EMBEDDING_LIMITS.maxInputs), tokens, z.array(tokens).min(1).max(EMBEDDING_LIMITS.maxInputs)]),
  encoding_format: z.enum(['float', 'base64']).nullable().optional(),
  dimensions: z.number().int().min(1).nullable().optional(),
  user: z.string().max(256).nullable().optional(),
});

export type EmbeddingsBody = z.infer<typeof embeddingsSchema>;

/** The inputs as a list: a string or a token array is one input. */
export function inputsOf(input: EmbeddingsBody['input']): Array<string | number[]> {
  if (typeof input === 'string') return [input];
  if (input.length > 0 && typeof input[0] === 'number') return [input as number[]];
  return input as Array<string | number[]>;
}

/** A vector as OpenAI's `encoding_format: "base64"` gives it: little-endian float32, base64. */
export function base64Vector(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i], i * 4);
  return bytes.toString('base64');
}

/**
 * The count limits, checked before the schema: a list over them fails every branch of `input`'s union, and the
 * deepest branch's complaint (an element of the wrong type) would hide the limit.
 */
function checkCounts(raw: unknown): void {
  const input = (raw as { input?: unknown } | null)?.input;
  if (!Array.isArray(input)) return;
  const tokenArray = input.length > 0 && typeof input[0] === 'number';
  const max = tokenArray ? EMBEDDING_LIMITS.maxInputTokens : EMBEDDING_LIMITS.maxInputs;
  if (input.length > max) {
    const what = tokenArray ? `${max} token ids` : `${max} inputs`;
    throw new HttpProblem(400, 'invalid_request', `Invalid value for "input": at most ${what} per request (${input.length} given).`, {
      param: 'input',
    });
  }
}

/**
 * Runs a direct call (embeddings, rerank): the runtime's refusals as on every route, and a backend's failure (a remote
 * engine down, refusing, or answering nonsense: BackendError) as the problem of its code (FAILURES' status: 503
 * backend_unavailable with Retry-After, 502 backend_error, 400 for the engine's refusals) instead of a bare 500.
 */
export async function directCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await translateAsync(fn);
  } catch (e) {
    if (!(e instanceof BackendError)) throw e;
    const retry = e.retryAfterMs === undefined ? undefined : { 'retry-after': String(Math.max(1, Math.ceil(e.retryAfterMs / 1000))) };
    throw new HttpProblem(FAILURES[e.code][1], e.code, e.message, retry ? { headers: retry } : {});
  }
}

/** A checked embeddings body: the inputs and what the answer needs (the route's and a batch line's). */
export function checkEmbeddingsBody(raw: unknown): EmbeddingsBody {
  checkCounts(raw);
  return parseBody(embeddingsSchema, raw);
}

/** The OpenAI answer of an embeddings call (the route's body, a batch line's `response.body`). */
export function embeddingsAnswer(body: EmbeddingsBody, result: EmbedOutcome): Record<string, unknown> {
  // A different `dimensions` is refused (no truncation, which only models trained for it allow, e.g. Matryoshka
  // embeddings): by the runtime before any work when the model's size is listed, else here once it is known.
  if (body.dimensions != null && body.dimensions !== result.dimensions) {
    throw new HttpProblem(
      400,
      'unsupported_capability',
      `The model "${result.model}" gives ${result.dimensions}-dimensional embeddings; other dimensions are not supported.`,
      { param: 'dimensions' },
    );
  }
  const base64 = body.encoding_format === 'base64';
  const promptTokens = result.tokens.reduce((a, b) => a + b, 0);
  return {
    object: 'list',
    data: result.vectors.map((v, index) => ({ object: 'embedding', index, embedding: base64 ? base64Vector(v) : Array.from(v) })),
    model: result.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

export async function createEmbeddings(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = checkEmbeddingsBody(await readJsonBody(req, deps.maxBodyBytes));
  const result = await directCall(() =>
    deps.runtime.embed({
      principal: ctx.principal,
      model: body.model,
      inputs: inputsOf(body.input),
      ...(body.dimensions != null ? { dimensions: body.dimensions } : {}),
      signal: ctx.signal,
    }),
  );
  sendJson(res, 200, embeddingsAnswer(body, result));
}
