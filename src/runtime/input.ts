// Input rounds: a task asking its client for input while it runs (MCP `input_required`). The rounds are stored with
// the task (tasks.input_rounds_json, one JSON array) and change only inside a task transition's write batch, so a
// request, its answers and the status they imply are always durable together. Pure helpers; the state changes are
// in generation.ts (asking) and runtime.ts (answering).
import { RuntimeError } from './errors';
import type { InputRequest, InputResponse, InputRound } from './task';

/** Names a backend gives its requests: short, and without the `.` that separates name and round in a key. */
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** At most this many requests in one round, and this many rounds in a task's life. */
export const MAX_INPUT_REQUESTS_PER_ROUND = 16;
export const MAX_INPUT_ROUNDS = 256;
/** Largest stored request or answer, as JSON. */
export const MAX_INPUT_JSON_CHARS = 256 * 1024;

export function inputKey(name: string, round: number): string {
  return `${name}.${round}`;
}

export function inputName(key: string): string {
  return key.slice(0, key.lastIndexOf('.'));
}

/** Keys of the round not answered yet. */
export function unansweredKeys(round: InputRound): string[] {
  return Object.keys(round.requests).filter((k) => !(k in round.responses));
}

/** The requests of the last round that still wait for an answer, or null when there are none. */
export function pendingRequests(rounds: readonly InputRound[] | null): Record<string, InputRequest> | null {
  const last = rounds?.[rounds.length - 1];
  if (!last) return null;
  const keys = unansweredKeys(last);
  return keys.length ? Object.fromEntries(keys.map((k) => [k, last.requests[k]])) : null;
}

/** Checks what a backend asks for; throws an Error the backend sees (a programming error on its side). */
export function checkInputRequests(requests: Record<string, InputRequest>): void {
  const names = Object.keys(requests ?? {});
  if (names.length === 0) throw new Error('requestInput needs at least one request');
  if (names.length > MAX_INPUT_REQUESTS_PER_ROUND) throw new Error(`requestInput takes at most ${MAX_INPUT_REQUESTS_PER_ROUND} requests at once`);
  for (const name of names) {
    if (!NAME.test(name)) throw new Error(`input request name "${name.slice(0, 80)}" must be 1–64 of A–Z, a–z, 0–9, _ and -`);
    const r = requests[name];
    if (!r || typeof r !== 'object' || typeof r.method !== 'string' || !r.method) throw new Error(`input request "${name}" needs a method`);
    if (JSON.stringify(r).length > MAX_INPUT_JSON_CHARS) throw new Error(`input request "${name}" is larger than ${MAX_INPUT_JSON_CHARS} characters`);
  }
}

/** A new round of `requests` (by name) after `rounds`. */
export function newRound(rounds: readonly InputRound[], requests: Record<string, InputRequest>, message?: string): InputRound {
  const round = (rounds[rounds.length - 1]?.round ?? 0) + 1;
  if (round > MAX_INPUT_ROUNDS) throw new Error(`a task may ask for input at most ${MAX_INPUT_ROUNDS} times`);
  return {
    round,
    requests: Object.fromEntries(Object.entries(requests).map(([name, r]) => [inputKey(name, round), r])),
    responses: {},
    ...(message?.trim() ? { message: message.trim().slice(0, 200) } : {}),
  };
}

/** Whether a stored round asked exactly `requests` (same names, same request objects): a replay of it. */
export function sameRound(stored: InputRound, requests: Record<string, InputRequest>): boolean {
  const keys = Object.keys(stored.requests);
  const names = Object.keys(requests);
  if (keys.length !== names.length) return false;
  return names.every((name) => {
    const r = stored.requests[inputKey(name, stored.round)];
    return r !== undefined && JSON.stringify(r) === JSON.stringify(requests[name]);
  });
}

/** A fully answered round's answers by the backend's names. */
export function answersByName(round: InputRound): Record<string, InputResponse> {
  return Object.fromEntries(Object.entries(round.responses).map(([k, v]) => [inputName(k), v]));
}

/** What a client may answer with: a JSON object of bounded size. Throws invalid_request. */
export function checkInputResponse(key: string, value: unknown): InputResponse {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new RuntimeError('invalid_request', `The answer for input request "${key.slice(0, 80)}" must be an object.`, 'inputResponses');
  }
  if (JSON.stringify(value).length > MAX_INPUT_JSON_CHARS) {
    throw new RuntimeError(
      'invalid_request',
      `The answer for input request "${key.slice(0, 80)}" is larger than ${MAX_INPUT_JSON_CHARS} characters.`,
      'inputResponses',
    );
  }
  return value as InputResponse;
}

/** The status message of a task waiting for input. */
export function waitingMessage(round: InputRound): string {
  const open = unansweredKeys(round).length;
  const total = Object.keys(round.requests).length;
  const what = round.message ? `: ${round.message}` : '';
  return total === open
    ? `waiting for input (${open} request${open === 1 ? '' : 's'})${what}`
    : `waiting for input (${open} of ${total} requests still open)${what}`;
}
