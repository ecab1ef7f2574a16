// Small helpers shared by the LMSP routes: JSON answers, event framing, id checks.
import type { ServerResponse } from 'node:http';
import type { TaskEvent } from '../../runtime/task';
import { endWithText } from '../http/bodyWriter';
import type { SseWriter } from '../http/sse';
import { wireResponse } from './format';
import { lmspProblem } from './problems';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.statusCode = status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Cache-Control', 'no-store');
  endWithText(res, JSON.stringify(body));
}

/** The event as LMSP sends it: `type` and `sequence_number` first, Responses objects in wire form. */
export function eventPayload(event: TaskEvent): Record<string, unknown> {
  const data: Record<string, unknown> = { ...event.data };
  if (data.response && typeof data.response === 'object') data.response = wireResponse(data.response as Record<string, unknown>);
  return Object.assign({ type: event.type, sequence_number: event.seq }, data, { type: event.type, sequence_number: event.seq });
}

export function sendEvent(writer: SseWriter, event: TaskEvent): void {
  writer.send({ id: event.seq, event: event.type, data: JSON.stringify(eventPayload(event)) });
}

const TASK_ID = /^task_[A-Za-z0-9_-]{1,200}$/;
const RESPONSE_ID = /^resp_[A-Za-z0-9_-]{1,200}$/;

export function checkTaskId(id: string): string {
  if (!TASK_ID.test(id)) throw lmspProblem('task_not_found', 'No task with this id.', { param: 'task_id' });
  return id;
}

export function checkResponseId(id: string): string {
  if (!RESPONSE_ID.test(id)) throw lmspProblem('response_not_found', 'No response with this id.', { param: 'response_id' });
  return id;
}
