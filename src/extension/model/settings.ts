// Reads and validates the extension's settings (pure: the caller passes a getter over the configuration).
// Invalid values fall back to the default and are reported with a message naming the setting.
import { fieldProblem } from '../../runtime/requestFields';
import {
  MAX_CONCURRENCY,
  MAX_CONTEXT_SIZE,
  MIN_CONTEXT_SIZE,
  parseConcurrency,
  parseContextSize,
  type ConcurrencyChoice,
  type ContextSizeChoice,
} from '../../backends/llama/contextChoice';
import { DEFAULT_KEEP_ALIVE_MS, parseKeepAlive } from '../../backends/llama/keepAlive';
import { checkDraftModelFile, DEFAULT_PROMPT_LOOKUP, PROMPT_LOOKUP_CHOICES, type PromptLookupChoice } from '../../backends/llama/speculative';
import { GPU_CHOICES, isGpuChoice, MAX_GPU_LAYERS, parseAutoOrInt, type GpuChoice, type GpuLayersChoice } from '../../backends/llama/hardware';
import { normalizeOrigin } from '../../protocols/http/hostOrigin';
import { checkEngineConfig, checkEngineKind, type EngineConfig } from '../../backends/remote/config';
import { RESTART_POLICIES, type RestartPolicy } from '../../runtime/task';
import { checkWebhookUrl } from '../../runtime/webhooks';
import { DEFAULT_MAX_QUEUED_PER_PRINCIPAL, DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL, DEFAULT_MAX_STREAMS_PER_PRINCIPAL } from '../../runtime/shares';
import type { Localize } from './format';

export interface ExtensionSettings {
  /** 0 = pick a free port. */
  port: number;
  /** Browser origins allowed besides the server's own loopback origins (canonical form, see hostOrigin.ts). */
  allowedOrigins: readonly string[];
  /** Local .gguf path or model URI; '' = the generated demo model. */
  model: string;
  /** 0 = measured at model load (auto). */
  threads: number;
  gpu: GpuChoice;
  gpuLayers: GpuLayersChoice;
  /** Tokens of context per task, or auto (the trained context as far as memory allows). */
  contextSize: ContextSizeChoice;
  /** Tasks generating at once per local model (its batched sequences), or auto (by free memory). */
  concurrency: ConcurrencyChoice;
  /** Milliseconds an idle local model stays loaded; 0 = never unload. */
  keepAliveMs: number;
  /** Speculative decoding with drafts looked up in the prompt and output (backends/llama/speculative.ts). */
  promptLookup: PromptLookupChoice;
  /** A draft model's GGUF path ('' = none), checked to exist and be a GGUF. */
  draftModel: string;
  maxQueued: number;
  /** Per-principal caps (runtime/shares.ts): unfinished tasks, open streams per door, stored MiB. */
  maxQueuedPerPrincipal: number;
  maxStreamsPerPrincipal: number;
  maxStoredMbPerPrincipal: number;
  defaultRestartPolicy: RestartPolicy;
  /** on_restart of an OpenAI background response (`POST /responses` with `background: true`) made to the endpoint. */
  backgroundRestartPolicy: RestartPolicy;
  defaultTtlMinutes: number;
  maxTtlMinutes: number;
  retentionDays: number;
  eventHistoryHours: number;
  notifyOnCompletion: 'always' | 'failures' | 'never';
  /** Sampling temperature for tasks created in the editor; null = the backend's default. */
  temperature: number | null;
  /** Remote engines (OpenAI-compatible servers); their API keys live in SecretStorage, never here. */
  engines: EngineSetting[];
  /** Where the editor principal's completion events go ('' = none); its secret lives in SecretStorage. */
  webhookUrl: string;
  /** The webhook may be on a private or loopback address. */
  webhookAllowPrivate: boolean;
  /** The glob Index Workspace offers (workspaceIndex/indexController.ts). */
  indexInclude: string;
  /** Model id of the workspace index's embeddings; '' = the default model. */
  indexModel: string;
}

/** One entry of taskRuntime.engines. */
export type EngineSetting = Pick<EngineConfig, 'name' | 'urls' | 'models' | 'concurrency' | 'kind' | 'resume'>;

export const SETTING_KEYS = {
  port: 'server.port',
  allowedOrigins: 'server.allowedOrigins',
  model: 'model',
  threads: 'threads',
  gpu: 'gpu',
  gpuLayers: 'gpuLayers',
  contextSize: 'contextSize',
  concurrency: 'concurrency',
  keepAliveMs: 'keepAlive',
  promptLookup: 'promptLookup',
  draftModel: 'draftModel',
  maxQueued: 'maxQueuedTasks',
  maxQueuedPerPrincipal: 'perPrincipal.maxQueuedTasks',
  maxStreamsPerPrincipal: 'perPrincipal.maxStreams',
  maxStoredMbPerPrincipal: 'perPrincipal.maxStoredMb',
  defaultRestartPolicy: 'defaultRestartPolicy',
  backgroundRestartPolicy: 'backgroundRestartPolicy',
  defaultTtlMinutes: 'ttl.defaultMinutes',
  maxTtlMinutes: 'ttl.maxMinutes',
  retentionDays: 'retention.days',
  eventHistoryHours: 'retention.eventHistoryHours',
  notifyOnCompletion: 'notifications.onCompletion',
  temperature: 'temperature',
  engines: 'engines',
  webhookUrl: 'webhook.url',
  webhookAllowPrivate: 'webhook.allowPrivateAddresses',
  indexInclude: 'index.include',
  indexModel: 'index.model',
} as const satisfies Record<keyof ExtensionSettings, string>;

export const DEFAULT_SETTINGS: ExtensionSettings = {
  port: 0,
  allowedOrigins: [],
  model: '',
  threads: 0,
  gpu: 'auto',
  gpuLayers: 'auto',
  contextSize: 'auto',
  concurrency: 'auto',
  keepAliveMs: DEFAULT_KEEP_ALIVE_MS,
  promptLookup: DEFAULT_PROMPT_LOOKUP,
  draftModel: '',
  maxQueued: 1000,
  maxQueuedPerPrincipal: DEFAULT_MAX_QUEUED_PER_PRINCIPAL,
  maxStreamsPerPrincipal: DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
  maxStoredMbPerPrincipal: DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL / 1024 / 1024,
  defaultRestartPolicy: 'fail',
  backgroundRestartPolicy: 'retry',
  defaultTtlMinutes: 60,
  maxTtlMinutes: 60 * 24,
  retentionDays: 1,
  eventHistoryHours: 1,
  notifyOnCompletion: 'always',
  temperature: null,
  engines: [],
  webhookUrl: '',
  webhookAllowPrivate: false,
  indexInclude: '**/*.{ts,tsx,js,jsx,mjs,cjs,py,go,rs,java,kt,c,h,cpp,hpp,cs,rb,php,swift,md,txt,json,yaml,yml,toml,sh}',
  indexModel: '',
};

/** Settings whose change needs the runtime (store, backend, listener) restarted. */
export const RESTART_KEYS: readonly (keyof ExtensionSettings)[] = [
  'port',
  'allowedOrigins',
  'model',
  'threads',
  'gpu',
  'gpuLayers',
  'contextSize',
  'concurrency',
  'keepAliveMs',
  'promptLookup',
  'draftModel',
  'maxQueued',
  'backgroundRestartPolicy',
  'maxQueuedPerPrincipal',
  'maxStreamsPerPrincipal',
  'maxStoredMbPerPrincipal',
  'defaultTtlMinutes',
  'maxTtlMinutes',
  'retentionDays',
  'eventHistoryHours',
  'engines',
  'webhookUrl',
  'webhookAllowPrivate',
];

export interface SettingsResult {
  settings: ExtensionSettings;
  problems: string[];
}

function integer(get: (key: string) => unknown, key: string, min: number, max: number, fallback: number, problems: string[], t: Localize): number {
  const v = get(key);
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    problems.push(t('Setting taskRuntime.{0} must be a whole number from {1} to {2}; using {3}.', key, min, max, fallback));
    return fallback;
  }
  return v;
}

export function readSettings(get: (key: string) => unknown, t: Localize): SettingsResult {
  const d = DEFAULT_SETTINGS;
  const p: string[] = [];
  const k = SETTING_KEYS;
  const modelRaw = get(k.model);
  let model = d.model;
  if (typeof modelRaw === 'string') model = modelRaw.trim();
  else if (modelRaw !== undefined && modelRaw !== null) p.push(t('Setting taskRuntime.{0} must be a file path or a model URI.', k.model));
  if (model && !/\.gguf$/i.test(model) && !/^(hf|https?):/i.test(model)) {
    p.push(t('Setting taskRuntime.model must name a .gguf file or a model URI (hf:owner/repo:quant); using the demo model.'));
    model = '';
  }
  const policyRaw = get(k.defaultRestartPolicy);
  let defaultRestartPolicy = d.defaultRestartPolicy;
  if (policyRaw !== undefined && policyRaw !== null) {
    if (RESTART_POLICIES.includes(policyRaw as RestartPolicy)) defaultRestartPolicy = policyRaw as RestartPolicy;
    else
      p.push(
        t('Setting taskRuntime.{0} must be one of {1}; using {2}.', k.defaultRestartPolicy, RESTART_POLICIES.join(', '), d.defaultRestartPolicy),
      );
  }
  const backgroundRaw = get(k.backgroundRestartPolicy);
  let backgroundRestartPolicy = d.backgroundRestartPolicy;
  if (backgroundRaw !== undefined && backgroundRaw !== null) {
    if (RESTART_POLICIES.includes(backgroundRaw as RestartPolicy)) backgroundRestartPolicy = backgroundRaw as RestartPolicy;
    else
      p.push(
        t(
          'Setting taskRuntime.{0} must be one of {1}; using {2}.',
          k.backgroundRestartPolicy,
          RESTART_POLICIES.join(', '),
          d.backgroundRestartPolicy,
        ),
      );
  }
  const notifyRaw = get(k.notifyOnCompletion);
  let notifyOnCompletion = d.notifyOnCompletion;
  if (notifyRaw !== undefined && notifyRaw !== null) {
    if (notifyRaw === 'always' || notifyRaw === 'failures' || notifyRaw === 'never') notifyOnCompletion = notifyRaw;
    else p.push(t('Setting taskRuntime.{0} must be one of {1}; using {2}.', k.notifyOnCompletion, 'always, failures, never', d.notifyOnCompletion));
  }
  const temperatureRaw = get(k.temperature);
  let temperature = d.temperature;
  if (temperatureRaw !== undefined && temperatureRaw !== null) {
    if (typeof temperatureRaw === 'number' && fieldProblem('temperature', temperatureRaw) === undefined) temperature = temperatureRaw;
    else p.push(t('Setting taskRuntime.{0} must be a number from 0 to 2; using the model default.', k.temperature));
  }
  const gpuRaw = get(k.gpu);
  let gpu = d.gpu;
  if (gpuRaw !== undefined && gpuRaw !== null) {
    if (isGpuChoice(gpuRaw)) gpu = gpuRaw;
    else p.push(t('Setting taskRuntime.{0} must be one of {1}; using {2}.', k.gpu, GPU_CHOICES.join(', '), d.gpu));
  }
  const lookupRaw = get(k.promptLookup);
  let promptLookup = d.promptLookup;
  if (lookupRaw !== undefined && lookupRaw !== null) {
    if (PROMPT_LOOKUP_CHOICES.includes(lookupRaw as PromptLookupChoice)) promptLookup = lookupRaw as PromptLookupChoice;
    else p.push(t('Setting taskRuntime.{0} must be one of {1}; using {2}.', k.promptLookup, PROMPT_LOOKUP_CHOICES.join(', '), d.promptLookup));
  }
  const draftRaw = get(k.draftModel);
  let draftModel = d.draftModel;
  if (typeof draftRaw === 'string' && draftRaw.trim() !== '') {
    const problem = checkDraftModelFile(draftRaw.trim());
    if (problem) p.push(t('Setting taskRuntime.{0}: {1}; no draft model is used.', k.draftModel, problem));
    else draftModel = draftRaw.trim();
  } else if (draftRaw !== undefined && draftRaw !== null && draftRaw !== '') {
    p.push(t('Setting taskRuntime.{0} must be the path of a .gguf file; no draft model is used.', k.draftModel));
  }
  const layersRaw = get(k.gpuLayers);
  let gpuLayers = d.gpuLayers;
  if (layersRaw !== undefined && layersRaw !== null) {
    const parsed = parseAutoOrInt(layersRaw, 0, MAX_GPU_LAYERS);
    if (parsed !== undefined) gpuLayers = parsed;
    else
      p.push(
        t(
          'Setting taskRuntime.{0} must be "auto" or a whole number from {1} to {2}; using {3}.',
          k.gpuLayers,
          0,
          MAX_GPU_LAYERS,
          String(d.gpuLayers),
        ),
      );
  }
  const contextRaw = get(k.contextSize);
  let contextSize = d.contextSize;
  if (contextRaw !== undefined && contextRaw !== null) {
    const parsed = parseContextSize(contextRaw);
    if (parsed !== undefined) contextSize = parsed;
    else
      p.push(
        t(
          'Setting taskRuntime.{0} must be "auto" or a whole number from {1} to {2}; using {3}.',
          k.contextSize,
          MIN_CONTEXT_SIZE,
          MAX_CONTEXT_SIZE,
          String(d.contextSize),
        ),
      );
  }
  const concurrencyRaw = get(k.concurrency);
  let concurrency = d.concurrency;
  if (concurrencyRaw !== undefined && concurrencyRaw !== null) {
    const parsed = parseConcurrency(concurrencyRaw);
    if (parsed !== undefined) concurrency = parsed;
    else
      p.push(
        t(
          'Setting taskRuntime.{0} must be "auto" or a whole number from {1} to {2}; using {3}.',
          k.concurrency,
          1,
          MAX_CONCURRENCY,
          String(d.concurrency),
        ),
      );
  }
  const keepAliveRaw = get(k.keepAliveMs);
  let keepAliveMs = d.keepAliveMs;
  if (keepAliveRaw !== undefined && keepAliveRaw !== null) {
    const parsed = parseKeepAlive(keepAliveRaw);
    if (parsed !== undefined) keepAliveMs = parsed;
    else
      p.push(
        t('Setting taskRuntime.{0} must be 0 (never unload), seconds, or a duration such as "30s", "5m" or "1h"; using {1}.', k.keepAliveMs, '5m'),
      );
  }
  const originsRaw = get(k.allowedOrigins);
  const allowedOrigins: string[] = [];
  if (Array.isArray(originsRaw)) {
    for (const entry of originsRaw) {
      const origin = typeof entry === 'string' ? normalizeOrigin(entry) : new Error(`${JSON.stringify(entry)} is not a string`);
      if (origin instanceof Error) p.push(t('Setting taskRuntime.{0}: {1}; entry ignored.', k.allowedOrigins, origin.message));
      else if (!allowedOrigins.includes(origin)) allowedOrigins.push(origin);
    }
  } else if (originsRaw !== undefined && originsRaw !== null) {
    p.push(t('Setting taskRuntime.{0} must be a list of origins such as "http://localhost:5173"; using none.', k.allowedOrigins));
  }
  const engines = readEngines(get(k.engines), p, t);
  const hookRaw = get(k.webhookUrl);
  let webhookUrl = d.webhookUrl;
  if (typeof hookRaw === 'string' && hookRaw.trim() !== '') {
    const url = checkWebhookUrl(hookRaw.trim());
    // The message never repeats the URL: its query may hold someone's token.
    if (url instanceof Error) p.push(t('Setting taskRuntime.{0}: {1}; no webhook is sent.', k.webhookUrl, url.message));
    else webhookUrl = url;
  } else if (hookRaw !== undefined && hookRaw !== null && hookRaw !== '') {
    p.push(t('Setting taskRuntime.{0} must be an http or https URL; no webhook is sent.', k.webhookUrl));
  }
  const allowRaw = get(k.webhookAllowPrivate);
  const text = (key: string, fallback: string, max: number): string => {
    const v = get(key);
    if (typeof v === 'string' && v.length <= max) return v.trim() || fallback;
    if (v !== undefined && v !== null) p.push(t('Setting taskRuntime.{0} must be a string of at most {1} characters.', key, max));
    return fallback;
  };
  const settings: ExtensionSettings = {
    port: integer(get, k.port, 0, 65535, d.port, p, t),
    allowedOrigins,
    model,
    threads: integer(get, k.threads, 0, 256, d.threads, p, t),
    gpu,
    gpuLayers,
    contextSize,
    concurrency,
    keepAliveMs,
    promptLookup,
    draftModel,
    maxQueued: integer(get, k.maxQueued, 1, 100000, d.maxQueued, p, t),
    maxQueuedPerPrincipal: integer(get, k.maxQueuedPerPrincipal, 1, 100000, d.maxQueuedPerPrincipal, p, t),
    maxStreamsPerPrincipal: integer(get, k.maxStreamsPerPrincipal, 1, 10000, d.maxStreamsPerPrincipal, p, t),
    maxStoredMbPerPrincipal: integer(get, k.maxStoredMbPerPrincipal, 1, 1048576, d.maxStoredMbPerPrincipal, p, t),
    defaultRestartPolicy,
    backgroundRestartPolicy,
    defaultTtlMinutes: integer(get, k.defaultTtlMinutes, 1, 525600, d.defaultTtlMinutes, p, t),
    maxTtlMinutes: integer(get, k.maxTtlMinutes, 1, 5256000, d.maxTtlMinutes, p, t),
    retentionDays: integer(get, k.retentionDays, 1, 3650, d.retentionDays, p, t),
    eventHistoryHours: integer(get, k.eventHistoryHours, 1, 87600, d.eventHistoryHours, p, t),
    notifyOnCompletion,
    temperature,
    engines,
    webhookUrl,
    webhookAllowPrivate: allowRaw === true,
    indexInclude: text(k.indexInclude, d.indexInclude, 1000),
    indexModel: text(k.indexModel, d.indexModel, 256),
  };
  if (settings.defaultTtlMinutes > settings.maxTtlMinutes) {
    p.push(t('Setting taskRuntime.ttl.defaultMinutes is larger than taskRuntime.ttl.maxMinutes; using the maximum.'));
    settings.defaultTtlMinutes = settings.maxTtlMinutes;
  }
  return { settings, problems: p };
}

/** The settings that differ and need a runtime restart. */
export function restartNeeded(a: ExtensionSettings, b: ExtensionSettings): boolean {
  // Lists (origins, engines) compare by value.
  return RESTART_KEYS.some((key) => (typeof a[key] === 'object' ? JSON.stringify(a[key]) !== JSON.stringify(b[key]) : a[key] !== b[key]));
}

/** taskRuntime.engines: each entry checked like `serve --engine`; a bad one is skipped and reported. */
function readEngines(raw: unknown, p: string[], t: Localize): EngineSetting[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    p.push(t('Setting taskRuntime.engines must be a list of engines; no remote engine is used.'));
    return [];
  }
  const out: EngineSetting[] = [];
  for (const entry of raw.slice(0, 32)) {
    const e = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const name = typeof e.name === 'string' ? e.name : '';
    try {
      const urls = Array.isArray(e.urls) ? e.urls : typeof e.url === 'string' ? [e.url] : [];
      if (!urls.every((u) => typeof u === 'string')) throw new Error('urls must be strings');
      const models = e.models === undefined ? undefined : e.models;
      if (models !== undefined && (!Array.isArray(models) || !models.every((m) => typeof m === 'string')))
        throw new Error('models must be a list of model ids');
      const c = e.concurrency;
      const concurrency = c === undefined ? undefined : typeof c === 'number' ? [c] : c;
      if (concurrency !== undefined && (!Array.isArray(concurrency) || !concurrency.every((n) => typeof n === 'number'))) {
        throw new Error('concurrency must be a number or a list of numbers');
      }
      if (e.resume !== undefined && typeof e.resume !== 'boolean') throw new Error('resume must be true or false');
      const kind = e.kind === undefined ? undefined : checkEngineKind(String(e.kind));
      if (out.some((x) => x.name === name)) throw new Error('the name is used twice');
      const checked = checkEngineConfig({
        name,
        urls: urls as string[],
        models: models as string[] | undefined,
        concurrency: concurrency as number[] | undefined,
        kind,
        resume: e.resume as boolean | undefined,
      });
      out.push({
        name: checked.name,
        urls: checked.urls,
        ...(checked.models ? { models: checked.models } : {}),
        ...(checked.concurrency ? { concurrency: checked.concurrency } : {}),
        ...(kind ? { kind } : {}),
        ...(typeof e.resume === 'boolean' ? { resume: e.resume } : {}),
      });
    } catch (err) {
      p.push(t('Setting taskRuntime.engines: engine "{0}" is skipped: {1}', name.slice(0, 64), (err as Error).message));
    }
  }
  return out;
}
