// A disk that fills up in the middle of a generation (a real size-limited tmpfs holding the data directory, so
// journal writes fail with ENOSPC): the run stops, the task does not stay `running` in the live process, and once
// space returns it fails with `store_unwritable`, keeping the text clients already received. Needs `mount`
// (root); skipped with a reason where the sandbox does not allow it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isRuntimeError } from '../../../src/runtime/errors';
import { waitFor } from '../../support/wait';
import { backend, collect, longPrompt, openRuntime, prompt, tempDir } from './helpers';

after(() => backend().dispose());

function mountTmpfs(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (e) {
    return (e as Error).message.split('\n')[0];
  }
}

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

const mountPoint = tempDir('tr-store-fault-');
const mountError = mountTmpfs(mountPoint, '24m');
after(() => {
  if (!mountError) execFileSync('umount', ['-l', mountPoint]);
});

test('the disk filling up mid-generation fails the task with store_unwritable once space returns', { skip: mountError && `cannot mount a tmpfs: ${mountError}` }, async () => {
  const dataDir = path.join(mountPoint, 'data');
  const logs: string[] = [];
  // Small checkpoints roll the journal over often; a new journal generation needs fresh space.
  const options = { log: (m: string) => logs.push(m), deltaFlushMs: 2, database: { checkpointBytes: 16 * 1024 } };
  const rt = await openRuntime(dataDir, options);
  let filler: string | undefined;
  try {
    const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('fill the disk') });
    const seen = collect(rt, task.id);
    await waitFor(() => seen.events.filter((e) => e.type === 'response.output_text.delta').length >= 3, 'some deltas');

    filler = fillDisk(mountPoint);
    await waitFor(() => logs.some((l) => l.includes(`task ${task.id}: run aborted`)), 'the run to stop on the failed write');
    assert.equal(rt.getTask(task.id)?.status, 'running', 'nothing could be written yet');
    assert.throws(
      () => rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('refused') }),
      (e: unknown) => isRuntimeError(e, 'store_unwritable'),
    );
    fs.rmSync(filler);

    await waitFor(() => rt.getTask(task.id)?.status === 'failed', 'the orphaned task to be failed');
    const failed = rt.getTask(task.id)!;
    assert.equal(failed.error?.code, 'store_unwritable');
    assert.equal(failed.error?.status, 503);
    const stored = rt.readEvents(task.id);
    stored.forEach((e, i) => assert.equal(e.seq, i, 'gap-free sequence'));
    assert.deepEqual(stored.slice(-2).map((e) => e.type), ['error', 'response.failed']);
    // Every event a subscriber saw is stored with the same seq and type, and the response keeps that text.
    for (const e of seen.events) assert.equal(stored[e.seq]?.type, e.type);
    const received = stored.filter((e) => e.type === 'response.output_text.delta').map((e) => String(e.data.delta)).join('');
    assert.ok(received.length > 0);
    const out = (failed.response as { output: Array<{ content: Array<{ text: string }> }> }).output;
    assert.equal(out[0]?.content[0]?.text, received);
    seen.close();

    // The store works again: new work runs to the end.
    const { task: next } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('after the fault', 4) });
    await rt.waitForTerminal(next.id);
    assert.equal(rt.getTask(next.id)?.status, 'succeeded');
  } finally {
    if (filler) fs.rmSync(filler, { force: true });
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
});
