// `task-runtime serve`: the runtime and both doors with no editor. Prints one JSON ready line on stdout, logs on
// stderr, and on SIGINT/SIGTERM stops accepting, closes the runtime (checkpoint) and exits 0. The backends are
// composed by backends/compose.ts, as in the editor.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { composeBackend } from '../backends/compose';
import { nativeBuildsRoot, startupBuildOffer } from '../backends/llama/nativeBuild';
import { isModelUri } from '../backends/modelSource';
import { parseKey, type EngineConfig } from '../backends/remote/config';
import type { RemoteEngine } from '../backends/remote/engine';
import { ENGINE_PROFILES, resumeOffered } from '../backends/remote/quirks';
import type { ModelBackend } from '../runtime/backend';
import { startEndpoint } from '../protocols/endpoint';
import { loadOrCreateReasoningKey } from '../protocols/shared/reasoningSeal';
import type { ModernTool } from '../protocols/mcp/modern/modernDoor';
import type { RuntimeLimits } from '../runtime/api';
import { RESTART_POLICIES } from '../runtime/task';
import { TaskRuntime } from '../runtime/runtime';
import { damageSummary } from '../runtime/store/database';
import { SERVE_LOCK_WAIT_MS } from '../runtime/store/lock';
import { UsageError, type ServeArgs } from './args';
import { loadOrCreateTokens } from './tokenFile';
import { loadOrCreateWebhookSecret } from './webhookSecret';
import { HttpWebhookSender } from '../protocols/webhooks/sender';
import { endpointOrigin, type WebhookEndpoint, type WebhookOptions } from '../runtime/webhooks';
import { OPENAI_BATCH_ENDPOINTS } from '../protocols/openai/batchEndpoints';

/** Hidden knobs for tests and benchmarks (tiny retention windows, fast heartbeats). */
export const ENV_LIMITS = 'TASK_RUNTIME_LIMITS';
export const ENV_HEARTBEAT_MS = 'TASK_RUNTIME_HEARTBEAT_MS';
export const ENV_SWEEP_MS = 'TASK_RUNTIME_SWEEP_MS';
/** Journal size that starts a checkpoint (reliability tests make checkpoints frequent). */
export const ENV_CHECKPOINT_BYTES = 'TASK_RUNTIME_CHECKPOINT_BYTES';

const limitsSchema = z.strictObject({
  onRestart: z.array(z.enum(RESTART_POLICIES)).optional(),
  eventHistorySeconds: z.number().min(0).optional(),
  taskRetentionSeconds: z.number().min(0).optional(),
  idempotencyKeyTtlSeconds: z.number().min(0).optional(),
  maxConcurrentTasks: z.number().int().min(1).optional(),
  maxQueuedTasks: z.number().int().min(0).optional(),
  maxQueuedTasksPerPrincipal: z.number().int().min(1).optional(),
  maxStoredBytesPerPrincipal: z.number().int().min(1).optional(),
  defaultTtlMs: z.number().min(0).optional(),
  maxTtlMs: z.number().min(0).optional(),
});

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString()} ${msg}\n`);
}

function envLimits(): Partial<RuntimeLimits> {
  const raw = process.env[ENV_LIMITS];
  if (!raw) return {};
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new UsageError(`${ENV_LIMITS} is not valid JSON.`);
  }
  const parsed = limitsSchema.safeParse(json);
  if (!parsed.success) throw new UsageError(`${ENV_LIMITS}: ${parsed.error.issues[0].message} at ${parsed.error.issues[0].path.join('.')}.`);
  return parsed.data;
}

function envInt(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  if (!/^[0-9]{1,9}$/.test(raw)) throw new UsageError(`${name} must be a non-negative integer (milliseconds).`);
  return Number(raw);
}

function demoWarning(modelPath: string): string {
  const bar = '!'.repeat(78);
  return [
    bar,
    '!! No --model given: serving the generated DEMO model (random weights).',
    '!! Its output is NOISE. It exists so that the server, the protocols and the tests run offline.',
    `!! Demo model: ${modelPath}`,
    '!! For real answers pass a GGUF file:   task-runtime serve --model /path/to/model.gguf',
    bar,
  ].join('\n');
}

/** One line at start when this machine has no usable native build and could make one (nativeBuild.ts). */
function offerNativeBuild(root: string): void {
  try {
    const offer = startupBuildOffer(root);
    if (offer) log(offer);
  } catch (err) {
    log(`native engine build: not checked (${err instanceof Error ? err.message : String(err)})`);
  }
}

/** One line per engine endpoint: up or down, and what decides resume and slot probing. */
function logEngines(engines: readonly RemoteEngine[]): void {
  for (const engine of engines) {
    for (const ep of engine.endpoints) {
      const what =
        ep.state === 'up'
          ? `up, ${ep.models?.length ?? 0} model(s)${ep.router ? ' (llama.cpp router mode)' : ''}, concurrency ${ep.concurrency}`
          : `down (${ep.lastError})`;
      // The model list's owned_by hints at the server; the kind decides resume and slot probing, so say so.
      const hint =
        !engine.config.kind && ep.looksLike
          ? `; looks like ${ENGINE_PROFILES[ep.looksLike].label}: --engine-kind ${engine.name}=${ep.looksLike}`
          : '';
      log(
        `engine ${engine.name}: ${ep.url} ${what}, kind ${engine.config.kind ?? 'openai'}, resume ${resumeOffered(engine.config.kind, engine.config.resume) ? 'offered' : 'not offered'}${hint}`,
      );
    }
  }
}

/** --engine-key-file: the key, or a UsageError naming the engine. */
function readEngineKey(name: string, keyFile: string): string {
  let content: string;
  try {
    content = fs.readFileSync(path.resolve(keyFile), 'utf8');
  } catch (err) {
    throw new UsageError(`--engine-key-file ${name}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'}).`);
  }
  try {
    return parseKey(content);
  } catch (err) {
    throw new UsageError(`--engine-key-file ${name}: ${(err as Error).message}`);
  }
}

/** The runtime's webhook options from --webhook and its secret files (undefined: none configured). */
function webhookOptions(args: ServeArgs, principals: ReadonlySet<string>): WebhookOptions | undefined {
  if (args.webhooks.length === 0) return undefined;
  const endpoints = new Map<string, WebhookEndpoint>();
  for (const w of args.webhooks) {
    if (!principals.has(w.principal)) {
      throw new UsageError(`--webhook ${w.principal}: no token in the token file has this principal (${[...principals].join(', ')}).`);
    }
    const secretFile = path.resolve(w.secretFile);
    endpoints.set(w.principal, { url: w.url, secret: loadOrCreateWebhookSecret(secretFile, w.principal) });
    log(`webhook for ${w.principal}: ${endpointOrigin(w.url)} (signing secret in ${secretFile})`);
  }
  return { endpoints: (principal) => endpoints.get(principal), sender: new HttpWebhookSender({ allowPrivate: args.webhookAllowPrivate }) };
}

/**
 * What an embedding program serves besides the product: more model backends (members of the composite backend,
 * after the local and remote models) and more MCP tools (the modern door's extraTools). The CLI passes none.
 */
export interface ServeExtensions {
  backends?: readonly ModelBackend[];
  mcpTools?: readonly ModernTool[];
}

export async function serve(args: ServeArgs, extensions: ServeExtensions = {}): Promise<void> {
  const dataDir = path.resolve(args.dataDir);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const limits = envLimits();
  // A number applies to every model (a local model's sequences too); 'auto' is the llama backend's, per model.
  // Without the flag, a limit from the environment is the local models' number too.
  const concurrency = args.concurrency ?? limits.maxConcurrentTasks ?? 'auto';
  if (typeof concurrency === 'number') limits.maxConcurrentTasks = concurrency;
  if (args.maxQueuedPerPrincipal !== undefined) limits.maxQueuedTasksPerPrincipal = args.maxQueuedPerPrincipal;
  if (args.maxStoredMbPerPrincipal !== undefined) limits.maxStoredBytesPerPrincipal = args.maxStoredMbPerPrincipal * 1024 * 1024;
  const heartbeatMs = envInt(ENV_HEARTBEAT_MS);
  const sweepIntervalMs = envInt(ENV_SWEEP_MS);
  const checkpointBytes = envInt(ENV_CHECKPOINT_BYTES);

  const tokenFile = path.resolve(args.tokenFile ?? path.join(dataDir, 'token'));
  const tokens = loadOrCreateTokens(tokenFile);
  const webhooks = webhookOptions(args, new Set(tokens.values()));

  for (const source of args.models) {
    if (!isModelUri(source) && !fs.existsSync(source)) throw new UsageError(`--model ${source}: no such file.`);
  }
  const engines: EngineConfig[] = args.engines.map((e) => ({
    name: e.name,
    urls: e.urls,
    apiKey: e.keyFile ? readEngineKey(e.name, e.keyFile) : undefined,
    concurrency: e.concurrency,
    kind: e.kind,
    resume: e.resume,
  }));
  const nativeBuilds = args.engineBuild === 'prebuilt' ? false : nativeBuildsRoot();
  if (nativeBuilds !== false && (args.models.length > 0 || args.engines.length === 0)) offerNativeBuild(nativeBuilds);
  const composed = await composeBackend({
    models: args.models,
    engines,
    dataDir,
    llama: {
      threads: args.threads ?? 'auto',
      gpu: args.gpu ?? 'auto',
      gpuLayers: args.gpuLayers ?? 'auto',
      contextSize: args.contextSize ?? 'auto',
      concurrency,
      ...(args.keepAliveMs !== undefined ? { keepAliveMs: args.keepAliveMs } : {}),
      ...(args.promptLookup ? { promptLookup: args.promptLookup } : {}),
      ...(args.draftModel ? { draftModel: args.draftModel } : {}),
      nativeBuilds,
    },
    members: extensions.backends,
    log,
  });
  const backend = composed.backend;
  if (composed.demoModel) process.stderr.write(demoWarning(composed.demoModel) + '\n');
  logEngines(composed.engines);
  // Beside the store's open: the model files' trained contexts, so that the first create is checked against them.
  const prepared = backend.prepare?.();
  const runtime = await TaskRuntime.open({
    dataDir,
    backend,
    limits,
    log,
    sweepIntervalMs,
    ...(args.priorityAgingMs !== undefined ? { priorityAgingMs: args.priorityAgingMs } : {}),
    database: checkpointBytes ? { checkpointBytes } : undefined,
    // A restart right after a SIGKILL: the old process may not have finished exiting yet.
    lockWaitMs: SERVE_LOCK_WAIT_MS,
    batchEndpoints: OPENAI_BATCH_ENDPOINTS,
    webhooks,
  });
  await prepared;
  const damage = damageSummary(runtime.storeReport);
  if (damage) log(`WARNING: ${damage}`);
  const endpoint = await startEndpoint(runtime, {
    port: args.port,
    tokens,
    log,
    lmsp: { heartbeatMs, backgroundOnRestart: args.backgroundRestart, maxSseStreamsPerPrincipal: args.maxStreamsPerPrincipal },
    allowedOrigins: args.allowedOrigins,
    reasoningKey: loadOrCreateReasoningKey(dataDir),
    mcp: { maxStreamsPerPrincipal: args.maxStreamsPerPrincipal, ...(extensions.mcpTools && { extraTools: extensions.mcpTools }) },
  }).catch(async (e) => {
    await runtime.close();
    throw e;
  });

  process.stdout.write(
    JSON.stringify({
      event: 'listening',
      url: endpoint.url,
      lmsp: endpoint.lmspUrl,
      mcp: endpoint.mcpUrl,
      anthropic: endpoint.anthropicUrl,
      tokenFile,
    }) + '\n',
  );
  log(`task-runtime listening on ${endpoint.url} (LMSP ${endpoint.lmspUrl}, MCP ${endpoint.mcpUrl}); data in ${dataDir}`);
  log(`bearer token in ${tokenFile}`);

  let stoppingSince = 0;
  const stop = (signal: string) => {
    if (stoppingSince) {
      // A second signal soon after the first is usually the same stop relayed twice (timeout, process managers).
      if (Date.now() - stoppingSince < 2000) return;
      log(`${signal} again: exiting without a clean shutdown`);
      process.exit(1);
    }
    stoppingSince = Date.now();
    log(`${signal}: shutting down`);
    const force = setTimeout(() => {
      log('shutdown took too long; exiting');
      process.exit(1);
    }, 15_000);
    force.unref();
    void (async () => {
      await endpoint.close();
      await runtime.close();
      await backend.dispose().catch(() => {});
      log('stopped');
      process.exit(0);
    })().catch((e) => {
      log(`shutdown failed: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
