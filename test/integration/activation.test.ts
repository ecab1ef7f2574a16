// The extension activates in a real editor, owns the runtime, serves its endpoint and keeps its data in
// globalStorage.
import * as assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { Commands, EXTENSION_ID, MCP_PROVIDER_ID, MCP_SERVER_LABEL, TASKS_VIEW_ID, VIEW_CONTAINER_ID } from '../../src/extension/constants';
import { activateExtension, endpointOf, waitFor, waitForStatus } from './support/extensionApi';

function filesUnder(dir: string, acc: string[] = []): string[] {
  if (!existsSync(dir)) return acc;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) filesUnder(p, acc);
    else acc.push(p);
  }
  return acc;
}

describe('activation', () => {
  it('activates and returns its API; this window owns the runtime', async () => {
    const api = await activateExtension();
    assert.equal(vscode.extensions.getExtension(EXTENSION_ID)?.isActive, true);
    assert.equal(api.isOwner(), true);
    assert.equal(api.getTaskSource().kind, 'local');
  });

  it('reports how long activation and start-up held the event loop (figures only; the bounds are checked in the bench)', async () => {
    const api = await activateExtension();
    const figures = await waitFor('the start-up figures', () => api.startupFigures());
    // Issue #21 item 4 goals: activate() ≤ 100 ms, no block over 20 ms. Reported, not asserted on time.
    console.log(
      `[startup] activate() ${figures.activateMs.toFixed(1)} ms (goal ≤ 100), start-up ${figures.startupMs.toFixed(1)} ms, longest block ${figures.longestBlockMs.toFixed(1)} ms (goal ≤ 20)`,
    );
    assert.ok(figures.activateMs > 0 && figures.startupMs >= figures.activateMs && figures.longestBlockMs >= 0);
  });

  it('manifest contributes the view container, the tasks view and the MCP provider', () => {
    const pkg = vscode.extensions.getExtension(EXTENSION_ID)!.packageJSON as {
      contributes: {
        viewsContainers: Record<string, { id: string }[]>;
        views: Record<string, { id: string }[]>;
        mcpServerDefinitionProviders: { id: string; label: string }[];
      };
    };
    const containers = Object.values(pkg.contributes.viewsContainers).flat();
    assert.ok(
      containers.some((c) => c.id === VIEW_CONTAINER_ID),
      'view container',
    );
    assert.ok(
      pkg.contributes.views[VIEW_CONTAINER_ID]?.some((v) => v.id === TASKS_VIEW_ID),
      'tasks view',
    );
    assert.deepEqual(
      pkg.contributes.mcpServerDefinitionProviders.find((p) => p.id === MCP_PROVIDER_ID),
      { id: MCP_PROVIDER_ID, label: MCP_SERVER_LABEL },
    );
  });

  it('registers every command its package.json contributes, and those are the ids in constants.ts', async () => {
    await activateExtension();
    const pkg = vscode.extensions.getExtension(EXTENSION_ID)!.packageJSON as { contributes: { commands: { command: string }[] } };
    const contributed = pkg.contributes.commands.map((c) => c.command);
    assert.ok(contributed.length > 0, 'package.json contributes no command');
    const registered = new Set(await vscode.commands.getCommands(true));
    assert.deepEqual(
      contributed.filter((c) => !registered.has(c)),
      [],
      'contributed but not registered',
    );
    assert.deepEqual([...contributed].sort(), Object.values(Commands).sort());
  });

  it('serves LMSP and MCP on a loopback endpoint', async () => {
    const endpoint = await endpointOf(await activateExtension());
    const url = new URL(endpoint.url);
    assert.equal(url.hostname, '127.0.0.1');
    assert.equal(endpoint.mcpUrl, `${endpoint.url}/mcp`);
    assert.equal(endpoint.lmspUrl, `${endpoint.url}/lmsp/v1`);
    // Unauthenticated calls are refused: the endpoint is up and guarded.
    const r = await fetch(`${endpoint.lmspUrl}/models`);
    assert.equal(r.status, 401);
  });

  it('keeps task data under its globalStorage folder', async () => {
    const userData = process.env['TASK_RUNTIME_TEST_USER_DATA_DIR'];
    assert.ok(userData, 'the runner sets TASK_RUNTIME_TEST_USER_DATA_DIR to the editor user-data dir');
    const api = await activateExtension();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'storage check', maxOutputTokens: 4 });
    assert.equal(typeof id, 'string');
    await waitForStatus(api.getTaskSource(), id, ['succeeded']);
    const storage = join(userData, 'User/globalStorage', EXTENSION_ID);
    const holder = await waitFor(`a file under ${storage} that records task ${id}`, () =>
      filesUnder(storage).find((f) => readFileSync(f).includes(id)),
    );
    assert.ok(holder.startsWith(storage));
  });
});
