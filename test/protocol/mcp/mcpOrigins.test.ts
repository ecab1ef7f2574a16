// Origin and Host checks of the shared listener (DNS-rebinding defence): the server's own loopback origins and the
// allow-list pass, any other Origin is 403, a bad Host is 403 whatever the Origin; plus the two ways to configure
// the allow-list (`serve --allow-origin`, the setting taskRuntime.server.allowedOrigins) and their validation.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { parseArgs, UsageError } from '../../../src/cli/args';
import { readSettings, restartNeeded, DEFAULT_SETTINGS } from '../../../src/extension/model/settings';
import { normalizeOrigin } from '../../../src/protocols/http/hostOrigin';
import { startInProcess, TOKENS, type InProcessServer } from './harness';

/** A POST with exactly the Host and Origin given (fetch would not let us set Host). */
function post(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'origins', version: '1' } },
    });
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${TOKENS.alice}`,
          'content-length': Buffer.byteLength(body),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res
          .setEncoding('utf8')
          .on('data', (d) => (text += d))
          .on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('Origin / Host checks', () => {
  let server: InProcessServer;
  let port: number;

  before(async () => {
    server = await startInProcess({ allowedOrigins: ['http://LocalHost:5173/', 'vscode-webview://abc123'] });
    port = Number(new URL(server.url).port);
  });
  after(async () => server?.close());

  test("the server's own loopback origins are accepted, with any of its loopback Host names", async () => {
    for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
      for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`]) {
        const r = await post(server.mcpUrl, { host: `${host}:${port}`, origin });
        assert.equal(r.status, 200, `Host ${host}, Origin ${origin}: ${r.body}`);
      }
    }
    assert.equal((await post(server.mcpUrl, { host: `127.0.0.1:${port}` })).status, 200, 'no Origin: not a browser');
  });

  test('allow-listed origins pass (canonical form); everything else is 403', async () => {
    assert.equal((await post(server.mcpUrl, { host: `127.0.0.1:${port}`, origin: 'http://localhost:5173' })).status, 200);
    assert.equal((await post(server.mcpUrl, { host: `127.0.0.1:${port}`, origin: 'vscode-webview://abc123' })).status, 200);
    for (const origin of [
      'http://evil.example.com',
      `http://127.0.0.1:${port + 1}`,
      `https://127.0.0.1:${port}`,
      `http://localhost:${port}.evil.example.com`,
      'http://localhost:5174',
      'null',
    ]) {
      const r = await post(server.mcpUrl, { host: `127.0.0.1:${port}`, origin });
      assert.equal(r.status, 403, origin);
      assert.match(r.body, /Origin/);
    }
    const lmsp = await post(`${server.url}/lmsp/v1/models`, { host: `127.0.0.1:${port}`, origin: 'http://evil.example.com' });
    assert.equal(lmsp.status, 403, 'the same rule on the LMSP door');
  });

  test('Host checks stay: a foreign Host is 403 even with our own origin', async () => {
    for (const host of ['evil.example.com', `evil.example.com:${port}`, `127.0.0.1:${port + 1}`, '127.0.0.1']) {
      const r = await post(server.mcpUrl, { host, origin: `http://127.0.0.1:${port}` });
      assert.equal(r.status, 403, host);
    }
  });
});

describe('allow-list configuration', () => {
  test('normalizeOrigin: canonical form; wildcards, paths and non-origins refused with a reason', () => {
    assert.equal(normalizeOrigin('HTTP://LocalHost:5173/'), 'http://localhost:5173');
    assert.equal(normalizeOrigin('https://example.com:443'), 'https://example.com');
    assert.equal(normalizeOrigin('chrome-extension://abcdef'), 'chrome-extension://abcdef');
    for (const bad of ['*', 'http://*.example.com', 'http://x.com/path', 'http://u:p@x.com', 'localhost:5173', 'ftp://x.com', '']) {
      assert.ok(normalizeOrigin(bad) instanceof Error, bad);
    }
  });

  test('serve --allow-origin: repeatable, normalized, a bad value is a usage error naming it', () => {
    const a = parseArgs(['serve', '--allow-origin', 'http://localhost:5173/', '--allow-origin=https://app.example.com']);
    assert.ok(a.command === 'serve');
    assert.deepEqual(a.allowedOrigins, ['http://localhost:5173', 'https://app.example.com']);
    // The fixtures are served by the test entry point only (test/fixtures/conformance/serve.ts), not by a flag.
    assert.throws(
      () => parseArgs(['serve', '--conformance-fixtures']),
      (e: Error) => e instanceof UsageError && /Unknown option "--conformance-fixtures"/.test(e.message),
    );
    assert.deepEqual((parseArgs(['serve']) as { allowedOrigins: string[] }).allowedOrigins, []);
    assert.throws(
      () => parseArgs(['serve', '--allow-origin', 'http://x.com/app']),
      (e: Error) => e instanceof UsageError && /--allow-origin "http:\/\/x.com\/app"/.test(e.message),
    );
    assert.throws(() => parseArgs(['serve', '--allow-origin']), UsageError);
  });

  test('setting taskRuntime.server.allowedOrigins: normalized, bad entries dropped with a message, a change restarts', () => {
    const t = (m: string, ...a: unknown[]) => m.replace(/\{(\d)\}/g, (_, i) => String(a[Number(i)]));
    const ok = readSettings((k) => ({ 'server.allowedOrigins': ['http://LOCALHOST:5173', 'http://localhost:5173', 'nope', 7] })[k], t);
    assert.deepEqual(ok.settings.allowedOrigins, ['http://localhost:5173']);
    assert.equal(ok.problems.length, 2);
    assert.match(ok.problems[0], /server\.allowedOrigins.*nope/);
    const wrongType = readSettings((k) => ({ 'server.allowedOrigins': 'http://localhost:5173' })[k], t);
    assert.deepEqual(wrongType.settings.allowedOrigins, []);
    assert.equal(wrongType.problems.length, 1);
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, allowedOrigins: [] }), false);
    assert.equal(restartNeeded(DEFAULT_SETTINGS, ok.settings), true);
  });
});
