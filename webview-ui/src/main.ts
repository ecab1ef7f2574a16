// The events panel app. Renders the task's status timeline, streaming text, usage and problem details; task
// output only ever goes through textContent. Talks to the host through the typed protocol.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-icon/index.js';
import '@vscode-elements/elements/dist/vscode-progress-ring/index.js';
import '@vscode-elements/elements/dist/vscode-collapsible/index.js';
import '@vscode-elements/elements/dist/vscode-divider/index.js';
import { CANCELLABLE_STATUSES, TERMINAL_STATUSES } from '../../src/runtime/task';
import { barChart } from './chart';
import { applyEvents, applySnapshot, initialState, mergeTask } from '../../src/extension/webview/eventLog';
import { attemptMetrics, formatMs, formatRate, speedSeries, type AttemptMetrics } from './metrics';
import {
  PROTOCOL_VERSION,
  WEBVIEW_STRINGS,
  isPanelState,
  type ActionMessage,
  type HostMessage,
  type InputView,
  type PanelState,
  type TaskViewStatus,
  type WebviewMessage,
  type WebviewStringKey,
} from '../../src/extension/webview/protocol';

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
// Speed: the key figures in a row, the tokens/s chart under them.
const speedSection = el('section', { id: 'speed', class: 'speed', 'aria-label': s('speed') });
const statRow = el('div', { id: 'stats', class: 'stats' });
const chartBox = el('div', { id: 'speed-chart', class: 'chart-box' });
const speedNote = el('p', { id: 'speed-note', class: 'note' });
speedSection.append(statRow, chartBox, speedNote);
const itemsSection = el('section', { id: 'output-items', class: 'items' });
const inputBox = el('vscode-collapsible', { id: 'input', title: s('input') });
const inputBody = el('div', { class: 'input-body' });
inputBox.append(inputBody);
const hardwareSection = el('section', { id: 'hardware', class: 'usage' });
const hardwareHeading = el('h2', {}, s('hardware'));
const hardwareList = el('dl', { id: 'hardware-list' });
hardwareSection.append(hardwareHeading, hardwareList);
const usageSection = el('section', { id: 'usage', class: 'usage' });
const usageHeading = el('h2', {}, s('usage'));
const usageList = el('dl', { id: 'usage-list' });
usageSection.append(usageHeading, usageList);
const timelineBox = el('vscode-collapsible', { id: 'timeline', title: s('timeline'), open: '' });
const timelineList = el('ol', { id: 'timeline-list', class: 'timeline' });
timelineBox.append(timelineList);
const facts = el('div', { class: 'facts' });
facts.append(hardwareSection, usageSection);
app.append(header, meta, actions, notice, speedSection, problemBox, outputSection, itemsSection, inputBox, facts, timelineBox);

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

const fmt = (key: WebviewStringKey, ...args: Array<string | number>): string =>
  s(key).replace(/\{(\d+)\}/g, (m, i: string) => (args[Number(i)] !== undefined ? String(args[Number(i)]) : m));
const num = (n: number): string => n.toLocaleString(document.documentElement.lang || undefined);
const clock = (ms: number): string => new Date(ms).toLocaleString(document.documentElement.lang || undefined);

function stat(id: string, label: string, value: string, title?: string): HTMLElement {
  const box = el('div', { class: 'stat', id: `stat-${id}`, ...(title ? { title } : {}) });
  box.append(el('span', { class: 'stat-value' }, value), el('span', { class: 'stat-label' }, label));
  return box;
}

/** A long text: the first lines, with a Show all toggle. */
function longText(text: string, cls: string): HTMLElement {
  const wrap = el('div', { class: 'long' });
  const pre = el('pre', { class: cls, tabindex: '0' }, text);
  wrap.append(pre);
  if (text.length > 600 || text.split('\n').length > 12) {
    pre.classList.add('clamped');
    const toggle = el('vscode-button', { secondary: '', class: 'toggle' }, s('showMore'));
    toggle.addEventListener('click', () => {
      const open = pre.classList.toggle('clamped');
      toggle.textContent = open ? s('showMore') : s('showLess');
    });
    wrap.append(toggle);
  }
  return wrap;
}

function itemCard(icon: string, heading: string, sub: string, body: string, cls = 'json'): HTMLElement {
  const card = el('div', { class: 'item-card' });
  const head = el('div', { class: 'item-head' });
  head.append(el('vscode-icon', { name: icon }), el('span', { class: 'item-title' }, heading));
  if (sub) head.append(el('span', { class: 'item-sub' }, sub));
  card.append(head, longText(body, cls));
  return card;
}

let inputShown: string | undefined;
function renderInput(input: InputView | undefined): void {
  show(inputBox, !!input);
  // A task's request never changes: build it once (keeps Show all toggles and the open state across renders).
  const key = input ? `${state.task?.id ?? ''}:${input.items.length}:${input.options.length}:${input.tools.length}` : undefined;
  if (key === inputShown) return;
  inputShown = key;
  inputBody.replaceChildren();
  if (!input) return;
  const size = (input.instructions?.length ?? 0) + input.items.reduce((n, i) => n + (i.kind === 'message' ? i.text.length : 200), 0);
  if (size < 600 && !input.tools.length) inputBox.setAttribute('open', '');
  if (input.instructions) {
    inputBody.append(el('h3', {}, s('instructions')), longText(input.instructions, 'text-block'));
  }
  for (const item of input.items) {
    if (item.kind === 'message') inputBody.append(itemCard('comment', item.role, '', item.text, 'text-block'));
    else if (item.kind === 'function_call')
      inputBody.append(itemCard('symbol-method', `${s('toolCall')}: ${item.name}`, item.callId, item.arguments));
    else inputBody.append(itemCard('output', s('toolOutput'), item.callId, item.output));
  }
  if (input.options.length || input.toolChoice) {
    inputBody.append(el('h3', {}, s('options')));
    const dl = el('dl', { class: 'options' });
    for (const [k, v] of input.options) {
      dl.append(el('dt', {}, k));
      const dd = el('dd');
      if (v.includes('\n')) dd.append(longText(v, 'json'));
      else dd.textContent = v;
      dl.append(dd);
    }
    if (input.toolChoice) dl.append(el('dt', {}, 'tool_choice'), el('dd', {}, input.toolChoice));
    inputBody.append(dl);
  }
  if (input.tools.length) {
    inputBody.append(el('h3', {}, s('tools')));
    for (const t of input.tools) inputBody.append(itemCard('tools', t.name, t.description, t.parameters || '{}'));
  }
}

/** The attempt each timeline entry belongs to: a retry or resume entry starts the next one. */
function timelineAttempts(): number[] {
  let i = 0;
  return state.timeline.map((t, n) => {
    if (n > 0 && (t.kind === 'retry' || t.kind === 'resume')) i++;
    return i;
  });
}

function entryDuration(kind: string, m: AttemptMetrics | undefined): string | undefined {
  if (!m) return undefined;
  switch (kind) {
    case 'queued':
      return m.queuedMs !== undefined ? fmt('queuedFor', formatMs(m.queuedMs)) : undefined;
    case 'loading':
      return m.loadingMs !== undefined ? fmt('loadingTook', formatMs(m.loadingMs)) : undefined;
    case 'running':
      return m.runningMs !== undefined ? fmt(m.active ? 'runningFor' : 'ranFor', formatMs(m.runningMs)) : undefined;
    case 'first_token':
      return m.firstTokenMs !== undefined ? fmt('firstTokenAfter', formatMs(m.firstTokenMs)) : undefined;
    default:
      return undefined;
  }
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
    problemText.textContent = 'title' in problem ? `${problem.title} (${problem.code})\n${problem.detail}` : `${problem.code}\n${problem.message}`;
  }

  const now = Date.now();
  const attempts = state.attempts ?? [];
  const active = ACTIVE.has(status) && !deleted;
  const metrics = attempts.map((a, i) => attemptMetrics(a, now, active && i === attempts.length - 1, task?.outputTokens));
  const lastM = metrics[metrics.length - 1];
  const lastA = attempts[attempts.length - 1];
  statRow.replaceChildren();
  chartBox.replaceChildren();
  if (lastM && lastA) {
    const speed = lastM.active ? lastM.liveTps : lastM.generationTps;
    statRow.append(
      stat('speed', s('generation'), speed !== undefined ? fmt('tokensPerSecond', formatRate(speed)) : s('noSpeedYet')),
      stat('tokens', s('outputTokens'), num(lastM.tokens)),
    );
    if (lastM.firstTokenMs !== undefined) statRow.append(stat('ttft', s('timeToFirstToken'), formatMs(lastM.firstTokenMs)));
    if (lastM.promptTps !== undefined) {
      statRow.append(
        stat(
          'prompt',
          s('promptProcessing'),
          fmt('tokensPerSecond', formatRate(lastM.promptTps)),
          lastM.inputTokens !== undefined ? `${num(lastM.inputTokens)} ${s('inputTokens').toLowerCase()}` : undefined,
        ),
      );
    }
    if (lastM.totalMs !== undefined) statRow.append(stat('total', lastM.active ? s('elapsed') : s('took'), formatMs(lastM.totalMs)));
    const series = speedSeries(lastA, now, lastM.active, task?.outputTokens);
    if (series.length > 1) {
      const values = series.map(([, v]) => v);
      const peak = Math.max(...values);
      const endS = lastM.active ? (now - (lastA.firstTokenAt ?? now)) / 1000 : ((lastA.lastTokenAt ?? 0) - (lastA.firstTokenAt ?? 0)) / 1000;
      const avg = lastM.generationTps ?? 0;
      chartBox.append(
        barChart(values, {
          label: `${s('speedChart')}: ${fmt('tokensPerSecond', formatRate(peak))} peak, ${fmt('tokensPerSecond', formatRate(avg))} average`,
          xStart: '0',
          xEnd: formatMs(endS * 1000),
          yFormat: (v) => fmt('tokensPerSecond', formatRate(v)),
        }),
      );
    }
    speedNote.textContent = lastM.exact ? '' : fmt('estimated', lastM.charsPerToken.toFixed(1));
  }
  speedSection.dataset['active'] = String(!!lastM?.active);
  show(speedSection, !!lastM && (lastM.tokens > 0 || lastM.active));
  show(speedNote, !!speedNote.textContent && chartBox.childElementCount > 0);

  itemsSection.replaceChildren();
  for (const item of state.outputItems ?? []) {
    if (item.kind === 'reasoning') itemsSection.append(itemCard('lightbulb', s('reasoning'), '', item.text, 'text-block'));
    else itemsSection.append(itemCard('symbol-method', `${s('toolCall')}: ${item.name ?? ''}`, item.callId ?? '', prettyArgs(item.text)));
  }
  show(itemsSection, itemsSection.childElementCount > 0);
  renderInput(task?.input);

  const model = state.model;
  hardwareList.replaceChildren();
  const hw: Array<[string, string]> = [];
  if (model) {
    if (model.compute === 'remote') hw.push([s('engine'), model.engine ?? '']);
    else if (model.compute)
      hw.push([
        s('compute'),
        model.compute === 'cpu' ? 'CPU' : `${model.compute.toUpperCase()}${model.devices.length ? ` · ${model.devices.join(', ')}` : ''}`,
      ]);
    if (model.gpuLayers !== null) hw.push([s('gpuLayers'), `${model.gpuLayers} / ${model.totalLayers ?? '?'}`]);
    if (model.threads !== null) hw.push([s('threads'), String(model.threads)]);
    if (model.contextLength) hw.push([s('contextSize'), `${num(model.contextLength)} tokens`]);
  }
  const cached = state.usage?.cached_tokens;
  if (cached !== undefined) hw.push([s('cachedTokens'), num(cached)]);
  const spec = state.usage?.speculative;
  if (spec) hw.push([s('draftsAccepted'), `${num(spec.accepted)} / ${num(spec.drafted)}`]);
  for (const [label, value] of hw) hardwareList.append(el('dt', {}, label), el('dd', {}, value));
  if (model?.summary) hardwareSection.title = model.summary;
  show(hardwareSection, hw.length > 0);

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

  const owners = timelineAttempts();
  timelineList.replaceChildren(
    ...state.timeline.map((entry, i) => {
      const li = el('li', { 'data-kind': entry.kind, 'data-seq': String(entry.seq) });
      li.append(
        el('vscode-icon', { name: entry.kind === 'first_token' ? 'zap' : iconOf(entry.kind) }),
        el('span', { class: 'kind' }, kindLabel(entry.kind)),
      );
      if (entry.detail) li.append(el('span', { class: 'detail' }, ` — ${entry.detail}`));
      const duration = entryDuration(entry.kind, metrics[owners[i] ?? 0]);
      if (duration) li.append(el('span', { class: 'duration' }, duration));
      if (entry.at !== undefined) {
        li.title = clock(entry.at);
        li.append(
          el(
            'time',
            { class: 'at', datetime: new Date(entry.at).toISOString() },
            new Date(entry.at).toLocaleTimeString(document.documentElement.lang || undefined),
          ),
        );
      }
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
    case 'model':
      state = { ...state, model: message.model };
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

function prettyArgs(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text; // still streaming, or not JSON
  }
}

// While the task is active, durations and the live speed move with the clock: one render a second.
setInterval(() => {
  if (state.task && ACTIVE.has(state.task.status) && !deleted && !document.hidden) scheduleRender();
}, 1000);

render();
// Handshake: the host posts nothing before this; lastSeq >= 0 resumes a restored panel.
vscode.postMessage({ type: 'ready', version: PROTOCOL_VERSION, lastSeq: state.lastSeq });
