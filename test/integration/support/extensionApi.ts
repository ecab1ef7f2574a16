// Access to the extension under test from inside the extension host, and bounded waits on real state.
import * as vscode from 'vscode';
import type { TaskRuntimeExtensionApi, TaskRuntimeTestApi } from '../../../src/extension/api';
import { EXTENSION_ID, TEST_API_ENV } from '../../../src/extension/constants';
import type { TaskInfo, TaskSource } from '../../../src/extension/model/taskSource';
import type { TaskStatus } from '../../../src/runtime/task';

export type { TaskRuntimeExtensionApi, TaskRuntimeTestApi };

/** The extension's test API: the harness sets TEST_API_ENV in the extension host, so activate() returns it. */
export async function activateExtension(): Promise<TaskRuntimeTestApi> {
  const ext = vscode.extensions.getExtension<TaskRuntimeExtensionApi | TaskRuntimeTestApi>(EXTENSION_ID);
  if (!ext) throw new Error(`extension ${EXTENSION_ID} is not installed in this editor`);
  const api = await ext.activate();
  if (!('getTreeSnapshot' in api)) throw new Error(`no test API: the harness must set ${TEST_API_ENV}=1 in the extension host`);
  // Activation returns at once; the store opens (and ownership is settled) in the background.
  await api.whenReady();
  return api;
}

/** The owner's endpoint starts after activation; wait until the API reports it. */
export async function endpointOf(api: TaskRuntimeExtensionApi): Promise<{ url: string; lmspUrl: string; mcpUrl: string }> {
  return waitFor('the endpoint to start', () => api.getEndpoint());
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls until probe returns a value other than undefined/false; fails naming what it waited for. */
export async function waitFor<T>(
  what: string | (() => string),
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}${last ? `: ${String(last)}` : ''}`);
    await sleep(200);
  }
}

export async function waitForStatus(source: TaskSource, id: string, statuses: readonly TaskStatus[], timeoutMs = 90_000): Promise<TaskInfo> {
  let seen: TaskStatus | undefined;
  return waitFor(
    () => `task ${id} to reach ${statuses.join('|')} (last seen ${seen ?? 'nothing'})`,
    async () => {
      const t = await source.get(id);
      seen = t?.status;
      return t && statuses.includes(t.status) ? t : undefined;
    },
    timeoutMs,
  );
}
