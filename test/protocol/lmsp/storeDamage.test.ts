// `serve` on a data directory whose newest journal is damaged in the middle: it starts, serves, and its log says
// what was lost (the headless counterpart of the editor's warning notification).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { damagedStore } from '../../fixtures/damagedStore';
import { call, removeDir, startServer, tempDataDir } from './harness';

test('serve logs a warning naming the batches a damaged journal cost, keeps the copy, and serves', async () => {
  const dataDir = tempDataDir();
  await damagedStore(path.join(dataDir, 'store'));
  const server = await startServer({ dataDir });
  try {
    // stderr and the ready line on stdout travel through different pipes: wait for the log, do not assume order.
    const end = Date.now() + 30_000;
    while (!/WARNING: /.test(server.stderr()) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    assert.match(server.stderr(), /WARNING: The task store was damaged: 6 acknowledged write batches could not be restored/);
    assert.match(
      server.stderr(),
      /journal-\d+\.log is damaged: unreadable bytes at offset \d+ \(\d+ bytes\); 1 batch missing \(seq 5\); 5 valid batches after it not replayed/,
    );
    assert.ok(fs.readdirSync(path.join(dataDir, 'store')).some((n) => n.includes('.corrupt-')));
    assert.equal((await call(server, 'GET', '/models')).status, 200);
  } finally {
    await server.kill();
    removeDir(dataDir);
  }
});
