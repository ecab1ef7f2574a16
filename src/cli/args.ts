// Command-line parsing for `task-runtime`; every mistake is a UsageError (exit code 2) with a clear message.
import { isModelFamily, MODEL_FAMILIES, type ModelFamily } from '../backends/llama/familyModel';
import * as path from 'node:path';
import { normalizeOrigin } from '../protocols/http/hostOrigin';
import { RESTART_POLICIES, type RestartPolicy } from '../runtime/task';
import { checkWebhookUrl } from '../runtime/webhooks';
import { checkEngineConfig, checkEngineKind, checkEngineName, normalizeEngineUrl } from '../backends/remote/config';
import { ENGINE_KINDS, type EngineKind } from '../backends/remote/quirks';
import { MAX_CONCURRENCY, MAX_CONTEXT_SIZE, MIN_CONTEXT_SIZE, type ConcurrencyChoice, type ContextSizeChoice } from '../backends/llama/contextChoice';
import { parseKeepAlive } from '../backends/llama/keepAlive';
import { checkDraftModelFile, PROMPT_LOOKUP_CHOICES, type PromptLookupChoice } from '../backends/llama/speculative';
import { DEFAULT_MAX_QUEUED_PER_PRINCIPAL, DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL, DEFAULT_MAX_STREAMS_PER_PRINCIPAL } from '../runtime/shares';
import { DEFAULT_PRIORITY_AGING_MS } from '../runtime/queue';
import {
  GPU_CHOICES,
  isGpuChoice,
  MAX_GPU_LAYERS,
  MAX_THREADS,
  parseAutoOrInt,
  type GpuChoice,
  type GpuLayersChoice,
  type ThreadsChoice,
} from '../backends/llama/hardware';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const USAGE = `Usage:
  task-runtime serve [--data-dir DIR] [--port N] [--model PATH|URI]... [--token-file FILE]
                     [--threads N|auto] [--gpu auto|off|cuda|vulkan|metal] [--gpu-layers N|auto]
                     [--context-size N|auto] [--prompt-lookup auto|on|off] [--draft-model PATH]
                     [--engine-build auto|prebuilt]
                     [--concurrency N|auto] [--keep-alive DURATION] [--allow-origin ORIGIN]... [--background-restart fail|retry|resume]
                     [--max-queued-per-principal N] [--max-streams-per-principal N]
                     [--max-stored-mb-per-principal N] [--priority-aging-ms N]
                     [--engine NAME=URL[,URL...]]... [--engine-key-file NAME=FILE]...
                     [--engine-concurrency NAME=N[,N...]]... [--engine-kind NAME=KIND]...
                     [--engine-resume NAME[=off]]...
                     [--webhook PRINCIPAL=URL --webhook-secret-file PRINCIPAL=FILE]... [--webhook-allow-private]
  task-runtime make-test-model [--family qwen3|llama3.1|gemma3|gpt-oss] <out.gguf>
  task-runtime build-engine [--jobs N]
  task-runtime --help

serve      Runs the task runtime with its LMSP (/lmsp/v1) and MCP (/mcp) endpoints on 127.0.0.1.
           --data-dir     where tasks and the token live (default ./.task-runtime)
           --port         TCP port (default: a free one)
           --model        a .gguf file or a model URI; repeat for more (default: the generated demo model)
           --token-file   bearer token file, created with mode 0600 if missing (default DATA_DIR/token)
           --threads      CPU threads per generation (default auto: measured at model load, cached in DIR;
                          prompts on every core); a number N bounds it: prompts on N, steps on the fastest count up to N
           --gpu          GPU API (default auto: the best working build, else the CPU; off: CPU only)
           --gpu-layers   layers to offload (default auto: as many as free GPU memory holds)
           --engine-build auto (default): on the CPU, this machine's native build when build-engine made one,
                          else node-llama-cpp's prebuilt binary (the log line says which and why); prebuilt: always
                          the prebuilt binary
           --context-size tokens of context per task (default auto: the model's trained context as far as
                          free memory allows); prompt + max_output_tokens beyond it are refused with 400
                          context_length_exceeded (a default budget is capped to the room)
           --prompt-lookup  speculative decoding with drafts looked up in the prompt and output (default auto:
                          on for a model whose measured decode rate is below 400 tokens/s, where it pays;
                          docs/speculative-decoding.md); on: always; off: never
           --draft-model  a smaller .gguf with the same vocabulary that drafts tokens for the served models
                          (speculative decoding; used instead of prompt lookup for every model it fits)
           --concurrency  tasks generating at the same time per local model, as sequences of its one batched
                          context (default auto: as many as free RAM/VRAM holds at the context size, at most
                          8 on the CPU, 32 on a GPU)
           --keep-alive   an idle local model unloads after this long without a task and loads again on the
                          next one: 0 (never), seconds, or 500ms/30s/5m/1h (default 5m, like Ollama)
           --background-restart  on_restart of an OpenAI background response (POST /responses with
                          background: true) when the server stops before it finishes: fail, retry (default: run it
                          again from the start) or resume (continue its output where the model can, else retry)
           --max-queued-per-principal  unfinished tasks one token may have, all doors together (default
                          ${DEFAULT_MAX_QUEUED_PER_PRINCIPAL}); beyond it creates answer 429 naming the limit
           --max-streams-per-principal  event streams one token may hold open per door (default
                          ${DEFAULT_MAX_STREAMS_PER_PRINCIPAL}); beyond it 429
           --max-stored-mb-per-principal  MiB one token's tasks may store, events included (default
                          ${DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL / 1024 / 1024}); beyond it 429, one prompt larger than it 413
           --priority-aging-ms  a queued task's priority (-10..10, higher first among one token's tasks) rises one
                          level per this many ms of waiting (default ${DEFAULT_PRIORITY_AGING_MS}; 0: no aging); docs/queue.md
           --allow-origin a browser origin (scheme://host[:port]) allowed besides the server's own loopback
                          origins; repeat for more. Any other Origin is refused with 403
           --engine       a remote OpenAI-compatible engine (llama.cpp server, vLLM, Ollama, LM Studio): NAME and
                          its base URL(s), e.g. gpu=http://10.0.0.5:8080/v1; several URLs form a pool. Its models
                          are offered as NAME/model-id. With --engine and no --model, no demo model is served.
           --engine-key-file  NAME=FILE: the engine's API key (first line of FILE; never logged)
           --engine-concurrency  NAME=N[,N...]: tasks per URL at once (default: llama.cpp's slots, else 4)
           --engine-kind  NAME=KIND: which server it is: ${ENGINE_KINDS.join(', ')} (default openai: any
                          OpenAI-compatible server). llama.cpp and vllm continue a final assistant message, so
                          on_restart "resume" is offered for their models; ollama and lmstudio do not
           --engine-resume  NAME[=off]: offer on_restart "resume" for an engine of kind openai that continues a final
                          assistant message; NAME=off stops offering it for llama.cpp or vllm
           --webhook      PRINCIPAL=URL: when a task of PRINCIPAL (a name from the token file; a bare token's is
                          tok_<hash>, shown at start-up) finishes, a signed event is POSTed to URL (http or https),
                          at least once, retried for about 27.6 h (docs/webhooks.md)
           --webhook-secret-file  PRINCIPAL=FILE: the endpoint's signing secret (whsec_..., first line of FILE;
                          created with a fresh secret and mode 0600 when missing; never logged)
           --webhook-allow-private  deliver to private, loopback and link-local addresses too (refused by default)
make-test-model  Writes the tiny random-weight GGUF used by tests and the demo; with --family, one with that family's
           real tokenizer and chat template (Qwen 3, Llama 3.1, Gemma 3, gpt-oss; needs the development dependencies;
           docs/model-families.md). Its output is noise.

build-engine  Builds llama.cpp (the source node-llama-cpp ships; offline) for this machine with OpenMP and native
           CPU flags into a cache outside node_modules (~/.cache/task-runtime/native-builds, or
           $TASK_RUNTIME_NATIVE_BUILDS_DIR), keyed by node-llama-cpp's version and this CPU; serve and the editor
           use it from then on (docs/native-build.md). Needs cmake, a C++ compiler and git; minutes of CPU.
           --jobs         parallel compile jobs (default: every core)`;

export interface ServeArgs {
  command: 'serve';
  dataDir: string;
  port: number;
  models: string[];
  tokenFile?: string;
  threads?: ThreadsChoice;
  gpu?: GpuChoice;
  gpuLayers?: GpuLayersChoice;
  /** --engine-build: 'auto' (the native build when cached) or 'prebuilt'; undefined = auto. */
  engineBuild?: 'auto' | 'prebuilt';
  contextSize?: ContextSizeChoice;
  concurrency?: ConcurrencyChoice;
  /** Speculative decoding (backends/llama/speculative.ts). */
  promptLookup?: PromptLookupChoice;
  /** Absolute path of the draft model's GGUF, checked to exist and be a GGUF. */
  draftModel?: string;
  /** Milliseconds, 0 = never unload (keepAlive.ts). */
  keepAliveMs?: number;
  /** on_restart of background responses (--background-restart); undefined = the LMSP door's default. */
  backgroundRestart?: RestartPolicy;
  /** Per-principal caps (runtime/shares.ts); undefined = the default. */
  maxQueuedPerPrincipal?: number;
  maxStreamsPerPrincipal?: number;
  maxStoredMbPerPrincipal?: number;
  /** Waiting this long raises a queued task's priority one level (runtime/queue.ts); undefined = the default. */
  priorityAgingMs?: number;
  /** Canonical origins (normalizeOrigin) from --allow-origin. */
  allowedOrigins: string[];
  engines: EngineArg[];
  webhooks: WebhookArg[];
  /** --webhook-allow-private: endpoints may be on private and loopback addresses. */
  webhookAllowPrivate: boolean;
}

export interface WebhookArg {
  principal: string;
  url: string;
  secretFile: string;
}

export interface EngineArg {
  name: string;
  urls: string[];
  keyFile?: string;
  concurrency?: number[];
  kind?: EngineKind;
  resume?: boolean;
}

export type CliArgs =
  ServeArgs | { command: 'make-test-model'; out: string; family?: ModelFamily } | { command: 'build-engine'; jobs?: number } | { command: 'help' };

/** The most compile jobs `build-engine --jobs` takes. */
export const MAX_BUILD_JOBS = 256;

/** `flag`: takes no value. */
type FlagKind = 'string' | 'int' | 'list' | 'flag';
const SERVE_FLAGS: Record<string, { kind: FlagKind; min?: number; max?: number }> = {
  'data-dir': { kind: 'string' },
  port: { kind: 'int', min: 0, max: 65535 },
  model: { kind: 'list' },
  'token-file': { kind: 'string' },
  threads: { kind: 'string' },
  gpu: { kind: 'string' },
  'gpu-layers': { kind: 'string' },
  'engine-build': { kind: 'string' },
  'context-size': { kind: 'string' },
  concurrency: { kind: 'string' },
  'prompt-lookup': { kind: 'string' },
  'draft-model': { kind: 'string' },
  'keep-alive': { kind: 'string' },
  'max-queued-per-principal': { kind: 'int', min: 1, max: 100_000 },
  'max-streams-per-principal': { kind: 'int', min: 1, max: 10_000 },
  'max-stored-mb-per-principal': { kind: 'int', min: 1, max: 1_048_576 },
  'priority-aging-ms': { kind: 'int', min: 0, max: 3_600_000 },
  'allow-origin': { kind: 'list' },
  'background-restart': { kind: 'string' },
  engine: { kind: 'list' },
  'engine-key-file': { kind: 'list' },
  'engine-concurrency': { kind: 'list' },
  'engine-kind': { kind: 'list' },
  'engine-resume': { kind: 'list' },
  webhook: { kind: 'list' },
  'webhook-secret-file': { kind: 'list' },
  'webhook-allow-private': { kind: 'flag' },
};

export function parseArgs(argv: readonly string[]): CliArgs {
  const [command, ...rest] = argv;
  const isHelp = (a: string | undefined) => a === '--help' || a === '-h' || a === 'help';
  // `task-runtime --help`, `task-runtime serve --help`, `… make-test-model -h`: the usage, whatever else is given.
  if (command === undefined || isHelp(command) || (command !== undefined && rest.some((a) => a === '--help' || a === '-h')))
    return { command: 'help' };
  if (command === 'make-test-model') {
    let family: ModelFamily | undefined;
    const args = [...rest];
    const at = args.findIndex((a) => a === '--family' || a.startsWith('--family='));
    if (at >= 0) {
      const value = args[at].includes('=') ? args[at].slice(args[at].indexOf('=') + 1) : args[at + 1];
      args.splice(at, args[at].includes('=') ? 1 : 2);
      if (value === undefined || !isModelFamily(value))
        throw new UsageError(`--family must be one of ${MODEL_FAMILIES.join(', ')} (got ${JSON.stringify(value ?? '')}).`);
      family = value;
    }
    if (args.length !== 1 || args[0].startsWith('-')) throw new UsageError('make-test-model takes exactly one argument: the output .gguf path.');
    return { command: 'make-test-model', out: args[0], ...(family ? { family } : {}) };
  }
  if (command === 'build-engine') return parseBuildEngine(rest);
  if (command !== 'serve') throw new UsageError(`Unknown command "${command}".`);
  return parseServe(rest);
}

function parseBuildEngine(args: readonly string[]): { command: 'build-engine'; jobs?: number } {
  let jobs: number | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const m = /^--jobs(?:=(.*))?$/.exec(arg);
    if (!m) throw new UsageError(arg.startsWith('--') ? `Unknown option "${arg.split('=')[0]}" for build-engine.` : `Unexpected argument "${arg}".`);
    if (jobs !== undefined) throw new UsageError('Option --jobs given more than once.');
    const raw = m[1] ?? args[++i];
    if (raw === undefined || raw === '') throw new UsageError('Option --jobs needs a value.');
    if (!/^[0-9]+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_BUILD_JOBS) {
      throw new UsageError(`--jobs must be an integer from 1 to ${MAX_BUILD_JOBS}, got "${raw}".`);
    }
    jobs = Number(raw);
  }
  return { command: 'build-engine', ...(jobs !== undefined ? { jobs } : {}) };
}

function parseServe(args: readonly string[]): ServeArgs {
  const values = new Map<string, string[]>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith('--')) throw new UsageError(`Unexpected argument "${arg}".`);
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const spec = SERVE_FLAGS[name];
    if (!spec) throw new UsageError(`Unknown option "--${name}".`);
    let value: string | undefined;
    if (spec.kind === 'flag') {
      if (eq >= 0) throw new UsageError(`Option --${name} takes no value.`);
      value = 'on';
    } else if (eq >= 0) value = arg.slice(eq + 1);
    else if (i + 1 < args.length && !args[i + 1].startsWith('--')) value = args[++i];
    if (value === undefined || value === '') throw new UsageError(`Option --${name} needs a value.`);
    if (spec.kind !== 'list' && values.has(name)) throw new UsageError(`Option --${name} given more than once.`);
    values.set(name, [...(values.get(name) ?? []), value]);
  }
  const int = (name: string): number | undefined => {
    const raw = values.get(name)?.[0];
    if (raw === undefined) return undefined;
    const spec = SERVE_FLAGS[name];
    if (!/^[0-9]+$/.test(raw) || Number(raw) < (spec.min ?? 0) || Number(raw) > (spec.max ?? Infinity)) {
      throw new UsageError(`--${name} must be an integer from ${spec.min} to ${spec.max}, got "${raw}".`);
    }
    return Number(raw);
  };
  const autoOrInt = (name: string, min: number, max: number): 'auto' | number | undefined => {
    const raw = values.get(name)?.[0];
    if (raw === undefined) return undefined;
    const v = parseAutoOrInt(raw, min, max);
    if (v === undefined) throw new UsageError(`--${name} must be "auto" or an integer from ${min} to ${max}, got "${raw}".`);
    return v;
  };
  return {
    command: 'serve',
    dataDir: values.get('data-dir')?.[0] ?? '.task-runtime',
    port: int('port') ?? 0,
    models: values.get('model') ?? [],
    tokenFile: values.get('token-file')?.[0],
    threads: autoOrInt('threads', 1, MAX_THREADS),
    gpu: gpuChoice(values.get('gpu')?.[0]),
    gpuLayers: autoOrInt('gpu-layers', 0, MAX_GPU_LAYERS),
    engineBuild: engineBuild(values.get('engine-build')?.[0]),
    contextSize: autoOrInt('context-size', MIN_CONTEXT_SIZE, MAX_CONTEXT_SIZE),
    concurrency: autoOrInt('concurrency', 1, MAX_CONCURRENCY),
    promptLookup: promptLookup(values.get('prompt-lookup')?.[0]),
    draftModel: draftModel(values.get('draft-model')?.[0]),
    keepAliveMs: keepAlive(values.get('keep-alive')?.[0]),
    backgroundRestart: restartPolicy(values.get('background-restart')?.[0]),
    maxQueuedPerPrincipal: int('max-queued-per-principal'),
    maxStreamsPerPrincipal: int('max-streams-per-principal'),
    maxStoredMbPerPrincipal: int('max-stored-mb-per-principal'),
    priorityAgingMs: int('priority-aging-ms'),
    allowedOrigins: (values.get('allow-origin') ?? []).map((raw) => {
      const origin = normalizeOrigin(raw);
      if (origin instanceof Error) throw new UsageError(`--allow-origin ${origin.message}.`);
      return origin;
    }),
    engines: engineArgs(values),
    webhooks: webhookArgs(values),
    webhookAllowPrivate: values.has('webhook-allow-private'),
  };
}

/** `PRINCIPAL=VALUE` of a webhook flag (a principal is a token file's name: no spaces). */
function principalValue(flag: string, raw: string): [string, string] {
  const eq = raw.indexOf('=');
  if (eq <= 0 || eq === raw.length - 1) throw new UsageError(`--${flag} must be PRINCIPAL=VALUE, got "${raw.slice(0, 200)}".`);
  const principal = raw.slice(0, eq);
  if (/\s/.test(principal) || principal.length > 200) throw new UsageError(`--${flag}: "${principal.slice(0, 80)}" is not a principal name.`);
  return [principal, raw.slice(eq + 1)];
}

function webhookArgs(values: Map<string, string[]>): WebhookArg[] {
  const urls = new Map<string, string>();
  for (const raw of values.get('webhook') ?? []) {
    const [principal, value] = principalValue('webhook', raw);
    if (urls.has(principal)) throw new UsageError(`--webhook ${principal} given twice; a principal has one endpoint.`);
    const url = checkWebhookUrl(value);
    // The message never repeats the URL: its query may hold someone's token.
    if (url instanceof Error) throw new UsageError(`--webhook ${principal}: ${url.message}.`);
    urls.set(principal, url);
  }
  const files = new Map<string, string>();
  for (const raw of values.get('webhook-secret-file') ?? []) {
    const [principal, file] = principalValue('webhook-secret-file', raw);
    if (!urls.has(principal)) throw new UsageError(`--webhook-secret-file ${principal}: no --webhook ${principal}=URL was given.`);
    if (files.has(principal)) throw new UsageError(`--webhook-secret-file ${principal} given twice.`);
    files.set(principal, file);
  }
  return [...urls].map(([principal, url]) => {
    const secretFile = files.get(principal);
    if (!secretFile) throw new UsageError(`--webhook ${principal}: give its signing secret with --webhook-secret-file ${principal}=FILE.`);
    return { principal, url, secretFile };
  });
}

/** `NAME=VALUE` of an engine flag. */
function named(flag: string, raw: string): [string, string] {
  const eq = raw.indexOf('=');
  if (eq <= 0 || eq === raw.length - 1) throw new UsageError(`--${flag} must be NAME=VALUE, got "${raw.slice(0, 200)}".`);
  const name = raw.slice(0, eq);
  try {
    checkEngineName(name);
  } catch (e) {
    throw new UsageError(`--${flag}: ${(e as Error).message}`);
  }
  return [name, raw.slice(eq + 1)];
}

function engineArgs(values: Map<string, string[]>): EngineArg[] {
  const engines = new Map<string, EngineArg>();
  for (const raw of values.get('engine') ?? []) {
    const [name, list] = named('engine', raw);
    if (engines.has(name)) throw new UsageError(`--engine ${name} given twice; list all its URLs in one: ${name}=URL,URL.`);
    let urls: string[];
    try {
      urls = list.split(',').map((u) => normalizeEngineUrl(u));
    } catch (e) {
      throw new UsageError(`--engine ${name}: ${(e as Error).message}`);
    }
    engines.set(name, { name, urls });
  }
  for (const raw of values.get('engine-key-file') ?? []) {
    const [name, file] = named('engine-key-file', raw);
    const e = engines.get(name);
    if (!e) throw new UsageError(`--engine-key-file ${name}: no --engine ${name}=URL was given.`);
    if (e.keyFile) throw new UsageError(`--engine-key-file ${name} given twice.`);
    e.keyFile = file;
  }
  for (const raw of values.get('engine-concurrency') ?? []) {
    const [name, list] = named('engine-concurrency', raw);
    const e = engines.get(name);
    if (!e) throw new UsageError(`--engine-concurrency ${name}: no --engine ${name}=URL was given.`);
    const ns = list.split(',').map((n) => (/^[0-9]{1,4}$/.test(n) ? Number(n) : NaN));
    if (ns.some((n) => !(n >= 1 && n <= 1024)) || (ns.length !== 1 && ns.length !== e.urls.length)) {
      throw new UsageError(`--engine-concurrency ${name} must be one number (1-1024) for all URLs or one per URL.`);
    }
    e.concurrency = ns;
  }
  for (const raw of values.get('engine-kind') ?? []) {
    const [name, kind] = named('engine-kind', raw);
    const e = engines.get(name);
    if (!e) throw new UsageError(`--engine-kind ${name}: no --engine ${name}=URL was given.`);
    if (e.kind) throw new UsageError(`--engine-kind ${name} given twice.`);
    try {
      e.kind = checkEngineKind(kind);
    } catch (err) {
      throw new UsageError(`--engine-kind ${name}: ${(err as Error).message}`);
    }
  }
  for (const raw of values.get('engine-resume') ?? []) {
    const [name, value] = raw.includes('=') ? named('engine-resume', raw) : [raw, 'on'];
    const e = engines.get(name);
    if (!e) throw new UsageError(`--engine-resume ${name.slice(0, 80)}: no --engine ${name.slice(0, 80)}=URL was given.`);
    if (value !== 'on' && value !== 'off') throw new UsageError(`--engine-resume ${name}: the value must be on or off, got "${value.slice(0, 40)}".`);
    e.resume = value === 'on';
  }
  for (const e of engines.values()) {
    try {
      checkEngineConfig({ name: e.name, urls: e.urls, kind: e.kind, resume: e.resume });
    } catch (err) {
      throw new UsageError(`--engine ${e.name}: ${(err as Error).message}`);
    }
  }
  return [...engines.values()];
}

function restartPolicy(raw: string | undefined): RestartPolicy | undefined {
  if (raw === undefined) return undefined;
  if (!RESTART_POLICIES.includes(raw as RestartPolicy))
    throw new UsageError(`--background-restart must be one of ${RESTART_POLICIES.join(', ')}, got "${raw.slice(0, 40)}".`);
  return raw as RestartPolicy;
}

function keepAlive(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const ms = parseKeepAlive(raw);
  if (ms === undefined)
    throw new UsageError(`--keep-alive must be 0 (never), seconds, or a duration such as 30s, 5m or 1h (at most 24h), got "${raw}".`);
  return ms;
}

function promptLookup(raw: string | undefined): PromptLookupChoice | undefined {
  if (raw === undefined) return undefined;
  if (!PROMPT_LOOKUP_CHOICES.includes(raw as PromptLookupChoice))
    throw new UsageError(`--prompt-lookup must be one of ${PROMPT_LOOKUP_CHOICES.join(', ')}, got "${raw.slice(0, 40)}".`);
  return raw as PromptLookupChoice;
}

function draftModel(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const file = path.resolve(raw);
  const problem = checkDraftModelFile(file);
  if (problem) throw new UsageError(`--draft-model: ${problem}.`);
  return file;
}

function engineBuild(raw: string | undefined): 'auto' | 'prebuilt' | undefined {
  if (raw === undefined) return undefined;
  if (raw !== 'auto' && raw !== 'prebuilt') throw new UsageError(`--engine-build must be auto or prebuilt, got "${raw}".`);
  return raw;
}

function gpuChoice(raw: string | undefined): GpuChoice | undefined {
  if (raw === undefined) return undefined;
  if (!isGpuChoice(raw)) throw new UsageError(`--gpu must be one of ${GPU_CHOICES.join(', ')}, got "${raw}".`);
  return raw;
}
