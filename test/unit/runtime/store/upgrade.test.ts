// Upgrades: every store a released version wrote (test/fixtures/stores/schema-<N>/, made by storeContents.ts) opens
// with the current code, is migrated, and reads back every task, event, input round, snapshot and idempotency key
// unchanged; the runtime then recovers its unfinished tasks by their policies. A store from a newer release is
// refused with a message that says so, and not changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { DurableDatabase } from '../../../../src/runtime/store/database';
import { SCHEMA_VERSION } from '../../../../src/runtime/store/migrations';
import { TaskStore } from '../../../../src/runtime/taskStore';
import { isTerminal } from '../../../../src/runtime/task';
import { readContents, type StoreContents } from '../../../fixtures/stores/storeContents';
import type { TaskRecord } from '../../../../src/runtime/task';
import { ScriptedBackend, says } from '../../../fixtures/scriptedBackend';
import { REPO_ROOT } from '../../../support/prerequisites';
import { taskReaches } from '../../../support/wait';
import { tempDir } from '../helpers';

const FIXTURES = path.join(REPO_ROOT, 'test/fixtures/stores');
const fixtures = fs
  .readdirSync(FIXTURES)
  .filter((n) => /^schema-\d+$/.test(n))
  .sort((a, b) => Number(a.slice(7)) - Number(b.slice(7)));

/** A copy of a fixture in a temp dir (the fixture itself is never opened: opening writes). */
function copyOf(name: string): { dir: string; store: string; expected: StoreContents } {
  const dir = tempDir('tr-upgrade-');
  fs.cpSync(path.join(FIXTURES, name), dir, { recursive: true });
  const expected = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8')) as StoreContents;
  return {
    dir,
    store: path.join(dir, 'store'),
    expected: { ...expected, tasks: expected.tasks.map((t) => ({ ...t, task: inCurrentNames(t.task) })) },
  };
}

/**
 * A record as the code that wrote the fixture named its fields, in today's names: the stored columns are the same,
 * only the in-memory record was renamed (TaskRecord.input is TaskRecord.request since schema 2's code), and fields of
 * later columns read as their defaults.
 */
function inCurrentNames(task: Omit<TaskRecord, 'priority'> & { input?: TaskRecord['request']; priority?: number }): TaskRecord {
  // Schema 3 added the priority column; older rows read as the default, 0.
  const withPriority = { ...task, priority: task.priority ?? 0 };
  if (withPriority.input === undefined) return withPriority;
  const { input, ...rest } = withPriority;
  return { ...rest, request: input };
}

function hashes(dir: string): Record<string, string> {
  return Object.fromEntries(
    fs
      .readdirSync(dir)
      .sort()
      .map((n) => [
        n,
        createHash('sha256')
          .update(fs.readFileSync(path.join(dir, n)))
          .digest('hex'),
      ]),
  );
}

test('a fixture exists for the current schema (add one with storeContents.ts before changing the schema)', () => {
  assert.ok(fixtures.length >= 1, 'no store fixtures');
  assert.ok(fixtures.includes(`schema-${SCHEMA_VERSION}`), `no fixture written at schema ${SCHEMA_VERSION}`);
});

for (const name of fixtures) {
  test(`${name}: opens with the current code, nothing lost or changed, and stays so after a reopen`, async () => {
    const { store, expected } = copyOf(name);
    for (let i = 0; i < 2; i++) {
      const logs: string[] = [];
      const db = await DurableDatabase.open(store, { log: (m) => logs.push(m) });
      assert.deepEqual(db.report.journalDamage, [], logs.join('\n'));
      assert.deepEqual(db.report.quarantined, []);
      const now = readContents(db, new TaskStore(db));
      assert.equal(now.schema, SCHEMA_VERSION);
      assert.deepEqual({ ...now, schema: expected.schema }, expected);
      await db.close();
    }
  });

  test(`${name}: the runtime recovers its unfinished tasks by policy and runs them; finished ones are as they were`, async () => {
    const { dir, expected } = copyOf(name);
    // On a clock just after the fixture was written: retention would (rightly) remove finished tasks of long ago.
    const written = Math.max(...expected.tasks.map((t) => t.task.updatedAt));
    const now = () => written + 1000;
    const rt = await TaskRuntime.open({ dataDir: dir, backend: new ScriptedBackend(says('again'), { resume: true }), deltaFlushMs: 0, now });
    try {
      for (const { task } of expected.tasks) {
        const now = rt.getTask(task.id, task.principal);
        assert.ok(now, `${task.title} is readable`);
        if (isTerminal(task.status)) {
          assert.deepEqual(JSON.parse(JSON.stringify(now)), task, `${task.title} unchanged`);
          continue;
        }
        if (task.status === 'input_required' && task.onRestart !== 'fail') {
          assert.equal(now.status, 'input_required', 'still waiting for its answers');
          assert.deepEqual(Object.keys(now.inputRequests ?? {}), Object.keys(task.inputRequests ?? {}));
          continue;
        }
        const done = await taskReaches(rt, task.id, (t) => isTerminal(t.status), `${task.title} to finish`);
        const want = task.status === 'cancelling' ? 'cancelled' : task.onRestart === 'fail' ? 'failed' : 'succeeded';
        assert.equal(done.status, want, `${task.title} (${task.onRestart})`);
      }
    } finally {
      await rt.close();
    }
  });
}

test('a store written by a newer release is refused with a message that says so, and left unchanged', async () => {
  const { store } = copyOf(`schema-${SCHEMA_VERSION}`);
  const db = await DurableDatabase.open(store);
  db.write([["UPDATE meta SET value = ? WHERE key = 'schema_version'", [String(SCHEMA_VERSION + 1)]]]);
  await db.checkpoint();
  await db.close();
  const before = hashes(store);
  await assert.rejects(DurableDatabase.open(store), /written by a newer release of Task Runtime \(store schema \d+; this release reads up to \d+\)/);
  assert.deepEqual(hashes(store), before, 'nothing in the store was changed');
});

/** How to undo each migration (the store as the release before it wrote it). */
const UNDO_MIGRATION: Record<number, string> = {
  2: 'ALTER TABLE tasks DROP COLUMN input_rounds_json',
  3: 'ALTER TABLE tasks DROP COLUMN priority',
  4: 'DROP TABLE webhook_deliveries',
  5: 'DROP TABLE batch_items; DROP TABLE batches; DROP TABLE files',
};

test('a store one schema older is migrated and written out at once, so its image carries the new schema', async () => {
  const { store, expected } = copyOf(`schema-${SCHEMA_VERSION}`);
  // The store as the release before the newest migration wrote it: that migration undone, its version set back.
  const db = await DurableDatabase.open(store);
  const undo = UNDO_MIGRATION[SCHEMA_VERSION];
  assert.ok(undo, `say how to undo migration ${SCHEMA_VERSION} in UNDO_MIGRATION`);
  db.write([
    // One statement per op (a prepared statement runs only its first).
    ...undo.split(';').map((sql): [string, []] => [sql.trim(), []]),
    ["UPDATE meta SET value = ? WHERE key = 'schema_version'", [String(SCHEMA_VERSION - 1)]],
  ]);
  await db.checkpoint();
  await db.close();
  const logs: string[] = [];
  const migrated = await DurableDatabase.open(store, { log: (m) => logs.push(m) });
  assert.equal(migrated.report.schemaFrom, SCHEMA_VERSION - 1);
  assert.ok(logs.includes(`store: migrated from schema ${SCHEMA_VERSION - 1} to ${SCHEMA_VERSION}`), logs.join('\n'));
  const contents = readContents(migrated, new TaskStore(migrated));
  assert.equal(contents.tasks.length, expected.tasks.length);
  // Killed right after the open: the image written at open already says the new schema.
  const again = await DurableDatabase.open(store);
  assert.equal(again.report.schemaFrom, SCHEMA_VERSION);
  assert.equal(again.report.replayedBatches, 0);
  await again.close();
  await migrated.close().catch(() => undefined);
});
