// Builds the scale benchmark's store (100 k tasks / 1 M events) in a directory: `node out/bench/seedScaleStore.js DIR`.
import * as path from 'node:path';
import { DurableDatabase } from '../src/runtime/store/database';
import { TaskStore } from '../src/runtime/taskStore';
import { benchTask, seedTasks } from './runtimeBench';

export async function seedScaleStore(storeDir: string, tasks = 100_000, eventsPerTask = 10): Promise<void> {
  // Big batches, host-thread export for speed, then a second checkpoint so that, as in a store that has lived a
  // while, only the newest two images and the journals they need remain.
  const db = await DurableDatabase.open(storeDir, { inlineCheckpointBytes: Infinity, checkpointBytes: 2 ** 40 });
  seedTasks(new TaskStore(db), tasks, eventsPerTask);
  await db.checkpoint();
  db.write(new TaskStore(db).insertTaskOps(benchTask('task_scale_marker', 'succeeded'), 0));
  await db.close();
}

if (require.main === module) {
  void seedScaleStore(path.resolve(process.argv[2]));
}
