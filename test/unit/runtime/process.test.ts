// isProcessAlive (process.ts): true for a running process, false once it has exited and been reaped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { isProcessAlive } from '../../../src/runtime/process';

test('a running process is alive; the same pid after its exit is not', async () => {
  assert.equal(isProcessAlive(process.pid), true);
  const child = spawn(process.execPath, ['-e', 'process.stdin.resume()'], { stdio: ['pipe', 'ignore', 'ignore'] });
  await once(child, 'spawn');
  const pid = child.pid!;
  assert.equal(isProcessAlive(pid), true);
  child.stdin!.end();
  await once(child, 'exit');
  assert.equal(isProcessAlive(pid), false);
});
