// Composition root for the owning window: the store-backed runtime, the backends (backends/compose.ts, the same
// rules as `serve`) and the shared loopback endpoint. node-llama-cpp stays lazy inside the llama backend.
import { mkdirSync } from 'node:fs';
import { composeBackend } from '../../backends/compose';
import { nativeBuildsRoot } from '../../backends/llama/nativeBuild';
import { startEndpoint, type Endpoint } from '../../protocols/endpoint';
import { loadOrCreateReasoningKey } from '../../protocols/shared/reasoningSeal';
import type { RuntimeLimits, TaskRuntimeApi } from '../../runtime/api';
import { TaskRuntime } from '../../runtime/runtime';
import type { OpenReport } from '../../runtime/store/database';
import { HttpWebhookSender } from '../../protocols/webhooks/sender';
import type { WebhookOptions } from '../../runtime/webhooks';
import { EDITOR_PRINCIPAL } from '../constants';
import type { ExtensionSettings } from '../model/settings';
import { removeEndpointRecord, writeEndpointRecord } from './endpointRecord';
import { OPENAI_BATCH_ENDPOINTS } from '../../protocols/openai/batchEndpoints';
import type { WorkspaceIndexSource } from '../../workspaceIndex/reader';

export interface LocalHost {
  readonly runtime: TaskRuntimeApi;
  readonly endpoint: Endpoint;
  /** What opening the store found (damage, quarantined files). */
  readonly storeReport: OpenReport;
  setToken(token: string): void;
  close(): Promise<void>;
}

export function limitsFromSettings(s: ExtensionSettings): Partial<RuntimeLimits> {
  return {
    // A number applies to every model; 'auto' is each local model's own (the runtime's default elsewhere).
    ...(typeof s.concurrency === 'number' ? { maxConcurrentTasks: s.concurrency } : {}),
    maxQueuedTasks: s.maxQueued,
    maxQueuedTasksPerPrincipal: s.maxQueuedPerPrincipal,
    maxStoredBytesPerPrincipal: s.maxStoredMbPerPrincipal * 1024 * 1024,
    defaultTtlMs: s.defaultTtlMinutes * 60_000,
    maxTtlMs: s.maxTtlMinutes * 60_000,
    taskRetentionSeconds: s.retentionDays * 86_400,
    eventHistorySeconds: s.eventHistoryHours * 3_600,
  };
}

export function tokenMap(token: string): Map<string, string> {
  return new Map([[token, EDITOR_PRINCIPAL]]);
}

/** The runtime's webhook options from taskRuntime.webhook.*: the editor principal's endpoint (undefined: none set). */
async function editorWebhooks(settings: ExtensionSettings, secret?: () => Promise<string>): Promise<WebhookOptions | undefined> {
  if (!settings.webhookUrl || !secret) return undefined;
  const endpoint = { url: settings.webhookUrl, secret: await secret() };
  return {
    endpoints: (principal) => (principal === EDITOR_PRINCIPAL ? endpoint : undefined),
    sender: new HttpWebhookSender({ allowPrivate: settings.webhookAllowPrivate }),
  };
}

/** Opens the store; throws RuntimeError store_locked when another live window owns it. */
export async function openLocalHost(options: {
  dataDir: string;
  settings: ExtensionSettings;
  token: string;
  log: (message: string) => void;
  /** An engine's API key from SecretStorage (undefined: none). */
  engineKey?: (name: string) => Promise<string | undefined>;
  /** The completion webhook's signing secret (SecretStorage), asked for when taskRuntime.webhook.url is set. */
  webhookSecret?: () => Promise<string>;
  /** This window's workspace index, offered to MCP clients by the search_workspace tool. */
  workspaceIndex?: WorkspaceIndexSource;
}): Promise<LocalHost> {
  const { dataDir, settings, log } = options;
  mkdirSync(dataDir, { recursive: true });
  const engines = await Promise.all(settings.engines.map(async (e) => ({ ...e, apiKey: (await options.engineKey?.(e.name)) || undefined })));
  const { backend } = await composeBackend({
    models: settings.model ? [settings.model] : [],
    engines,
    dataDir,
    llama: {
      threads: settings.threads > 0 ? settings.threads : 'auto',
      gpu: settings.gpu,
      gpuLayers: settings.gpuLayers,
      contextSize: settings.contextSize,
      concurrency: settings.concurrency,
      keepAliveMs: settings.keepAliveMs,
      promptLookup: settings.promptLookup,
      ...(settings.draftModel ? { draftModel: settings.draftModel } : {}),
      // On the CPU, this machine's native build when one is cached (nativeBuild.ts), else the prebuilt binary.
      nativeBuilds: nativeBuildsRoot(),
    },
    log,
  });
  let runtime: TaskRuntimeApi;
  let storeReport: OpenReport;
  try {
    const opened = await TaskRuntime.open({
      dataDir,
      backend,
      limits: limitsFromSettings(settings),
      log,
      batchEndpoints: OPENAI_BATCH_ENDPOINTS,
      webhooks: await editorWebhooks(settings, options.webhookSecret),
    });
    runtime = opened;
    storeReport = opened.storeReport;
  } catch (e) {
    await backend.dispose().catch(() => undefined);
    throw e;
  }
  let endpoint: Endpoint;
  try {
    endpoint = await startEndpoint(runtime, {
      port: settings.port,
      tokens: tokenMap(options.token),
      allowedOrigins: [...settings.allowedOrigins],
      reasoningKey: loadOrCreateReasoningKey(dataDir),
      // Other windows create tasks with the editor token; they may mark them as made in the editor.
      lmsp: {
        editorPrincipals: [EDITOR_PRINCIPAL],
        backgroundOnRestart: settings.backgroundRestartPolicy,
        maxSseStreamsPerPrincipal: settings.maxStreamsPerPrincipal,
      },
      mcp: { maxStreamsPerPrincipal: settings.maxStreamsPerPrincipal, workspaceIndex: options.workspaceIndex },
      log,
    });
  } catch (e) {
    await runtime.close().catch(() => undefined);
    await backend.dispose().catch(() => undefined);
    throw e;
  }
  await writeEndpointRecord(dataDir, { pid: process.pid, url: endpoint.url, port: endpoint.port });
  let closing: Promise<void> | undefined;
  return {
    runtime,
    endpoint,
    storeReport,
    setToken: (token) => endpoint.setTokens(tokenMap(token)),
    close() {
      closing ??= (async () => {
        await removeEndpointRecord(dataDir, process.pid).catch(() => undefined);
        await endpoint.close().catch((e) => log(`endpoint close failed: ${String(e)}`));
        await runtime.close().catch((e) => log(`runtime close failed: ${String(e)}`));
        await backend.dispose().catch((e) => log(`backend dispose failed: ${String(e)}`));
      })();
      return closing;
    },
  };
}
