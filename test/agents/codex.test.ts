// Codex CLI 0.169, unmodified from npm, against `serve` (issue #38 item 5): `codex exec` with a custom provider on
// the Responses door, as docs/codex.md sets it up. Its first request carries function tools, a `namespace`, a hosted
// `web_search`, developer messages, `store: false`, `include: ["reasoning.encrypted_content"]` and
// `prompt_cache_key`: the turn must run, and a tool call must be executed by Codex and its output answered.
// The model is `agent-script` (test/fixtures/agents/backend.ts).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AGENT_SCRIPT_MODEL, GREETING, TOOL_SAID } from '../fixtures/agents/backend';
import { startServe, type Serve } from '../fixtures/serveProcess';
import { runCodex, writeCodexConfig } from '../support/agents';

const SECRET = 'CODEX-SECRET-0815';

describe('Codex CLI against serve', () => {
  let server: Serve;
  let home: string;
  let work: string;

  before(async () => {
    server = await startServe([], undefined, [path.join(__dirname, '../fixtures/agents/serve.js')]);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-codex-home-'));
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-codex-work-'));
    fs.writeFileSync(path.join(work, 'secret.txt'), `${SECRET}\n`);
    writeCodexConfig(setup());
  });
  after(async () => {
    await server?.stop();
    for (const d of [home, work]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  const setup = () => ({ baseUrl: server.lmsp, token: server.token, model: AGENT_SCRIPT_MODEL, home, cwd: work });
  const codex = (prompt: string) => runCodex(setup(), prompt);

  async function tasks(): Promise<any[]> {
    const r = await server.lmspCall('GET', '/tasks?limit=100');
    assert.equal(r.status, 200);
    return r.json.data as any[];
  }

  it('runs a turn on the Responses door, and the request is a task', async () => {
    const before = new Set((await tasks()).map((t) => t.id));
    const { code, last, output } = await codex('Say hello.');
    assert.equal(code, 0, output);
    assert.equal(last, GREETING, output);
    const made = (await tasks()).filter((t) => !before.has(t.id));
    assert.ok(made.length >= 1, 'no task for the turn');
    assert.ok(
      made.every((t) => t.task_runtime.model === AGENT_SCRIPT_MODEL && t.status === 'succeeded'),
      JSON.stringify(made),
    );
  });

  it('executes the command the model calls and answers from its output', async () => {
    const { code, last, output } = await codex(`Show the file. [[call exec_command ${JSON.stringify({ cmd: 'cat secret.txt' })}]]`);
    assert.equal(code, 0, output);
    assert.ok(last.startsWith(TOOL_SAID), `${last}\n${output}`);
    assert.ok(last.includes(SECRET), `the answer does not hold the command's output: ${last}\n${output}`);
  });
});
