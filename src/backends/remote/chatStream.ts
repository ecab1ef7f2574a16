// One streaming chat completion against an OpenAI-compatible engine: `POST {base}/chat/completions` with
// `stream: true` and `stream_options.include_usage`, parsed with a bounded SSE parser, every chunk validated.
// Plain fetch + sse.ts rather than the `openai` client: the client adds retries, redirects-following defaults and
// its own timeouts that we need to control (never follow a redirect with a key, classify every failure for the
// runtime's retry rules), and a 500-line dependency for ~150 lines of parsing we test directly.
// Every failure becomes a BackendError whose kind tells the runtime what to do (see runtime/backend.ts):
//   nothing received (refused, reset, DNS, 429/503)     → unavailable (endpoint marked down, another one tried)
//   stream cut before the finish chunk                  → interrupted (on_restart policy)
//   HTTP error, redirect, non-SSE body, bad JSON/shape,
//   oversized event, no complete event for idleMs       → failed, with a message that names the engine, not the key
//   prompt longer than the context (any engine's words)  → failed, context_length_exceeded
// Log-probabilities (`choices[0].logprobs.content`) are read only when the request asked for them; then a malformed
// entry fails the stream like any other bad shape (a client that asked must not get silently wrong numbers), and
// entries that arrive on a chunk without content (an engine holding text back) go with the next content piece —
// those still pending at the end belonged to text never sent (a stop sequence) and are dropped.
// Function calls and reasoning: `delta.tool_calls[{index, id, type, function: {name, arguments}}]` become
// pieces on a function_call channel — a call starts (a piece, maybe '') with the first delta of its index, which
// must name the function, and its arguments follow as raw JSON text; each index is one call, with the engine's id
// (or `call_` + random when it sends none or repeats one), indexes 0, 1, 2… in order (parallel calls), never back to
// an earlier one. `delta.reasoning_content` / `delta.reasoning` (quirks.ts REASONING_DELTA_FIELDS) become pieces on
// the reasoning channel. A malformed one (no name, arguments that are not text, an index that skips or goes back)
// fails the task like any other bad shape. Log-probabilities go with answer text only; those of reasoning and call
// tokens are dropped.
// The stop string an engine says ended the output (vLLM's `choices[0].stop_reason`, quirks.ts STOP_SEQUENCE_FIELDS)
// is kept when it is text; the backend reports it only when it is one of the request's stop strings.
// What engines send (error shapes, overflow messages, finish reasons) is data in quirks.ts.
import { KeyTextScrubber, scrubKey } from './scrubKey';
import { randomBytes } from 'node:crypto';
import { BackendError, type FinishReason, type OutputChannel, type TokenLogprob } from '../../runtime/backend';
import type { FailureCode } from '../../runtime/problems';
import {
  engineErrorOf,
  FINISH_REASONS,
  isContextOverflow,
  isWrongRoute,
  REASONING_DELTA_FIELDS,
  STOP_SEQUENCE_FIELDS,
  type EngineErrorInfo,
} from './quirks';
import { SseLimitError, SseParser } from '../../protocols/http/sseParser';
import { isObject } from '../../runtime/jsonValues';

export interface StreamTimeouts {
  /** Until the response headers arrive (prompt processing happens before them on some engines). */
  headersMs: number;
  /** Between two complete SSE events once the stream is open: a slow-loris stream fails after this. */
  idleMs: number;
}

export interface ChatStreamRequest {
  /** The endpoint's OpenAI-style base, without a trailing slash (e.g. http://127.0.0.1:8080/v1). */
  baseUrl: string;
  /** Label for messages: engine name and host, never the key. */
  label: string;
  apiKey?: string;
  body: Record<string, unknown>;
  signal: AbortSignal;
  timeouts: StreamTimeouts;
  maxEventBytes: number;
  /** Read each chunk's log-probabilities (the body asks for them). */
  logprobs?: boolean;
  /**
   * Each piece: answer text (no channel) with the log-probabilities of its tokens when `logprobs` is set and the
   * engine sent them, or reasoning / a function call's arguments on their channel (see applyChatEvent).
   */
  onDelta: DeltaHandler;
}

export interface ChatStreamResult {
  finishReason: Exclude<FinishReason, 'aborted'>;
  inputTokens?: number;
  outputTokens?: number;
  /** Content chunks received (an estimate of output tokens when the engine reports no usage). */
  chunks: number;
  /** The stop string the engine says ended the output (finish `stop`), when it says (quirks.ts STOP_SEQUENCE_FIELDS). */
  stopSequence?: string;
  /** True once the engine answered at all (for health bookkeeping). */
  answered: true;
}

export type DeltaHandler = (text: string, logprobs?: TokenLogprob[], channel?: OutputChannel) => void;

/** A failure before any response byte: the endpoint is unreachable, safe to try another one. */
export class EndpointUnreachable extends BackendError {
  constructor(message: string, retryAfterMs?: number) {
    super('unavailable', 'backend_unavailable', message, retryAfterMs);
  }
}

const MAX_ERROR_TEXT = 300;

/** Engine-provided text made safe for task errors: no control characters, no key in any spelling (scrubKey.ts), bounded. */
export function engineText(raw: unknown, apiKey?: string): string {
  // Bounded before the scan: an engine's error text can be a whole body.
  let s = (typeof raw === 'string' ? raw : JSON.stringify(raw ?? '')).slice(0, 16 * MAX_ERROR_TEXT);
  s = scrubKey(s, apiKey);
  s = s.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return s.length > MAX_ERROR_TEXT ? `${s.slice(0, MAX_ERROR_TEXT)}…` : s;
}

export function causeOf(e: unknown): string {
  const err = e as { cause?: { code?: string; message?: string }; message?: string };
  return err?.cause?.code ?? err?.cause?.message ?? err?.message ?? String(e);
}

export function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  if (/^\d{1,6}$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

const tokenCount = (v: unknown): number | undefined => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : undefined);

export function abortError(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
}

export async function streamChat(req: ChatStreamRequest): Promise<ChatStreamResult> {
  const { label, apiKey } = req;
  const fail = (code: FailureCode, msg: string) => new BackendError('failed', code, `${label}: ${msg}`);
  if (req.signal.aborted) throw abortError();

  // Our own timer aborts the request; the caller's signal aborts it too (cancel closes the HTTP stream).
  const timer = new AbortController();
  let timedOut: string | undefined;
  let deadline: NodeJS.Timeout | undefined;
  const arm = (ms: number, what: string) => {
    if (deadline) clearTimeout(deadline);
    deadline = setTimeout(() => {
      timedOut = what;
      timer.abort();
    }, ms);
  };
  const signal = AbortSignal.any([req.signal, timer.signal]);
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  arm(req.timeouts.headersMs, `no response within ${Math.round(req.timeouts.headersMs / 1000)} s`);
  let res: Response;
  try {
    res = await fetch(`${req.baseUrl}/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify(req.body),
      signal,
      // Never follow: a redirect to another host would carry the Authorization header there.
      redirect: 'manual',
    });
  } catch (e) {
    clearTimeout(deadline);
    if (req.signal.aborted) throw abortError();
    if (timedOut) throw fail('backend_error', `${timedOut}.`);
    throw new EndpointUnreachable(`${label} is not reachable (${engineText(causeOf(e), apiKey)}).`);
  }

  try {
    if (!res.ok) throw await httpFailure(res, label, apiKey, req.baseUrl, req.maxEventBytes);
    const type = res.headers.get('content-type') ?? '';
    if (!/^text\/event-stream\b/i.test(type)) {
      // Some engines answer an error with 200 and a JSON body (LM Studio: unknown routes, some context overflows).
      const info = /json/i.test(type) ? engineErrorOf(parseJson(await readSmall(res, req.maxEventBytes).catch(() => ''))) : undefined;
      if (info) throw engineFailure(label, info, apiKey, 'answered with an error');
      throw fail('backend_error', `did not answer with an event stream (content-type "${engineText(type) || 'none'}").`);
    }
    if (!res.body) throw fail('backend_error', 'answered with an empty body.');
    return await readStream(req, res.body, arm, fail);
  } catch (e) {
    if (req.signal.aborted) throw abortError();
    if (timedOut) throw fail('backend_error', `${timedOut}; the stream was closed.`);
    throw e;
  } finally {
    clearTimeout(deadline);
  }
}

/**
 * The error of an answer that is not a success (a redirect, or HTTP 4xx/5xx), as generation and the direct calls
 * (jsonCall.ts) both map it: busy or unavailable → EndpointUnreachable (the next endpoint is tried), credentials, a
 * context overflow (quirks.ts), an unknown model or route, a refused request, anything else.
 */
export async function httpFailure(
  res: Response,
  label: string,
  apiKey: string | undefined,
  baseUrl: string,
  maxBytes: number,
): Promise<BackendError> {
  const fail = (code: FailureCode, msg: string) => new BackendError('failed', code, `${label}: ${msg}`);
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => {});
    const to = res.headers.get('location');
    let where = 'another location';
    try {
      if (to) where = new URL(to, baseUrl).host || where;
    } catch {
      /* unparsable location */
    }
    return fail(
      'backend_error',
      `answered with a redirect (HTTP ${res.status} to ${engineText(where)}); redirects are not followed, so credentials are never sent elsewhere. Configure the engine's final URL.`,
    );
  }
  const body = await readSmall(res, maxBytes).catch(() => '');
  const info = errorInfo(body);
  const detail = `HTTP ${res.status}${info.message ? `: ${engineText(info.message, apiKey)}` : ''}`;
  if (res.status === 429 || res.status === 503 || res.status === 502 || res.status === 504) {
    return new EndpointUnreachable(`${label} is busy or unavailable (${detail}).`, retryAfterMs(res.headers.get('retry-after')));
  }
  if (res.status === 401 || res.status === 403)
    return fail('backend_error', `refused the request's credentials (${detail}); check the engine's API key.`);
  if (isContextOverflow(info))
    return fail('context_length_exceeded', `refused the request: the prompt does not fit the model's context (${detail}).`);
  if (res.status === 404) return fail('model_not_found', `does not know this model or the URL is not its OpenAI-style base (…/v1) (${detail}).`);
  if (res.status === 400 || res.status === 413 || res.status === 422) return fail('invalid_request', `refused the request (${detail}).`);
  return fail('backend_error', `failed (${detail}).`);
}

export async function readSmall(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    n += value.length;
    if (n > Math.min(max, 64 * 1024)) {
      await reader.cancel().catch(() => {});
      break;
    }
  }
  return Buffer.concat(parts).toString('utf8');
}

async function readStream(
  req: ChatStreamRequest,
  body: ReadableStream<Uint8Array>,
  arm: (ms: number, what: string) => void,
  fail: (code: FailureCode, msg: string) => BackendError,
): Promise<ChatStreamResult> {
  const { label, apiKey } = req;
  const parser = new SseParser(req.maxEventBytes);
  const idle = `sent no complete event for ${formatMs(req.timeouts.idleMs)}`;
  const reader = body.getReader();
  const st: ChatStreamState = { chunks: 0, logprobs: req.logprobs };
  // Generated text may echo the key (an engine that repeats its prompt or headers): scrubbed per channel as it
  // streams; a piece that lost a spelling of the key keeps its log-probabilities' numbers (and so its token count)
  // but not their token texts, which spell the key too.
  const scrubber = apiKey ? new KeyTextScrubber(apiKey) : undefined;
  const onDelta: ChatStreamRequest['onDelta'] = !scrubber
    ? req.onDelta
    : (text, logprobs, channel) => {
        const { text: safe, replaced } = scrubber.scrub(text, channel ? JSON.stringify(channel) : '');
        if (!replaced) return req.onDelta(text, logprobs, channel);
        if (channel) return req.onDelta(safe, undefined, channel);
        const blank = <T extends { token: string; bytes: number[] }>(l: T): T => ({ ...l, token: '', bytes: [] });
        return req.onDelta(
          safe,
          logprobs?.map((l) => ({ ...blank(l), top_logprobs: l.top_logprobs.map(blank) })),
        );
      };
  let done = false;
  arm(req.timeouts.idleMs, idle);
  try {
    while (!done) {
      let r: { done: boolean; value?: Uint8Array };
      try {
        r = await reader.read();
      } catch (e) {
        if (req.signal.aborted) throw abortError();
        // The finish chunk arrived: a connection dropped before [DONE] loses nothing.
        if (st.finishReason && !parser.partial) break;
        throw e instanceof BackendError ? e : interrupted(label, causeOf(e), apiKey);
      }
      if (r.done || !r.value) break;
      let events: string[];
      try {
        events = parser.push(r.value);
      } catch (e) {
        if (e instanceof SseLimitError) throw fail('backend_error', `${e.message}; the stream was closed.`);
        throw e;
      }
      if (events.length) arm(req.timeouts.idleMs, idle);
      for (const data of events) {
        try {
          done = applyChatEvent(data, st, onDelta);
        } catch (e) {
          if (e instanceof ChatEventError)
            throw e.info ? engineFailure(label, e.info, apiKey, 'reported an error mid-stream') : streamFailure(label, e, apiKey);
          throw e;
        }
        if (done) break;
      }
    }
  } finally {
    if (!done) await reader.cancel().catch(() => {});
    else reader.releaseLock();
  }
  if (req.signal.aborted) throw abortError();
  let finishReason = st.finishReason;
  if (!finishReason) {
    if (done) finishReason = 'stop';
    else throw interrupted(label, parser.partial ? 'the stream ended mid-event' : 'the stream ended before the finish chunk', apiKey);
  }
  const stopSequence = finishReason === 'stop' && st.stopSequence !== undefined ? { stopSequence: st.stopSequence } : {};
  return { finishReason, inputTokens: st.inputTokens, outputTokens: st.outputTokens, chunks: st.chunks, ...stopSequence, answered: true };
}

/** What a chat/completions stream has said so far. */
export interface ChatStreamState {
  finishReason?: ChatStreamResult['finishReason'];
  inputTokens?: number;
  outputTokens?: number;
  /** Content chunks (an estimate of output tokens when the engine reports no usage). */
  chunks: number;
  /** Read `choices[0].logprobs.content` (the request asked for log-probabilities). */
  logprobs?: boolean;
  /** Log-probabilities received on chunks without content, for the next content piece. */
  pendingLogprobs?: TokenLogprob[];
  /** The function calls started, by the engine's index (0, 1, …), each with the callId it was given. */
  calls?: Array<{ callId: string; name: string; channel: OutputChannel }>;
  /** The index of the call whose arguments are being streamed. */
  currentCall?: number;
  /** The stop string named by the finishing choice (STOP_SEQUENCE_FIELDS), when it named one as text. */
  stopSequence?: string;
}

const MAX_CALL_ID = 256;
const MAX_TOOL_NAME = 256;

/** An event that is not a valid chat chunk (`info` unset), or one that carries the engine's error. */
export class ChatEventError extends Error {
  constructor(
    message: string,
    readonly info?: EngineErrorInfo,
    readonly kind: 'failed' | 'interrupted' = 'failed',
  ) {
    super(message);
    this.name = 'ChatEventError';
  }
}

/**
 * One event's data of a `chat/completions` stream: validates it, hands its content to `onDelta`, records finish
 * reason and usage in `st`. Returns true for `[DONE]`. Throws ChatEventError for anything malformed or an error
 * event. Pure apart from `onDelta`, so the bench measures exactly this parse.
 */
export function applyChatEvent(data: string, st: ChatStreamState, onDelta: DeltaHandler): boolean {
  if (data === '[DONE]') return true;
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    throw new ChatEventError(`sent an event that is not JSON (${data.slice(0, 80)}).`);
  }
  if (!isObject(chunk)) throw new ChatEventError('sent an event that is not a JSON object.');
  const error = engineErrorOf(chunk);
  if (error) throw new ChatEventError(error.message, error);
  if (chunk.usage !== undefined && chunk.usage !== null) {
    if (!isObject(chunk.usage)) throw new ChatEventError('sent a malformed usage object.');
    st.inputTokens = tokenCount(chunk.usage.prompt_tokens) ?? st.inputTokens;
    st.outputTokens = tokenCount(chunk.usage.completion_tokens) ?? st.outputTokens;
  }
  const choices = chunk.choices;
  if (choices === undefined || choices === null) return false;
  if (!Array.isArray(choices)) throw new ChatEventError('sent a chunk whose "choices" is not a list.');
  const choice = choices[0] as unknown;
  if (choice === undefined) return false;
  if (!isObject(choice)) throw new ChatEventError('sent a malformed choice.');
  if (st.logprobs) {
    const got = logprobsOf(choice.logprobs);
    if (got.length) st.pendingLogprobs = [...(st.pendingLogprobs ?? []), ...got];
  }
  const delta = choice.delta;
  if (delta !== undefined && delta !== null) {
    if (!isObject(delta)) throw new ChatEventError('sent a malformed delta.');
    const content = delta.content;
    if (content !== undefined && content !== null && typeof content !== 'string') throw new ChatEventError('sent a delta whose content is not text.');
    const field = REASONING_DELTA_FIELDS.find((f) => delta[f] !== undefined && delta[f] !== null);
    if (field !== undefined) {
      const reasoning = delta[field];
      if (typeof reasoning !== 'string') throw new ChatEventError(`sent a delta whose "${field}" is not text.`);
      if (reasoning) {
        st.chunks++;
        st.pendingLogprobs = undefined;
        st.currentCall = undefined;
        onDelta(reasoning, undefined, REASONING);
      }
    }
    if (content) {
      st.currentCall = undefined;
      st.chunks++;
      const lp = st.pendingLogprobs;
      st.pendingLogprobs = undefined;
      if (lp) onDelta(content, lp);
      else onDelta(content);
    }
    const calls = delta.tool_calls;
    if (calls !== undefined && calls !== null) {
      if (!Array.isArray(calls)) throw new ChatEventError('sent "tool_calls" that is not a list.');
      for (const call of calls) applyToolCallDelta(call, st, onDelta);
    }
  }
  const fr = choice.finish_reason;
  if (fr !== undefined && fr !== null) {
    if (typeof fr !== 'string') throw new ChatEventError('sent a finish_reason that is not text.');
    const meaning = Object.hasOwn(FINISH_REASONS, fr) ? FINISH_REASONS[fr] : 'stop';
    if (meaning === 'interrupted') throw new ChatEventError(`gave up on the request (finish_reason "${fr.slice(0, 40)}")`, undefined, 'interrupted');
    if (meaning === 'error') throw new ChatEventError(`ended the response with finish_reason "${fr.slice(0, 40)}".`);
    st.finishReason = meaning;
    // A number (a stop token's id) or null names no string.
    const named = STOP_SEQUENCE_FIELDS.map((f) => choice[f]).find((v) => typeof v === 'string');
    if (typeof named === 'string' && named) st.stopSequence = named;
  }
  return false;
}

const REASONING: OutputChannel = { kind: 'reasoning' };

/** One entry of `delta.tool_calls`: starts a call (its index's first delta) or continues the current one's arguments. */
function applyToolCallDelta(call: unknown, st: ChatStreamState, onDelta: DeltaHandler): void {
  if (!isObject(call)) throw new ChatEventError('sent a tool call delta that is not an object.');
  const index = call.index;
  if (!Number.isSafeInteger(index) || (index as number) < 0) throw new ChatEventError('sent a tool call delta without a valid "index".');
  if (call.type !== undefined && call.type !== null && call.type !== 'function') {
    throw new ChatEventError(`sent a tool call of type "${String(call.type).slice(0, 40)}" (only "function" is supported).`);
  }
  if (call.id !== undefined && call.id !== null && typeof call.id !== 'string') throw new ChatEventError('sent a tool call whose "id" is not text.');
  const fn = call.function;
  if (fn !== undefined && fn !== null && !isObject(fn)) throw new ChatEventError('sent a tool call whose "function" is not an object.');
  const name = fn?.name;
  if (name !== undefined && name !== null && typeof name !== 'string') throw new ChatEventError('sent a tool call whose function name is not text.');
  const args = fn?.arguments;
  if (args !== undefined && args !== null && typeof args !== 'string')
    throw new ChatEventError('sent tool call arguments that are not text (a JSON string).');
  const calls = (st.calls ??= []);
  const i = index as number;
  if (i === calls.length) {
    // A new call: its first delta names the function.
    if (typeof name !== 'string' || !name) throw new ChatEventError(`sent tool call ${i} without a function name.`);
    if (name.length > MAX_TOOL_NAME || /[\u0000-\u001f\u007f]/.test(name))
      throw new ChatEventError(`sent tool call ${i} with an invalid function name.`);
    const engineId = typeof call.id === 'string' ? call.id : '';
    const usable = engineId && engineId.length <= MAX_CALL_ID && !/[\u0000-\u001f\u007f]/.test(engineId) && !calls.some((c) => c.callId === engineId);
    const callId = usable ? engineId : `call_${randomBytes(12).toString('hex')}`;
    const channel: OutputChannel = { kind: 'function_call', callId, name };
    calls.push({ callId, name, channel });
    st.currentCall = i;
    st.chunks++;
    st.pendingLogprobs = undefined;
    onDelta(typeof args === 'string' ? args : '', undefined, channel);
    return;
  }
  if (i > calls.length) throw new ChatEventError(`sent tool call ${i} before tool call ${calls.length} (the index skipped).`);
  if (i !== st.currentCall) throw new ChatEventError(`went back to tool call ${i} after another output had started.`);
  const started = calls[i];
  if (typeof name === 'string' && name && name !== started.name) {
    throw new ChatEventError(`renamed tool call ${i} from "${started.name.slice(0, 60)}" to "${name.slice(0, 60)}".`);
  }
  if (typeof args === 'string' && args) {
    st.chunks++;
    st.pendingLogprobs = undefined;
    onDelta(args, undefined, started.channel);
  }
}

/** A chunk's `logprobs` ({content: [...]} or null) as TokenLogprobs; throws ChatEventError for a malformed one. */
function logprobsOf(v: unknown): TokenLogprob[] {
  if (v === undefined || v === null) return [];
  if (!isObject(v)) throw new ChatEventError('sent logprobs that are not an object.');
  const content = v.content;
  if (content === undefined || content === null) return [];
  if (!Array.isArray(content)) throw new ChatEventError('sent logprobs whose "content" is not a list.');
  return content.map((e) => {
    const entry = tokenLogprobOf(e);
    const top = isObject(e) ? e.top_logprobs : undefined;
    if (top !== undefined && top !== null && !Array.isArray(top)) throw new ChatEventError('sent "top_logprobs" that is not a list.');
    return { ...entry, top_logprobs: (top ?? []).map(tokenLogprobOf) };
  });
}

/** One {token, logprob, bytes} entry; bytes absent or null (OpenAI allows it) are the token's UTF-8. */
function tokenLogprobOf(e: unknown): { token: string; logprob: number; bytes: number[] } {
  if (!isObject(e) || typeof e.token !== 'string') throw new ChatEventError('sent a logprobs entry without a token.');
  if (typeof e.logprob !== 'number' || !Number.isFinite(e.logprob)) throw new ChatEventError('sent a logprobs entry whose logprob is not a number.');
  let bytes: number[];
  if (e.bytes === undefined || e.bytes === null) bytes = [...Buffer.from(e.token, 'utf8')];
  else if (Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) bytes = e.bytes as number[];
  else throw new ChatEventError('sent a logprobs entry whose bytes are not a list of bytes.');
  return { token: e.token, logprob: e.logprob, bytes };
}

function streamFailure(label: string, e: ChatEventError, apiKey?: string): BackendError {
  if (e.kind === 'interrupted') return interrupted(label, e.message, apiKey);
  return new BackendError('failed', 'backend_error', `${label}: ${engineText(e.message, apiKey)}`);
}

/** The engine's own error (an HTTP 200 JSON body or an error event): context overflow, a wrong URL, or any other. */
export function engineFailure(label: string, info: EngineErrorInfo, apiKey: string | undefined, what: string): BackendError {
  const msg = engineText(info.message, apiKey);
  if (isContextOverflow(info))
    return new BackendError('failed', 'context_length_exceeded', `${label}: the prompt does not fit the model's context (${msg}).`);
  if (isWrongRoute(info)) {
    return new BackendError('failed', 'backend_error', `${label}: ${what}: ${msg}; the URL is probably not its OpenAI-style base (…/v1).`);
  }
  return new BackendError('failed', 'backend_error', `${label}: ${what}: ${msg}`);
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The error an HTTP error body carries (any engine's shape, or a bare {"message"}), else its text. */
function errorInfo(body: string): EngineErrorInfo {
  const json = parseJson(body);
  const bare = isObject(json) && typeof json.message === 'string' ? { message: json.message } : undefined;
  return engineErrorOf(json) ?? bare ?? { message: body };
}

function interrupted(label: string, cause: string, apiKey?: string): BackendError {
  return new BackendError('interrupted', 'backend_interrupted', `${label} stopped mid-response (${engineText(cause, apiKey)}).`);
}

function formatMs(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 100) / 10} s`;
}
