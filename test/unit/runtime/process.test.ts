// isProcessAlive (process.ts): true for a running process, false once it has exited and been reaped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
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

test(
  'an exited process its parent has not reaped (a zombie) is not alive',
  { skip: process.platform !== 'linux' && 'zombies are read from /proc' },
  async () => {
    // `sleep 0` exits at once; its parent has become `sleep 60` (exec), which never waits: a zombie until it ends.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const [line] = (await once(parent.stdout!, 'data')) as [Buffer];
      const pid = Number(String(line).trim());
      assert.ok(pid > 0);
      // Wait for the state, not for a time: /proc says Z once it has exited.
      while (!/\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))) await new Promise((r) => setImmediate(r));
      assert.equal(isProcessAlive(pid), false);
      assert.equal(isProcessAlive(parent.pid!), true, 'its living parent still is');
    } finally {
      parent.kill('SIGKILL');
    }
  },
);
