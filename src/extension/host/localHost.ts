// Composition root for the owning window: the store-backed runtime, the llama backend and the shared loopback
// endpoint, wired as the CLI wires them. node-llama-cpp stays lazy inside the backend.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { CompositeBackend } from '../../backends/composite';
import { LlamaBackend } from '../../backends/llama/llamaBackend';
import { RemoteBackend } from '../../backends/openai/remoteBackend';
import type { ModelBackend } from '../../runtime/backend';
import { ensureDemoModel } from '../../backends/llama/demoModel';
import { startEndpoint, type Endpoint } from '../../protocols/endpoint';
import type { RuntimeLimits, TaskRuntimeApi } from '../../runtime/api';
import { TaskRuntime } from '../../runtime/runtime';
import type { OpenReport } from '../../runtime/store/database';
import { EDITOR_PRINCIPAL } from '../constants';
import type { ExtensionSettings } from '../model/settings';
import { removeEndpointRecord, writeEndpointRecord } from './endpointRecord';

export interface LocalHost {
  readonly runtime: TaskRuntimeApi;
  readonly endpoint: Endpoint;
  readonly backend: LlamaBackend;
  /** What opening the store found (damage, quarantined files). */
  readonly storeReport: OpenReport;
  setToken(token: string): void;
  close(): Promise<void>;
}

export function limitsFromSettings(s: ExtensionSettings): Partial<RuntimeLimits> {
  return {
    maxConcurrentTasks: s.concurrency,
    maxQueuedTasks: s.maxQueued,
    defaultTtlMs: s.defaultTtlMinutes * 60_000,
    maxTtlMs: s.maxTtlMinutes * 60_000,
    taskRetentionSeconds: s.retentionDays * 86_400,
    eventHistorySeconds: s.eventHistoryHours * 3_600,
  };
}

export function tokenMap(token: string): Map<string, string> {
  return new Map([[token, EDITOR_PRINCIPAL]]);
}

/** Opens the store; throws RuntimeError store_locked when another live window owns it. */
export async function openLocalHost(options: {
  dataDir: string;
  settings: ExtensionSettings;
  token: string;
  log: (message: string) => void;
  /** An engine's API key from SecretStorage (undefined: none). */
  engineKey?: (name: string) => Promise<string | undefined>;
}): Promise<LocalHost> {
  const { dataDir, settings, log } = options;
  mkdirSync(dataDir, { recursive: true });
  const modelsDir = join(dataDir, 'models');
  const model = settings.model
    ? { source: settings.model }
    : { source: ensureDemoModel(modelsDir), demo: true };
  const backend = new LlamaBackend({
    models: [model],
    threads: settings.threads > 0 ? settings.threads : 'auto',
    gpu: settings.gpu,
    gpuLayers: settings.gpuLayers,
    cacheDir: dataDir,
    modelsDir,
    log,
  });
  let composed: ModelBackend = backend;
  if (settings.engines.length) {
    const engines = await Promise.all(
      settings.engines.map(async (e) => ({ ...e, apiKey: (await options.engineKey?.(e.name)) || undefined })),
    );
    const remote = new RemoteBackend(engines, { log });
    // Not awaited: an engine that is down must not hold up activation; its tasks wait queued until it answers.
    void remote.refresh();
    composed = new CompositeBackend([backend, remote]);
  }
  let runtime: TaskRuntimeApi;
  let storeReport: OpenReport;
  try {
    const opened = await TaskRuntime.open({ dataDir, backend: composed, limits: limitsFromSettings(settings), log });
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
      // Other windows create tasks with the editor token; they may mark them as made in the editor.
      lmsp: { editorPrincipals: [EDITOR_PRINCIPAL] },
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
    backend,
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
