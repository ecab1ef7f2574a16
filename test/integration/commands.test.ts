// The editor commands drive the real runtime: create, cancel, fetch the result, open the events panel.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { Commands, EVENTS_PANEL_VIEW_TYPE } from '../../src/extension/constants';
import { answerText } from '../../src/runtime/responses';
import { activateExtension, endpointOf, waitFor, waitForStatus } from './support/extensionApi';

describe('commands', () => {
  it('createTask runs a task from the editor to Succeeded', async () => {
    const source = (await activateExtension()).getTaskSource();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'Say hello', maxOutputTokens: 16 });
    assert.equal(typeof id, 'string');
    const created = await source.get(id);
    assert.equal(created?.origin, 'editor');
    const done = await waitForStatus(source, id, ['succeeded', 'failed', 'cancelled']);
    assert.equal(done.status, 'succeeded', `task ended ${done.status}: ${JSON.stringify(done.error)}`);
    assert.ok(done.outputTokens > 0 && done.outputTokens <= 16, `outputTokens ${done.outputTokens}`);
    assert.ok(answerText(done.response).length > 0);
  });

  it('fetchResult opens the task output in an editor', async () => {
    const source = (await activateExtension()).getTaskSource();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'Fetch me', maxOutputTokens: 12 });
    const done = await waitForStatus(source, id, ['succeeded']);
    await vscode.commands.executeCommand(Commands.fetchResult, id);
    const editor = await waitFor('an editor showing the result', () => {
      const e = vscode.window.activeTextEditor;
      return e && e.document.getText().includes(answerText(done.response)) ? e : undefined;
    });
    assert.ok(answerText(done.response).length > 0);
    assert.ok(editor.document.getText().includes(answerText(done.response)));
    await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
  });

  it('cancelTask stops a running task, which ends Cancelled with partial output kept', async () => {
    const source = (await activateExtension()).getTaskSource();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, {
      prompt: 'Write a very long story',
      temperature: 0, // no budget (up to the context); greedy decoding never meets the demo model's end token: it runs until cancelled
    });
    const running = await waitForStatus(source, id, ['loading', 'running', 'succeeded']);
    assert.notEqual(running.status, 'succeeded', 'the task finished before it could be cancelled');
    await vscode.commands.executeCommand(Commands.cancelTask, id);
    const done = await waitForStatus(source, id, ['cancelled', 'succeeded', 'failed']);
    assert.equal(done.status, 'cancelled');
    assert.ok(done.outputTokens < 8192);
  });

  it('openEvents opens the events panel for a task', async () => {
    const api = await activateExtension();
    const source = api.getTaskSource();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'Events please', maxOutputTokens: 8 });
    await waitForStatus(source, id, ['succeeded']);
    await vscode.commands.executeCommand(Commands.openEvents, id);
    const tab = await waitFor('an events panel tab', () =>
      vscode.window.tabGroups.all
        .flatMap((g) => g.tabs)
        .find((t) => t.input instanceof vscode.TabInputWebview && t.input.viewType.endsWith(EVENTS_PANEL_VIEW_TYPE)),
    );
    assert.ok(tab.label.length > 0);
    assert.deepEqual(api.openEventPanels(), [id]);
    await vscode.window.tabGroups.close(tab);
    await waitFor('the panel to be gone', () => api.openEventPanels().length === 0);
  });

  it('Clear Finished and Regenerate Token always ask first, whatever arguments a caller passes', async () => {
    const api = await activateExtension();
    const source = api.getTaskSource();
    const id = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'keep me', maxOutputTokens: 4 });
    await waitForStatus(source, id, ['succeeded']);
    // The user says no: nothing happens, even for a caller that asks to skip the question.
    const no = api.stubConfirmations(false);
    try {
      assert.equal(await vscode.commands.executeCommand<number>(Commands.clearFinished, { skipConfirmation: true }), 0);
      assert.equal(await vscode.commands.executeCommand<boolean>(Commands.regenerateToken, { skipConfirmation: true }), false);
      assert.equal(no.asked.length, 2, `asked: ${JSON.stringify(no.asked)}`);
      assert.equal((await source.get(id))?.status, 'succeeded', 'the finished task is still there');
    } finally {
      no.dispose();
    }
    // The user says yes: finished tasks are deleted.
    const yes = api.stubConfirmations(true);
    try {
      const deleted = await vscode.commands.executeCommand<number>(Commands.clearFinished);
      assert.ok(deleted >= 1, `deleted ${deleted}`);
      assert.equal(yes.asked.length, 1);
      assert.equal(await source.get(id), undefined);
    } finally {
      yes.dispose();
    }
  });

  it('Copy MCP Server Config and Select / Download Model ask first and hand the caller no token (issue #23)', async () => {
    const api = await activateExtension();
    await vscode.env.clipboard.writeText('before');
    const no = api.stubConfirmations(false);
    try {
      assert.equal(await vscode.commands.executeCommand(Commands.copyMcpConfig), false);
      assert.equal(await vscode.env.clipboard.readText(), 'before');
      assert.equal(await vscode.commands.executeCommand(Commands.selectModel, 'hf:owner/repo:Q4_K_M'), undefined);
      assert.equal(await vscode.commands.executeCommand(Commands.downloadModel, 'hf:owner/repo:Q4_K_M'), false);
      assert.equal(no.asked.length, 3, `asked: ${JSON.stringify(no.asked)}`);
      assert.equal(vscode.workspace.getConfiguration('taskRuntime').get('model'), '', 'the model setting is unchanged');
      // What the input box refuses is refused for a caller too, before any question.
      await assert.rejects(() => Promise.resolve(vscode.commands.executeCommand(Commands.selectModel, '/tmp/other.gguf')), /hf:owner\/repo/);
      assert.equal(no.asked.length, 3);
    } finally {
      no.dispose();
    }
    const yes = api.stubConfirmations(true);
    try {
      const result = await vscode.commands.executeCommand(Commands.copyMcpConfig);
      assert.equal(result, true, 'the caller learns only that it was copied');
      assert.match(await vscode.env.clipboard.readText(), /"Authorization": "Bearer /);
      assert.equal(yes.asked.length, 1);
    } finally {
      yes.dispose();
    }
  });

  it('the task source lists what the commands created, newest first', async () => {
    const source = (await activateExtension()).getTaskSource();
    const a = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'first', maxOutputTokens: 4 });
    const b = await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: 'second', maxOutputTokens: 4 });
    await waitForStatus(source, b, ['succeeded']);
    await waitForStatus(source, a, ['succeeded']);
    const page = await source.list({ statuses: ['succeeded'], limit: 1000 });
    const ids = page.tasks.map((t) => t.id);
    assert.ok(ids.includes(a) && ids.includes(b));
    assert.ok(ids.indexOf(b) < ids.indexOf(a), 'newest first');
    const counts = await source.counts();
    assert.ok(counts.succeeded >= 2);
  });

  it('Copy OpenAI-Compatible Endpoint asks before the token goes on the clipboard; what it copies works as baseURL + apiKey', async () => {
    const api = await activateExtension();
    const endpoint = await endpointOf(api);
    await vscode.env.clipboard.writeText('before');
    const no = api.stubConfirmations(false);
    try {
      assert.equal(await vscode.commands.executeCommand(Commands.copyOpenAiEndpoint), undefined);
      assert.equal(no.asked.length, 1);
      assert.equal(await vscode.env.clipboard.readText(), 'before', 'nothing copied when the user says no');
    } finally {
      no.dispose();
    }
    const yes = api.stubConfirmations(true);
    let snippet: string | undefined;
    try {
      snippet = await vscode.commands.executeCommand<string>(Commands.copyOpenAiEndpoint);
    } finally {
      yes.dispose();
    }
    assert.equal(await vscode.env.clipboard.readText(), snippet);
    const { baseURL, apiKey } = JSON.parse(snippet!) as { baseURL: string; apiKey: string };
    assert.equal(baseURL, endpoint.lmspUrl);
    const models = (await (await fetch(`${baseURL}/models`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as {
      data: Array<{ id: string }>;
    };
    const r = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: models.data[0].id, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    assert.equal(r.status, 200, await r.clone().text());
    const completion = (await r.json()) as { object: string; id: string };
    assert.equal(completion.object, 'chat.completion');
    await vscode.env.clipboard.writeText('');
  });
});
