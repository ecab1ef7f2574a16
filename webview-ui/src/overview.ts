// The runtime overview view's app: models and where they run, the queue by status, a tokens/s chart across the
// running tasks, the endpoints with copy buttons. All text goes through textContent; copying is the host's commands.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-icon/index.js';
import '@vscode-elements/elements/dist/vscode-toolbar-button/index.js';
import { TASK_STATUSES } from '../../src/runtime/task';
import { barChart } from './chart';
import { formatRate } from './metrics';
import {
  OVERVIEW_PROTOCOL_VERSION,
  OVERVIEW_STRINGS,
  type OverviewAction,
  type OverviewHostMessage,
  type OverviewState,
  type OverviewStringKey,
  type OverviewWebviewMessage,
} from '../../src/extension/views/overviewProtocol';
import type { ModelView } from '../../src/extension/webview/protocol';

interface VsCodeApi {
  postMessage(message: OverviewWebviewMessage): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
let strings: Record<string, string> = {};
try {
  strings = JSON.parse(document.body.dataset['l10n'] ?? '{}') as Record<string, string>;
} catch {
  strings = {};
}
const s = (key: OverviewStringKey, ...args: Array<string | number>): string =>
  (strings[key] ?? OVERVIEW_STRINGS[key]).replace(/\{(\d+)\}/g, (m, i: string) => (args[Number(i)] !== undefined ? String(args[Number(i)]) : m));
const lang = document.documentElement.lang || undefined;

function el(tag: string, attrs: Record<string, string> = {}, text?: string): HTMLElement {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function section(id: string, heading: string): { box: HTMLElement; body: HTMLElement } {
  const box = el('section', { id, class: 'section' });
  const body = el('div', { class: 'section-body' });
  box.append(el('h2', {}, heading), body);
  return { box, body };
}

const post = (action: OverviewAction, taskId?: string) => vscode.postMessage({ type: 'action', action, ...(taskId ? { taskId } : {}) });

const app = document.getElementById('app')!;
const role = el('p', { id: 'role', class: 'muted' });
const models = section('models', s('models'));
const queue = section('queue', s('queue'));
const throughput = section('throughput', s('throughput'));
const endpoints = section('endpoints', s('endpoints'));
app.append(role, models.box, throughput.box, queue.box, endpoints.box);

function where(m: ModelView): string {
  if (m.compute === 'remote') return `${s('remote')} · ${m.engine ?? ''}`;
  if (!m.compute) return ''; // not loaded yet: the badge says so
  const parts = [
    m.compute === 'cpu' ? `CPU · ${m.threads ?? '?'} threads` : `${m.compute.toUpperCase()}${m.devices.length ? ` · ${m.devices.join(', ')}` : ''}`,
  ];
  if (m.gpuLayers !== null) parts.push(`${m.gpuLayers}/${m.totalLayers ?? '?'} layers`);
  return parts.join(' · ');
}

function renderModels(list: ModelView[]): void {
  models.body.replaceChildren();
  if (!list.length) {
    models.body.append(el('p', { class: 'muted' }, s('noModels')));
  }
  for (const m of list) {
    const row = el('div', { class: 'model', 'data-state': m.state, title: m.summary || m.id });
    const icon = m.compute === 'remote' ? 'remote' : m.compute && m.compute !== 'cpu' ? 'circuit-board' : 'server-process';
    const name = el('div', { class: 'model-name' });
    name.append(el('vscode-icon', { name: icon }), el('span', { class: 'model-id' }, m.id));
    const stateKey = `state.${m.state}` as OverviewStringKey;
    name.append(el('vscode-badge', { class: `state state-${m.state}` }, stateKey in OVERVIEW_STRINGS ? s(stateKey) : m.state));
    const detailText = [where(m), m.contextLength ? s('contextSize', m.contextLength.toLocaleString(lang)) : ''].filter(Boolean).join(' · ');
    row.append(name);
    if (detailText) row.append(el('div', { class: 'model-detail muted' }, detailText));
    models.body.append(row);
  }
  const actions = el('div', { class: 'row-actions' });
  const pick = el('vscode-button', { secondary: '', icon: 'symbol-misc', id: 'select-model' }, s('selectModel'));
  pick.addEventListener('click', () => post('selectModel'));
  actions.append(pick);
  models.body.append(actions);
}

function renderQueue(counts: OverviewState['counts'], next: OverviewState['next']): void {
  queue.body.replaceChildren();
  const grid = el('div', { class: 'counts' });
  for (const status of TASK_STATUSES) {
    const n = counts[status] ?? 0;
    const cell = el('div', { class: 'count', 'data-status': status, 'data-zero': String(n === 0) });
    cell.append(
      el('span', { class: 'count-value' }, n.toLocaleString(lang)),
      el('span', { class: 'count-label' }, s(`status.${status}` as OverviewStringKey)),
    );
    grid.append(cell);
  }
  queue.body.append(grid);
  if (!next.length) return;
  queue.body.append(el('h3', { class: 'subhead' }, s('nextInQueue')));
  const list = el('ol', { class: 'next', id: 'next-list', 'aria-label': s('nextInQueue') });
  for (const q of next) {
    const li = el('li', { value: String(q.position) });
    const link = el('a', { href: '#', class: 'task-link' }, q.title);
    link.addEventListener('click', (e) => {
      e.preventDefault();
      post('openTask', q.id);
    });
    const wait = q.waitMs === null ? '' : q.waitMs < 1000 ? s('startingSoon') : s('startsIn', Math.round(q.waitMs / 1000));
    li.append(link, el('span', { class: 'muted rate' }, wait));
    list.append(li);
  }
  queue.body.append(list);
}

function renderThroughput(st: OverviewState): void {
  throughput.body.replaceChildren();
  const head = el('div', { class: 'live' });
  head.append(el('span', { class: 'live-value', id: 'live-tps' }, s('tokensPerSecond', formatRate(st.liveTps))));
  throughput.body.append(head);
  const minutes = Math.round((st.series.length * st.bucketMs) / 60_000);
  const peak = Math.max(0, ...st.series);
  throughput.body.append(
    barChart(st.series, {
      label: `${s('throughputChart', minutes)}: peak ${s('tokensPerSecond', formatRate(peak))}`,
      xStart: s('minutesAgo', minutes),
      xEnd: s('now'),
      yFormat: (v) => s('tokensPerSecond', formatRate(v)),
    }),
  );
  const list = el('ul', { class: 'running', id: 'running-list', 'aria-label': s('running') });
  for (const r of st.running) {
    const li = el('li');
    const link = el('a', { href: '#', class: 'task-link' }, r.title);
    link.addEventListener('click', (e) => {
      e.preventDefault();
      post('openTask', r.id);
    });
    li.append(
      el('vscode-icon', { name: 'loading', spin: '' }),
      link,
      el('span', { class: 'muted rate' }, r.rate !== null ? s('tokensPerSecond', formatRate(r.rate)) : `${r.tokens} tok`),
    );
    list.append(li);
  }
  if (!st.running.length) throughput.body.append(el('p', { class: 'muted' }, s('nothingRunning')));
  else throughput.body.append(list);
}

function endpointRow(label: string, url: string, action: OverviewAction, id: string, title = `${s('copy')} ${label}`): HTMLElement {
  const row = el('div', { class: 'endpoint', id: `endpoint-${id}` });
  row.append(el('span', { class: 'endpoint-label' }, label));
  row.append(el('code', { class: 'endpoint-url', title: url }, url));
  const copy = el('vscode-toolbar-button', { icon: action === 'copyMcpConfig' ? 'json' : 'copy', label: title, title, id: `copy-${id}` });
  copy.addEventListener('click', () => post(action));
  row.append(copy);
  return row;
}

function renderEndpoints(st: OverviewState): void {
  endpoints.body.replaceChildren();
  if (!st.endpoints) {
    endpoints.body.append(el('p', { class: 'muted' }, s('notListening')));
    return;
  }
  endpoints.body.append(
    endpointRow(s('lmsp'), st.endpoints.lmsp, 'copyLmsp', 'lmsp'),
    endpointRow(s('openai'), st.endpoints.openai, 'copyOpenAi', 'openai'),
    endpointRow(s('mcp'), st.endpoints.mcp, 'copyMcpConfig', 'mcp', s('copyMcpConfig')),
  );
  const actions = el('div', { class: 'row-actions' });
  const log = el('vscode-button', { secondary: '', icon: 'output', id: 'show-log' }, s('showLog'));
  log.addEventListener('click', () => post('showLog'));
  actions.append(log);
  endpoints.body.append(actions);
}

function render(st: OverviewState): void {
  const roleKey = `role.${st.role}` as OverviewStringKey;
  role.textContent = roleKey in OVERVIEW_STRINGS ? s(roleKey) : '';
  role.hidden = !role.textContent;
  renderModels(st.models);
  renderThroughput(st);
  renderQueue(st.counts, st.next);
  renderEndpoints(st);
  document.body.dataset['ready'] = 'true';
}

window.addEventListener('message', (event: MessageEvent<OverviewHostMessage>) => {
  const m = event.data;
  if (m && typeof m === 'object' && m.type === 'state') render(m.state);
});

vscode.postMessage({ type: 'ready', version: OVERVIEW_PROTOCOL_VERSION });
