// A page object for the code-server workbench and our Tasks view. Selectors are the workbench's own DOM
// (activity bar, quick input, tree rows by aria-label, webview frames).
import { join } from 'node:path';
import type { Frame, Locator, Page } from 'playwright-core';

export const CONTAINER_TITLE = 'Task Runtime';

export class Workbench {
  constructor(
    readonly page: Page,
    private readonly artifactsDir: string,
  ) {}

  async open(url: string): Promise<void> {
    await this.page.goto(url);
    await this.page.locator('.monaco-workbench').waitFor({ timeout: 90_000 });
    await this.page.locator('.activitybar').waitFor({ timeout: 90_000 });
  }

  async screenshot(name: string): Promise<string> {
    const path = join(this.artifactsDir, `${name}.png`);
    await this.page.screenshot({ path });
    return path;
  }

  /** Our view container in the activity bar. */
  containerButton(): Locator {
    return this.page.locator(`.activitybar [aria-label^="${CONTAINER_TITLE}"]`).first();
  }

  /** The side bar's title while our container is shown. */
  containerTitle(): Locator {
    return this.page.locator('.sidebar .composite.title').filter({ hasText: new RegExp(CONTAINER_TITLE, 'i') });
  }

  async openContainer(): Promise<void> {
    const button = this.containerButton();
    await button.waitFor({ timeout: 90_000 });
    if (!(await this.containerTitle().isVisible())) await button.click();
    await this.containerTitle().waitFor({ timeout: 30_000 });
    await this.tasksView().waitFor({ timeout: 30_000 });
  }

  /** The Tasks view's body (a tree, or the welcome content while there are no tasks). */
  tasksView(): Locator {
    return this.page.locator('.sidebar .pane-body').first();
  }

  /** A tree row whose accessible label starts with the text (task rows: "<title>, <status>"). */
  row(labelStart: string): Locator {
    return this.page.locator(`.sidebar .monaco-list-row[aria-label^="${labelStart.replace(/"/g, '\\"')}"]`);
  }

  /** A group row ("Succeeded", "Cancelled", ...); expands it when collapsed. */
  async expandGroup(label: string): Promise<Locator> {
    const group = this.page
      .locator('.sidebar .monaco-list-row')
      .filter({ has: this.page.locator('.label-name', { hasText: new RegExp(`^${label}$`) }) })
      .first();
    await group.waitFor({ timeout: 60_000 });
    if ((await group.getAttribute('aria-expanded')) === 'false') await group.click();
    return group;
  }

  /**
   * The input of the quick input that is open now. A closing quick input stays in the DOM for its close animation,
   * marked `inert`; a locator without `:not([inert])` can resolve to it, and then waits for it until it disappears
   * (seen in CI: the palette's input resolved while the previous quick pick was still closing).
   */
  quickInput(): Locator {
    return this.page.locator('.quick-input-widget:not([inert]) input:visible');
  }

  /**
   * Runs a command from the palette. The palette's key can be lost (keyboard focus in a webview frame, a quick pick
   * still closing), so each try waits a bounded time for an open, editable palette, and a try that gets none
   * presses Escape and opens it again.
   */
  async runCommand(title: string, tries = 4): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      await this.page
        .locator('.quick-input-widget[inert]')
        .waitFor({ state: 'detached', timeout: 5_000 })
        .catch(() => {});
      await this.page.keyboard.press('Control+Shift+P');
      const input = this.quickInput();
      try {
        await input.waitFor({ timeout: 10_000 });
        await input.fill(`>${title}`, { timeout: 10_000 });
        break;
      } catch (e) {
        if (attempt >= tries) throw e;
        await this.page.keyboard.press('Escape');
      }
    }
    const row = this.page.locator('.quick-input-list .monaco-list-row').filter({ hasText: title }).first();
    await row.waitFor({ timeout: 30_000 });
    await row.click();
  }

  /** Switches the colour theme through the palette (Preferences: Color Theme), e.g. "Light Modern". */
  async setColorTheme(label: string): Promise<void> {
    await this.runCommand('Preferences: Color Theme');
    const input = this.quickInput();
    await input.waitFor({ timeout: 30_000 });
    await input.fill(label);
    await this.page
      .locator('.quick-input-list .monaco-list-row')
      .filter({ hasText: new RegExp(`^${label}`) })
      .first()
      .waitFor({ timeout: 30_000 });
    await input.press('Enter');
    await this.page
      .locator('.quick-input-widget:not([inert])')
      .waitFor({ state: 'hidden', timeout: 30_000 })
      .catch(() => {});
  }

  /** Types into an open input box (showInputBox) and accepts it. */
  async answerInput(text: string): Promise<void> {
    const input = this.quickInput();
    await input.waitFor({ timeout: 30_000 });
    await input.fill(text);
    await input.press('Enter');
  }

  /**
   * The frame holding a webview whose content shows the text, once its content loaded; with `selector`, only a
   * frame that has such an element (the events panel: `#task-title`; the overview: `#endpoints`), since the overview
   * lists running tasks' titles too.
   */
  async webviewFrame(contains: string, timeoutMs = 60_000, selector?: string): Promise<Frame> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      for (const f of this.page.frames()) {
        try {
          if (f.url().includes('fake.html') || f.name() === 'active-frame' || f.url().includes('index.html')) {
            if (selector && !(await f.locator(selector).count())) continue;
            const text = await f.locator('body').innerText({ timeout: 1000 });
            if (text.includes(contains)) return f;
          }
        } catch {
          // frame detached or not ready
        }
      }
      await this.page.waitForTimeout(250);
    }
    throw new Error(`no webview frame showing "${contains}"`);
  }

  /** Text of the active text editor (Monaco renders lines as .view-line). */
  async activeEditorText(): Promise<string> {
    const lines = this.page.locator('.editor-instance .monaco-editor .view-lines .view-line');
    return (await lines.allInnerTexts()).join('\n');
  }

  /** Accepts the default item of each following quick pick (model, restart policy) until none is open. */
  async acceptQuickPicksUntilClosed(maxSteps = 5): Promise<void> {
    const widget = this.page.locator('.quick-input-widget');
    for (let i = 0; i < maxSteps; i++) {
      try {
        await widget.waitFor({ state: 'visible', timeout: 3000 });
      } catch {
        return;
      }
      // Click the highlighted (default) item rather than pressing Enter: keyboard focus can still sit in a webview
      // from an earlier step, and then Enter never reaches the quick input.
      const row = this.page.locator('.quick-input-list .monaco-list-row.focused, .quick-input-list .monaco-list-row').first();
      try {
        await row.waitFor({ timeout: 10_000 });
        await row.click({ timeout: 5_000 });
      } catch {
        await this.page.keyboard.press('Enter');
      }
      await this.page.waitForTimeout(300);
    }
    if (await widget.isVisible()) throw new Error('a quick input is still open after accepting its defaults');
  }

  async pickQuickItem(text: string): Promise<void> {
    // The quick pick's list draws only the rows in view: with more tasks than fit (the cancel test can make a dozen),
    // an older task is not in the page until the filter brings it up, so the text is typed into the filter first.
    const input = this.quickInput();
    await input.waitFor({ timeout: 30_000 });
    await input.fill(text);
    const row = this.page.locator('.quick-input-list .monaco-list-row').filter({ hasText: text }).first();
    await row.waitFor({ timeout: 30_000 });
    await row.click();
  }

  /**
   * Follows a task row through the tree until its status is `final`, expanding the group it lands in. Returns the
   * distinct statuses seen in order (fast tasks may skip ones the tree never rendered).
   */
  async watchRowStatuses(title: string, final: string, timeoutMs: number): Promise<string[]> {
    const seen: string[] = [];
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const group = this.page
        .locator('.sidebar .monaco-list-row[aria-expanded="false"]')
        .filter({ has: this.page.locator('.label-name', { hasText: new RegExp(`^${final}$`) }) });
      if (await group.count())
        await group
          .first()
          .click()
          .catch(() => {});
      for (const label of await this.row(`${title}, `).evaluateAll((els) => els.map((e) => e.getAttribute('aria-label') ?? ''))) {
        const status = label
          .slice(title.length + 2)
          .split(',')[0]!
          .trim();
        if (status && seen.at(-1) !== status) seen.push(status);
      }
      if (seen.at(-1) === final) return seen;
      await this.page.waitForTimeout(150);
    }
    throw new Error(`task "${title}" did not reach ${final} (seen: ${seen.join(' → ') || 'nothing'})`);
  }
}
