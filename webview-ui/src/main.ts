// The events panel app. Renders the task's status timeline, streaming text, usage and problem details; task
// output only ever goes through textContent. Talks to the host through the typed protocol.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-icon/index.js';
import '@vscode-elements/elements/dist/vscode-progress-ring/index.js';
import '@vscode-elements/elements/dist/vscode-collapsible/index.js';
import '@vscode-elements/elements/dist/vscode-divider/index.js';
import { CANCELLABLE_STATUSES, TERMINAL_STATUSES } from '../../src/runtime/task';
import { applyEvents, applySnapshot, initialState, mergeTask } from './eventLog';
import {
  PROTOCOL_VERSION,
  WEBVIEW_STRINGS,
  isPanelState,
  type ActionMessage,
  type HostMessage,
  type PanelState,
  type TaskViewStatus,
  type WebviewMessage,
  type WebviewStringKey,
} from './protocol';

interface VsCodeApi {
  postMessage(message: WebviewMessage): void;
  getState(): unknown;
  setState(state: PanelState): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const body = document.body;
const taskId = body.dataset['taskId'] ?? '';
let strings: Record<string, string> = {};
try {
  strings = JSON.parse(body.dataset['l10n'] ?? '{}') as Record<string, string>;
} catch {
  strings = {};
}
const s = (key: WebviewStringKey): string => strings[key] ?? WEBVIEW_STRINGS[key];

const saved = vscode.getState();
let state: PanelState = isPanelState(saved) && saved.taskId === taskId ? saved : initialState(taskId);
let deleted = false;
let resyncing = false;

function el(tag: string, attrs: Record<string, string> = {}, text?: string): HTMLElement {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Static skeleton; render() only updates text and visibility.
const app = document.getElementById('app')!;
const header = el('header', { class: 'header' });
const statusIcon = el('vscode-icon', { id: 'status-icon', name: 'circle-outline' });
const title = el('h1', { id: 'task-title' });
const statusBadge = el('vscode-badge', { id: 'status-badge' });
header.append(statusIcon, title, statusBadge);
const meta = el('p', { id: 'task-meta', class: 'meta' });
const actions = el('div', { class: 'actions', role: 'toolbar' });
const buttons: Record<ActionMessage['action'], HTMLElement> = {
  cancel: el('vscode-button', { id: 'action-cancel', secondary: '', icon: 'stop-circle' }, s('cancel')),
  copyText: el('vscode-button', { id: 'action-copy-text', secondary: '', icon: 'copy' }, s('copyText')),
  copyId: el('vscode-button', { id: 'action-copy-id', secondary: '', icon: 'symbol-key' }, s('copyId')),
  openResult: el('vscode-button', { id: 'action-open-result', icon: 'go-to-file' }, s('openResult')),
  retry: el('vscode-button', { id: 'action-retry', secondary: '', icon: 'refresh' }, s('retry')),
};
for (const [action, button] of Object.entries(buttons)) {
  button.addEventListener('click', () => vscode.postMessage({ type: 'action', action: action as ActionMessage['action'] }));
  actions.append(button);
}
const notice = el('p', { id: 'notice', class: 'notice', role: 'status' });
const problemBox = el('section', { id: 'problem', class: 'problem', role: 'alert' });
const problemTitle = el('h2', {}, s('problem'));
const problemText = el('pre', { id: 'problem-text' });
problemBox.append(problemTitle, problemText);
const outputSection = el('section', { class: 'output' });
const outputHeading = el('h2', {}, s('output'));
const spinner = el('vscode-progress-ring', { id: 'output-progress', class: 'spinner' });
const outputText = el('pre', { id: 'output-text', class: 'output-text', tabindex: '0' });
outputSection.append(outputHeading, spinner, outputText);
const usageSection = el('section', { id: 'usage', class: 'usage' });
const usageHeading = el('h2', {}, s('usage'));
const usageList = el('dl', { id: 'usage-list' });
usageSection.append(usageHeading, usageList);
const timelineBox = el('vscode-collapsible', { id: 'timeline', title: s('timeline'), open: '' });
const timelineList = el('ol', { id: 'timeline-list', class: 'timeline' });
timelineBox.append(timelineList);
app.append(header, meta, actions, notice, problemBox, outputSection, usageSection, timelineBox);

const STATUS_ICONS: Record<TaskViewStatus, string> = {
  queued: 'clock',
  loading: 'loading',
  running: 'loading',
  input_required: 'question',
  cancelling: 'sync',
  succeeded: 'pass',
  failed: 'error',
  cancelled: 'circle-slash',
};
/** A status or timeline kind's icon; kinds that are not statuses (created, retry, …) get a dot. */
function iconOf(kind: string): string {
  return Object.hasOwn(STATUS_ICONS, kind) ? STATUS_ICONS[kind as TaskViewStatus] : 'circle-small';
}
// The status sets come from the runtime's own lists (a leaf module with no imports, bundled in).
const ACTIVE: ReadonlySet<string> = new Set(CANCELLABLE_STATUSES);
const FINISHED: ReadonlySet<string> = new Set(TERMINAL_STATUSES);

function kindLabel(kind: string): string {
  const key = `kind.${kind}` as WebviewStringKey;
  return key in WEBVIEW_STRINGS ? s(key) : kind;
}

function show(node: HTMLElement, visible: boolean): void {
  node.hidden = !visible;
}

function render(): void {
  const task = state.task;
  const status = task?.status ?? 'queued';
  title.textContent = task?.title || taskId;
  statusBadge.textContent = kindLabel(status);
  statusIcon.setAttribute('name', STATUS_ICONS[status] ?? 'circle-outline');
  if (status === 'running' || status === 'loading' || status === 'cancelling') statusIcon.setAttribute('spin', '');
  else statusIcon.removeAttribute('spin');
  body.dataset['status'] = status;
  const metaParts: string[] = [];
  if (task) {
    metaParts.push(`${s('origin')}: ${task.origin}`);
    if (task.model) metaParts.push(`${s('model')}: ${task.model}`);
    if (task.attempt > 1) metaParts.push(`${s('attempt')}: ${task.attempt}`);
    if (task.statusMessage) metaParts.push(task.statusMessage);
  }
  meta.textContent = metaParts.join(' · ');
  show(buttons.cancel, !deleted && ACTIVE.has(status));
  show(buttons.openResult, !deleted && FINISHED.has(status));
  show(buttons.retry, !deleted && (status === 'failed' || status === 'cancelled'));
  show(buttons.copyText, state.text.length > 0);

  outputText.textContent = state.text || (FINISHED.has(status) ? '' : s('waiting'));
  outputText.classList.toggle('placeholder', !state.text);
  show(spinner, !deleted && ACTIVE.has(status));

  const problem = state.problem ?? task?.error ?? null;
  show(problemBox, !!problem);
  if (problem) {
    problemText.textContent =
      'title' in problem
        ? `${problem.title} (${problem.code})\n${problem.detail}`
        : `${problem.code}\n${problem.message}`;
  }

  const usage = state.usage ?? task?.usage ?? null;
  usageList.replaceChildren();
  const rows: Array<[string, number]> = usage
    ? [
        [s('inputTokens'), usage.input_tokens],
        [s('outputTokens'), usage.output_tokens],
        [s('totalTokens'), usage.total_tokens],
      ]
    : task && task.outputTokens > 0
      ? [[s('outputTokens'), task.outputTokens]]
      : [];
  for (const [label, value] of rows) usageList.append(el('dt', {}, label), el('dd', {}, String(value)));
  show(usageSection, rows.length > 0);

  timelineList.replaceChildren(
    ...state.timeline.map((entry) => {
      const li = el('li', { 'data-kind': entry.kind, 'data-seq': String(entry.seq) });
      li.append(el('vscode-icon', { name: iconOf(entry.kind) }), el('span', {}, kindLabel(entry.kind)));
      if (entry.detail) li.append(el('span', { class: 'detail' }, ` — ${entry.detail}`));
      return li;
    }),
  );
  if (deleted) notice.textContent = s('deleted');
  show(notice, !!notice.textContent);
}

let renderQueued = false;
function scheduleRender(): void {
  vscode.setState(state);
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 20;
    render();
    if (atBottom && state.task && ACTIVE.has(state.task.status)) window.scrollTo(0, document.body.scrollHeight);
  });
}

window.addEventListener('message', (event: MessageEvent<HostMessage>) => {
  const message = event.data;
  if (!message || typeof message !== 'object') return;
  switch (message.type) {
    case 'snapshot':
      resyncing = false;
      deleted = false;
      notice.textContent = message.truncated ? s('historyExpired') : '';
      state = applySnapshot(taskId, message);
      break;
    case 'events': {
      if (resyncing) return;
      const r = applyEvents(state, message.events);
      state = r.state;
      if (r.gap) {
        resyncing = true;
        vscode.postMessage({ type: 'resync', reason: 'gap' });
      }
      break;
    }
    case 'task':
      state = mergeTask(state, message.task);
      break;
    case 'deleted':
      deleted = true;
      break;
    case 'notice':
      notice.textContent = message.message;
      break;
  }
  scheduleRender();
});

render();
// Handshake: the host posts nothing before this; lastSeq >= 0 resumes a restored panel.
vscode.postMessage({ type: 'ready', version: PROTOCOL_VERSION, lastSeq: state.lastSeq });
