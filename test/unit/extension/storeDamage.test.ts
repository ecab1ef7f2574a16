// A window that opens a store whose newest journal is damaged in the middle tells the user (the extension shows a
// warning notification from this callback) and logs exactly what was lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { TaskService } from '../../../src/extension/host/taskService';
import { DEFAULT_SETTINGS } from '../../../src/extension/model/settings';
import { damagedStore } from '../../fixtures/damagedStore';
import { testModelPath } from '../../fixtures/testModel';
import { tempDir } from '../runtime/helpers';

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
    assert.ok(logs.some((l) => /^WARNING: The task store was damaged/.test(l)), logs.join('\n'));
    assert.ok(logs.some((l) => /is damaged: unreadable bytes at offset \d+ \(\d+ bytes\); 1 batch missing \(seq 5\); 5 valid batches after it not replayed \(seq 6–10, bytes \d+–\d+\); copy kept as journal-\d+\.log\.corrupt-\d+/.test(l)), logs.join('\n'));
    assert.ok(fs.readdirSync(join(dataDir, 'store')).some((n) => n.includes('.corrupt-')), 'the copy is in the data directory');

    // Restarting the runtime (settings changed, Restart Server) finds a clean store: no second warning.
    await service.restart();
    assert.equal(service.role, 'owner');
    assert.equal(warnings.length, 1);
  } finally {
    service.dispose();
    await service.stop();
  }
});
