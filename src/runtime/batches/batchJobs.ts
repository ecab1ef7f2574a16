// Batch jobs (OpenAI's /v1/batches; docs/batches.md): a file of request lines run as durable work. Why it is built
// this way:
//   - A batch is a row (`batches`) and each line a work item (`batch_items`: where the line is in the input file, its
//     status, and once it ended its output line). The lines stay in the input file; the store holds only positions,
//     so a 50 000-line batch is 50 000 small rows, not 100 MiB in the store's in-memory image.
//   - A line for a model run (/v1/responses, /v1/chat/completions) runs as an ordinary task of the batch's principal,
//     at the lowest priority (PRIORITY.min) and marked with the item it runs (`meta.batch`). So the scheduler's fair
//     turns between principals, priority and aging apply as to any task: a batch never takes a principal's turn from
//     another principal, its own interactive tasks start before its items, and aging keeps items from starving.
//     A batch keeps at most two items per slot of its model unfinished (one running, one queued to take the slot
//     when it frees), so it never fills the queue, and an interactive task, which passes every queued item, waits
//     for at most one slot to free.
//   - An item's outcome is written in the batch of its task's terminal transition (`batchItemOps`, a `finished` hook
//     of TaskTransitions, beside the webhook outbox): an item is recorded as ended exactly when its task ended, so a
//     SIGKILL loses no finished item. A running item's task is an unfinished task: recovery re-queues it (resume or
//     retry), and the batch finds it again at open by its mark (no second task for it: nothing is redone twice).
//     The task is deleted once its item is recorded; the output lives in the item row, then in the output file.
//   - An embeddings line is a direct embeddings call (no task; runtime/embeddings.ts), at most two at once per batch;
//     its outcome is written when the call returns. A SIGKILL mid-call runs that line again (one line's time).
//   - When every item has ended, the output and error files are written (batchFiles.ts) and recorded together with
//     the batch's end and the removal of its item rows, in one batch; a crash before that finalizes again at open.
//   - Lines that are not valid requests are failed items with their line number in the error file; they never fail
//     the batch. Only what makes every line unrunnable (no file, no lines, too many) refuses the create.
import { RuntimeError } from '../errors';
import type { CreateTaskParams, Subscription } from '../api';
import type { EmbedOutcome, EmbedParams } from '../embeddings';
import { randomId } from '../ids';
import { PRIORITY } from '../queue';
import { limitExceeded } from '../shares';
import type { DurableDatabase, Row, WriteOp } from '../store/database';
import { isTerminal, type RestartPolicy, type TaskRecord } from '../task';
import type { BatchFiles } from './batchFiles';
import {
  BATCH_LIMIT_NAMES,
  BATCH_LIMITS,
  COMPLETION_WINDOWS,
  FINAL_BATCH_STATUSES,
  type BatchAnswer,
  type BatchEndpoints,
  type BatchMoment,
  type BatchRecord,
  type BatchStatus,
  type BatchWork,
} from './types';

/** What the runtime lends the batches: its own operations, as a door would call them. */
export interface BatchHost {
  now(): number;
  log?(msg: string): void;
  createTask(p: CreateTaskParams): Promise<TaskRecord>;
  cancelTask(id: string, principal: string, reason: string): void;
  deleteTask(id: string, principal: string): void;
  activeTasks(): TaskRecord[];
  onTaskChange(listener: (task: TaskRecord, deleted: boolean) => void): Subscription;
  embed(p: EmbedParams): Promise<EmbedOutcome>;
  /** The slots of the capacity group a model's runs count against. */
  capacityOf(model: string | undefined): number;
  /** The restart policy of an item's task for this model: resume where it can, else retry. */
  onRestartFor(model: string | undefined): RestartPolicy;
}

/** The mark on an item's task (`meta.batch`). */
export interface BatchItemMark {
  id: string;
  line: number;
  custom_id: string;
  endpoint: string;
}

export const BATCH_META_KEY = 'batch';

export function batchItemOf(task: Pick<TaskRecord, 'meta'>): BatchItemMark | undefined {
  const m = task.meta[BATCH_META_KEY] as BatchItemMark | undefined;
  return m && typeof m === 'object' && typeof m.id === 'string' && typeof m.line === 'number' ? m : undefined;
}

export interface CreateBatchParams {
  principal: string;
  inputFileId: string;
  endpoint: string;
  completionWindow: string;
  metadata?: Record<string, string> | null;
}

export interface BatchListQuery {
  principal: string;
  after?: string;
  limit: number;
}

/**
 * Lines of one batch unfinished at once, per slot of their model: a slot's line and one queued behind it. Lines of the
 * same length batched together end in the same step; with one queued line per slot every freed slot starts a line at
 * once (with slots + 1, measured 0.54× the items/s of a client keeping 8 requests in flight on a 4-slot model). An
 * interactive task still passes every queued line (priority), so it waits for one slot to free, not for the window.
 */
const LINE_WINDOW_PER_SLOT = 2;
/** Embedding lines of one batch in flight at once: one evaluates while the next one's answer is written. */
const EMBED_WINDOW = 2;
/** How long an item the runtime refused for now (the principal's queue share, a full queue) waits to be tried again. */
const RETRY_MS = 1000;
/** How often unfinished batches are checked against their completion window. */
const EXPIRY_CHECK_MS = 60_000;

export const newBatchId = () => randomId('batch_');
const newRequestLineId = () => randomId('batch_req_');

/** One output-file line (OpenAI's batch output format). */
function outputLine(
  customId: string | null,
  answer: BatchAnswer | null,
  requestId: string,
  error: { code: string; message: string; line?: number } | null,
): string {
  return JSON.stringify({
    id: newRequestLineId(),
    custom_id: customId,
    response: answer ? { status_code: answer.statusCode, request_id: requestId, body: answer.body } : null,
    error,
  });
}

/** The writes that record an item's end: its line and status, and the batch's counts. */
function endItemOps(batchId: string, line: number, customId: string, answer: BatchAnswer, requestId: string): WriteOp[] {
  const ok = answer.statusCode < 400;
  return [
    [
      "UPDATE batch_items SET status = ?, output_json = ? WHERE batch_id = ? AND idx = ? AND status = 'pending'",
      [ok ? 'completed' : 'failed', outputLine(customId, answer, requestId, null), batchId, line],
    ],
    [
      'UPDATE batches SET completed = completed + ?, failed = failed + ?, input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = ?',
      [ok ? 1 : 0, ok ? 0 : 1, answer.usage?.inputTokens ?? 0, answer.usage?.outputTokens ?? 0, batchId],
    ],
  ];
}

function itemPending(db: DurableDatabase, batchId: string, line: number): boolean {
  return db.get('SELECT status FROM batch_items WHERE batch_id = ? AND idx = ?', [batchId, line])?.status === 'pending';
}

/**
 * The `finished` hook of the task transitions: when an item's task ends, its outcome is written in the same batch.
 * Used before the batches exist too (recovery's endings at open).
 */
export function batchItemOps(db: DurableDatabase, endpoints: BatchEndpoints, task: TaskRecord): WriteOp[] {
  const mark = batchItemOf(task);
  if (!mark || !itemPending(db, mark.id, mark.line)) return [];
  const endpoint = endpoints[mark.endpoint];
  const answer: BatchAnswer = endpoint
    ? endpoint.taskAnswer(task)
    : {
        statusCode: 500,
        body: { error: { message: 'The endpoint is no longer served.', type: 'server_error', param: null, code: 'internal_error' } },
      };
  return endItemOps(mark.id, mark.line, mark.custom_id, answer, task.responseId);
}

function toBatch(r: Row): BatchRecord {
  return {
    id: String(r.id),
    principal: String(r.principal),
    endpoint: String(r.endpoint),
    inputFileId: String(r.input_file_id),
    completionWindow: String(r.completion_window),
    status: String(r.status) as BatchStatus,
    createdAt: Number(r.created_at),
    expiresAt: Number(r.expires_at),
    moments: JSON.parse(String(r.moments_json)) as BatchRecord['moments'],
    outputFileId: r.output_file_id === null ? null : String(r.output_file_id),
    errorFileId: r.error_file_id === null ? null : String(r.error_file_id),
    errors: r.errors_json === null ? null : (JSON.parse(String(r.errors_json)) as BatchRecord['errors']),
    metadata: r.metadata_json === null ? null : (JSON.parse(String(r.metadata_json)) as Record<string, string>),
    counts: { total: Number(r.total), completed: Number(r.completed), failed: Number(r.failed) },
    usage: { inputTokens: Number(r.input_tokens), outputTokens: Number(r.output_tokens) },
  };
}

interface PendingItem {
  line: number;
  customId: string;
  offset: number;
  bytes: number;
  /** The line's work once read and checked (kept while the item waits for a slot). */
  work?: BatchWork;
}

interface InFlight {
  taskId?: string;
  abort?: AbortController;
}

/** An unfinished batch's work in this process. */
interface BatchRun {
  id: string;
  principal: string;
  endpoint: string;
  inputFileId: string;
  expiresAt: number;
  pending: PendingItem[];
  inFlight: Map<number, InFlight>;
  /** Set when the batch stops taking items: it is being cancelled, or it passed its completion window. */
  ending?: 'cancelled' | 'expired';
  retryTimer?: NodeJS.Timeout;
}

export class BatchJobs {
  private readonly runs = new Map<string, BatchRun>();
  private subscription: Subscription | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly db: DurableDatabase,
    private readonly files: BatchFiles,
    private readonly endpoints: BatchEndpoints,
    private readonly host: BatchHost,
  ) {}

  /** At open: leftover bytes removed, unfinished batches picked up where they were. */
  start(): void {
    const removed = this.files.sweepOrphans();
    if (removed) this.host.log?.(`batches: removed ${removed} file(s) without a record (a crash while they were written)`);
    this.subscription = this.host.onTaskChange((task, deleted) => this.taskChanged(task, deleted));
    const marks = new Map<string, Map<number, string>>();
    for (const t of this.host.activeTasks()) {
      const mark = batchItemOf(t);
      if (!mark) continue;
      let m = marks.get(mark.id);
      if (!m) marks.set(mark.id, (m = new Map()));
      m.set(mark.line, t.id);
    }
    for (const r of this.db.all(`SELECT * FROM batches WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling')`)) {
      const batch = toBatch(r);
      const run = this.newRun(batch);
      // Items whose task is still unfinished (re-queued by recovery) stay in flight: no second task is made.
      for (const [line, taskId] of marks.get(batch.id) ?? []) {
        run.inFlight.set(line, { taskId });
        run.pending = run.pending.filter((p) => p.line !== line);
      }
      if (batch.status === 'cancelling') this.stopRun(run, 'cancelled');
      this.pump(run);
    }
    this.expiryTimer = setInterval(() => this.checkExpiry(), EXPIRY_CHECK_MS);
    this.expiryTimer.unref();
    this.checkExpiry();
  }

  // ---------------- the API ----------------

  create(p: CreateBatchParams): BatchRecord {
    if (!Object.prototype.hasOwnProperty.call(this.endpoints, p.endpoint)) {
      throw new RuntimeError(
        'invalid_request',
        `Invalid value for "endpoint": "${String(p.endpoint).slice(0, 80)}"; supported: ${Object.keys(this.endpoints).join(', ')}.`,
        'endpoint',
      );
    }
    const windowMs = COMPLETION_WINDOWS[p.completionWindow];
    if (windowMs === undefined) {
      throw new RuntimeError('invalid_request', `Invalid value for "completion_window": only "24h" is supported.`, 'completion_window');
    }
    const open = Number(
      this.db.get(`SELECT COUNT(*) AS n FROM batches WHERE principal = ? AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling')`, [
        p.principal,
      ])?.n ?? 0,
    );
    if (open >= BATCH_LIMITS.maxOpenBatchesPerPrincipal) {
      throw limitExceeded(
        { name: BATCH_LIMIT_NAMES.openBatches, max: BATCH_LIMITS.maxOpenBatchesPerPrincipal, current: open, unit: 'requests' },
        `This client has ${open} unfinished batches; wait for one to end or cancel one`,
      );
    }
    const file = this.files.mustGet(p.inputFileId, p.principal, 'input_file_id');
    if (file.purpose !== 'batch') {
      throw new RuntimeError(
        'invalid_request',
        `The file ${file.id} has purpose "${file.purpose}"; a batch's input must have purpose "batch".`,
        'input_file_id',
      );
    }
    const content = this.files.read(file.id, 0, file.bytes);
    const now = this.host.now();
    const id = newBatchId();
    const items = this.readLines(content, p.endpoint);
    const failed = items.filter((i) => i.error).length;
    const record: BatchRecord = {
      id,
      principal: p.principal,
      endpoint: p.endpoint,
      inputFileId: file.id,
      completionWindow: p.completionWindow,
      status: 'in_progress',
      createdAt: now,
      expiresAt: now + windowMs,
      moments: { in_progress_at: now },
      outputFileId: null,
      errorFileId: null,
      errors: null,
      metadata: p.metadata ?? null,
      counts: { total: items.length, completed: 0, failed },
      usage: { inputTokens: 0, outputTokens: 0 },
    };
    const ops: WriteOp[] = [
      [
        `INSERT INTO batches (id, principal, endpoint, input_file_id, completion_window, status, created_at, expires_at, moments_json,
           output_file_id, error_file_id, errors_json, metadata_json, total, completed, failed, input_tokens, output_tokens)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?, ?, 0, ?, 0, 0)`,
        [
          id,
          p.principal,
          p.endpoint,
          file.id,
          p.completionWindow,
          'in_progress',
          now,
          record.expiresAt,
          JSON.stringify(record.moments),
          p.metadata ? JSON.stringify(p.metadata) : null,
          items.length,
          failed,
        ],
      ],
    ];
    for (const item of items) {
      ops.push([
        'INSERT INTO batch_items (batch_id, idx, custom_id, line_offset, line_bytes, status, output_json) VALUES (?, ?, ?, ?, ?, ?, ?)',
        [
          id,
          item.line,
          item.customId,
          item.offset,
          item.bytes,
          item.error ? 'failed' : 'pending',
          item.error ? outputLine(item.customId || null, null, '', { ...item.error, line: item.line + 1 }) : null,
        ],
      ]);
    }
    this.db.write(ops);
    // The pending items as just written (a batch found at open reads them from its rows).
    const pending = items.filter((i) => !i.error).map(({ line, customId, offset, bytes }) => ({ line, customId, offset, bytes }));
    const run = this.newRun(record, pending);
    this.pump(run);
    return this.get(id, p.principal) ?? record;
  }

  get(id: string, principal: string): BatchRecord | undefined {
    if (typeof id !== 'string' || id.length > 200) return undefined;
    const r = this.db.get('SELECT * FROM batches WHERE id = ?', [id]);
    if (!r || r.principal !== principal) return undefined;
    return toBatch(r);
  }

  list(q: BatchListQuery): { batches: BatchRecord[]; hasMore: boolean } {
    const params: (string | number)[] = [q.principal];
    let where = 'principal = ?';
    if (q.after !== undefined) {
      const at = this.get(q.after, q.principal);
      if (!at) throw new RuntimeError('invalid_request', `Invalid value for "after": no batch with id "${q.after.slice(0, 80)}".`, 'after');
      where += ' AND (created_at < ? OR (created_at = ? AND id < ?))';
      params.push(at.createdAt, at.createdAt, at.id);
    }
    const rows = this.db.all(`SELECT * FROM batches WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ?`, [...params, q.limit + 1]);
    return { batches: rows.slice(0, q.limit).map(toBatch), hasMore: rows.length > q.limit };
  }

  /** Stops a batch: no item starts any more, running ones are cancelled; it ends `cancelled` with what finished. */
  cancel(id: string, principal: string): BatchRecord {
    const batch = this.get(id, principal);
    if (!batch) throw new RuntimeError('not_found', `No batch with id "${String(id).slice(0, 80)}".`, 'batch_id');
    if (FINAL_BATCH_STATUSES.has(batch.status) || batch.status === 'cancelling' || batch.status === 'finalizing') return batch;
    const now = this.host.now();
    this.setStatus(batch, 'cancelling', 'cancelling_at', now);
    const run = this.runs.get(id);
    if (run) {
      this.stopRun(run, 'cancelled');
      this.pump(run);
    }
    return this.get(id, principal) ?? batch;
  }

  /** The unfinished batch that reads this file, if any (a file is not deleted under it). */
  inputInUse(fileId: string): string | undefined {
    for (const run of this.runs.values()) if (run.inputFileId === fileId) return run.id;
    return undefined;
  }

  /** Stops taking items; running embeddings calls are abandoned (their lines run again after the restart). */
  close(): void {
    this.closed = true;
    this.subscription?.close();
    if (this.expiryTimer) clearInterval(this.expiryTimer);
    for (const run of this.runs.values()) {
      if (run.retryTimer) clearTimeout(run.retryTimer);
      for (const f of run.inFlight.values()) f.abort?.abort();
    }
  }

  // ---------------- running ----------------

  /** Reads the input's lines: positions, ids, and the envelope checked (bodies are checked when a line runs). */
  private readLines(content: Buffer, endpoint: string): Array<PendingItem & { error?: { code: string; message: string } }> {
    const items: Array<PendingItem & { error?: { code: string; message: string } }> = [];
    const seen = new Set<string>();
    let start = 0;
    let lineNo = 0;
    while (start < content.length) {
      let end = content.indexOf(0x0a, start);
      if (end < 0) end = content.length;
      let stop = end;
      if (stop > start && content[stop - 1] === 0x0d) stop--;
      const offset = start;
      const bytes = stop - start;
      start = end + 1;
      const n = lineNo++;
      const raw = content.toString('utf8', offset, stop);
      if (raw.trim() === '') continue;
      if (items.length >= BATCH_LIMITS.maxLines) {
        throw new RuntimeError(
          'invalid_request',
          `The input file has more than ${BATCH_LIMITS.maxLines} request lines (limit ${BATCH_LIMIT_NAMES.lines}).`,
          'input_file_id',
          { name: BATCH_LIMIT_NAMES.lines, max: BATCH_LIMITS.maxLines, current: items.length + 1, unit: 'requests' },
        );
      }
      const item: PendingItem & { error?: { code: string; message: string } } = { line: n, customId: '', offset, bytes };
      items.push(item);
      const fail = (code: string, message: string) => (item.error = { code, message: `Line ${n + 1}: ${message}` });
      if (bytes > BATCH_LIMITS.maxLineBytes) {
        fail('line_too_large', `the line is ${bytes} bytes; at most ${BATCH_LIMITS.maxLineBytes} (limit ${BATCH_LIMIT_NAMES.lineBytes}).`);
        continue;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        fail('invalid_json', 'not a valid JSON object.');
        continue;
      }
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
        fail('invalid_json', 'not a JSON object.');
        continue;
      }
      const env = parsed as Record<string, unknown>;
      if (typeof env.custom_id === 'string') item.customId = env.custom_id.slice(0, BATCH_LIMITS.maxCustomIdChars);
      const extra = Object.keys(env).find((k) => !['custom_id', 'method', 'url', 'body'].includes(k));
      if (typeof env.custom_id !== 'string' || env.custom_id.length === 0 || env.custom_id.length > BATCH_LIMITS.maxCustomIdChars) {
        fail('invalid_custom_id', `"custom_id" must be a string of 1 to ${BATCH_LIMITS.maxCustomIdChars} characters.`);
      } else if (seen.has(env.custom_id)) {
        fail('duplicate_custom_id', `the custom_id "${env.custom_id.slice(0, 80)}" was used by an earlier line; each must be unique.`);
      } else if (env.method !== 'POST') {
        fail('invalid_method', `"method" must be "POST".`);
      } else if (env.url !== endpoint) {
        fail('mismatched_url', `"url" must be the batch's endpoint "${endpoint}".`);
      } else if (!env.body || typeof env.body !== 'object' || Array.isArray(env.body)) {
        fail('invalid_body', `"body" must be a JSON object.`);
      } else if (extra !== undefined) {
        fail('invalid_request', `unknown field "${extra.slice(0, 40)}".`);
      }
      if (typeof env.custom_id === 'string' && !item.error) seen.add(env.custom_id);
    }
    if (items.length === 0) throw new RuntimeError('invalid_request', 'The input file has no request lines.', 'input_file_id');
    return items;
  }

  private newRun(batch: BatchRecord, pending: PendingItem[] = this.pendingRows(batch.id)): BatchRun {
    const run: BatchRun = {
      id: batch.id,
      principal: batch.principal,
      endpoint: batch.endpoint,
      inputFileId: batch.inputFileId,
      expiresAt: batch.expiresAt,
      pending,
      inFlight: new Map(),
    };
    this.runs.set(batch.id, run);
    return run;
  }

  /** A batch's items not yet ended, in line order, from its rows. */
  private pendingRows(batchId: string): PendingItem[] {
    return this.db
      .all("SELECT idx, custom_id, line_offset, line_bytes FROM batch_items WHERE batch_id = ? AND status = 'pending' ORDER BY idx", [batchId])
      .map((r) => ({ line: Number(r.idx), customId: String(r.custom_id), offset: Number(r.line_offset), bytes: Number(r.line_bytes) }));
  }

  private stopRun(run: BatchRun, ending: 'cancelled' | 'expired'): void {
    if (run.ending) return;
    run.ending = ending;
    const reason = ending === 'cancelled' ? 'its batch was cancelled' : 'its batch passed its completion window';
    for (const f of run.inFlight.values()) {
      f.abort?.abort();
      if (f.taskId) this.cancelQuietly(f.taskId, run.principal, reason);
    }
  }

  private cancelQuietly(taskId: string, principal: string, reason: string): void {
    try {
      this.host.cancelTask(taskId, principal, reason);
    } catch {
      // Already ended, or gone: its item was recorded (or will be) by its ending.
    }
  }

  /** Starts what fits; ends the batch when nothing is left. */
  private pump(run: BatchRun): void {
    if (this.closed || this.runs.get(run.id) !== run) return;
    // Past its completion window: what runs is stopped, nothing more starts (also checked on a timer while idle).
    if (!run.ending && this.host.now() >= run.expiresAt) this.stopRun(run, 'expired');
    if (!run.ending) {
      while (run.pending.length > 0) {
        const item = run.pending[0];
        if (!item.work) {
          try {
            item.work = this.endpoint(run).prepare(this.readBody(run, item));
          } catch (e) {
            run.pending.shift();
            this.record(run, item, this.endpoint(run).errorAnswer(e), randomId('req_'));
            continue;
          }
        }
        const window = item.work.kind === 'embed' ? EMBED_WINDOW : LINE_WINDOW_PER_SLOT * this.host.capacityOf(item.work.input.model);
        if (run.inFlight.size >= window) break;
        run.pending.shift();
        this.startItem(run, item, item.work);
      }
    }
    if (run.inFlight.size === 0 && (run.ending || run.pending.length === 0)) this.finalize(run);
  }

  private endpoint(run: BatchRun) {
    const e = this.endpoints[run.endpoint];
    if (!e) throw new Error(`batch endpoint ${run.endpoint} is not served`);
    return e;
  }

  private readBody(run: BatchRun, item: PendingItem): unknown {
    const env = JSON.parse(this.files.read(run.inputFileId, item.offset, item.bytes).toString('utf8')) as { body: unknown };
    return env.body;
  }

  private startItem(run: BatchRun, item: PendingItem, work: BatchWork): void {
    const flight: InFlight = {};
    run.inFlight.set(item.line, flight);
    if (work.kind === 'embed') {
      flight.abort = new AbortController();
      this.host
        .embed({ principal: run.principal, model: work.model, inputs: work.inputs, signal: flight.abort.signal })
        .then(
          (outcome) => work.answer(outcome),
          (e: unknown) => (flight.abort?.signal.aborted ? undefined : this.endpoint(run).errorAnswer(e)),
        )
        .then((answer) => {
          run.inFlight.delete(item.line);
          // Aborted: closing (the line runs again after the restart) or the batch ended (listed as not run).
          if (answer && !this.closed) this.record(run, item, answer, randomId('req_'));
          this.pump(run);
        })
        .catch((e: unknown) => this.host.log?.(`batches: ${run.id} line ${item.line + 1}: ${(e as Error).message}`));
      return;
    }
    const model = work.input.model;
    this.host
      .createTask({
        origin: 'lmsp',
        principal: run.principal,
        input: work.input,
        onRestart: this.host.onRestartFor(model),
        priority: PRIORITY.min,
        title: `${run.id} · ${item.customId}`.slice(0, 120),
        meta: { [BATCH_META_KEY]: { id: run.id, line: item.line, custom_id: item.customId, endpoint: run.endpoint } satisfies BatchItemMark },
      })
      .then(
        (task) => {
          if (run.inFlight.get(item.line) !== flight) return; // it already ended
          flight.taskId = task.id;
          if (run.ending) this.cancelQuietly(task.id, run.principal, 'its batch was stopped');
        },
        (e: unknown) => {
          run.inFlight.delete(item.line);
          if (this.closed) return;
          if (e instanceof RuntimeError && ['queue_full', 'limit_exceeded', 'store_unwritable'].includes(e.code)) {
            // Refused for now (the principal's share of the queue, a full queue): tried again shortly.
            run.pending.unshift(item);
            if (!run.retryTimer) {
              run.retryTimer = setTimeout(() => {
                run.retryTimer = undefined;
                this.pump(run);
              }, RETRY_MS);
              run.retryTimer.unref();
            }
            return;
          }
          this.record(run, item, this.endpoint(run).errorAnswer(e), randomId('req_'));
          this.pump(run);
        },
      );
  }

  /** An item that ended without a task (an embeddings line, a line refused before its task was made). */
  private record(run: BatchRun, item: PendingItem, answer: BatchAnswer, requestId: string): void {
    if (!itemPending(this.db, run.id, item.line)) return;
    this.db.write(endItemOps(run.id, item.line, item.customId, answer, requestId), {
      defer: { onDurable: () => undefined, onFailed: () => undefined },
    });
  }

  private taskChanged(task: TaskRecord, deleted: boolean): void {
    const mark = batchItemOf(task);
    if (!mark || (!deleted && !isTerminal(task.status))) return;
    const run = this.runs.get(mark.id);
    run?.inFlight.delete(mark.line);
    if (!deleted) {
      // Its outcome is in the item row (written with its ending); the task itself is no longer needed.
      queueMicrotask(() => {
        try {
          this.host.deleteTask(task.id, task.principal);
        } catch {
          // deleted meanwhile
        }
      });
    } else if (run && itemPending(this.db, mark.id, mark.line)) {
      // Deleted before it ended (its ttl, a client's delete): the line runs again.
      run.pending.unshift({ line: mark.line, customId: mark.custom_id, ...this.position(mark.id, mark.line) });
    }
    if (run) this.pump(run);
  }

  private position(batchId: string, line: number): { offset: number; bytes: number } {
    const r = this.db.get('SELECT line_offset, line_bytes FROM batch_items WHERE batch_id = ? AND idx = ?', [batchId, line]);
    return { offset: Number(r?.line_offset ?? 0), bytes: Number(r?.line_bytes ?? 0) };
  }

  private checkExpiry(): void {
    for (const run of [...this.runs.values()]) if (!run.ending) this.pump(run);
  }

  private setStatus(batch: BatchRecord, status: BatchStatus, moment: BatchMoment, at: number, extra: WriteOp[] = []): void {
    const moments = { ...batch.moments, [moment]: at };
    this.db.write([['UPDATE batches SET status = ?, moments_json = ? WHERE id = ?', [status, JSON.stringify(moments), batch.id]], ...extra]);
  }

  /** Every item ended (or the batch stopped): the output and error files, the batch's end, its item rows removed. */
  private finalize(run: BatchRun): void {
    const batch = this.get(run.id, run.principal);
    this.runs.delete(run.id);
    if (run.retryTimer) clearTimeout(run.retryTimer);
    if (!batch || FINAL_BATCH_STATUSES.has(batch.status)) return;
    try {
      const now = this.host.now();
      const ending: BatchStatus = run.ending ?? (batch.status === 'cancelling' ? 'cancelled' : 'completed');
      const out: string[] = [];
      const err: string[] = [];
      let notRun = 0;
      for (const r of this.db.all('SELECT idx, custom_id, status, output_json FROM batch_items WHERE batch_id = ? ORDER BY idx', [run.id])) {
        if (r.status === 'completed') out.push(String(r.output_json));
        else if (r.status === 'failed') err.push(String(r.output_json));
        else {
          notRun++;
          const code = ending === 'expired' ? 'batch_expired' : 'batch_cancelled';
          const message =
            ending === 'expired' ? 'This request could not be run before the batch expired.' : 'This request was not run: the batch was cancelled.';
          err.push(outputLine(String(r.custom_id) || null, null, '', { code, message }));
        }
      }
      const ops: WriteOp[] = [];
      const write = (lines: string[], kind: string): string | null => {
        if (lines.length === 0) return null;
        const f = this.files.prepare(run.principal, 'batch_output', `${run.id}_${kind}.jsonl`, Buffer.from(lines.join('\n') + '\n', 'utf8'));
        ops.push(...f.ops);
        return f.record.id;
      };
      const outputFileId = write(out, 'output');
      const errorFileId = write(err, 'error');
      const moment: BatchMoment = ending === 'completed' ? 'completed_at' : ending === 'expired' ? 'expired_at' : 'cancelled_at';
      const moments = { ...batch.moments, ...(ending === 'completed' ? { finalizing_at: now } : {}), [moment]: now };
      ops.push(
        [
          'UPDATE batches SET status = ?, moments_json = ?, output_file_id = ?, error_file_id = ?, failed = failed + ? WHERE id = ?',
          [ending, JSON.stringify(moments), outputFileId, errorFileId, notRun, run.id],
        ],
        ['DELETE FROM batch_items WHERE batch_id = ?', [run.id]],
      );
      this.db.write(ops);
      this.host.log?.(`batches: ${run.id} ${ending}: ${out.length} completed, ${err.length} failed or not run`);
    } catch (e) {
      // The store refused the write: the batch stays unfinished and is finalized again at the next open.
      this.host.log?.(`batches: finalizing ${run.id} failed: ${(e as Error).message}`);
    }
  }
}
