// The OpenAI-compatible door: POST /responses (with background mode, conversation state and Codex CLI's dialect),
// POST /chat/completions, POST /embeddings, POST /rerank (llama.cpp server's and vLLM's shape), and the Files and Batch
// APIs (batchRoutes.ts), mounted below the LMSP base URL so that an OpenAI client's baseURL is /lmsp/v1 (or /v1, which
// the Anthropic door forwards here). Every request but an embeddings or rerank call (direct calls:
// embeddingsRoutes.ts, rerankRoutes.ts) is a durable task, or a batch of them, made through the runtime's API.
import type { Door } from '../door';
import { dispatch, exact, type Route } from '../http/router';
import type { DoorHandler } from '../http/types';
import type { LmspDeps } from '../lmsp/deps';
import { LMSP_PREFIX, PATHS, RESPONSE_PATHS } from '../lmsp/lmspConstants';
import { checkResponseId } from '../lmsp/wire';
import { createChatCompletion } from './chatCompletionsRoutes';
import { createEmbeddings } from './embeddingsRoutes';
import { cancelBatch, createBatch, createFile, deleteFile, fileContent, getBatch, getFile, listBatches, listFiles } from './batchRoutes';
import { createRerank } from './rerankRoutes';
import { cancelResponse, createResponse, deleteResponse, getInputItems, getResponse } from './responsesRoutes';

export function createOpenAiDoor(deps: LmspDeps): Door {
  const seg = '([^/]+)';
  const routes: Route[] = [
    { pattern: exact(PATHS.responses), methods: { POST: (q, r, c) => createResponse(deps, q, r, c) } },
    { pattern: exact(PATHS.chatCompletions), methods: { POST: (q, r, c) => createChatCompletion(deps, q, r, c) } },
    { pattern: exact(PATHS.embeddings), methods: { POST: (q, r, c) => createEmbeddings(deps, q, r, c) } },
    { pattern: exact(PATHS.files), methods: { POST: (q, r, c) => createFile(deps, q, r, c), GET: (_q, r, c) => listFiles(deps, r, c) } },
    {
      pattern: exact(`${PATHS.files}/${seg}`),
      methods: { GET: (_q, r, c, id) => getFile(deps, r, c, id), DELETE: (_q, r, c, id) => deleteFile(deps, r, c, id) },
    },
    { pattern: exact(`${PATHS.files}/${seg}/content`), methods: { GET: (_q, r, c, id) => fileContent(deps, r, c, id) } },
    { pattern: exact(PATHS.batches), methods: { POST: (q, r, c) => createBatch(deps, q, r, c), GET: (_q, r, c) => listBatches(deps, r, c) } },
    { pattern: exact(`${PATHS.batches}/${seg}`), methods: { GET: (_q, r, c, id) => getBatch(deps, r, c, id) } },
    { pattern: exact(`${PATHS.batches}/${seg}/cancel`), methods: { POST: (_q, r, c, id) => cancelBatch(deps, r, c, id) } },
    { pattern: exact(PATHS.rerank), methods: { POST: (q, r, c) => createRerank(deps, q, r, c) } },
    {
      pattern: exact(`${PATHS.responses}/${seg}`),
      methods: {
        GET: (_q, r, c, id) => getResponse(deps, r, c, checkResponseId(id)),
        DELETE: (_q, r, c, id) => deleteResponse(deps, r, c, checkResponseId(id)),
      },
    },
    {
      pattern: exact(`${PATHS.responses}/${seg}${RESPONSE_PATHS.cancel}`),
      methods: { POST: (_q, r, c, id) => cancelResponse(deps, r, c, checkResponseId(id)) },
    },
    {
      pattern: exact(`${PATHS.responses}/${seg}${RESPONSE_PATHS.inputItems}`),
      methods: { GET: (_q, r, c, id) => getInputItems(deps, r, c, checkResponseId(id)) },
    },
  ];
  const handler: DoorHandler = (req, res, ctx) => dispatch(routes, ctx.url.pathname.slice(LMSP_PREFIX.length), req, res, ctx);
  return {
    mounts: [PATHS.responses, PATHS.chatCompletions, PATHS.embeddings, PATHS.rerank, PATHS.files, PATHS.batches].map((p) => ({
      prefix: LMSP_PREFIX + p,
      handler,
      problemStyle: 'problem+json' as const,
    })),
    close: async () => {},
  };
}
