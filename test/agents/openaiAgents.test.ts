// The OpenAI Agents SDK (JS, @openai/agents 0.20), unmodified, against `serve` (issue #38 item 5): an agent with a
// function tool, on both of its OpenAI APIs (Responses and chat completions). The model (`agent-script`,
// test/fixtures/agents/backend.ts) calls the tool; the SDK runs it and hands its output back; the answer quotes it.
// Each model call is a task.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { AGENT_SCRIPT_MODEL, GREETING, TOOL_SAID } from '../fixtures/agents/backend';
import { startServe, type Serve } from '../fixtures/serveProcess';

const SECRET = 'AGENTS-SDK-SECRET-31';

describe('OpenAI Agents SDK against serve', () => {
  let server: Serve;
  let calls = 0;
  const getSecret = tool({
    name: 'get_secret',
    description: 'Returns the secret word.',
    parameters: z.object({ reason: z.string() }),
    execute: async ({ reason }) => {
      calls++;
      return `${SECRET} (${reason})`;
    },
  });

  before(async () => {
    server = await startServe([], undefined, [path.join(__dirname, '../fixtures/agents/serve.js')]);
    setTracingDisabled(true);
  });
  after(async () => {
    await server?.stop();
  });

  async function tasks(): Promise<Array<{ id: string; task_runtime: { route?: string } }>> {
    const r = await server.lmspCall('GET', '/tasks?limit=100');
    return r.json.data;
  }

  for (const api of ['responses', 'chat_completions'] as const) {
    it(`${api}: runs the tool the model calls and answers from its output; a plain turn answers`, async () => {
      // The SDK's own client (it brings its own `openai` 7), pointed at us as docs/agents.md says.
      const runner = new Runner({
        modelProvider: new OpenAIProvider({ baseURL: server.lmsp, apiKey: server.token, useResponses: api === 'responses' }),
      });
      const agent = new Agent({ name: 'scripted', model: AGENT_SCRIPT_MODEL, instructions: 'Use your tools.', tools: [getSecret] });
      const before = new Set((await tasks()).map((t) => t.id));
      const callsBefore = calls;
      const result = await runner.run(agent, `Find the secret. [[call get_secret ${JSON.stringify({ reason: api })}]]`);
      assert.equal(calls, callsBefore + 1, 'the SDK ran the tool once');
      assert.equal(result.finalOutput, `${TOOL_SAID}${SECRET} (${api})`);
      const made = (await tasks()).filter((t) => !before.has(t.id));
      assert.deepEqual(
        made.map((t) => t.task_runtime.route),
        [api, api],
        'two model calls, two tasks, on the API asked for',
      );
      const plain = await runner.run(agent, 'Say hello.');
      assert.equal(plain.finalOutput, GREETING);
    });
  }
});
