// Codex CLI 0.169, unmodified from npm, against `serve` (issue #38 item 5): `codex exec` with a custom provider on
// the Responses door, as docs/codex.md sets it up. Its first request carries function tools, a `namespace`, a hosted
// `web_search`, developer messages, `store: false`, `include: ["reasoning.encrypted_content"]` and
// `prompt_cache_key`: the turn must run, and a tool call must be executed by Codex and its output answered.
// The model is `agent-script` (test/fixtures/agents/backend.ts).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AGENT_SCRIPT_MODEL, GREETING, TOOL_SAID } from '../fixtures/agents/backend';
import { startServe, type Serve } from '../fixtures/serveProcess';
import { agentBin } from '../support/agents';

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
    fs.writeFileSync(
      path.join(home, 'config.toml'),
      [
        `model = "${AGENT_SCRIPT_MODEL}"`,
        'model_provider = "taskruntime"',
        'model_context_window = 32768',
        '[model_providers.taskruntime]',
        'name = "Task Runtime"',
        `base_url = "${server.lmsp}"`,
        'env_key = "TASK_RUNTIME_TOKEN"',
        'wire_api = "responses"',
        'request_max_retries = 0',
        'stream_max_retries = 0',
        '',
      ].join('\n'),
    );
  });
  after(async () => {
    await server?.stop();
    for (const d of [home, work]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  /** `codex exec PROMPT`; the last agent message from --output-last-message. */
  function codex(prompt: string): Promise<{ code: number | null; last: string; output: string }> {
    const lastFile = path.join(home, `last-${Date.now()}-${Math.random().toString(36).slice(2)}.txt`);
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, TASK_RUNTIME_TOKEN: server.token };
    const args = ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--output-last-message', lastFile, prompt];
    const child = spawn(agentBin('codex'), args, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve({ code, last: fs.existsSync(lastFile) ? fs.readFileSync(lastFile, 'utf8').trim() : '', output }));
    });
  }

  async function tasks(): Promise<any[]> {
    const r = await server.lmspCall('GET', '/tasks?limit=200');
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
    assert.ok(made.every((t) => t.task_runtime.model === AGENT_SCRIPT_MODEL && t.status === 'succeeded'), JSON.stringify(made));
  });

  it('executes the command the model calls and answers from its output', async () => {
    const { code, last, output } = await codex(`Show the file. [[call exec_command ${JSON.stringify({ cmd: 'cat secret.txt' })}]]`);
    assert.equal(code, 0, output);
    assert.ok(last.startsWith(TOOL_SAID), `${last}\n${output}`);
    assert.ok(last.includes(SECRET), `the answer does not hold the command's output: ${last}\n${output}`);
  });
});
