// The Tasks view's data provider, read through the real TreeDataProvider inside the extension host: status groups
// with counts, task rows with their title, origin and context value, moving between groups as tasks change.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { Commands } from '../../src/extension/constants';
import type { TreeItemSnapshot } from '../../src/extension/api';
import { activateExtension, waitFor, waitForStatus } from './support/extensionApi';

function group(tree: TreeItemSnapshot[], id: string): TreeItemSnapshot | undefined {
  return tree.find((g) => g.id === `group:${id}`);
}

function row(tree: TreeItemSnapshot[], taskId: string): { group: string; item: TreeItemSnapshot } | undefined {
  for (const g of tree) {
    const item = g.children.find((c) => c.id === `task:${taskId}`);
    if (item) return { group: String(g.id).slice('group:'.length), item };
  }
  return undefined;
}

describe('tasks view', () => {
  it('groups tasks by status with counts and shows each task as a row with its actions', async () => {
    const api = await activateExtension();
    const source = api.getTaskSource();
    const prompt = `tree row ${Date.now()}`;
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt, maxOutputTokens: 8 });
    await waitForStatus(source, id, ['succeeded']);
    // Tasks of earlier tests may still be finishing: the tree and the store's counts are read together until they
    // agree (a count read after the snapshot can be one ahead).
    const { tree, counts } = await waitFor("the row under Succeeded, the group count equal to the store's", async () => {
      const t = await api.getTreeSnapshot();
      if (row(t, id)?.group !== 'succeeded') return undefined;
      const c = await source.counts();
      return group(t, 'succeeded')?.description === String(c.succeeded) ? { tree: t, counts: c } : undefined;
    });
    // Groups in a fixed order, only those with tasks, each showing its count.
    const order = ['queued', 'running', 'needsInput', 'succeeded', 'failed', 'cancelled'].map((g) => `group:${g}`);
    const shown = tree.map((g) => String(g.id));
    assert.deepEqual(
      shown,
      order.filter((g) => shown.includes(g)),
    );
    const succeeded = group(tree, 'succeeded')!;
    assert.equal(succeeded.description, String(counts.succeeded), 'the group shows its count');
    assert.equal(group(tree, 'failed') !== undefined, counts.failed > 0, 'an empty group is not shown');
    const { item } = row(tree, id)!;
    assert.equal(item.label, prompt);
    assert.equal(item.contextValue, 'task.succeeded');
    assert.match(String(item.description), /editor/i, 'the row names its origin');
  });

  it('a running task sits under Running and moves to Cancelled when cancelled', async () => {
    const api = await activateExtension();
    const source = api.getTaskSource();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, {
      prompt: `tree cancel ${Date.now()}`,
      temperature: 0, // no budget: runs until cancelled (or the context is full)
    });
    const running = await waitFor('the row under Running', async () => {
      const task = await source.get(id);
      if (task && ['succeeded', 'failed'].includes(task.status)) throw new Error(`ended ${task.status} before it could be cancelled`);
      const t = await api.getTreeSnapshot();
      return row(t, id)?.group === 'running' ? row(t, id) : undefined;
    });
    assert.equal(running.item.contextValue, 'task.running');
    await vscode.commands.executeCommand(Commands.cancelTask, id);
    await waitForStatus(source, id, ['cancelled']);
    const moved = await waitFor('the row under Cancelled', async () => {
      const r = row(await api.getTreeSnapshot(), id);
      return r?.group === 'cancelled' ? r : undefined;
    });
    assert.equal(moved.item.contextValue, 'task.cancelled');
  });
});
