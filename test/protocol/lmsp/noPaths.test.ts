// Local paths never leave the server: a model file under a folder with a user name and spaces is served, a task runs
// on it, and every read route of LMSP and every read tool of MCP is asked; none of the answers names the folder.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { connect } from '../mcp/harness';
import { leakedPieces, SECRET_DIR, secretModel, type SecretModel } from '../../support/hostile';
import { call, startServer, waitForStatus, type Server } from './harness';

let server: Server;
let secret: SecretModel;

before(async () => {
  secret = secretModel();
  server = await startServer({ args: ['--model', secret.file] });
});
after(async () => {
  await server?.stop();
  secret?.remove();
});

function assertNoPath(label: string, text: string): void {
  assert.deepEqual(leakedPieces(text, secret), [], `${label}: ${text.slice(0, 400)}`);
}

test('no LMSP read route and no MCP read tool shows the model file path', async () => {
  const created = await call(server, 'POST', '/tasks', {
    body: { type: 'response', input: { model: 'secret-project', input: 'hi', max_output_tokens: 4 } },
  });
  assert.equal(created.status, 202, created.text);
  const task = created.json as { id: string; response_id: string };
  await waitForStatus(server, task.id, ['succeeded']);

  for (const route of [
    '/models',
    '/models/secret-project',
    '/capabilities',
    '/tasks',
    `/tasks/${task.id}`,
    `/responses/${task.response_id}`,
    '/task_runtime/counts',
    `/tasks/${task.id}/events`,
  ]) {
    const r = await call(server, 'GET', route);
    assert.ok(r.status < 500, `${route}: ${r.status}`);
    assertNoPath(`GET ${route}`, r.text);
  }
  // A model that cannot be found, and a body naming a path, get errors that do not echo the folder either.
  const bad = await call(server, 'POST', '/responses', { body: { model: path.join(secret.root, ...SECRET_DIR, 'x.gguf'), input: 'hi' } });
  assert.equal(bad.status, 404);

  const client = await connect(`${server.url}/mcp`, server.tokenA);
  try {
    const models = await client.callTool({ name: 'list_models', arguments: {} });
    assert.ok(JSON.stringify(models).includes('secret-project'), 'the model is listed');
    assertNoPath('MCP list_models', JSON.stringify(models));
    const text = await client.callTool({ name: 'get_task_text', arguments: { taskId: task.id } });
    assertNoPath('MCP get_task_text', JSON.stringify(text));
  } finally {
    await client.close();
  }
});
