// The `task-runtime` command itself: argument errors (exit 2), fresh-machine defaults, clean signal shutdown.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { cliPath, removeDir, tempDataDir } from './harness';

function runCli(args: string[], cwd?: string) {
  return spawnSync(process.execPath, [cliPath(), ...args], { encoding: 'utf8', cwd, timeout: 60_000 });
}

describe('task-runtime CLI', () => {
  it('rejects bad arguments with exit code 2 and a clear message', () => {
    const cases: Array<[string[], RegExp]> = [
      [['serve', '--port', 'abc'], /--port must be an integer from 0 to 65535/],
      [['serve', '--port', '70000'], /--port must be an integer/],
      [['serve', '--threads', '0'], /--threads must be "auto" or an integer from 1/],
      [['serve', '--gpu', 'cuda12'], /--gpu must be one of auto, off, cuda, vulkan, metal/],
      [['serve', '--bogus'], /Unknown option "--bogus"/],
      [['serve', '--data-dir'], /--data-dir needs a value/],
      [['serve', '--port', '1', '--port', '2'], /given more than once/],
      [['serve', '--model', '/no/such/model.gguf'], /no such file/],
      [['frobnicate'], /Unknown command "frobnicate"/],
      [['make-test-model'], /exactly one argument/],
    ];
    for (const [args, message] of cases) {
      const r = runCli(args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.match(r.stderr, /Usage:/);
    }
    assert.equal(runCli(['--help']).status, 0);
  });

  it('make-test-model writes a GGUF', () => {
    const dir = tempDataDir();
    try {
      const out = path.join(dir, 'm.gguf');
      const r = runCli(['make-test-model', out]);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(fs.readFileSync(out).subarray(0, 4).toString(), 'GGUF');
    } finally {
      removeDir(dir);
    }
  });

  it('serve with no options: ./.task-runtime, 0600 token, demo model with a loud warning, ready line, SIGINT exits 0', async () => {
    const cwd = tempDataDir();
    try {
      const proc = spawn(process.execPath, [cliPath(), 'serve'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      proc.stderr.on('data', (d) => (stderr += d));
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: proc.stdout }).once('line', resolve);
        proc.once('exit', (c) => reject(new Error(`exited ${c}: ${stderr}`)));
      });
      const ready = JSON.parse(line);
      assert.equal(ready.event, 'listening');
      assert.match(ready.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(ready.lmsp, `${ready.url}/lmsp/v1`);
      assert.equal(ready.mcp, `${ready.url}/mcp`);
      assert.equal(fs.realpathSync(ready.tokenFile), fs.realpathSync(path.join(cwd, '.task-runtime', 'token')));
      assert.equal(fs.statSync(ready.tokenFile).mode & 0o777, 0o600);
      assert.match(stderr, /DEMO model/);
      assert.match(stderr, /NOISE/);
      assert.match(stderr, /--model/);
      const token = fs.readFileSync(ready.tokenFile, 'utf8').trim();
      assert.ok(!stderr.includes(token), 'the token is never logged');
      const r = await fetch(`${ready.lmsp}/models`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as any).data[0].demo, true);
      const code = await new Promise<number | null>((resolve) => {
        proc.once('exit', (c) => resolve(c));
        proc.kill('SIGINT');
      });
      assert.equal(code, 0, stderr);
    } finally {
      removeDir(cwd);
    }
  });
});
