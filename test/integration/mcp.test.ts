// VS Code's own MCP client against our server: the provider's definition is discovered and started, our
// task-capable tool is invoked through vscode.lm.invokeTool, and the server shows it was run as an MCP task
// (tools/call with `task`, tasks/get polls, tasks/result) with the right result.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { Commands, MCP_SERVER_LABEL } from '../../src/extension/constants';
import { answerText } from '../../src/runtime/responses';
import { activateExtension, endpointOf, sleep, waitFor, waitForStatus } from './support/extensionApi';
import { tapServerRequests, type RequestTap } from './support/requestTap';

/** VS Code names MCP tools mcp_<server label>_<tool>, the label lower-cased with non-word characters as `_`. */
function findTool(tool: string): vscode.LanguageModelToolInformation | undefined {
  const label = MCP_SERVER_LABEL.toLowerCase().replace(/[^a-z0-9]+/g, '_');
  return (
    vscode.lm.tools.find((t) => t.name === `mcp_${label}_${tool}`) ??
    vscode.lm.tools.find((t) => t.name.startsWith('mcp_') && t.name.endsWith(`_${tool}`) && t.name.includes(label))
  );
}

function resultParts(result: vscode.LanguageModelToolResult): string[] {
  return result.content.map((p) => (p instanceof vscode.LanguageModelTextPart ? p.value : ''));
}

/** Whether a part of the tool result carries the task's text: as plain text, or as our JSON ({taskId, text}). */
function carriesTaskText(result: vscode.LanguageModelToolResult, taskId: string, text: string): boolean {
  return resultParts(result).some((part) => {
    if (part === text) return true;
    try {
      const j = JSON.parse(part) as { taskId?: unknown; text?: unknown };
      return j.taskId === taskId && j.text === text;
    } catch {
      return false;
    }
  });
}

/** Editor tasks that occupy the runtime (one task at a time by default) so the next task waits its turn. */
async function occupyRuntime(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(await vscode.commands.executeCommand<string>(Commands.createTask, { prompt: `blocker ${i}` }));
  }
  return ids;
}

describe("VS Code's MCP client", function () {
  let tap: RequestTap;
  let mcpPath: string;

  before(async () => {
    const endpoint = await endpointOf(await activateExtension());
    const mcp = new URL(endpoint.mcpUrl);
    mcpPath = mcp.pathname;
    tap = tapServerRequests(Number(mcp.port));
    // The provider is resolved lazily: the first start attempts can be no-ops until VS Code has asked it.
    await waitFor(
      () =>
        `our MCP tools in vscode.lm.tools (have: ${
          vscode.lm.tools
            .map((t) => t.name)
            .filter((n) => n.startsWith('mcp_'))
            .join(', ') || 'none'
        })`,
      async () => {
        await vscode.commands.executeCommand('workbench.mcp.startServer', '*', { autoTrustChanges: true });
        if (findTool('generate')) return true;
        await sleep(1000);
        return false;
      },
      90_000,
    );
  });

  after(() => tap?.close());

  it('discovers the provider definition and lists our tools from our endpoint', () => {
    for (const tool of ['generate', 'generate_long', 'get_task_text', 'list_models', 'cancel_tasks', 'embed', 'search_workspace']) {
      assert.ok(findTool(tool), `tool ${tool} registered`);
    }
    const methods = tap.rpc(mcpPath).map((m) => m.method);
    assert.ok(methods.includes('initialize'), `initialize reached our server (saw ${methods.join(', ')})`);
    assert.ok(methods.includes('tools/list'), 'tools/list reached our server');
  });

  // Observed with VS Code 1.139.1: for `generate` (taskSupport optional) the client polls tasks/get at our
  // pollInterval and then calls tasks/result; for `generate_long` (required) it calls tasks/result at once, which
  // blocks on our side until the task is terminal, so polls are only required of the first.
  for (const [tool, mustPoll] of [
    ['generate', true],
    ['generate_long', false],
  ] as const) {
    const flow = mustPoll ? 'tools/call with task, tasks/get polls, tasks/result' : 'tools/call with task, blocking tasks/result';
    it(`invokeTool(${tool}) runs as an MCP task: ${flow}`, async () => {
      const source = (await activateExtension()).getTaskSource();
      const info = findTool(tool)!;
      // Greedy decoding (temperature 0) never meets the demo model's end token, so this task runs for
      // max_output_tokens — longer than the poll interval — and the client must poll rather than learn the outcome
      // from the first status notification. The editor tasks queued ahead make that margin wider still.
      let result: vscode.LanguageModelToolResult | undefined;
      let seen: ReturnType<RequestTap['rpc']> = [];
      let prompt = '';
      for (let attempt = 1; attempt <= (mustPoll ? 4 : 1); attempt++) {
        prompt = `mcp ${tool} ${Date.now()} #${attempt}`;
        const blockers = await occupyRuntime(3);
        const before = tap.rpc(mcpPath).length;
        try {
          result = await vscode.lm.invokeTool(info.name, {
            input: { prompt, max_output_tokens: 1500, temperature: 0 },
            toolInvocationToken: undefined,
          });
        } finally {
          for (const id of blockers) await source.cancel(id).catch(() => undefined);
        }
        seen = tap.rpc(mcpPath).slice(before);
        if (seen.some((m) => m.method === 'tasks/get')) break;
      }
      assert.ok(result);

      const call = seen.find((m) => m.method === 'tools/call' && (m.params?.['name'] as string) === tool);
      assert.ok(call, `tools/call for ${tool} reached our server (saw ${seen.map((m) => m.method).join(', ')})`);
      assert.ok(call.params?.['task'] && typeof call.params['task'] === 'object', 'tools/call carried a task field');

      // The task the call created, as the runtime records it.
      const page = await source.list({ limit: 1000 });
      const task = page.tasks.find((t) => t.title.includes(prompt) || JSON.stringify(t).includes(prompt));
      assert.ok(task, 'the runtime holds the task created by tools/call');
      assert.equal(task.origin, 'mcp');
      const done = await waitForStatus(source, task.id, ['succeeded', 'failed', 'cancelled']);
      assert.equal(done.status, 'succeeded');

      const polls = seen.filter((m) => m.method === 'tasks/get' && m.params?.['taskId'] === task.id);
      const trace = seen.map((m) => `${m.method ?? `reply:${String(m.id)}`}`).join(', ');
      if (mustPoll) assert.ok(polls.length >= 1, `VS Code polled tasks/get for ${task.id} (server saw: ${trace})`);
      const fetched = seen.filter((m) => m.method === 'tasks/result' && m.params?.['taskId'] === task.id);
      assert.equal(fetched.length, 1, `VS Code fetched the result once with tasks/result (server saw: ${trace})`);

      // What VS Code handed back to the caller is the task's text.
      const text = answerText(done.response);
      assert.ok(text.length > 0);
      assert.ok(carriesTaskText(result, task.id, text), `tool result ${JSON.stringify(resultParts(result)).slice(0, 500)} carries the task text`);
    });
  }

  it('invokeTool(list_models) answers directly with the demo model', async () => {
    const result = await vscode.lm.invokeTool(findTool('list_models')!.name, { input: {}, toolInvocationToken: undefined });
    assert.match(resultParts(result).join('\n'), /demo/i);
  });
});
