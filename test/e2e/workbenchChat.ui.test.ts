// Our model in the editor's own Chat view (issue #21): with `chat.allowAnonymousAccess` (set by runE2E.mjs; nobody is
// signed in), the Chat view's model picker lists the task-runtime models (the provider resolves them itself once the
// runtime is up, which the picker needs), one can be picked, and a message sent from the Chat view streams our
// model's reply there and is a task in our tree. A request from another extension through vscode.lm is
// test/integration/languageModels.test.ts.
// Screenshots of each step go to the artifacts dir. Selectors for the chat widget are VS Code 1.139's.
import * as assert from 'node:assert/strict';
import type { Locator, Page } from 'playwright-core';
import { editorHarness, type EditorHarness } from './support/harness';
import { Workbench } from './support/workbench';

describe('our model in the Chat view (UI)', function () {
  let harness: EditorHarness;
  let page: Page;
  let wb: Workbench;

  before(async () => {
    harness = editorHarness();
    page = await harness.newPage();
    wb = new Workbench(page, harness.artifactsDir);
    await wb.open(harness.workbenchUrl());
    // The runtime must be up for the provider to list models: the Tasks view shows it.
    await wb.openContainer();
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') {
      await wb.screenshot(`chat-failed-${this.currentTest.title.replace(/\W+/g, '-').slice(0, 60)}`).catch(() => {});
    }
  });

  after(async () => {
    await page?.close();
  });

  function chatInput(): Locator {
    return page.locator('.interactive-input-part .monaco-editor textarea, .chat-input-container .monaco-editor textarea').first();
  }

  it('picks a task-runtime model in the Chat view', async () => {
    await wb.runCommand('Chat: Open Chat');
    await chatInput().waitFor({ timeout: 60_000 });
    await wb.screenshot('chat-01-open');
    const picker = page
      .locator('.interactive-input-part [aria-label*="Model" i], .chat-input-toolbars [aria-label*="Model" i], .chat-modelPicker-item')
      .first();
    await picker.waitFor({ timeout: 60_000 });
    // The list fills once the provider resolved its models; open the picker until our model is in it.
    const ours = page
      .locator('.action-widget .monaco-list-row, .quick-input-list .monaco-list-row, .monaco-menu .action-item')
      .filter({ hasText: /demo/i })
      .first();
    for (let i = 0; i < 20; i++) {
      await picker.click();
      if (await ours.isVisible({ timeout: 3_000 }).catch(() => false)) break;
      await page.keyboard.press('Escape');
      await page.waitForTimeout(1_000);
    }
    await wb.screenshot('chat-02-picker');
    await ours.click();
    await assert.doesNotReject(() => picker.filter({ hasText: /demo/i }).waitFor({ timeout: 10_000 }), 'the picker shows our model');
    await wb.screenshot('chat-03-picked');
  });

  it('sends a message from the Chat view to our model: the reply shows there and the request is a task in our tree', async function () {
    this.timeout(300_000);
    // Typed into the input's editor (Monaco): focus it with a click on its lines, then real key presses.
    await page.locator('.interactive-input-part .monaco-editor .view-lines, .chat-input-container .monaco-editor .view-lines').first().click();
    const message = `Say hello to the chat view ${Date.now().toString(36)}`;
    await page.keyboard.type(message);
    await wb.screenshot('chat-04-typed');
    await page.keyboard.press('Enter');
    // The bundled Copilot Chat sends it to our provider (its system prompt and tools cut to fit the demo model's
    // context): a response item appears, shows progress ("Analyzing"), streams our text and completes (VS Code
    // drops the row's `chat-response-loading` class then).
    const response = page.locator('.interactive-item-container.interactive-response').last();
    await response.waitFor({ timeout: 120_000 });
    const complete = page.locator('.interactive-item-container.interactive-response:not(.chat-response-loading)').last();
    await complete.waitFor({ timeout: 180_000 });
    const text = await complete.locator('.rendered-markdown').first().innerText();
    await wb.screenshot('chat-05-reply');
    assert.ok(text.trim().length > 0, 'the reply streamed into the Chat view');
    assert.equal(await complete.locator('.chat-error, .interactive-response-error-details').count(), 0, `an error in the reply: ${text}`);
    // The request is an editor task titled with what was typed (Copilot's context blocks left out), in our tree.
    await wb.openContainer();
    const row = wb.row(`Chat: ${message}, `).first();
    if (!(await row.isVisible({ timeout: 5_000 }).catch(() => false))) await wb.expandGroup('Succeeded');
    await row.waitFor({ timeout: 60_000 });
    assert.match((await row.getAttribute('aria-label')) ?? '', /, Succeeded/);
    await wb.screenshot('chat-06-task-in-tree');
  });
});
