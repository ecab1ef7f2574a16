// Problem objects (RFC 9457 + `code`) for task.error. Titles are stable per code; detail says what happened.
import type { Problem } from './task';

/**
 * Why a task failed: every code a task's `error.code` can carry, with its title and HTTP status. A backend's
 * `BackendError` names one of these, so a misspelt code is a compile error, not a silent "Task failed".
 */
export const FAILURES = {
  server_restarted: ['Server restarted', 503],
  model_load_failed: ['Model load failed', 500],
  model_error: ['Model error', 500],
  model_not_found: ['Model not found', 404],
  deadline_exceeded: ['Deadline exceeded', 504],
  internal_error: ['Internal error', 500],
  store_unwritable: ['Store unwritable', 503],
  backend_unavailable: ['Backend unavailable', 503],
  backend_interrupted: ['Backend interrupted', 502],
  backend_error: ['Backend error', 502],
  invalid_request: ['Invalid request', 400],
  request_error: ['Request failed', 502],
  context_length_exceeded: ['Context length exceeded', 400],
  invalid_json_schema: ['Invalid JSON schema', 400],
  unsupported_capability: ['Unsupported capability', 400],
} as const satisfies Record<string, readonly [title: string, status: number]>;
export type FailureCode = keyof typeof FAILURES;

/** The one base of every problem `type` URI, the runtime's and the doors'. */
export const PROBLEM_TYPE_BASE = 'https://madeforagent.com/lmsp/1.0/errors#';

export function problem(code: FailureCode, detail: string): Problem {
  const [title, status] = FAILURES[code];
  return { type: `${PROBLEM_TYPE_BASE}${code}`, title, status, detail, code };
}

/**
 * An absolute path: POSIX (`/…`, `~/…`), Windows (`C:\…`, `C:/…`, `\\server\…`) or a `file://` URL. It starts at
 * the beginning of the text or after a space, quote, bracket, `=` or `,` (so `application/json`, `1/2` and the path
 * of an `https://` URL are not paths) and runs to the next space, quote, closing bracket, `,`, `;` or `:`.
 */
const ABSOLUTE_PATH = /(^|[\s'"`([=,])(?:file:\/\/)?(?:~?\/|[A-Za-z]:[\\/]|\\\\)[^\s'"`)\],;:]+/g;

/**
 * Error text fit for a problem detail or a task error, which clients see: every absolute path becomes `<path>`
 * (a file name can name a person: /home/alice), and the text is cut to `maxChars`. The one scrubber for error
 * text; backends use it too.
 */
export function errorText(err: unknown, maxChars = 300): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.replace(ABSOLUTE_PATH, '$1<path>').slice(0, maxChars);
}
