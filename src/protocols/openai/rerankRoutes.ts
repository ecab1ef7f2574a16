// POST /lmsp/v1/rerank: reranking in the shape llama.cpp server and vLLM share (Jina's / Cohere's): `{model, query,
// documents, top_n, return_documents}` → `{id, object, model, results: [{index, relevance_score, document?}],
// usage}`, results sorted by score, best first. /v1/rerank reaches it through the Anthropic door's forwarding, like
// /v1/embeddings. A direct call, not a task (runtime/embeddings.ts): nothing is stored. No SDK has a rerank method,
// so the errors are those of the OpenAI-style routes beside it (problem+json with `{error: {message, type, param,
// code}}`).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { readJsonBody } from '../http/body';
import { HttpProblem } from '../http/problem';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from '../lmsp/deps';
import { parseBody } from '../lmsp/schemas';
import { sendJson } from '../lmsp/wire';
import { directCall, EMBEDDING_LIMITS } from './embeddingsRoutes';

/** Limits of one request (docs/embeddings.md). */
export const RERANK_LIMITS = {
  /** Documents in one request (Cohere's and vLLM's usual bound; each is one evaluation of query + document). */
  maxDocuments: 1024,
  /** Characters of the query or of one document (its tokens are bounded by the model's context, checked by the backend). */
  maxChars: EMBEDDING_LIMITS.maxInputChars,
} as const;

const text = z.string().min(1).max(RERANK_LIMITS.maxChars);

export const rerankSchema = z.strictObject({
  /** Optional as on llama.cpp server (the default model); vLLM and Cohere clients always send it. */
  model: z.string().min(1).max(256).nullable().optional(),
  query: text,
  documents: z.array(text).min(1).max(RERANK_LIMITS.maxDocuments),
  top_n: z.number().int().min(1).nullable().optional(),
  return_documents: z.boolean().nullable().optional(),
});

/** The count limit, checked before the schema so that an over-long list is named as such (not its first bad element). */
function checkCount(raw: unknown): void {
  const documents = (raw as { documents?: unknown } | null)?.documents;
  if (Array.isArray(documents) && documents.length > RERANK_LIMITS.maxDocuments) {
    throw new HttpProblem(
      400,
      'invalid_request',
      `Invalid value for "documents": at most ${RERANK_LIMITS.maxDocuments} documents per request (${documents.length} given).`,
      { param: 'documents' },
    );
  }
}

export async function createRerank(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const raw = await readJsonBody(req, deps.maxBodyBytes);
  checkCount(raw);
  const body = parseBody(rerankSchema, raw);
  const result = await directCall(() =>
    deps.runtime.rerank({
      principal: ctx.principal,
      model: body.model ?? undefined,
      query: body.query,
      documents: body.documents,
      signal: ctx.signal,
    }),
  );
  // Best first; equal scores keep the documents' order (Array.prototype.sort is stable).
  const ranked = result.scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score);
  const promptTokens = result.tokens.reduce((a, b) => a + b, 0);
  sendJson(res, 200, {
    id: `rerank-${randomUUID()}`,
    object: 'list',
    model: result.model,
    results: ranked.slice(0, body.top_n ?? ranked.length).map(({ index, score }) => ({
      index,
      relevance_score: score,
      ...(body.return_documents ? { document: { text: body.documents[index] } } : {}),
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  });
}
