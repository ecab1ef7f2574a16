// OpenAI background mode and conversation state on /responses (docs/lmsp.md): the rule that
// ties background to store, the restart policy a background response runs under, the input a previous_response_id
// stands for, and a stored response's input items as OpenAI lists them.
//
// A chain is expanded when the new response is created, not when it runs: its task stores the whole input it runs
// (the previous response's input items, then its output items, then its own input; the previous input already holds
// everything before it), so a queued task or a restart never depends on an ancestor still existing (deleted or past
// retention), and a restart runs again exactly what was accepted. The cost is a stored input that grows with the
// conversation, which the backend's context check bounds anyway (a chain longer than the context is a 400 at create).
import type { TaskRuntimeApi } from '../../runtime/api';
import { isTerminal, type ResponseRequest, type RestartPolicy, type TaskRecord } from '../../runtime/task';
import { z } from 'zod';
import { HttpProblem } from '../http/problem';
import { DEFAULTS, QUERY } from '../lmsp/lmspConstants';
import { lmspProblem } from '../lmsp/problems';
import { isObject } from '../../runtime/jsonValues';

type Item = Record<string, unknown>;

/** OpenAI keeps a background response only when it is stored: `background: true` with `store: false` is a 400. */
export function checkBackgroundRules(body: { background?: boolean | null; store?: boolean }, at = ''): void {
  if (body.background === true && body.store === false) {
    throw lmspProblem(
      'invalid_request',
      "Background mode requires 'store' to be true (or absent): a background response is kept so it can be polled.",
      {
        param: `${at}store`,
      },
    );
  }
}

/**
 * on_restart of a background response: the configured policy; `resume` where the server offers it at all, else
 * `retry` (a model that cannot resume is answered by the caller, which creates it again with `retry`).
 */
export function backgroundPolicy(runtime: TaskRuntimeApi, configured: RestartPolicy): RestartPolicy {
  if (configured === 'resume' && !(runtime.supportsResume && runtime.limits.onRestart.includes('resume'))) return 'retry';
  return runtime.limits.onRestart.includes(configured) ? configured : 'fail';
}

/** Whether a create was refused only because the model cannot resume (so `retry` is used instead). */
export function refusedResume(e: unknown): boolean {
  return e instanceof HttpProblem && e.code === 'unsupported_capability' && e.extra.param === 'on_restart';
}

/** A message item as OpenAI lists it: content as parts (input_text, or output_text for the assistant). */
function listedMessage(it: Item, id: string): Item {
  const role = typeof it.role === 'string' ? it.role : 'user';
  const content =
    typeof it.content === 'string'
      ? [role === 'assistant' ? { type: 'output_text', text: it.content, annotations: [] } : { type: 'input_text', text: it.content }]
      : Array.isArray(it.content)
        ? it.content.map((part) => {
            if (!isObject(part)) return part;
            // Log-probabilities belong to the response that produced the text, not to the input it becomes.
            const { logprobs: _dropped, ...rest } = part;
            return rest;
          })
        : [];
  return { id, type: 'message', role, status: typeof it.status === 'string' ? it.status : 'completed', content };
}

function isMessage(it: Item): boolean {
  return (it.type === undefined || it.type === 'message') && typeof it.role === 'string';
}

/**
 * A stored request's input items as OpenAI lists them, each with an id: the one it was given, else one derived from
 * the response id and its position (stable across reads, and kept when the item is carried into a chained response);
 * a repeated id is replaced by a derived one, so `after=<id>` always names one place.
 */
export function inputItemsOf(task: Pick<TaskRecord, 'responseId' | 'request'>): Item[] {
  const raw: unknown[] =
    typeof task.request.input === 'string' ? [{ type: 'message', role: 'user', content: task.request.input }] : task.request.input;
  const suffix = task.responseId.replace(/^resp_/, '');
  const seen = new Set<string>();
  return raw.map((item, i) => {
    const it = isObject(item) ? item : {};
    const given = typeof it.id === 'string' && it.id.length > 0 && !seen.has(it.id) ? it.id : undefined;
    const id = given ?? `${isMessage(it) ? 'msg' : 'item'}_${suffix}_${i}`;
    seen.add(id);
    return isMessage(it) ? listedMessage(it, id) : { ...it, id };
  });
}

/** A finished response's output items as the next response's input (messages without log-probabilities). */
function outputItemsOf(task: TaskRecord): Item[] {
  const output = Array.isArray(task.response?.output) ? (task.response.output as unknown[]) : [];
  return output.filter(isObject).map((it) => (isMessage(it) && typeof it.id === 'string' ? listedMessage(it, it.id) : it));
}

/**
 * The request with `previous_response_id` resolved (docs/lmsp.md): its input becomes the previous response's
 * input items, then its output items, then this request's own input. The previous response must be the caller's
 * own and finished; otherwise 404 `previous_response_not_found` (an unknown id and another principal's read the
 * same) or 400 while it is still running. `at`: the param prefix ("" or "input.").
 */
export function withPreviousResponse(runtime: TaskRuntimeApi, principal: string, request: ResponseRequest, at = ''): ResponseRequest {
  const previousId = request.previous_response_id;
  if (previousId === undefined) return request;
  const param = `${at}previous_response_id`;
  const previous = runtime.getTaskByResponseId(previousId, principal);
  // A `store: false` response was never kept to be continued (OpenAI: not found).
  if (!previous || previous.request.store === false)
    throw lmspProblem('previous_response_not_found', `Previous response with id '${previousId.slice(0, 256)}' not found.`, { param });
  if (!isTerminal(previous.status)) {
    throw lmspProblem('invalid_request', `Previous response with id '${previousId}' has not finished yet; continue from it once it has.`, { param });
  }
  const own: unknown[] = typeof request.input === 'string' ? [{ type: 'message', role: 'user', content: request.input }] : request.input;
  return { ...request, input: [...inputItemsOf(previous), ...outputItemsOf(previous), ...own] };
}

const inputItemsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(DEFAULTS.maxInputItemsLimit).optional(),
  order: z.enum(['asc', 'desc']).optional(),
  after: z.string().min(1).max(256).optional(),
  // Nothing this server stores is left out of an input item, so every include value is already honoured.
  include: z.array(z.string().max(256)).max(16).optional(),
});

/** GET /responses/{id}/input_items: `{object: "list", data, first_id, last_id, has_more}`, newest first by default. */
export function listInputItems(task: TaskRecord, params: URLSearchParams): Record<string, unknown> {
  const raw: Record<string, unknown> = {};
  for (const key of new Set(params.keys())) {
    const values = params.getAll(key);
    if (key === QUERY.include || key === `${QUERY.include}[]`) raw.include = [...((raw.include as string[]) ?? []), ...values];
    else if (values.length > 1) throw lmspProblem('invalid_request', `Query parameter "${key}" given more than once.`, { param: key });
    else raw[key] = values[0];
  }
  const parsed = inputItemsQuery.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const param = issue.code === 'unrecognized_keys' ? issue.keys[0] : String(issue.path[0] ?? '');
    throw lmspProblem(
      'invalid_request',
      issue.code === 'unrecognized_keys' ? `Unknown query parameter "${param}".` : `Invalid value for "${param}": ${issue.message}.`,
      { param },
    );
  }
  const q = parsed.data;
  const items = inputItemsOf(task);
  if ((q.order ?? 'desc') === 'desc') items.reverse();
  let start = 0;
  if (q.after !== undefined) {
    const at = items.findIndex((it) => it.id === q.after);
    if (at < 0) throw lmspProblem('invalid_request', `No input item '${q.after}' in this response.`, { param: 'after' });
    start = at + 1;
  }
  const limit = q.limit ?? DEFAULTS.inputItemsLimit;
  const data = items.slice(start, start + limit);
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: start + limit < items.length,
  };
}
