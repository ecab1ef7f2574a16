// The host's side of the checkpoint worker (foldWorkerClient.ts), on the real worker thread and a real store: a
// fold writes the image a restart would build; every failure comes back as an answer, never a rejection; after
// stop() the next fold starts a new worker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { checkpointName, loadSqlJs, openImage, sqlJsWasm } from '../../../../src/runtime/store/checkpoint';
import { DurableDatabase, type WriteOp } from '../../../../src/runtime/store/database';
import { FoldWorkerClient } from '../../../../src/runtime/store/foldWorkerClient';
import { tempDir } from '../helpers';

const insert = (i: number): WriteOp[] => [
  [
    `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
    [`k${i}`, `f${i}`, `t${i}`, i],
  ],
];

/** A store with its first image (batch 0) and batches 1–n in its journal; left open, as while a fold runs. */
async function storeWith(n: number): Promise<{ dir: string; db: DurableDatabase }> {
  const dir = tempDir();
  const db = await DurableDatabase.open(dir);
  for (let i = 1; i <= n; i++) db.write(insert(i));
  assert.ok(fs.existsSync(join(dir, checkpointName(0))));
  return { dir, db };
}

/** Runs `body` on a store of n batches with `client`; the client is stopped and the store closed after it. */
async function withStore(n: number, client: FoldWorkerClient, body: (dir: string) => Promise<void>): Promise<void> {
  const { dir, db } = await storeWith(n);
  try {
    await body(dir);
  } finally {
    await client.stop();
    await db.close();
  }
}

async function rowsIn(dir: string, seq: number): Promise<number> {
  const image = openImage(await loadSqlJs(), join(dir, checkpointName(seq)), seq);
  try {
    return Number(image.exec('SELECT COUNT(*) FROM idempotency_keys')[0]?.values[0]?.[0]);
  } finally {
    image.close();
  }
}

test('a fold writes checkpoint-<upTo> holding the base image and the journal batches up to it', async () => {
  const client = new FoldWorkerClient();
  await withStore(12, client, async (dir) => {
    const reply = await client.run({ dir, base: 0, upTo: 10 });
    assert.equal(reply.ok, true, reply.error);
    assert.equal(reply.replayed, 10);
    assert.equal(reply.bytes, fs.statSync(join(dir, checkpointName(10))).size);
    assert.equal(await rowsIn(dir, 10), 10, 'batches 11 and 12 are after upTo');
    // The same worker takes the next fold.
    const next = await client.run({ dir, base: 10, upTo: 12 });
    assert.equal(next.ok, true, next.error);
    assert.equal(next.replayed, 2);
    assert.equal(await rowsIn(dir, 12), 12);
  });
});

test('a fold that cannot run answers ok: false with the reason and its errno code', async () => {
  const client = new FoldWorkerClient();
  await withStore(3, client, async (dir) => {
    const missingBase = await client.run({ dir, base: 2, upTo: 3 });
    assert.equal(missingBase.ok, false);
    assert.equal(missingBase.code, 'ENOENT');
    const beyond = await client.run({ dir, base: 0, upTo: 9 });
    assert.equal(beyond.ok, false);
    assert.match(beyond.error ?? '', /missing/);
    assert.ok(!fs.existsSync(join(dir, checkpointName(9))));
  });
});

test('stop() answers the fold in flight with ok: false; the next fold starts a new worker', async () => {
  const client = new FoldWorkerClient();
  await withStore(5, client, async (dir) => {
    const inFlight = client.run({ dir, base: 0, upTo: 5 });
    await client.stop();
    const reply = await inFlight;
    assert.equal(reply.ok, false);
    assert.match(reply.error ?? '', /exited/);
    const again = await client.run({ dir, base: 0, upTo: 5 });
    assert.equal(again.ok, true, again.error);
    assert.equal(await rowsIn(dir, 5), 5);
  });
});

test(
  'start() runs the worker idle and unreferenced: a process that only started it exits by itself; a fold then uses it',
  { timeout: 60_000 },
  async () => {
    // The store starts its worker at open (database.ts); an idle worker must never keep a process alive.
    const client = join(__dirname, '../../../../src/runtime/store/foldWorkerClient.js');
    const child = spawn(process.execPath, ['-e', `new (require(${JSON.stringify(client)}).FoldWorkerClient)().start()`], { stdio: 'ignore' });
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);

    const started = new FoldWorkerClient();
    await withStore(4, started, async (dir) => {
      started.start();
      const reply = await started.run({ dir, base: 0, upTo: 4 });
      assert.equal(reply.ok, true, reply.error);
      assert.equal(await rowsIn(dir, 4), 4);
    });
  },
);

test('warm() runs the store statements in a worker given the host module; the same worker then folds, and stopIfIdle() leaves a fold in flight alone', async () => {
  // The store's open has the worker compile sql.js's code (checkpoint.ts): a warm-up that failed would leave the
  // restore compiling it on the host's thread, and one that broke the worker would cost the store its folds.
  const client = new FoldWorkerClient(await sqlJsWasm());
  await withStore(6, client, async (dir) => {
    const warm = await client.warm();
    assert.equal(warm.ok, true, warm.error);
    assert.ok(typeof warm.ms === 'number' && warm.ms > 0);
    const inFlight = client.run({ dir, base: 0, upTo: 6 });
    await client.stopIfIdle();
    const reply = await inFlight;
    assert.equal(reply.ok, true, reply.error);
    assert.equal(await rowsIn(dir, 6), 6);
  });
});
