// GET /metrics on the real `task-runtime serve` with the tiny demo model: parsed with a real Prometheus text parser
// (parse-prometheus-text-format) before and after real tasks, the values move as the tasks did.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { call, createTask, openAiServer, waitForStatus } from '../lmsp/harness';

type Families = ReturnType<typeof parsePrometheusTextFormat>;

interface Scrape {
  families: Families;
  text: string;
}

async function scrape(server: Parameters<typeof call>[0]): Promise<Scrape> {
  const r = await call(server, 'GET', '/metrics');
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
  return { families: parsePrometheusTextFormat(r.text), text: r.text };
}

function family(f: Families, name: string) {
  const found = f.find((x) => x.name === `task_runtime_${name}`);
  assert.ok(found, `no family ${name} in ${f.map((x) => x.name).join(', ')}`);
  return found;
}

/** The value of the sample whose labels include `labels` (0 when there is none). */
function value(f: Families, name: string, labels: Record<string, string> = {}): number {
  const s = family(f, name).metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return s ? Number(s.value) : 0;
}

/**
 * One histogram series. The parser folds a histogram into buckets/count/sum only for a family without labels (its
 * flattenMetrics), so a model's series is handed to it alone, its `model` label taken off (the exposition's own
 * lines, unchanged otherwise).
 */
function histogram(s: Scrape, name: string, model?: string) {
  let f = s.families;
  if (model !== undefined) {
    const full = `task_runtime_${name}`;
    const label = `model="${model}"`;
    const lines = s.text
      .split('\n')
      .filter((l) => l.startsWith(`# HELP ${full} `) || l.startsWith(`# TYPE ${full} `) || (l.startsWith(full) && l.includes(label)))
      .map((l) => l.replace(`{${label}}`, '').replace(`${label},`, ''));
    f = parsePrometheusTextFormat(lines.join('\n') + '\n');
  }
  const found = family(f, name).metrics[0];
  return found?.count !== undefined
    ? { count: Number(found.count), sum: Number(found.sum), buckets: found.buckets ?? {} }
    : { count: 0, sum: 0, buckets: {} };
}

describe('/metrics (Prometheus text format)', () => {
  const ctx = openAiServer();

  it('needs the token like every other route', async () => {
    const none = await call(ctx.server, 'GET', '/metrics', { token: null });
    assert.equal(none.status, 401);
    const wrong = await call(ctx.server, 'GET', '/metrics', { token: 'not-a-valid-token-at-all' });
    assert.equal(wrong.status, 401);
    const post = await call(ctx.server, 'POST', '/metrics', { body: {} });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
    assert.equal((await call(ctx.server, 'GET', '/metrics/other')).status, 404);
  });

  it('counts real tasks: created, finished, tokens, first-token and speed histograms, queue wait, syncs, store size', async () => {
    const b = await scrape(ctx.server);
    const before = b.families;
    for (const fam of [
      'tasks',
      'tasks_created_total',
      'tasks_finished_total',
      'generated_tokens_total',
      'time_to_first_token_seconds',
      'generation_tokens_per_second',
      'queue_wait_seconds',
      'journal_sync_seconds',
      'store_size_bytes',
    ]) {
      family(before, fam);
    }
    assert.equal(family(before, 'tasks').type, 'GAUGE');
    assert.equal(family(before, 'generated_tokens_total').type, 'COUNTER');
    assert.equal(family(before, 'queue_wait_seconds').type, 'HISTOGRAM');
    const model = ctx.server.model;

    // Three through the Responses route (door lmsp), one through /tasks by bob, one cancelled while queued or running.
    let outputTokens = 0;
    for (const input of ['one', 'two', 'three']) {
      const r = await ctx.client.responses.create({ model, input, max_output_tokens: 6 });
      outputTokens += r.usage!.output_tokens;
    }
    const bobs = await createTask(ctx.server, { input: 'from bob', max_output_tokens: 5 }, {}, ctx.server.tokenB);
    const bobDone = await waitForStatus(ctx.server, bobs.id, ['succeeded'], ctx.server.tokenB);
    outputTokens += bobDone.response.usage.output_tokens;
    const doomed = await createTask(ctx.server, { input: 'stop me', max_output_tokens: null });
    await call(ctx.server, 'POST', `/tasks/${doomed.id}/cancel`);
    const cancelled = await waitForStatus(ctx.server, doomed.id, ['cancelled']);

    const a = await scrape(ctx.server);
    const after = a.families;
    const moved = (name: string, labels?: Record<string, string>) => value(after, name, labels) - value(before, name, labels);
    assert.equal(moved('tasks_created_total', { door: 'lmsp' }), 5);
    assert.equal(moved('tasks_finished_total', { door: 'lmsp', outcome: 'succeeded' }), 4);
    assert.equal(moved('tasks_finished_total', { door: 'lmsp', outcome: 'cancelled' }), 1);
    assert.equal(value(after, 'tasks', { status: 'succeeded' }) - value(before, 'tasks', { status: 'succeeded' }), 4);
    assert.equal(value(after, 'tasks', { status: 'cancelled' }), 1);
    // Every token generated: the succeeded tasks' usage plus whatever the cancelled one produced before it stopped.
    assert.equal(moved('generated_tokens_total'), outputTokens + cancelled.task_runtime.output_tokens);
    const ttft = histogram(a, 'time_to_first_token_seconds', model);
    assert.ok(ttft.count - histogram(b, 'time_to_first_token_seconds', model).count >= 4, `ttft count ${ttft.count}`);
    assert.ok(ttft.sum > 0);
    assert.equal(Number(ttft.buckets['+Inf']), ttft.count);
    const tps = histogram(a, 'generation_tokens_per_second', model);
    assert.equal(tps.count - histogram(b, 'generation_tokens_per_second', model).count, 4);
    assert.ok(tps.sum > 0);
    assert.ok(histogram(a, 'queue_wait_seconds').count - histogram(b, 'queue_wait_seconds').count >= 4);
    assert.ok(histogram(a, 'journal_sync_seconds').count > histogram(b, 'journal_sync_seconds').count);
    assert.ok(value(after, 'store_size_bytes') > 0);
    // Aggregates only: no task id, response id, prompt or path in the text.
    const text = (await call(ctx.server, 'GET', '/metrics')).text;
    for (const secret of [bobs.id, doomed.id, 'from bob', 'stop me', ctx.server.dataDir]) assert.ok(!text.includes(secret), secret);
  });
});
