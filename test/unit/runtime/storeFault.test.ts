// A disk that fills up in the middle of a generation: the run stops, the task does not stay `running` in the live
// process, and once space returns it fails with `store_unwritable`, keeping the text clients already received.
// Two real faults, the same scenario:
//   - ENOSPC: a size-limited tmpfs holding the data directory, filled up. Needs `mount` (root).
//   - EFBIG: RLIMIT_FSIZE of this process lowered to 0 with prlimit (no mount), so no file can be written at all.
// Where a fault cannot be produced the test skips with the reason, except under CI, where it fails: CI must not
// lose the only disk-full coverage without anyone seeing it (test/fixtures/fileFaults.ts).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isRuntimeError } from '../../../src/runtime/errors';
import { fileSizeLimitUnavailable, limitFileSize, mountTmpfs, requireFault, skipOutsideCi } from '../../fixtures/fileFaults';
import { waitFor } from '../../support/wait';
import { backend, collect, longPrompt, openRuntime, prompt, tempDir } from './helpers';

after(() => backend().dispose());

/** Writes until the file system is full; returns the filler's path. */
function fillDisk(dir: string): string {
  const filler = path.join(dir, 'filler');
  const fd = fs.openSync(filler, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (let i = 0; i < 100_000; i++) fs.writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}

interface Fault {
  /** The errno the journal write fails with. */
  code: string;
  fill(): void;
  free(): void;
}

const mountPoint = tempDir('tr-store-fault-');
const mountError = mountTmpfs(mountPoint, '24m');
after(() => {
  if (!mountError) execFileSync('umount', ['-l', mountPoint]);
});
const rlimitError = fileSizeLimitUnavailable();

test('disk full (ENOSPC, tmpfs): the task fails with store_unwritable once space returns', { skip: skipOutsideCi(mountError) }, async () => {
  requireFault(mountError, 'mounting a size-limited tmpfs');
  let filler: string | undefined;
  await diskFull(path.join(mountPoint, 'data'), {
    code: 'ENOSPC',
    fill: () => (filler = fillDisk(mountPoint)),
    free: () => filler && fs.rmSync(filler, { force: true }),
  });
});

test(
  'no file can grow (EFBIG, RLIMIT_FSIZE 0, no mount): the task fails with store_unwritable once writes work',
  { skip: skipOutsideCi(rlimitError) },
  async () => {
    requireFault(rlimitError, 'limiting the file size with prlimit');
    await diskFull(path.join(tempDir('tr-store-fsize-'), 'data'), {
      code: 'EFBIG',
      fill: () => limitFileSize(process.pid, 0),
      free: () => limitFileSize(process.pid, 'unlimited'),
    });
  },
);

async function diskFull(dataDir: string, fault: Fault): Promise<void> {
  const logs: string[] = [];
  // Small checkpoints roll the journal over often; a new journal generation needs fresh space.
  const options = { log: (m: string) => logs.push(m), deltaFlushMs: 2, database: { checkpointBytes: 16 * 1024 } };
  const rt = await openRuntime(dataDir, options);
  try {
    const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('fill the disk') });
    const seen = collect(rt, task.id);
    await waitFor(() => seen.events.filter((e) => e.type === 'response.output_text.delta').length >= 3, 'some deltas');

    fault.fill();
    await waitFor(() => logs.some((l) => l.includes(`task ${task.id}: run aborted`)), 'the run to stop on the failed write');
    assert.equal(rt.getTask(task.id)?.status, 'running', 'nothing could be written yet');
    assert.throws(
      () => rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('refused') }),
      (e: unknown) => isRuntimeError(e, 'store_unwritable'),
    );
    assert.ok(
      logs.some((l) => l.includes(`journal write failed (${fault.code})`)),
      logs.join('\n'),
    );
    fault.free();

    await waitFor(() => rt.getTask(task.id)?.status === 'failed', 'the orphaned task to be failed');
    const failed = rt.getTask(task.id)!;
    assert.equal(failed.error?.code, 'store_unwritable');
    assert.equal(failed.error?.status, 503);
    const stored = rt.readEvents(task.id);
    stored.forEach((e, i) => assert.equal(e.seq, i, 'gap-free sequence'));
    assert.deepEqual(
      stored.slice(-2).map((e) => e.type),
      ['error', 'response.failed'],
    );
    // Every event a subscriber saw is stored with the same seq and type, and the response keeps that text.
    for (const e of seen.events) assert.equal(stored[e.seq]?.type, e.type);
    const received = stored
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => String(e.data.delta))
      .join('');
    assert.ok(received.length > 0);
    const out = (failed.response as { output: Array<{ content: Array<{ text: string }> }> }).output;
    assert.equal(out[0]?.content[0]?.text, received);
    seen.close();

    // The store works again: new work runs to the end.
    const { task: next } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('after the fault', 4) });
    await rt.waitForTerminal(next.id);
    assert.equal(rt.getTask(next.id)?.status, 'succeeded');
  } finally {
    fault.free();
    await rt.close();
  }

  // After a restart everything acknowledged is there and nothing was set aside.
  const again = await openRuntime(dataDir);
  try {
    assert.equal(again.storeReport.quarantined.length, 0);
    const tasks = again.listTasks({}).tasks;
    assert.equal(tasks.length, 2);
    for (const t of tasks) assert.equal(again.readEvents(t.id).length, t.nextSeq);
  } finally {
    await again.close();
  }
}
