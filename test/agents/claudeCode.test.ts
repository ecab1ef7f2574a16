// Claude Code 2.1.328, unmodified from npm, against `serve` (issue #38 item 5): a whole `claude -p` turn through the
// Anthropic Messages door; a tool round trip in which Claude Code really runs its Read tool on a file and the model
// answers from the result; and Claude Code as an MCP client of /mcp calling `generate_long` (it declares no tasks).
// The model is `agent-script` (test/fixtures/agents/backend.ts): the random demo model cannot end a turn or make the
// call Claude Code must run. Every request shows up as a durable task.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AGENT_SCRIPT_MODEL, GREETING, TOOL_SAID } from '../fixtures/agents/backend';
import { startServe, type Serve } from '../fixtures/serveProcess';
import { runClaude } from '../support/agents';

const SECRET = 'SECRET-WORD-4711';

describe('Claude Code against serve', () => {
  let server: Serve;
  let home: string;
  let work: string;

  before(async () => {
    server = await startServe([], undefined, [path.join(__dirname, '../fixtures/agents/serve.js')]);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-claude-home-'));
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-claude-work-'));
    fs.writeFileSync(path.join(work, 'secret.txt'), `${SECRET}\n`);
  });
  after(async () => {
    await server?.stop();
    for (const d of [home, work]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  const claude = (prompt: string, extra: string[] = []) =>
    runClaude({ baseUrl: server.url, token: server.token, model: AGENT_SCRIPT_MODEL, home, cwd: work }, prompt, extra);

  async function tasks(): Promise<any[]> {
    const r = await server.lmspCall('GET', '/tasks?limit=100');
    assert.equal(r.status, 200);
    return r.json.data as any[];
  }

  it('answers a turn through /v1/messages, and the request is a task', async () => {
    const before = new Set((await tasks()).map((t) => t.id));
    const { code, out, stderr } = await claude('Say hello.');
    assert.equal(out.is_error, false, `${JSON.stringify(out)}\n${stderr}`);
    assert.equal(code, 0);
    assert.equal(out.result, GREETING);
    const made = (await tasks()).filter((t) => !before.has(t.id));
    assert.ok(made.length >= 1, 'no task for the turn');
    for (const t of made) {
      assert.equal(t.task_runtime.model, AGENT_SCRIPT_MODEL);
      assert.equal(t.status, 'succeeded', JSON.stringify(t));
    }
  });

  it('runs its Read tool on the call the model makes and answers from the result', async () => {
    const file = path.join(work, 'secret.txt');
    const { out, stderr } = await claude(`Read the file. [[call Read ${JSON.stringify({ file_path: file })}]]`, ['--allowedTools', 'Read']);
    assert.equal(out.is_error, false, `${JSON.stringify(out)}\n${stderr}`);
    assert.ok(out.result.startsWith(TOOL_SAID), out.result);
    assert.ok(out.result.includes(SECRET), `the answer does not hold the file's text: ${out.result}`);
    assert.equal(out.num_turns, 2, JSON.stringify(out));
  });

  it('calls generate_long over MCP without tasks: the call waits for the task and returns its text', async () => {
    const config = path.join(home, 'mcp.json');
    fs.writeFileSync(
      config,
      JSON.stringify({ mcpServers: { tr: { type: 'http', url: server.mcpUrl, headers: { Authorization: `Bearer ${server.token}` } } } }),
    );
    const before = new Set((await tasks()).map((t) => t.id));
    const args = { prompt: 'Write a line.', max_output_tokens: 16 };
    const { out, stderr } = await claude(`Generate. [[call mcp__tr__generate_long ${JSON.stringify(args)}]]`, [
      '--mcp-config',
      config,
      '--strict-mcp-config',
      '--allowedTools',
      'mcp__tr__generate_long',
    ]);
    assert.equal(out.is_error, false, `${JSON.stringify(out)}\n${stderr}`);
    const mcpTasks = (await tasks()).filter((t) => !before.has(t.id) && t.task_runtime.origin === 'mcp');
    assert.equal(mcpTasks.length, 1, JSON.stringify(mcpTasks));
    const task = mcpTasks[0];
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
    assert.ok(out.result.startsWith(TOOL_SAID), out.result);
    // The tool result Claude Code handed back to the model is that task's (it passes the structured result on: its
    // JSON names the task and holds its text).
    const quoted = out.result.slice(TOOL_SAID.length);
    assert.ok(quoted.includes(`"taskId":"${task.id}"`), `quoted "${quoted}" is not task ${task.id}'s result`);
    assert.ok(quoted.includes('"outputTokens":16'), quoted);
  });
});
