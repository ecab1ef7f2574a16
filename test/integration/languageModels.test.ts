// The runtime's models as VS Code language models, used by another extension: the fixture extension
// test/fixtures/lm-consumer (loaded next to ours by the harness) calls vscode.lm.selectChatModels({vendor:
// "task-runtime"}) and sendRequest, and writes what streamed; the request is a task in our tree, its output is what
// the consumer received, and cancelling the request cancels the task.
import * as assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { LM_VENDOR } from '../../src/extension/constants';
import { chatModelInfos } from '../../src/extension/lm/chatMapping';
import { answerText } from '../../src/runtime/responses';
import { type TaskInfo } from '../../src/extension/model/taskSource';
import { activateExtension, waitFor, waitForStatus, type TaskRuntimeTestApi } from './support/extensionApi';

interface ConsumerReport {
  models: Array<{ id: string; vendor: string; family: string; maxInputTokens: number }>;
  text: string;
  parts: number;
  tokenCount: number | null;
  error: string | null;
  cancelled: boolean;
  cancelledAt: number | null;
}

const dir = mkdtempSync(join(tmpdir(), 'lm-consumer-'));

async function consume(args: Record<string, unknown>): Promise<ConsumerReport> {
  const out = join(dir, `${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  await vscode.commands.executeCommand('lmConsumer.run', { ...args, out });
  return JSON.parse(readFileSync(out, 'utf8')) as ConsumerReport;
}

/** The chat task with this title that the provider made (newest first). */
async function chatTask(api: TaskRuntimeTestApi, prompt: string): Promise<TaskInfo> {
  return waitFor(`a chat task for "${prompt}"`, async () => {
    const page = await api.getTaskSource().list({ limit: 200 });
    return page.tasks.find((t) => t.title === `Chat: ${prompt}`);
  });
}

describe('language models (vendor task-runtime)', () => {
  it('another extension streams a reply from our model; the request is a succeeded task in our tree', async () => {
    const api = await activateExtension();
    const prompt = 'Say hello to the consumer';
    const report = await consume({ prompt, modelOptions: { maxOutputTokens: 24 } });
    assert.equal(report.error, null, `consumer error: ${report.error}`);
    assert.ok(report.models.length >= 1, 'the consumer was offered our models');
    for (const m of report.models) {
      assert.equal(m.vendor, LM_VENDOR);
      assert.ok(m.maxInputTokens > 0);
    }
    const models = await api.getTaskSource().listModels();
    assert.deepEqual(report.models.map((m) => m.id).sort(), models.map((m) => m.id).sort(), 'every runtime model is a chat model');
    assert.ok(typeof report.tokenCount === 'number' && report.tokenCount > 0, `countTokens gave ${report.tokenCount}`);
    assert.ok(report.parts > 0 && report.text.length > 0, 'text streamed');

    const task = await chatTask(api, prompt);
    const done = await waitForStatus(api.getTaskSource(), task.id, ['succeeded', 'failed', 'cancelled']);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.origin, 'editor');
    assert.equal(answerText(done.response), report.text, 'the consumer received exactly the task output');
    assert.ok(done.outputTokens > 0 && done.outputTokens <= 24);
    // It shows in the Tasks view (the tree's model follows the store's changes a moment later).
    await waitFor('the chat task as a row of the tree', async () => JSON.stringify(await api.getTreeSnapshot()).includes(task.id));
  });

  it("the token counts in the model's own tokenizer once the model is loaded", async () => {
    const api = await activateExtension();
    const [model] = await vscode.lm.selectChatModels({ vendor: LM_VENDOR });
    assert.ok(model);
    // The output reserve the provider advertises for it (a reply without a budget gets that much).
    const reserve = chatModelInfos(await api.getTaskSource().listModels()).find((m) => m.id === model.id)?.maxOutputTokens;
    assert.ok(reserve);
    const text = 'The quick brown fox jumps over the lazy dog.';
    const exact = await api.getTaskSource().countTokens(model.id, text);
    assert.ok(exact !== null, 'the model ran above, so its tokenizer is at hand');
    assert.equal(await model.countTokens(text), exact);
  });

  it('cancelling the request cancels its task', async () => {
    const api = await activateExtension();
    // The demo model never ends its output by itself at temperature 0, so a reply runs to its budget: asked here for
    // more than the advertised reserve (512 tokens of the demo's 2048), it gets the room the short prompt leaves, about
    // 2000 tokens, a few seconds. A task that still finished before a cancel sent after its first text reached it
    // (two RPC hops through the workbench, on a loaded machine) lost that race fairly: try another prompt. One that
    // went on for longer after the cancel was sent was not stopped by it: that fails.
    const [model] = await vscode.lm.selectChatModels({ vendor: LM_VENDOR });
    assert.ok(model);
    // The output reserve the provider advertises for it (a reply without a budget gets that much).
    const reserve = chatModelInfos(await api.getTaskSource().listModels()).find((m) => m.id === model.id)?.maxOutputTokens;
    assert.ok(reserve);
    for (let attempt = 1; attempt <= 4; attempt++) {
      const prompt = `Write a very long story for the consumer #${attempt}`;
      const report = await consume({ prompt, cancelAfterFirstText: true, modelOptions: { temperature: 0, maxOutputTokens: 4096 } });
      assert.ok(report.cancelled && report.cancelledAt !== null, `the consumer saw text to cancel after (error: ${report.error})`);
      const task = await chatTask(api, prompt);
      const done = await waitForStatus(api.getTaskSource(), task.id, ['cancelled', 'succeeded', 'failed']);
      const figures = `${done.status}, ${done.outputTokens} tokens; first text ${report.cancelledAt - task.createdAt} ms after create, ended ${done.updatedAt - report.cancelledAt} ms after the cancel`;
      console.log(`[lm-cancel] attempt ${attempt}: ${figures}`);
      if (done.status === 'cancelled') return;
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      assert.ok(done.outputTokens > reserve, `a budget over the reserve (${reserve}) is honoured up to the room (${figures})`);
      const after = done.updatedAt - report.cancelledAt;
      assert.ok(after < 1000, `attempt ${attempt}: the task went on to succeed after the consumer cancelled (${figures})`);
    }
    assert.fail('four tasks in a row finished before their consumer cancelled after the first text');
  });
});
