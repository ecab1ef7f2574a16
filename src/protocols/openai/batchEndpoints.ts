// What a batch line means on each endpoint the Batch API serves (docs/batches.md): the line's body checked exactly as
// the route checks it (the same schemas and rules), turned into the runtime's work, and its outcome written as the
// route would have answered it (`response.status_code` and `response.body` of the output file). The runtime runs the
// lines (runtime/batches); it gets this table through RuntimeOptions.batchEndpoints, as it gets the webhook sender.
// Differences from the routes, each refused naming the field: `stream` (a batch line has no connection to stream
// to), `background` (every line is already durable work) and `previous_response_id` (lines are independent).
import type { BatchAnswer, BatchEndpoint, BatchEndpoints } from '../../runtime/batches/types';
import { isRuntimeError } from '../../runtime/errors';
import type { TaskRecord } from '../../runtime/task';
import { HttpProblem, problemBody } from '../http/problem';
import { toResponseObject, wireResponse } from '../lmsp/format';
import { fromRuntimeError } from '../lmsp/problems';
import { validateResponseBody } from '../lmsp/schemas';
import { chatCompletionOf, endProblem } from './chatCompletionsFormat';
import { validateChatBody } from './chatCompletionsRequest';
import { checkEmbeddingsBody, embeddingsAnswer, inputsOf } from './embeddingsRoutes';

/** The endpoints' names in a batch (OpenAI's, with the /v1 prefix). */
export const BATCH_ENDPOINTS = {
  responses: '/v1/responses',
  chatCompletions: '/v1/chat/completions',
  embeddings: '/v1/embeddings',
} as const;

function refuse(param: string, why: string): never {
  throw new HttpProblem(400, 'invalid_request', `"${param}" is not supported in a batch: ${why}.`, { param });
}

/** A problem as a line's answer: its status and OpenAI's `{error: {message, type, param, code}}`. */
function problemAnswer(p: HttpProblem): BatchAnswer {
  return { statusCode: p.status, body: { error: problemBody(p).error } };
}

function errorAnswer(e: unknown): BatchAnswer {
  if (e instanceof HttpProblem) return problemAnswer(e);
  if (isRuntimeError(e)) return problemAnswer(fromRuntimeError(e));
  return problemAnswer(new HttpProblem(500, 'internal_error', 'The server could not complete the request.'));
}

function usageOf(task: TaskRecord): BatchAnswer['usage'] {
  return task.usage ? { inputTokens: task.usage.input_tokens, outputTokens: task.usage.output_tokens } : undefined;
}

function checkLineRules(body: unknown): void {
  const b = (body ?? {}) as Record<string, unknown>;
  if (b.stream === true) refuse('stream', 'a batch line is answered in the output file');
  if (b.background === true) refuse('background', 'every batch line already runs as durable work');
  if (b.previous_response_id != null) refuse('previous_response_id', 'batch lines are independent of each other');
}

const responses: BatchEndpoint = {
  prepare(body) {
    checkLineRules(body);
    return { kind: 'task', input: validateResponseBody(body).input };
  },
  taskAnswer(task) {
    if (task.status === 'succeeded' && task.response) return { statusCode: 200, body: wireResponse(task.response), usage: usageOf(task) };
    if (task.status === 'cancelled') return errorAnswer(endProblem(task));
    if (task.response && task.status !== 'failed') return { statusCode: 200, body: toResponseObject(task), usage: usageOf(task) };
    return errorAnswer(endProblem(task));
  },
  errorAnswer,
};

const chatCompletions: BatchEndpoint = {
  prepare(body) {
    checkLineRules(body);
    return { kind: 'task', input: validateChatBody(body).input };
  },
  taskAnswer(task) {
    if (task.status === 'succeeded' && task.response) return { statusCode: 200, body: chatCompletionOf(task), usage: usageOf(task) };
    return errorAnswer(endProblem(task));
  },
  errorAnswer,
};

const embeddings: BatchEndpoint = {
  prepare(raw) {
    const body = checkEmbeddingsBody(raw);
    return {
      kind: 'embed',
      model: body.model,
      inputs: inputsOf(body.input),
      answer: (outcome) => {
        try {
          const answer = embeddingsAnswer(body, outcome);
          const tokens = outcome.tokens.reduce((a, b) => a + b, 0);
          return { statusCode: 200, body: answer, usage: { inputTokens: tokens, outputTokens: 0 } };
        } catch (e) {
          return errorAnswer(e);
        }
      },
    };
  },
  taskAnswer: (task) => errorAnswer(endProblem(task)),
  errorAnswer,
};

/** The table the runtime is opened with (serve, the editor's host). */
export const OPENAI_BATCH_ENDPOINTS: BatchEndpoints = {
  [BATCH_ENDPOINTS.responses]: responses,
  [BATCH_ENDPOINTS.chatCompletions]: chatCompletions,
  [BATCH_ENDPOINTS.embeddings]: embeddings,
};
