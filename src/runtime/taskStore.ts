// Tasks, events and idempotency keys on the durable database: row mapping and the write batches that change them.
import type { DurableDatabase, Row, SqlParam, WriteOp } from './store/database';
import {
  ACTIVE_STATUSES,
  TERMINAL_STATUSES,
  isTerminal,
  TASK_STATUSES,
  type InputRound,
  type Problem,
  type ResponseRequest,
  type RestartPolicy,
  type TaskEvent,
  type TaskOrigin,
  type TaskRecord,
  type TaskStatus,
  type Usage,
} from './task';
import type { GenerationSnapshot } from './backend';
import { deepFreeze, isObject } from './jsonValues';
import { REQUEST_ECHO_KEYS, requestEcho } from './responses';
import { pendingRequests } from './input';

const TASK_COLUMNS = `id, response_id, origin, principal, title, model, input_json, status, status_message, created_at,
  updated_at, on_restart, attempt, ttl_ms, expires_at, deadline_at, response_json, error_json, usage_json,
  output_tokens, meta_json, next_seq, oldest_seq, input_rounds_json, priority`;

function parse<T>(v: SqlParam): T | null {
  return v === null || v === undefined ? null : (JSON.parse(String(v)) as T);
}

function toTask(r: Row): TaskRecord {
  const status = r.status as TaskStatus;
  return {
    id: String(r.id),
    responseId: String(r.response_id),
    origin: r.origin as TaskOrigin,
    principal: String(r.principal),
    title: String(r.title),
    model: String(r.model),
    request: JSON.parse(String(r.input_json)) as ResponseRequest,
    status,
    statusMessage: r.status_message === null ? null : String(r.status_message),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    onRestart: r.on_restart as RestartPolicy,
    attempt: Number(r.attempt),
    ttlMs: r.ttl_ms === null ? null : Number(r.ttl_ms),
    expiresAt: r.expires_at === null ? null : Number(r.expires_at),
    deadlineAt: r.deadline_at === null ? null : Number(r.deadline_at),
    response: parse<Record<string, unknown>>(r.response_json),
    error: parse<Problem>(r.error_json),
    usage: parse<Usage>(r.usage_json),
    outputTokens: Number(r.output_tokens),
    meta: JSON.parse(String(r.meta_json)) as Record<string, unknown>,
    priority: Number(r.priority ?? 0),
    nextSeq: Number(r.next_seq),
    oldestSeq: Number(r.oldest_seq),
    inputRequests: status === 'input_required' ? pendingRequests(parse<InputRound[]>(r.input_rounds_json)) : null,
  };
}

const EVENT_INSERT = 'INSERT INTO events (task_id, seq, type, data_json, created_at) VALUES (?, ?, ?, ?, ?)';

// Echoes of the request. Every event that carries a response object (created, queued, in_progress and the terminal
// one) echoes the request's instructions, tools and text format, and an agent's request carries tens of kilobytes of
// them (a schema may carry 256 KiB): stored whole, each task kept four more copies of them than its own row, and
// writing them held the event loop (bench/hostile.ts). An echo member of at least ECHO_MIN_CHARS, the very object
// the task's request gave (responses.ts requestEcho), is stored as ECHO; reading the event puts the request's echo
// back, so every reader sees the event as it was emitted.
const ECHO = { $task_runtime_echo: 'request' } as const;
const ECHO_MARK = '"$task_runtime_echo"';
const ECHO_MIN_CHARS = 256;

/** Sizes of a request's echo members in JSON, once per request. */
const echoSizes = new WeakMap<ResponseRequest, Record<string, number>>();

/** An event's data as stored: echo members of its response object (see above) as references. */
function storedEventJson(request: ResponseRequest, data: Record<string, unknown>): string {
  const response = data.response;
  if (!isObject(response)) return JSON.stringify(data);
  const echo = requestEcho(request);
  let sizes = echoSizes.get(request);
  if (!sizes) echoSizes.set(request, (sizes = Object.fromEntries(REQUEST_ECHO_KEYS.map((k) => [k, JSON.stringify(echo[k]).length]))));
  let compact: Record<string, unknown> | undefined;
  for (const k of REQUEST_ECHO_KEYS) {
    if (response[k] !== echo[k] || sizes[k]! < ECHO_MIN_CHARS) continue;
    compact ??= { ...response };
    compact[k] = ECHO;
  }
  return JSON.stringify(compact ? { ...data, response: compact } : data);
}

/** The event's data as emitted: references to the request's echo replaced by it. */
function restoreEcho(data: Record<string, unknown>, request: ResponseRequest | undefined): Record<string, unknown> {
  const response = data.response;
  if (!request || !isObject(response)) return data;
  const echo = requestEcho(request);
  for (const k of REQUEST_ECHO_KEYS) {
    const v = response[k];
    if (isObject(v) && v.$task_runtime_echo === ECHO.$task_runtime_echo) response[k] = echo[k];
  }
  return data;
}
/** The status sets as SQL lists (constants of task.ts, never user input). */
const sqlList = (statuses: readonly string[]) => statuses.map((s) => `'${s}'`).join(', ');

const json = (v: unknown): string | null => (v === null || v === undefined ? null : JSON.stringify(v));

/** Fields a transition may change. */
export interface TaskPatch {
  status?: TaskStatus;
  statusMessage?: string | null;
  attempt?: number;
  response?: Record<string, unknown> | null;
  error?: Problem | null;
  usage?: Usage | null;
  outputTokens?: number;
  snapshot?: GenerationSnapshot | null;
  queueOrder?: number;
  priority?: number;
  /** The task's input rounds, all of them (runtime/input.ts). */
  inputRounds?: InputRound[] | null;
}

export interface NewEvent {
  type: string;
  data: Record<string, unknown>;
}

/** Bounds of the finished-task cache: entries, and characters of their stored JSON (input, response, meta…). */
export const FINISHED_CACHE_LIMITS = { entries: 2048, chars: 16 * 1024 * 1024 };

export class TaskStore {
  /**
   * Finished tasks by id, as frozen records. A succeeded, failed or cancelled task never changes again except by the
   * four write builders below that name it (delete, history purge, and — never for a finished task today — update
   * and event append), and each of them drops it here before its batch is written. So a poll of a finished task
   * (the hot path of every MCP and LMSP poller) is a Map lookup instead of a sql.js statement and three JSON.parse
   * calls. Insertion-ordered; the oldest entries go first past FINISHED_CACHE_LIMITS.
   */
  private readonly finished = new Map<string, { task: TaskRecord; chars: number }>();
  private finishedChars = 0;

  constructor(private readonly db: DurableDatabase) {}

  get database(): DurableDatabase {
    return this.db;
  }

  /** The task, or undefined. A finished task's record is shared and frozen: callers copy, never change it. */
  getTask(id: string): TaskRecord | undefined {
    const hit = this.finished.get(id);
    if (hit) return hit.task;
    const r = this.db.get(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = ?`, [id]);
    if (!r) return undefined;
    const task = toTask(r);
    if (isTerminal(task.status)) this.rememberFinished(task, r);
    return task;
  }

  private rememberFinished(task: TaskRecord, r: Row): void {
    let chars = 512;
    for (const col of ['input_json', 'response_json', 'error_json', 'usage_json', 'meta_json', 'title', 'status_message']) {
      const v = r[col];
      if (typeof v === 'string') chars += v.length;
    }
    if (chars > FINISHED_CACHE_LIMITS.chars / 8) return;
    this.finished.set(task.id, { task: deepFreeze(task), chars });
    this.finishedChars += chars;
    for (const [id, e] of this.finished) {
      if (this.finished.size <= FINISHED_CACHE_LIMITS.entries && this.finishedChars <= FINISHED_CACHE_LIMITS.chars) break;
      this.finished.delete(id);
      this.finishedChars -= e.chars;
    }
  }

  /** Called by every write builder that changes a task's row, before the batch is written. */
  private forget(id: string): void {
    const e = this.finished.get(id);
    if (!e) return;
    this.finished.delete(id);
    this.finishedChars -= e.chars;
  }

  getTaskByResponseId(responseId: string): TaskRecord | undefined {
    const r = this.db.get(`SELECT ${TASK_COLUMNS} FROM tasks WHERE response_id = ?`, [responseId]);
    return r ? toTask(r) : undefined;
  }

  snapshotOf(id: string): GenerationSnapshot | null {
    const r = this.db.get('SELECT snapshot_json FROM tasks WHERE id = ?', [id]);
    return r ? parse<GenerationSnapshot>(r.snapshot_json) : null;
  }

  /** Every input round of the task, oldest first (empty when it never asked for input). */
  inputRoundsOf(id: string): InputRound[] {
    const r = this.db.get('SELECT input_rounds_json FROM tasks WHERE id = ?', [id]);
    return (r ? parse<InputRound[]>(r.input_rounds_json) : null) ?? [];
  }

  /** Non-terminal tasks in queue order. */
  activeTasks(): TaskRecord[] {
    return this.db
      .all(
        // Named statuses, not NOT IN: the (status, queue_order) index then finds the few active rows instead of
        // scanning every task (measured at 100 k tasks: 278 ms → under 1 ms at open).
        `SELECT ${TASK_COLUMNS} FROM tasks WHERE status IN (${sqlList(ACTIVE_STATUSES)}) ORDER BY queue_order`,
      )
      .map(toTask);
  }

  /** The lowest queue order of any task (a task moved to the front of the queue goes below it). */
  minQueueOrder(): number {
    let min = 0;
    for (const status of TASK_STATUSES) {
      min = Math.min(min, Number(this.db.get('SELECT MIN(queue_order) AS m FROM tasks WHERE status = ?', [status])?.m ?? 0));
    }
    return min;
  }

  maxQueueOrder(): number {
    // One index lookup per status ((status, queue_order) index) instead of a scan of every task (118 ms at 100 k).
    let max = 0;
    for (const status of TASK_STATUSES) {
      max = Math.max(max, Number(this.db.get('SELECT MAX(queue_order) AS m FROM tasks WHERE status = ?', [status])?.m ?? 0));
    }
    return max;
  }

  /** Newest first, keyset-paginated on (created_at, id). */
  listTasks(q: {
    principal?: string;
    statuses?: readonly TaskStatus[];
    origin?: TaskOrigin;
    before?: { createdAt: number; id: string };
    limit: number;
  }): TaskRecord[] {
    const where: string[] = [];
    const params: SqlParam[] = [];
    if (q.principal !== undefined) {
      where.push('principal = ?');
      params.push(q.principal);
    }
    if (q.statuses?.length) {
      where.push(`status IN (${q.statuses.map(() => '?').join(', ')})`);
      params.push(...q.statuses);
    }
    if (q.origin) {
      where.push('origin = ?');
      params.push(q.origin);
    }
    if (q.before) {
      where.push('(created_at < ? OR (created_at = ? AND id < ?))');
      params.push(q.before.createdAt, q.before.createdAt, q.before.id);
    }
    params.push(q.limit);
    const sql = `SELECT ${TASK_COLUMNS} FROM tasks ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY created_at DESC, id DESC LIMIT ?`;
    return this.db.all(sql, params).map(toTask);
  }

  /**
   * Bytes a principal has in the store: its task rows' JSON columns (prompt, response, snapshot, input rounds,
   * error, usage, meta) and its tasks' event rows (type and payload), which echo the request (instructions, tool
   * schemas, text format) and carry the output a second and third time (deltas with their logprobs, the final
   * response). octet_length reads the record header, not the text (overflow pages stay unread). One sum over the
   * principal's task rows (tasks_by_principal) and one over their events (the events primary key, per task).
   * Measured (2-core machine, sql.js 3.54): 8 ms for a
   * principal with 1 000 tasks / 13 000 events, 35–45 ms with 5 000 / 65 000 (the events' part: ~0.5 µs a row; the
   * task rows alone 8 ms), so the runtime's meter (shares.ts) counts between its rare recounts.
   */
  storedBytes(principal: string): number {
    const r = this.db.get(
      `SELECT (SELECT TOTAL(octet_length(input_json)) + TOTAL(octet_length(response_json)) + TOTAL(octet_length(snapshot_json))
                 + TOTAL(octet_length(input_rounds_json)) + TOTAL(octet_length(error_json)) + TOTAL(octet_length(usage_json))
                 + TOTAL(octet_length(meta_json)) FROM tasks WHERE principal = ?)
            + (SELECT TOTAL(octet_length(e.data_json)) + TOTAL(octet_length(e.type))
                 FROM tasks t JOIN events e ON e.task_id = t.id WHERE t.principal = ?) AS n`,
      [principal, principal],
    );
    return Number(r?.n ?? 0);
  }

  /**
   * Bytes a write batch stores: the lengths of its text parameters (the JSON columns and event payloads, ids and
   * messages too). The stored-bytes meter adds them as a principal's tasks write, between its recounts; a replaced
   * value (a snapshot, a response) is counted again, which the next recount corrects (over, never under).
   */
  static bytesOf(ops: readonly WriteOp[]): number {
    let n = 0;
    for (const [, params] of ops) for (const v of params) if (typeof v === 'string') n += Buffer.byteLength(v);
    return n;
  }

  /** Tasks per status (of one principal, when given), without those whose ttl has passed at `now` (gone for clients). */
  countByStatus(now: number, principal?: string): Array<{ status: TaskStatus; n: number }> {
    const live = '(expires_at IS NULL OR expires_at > ?)';
    const rows =
      principal === undefined
        ? this.db.all(`SELECT status, COUNT(*) AS n FROM tasks WHERE ${live} GROUP BY status`, [now])
        : this.db.all(`SELECT status, COUNT(*) AS n FROM tasks WHERE principal = ? AND ${live} GROUP BY status`, [principal, now]);
    return rows.map((r) => ({ status: r.status as TaskStatus, n: Number(r.n) }));
  }

  readEvents(taskId: string, afterSeq: number, limit = 100_000): TaskEvent[] {
    let request: ResponseRequest | undefined;
    return this.db
      .all('SELECT seq, type, data_json, created_at FROM events WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?', [taskId, afterSeq, limit])
      .map((r) => {
        const json = String(r.data_json);
        let data = JSON.parse(json) as Record<string, unknown>;
        if (json.includes(ECHO_MARK)) data = restoreEcho(data, (request ??= this.getTask(taskId)?.request));
        return { taskId, seq: Number(r.seq), type: String(r.type), data, createdAt: Number(r.created_at) };
      });
  }

  findIdempotencyKey(principal: string, scope: string, key: string): { fingerprint: string; taskId: string; createdAt: number } | undefined {
    const r = this.db.get('SELECT fingerprint, task_id, created_at FROM idempotency_keys WHERE principal = ? AND scope = ? AND key = ?', [
      principal,
      scope,
      key,
    ]);
    return r ? { fingerprint: String(r.fingerprint), taskId: String(r.task_id), createdAt: Number(r.created_at) } : undefined;
  }

  // ---- write-batch builders: callers combine them and hand them to DurableDatabase.write in one batch ----

  insertTaskOps(t: TaskRecord, queueOrder: number): WriteOp[] {
    this.forget(t.id);
    return [
      [
        // One line: the statement text travels in every journal record.
        'INSERT INTO tasks (id, response_id, origin, principal, title, model, input_json, status, status_message, created_at, updated_at, on_restart, attempt, ttl_ms, expires_at, deadline_at, response_json, error_json, usage_json, output_tokens, meta_json, next_seq, oldest_seq, queue_order, priority, snapshot_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)',
        [
          t.id,
          t.responseId,
          t.origin,
          t.principal,
          t.title,
          t.model,
          JSON.stringify(t.request),
          t.status,
          t.statusMessage,
          t.createdAt,
          t.updatedAt,
          t.onRestart,
          t.attempt,
          t.ttlMs,
          t.expiresAt,
          t.deadlineAt,
          json(t.response),
          json(t.error),
          json(t.usage),
          t.outputTokens,
          JSON.stringify(t.meta),
          t.nextSeq,
          t.oldestSeq,
          queueOrder,
          t.priority,
        ],
      ],
    ];
  }

  updateTaskOps(id: string, patch: TaskPatch, updatedAt: number): WriteOp[] {
    this.forget(id);
    const sets: string[] = ['updated_at = ?'];
    const params: SqlParam[] = [updatedAt];
    const add = (col: string, v: SqlParam) => {
      sets.push(`${col} = ?`);
      params.push(v);
    };
    if (patch.status !== undefined) add('status', patch.status);
    if (patch.statusMessage !== undefined) add('status_message', patch.statusMessage);
    if (patch.attempt !== undefined) add('attempt', patch.attempt);
    if (patch.response !== undefined) add('response_json', json(patch.response));
    if (patch.error !== undefined) add('error_json', json(patch.error));
    if (patch.usage !== undefined) add('usage_json', json(patch.usage));
    if (patch.outputTokens !== undefined) add('output_tokens', patch.outputTokens);
    if (patch.snapshot !== undefined) add('snapshot_json', json(patch.snapshot));
    if (patch.queueOrder !== undefined) add('queue_order', patch.queueOrder);
    if (patch.priority !== undefined) add('priority', patch.priority);
    if (patch.inputRounds !== undefined) add('input_rounds_json', json(patch.inputRounds));
    params.push(id);
    return [[`UPDATE tasks SET ${sets.join(', ')} WHERE id = ?`, params]];
  }

  /**
   * A new task with its first events (seq 0, 1, …), as createTask writes it: the row already carries next_seq, so
   * the batch has no UPDATE of the row it just inserted (one statement fewer per create in sql.js).
   */
  createTaskOps(t: TaskRecord, queueOrder: number, events: NewEvent[], createdAt: number): WriteOp[] {
    const ops = this.insertTaskOps({ ...t, nextSeq: events.length }, queueOrder);
    // createTask's two first events carry one data object: serialised once.
    let data: unknown;
    let json = '';
    for (let i = 0; i < events.length; i++) {
      const e = events[i];
      if (i === 0 || e.data !== data) json = storedEventJson(t.request, (data = e.data));
      ops.push([EVENT_INSERT, [t.id, i, e.type, json, createdAt]]);
    }
    return ops;
  }

  /** Appends events at seqs firstSeq, firstSeq+1, … and advances next_seq. */
  appendEventOps(taskId: string, request: ResponseRequest, firstSeq: number, events: NewEvent[], createdAt: number): WriteOp[] {
    this.forget(taskId);
    const ops: WriteOp[] = events.map((e, i) => [EVENT_INSERT, [taskId, firstSeq + i, e.type, storedEventJson(request, e.data), createdAt]]);
    ops.push(['UPDATE tasks SET next_seq = ? WHERE id = ?', [firstSeq + events.length, taskId]]);
    return ops;
  }

  insertIdempotencyOps(principal: string, scope: string, key: string, fingerprint: string, taskId: string, now: number): WriteOp[] {
    return [
      [
        'INSERT OR REPLACE INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES (?, ?, ?, ?, ?, ?)',
        [principal, scope, key, fingerprint, taskId, now],
      ],
    ];
  }

  deleteTaskOps(id: string): WriteOp[] {
    this.forget(id);
    return [
      ['DELETE FROM events WHERE task_id = ?', [id]],
      ['DELETE FROM tasks WHERE id = ?', [id]],
    ];
  }

  purgeEventsOps(id: string, nextSeq: number): WriteOp[] {
    this.forget(id);
    return [
      ['DELETE FROM events WHERE task_id = ?', [id]],
      ['UPDATE tasks SET oldest_seq = ? WHERE id = ?', [nextSeq, id]],
    ];
  }

  // ---- retention queries ----

  expiredTaskIds(now: number, limit: number): string[] {
    return this.db.all('SELECT id FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?', [now, limit]).map((r) => String(r.id));
  }

  terminalTasksUpdatedBefore(cutoff: number, limit: number): string[] {
    return this.db
      .all(
        // `+status`: keep the planner on the updated_at index (a status index scan read all 100 k finished tasks: 90 ms).
        `SELECT id FROM tasks WHERE updated_at < ? AND +status IN (${sqlList(TERMINAL_STATUSES)}) LIMIT ?`,
        [cutoff, limit],
      )
      .map((r) => String(r.id));
  }

  tasksWithHistoryBefore(cutoff: number, limit: number): Array<{ id: string; nextSeq: number }> {
    return this.db
      .all(
        `SELECT id, next_seq FROM tasks WHERE updated_at < ? AND oldest_seq < next_seq
           AND +status IN (${sqlList(TERMINAL_STATUSES)}) LIMIT ?`,
        [cutoff, limit],
      )
      .map((r) => ({ id: String(r.id), nextSeq: Number(r.next_seq) }));
  }

  hasIdempotencyKeysBefore(cutoff: number): boolean {
    return this.db.get('SELECT 1 AS x FROM idempotency_keys WHERE created_at < ? LIMIT 1', [cutoff]) !== undefined;
  }

  purgeIdempotencyOps(cutoff: number): WriteOp[] {
    return [['DELETE FROM idempotency_keys WHERE created_at < ?', [cutoff]]];
  }
}
