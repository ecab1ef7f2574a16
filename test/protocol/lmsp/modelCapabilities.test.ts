// GET /models `capabilities` mean what the runtime does (#39 item 4): a real `serve` with three tiny models — the demo
// (no template), one whose template has Qwen 3-style thoughts, and a reranker (rank pooling) — lists `tools` and
// `reasoning` from their files before any load, the same after the loads, and each claim holds: every model listed
// with tools answers `tool_choice: "required"` with a function call valid against the tool's parameters (the OpenAI
// SDK), a model listed with reasoning takes `reasoning.effort`, and one listed without it refuses it. Another editor
// window (RemoteTaskSource on the same listing) offers tool calling to agent mode for exactly the models with tools.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { writeTestModel } from '../../../src/backends/llama/demoModel';
import { chatModelInfos } from '../../../src/extension/lm/chatMapping';
import { RemoteTaskSource } from '../../../src/extension/model/remoteTaskSource';
import { REASONING_CHAT_TEMPLATE } from '../../fixtures/chatTemplates';
import { testRerankerPath } from '../../fixtures/testModel';
import { call, removeDir, startServer, type Server } from './harness';

interface Listed {
  id: string;
  state: string;
  capabilities: { tools: boolean; vision: boolean; reasoning: boolean };
}

const PARAMETERS = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};

describe('GET /models capabilities', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-capabilities-'));
  const thinker = path.join(dir, 'thinker.gguf');
  writeTestModel(thinker, { seed: 1, chatTemplate: REASONING_CHAT_TEMPLATE });
  let server: Server;
  let client: OpenAI;
  const list = async () => (await call(server, 'GET', '/models')).json.data as Listed[];
  const byId = (models: Listed[], id: string) => models.find((m) => m.id === id)!;

  before(async () => {
    server = await startServer({ args: ['--model', thinker, '--model', testRerankerPath()] });
    client = new OpenAI({ apiKey: server.tokenA, baseURL: server.lmsp, maxRetries: 0 });
  });

  after(async () => {
    await server?.stop();
    if (server) removeDir(server.dataDir);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const expected = () => ({
    [server.model]: { tools: true, vision: false, reasoning: false },
    thinker: { tools: true, vision: false, reasoning: true },
    'tiny-reranker': { tools: false, vision: false, reasoning: false },
  });

  it('before any load, from the files: tools for chat models, reasoning where the template has thoughts', async () => {
    const models = await list();
    for (const [id, caps] of Object.entries(expected())) {
      const m = byId(models, id);
      assert.ok(m, `${id} is listed: ${JSON.stringify(models)}`);
      assert.equal(m.state, 'unloaded');
      assert.deepEqual(m.capabilities, caps, id);
    }
  });

  it('every model listed with tools makes a forced call valid against the parameters', async () => {
    const validate = new Ajv({ strict: false }).compile(PARAMETERS);
    const withTools = (await list()).filter((m) => m.capabilities.tools);
    assert.equal(withTools.length, 2);
    for (const m of withTools) {
      const r = await client.responses.create({
        model: m.id,
        input: 'What is the weather in Paris?',
        tools: [{ type: 'function', name: 'get_weather', parameters: PARAMETERS, strict: true }],
        tool_choice: 'required',
        parallel_tool_calls: false,
        max_output_tokens: 120,
      });
      const calls = r.output.filter((i) => i.type === 'function_call');
      assert.equal(calls.length, 1, `${m.id}: ${JSON.stringify(r.output)}`);
      const call0 = calls[0]!;
      assert.ok(call0.type === 'function_call' && validate(JSON.parse(call0.arguments)), `${m.id}: ${JSON.stringify(call0)}`);
    }
  });

  it('reasoning is what reasoning.effort does: taken where listed, refused where not', async () => {
    const r = await client.responses.create({ model: 'thinker', input: 'Hi', reasoning: { effort: 'low' }, max_output_tokens: 8 });
    assert.ok(r.status === 'completed' || r.status === 'incomplete', JSON.stringify(r));
    await assert.rejects(
      client.responses.create({ model: server.model, input: 'Hi', reasoning: { effort: 'low' }, max_output_tokens: 8 }),
      (e: unknown) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.code, 'unsupported_capability');
        assert.equal(e.param, 'reasoning.effort');
        return true;
      },
    );
  });

  it("another window's chat models offer tool calling where the owner lists tools", async () => {
    const source = new RemoteTaskSource({ lmspUrl: server.lmsp, token: server.tokenA });
    try {
      const listed = await source.listModels();
      const infos = chatModelInfos(listed);
      for (const [id, caps] of Object.entries(expected())) {
        assert.deepEqual(listed.find((m) => m.id === id)?.capabilities, { tools: caps.tools, reasoning: caps.reasoning }, id);
        assert.equal(infos.find((m) => m.id === id)?.capabilities.toolCalling, caps.tools, id);
      }
    } finally {
      source.dispose();
    }
  });

  it('after the loads the template resolved says the same', async () => {
    const models = await list();
    for (const [id, caps] of Object.entries(expected())) {
      const m = byId(models, id);
      if (id !== 'tiny-reranker') assert.equal(m.state, 'loaded', id);
      assert.deepEqual(m.capabilities, caps, id);
    }
  });
});
