// The Anthropic Messages door at /v1 (docs/anthropic.md): POST /v1/messages (any query, `?beta=true` included),
// POST /v1/messages/count_tokens, and GET /v1/models[/{id}] in Anthropic's list shape for a client that speaks
// Anthropic (an `anthropic-version` or `x-api-key` header). Every other /v1 path is the LMSP door's own route under
// /lmsp/v1 (so `http://127.0.0.1:PORT/v1` is also an OpenAI base URL, Codex CLI's default layout). An Anthropic
// client's base URL is the listener's URL itself (ANTHROPIC_BASE_URL without /v1).
//
// Every message is a durable task made exactly as a /responses call is (startResponseTask: fair-shared, listed in
// /lmsp/v1/tasks with route `anthropic_messages`, cancellable, cancelled when its client disconnects). Errors on
// /v1/messages* are Anthropic's envelope (the listener writes its own 401/403/404/413/503 there in that style too)
// and every answer carries a `request-id`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TaskRuntimeApi } from '../../runtime/api';
import type { ModelInfo } from '../../runtime/backend';
import type { ResponseRequest } from '../../runtime/task';
import { readJsonBody } from '../http/body';
import { HttpProblem, requestIdOf, writeProblem } from '../http/problem';
import type { Door } from '../door';
import type { DoorHandler, RequestContext } from '../http/types';
import { endProblem } from '../openai/chatCompletionsFormat';
import type { LmspDeps } from '../lmsp/deps';
import { LMSP_PREFIX } from '../lmsp/lmspConstants';
import { awaitTerminal, startResponseTask } from '../openai/responsesRoutes';
import { streamTaskEvents } from '../lmsp/streams';
import { sendJson } from '../lmsp/wire';
import { messageOf, MessageStreamTranslator, type FormatContext } from './anthropicFormat';
import { inAnthropicTerms, validateCountTokensBody, validateMessagesBody, type MessagesRequest } from './anthropicRequest';
import { loosenToolSchema, MAX_LOOSENINGS } from './toolSchemas';

/** Mount points: `/v1/messages*` answers errors in Anthropic's envelope; the rest of `/v1` as the LMSP door does. */
export const ANTHROPIC_PREFIX = '/v1';
export const MESSAGES_PREFIX = '/v1/messages';
const COUNT_TOKENS_PATH = `${MESSAGES_PREFIX}/count_tokens`;
const MODELS_PATH = `${ANTHROPIC_PREFIX}/models`;
/** How a count_tokens answer was counted: `tokenizer` (the model's, over the prompt text) or `estimate` (bytes / 4). */
export const TOKEN_COUNT_HEADER = 'x-task-runtime-token-count';
/** The task meta this door records besides `lmsp_route`. */
export const META = { beta: 'anthropic_beta', session: 'claude_code_session_id' } as const;
export const ROUTE = 'anthropic_messages';
/** Heartbeats of a Messages stream are Anthropic `ping` events (Claude Code aborts a stream silent for 300 s). */
const PING = { event: 'ping', data: JSON.stringify({ type: 'ping' }) };

/**
 * `forward` answers the other /v1 paths once they are rewritten to /lmsp/v1 (the endpoint's dispatch over every
 * door's mounts, so /v1/responses reaches the OpenAI-compatible door and /v1/tasks the LMSP door).
 */
export function createAnthropicDoor(deps: LmspDeps, forward: DoorHandler): Door {
  const handle: DoorHandler = async (req, res, ctx) => {
    requestIdOf(res);
    const path = ctx.url.pathname;
    if (path === MESSAGES_PREFIX) return post(req, () => createMessage(deps, req, res, ctx));
    if (path === COUNT_TOKENS_PATH) return post(req, () => countTokens(deps, req, res));
    if (path.startsWith(`${MESSAGES_PREFIX}/`))
      throw new HttpProblem(404, 'not_found', `No such endpoint: ${path} (message batches are not served).`);
    if ((path === MODELS_PATH || path.startsWith(`${MODELS_PATH}/`)) && speaksAnthropic(req)) {
      try {
        return models(deps.runtime, res, ctx.url, path.slice(MODELS_PATH.length + 1));
      } catch (e) {
        if (!(e instanceof HttpProblem)) throw e;
        return writeProblem(res, e, 'anthropic');
      }
    }
    return forward(req, res, lmspContext(ctx));
  };
  return {
    mounts: [
      { prefix: MESSAGES_PREFIX, handler: handle, problemStyle: 'anthropic' },
      { prefix: ANTHROPIC_PREFIX, handler: handle, problemStyle: 'problem+json' },
    ],
    close: async () => {},
  };
}

async function post(req: IncomingMessage, run: () => Promise<void>): Promise<void> {
  if (req.method !== 'POST')
    throw new HttpProblem(405, 'method_not_allowed', `${req.method} is not allowed here; use POST.`, { headers: { Allow: 'POST' } });
  await run();
}

/** An Anthropic client: the SDK always sends anthropic-version; x-api-key is its apiKey. */
function speaksAnthropic(req: IncomingMessage): boolean {
  return req.headers['anthropic-version'] !== undefined || req.headers['x-api-key'] !== undefined;
}

/** The request as the LMSP door sees it: `/v1/x` → `/lmsp/v1/x`, the same principal and abort signal. */
function lmspContext(ctx: RequestContext): RequestContext {
  const url = new URL(LMSP_PREFIX + ctx.url.pathname.slice(ANTHROPIC_PREFIX.length) + ctx.url.search, ctx.url);
  return {
    principal: ctx.principal,
    url,
    get signal() {
      return ctx.signal;
    },
  };
}

async function createMessage(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const m = validateMessagesBody(body, deps.seal);
  const key = conversationKey(req, body);
  if (key !== undefined) m.input = { ...m.input, prompt_cache_key: key };
  const { task } = await startMessageTask(deps, res, ctx, m, metaOf(req));
  const format: FormatContext = { seal: deps.seal, omitThinking: m.omitThinking };
  if (m.stream) {
    const events = new MessageStreamTranslator(task, promptTokens(deps.runtime, task.request).tokens, format);
    await streamTaskEvents(deps, res, {
      taskId: task.id,
      principal: ctx.principal,
      afterSeq: undefined,
      signal: ctx.signal,
      noContentWhenDone: false,
      heartbeatFrame: PING,
      send: (writer, event) => {
        for (const e of events.translate(event.type, event.data)) writer.send({ event: e.event, data: JSON.stringify(e.data) });
      },
    });
    return;
  }
  const final = await awaitTerminal(deps, req, ctx, task.id);
  if (!final) return;
  if (final.status !== 'succeeded' || !final.response) throw inAnthropicTerms(endProblem(final), m.names);
  sendJson(res, 200, messageOf(final, format));
}

/**
 * The conversation a request belongs to, as the runtime's cache key (prompt_cache_key: its next turn goes back to
 * the sequence or endpoint holding its prompt): Claude Code's `x-claude-code-session-id`, else the `session_id` of
 * the JSON in its `metadata.user_id`; none for other clients (a user id alone is not a conversation).
 */
function conversationKey(req: IncomingMessage, body: unknown): string | undefined {
  const header = req.headers['x-claude-code-session-id'];
  if (typeof header === 'string' && header.length > 0 && header.length <= 256) return header;
  const userId = (body as { metadata?: { user_id?: unknown } } | null)?.metadata?.user_id;
  if (typeof userId !== 'string' || !userId.startsWith('{')) return undefined;
  try {
    const session = (JSON.parse(userId) as { session_id?: unknown }).session_id;
    return typeof session === 'string' && session.length > 0 && session.length <= 256 ? session : undefined;
  } catch {
    return undefined;
  }
}

/** What the task records of the request: Claude Code's beta list and session, for debugging and grouping. */
function metaOf(req: IncomingMessage): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  const beta = req.headers['anthropic-beta'];
  if (beta !== undefined) meta[META.beta] = Array.isArray(beta) ? beta.join(',') : beta;
  const session = req.headers['x-claude-code-session-id'];
  if (typeof session === 'string' && session.length <= 256) meta[META.session] = session;
  return meta;
}

/**
 * Creates the task. The reasoning effort thinking asks for is applied only where the model has the control: with the
 * model loaded, a model whose template has no thought segment refuses it at create, and the task is made without it;
 * before the load nothing can tell, and it is left out (thinking never makes a 400 here). A tool schema keyword the
 * grammar cannot enforce is dropped rather than refused (toolSchemas.ts).
 */
async function startMessageTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, m: MessagesRequest, meta: Record<string, unknown>) {
  const loaded = deps.runtime.listModels().find((x) => x.id === m.input.model)?.state === 'loaded';
  let effort = loaded ? m.effort : undefined;
  let input = m.input;
  for (let tries = 0; ; tries++) {
    try {
      const request = effort !== undefined ? { ...input, reasoning: { effort } } : input;
      return await startResponseTask(deps, res, ctx, { input: request, idempotency: undefined, route: ROUTE, meta });
    } catch (e) {
      if (!(e instanceof HttpProblem) || tries >= MAX_LOOSENINGS) throw inAnthropicTerms(e, m.names);
      if (effort !== undefined && e.extra.param === 'reasoning.effort') {
        effort = undefined;
        continue;
      }
      const loosened = loosenToolSchema(input, e);
      if (!loosened) throw inAnthropicTerms(e, m.names);
      input = loosened;
    }
  }
}

/**
 * The prompt's tokens: exact when the model is loaded (its own template and tokenizer over the prompt the runtime
 * would evaluate, TaskRuntimeApi.countPromptTokens), else bytes / 4 of the request's text. Never loads a model, never
 * waits in the queue.
 */
export function promptTokens(runtime: TaskRuntimeApi, input: ResponseRequest): { tokens: number; exact: boolean } {
  const counted = runtime.countPromptTokens(input);
  if (counted !== null) return { tokens: counted, exact: true };
  const text = [input.instructions ?? '', JSON.stringify(input.input), input.tools ? JSON.stringify(input.tools) : ''].join('');
  return { tokens: Math.ceil(Buffer.byteLength(text, 'utf8') / 4), exact: false };
}

async function countTokens(deps: LmspDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const input = validateCountTokensBody(body, deps.seal);
  if (!deps.runtime.listModels().some((x) => x.id === input.model)) throw modelNotFound(String(input.model));
  const count = promptTokens(deps.runtime, input);
  sendJson(res, 200, { input_tokens: count.tokens }, { [TOKEN_COUNT_HEADER]: count.exact ? 'tokenizer' : 'estimate' });
}

function modelNotFound(id: string): HttpProblem {
  return new HttpProblem(404, 'model_not_found', `model: ${id.slice(0, 256)} was not found.`, { param: 'model' });
}

/** A model in Anthropic's ModelInfo shape: its context as both bounds (prompt and output share it). */
function anthropicModel(m: ModelInfo): Record<string, unknown> {
  const context = m.contextLength ?? m.maxContextLength ?? null;
  return {
    type: 'model',
    id: m.id,
    display_name: m.id,
    created_at: '1970-01-01T00:00:00Z',
    max_input_tokens: context,
    max_tokens: context,
    capabilities: null,
  };
}

/** GET /v1/models (limit, after_id, before_id) and GET /v1/models/{id}. */
function models(runtime: TaskRuntimeApi, res: ServerResponse, url: URL, id: string): void {
  const all = runtime.listModels();
  if (id) {
    const m = all.find((x) => x.id === safeDecode(id));
    if (!m) throw modelNotFound(id);
    return sendJson(res, 200, anthropicModel(m));
  }
  const q = url.searchParams;
  const limit = Math.min(1000, Math.max(1, Number(q.get('limit') ?? 20) || 20));
  const after = all.findIndex((m) => m.id === q.get('after_id'));
  const before = all.findIndex((m) => m.id === q.get('before_id'));
  const from = before >= 0 ? Math.max(0, before - limit) : after + 1;
  const to = before >= 0 ? before : all.length;
  const page = all.slice(from, Math.min(to, from + limit)).map(anthropicModel);
  sendJson(res, 200, {
    data: page,
    has_more: before >= 0 ? from > 0 : from + limit < to,
    first_id: page[0]?.id ?? null,
    last_id: page[page.length - 1]?.id ?? null,
  });
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}
