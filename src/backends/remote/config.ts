// Engine configuration shared by the CLI (`serve --engine`) and the editor (`taskRuntime.engines`), validated here
// once. Keys are held separately from everything that is logged or shown: an EngineConfig's `apiKey` is only ever put
// in an Authorization header (engine.ts) and scrubbed from engine text (chatStream.ts).
import { ENGINE_KINDS, ENGINE_PROFILES, isEngineKind, type EngineKind } from './quirks';

export interface EngineConfig {
  /** Name clients use as the model-id prefix: `NAME/model-id`. */
  name: string;
  /** OpenAI-style base URLs (…/v1); several form a pool. */
  urls: string[];
  apiKey?: string;
  /** Only these engine model ids are offered (empty/absent: whatever the engine lists). */
  models?: string[];
  /** Tasks per URL at once: one value for all, or one per URL. Absent: llama.cpp's /props slots, else 4. */
  concurrency?: number[];
  /** Until response headers / between stream events / for a /models probe, ms. */
  timeouts?: { headersMs?: number; idleMs?: number; probeMs?: number };
  /**
   * Which server it is (quirks.ts): what it can do (continue a final assistant message, report its slots). Absent:
   * `openai`, any OpenAI-compatible server.
   */
  kind?: EngineKind;
  /**
   * Offer on_restart "resume" for its models: a task cut off mid-output continues in the same output item from the
   * text clients already have (`continue_final_message: true, add_generation_prompt: false`). Default: on for the
   * kinds that continue a final assistant message (llama.cpp server with assistant prefill, vLLM), off for
   * `openai`; never for Ollama and LM Studio (asking for it there is a configuration error).
   */
  resume?: boolean;
  /** Largest SSE event accepted from the engine, bytes (default 1 MiB). */
  maxEventBytes?: number;
}

export const ENGINE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export class EngineConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EngineConfigError';
  }
}

/** Checks an engine name (the model-id prefix). */
export function checkEngineName(name: string): string {
  if (!ENGINE_NAME.test(name)) {
    throw new EngineConfigError(`engine name "${name.slice(0, 80)}" must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit.`);
  }
  return name;
}

/**
 * Normalizes an engine base URL: http(s) only, no credentials (they would end up in logs and task records: use a key
 * file / SecretStorage), no query or fragment; trailing slashes removed.
 */
export function normalizeEngineUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new EngineConfigError(`"${raw.slice(0, 200)}" is not a URL (expected e.g. http://127.0.0.1:8080/v1).`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new EngineConfigError(`engine URLs must be http or https, got "${u.protocol}".`);
  }
  if (u.username || u.password) {
    throw new EngineConfigError("engine URLs must not contain credentials; give the API key in a key file (or the editor's secret storage).");
  }
  if (u.search || u.hash) throw new EngineConfigError(`engine URL ${u.host} must not have a query or fragment.`);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
}

/** A key from a key file: the first line, trimmed; printable ASCII only, at most 4 KiB. */
export function parseKey(content: string): string {
  const key = content.split(/\r?\n/)[0].trim();
  if (!key) throw new EngineConfigError('the key file is empty.');
  if (key.length > 4096 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new EngineConfigError('the key file must hold one line of printable characters without spaces (at most 4 KiB).');
  }
  return key;
}

/** Checks an engine kind (`--engine-kind`, the setting's `kind`). */
export function checkEngineKind(kind: string): EngineKind {
  if (!isEngineKind(kind)) throw new EngineConfigError(`engine kind "${kind.slice(0, 40)}" must be one of ${ENGINE_KINDS.join(', ')}.`);
  return kind;
}

export function checkEngineConfig(c: EngineConfig): EngineConfig {
  checkEngineName(c.name);
  if (c.kind !== undefined) checkEngineKind(c.kind);
  const profile = ENGINE_PROFILES[c.kind ?? 'openai'];
  if (c.resume === true && profile.continuesFinalMessage === false) {
    throw new EngineConfigError(
      `engine "${c.name}": on_restart "resume" cannot be offered: ${profile.noResumeReason ?? `${profile.label} does not continue a final assistant message`}.`,
    );
  }
  if (!c.urls.length) throw new EngineConfigError(`engine "${c.name}" has no URL.`);
  const urls = c.urls.map(normalizeEngineUrl);
  if (new Set(urls).size !== urls.length) throw new EngineConfigError(`engine "${c.name}" lists a URL twice.`);
  if (c.concurrency && c.concurrency.length !== 1 && c.concurrency.length !== urls.length) {
    throw new EngineConfigError(`engine "${c.name}": give one concurrency for all URLs or one per URL.`);
  }
  for (const n of c.concurrency ?? []) {
    if (!Number.isInteger(n) || n < 1 || n > 1024) throw new EngineConfigError(`engine "${c.name}": concurrency must be 1-1024.`);
  }
  for (const m of c.models ?? []) {
    if (!m || m.length > 256) throw new EngineConfigError(`engine "${c.name}": model ids must be 1-256 characters.`);
  }
  return { ...c, urls };
}
