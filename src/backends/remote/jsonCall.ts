// One JSON request/answer to an engine (the direct calls: POST /v1/embeddings, /v1/rerank), with the timeouts, the
// no-redirect rule and the error mapping generation uses (chatStream.ts httpFailure): an endpoint that cannot be
// reached or is busy is EndpointUnreachable (the pool tries the next one), the engine's refusals are BackendErrors with
// its words scrubbed. A route the engine turned off (llama.cpp server without --embeddings / --reranking: HTTP 501) is
// unsupported_capability. The answer is bounded (MAX_ANSWER_BYTES) before it is parsed.
import { BackendError } from '../../runtime/backend';
import { abortError, causeOf, EndpointUnreachable, engineText, httpFailure, parseJson, type StreamTimeouts } from './chatStream';
import { NOT_SUPPORTED_STATUS } from './quirks';

/** The largest answer read: 2048 vectors of 4096 dimensions as JSON text are ~150 MB; beyond that is refused. */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

export interface JsonCallRequest {
  /** The endpoint's OpenAI-style base (…/v1). */
  baseUrl: string;
  path: string;
  label: string;
  apiKey?: string;
  body: Record<string, unknown>;
  signal: AbortSignal;
  timeouts: StreamTimeouts;
  maxErrorBytes: number;
}

export async function postJson(req: JsonCallRequest): Promise<unknown> {
  const { label, apiKey } = req;
  if (req.signal.aborted) throw abortError();
  const timeout = AbortSignal.timeout(req.timeouts.headersMs);
  const signal = AbortSignal.any([req.signal, timeout]);
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const failed = (msg: string) => new BackendError('failed', 'backend_error', `${label}: ${msg}`);
  let res: Response;
  try {
    res = await fetch(`${req.baseUrl}${req.path}`, { method: 'POST', headers, body: JSON.stringify(req.body), signal, redirect: 'manual' });
  } catch (e) {
    if (req.signal.aborted) throw abortError();
    if (timeout.aborted) throw failed(`no answer within ${Math.round(req.timeouts.headersMs / 1000)} s.`);
    throw new EndpointUnreachable(`${label} is not reachable (${engineText(causeOf(e), apiKey)}).`);
  }
  try {
    if (res.status === NOT_SUPPORTED_STATUS) {
      const failure = await httpFailure(res, label, apiKey, req.baseUrl, req.maxErrorBytes);
      throw new BackendError('failed', 'unsupported_capability', `${failure.message} (the engine does not serve ${req.path} as started)`);
    }
    if (!res.ok) throw await httpFailure(res, label, apiKey, req.baseUrl, req.maxErrorBytes);
    const length = Number(res.headers.get('content-length') ?? 0);
    if (length > MAX_ANSWER_BYTES) {
      await res.body?.cancel().catch(() => {});
      throw failed(`answered ${length} bytes, more than ${MAX_ANSWER_BYTES}.`);
    }
    const text = await res.text();
    if (text.length > MAX_ANSWER_BYTES) throw failed(`answered more than ${MAX_ANSWER_BYTES} bytes.`);
    const json = parseJson(text);
    if (json === undefined) throw failed(`did not answer JSON (content-type "${engineText(res.headers.get('content-type') ?? '') || 'none'}").`);
    return json;
  } catch (e) {
    if (req.signal.aborted) throw abortError();
    if (timeout.aborted) throw failed(`no answer within ${Math.round(req.timeouts.headersMs / 1000)} s.`);
    throw e;
  }
}
