// The editor as an instrument (#24), looked at in code-server through Chromium: the events panel of a running task
// (live tokens/s, tokens so far, the speed chart), of the finished task (timeline durations, the chart kept, the same
// figures after the panel is reopened), the tree row's key figure, and the Runtime overview view (models, queue,
// throughput chart, endpoints), in the dark and the light theme. Screenshots go to the artifacts dir.
// Run alone: node scripts/editor-harness/runE2E.mjs --only instrument
import * as assert from 'node:assert/strict';
import type { Frame, Locator, Page } from 'playwright-core';
import { editorHarness, type EditorHarness } from './support/harness';
import { Workbench } from './support/workbench';

describe('Task Runtime as an instrument (UI)', function () {
  let harness: EditorHarness;
  let page: Page;
  let wb: Workbench;
  const stamp = Date.now().toString(36);
  let title = '';
  let panel: Frame;

  before(async () => {
    harness = editorHarness();
    page = await harness.newPage();
    wb = new Workbench(page, harness.artifactsDir);
    await wb.open(harness.workbenchUrl());
    await wb.openContainer();
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') {
      await wb.screenshot(`instrument-failed-${this.currentTest.title.replace(/\W+/g, '-').slice(0, 60)}`).catch(() => {});
    }
  });

  after(async () => {
    await page?.close();
  });

  /**
   * Clicks a task's row until its events panel shows (found by the whole prompt: the panels of earlier attempts stay
   * open, and their titles differ only in the number). A click that lands while the tree redraws the row opens
   * nothing, so up to 4 clicks; `gone` when the row left the list instead.
   */
  async function openPanelFromRow(row: Locator, prompt: string): Promise<{ frame?: Frame; gone: boolean }> {
    let frame: Frame | undefined;
    let gone = false;
    for (let click = 0; click < 4 && !frame && !gone; click++) {
      const clicked = await row.click({ timeout: 10_000 }).then(
        () => true,
        () => false,
      );
      if (!clicked) {
        gone = (await row.count()) === 0;
        continue;
      }
      frame = await wb.webviewFrame(prompt, 15_000, '#task-title').catch(() => undefined);
    }
    return { frame, gone };
  }

  it('shows a running task with live tokens/s, tokens so far and a growing chart', async function () {
    // Up to 8 attempts of up to a minute each, beyond the suite's 3-minute default.
    this.timeout(600_000);
    // A task may end before its panel shows it running (the suite's model runs each for its whole context, but a slow
    // machine may draw late): start tasks until the panel catches one still running.
    for (let attempt = 1; attempt <= 8 && !title; attempt++) {
      const prompt = `Describe the sea at length ${stamp} #${attempt}`;
      await wb.runCommand('Create Task');
      await wb.answerInput(prompt);
      await wb.acceptQuickPicksUntilClosed();
      const row = wb.row(`${prompt}, `).first();
      // A task that ends before the tree first draws it goes straight to its status group, collapsed: its row never
      // shows in the list, so a row not seen in 30 s (a running row shows within a second or two) starts the next one.
      const seen = await row.waitFor({ timeout: 30_000 }).then(
        () => true,
        () => false,
      );
      if (!seen) continue;
      // A task that ends first moves to its status group, collapsed, and its row leaves the list: start the next one.
      const { frame, gone } = await openPanelFromRow(row, prompt);
      if (!frame && gone) continue;
      if (!frame) throw new Error(`no events panel opened for "${prompt}" after 4 clicks on its row`);
      try {
        await frame.locator('body[data-status="running"] #speed[data-active="true"] #speed-chart svg rect').first().waitFor({ timeout: 20_000 });
      } catch {
        continue; // it finished (or never got going) before the panel showed it running
      }
      title = prompt;
      panel = frame;
    }
    assert.ok(title, 'a task was seen running in its events panel');
    assert.match(await panel.locator('#stat-speed .stat-value').innerText(), /tok\/s/);
    assert.match(await panel.locator('#stat-tokens .stat-value').innerText(), /^\d[\d,]*$/);
    // The tree row carries the running task's speed, like the Testing view's durations. Its description is redrawn
    // about once a second (tasksTreeProvider.ts), so it can lag the panel by a tick: wait for the speed there, unless
    // the task ends first.
    const row = wb.row(`${title}, Running`).first();
    const withSpeed = await row
      .locator('.label-description', { hasText: /tok\/s/ })
      .waitFor({ timeout: 30_000 })
      .then(
        () => true,
        () => false,
      );
    await wb.screenshot('i01-running-panel-dark');
    // Still running: the row's description carries its tokens/s.
    if (await row.count()) {
      const description = await row
        .locator('.label-description')
        .innerText()
        .catch(() => '');
      assert.ok(withSpeed, `row description: ${description}`);
    }
  });

  it('shows the overview with the model, the queue, the throughput chart and the endpoints', async () => {
    const overview = await wb.webviewFrame('', 60_000, '#endpoints');
    await overview.locator('body[data-ready="true"]').waitFor({ timeout: 30_000 });
    assert.ok(await overview.locator('#models .model').count(), 'a model is listed');
    assert.equal(await overview.locator('#queue .count').count(), 8, 'one count per status');
    assert.ok(await overview.locator('#throughput svg').count(), 'a throughput chart');
    for (const id of ['lmsp', 'openai', 'mcp']) {
      assert.match(await overview.locator(`#endpoint-${id} .endpoint-url`).innerText(), /^http:\/\/127\.0\.0\.1:\d+\//, id);
    }
    await wb.screenshot('i02-overview-dark');
  });

  it('keeps the timings and the speed chart on the finished task, also after the panel is reopened', async function () {
    // The suite's model runs each task to the end of its 1 024-token context: 94 s here under the suite's load.
    this.timeout(420_000);
    await panel.locator('body[data-status="succeeded"], body[data-status="cancelled"], body[data-status="failed"]').waitFor({ timeout: 360_000 });
    const final = await panel.locator('body').getAttribute('data-status');
    await panel.locator('#timeline-list li[data-kind="first_token"] .duration').waitFor({ timeout: 10_000 });
    const durations = await panel.locator('#timeline-list li .duration').allInnerTexts();
    assert.ok(
      durations.some((d) => /queued for/.test(d)),
      `durations: ${durations.join(' | ')}`,
    );
    assert.ok(
      durations.some((d) => /first token after/.test(d)),
      `durations: ${durations.join(' | ')}`,
    );
    assert.ok(
      durations.some((d) => /ran for/.test(d)),
      `durations: ${durations.join(' | ')}`,
    );
    assert.ok(await panel.locator('#timeline-list li[title]').count(), 'absolute times on hover');
    const figures = await panel.locator('#stats').innerText();
    const bars = await panel.locator('#speed-chart svg rect').count();
    assert.ok(bars > 0, 'the chart stays with the finished task');
    await panel
      .locator('#input')
      .click()
      .catch(() => {});
    await wb.screenshot('i03-finished-panel-dark');

    // Reopen: a new webview rebuilt from the stored events shows the same figures and chart.
    await wb.runCommand('View: Close Editor');
    await panel
      .locator('body')
      .waitFor({ state: 'detached', timeout: 30_000 })
      .catch(() => {});
    // Finished now: its row is in a group of its status, collapsed until opened.
    await wb.expandGroup(final === 'cancelled' ? 'Cancelled' : final === 'failed' ? 'Failed' : 'Succeeded');
    // Other tasks of the attempts above may still be moving between groups: the tree redraws under the click too.
    const { frame: reopened } = await openPanelFromRow(wb.row(`${title}, `).first(), title);
    if (!reopened) throw new Error(`no events panel reopened for "${title}" after 4 clicks on its row`);
    await reopened.locator('#speed-chart svg rect').first().waitFor({ timeout: 30_000 });
    assert.equal(await reopened.locator('#stats').innerText(), figures);
    assert.equal(await reopened.locator('#speed-chart svg rect').count(), bars);
    panel = reopened;
  });

  it('follows the light theme', async () => {
    await wb.setColorTheme('Light Modern');
    await page.locator('.monaco-workbench.vs').waitFor({ timeout: 30_000 });
    await panel.locator('body.vscode-light').waitFor({ timeout: 30_000 });
    await wb.screenshot('i04-finished-panel-light');
    const overview = await wb.webviewFrame('', 60_000, '#endpoints');
    await overview.locator('body.vscode-light').waitFor({ timeout: 30_000 });
    await wb.screenshot('i05-overview-light');
    await wb.setColorTheme('Dark Modern');
  });
});
