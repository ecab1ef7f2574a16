// GET /metrics: the runtime's aggregate metrics (runtime/metrics.ts) in Prometheus' text exposition format 0.0.4,
// at the root as llama.cpp server and vLLM serve it, behind the same bearer token as every other route (a scrape
// config sets `authorization: {credentials_file: …}`). Any principal's token reads the same aggregate: counts, sums
// and buckets over every principal, labelled by status, door, outcome and model id only (no prompts, task ids or
// paths). Errors are problem+json like the rest of the listener's own answers.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TaskRuntimeApi } from '../../runtime/api';
import type { HistogramSnapshot, MetricsSnapshot } from '../../runtime/metrics';
import { TASK_STATUSES } from '../../runtime/task';
import { HttpProblem } from '../http/problem';
import type { Door } from '../door';
import type { DoorHandler } from '../http/types';

export const METRICS_PATH = '/metrics';
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
const PREFIX = 'task_runtime_';

export function createMetricsDoor(runtime: TaskRuntimeApi): Door {
  return { mounts: [{ prefix: METRICS_PATH, handler: metricsHandler(runtime), problemStyle: 'problem+json' }], close: async () => {} };
}

function metricsHandler(runtime: TaskRuntimeApi): DoorHandler {
  return async (req: IncomingMessage, res: ServerResponse, ctx) => {
    if (ctx.url.pathname !== METRICS_PATH) throw new HttpProblem(404, 'not_found', 'No such endpoint.');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new HttpProblem(405, 'method_not_allowed', `${req.method} is not allowed here.`, { headers: { Allow: 'GET, HEAD' } });
    }
    const body = renderPrometheus(runtime.metrics());
    res.statusCode = 200;
    res.setHeader('Content-Type', METRICS_CONTENT_TYPE);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(req.method === 'HEAD' ? undefined : body);
  };
}

/** The text format: a HELP and TYPE line per family, then its samples. */
export function renderPrometheus(m: MetricsSnapshot): string {
  const out: string[] = [];
  const family = (name: string, type: 'gauge' | 'counter' | 'histogram', help: string) => {
    out.push(`# HELP ${PREFIX}${name} ${help}`, `# TYPE ${PREFIX}${name} ${type}`);
  };
  const sample = (name: string, labels: Record<string, string>, value: number) => {
    const l = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
    out.push(`${PREFIX}${name}${l.length ? `{${l.join(',')}}` : ''} ${formatValue(value)}`);
  };
  const histogram = (name: string, labels: Record<string, string>, h: HistogramSnapshot) => {
    h.bounds.forEach((b, i) => sample(`${name}_bucket`, { ...labels, le: formatValue(b) }, h.cumulative[i]));
    sample(`${name}_bucket`, { ...labels, le: '+Inf' }, h.count);
    sample(`${name}_sum`, labels, h.sum);
    sample(`${name}_count`, labels, h.count);
  };

  family('tasks', 'gauge', 'Tasks in the store by status.');
  for (const s of TASK_STATUSES) sample('tasks', { status: s }, m.tasksByStatus[s] ?? 0);
  family('tasks_created_total', 'counter', 'Tasks created since the server started, by door.');
  for (const c of m.created) sample('tasks_created_total', { door: c.origin }, c.n);
  family('tasks_finished_total', 'counter', 'Tasks that reached a final status since the server started, by door and outcome.');
  for (const f of m.finished) sample('tasks_finished_total', { door: f.origin, outcome: f.outcome }, f.n);
  family('generated_tokens_total', 'counter', 'Output tokens generated since the server started.');
  sample('generated_tokens_total', {}, m.outputTokens);
  family('time_to_first_token_seconds', 'histogram', 'From queueing an attempt to its first output token, by model.');
  for (const { model, h } of m.timeToFirstToken) histogram('time_to_first_token_seconds', { model }, h);
  family('generation_tokens_per_second', 'histogram', 'Output tokens per second of succeeded tasks, from running to the end, by model.');
  for (const { model, h } of m.tokensPerSecond) histogram('generation_tokens_per_second', { model }, h);
  family('queue_wait_seconds', 'histogram', 'Time a task attempt waited in the queue before it started.');
  histogram('queue_wait_seconds', {}, m.queueWait);
  family('queue_depth', 'gauge', 'Tasks waiting in the queue now, by model.');
  for (const { model, n } of m.queue.byModel) sample('queue_depth', { model }, n);
  family('queue_depth_by_principal', 'gauge', 'Tasks waiting in the queue now, by principal (the name its token was given).');
  for (const { principal, n } of m.queue.byPrincipal) sample('queue_depth_by_principal', { principal }, n);
  family('queue_oldest_wait_seconds', 'gauge', 'How long the task that waited longest in the queue has waited (0: none waits).');
  sample('queue_oldest_wait_seconds', {}, m.queue.oldestWaitSeconds);
  family('journal_sync_seconds', 'histogram', 'Latency of the store journal syncs (fdatasync) that made write batches durable.');
  histogram('journal_sync_seconds', {}, m.journalSync);
  family('embedding_requests_total', 'counter', 'Embeddings calls since the server started, by model and outcome (succeeded, failed).');
  for (const e of m.embeddings) {
    sample('embedding_requests_total', { model: e.model, outcome: 'succeeded' }, e.succeeded);
    sample('embedding_requests_total', { model: e.model, outcome: 'failed' }, e.failed);
  }
  family('embedding_inputs_total', 'counter', 'Inputs embedded by succeeded embeddings calls, by model.');
  for (const e of m.embeddings) sample('embedding_inputs_total', { model: e.model }, e.inputs);
  family(
    'embedding_prompt_tokens_total',
    'counter',
    'Tokens evaluated by succeeded embeddings calls (BOS/EOS included, as usage counts them), by model.',
  );
  for (const e of m.embeddings) sample('embedding_prompt_tokens_total', { model: e.model }, e.tokens);
  family('store_size_bytes', 'gauge', 'Bytes of the store checkpoints and journals on disk.');
  sample('store_size_bytes', {}, m.storeBytes);
  return out.join('\n') + '\n';
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function formatValue(v: number): string {
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (Number.isNaN(v)) return 'NaN';
  return String(v);
}
