// Completion webhooks of a real `task-runtime serve` process (--webhook, --webhook-secret-file,
// --webhook-allow-private) across a SIGKILL: the task finishes, its delivery is on the wire but not yet answered,
// the server is killed; after the restart the same event (same webhook-id, same body) arrives again and is
// answered, and the unmodified openai SDK verifies its signature with the secret serve created. The secret is in
// neither the server's output nor its store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import OpenAI from 'openai';
import { allFileText } from '../../fixtures/serveProcess';
import { receiver as webhookReceiver } from '../../fixtures/webhookReceiver';
import { call, createTask, removeDir, startServer, tempDataDir, waitForStatus } from './harness';

test('SIGKILL between the terminal transition and the delivery: delivered after the restart with the same webhook-id', async () => {
  // The first request is held unanswered (the delivery is in flight when the server dies); later ones get 200.
  let requests = 0;
  const receiver = await webhookReceiver(() => (++requests > 1 ? { status: 200 } : undefined));
  const { got, next } = receiver;
  const url = `http://127.0.0.1:${receiver.port}/hooks?key=in-the-query`;
  const dataDir = tempDataDir();
  const secretFile = path.join(dataDir, 'alice.whsec');
  const args = ['--webhook', `alice=${url}`, '--webhook-secret-file', `alice=${secretFile}`, '--webhook-allow-private'];
  let server = await startServer({ dataDir, args });
  try {
    const secret = fs.readFileSync(secretFile, 'utf8').trim();
    assert.match(secret, /^whsec_/);
    assert.equal(fs.statSync(secretFile).mode & 0o777, 0o600);

    const first = next();
    const task = await createTask(server, { max_output_tokens: 4 });
    const held = await first;
    assert.equal((await call(server, 'GET', `/tasks/${task.id}`)).json.status, 'succeeded', 'the ending came first');
    const id = held.headers['webhook-id'];
    assert.match(String(id), /^evt_/);
    await server.kill();

    const again = next();
    server = await startServer({ dataDir, args });
    const delivered = await again;
    assert.equal(delivered.headers['webhook-id'], id, 'the same webhook-id after the restart');
    assert.equal(delivered.body, held.body, 'the same body');
    const client = new OpenAI({ apiKey: 'unused', baseURL: 'http://127.0.0.1:1/v1' });
    const event = await client.webhooks.unwrap(delivered.body, delivered.headers as Record<string, string>, secret);
    assert.equal(event.type as string, 'task_runtime:task.succeeded');
    assert.equal((event.data as { id?: string }).id, task.id);

    const bob = await createTask(server, { max_output_tokens: 2 }, {}, server.tokenB);
    await waitForStatus(server, bob.id, ['succeeded'], server.tokenB);
    assert.equal(got.length, 2, "bob has no endpoint: nothing was sent for bob's task");
    await server.stop();
    const everything = allFileText(dataDir).replace(fs.readFileSync(secretFile, 'latin1'), '') + server.stderr();
    assert.ok(!everything.includes(secret.slice('whsec_'.length)), 'the secret is only in its own file');
    assert.ok(!server.stderr().includes('in-the-query'), "the URL's query is not logged");
  } finally {
    await server.kill();
    await receiver.close();
    removeDir(dataDir);
  }
});
