// Group commit and deferred acknowledgement: batches written while a sync is under way share the next fdatasync; a
// create and the start of its run are synced in the background while the backend starts; nothing of a batch is
// visible (events, task changes, reads, the create's promise) before it is synced; a failed sync rolls back exactly
// the batches it carried. The syncs go through a seam (`DatabaseOptions.fileOps`) that counts them, holds a
// background sync's completion until the test releases it, and can fail one; the real fdatasync still runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import type { GenerateOptions, GenerateResult, ModelBackend, ModelInfo } from '../../../../src/runtime/backend';
import { isRuntimeError, type RuntimeError } from '../../../../src/runtime/errors';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { DurableDatabase, type JournalFileOps } from '../../../../src/runtime/store/database';
import { readJournal } from '../../../../src/runtime/store/journal';
import type { TaskEvent } from '../../../../src/runtime/task';
import { taskReaches } from '../../../support/wait';
import { tempDir } from '../helpers';

/** Counts syncs; background syncs complete only when released (in order); one can be made to fail. */
class HeldSyncs implements JournalFileOps {
  mainSyncs = 0;
  poolSyncs = 0;
  private readonly done: Array<() => void> = [];
  private readonly waiters: Array<() => void> = [];
  private failNext: string | undefined;

  private failNextMain: string | undefined;

  fdatasyncSync = (fd: number): void => {
    this.mainSyncs++;
    fs.fdatasyncSync(fd);
    const fail = this.failNextMain;
    this.failNextMain = undefined;
    if (fail) throw Object.assign(new Error(`${fail}: injected`), { code: fail });
  };

  /** The next sync on the loop fails with `code` (after the real sync). */
  failNextMainSync(code: string): void {
    this.failNextMain = code;
  }

  fdatasync = (fd: number, callback: (err: NodeJS.ErrnoException | null) => void): void => {
    this.poolSyncs++;
    const fail = this.failNext;
    this.failNext = undefined;
    fs.fdatasync(fd, (err) => {
      this.done.push(() => callback(fail ? Object.assign(new Error(`${fail}: injected`), { code: fail }) : err));
      this.waiters.shift()?.();
    });
  };

  /** The next background sync to start fails with `code` (after the real sync). */
  failNextPoolSync(code: string): void {
    this.failNext = code;
  }

  /** Completes the oldest background sync (once its real fdatasync has returned). */
  async releaseOne(): Promise<void> {
    if (this.done.length === 0) await new Promise<void>((resolve) => this.waiters.push(resolve));
    this.released++;
    this.done.shift()!();
  }

  /** Completes every background sync started so far. */
  async releaseAll(): Promise<void> {
    while (this.released < this.poolSyncs) await this.releaseOne();
  }
  private released = 0;
}

const insert = (i: number) =>
  [
    [
      `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
      [`k${i}`, `f${i}`, `t${i}`, i],
    ],
  ] as Array<[string, Array<string | number | null>]>;
const count = (db: DurableDatabase) => Number(db.get('SELECT COUNT(*) AS n FROM idempotency_keys')?.n);
const newestJournal = (dir: string) =>
  `${dir}/${fs
    .readdirSync(dir)
    .filter((n) => /^journal-\d+\.log$/.test(n))
    .sort()
    .pop()!}`;

test('batches written while a sync is under way share the next one: 8 batches, 2 fdatasyncs, told in order', async () => {
  const dir = tempDir();
  const seam = new HeldSyncs();
  const db = await DurableDatabase.open(dir, { fileOps: seam });
  const before = { ...db.stats, main: seam.mainSyncs, pool: seam.poolSyncs };
  const durable: number[] = [];
  for (let i = 1; i <= 8; i++) {
    db.write(insert(i), { defer: { onDurable: () => durable.push(i), onFailed: (e) => assert.fail(e.message) } });
  }
  // One sync is under way (it covers batch 1); batches 2–8 came while it ran and wait for the next one.
  assert.equal(seam.poolSyncs - before.pool, 1);
  assert.deepEqual(durable, [], 'nothing is told before its sync');
  assert.ok(db.unsettled);
  await seam.releaseOne();
  assert.deepEqual(durable, [1]);
  assert.equal(seam.poolSyncs - before.pool, 2, 'one more sync for the seven batches written meanwhile');
  await seam.releaseOne();
  assert.deepEqual(durable, [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.equal(db.unsettled, false);
  assert.equal(db.stats.batches - before.batches, 8);
  assert.equal(db.stats.syncs - before.syncs, 2, 'fewer fdatasyncs than batches');
  assert.equal(seam.mainSyncs, before.main, 'none of them synced on this thread');
  await db.close();
  const reopened = await DurableDatabase.open(dir);
  assert.equal(count(reopened), 8);
  await reopened.close();
});

test('a plain write syncs on this thread and makes every deferred batch before it durable first, told first', async () => {
  const dir = tempDir();
  const seam = new HeldSyncs();
  const db = await DurableDatabase.open(dir, { fileOps: seam });
  const order: string[] = [];
  const main = seam.mainSyncs;
  db.write(insert(1), { defer: { onDurable: () => order.push('deferred 1 durable'), onFailed: (e) => assert.fail(e.message) } });
  db.write(insert(2), { defer: { onDurable: () => order.push('deferred 2 durable'), onFailed: (e) => assert.fail(e.message) } });
  db.write(insert(3));
  order.push('plain 3 returned');
  assert.deepEqual(order, ['deferred 1 durable', 'deferred 2 durable', 'plain 3 returned']);
  assert.equal(seam.mainSyncs, main + 1, 'one sync for all three');
  // The background sync that was under way completes later and changes nothing.
  await seam.releaseAll();
  assert.deepEqual(order, ['deferred 1 durable', 'deferred 2 durable', 'plain 3 returned']);
  assert.equal(count(db), 3);
  await db.close();
});

test('a failed background sync rolls back exactly the batches not yet synced; synced ones stay; writes resume after a probe', async () => {
  const dir = tempDir();
  const seam = new HeldSyncs();
  const logs: string[] = [];
  const db = await DurableDatabase.open(dir, { fileOps: seam, log: (m) => logs.push(m) });
  const told: string[] = [];
  const failures: RuntimeError[] = [];
  const deferred = (i: number) => ({
    onDurable: () => told.push(`durable ${i}`),
    onFailed: (e: RuntimeError) => {
      told.push(`failed ${i}`);
      failures.push(e);
    },
  });
  db.write(insert(1), { defer: deferred(1) });
  db.write(insert(2), { defer: deferred(2) });
  db.write(insert(3), { defer: deferred(3) });
  // The first sync covers batch 1 and succeeds; the next one (batches 2 and 3) fails.
  seam.failNextPoolSync('EIO');
  await seam.releaseOne();
  assert.deepEqual(told, ['durable 1']);
  await seam.releaseOne();
  assert.deepEqual(told, ['durable 1', 'failed 2', 'failed 3']);
  assert.ok(failures.every((e) => isRuntimeError(e, 'store_unwritable')));
  assert.equal((db.writeError as NodeJS.ErrnoException).code, 'EIO');
  assert.ok(logs.some((l) => /journal sync failed \(EIO\)/.test(l)));
  // In memory: batch 1 kept (it was synced and told), 2 and 3 gone; on disk the journal ends after batch 1.
  assert.equal(count(db), 1);
  assert.equal(db.get("SELECT key FROM idempotency_keys WHERE key = 'k1'")?.key, 'k1');
  const onDisk = readJournal(newestJournal(dir)).records.map((r) => r.seq);
  assert.equal(onDisk[onDisk.length - 1], db.commitSeq, 'the failed batches are zeroed in the journal');
  // The next write probes (zeroes what the failed batches left, syncs) and goes through.
  db.write(insert(4));
  assert.equal(db.writeError, undefined);
  assert.deepEqual(
    [...db.all('SELECT key FROM idempotency_keys ORDER BY key')].map((r) => r.key),
    ['k1', 'k4'],
  );
  await db.close();
  const reopened = await DurableDatabase.open(dir);
  assert.deepEqual(
    [...reopened.all('SELECT key FROM idempotency_keys ORDER BY key')].map((r) => r.key),
    ['k1', 'k4'],
  );
  assert.deepEqual(reopened.report.quarantined, []);
  assert.deepEqual(reopened.report.journalDamage, []);
  await reopened.close();
});

test('a background sync started before a rollback does not count for batches written after it (sequence numbers reused)', async () => {
  const dir = tempDir();
  const seam = new HeldSyncs();
  const db = await DurableDatabase.open(dir, { fileOps: seam, log: () => {} });
  const told: string[] = [];
  const deferred = (i: number) => ({ onDurable: () => told.push(`durable ${i}`), onFailed: () => told.push(`failed ${i}`) });
  db.write(insert(1), { defer: deferred(1) }); // its background sync is held
  const seq1 = db.commitSeq;
  seam.failNextMainSync('EIO');
  assert.throws(
    () => db.write(insert(2)),
    (e: unknown) => isRuntimeError(e, 'store_unwritable'),
  );
  assert.deepEqual(told, ['failed 1']);
  // The next write probes and goes through, with the sequence number batch 1 had; the held sync is still under way.
  db.write(insert(3), { defer: deferred(3) });
  assert.equal(db.commitSeq, seq1);
  await seam.releaseOne(); // the old sync: it started before batch 3 was written
  assert.deepEqual(told, ['failed 1'], 'batch 3 is not durable by a sync that started before it');
  await seam.releaseOne(); // batch 3's own sync
  assert.deepEqual(told, ['failed 1', 'durable 3']);
  await db.close();
  const reopened = await DurableDatabase.open(dir);
  assert.deepEqual(
    [...reopened.all('SELECT key FROM idempotency_keys ORDER BY key')].map((r) => r.key),
    ['k3'],
  );
  await reopened.close();
});

/** A loaded model whose generation waits for the test; it records that it started and whether it was stopped. */
class GatedBackend implements ModelBackend {
  readonly name = 'gated';
  supportsResume(): boolean {
    return false;
  }
  started: GenerateOptions | undefined;
  private onStart: (() => void) | undefined;
  private open: (() => void) | undefined;
  listModels(): ModelInfo[] {
    return [{ id: 'm', source: 'gated', state: 'loaded', maxContextLength: null, demo: false }];
  }
  resolveModel(model: string | undefined): string | undefined {
    return model === undefined || model === 'm' ? 'm' : undefined;
  }
  isLoaded(): boolean {
    return true;
  }
  async load(): Promise<void> {}
  /** Resolves once generate() was called. */
  whenStarted(): Promise<GenerateOptions> {
    return this.started ? Promise.resolve(this.started) : new Promise((r) => (this.onStart = () => r(this.started!)));
  }
  /** Lets the generation emit its text and finish. */
  finish(): void {
    this.open?.();
  }
  async generate(_request: unknown, options: GenerateOptions): Promise<GenerateResult> {
    this.started = options;
    this.onStart?.();
    await new Promise<void>((resolve) => {
      this.open = resolve;
      options.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    if (options.signal.aborted) return { finishReason: 'aborted', inputTokens: 1, outputTokens: 0 };
    options.onText('Hello', 1);
    return { finishReason: 'stop', inputTokens: 1, outputTokens: 1 };
  }
  async dispose(): Promise<void> {}
}

const input = { model: 'm', input: 'hi', max_output_tokens: 5 };
const types = (events: TaskEvent[]) => events.map((e) => e.type);
const START_EVENTS = ['task_runtime:task.status', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'];

test('createTaskAsync: the model starts while the create is synced; nothing is visible before; a read syncs both batches at once', async () => {
  const seam = new HeldSyncs();
  const backend = new GatedBackend();
  const rt = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0, database: { fileOps: seam } });
  const changes: string[] = [];
  rt.onTaskChange((t) => changes.push(t.status));
  const before = { ...rt.storeStats, main: seam.mainSyncs };
  let resolved = false;
  const created = rt.createTaskAsync({ origin: 'lmsp', principal: 'p', input });
  void created.then(() => (resolved = true));

  // The backend runs before the create is durable: the create and the start are journalled, neither synced.
  await backend.whenStarted();
  assert.equal(rt.storeStats.batches - before.batches, 2, 'create + start written');
  assert.equal(rt.storeStats.syncs - before.syncs, 0, 'neither synced yet');
  assert.deepEqual(changes, [], 'no task change told before its sync');
  assert.equal(resolved, false, 'the create is not acknowledged before its sync');

  // A read answered to anyone syncs first: one fdatasync (on this thread) for both batches, then they are told.
  const listed = rt.listTasks({});
  assert.equal(seam.mainSyncs, before.main + 1);
  assert.equal(rt.storeStats.syncs - before.syncs, 1, 'one sync for two batches');
  assert.deepEqual(changes, ['queued', 'loading', 'running']);
  assert.equal(listed.tasks.length, 1);
  assert.equal(listed.tasks[0].status, 'running');
  const { task } = await created;
  assert.deepEqual(types(rt.readEvents(task.id)), ['response.created', 'response.queued', ...START_EVENTS]);

  backend.finish();
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'succeeded');
  await seam.releaseAll();
  await rt.close();
});

test('createTaskAsync without reads: the create is acknowledged at its background sync, the start at the next; streams replay only synced events', async () => {
  const seam = new HeldSyncs();
  const backend = new GatedBackend();
  const rt = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0, database: { fileOps: seam } });
  const changes: string[] = [];
  rt.onTaskChange((t) => changes.push(t.status));
  const created = rt.createTaskAsync({ origin: 'lmsp', principal: 'p', input });
  await backend.whenStarted();
  const pool = seam.poolSyncs;

  // The first background sync covers the create only (the start was written while it ran).
  await seam.releaseOne();
  const { task } = await created;
  assert.deepEqual(changes, ['queued']);
  assert.equal(seam.poolSyncs, pool + 1, 'the start gets the next sync');

  // A stream opened now replays what is durable and gets the start's events once they are, in order, no gap.
  const got: TaskEvent[] = [];
  const sub = rt.subscribe(task.id, undefined, (e) => got.push(e));
  assert.deepEqual(types(got), ['response.created', 'response.queued']);
  assert.deepEqual(changes, ['queued'], 'subscribing synced nothing');
  await seam.releaseOne();
  assert.deepEqual(changes, ['queued', 'loading', 'running']);
  assert.deepEqual(types(got), ['response.created', 'response.queued', ...START_EVENTS]);
  assert.deepEqual(
    got.map((e) => e.seq),
    got.map((_, i) => i),
  );

  backend.finish();
  await taskReaches(rt, task.id, (t) => t.status === 'succeeded', 'the task to succeed');
  assert.deepEqual(types(got).slice(-5), [
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.completed',
  ]);
  sub.close();
  await seam.releaseAll();
  await rt.close();
});

test('createTaskAsync: a failed sync rolls back the create and the start, stops the run, tells no one; the store recovers', async () => {
  const dir = tempDir();
  const seam = new HeldSyncs();
  const backend = new GatedBackend();
  const logs: string[] = [];
  const rt = await TaskRuntime.open({ dataDir: dir, backend, deltaFlushMs: 0, database: { fileOps: seam }, log: (m) => logs.push(m) });
  const changes: string[] = [];
  rt.onTaskChange((t) => changes.push(t.status));
  seam.failNextPoolSync('EIO');
  const created = rt.createTaskAsync({ origin: 'lmsp', principal: 'p', input });
  const rejected = assert.rejects(created, (e: unknown) => isRuntimeError(e, 'store_unwritable'));
  const options = await backend.whenStarted();
  await seam.releaseOne();
  await rejected;
  assert.ok(options.signal.aborted, 'the run the create began was stopped');
  assert.deepEqual(changes, [], 'nothing was told');
  assert.equal(rt.listTasks({}).tasks.length, 0, 'the task does not exist');
  assert.ok(logs.some((l) => /journal sync failed \(EIO\)/.test(l)));

  // The next create probes the journal and goes through; after a restart only it is there.
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input });
  backend.finish();
  await rt.close();
  await seam.releaseAll();
  const reopened = await TaskRuntime.open({ dataDir: dir, backend: new GatedBackend() });
  assert.deepEqual(
    reopened.listTasks({}).tasks.map((t) => t.id),
    [task.id],
  );
  assert.deepEqual(reopened.storeReport.journalDamage, []);
  await reopened.close();
});
test('a failing statement changes nothing and the store keeps working', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  a.write(insert(1));
  assert.throws(() => a.write([...insert(2), ['INSERT INTO no_such_table VALUES (1)', []]]));
  assert.equal(count(a), 1);
  a.write(insert(3));
  await a.close();
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 2);
  await b.close();
});

test('a failing batch after many synced ones (not yet committed in memory) takes back only itself', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 40; i++) a.write(insert(i));
  // The duplicate key fails after the first statement of the batch was applied.
  assert.throws(() => a.write([...insert(100), ...insert(5)]));
  assert.equal(count(a), 40);
  assert.equal(a.commitSeq, 40);
  a.write(insert(41));
  assert.equal(count(a), 41);
  await a.close();
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 41);
  assert.equal(b.get("SELECT COUNT(*) AS n FROM idempotency_keys WHERE key = 'k100'")?.n, 0);
  await b.close();
});

test('a durable callback that writes: the callbacks queued before its own write run first, in batch order', async () => {
  const dir = tempDir();
  const db = await DurableDatabase.open(dir);
  const told: string[] = [];
  let bothTold!: () => void;
  const done = new Promise<void>((resolve) => (bothTold = resolve));
  // A and B share one background sync; A's callback writes C with a sync on the loop, which makes B durable too.
  db.write(insert(1), {
    defer: {
      onDurable: () => {
        told.push('A');
        db.write(insert(3));
        told.push('C written');
      },
      onFailed: () => told.push('A failed'),
    },
  });
  db.write(insert(2), {
    defer: {
      onDurable: () => {
        told.push('B');
        bothTold();
      },
      onFailed: () => told.push('B failed'),
    },
  });
  assert.deepEqual(told, [], 'nothing is told before a sync');
  await done;
  assert.deepEqual(told, ['A', 'B', 'C written']);
  assert.equal(db.unsettled, false);
  assert.equal(count(db), 3);
  await db.close();
});
