// The per-principal stored-bytes cap (runtime/shares.ts) bounds the store itself: what a principal's tasks store
// counts where it is stored (the task rows and every event that echoes the request or carries the output again), so
// a principal filled to its cap is refused further creates (limit_exceeded, 429 at the doors) while the database and
// its checkpoint image stay within a small multiple of the cap; deleting the tasks gives the space back in the next
// image. Real runtime and store, scripted backend (no model).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { RuntimeError } from '../../../src/runtime/errors';
import { listFiles, checkpointName } from '../../../src/runtime/store/checkpoint';
import { ScriptedBackend, says } from '../../fixtures/scriptedBackend';
import { tempDir } from './helpers';

const CAP = 4 * 1024 * 1024;
/** Echoed by created, queued, in_progress and the final response: five copies with the prompt's own. */
const INSTRUCTIONS = 'i'.repeat(16 * 1024);
/** 160 deltas of 100 characters: the output stored in its deltas, the done events, the final response and the row. */
const OUTPUT = Array.from({ length: 160 }, (_, i) => `${String(i).padStart(3, '0')}${'o'.repeat(97)}`);

function newestImageBytes(dir: string): number {
  const { checkpoints } = listFiles(dir);
  return fs.statSync(join(dir, checkpointName(checkpoints[checkpoints.length - 1]))).size;
}

test('a principal filled to its stored-bytes cap is refused, and the store stays within twice the cap; deletes give the space back', async (t) => {
  const dataDir = tempDir();
  const store = join(dataDir, 'store');
  const runtime = await TaskRuntime.open({
    dataDir,
    backend: new ScriptedBackend(says(...OUTPUT)),
    limits: { maxStoredBytesPerPrincipal: CAP },
  });
  const ids: string[] = [];
  let refused: RuntimeError | undefined;
  for (let i = 0; i < 400 && !refused; i++) {
    try {
      const { task } = runtime.createTask({
        origin: 'lmsp',
        principal: 'alice',
        input: { model: 'm', input: `task ${i}`, instructions: INSTRUCTIONS },
      });
      ids.push(task.id);
      const done = await runtime.waitForTerminal(task.id);
      assert.equal(done.status, 'succeeded');
    } catch (e) {
      if (!(e instanceof RuntimeError)) throw e;
      refused = e;
    }
  }
  assert.ok(refused, `refused within 400 tasks (${ids.length} created)`);
  assert.equal(refused.code, 'limit_exceeded');
  assert.equal(refused.limit?.name, 'max_stored_bytes_per_principal');
  // Another principal still stores.
  const bob = runtime.createTask({ origin: 'lmsp', principal: 'bob', input: { model: 'm', input: 'hi' } });
  await runtime.waitForTerminal(bob.task.id);

  await runtime.checkpoint();
  const full = newestImageBytes(store);
  assert.ok(full <= 2 * CAP, `the image (${full} bytes) is within twice the cap (${CAP}) after ${ids.length} tasks`);
  assert.ok(full >= CAP * 0.75, `the cap was reached (${full} bytes)`);

  // Deleting alice's tasks: she stores again at once, and the next image gives the pages back.
  for (const id of ids) runtime.deleteTask(id, 'alice');
  const again = runtime.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: 'again' } });
  await runtime.waitForTerminal(again.task.id);
  await runtime.checkpoint();
  const emptied = newestImageBytes(store);
  t.diagnostic(`${ids.length} tasks of alice, image ${full} bytes (cap ${CAP}); after the deletes ${emptied} bytes`);
  assert.ok(emptied < full / 4, `the image shrank after the deletes: ${full} → ${emptied} bytes`);
  await runtime.close();
  // And it stays small after a restart.
  const reopened = await TaskRuntime.open({ dataDir, backend: new ScriptedBackend(says('x')) });
  assert.equal(reopened.countTasks().total, 2);
  await reopened.close();
  assert.ok(newestImageBytes(store) < full / 4);
});
