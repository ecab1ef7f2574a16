// Pure text for tree rows, tooltips and the status bar. Strings pass through a localize function (vscode.l10n.t
// in the editor, a plain {0}-formatter in tests) so this file stays free of vscode.
import { isTerminal, type TaskOrigin, type TaskStatus } from '../../runtime/task';
import type { TaskInfo } from './taskSource';

export type Localize = (message: string, ...args: Array<string | number | boolean>) => string;

export const plainLocalize: Localize = (message, ...args) =>
  message.replace(/\{(\d+)\}/g, (m, i: string) => (args[Number(i)] !== undefined ? String(args[Number(i)]) : m));

const TITLE_MAX = 60;

/** A one-line title: whitespace collapsed, cut at a word boundary with an ellipsis. */
export function taskTitle(task: Pick<TaskInfo, 'title' | 'id'>): string {
  const text = (task.title || '').replace(/\s+/g, ' ').trim();
  if (!text) return task.id;
  if (text.length <= TITLE_MAX) return text;
  const cut = text.slice(0, TITLE_MAX);
  const space = cut.lastIndexOf(' ');
  return (space > TITLE_MAX / 2 ? cut.slice(0, space) : cut) + '…';
}

/** 0s, 45s, 3m 5s, 2h 4m, 3d 1h */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  const d = Math.floor(h / 24);
  return `${d}d ${h % 24}h`;
}

export function originLabel(origin: TaskOrigin | undefined, t: Localize): string {
  switch (origin) {
    case 'mcp':
      return t('MCP');
    case 'lmsp':
      return t('LMSP');
    case 'editor':
      return t('editor');
    default:
      return t('unknown origin');
  }
}

export function statusLabel(status: TaskStatus, t: Localize): string {
  switch (status) {
    case 'queued':
      return t('Queued');
    case 'loading':
      return t('Loading model');
    case 'running':
      return t('Running');
    case 'input_required':
      return t('Needs input');
    case 'cancelling':
      return t('Cancelling');
    case 'succeeded':
      return t('Succeeded');
    case 'failed':
      return t('Failed');
    case 'cancelled':
      return t('Cancelled');
  }
}

/** Age for waiting tasks, elapsed time for active ones, run time for finished ones. */
export function taskTiming(task: Pick<TaskInfo, 'status' | 'createdAt' | 'updatedAt'>, now: number, t: Localize): string {
  if (isTerminal(task.status)) return t('took {0}', formatDuration(task.updatedAt - task.createdAt));
  if (task.status === 'queued') return t('waiting {0}', formatDuration(now - task.createdAt));
  return formatDuration(now - task.createdAt);
}

export function tokensLabel(task: Pick<TaskInfo, 'outputTokens' | 'usage'>, t: Localize): string | undefined {
  const n = task.usage?.output_tokens ?? task.outputTokens;
  return n > 0 ? t('{0} tok', n) : undefined;
}

/** 8.3 tok/s, 42 tok/s: one decimal below 10. */
export function rateLabel(tokensPerSecond: number, t: Localize): string {
  return t('{0} tok/s', tokensPerSecond < 10 ? tokensPerSecond.toFixed(1) : String(Math.round(tokensPerSecond)));
}

/** A queued task's place: "#3 in queue", with "starts in about 12s" once run times are known. */
export function queueLabel(task: Pick<TaskInfo, 'queue'>, now: number, t: Localize): string | undefined {
  const q = task.queue;
  if (!q) return undefined;
  const place = t('#{0} in queue', q.position);
  if (q.expectedStartAt === null) return place;
  const wait = q.expectedStartAt - now;
  return wait < 1000 ? t('{0}, starting soon', place) : t('{0}, starts in about {1}', place, formatDuration(wait));
}

/**
 * The tree row description: origin · model · timing · [queue place] · [speed] · tokens. `rate` (tokens/s, moving window) is the
 * running task's key figure, as the Testing view shows each test's duration.
 */
export function taskDescription(task: TaskInfo, now: number, t: Localize, rate?: number): string {
  const parts = [originLabel(task.origin, t)];
  if (task.model) parts.push(task.model);
  parts.push(taskTiming(task, now, t));
  const queue = task.status === 'queued' ? queueLabel(task, now, t) : undefined;
  if (queue) parts.push(queue);
  if (rate !== undefined && !isTerminal(task.status)) parts.push(rateLabel(rate, t));
  const tokens = tokensLabel(task, t);
  if (tokens) parts.push(tokens);
  return parts.join(' · ');
}

/** Tooltip as Markdown lines (rendered by a MarkdownString, so user text is escaped here). */
export function taskTooltipMarkdown(task: TaskInfo, now: number, t: Localize): string {
  const esc = (s: string) => s.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, (c) => `\\${c}`);
  const lines = [
    `**${esc(taskTitle(task))}**`,
    '',
    `${t('Status')}: ${statusLabel(task.status, t)}${task.statusMessage ? ` — ${esc(task.statusMessage)}` : ''}`,
    `${t('Origin')}: ${originLabel(task.origin, t)}`,
  ];
  if (task.model) lines.push(`${t('Model')}: ${esc(task.model)}`);
  lines.push(`${t('Created')}: ${new Date(task.createdAt).toLocaleString()}`);
  lines.push(`${t('Time')}: ${taskTiming(task, now, t)}`);
  const queue = task.status === 'queued' ? queueLabel(task, now, t) : undefined;
  if (queue) lines.push(`${t('Queue')}: ${esc(queue)}`);
  if (task.priority !== undefined && task.priority !== 0) lines.push(`${t('Priority')}: ${task.priority}`);
  const tokens = tokensLabel(task, t);
  if (tokens) lines.push(`${t('Output')}: ${tokens}`);
  if (task.attempt > 1) lines.push(`${t('Attempt')}: ${task.attempt}`);
  if (task.error) lines.push(`${t('Error')}: ${esc(task.error.title)} (${esc(task.error.code)}) — ${esc(task.error.detail)}`);
  lines.push(`${t('Id')}: \`${task.id}\``);
  return lines.join('  \n');
}
