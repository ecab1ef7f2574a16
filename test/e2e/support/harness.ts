// What scripts/editor-harness/runE2E.mjs hands the UI tests: the code-server it runs (with the packaged .vsix
// installed) and the browser. The tests only run under that runner.
import type { Page } from 'playwright-core';

export interface EditorHarness {
  readonly artifactsDir: string;
  readonly url: string;
  /** Starts code-server again on the same port and profile (after stopEditor). */
  startEditor(): Promise<string>;
  stopEditor(): Promise<void>;
  /** The workbench URL with the test workspace folder open. */
  workbenchUrl(): string;
  newPage(): Promise<Page>;
}

export function editorHarness(): EditorHarness {
  const h = (globalThis as { taskRuntimeEditorHarness?: EditorHarness }).taskRuntimeEditorHarness;
  if (!h) throw new Error('the UI suite runs under scripts/editor-harness/runE2E.mjs (npm run test:editor)');
  return h;
}
