// TaskService on real runtimes. Window ownership: two editor windows (two extension-host processes) share one data
// directory; exactly one owns the store and the listener, the other attaches to it, sees the same tasks live, and
// takes over (running restart recovery) when the owner goes away, whether it closes or crashes. Store damage: a
// window that opens a store whose newest journal is damaged in the middle tells the user (the extension shows a
// warning notification from the callback) and logs exactly what was lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { TaskService } from '../../../../src/extension/host/taskService';
import { DEFAULT_SETTINGS } from '../../../../src/extension/model/settings';
import type { TaskInfo } from '../../../../src/extension/model/taskSource';
import { damagedStore } from '../../../fixtures/damagedStore';
import { testModelPath } from '../../../fixtures/testModel';
import { waitFor } from '../../../support/wait';
import { tempDir } from '../../runtime/helpers';

function ownerWindow(dataDir: string, token: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(__dirname, '../../../fixtures/windowChild.js'), dataDir, token, testModelPath()], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) =>
      line === 'ROLE owner' ? resolve(child) : reject(new Error(`first window: ${line}`)),
    );
    child.once('exit', (code) => reject(new Error(`first window exited with ${code}`)));
  });
}

for (const ending of ['closes', 'crashes'] as const) {
  test(`one owner, one attached window sharing its tasks, and take-over when the owner ${ending}`, async () => {
    const dataDir = tempDir('tr-windows-');
    const token = randomBytes(24).toString('base64url');
    const owner = await ownerWindow(dataDir, token);
    const second = new TaskService({
      dataDir,
      settings: () => ({ ...DEFAULT_SETTINGS, model: testModelPath() }),
      token: async () => token,
      log: () => {},
      pollMs: 100,
    });
    try {
      await second.start();
      assert.equal(second.role, 'client', 'a second window never opens the store itself');
      await second.source.ready();

      // A task created in the attached window runs in the owner and reaches this window through the change feed. It
      // was made in the editor, and the owner stores it so (the editor token may say so; see docs/lmsp.md).
      const seen: TaskInfo[] = [];
      const sub = second.source.onDidChangeTask((t) => seen.push(t));
      await second.source.connected();
      const created = await second.source.create({ prompt: 'from the second window', maxOutputTokens: 6 });
      assert.equal(created.origin, 'editor');
      await waitFor(() => seen.some((t) => t.id === created.id && t.status === 'succeeded'), 'the change feed to reach the client');

      // A long task runs in the owner when it goes away; this window takes over and recovery resolves it.
      const long = await second.source.create({ prompt: 'interrupted', sampling: { temperature: 0 }, onRestart: 'fail' });
      await waitFor(() => seen.some((t) => t.id === long.id && t.status === 'running'), 'the long task to run');
      owner.kill(ending === 'closes' ? 'SIGTERM' : 'SIGKILL');
      await waitFor(() => second.role === 'owner', 'the second window to take over', 30_000);
      const recovered = await second.source.get(long.id);
      assert.equal(recovered?.status, 'failed');
      assert.equal(recovered?.error?.code, 'server_restarted');
      const kept = await second.source.get(created.id);
      assert.equal(kept?.status, 'succeeded', 'finished work is still there');
      assert.equal(kept?.origin, 'editor', 'the stored origin, read from the store this window now owns');
      sub.dispose();
    } finally {
      owner.kill('SIGKILL');
      second.dispose();
      await second.stop();
    }
  });
}

test('a damaged store is reported to the window: one warning with the number of batches lost, details in the log', async () => {
  const dataDir = tempDir('tr-damage-');
  await damagedStore(join(dataDir, 'store'));
  const logs: string[] = [];
  const warnings: Array<{ unrecoveredBatches: number; summary: string }> = [];
  const service = new TaskService({
    dataDir,
    settings: () => ({ ...DEFAULT_SETTINGS, model: testModelPath() }),
    token: async () => 'tok-damage-0123456789abcdef',
    log: (m) => logs.push(m),
    onStoreDamage: (d) => warnings.push(d),
  });
  try {
    await service.start();
    assert.equal(service.role, 'owner');
    assert.equal(warnings.length, 1, 'the user is told once');
    assert.equal(warnings[0].unrecoveredBatches, 6);
    assert.match(warnings[0].summary, /6 acknowledged write batches could not be restored/);
    assert.ok(
      logs.some((l) => /^WARNING: The task store was damaged/.test(l)),
      logs.join('\n'),
    );
    assert.ok(
      logs.some((l) =>
        /is damaged: unreadable bytes at offset \d+ \(\d+ bytes\); 1 batch missing \(seq 5\); 5 valid batches after it not replayed \(seq 6–10, bytes \d+–\d+\); copy kept as journal-\d+\.log\.corrupt-\d+/.test(
          l,
        ),
      ),
      logs.join('\n'),
    );
    assert.ok(
      fs.readdirSync(join(dataDir, 'store')).some((n) => n.includes('.corrupt-')),
      'the copy is in the data directory',
    );

    // Restarting the runtime (settings changed, Restart Server) finds a clean store: no second warning.
    await service.restart();
    assert.equal(service.role, 'owner');
    assert.equal(warnings.length, 1);
  } finally {
    service.dispose();
    await service.stop();
  }
});
