// POST /lmsp/v1/chat/completions: OpenAI's chat completions, run as a durable task exactly like a /responses call
// (same validation, same create, cancelled when the client leaves, visible in /tasks, MCP and the editor's tree).
// An OpenAI client's baseURL is the LMSP base (/lmsp/v1), whose /models already answers OpenAI's list shape.
// Errors are the listener's problem+json, which carries OpenAI's `{error: {message, type, param, code}}` member.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readJsonBody } from '../http/body';
import type { RequestContext } from '../http/types';
import { ChatChunkTranslator, chatCompletionOf, endProblem, wantsLogprobs } from './chatCompletionsFormat';
import { inChatTerms, validateChatBody } from './chatCompletionsRequest';
import type { LmspDeps } from '../lmsp/deps';
import { idempotencyOf } from '../lmsp/idempotency';
import { IDEMPOTENCY_SCOPES } from '../lmsp/lmspConstants';
import { awaitTerminal, startResponseTask } from './responsesRoutes';
import { streamTaskEvents } from '../lmsp/streams';
import { sendJson } from '../lmsp/wire';

export async function createChatCompletion(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const idempotency = idempotencyOf(req, IDEMPOTENCY_SCOPES.chatCompletions, body);
  const chat = validateChatBody(body);
  const { task } = await startResponseTask(deps, res, ctx, { input: chat.input, idempotency, route: 'chat_completions' }).catch((e: unknown) => {
    throw inChatTerms(e, chat.names);
  });
  if (chat.stream) {
    const chunks = new ChatChunkTranslator({
      taskId: task.id,
      createdAt: task.createdAt,
      model: task.model,
      includeUsage: chat.includeUsage,
      logprobs: wantsLogprobs(task),
    });
    await streamTaskEvents(deps, res, {
      taskId: task.id,
      principal: ctx.principal,
      afterSeq: undefined,
      signal: ctx.signal,
      send: (writer, event) => {
        for (const chunk of chunks.next(event.type, event.data)) writer.send({ data: JSON.stringify(chunk) });
      },
      trailer: '[DONE]',
      noContentWhenDone: false,
    });
    return;
  }
  const final = await awaitTerminal(deps, req, ctx, task.id);
  if (!final) return;
  if (final.status !== 'succeeded' || !final.response) throw endProblem(final);
  sendJson(res, 200, chatCompletionOf(final));
}
