// The webhooks' wire (protocols/webhooks/sender.ts) against real HTTP servers on loopback: private and loopback
// addresses are refused unless allowed (an IP literal, a name that resolves to one, any one of several addresses),
// a redirect is an answer and never followed, a try is aborted by its signal, and what arrives is the request as
// the worker built it. The unmodified `openai` SDK verifies the signature of a delivery the runtime made.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as dns from 'node:dns';
import OpenAI from 'openai';
import { HttpWebhookSender, isPrivateAddress } from '../../../../src/protocols/webhooks/sender';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { newWebhookSecret, webhookHeaders, type WebhookRequest } from '../../../../src/runtime/webhooks';
import { partsDir } from '../../../fixtures/runtimeParts';
import { ScriptedBackend, says } from '../../../fixtures/scriptedBackend';
import { receiver } from '../../../fixtures/webhookReceiver';

function requestTo(url: string, secret = newWebhookSecret()): WebhookRequest {
  const body = JSON.stringify({ id: 'evt_1', object: 'event', created_at: 1, type: 'task_runtime:task.succeeded', data: { id: 'task_1' } });
  return { url, body, headers: webhookHeaders('evt_1', Math.floor(Date.now() / 1000), body, secret) };
}

/** A resolver that answers `addresses` for every name. */
function resolvesTo(...addresses: string[]): typeof dns.lookup {
  return ((_host: string, _opts: unknown, cb: (e: null, a: dns.LookupAddress[]) => void) => {
    cb(
      null,
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  }) as unknown as typeof dns.lookup;
}

test('special-use addresses: private, loopback, link-local, CGNAT, documentation, multicast, IPv4-mapped; public ones are not', () => {
  for (const a of [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '::1',
    '::',
    'fe80::1',
    'fd00::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    'not-an-ip',
  ]) {
    assert.equal(isPrivateAddress(a), true, a);
  }
  for (const a of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8']) assert.equal(isPrivateAddress(a), false, a);
});

test('loopback is refused by default (IP literal, a name resolving to it, one of several addresses) and nothing reaches it', async () => {
  const r = await receiver();
  const strict = new HttpWebhookSender();
  const never = new AbortController().signal;
  assert.match(((await strict.send(requestTo(r.url), never)) as { error: string }).error, /^refused: .*private or loopback/);
  assert.match(
    ((await strict.send(requestTo(`http://localhost:${r.port}/hook`), never)) as { error: string }).error,
    /^refused: .*private or loopback/,
  );
  const mixed = new HttpWebhookSender({ resolve: resolvesTo('93.184.216.34', '127.0.0.1') });
  assert.match(
    ((await mixed.send(requestTo(`http://hooks.test:${r.port}/hook`), never)) as { error: string }).error,
    /^refused: hooks\.test resolves/,
  );
  const rebinding = new HttpWebhookSender({ resolve: resolvesTo('127.0.0.1') });
  assert.match(((await rebinding.send(requestTo(`http://public.example:${r.port}/hook`), never)) as { error: string }).error, /^refused/);
  assert.match(((await strict.send(requestTo(`http://[::ffff:127.0.0.1]:${r.port}/hook`), never)) as { error: string }).error, /^refused/);
  assert.equal(r.got.length, 0, 'no request reached the loopback receiver');

  // Allowed by the configuration: delivered, with the worker's headers and body as they were built.
  const allowed = new HttpWebhookSender({ allowPrivate: true, resolve: resolvesTo('127.0.0.1') });
  const req = requestTo(`http://hooks.test:${r.port}/hook`);
  assert.deepEqual(await allowed.send(req, never), { status: 200 });
  assert.equal(r.got.length, 1);
  assert.equal(r.got[0].body, req.body);
  for (const h of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'content-type']) assert.equal(r.got[0].headers[h], req.headers[h], h);
  for (const s of [strict, mixed, rebinding, allowed]) s.close();
  await r.close();
});

test('a redirect is the answer (3xx), never followed; only http and https are sent to', async () => {
  const target = await receiver();
  const redirecting = await receiver(() => ({ status: 307, location: target.url }));
  const sender = new HttpWebhookSender({ allowPrivate: true });
  const never = new AbortController().signal;
  assert.deepEqual(await sender.send(requestTo(redirecting.url), never), { status: 307 });
  assert.equal(redirecting.got.length, 1);
  assert.equal(target.got.length, 0, 'the redirect was not followed');
  assert.deepEqual(await sender.send(requestTo('ftp://127.0.0.1/x'), never), { error: 'only http and https URLs are delivered to' });
  sender.close();
  await target.close();
  await redirecting.close();
});

test('a try is ended by its signal when the endpoint does not answer', async () => {
  const silent = await receiver(() => undefined);
  const sender = new HttpWebhookSender({ allowPrivate: true });
  const abort = new AbortController();
  const arrived = silent.next();
  const sent = sender.send(requestTo(silent.url), abort.signal);
  await arrived;
  abort.abort();
  assert.deepEqual(await sent, { error: 'aborted' });
  sender.close();
  await silent.close();
});

test("the unmodified openai SDK's webhooks.unwrap verifies a delivery the runtime made (response.completed of a /responses task)", async () => {
  const secret = newWebhookSecret();
  const r = await receiver();
  const sender = new HttpWebhookSender({ allowPrivate: true });
  const rt = await TaskRuntime.open({
    dataDir: partsDir(),
    backend: new ScriptedBackend(says('Hello')),
    webhooks: { endpoints: (p) => (p === 'alice' ? { url: r.url, secret } : undefined), sender },
  });
  const arrived = r.next();
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: 'hi' }, meta: { lmsp_route: 'responses' } });
  const got = await arrived;
  const client = new OpenAI({ apiKey: 'unused', baseURL: 'http://127.0.0.1:1/v1' });
  const event = await client.webhooks.unwrap(got.body, got.headers as Record<string, string>, secret);
  assert.equal(event.type, 'response.completed');
  assert.equal(event.data.id, task.responseId);
  assert.equal(event.id, got.headers['webhook-id']);
  assert.equal((event as unknown as { object: string }).object, 'event');
  // A wrong secret or a changed body is refused by the same SDK: the check can fail.
  await assert.rejects(client.webhooks.unwrap(got.body, got.headers as Record<string, string>, newWebhookSecret()), /signature/);
  await assert.rejects(client.webhooks.unwrap(got.body.replace('completed', 'failed'), got.headers as Record<string, string>, secret), /signature/);
  await rt.close();
  sender.close();
  await r.close();
});
