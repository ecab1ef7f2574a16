// The official MCP conformance suite against a real `serve` process with the conformance fixtures (the test entry
// point test/fixtures/conformance/serve.ts: the product's serve plus the fixture model and tools), at two
// pinned versions: 0.1.16 (2025-11-25) and 0.2.0-alpha.12 (`--suite all`: both eras, the tasks extension, draft
// scenarios). The suite sends no bearer token, so it talks to a loopback proxy that adds ours (tokenProxy.ts). The
// suite's own baseline logic decides: a failed check outside the checked-in baseline (conformance/*.yaml, every
// entry with its reason) fails, and so does a baseline entry that starts passing. Needs Node >= 22 (the editor
// harness's Node 24, or the same package in the tool cache) and the packages in the tool cache (toolCache.ts); without
// them it skips with the reason, and fails under CI=true.
// Measured here: 0.1.16 ~5 s, 0.2.0-alpha.12 --suite all ~35 s on a loaded 2-core machine.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ROOT, startProcess, type ServerProcess } from './harness';
import { ensurePackage, node22, PINNED, skipReason } from './toolCache';
import { startTokenProxy, type TokenProxy } from './tokenProxy';

const NODE = node22();
const SUITES = PINNED.conformance.versions.map((version) => ({ version, pkg: ensurePackage(PINNED.conformance.pkg, version) }));
const skip = 'skip' in NODE ? NODE.skip : (SUITES.find((s) => 'skip' in s.pkg)?.pkg as { skip?: string } | undefined)?.skip;

function run(node: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(node, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** The lines that explain a baseline verdict (the suite prints them at the end). */
function verdict(output: string): string {
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
  const i = plain.search(/Expected failures \(in baseline\)|Stale baseline entries|Unexpected failures/);
  return (i >= 0 ? plain.slice(i) : plain.slice(-4000)).trim();
}

describe('MCP conformance suite (pinned versions, checked-in baselines)', { skip: skipReason(skip) }, () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-conformance-'));
  let server: ServerProcess;
  let proxy: TokenProxy;

  before(async () => {
    // Fixture tasks (slow_compute 60 s) are cancelled by the suite; concurrency keeps one from queueing the next.
    server = await startProcess(dataDir, ['--concurrency', '8'], { fixtures: true });
    proxy = await startTokenProxy(server.url, server.token);
  });
  after(async () => {
    await proxy?.close();
    await server?.stop('SIGTERM');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  for (const { version, pkg } of SUITES) {
    test(`@modelcontextprotocol/conformance ${version}: no failure outside the baseline, no stale entry`, async () => {
      const cli = path.join((pkg as { dir: string }).dir, 'dist/index.js');
      const baseline = path.join(ROOT, `test/protocol/mcp/conformance/baseline-${version}.yaml`);
      const args = [cli, 'server', '--url', `${proxy.url}/mcp`, '--expected-failures', baseline];
      if (version.startsWith('0.2.')) args.push('--suite', 'all');
      const r = await run((NODE as { node: string }).node, args);
      assert.match(r.output, /dns-rebinding-protection: 2 passed, 0 failed/, 'our own loopback origin is accepted, a foreign Host refused');
      assert.equal(
        r.code,
        0,
        `conformance ${version} against the baseline:\n${verdict(r.output)}\n--- server log ---\n${server.stderr.join('').slice(-3000)}`,
      );
    });
  }

  test('the product CLI (dist/cli.js serve) serves none of the fixture tools', async () => {
    const plainDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-no-fixtures-'));
    const plain = await startProcess(plainDir);
    try {
      const meta = {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
      };
      const res = await fetch(plain.mcpUrl, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${plain.token}`,
          'content-type': 'application/json',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/list',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } }),
      });
      const names = ((await res.json()) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name);
      assert.deepEqual(names, ['generate', 'generate_long', 'get_task_text', 'list_models', 'cancel_tasks', 'embed', 'search_workspace']);
    } finally {
      await plain.stop('SIGTERM');
      fs.rmSync(plainDir, { recursive: true, force: true });
    }
  });
});
