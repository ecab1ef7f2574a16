// `output_schema` on the generation tools, in both eras: the schema reaches the task as its text.format, the result's
// structuredContent is the parsed answer (validated here with a real validator, ajv), the run's details move to
// _meta, and a schema the door or the backend refuses is MCP's own -32602. The demo model's weights are noise, so
// the tests that validate output rely on the local backend constraining generation to the schema (grammar).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Ajv from 'ajv';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connect, rpcError, startInProcess, TOKENS, type InProcessServer } from './harness';
import { ModernClient } from './modernClient';

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string', maxLength: 16 },
    count: { type: 'integer' },
    tags: { type: 'array', items: { type: 'string', enum: ['red', 'green'] }, maxItems: 3 },
  },
  required: ['title', 'count', 'tags'],
  additionalProperties: false,
};
const validate = new Ajv().compile(schema);

function assertStructured(result: CallToolResult | Record<string, any>): void {
  assert.equal(result.isError, false, JSON.stringify(result.content));
  const sc = result.structuredContent;
  assert.ok(validate(sc), `${JSON.stringify(sc)}: ${JSON.stringify(validate.errors)}`);
  // The text is the same JSON, and the run's details are in _meta.
  assert.deepEqual(JSON.parse((result.content as Array<{ text: string }>)[0].text), sc);
  const run = result._meta?.['task-runtime/run'];
  assert.equal(run?.status, 'completed');
  assert.match(run?.taskId, /^task_/);
}

describe('MCP output_schema', () => {
  let server: InProcessServer;
  let alice: Client;
  let modern: ModernClient;
  before(async () => {
    server = await startInProcess({ suppressEos: false });
    alice = await connect(server.mcpUrl, TOKENS.alice);
    modern = new ModernClient(server.mcpUrl, TOKENS.alice);
  });
  after(async () => {
    await alice?.close();
    await server?.close();
  });

  test('generate and generate_long list output_schema as an object argument, in both eras', async () => {
    const legacy = (await alice.listTools()).tools;
    const current = (await modern.result('tools/list')).tools as typeof legacy;
    for (const tools of [legacy, current]) {
      for (const name of ['generate', 'generate_long']) {
        const prop = (tools.find((t) => t.name === name)!.inputSchema.properties as Record<string, any>).output_schema;
        assert.equal(prop?.type, 'object', `${name}: ${JSON.stringify(prop)}`);
        assert.match(prop.description, /JSON Schema/);
      }
    }
  });

  test('a malformed output_schema is -32602 before any task exists (both eras)', async () => {
    const before = server.runtime.listTasks({ principal: 'alice', limit: 100 }).tasks.length;
    const bad = [[{ type: 'object' }], { type: 'array', items: { type: 'string' } }, 'object', deep(80)];
    for (const output_schema of bad) {
      const e = await rpcError(alice.callTool({ name: 'generate', arguments: { prompt: 'x', output_schema } }));
      assert.equal(e.code, ErrorCode.InvalidParams);
      assert.match(e.message, /output_schema/);
      const r = await modern.request('tools/call', { name: 'generate', arguments: { prompt: 'x', output_schema } });
      assert.equal(r.status, 400);
      assert.equal(r.body.error.code, -32602);
      assert.match(r.body.error.message, /output_schema/);
    }
    assert.equal(server.runtime.listTasks({ principal: 'alice', limit: 100 }).tasks.length, before);
  });

  test('the task stores the schema as its strict json_schema text.format', async () => {
    const r = await alice.callTool({ name: 'generate', arguments: { prompt: 'x', max_output_tokens: 4, output_schema: schema } });
    const taskId = (r._meta?.['task-runtime/run'] as { taskId?: string } | undefined)?.taskId ?? (r.structuredContent as { taskId?: string })?.taskId;
    assert.ok(taskId, JSON.stringify(r));
    const task = server.runtime.getTask(taskId, 'alice')!;
    assert.deepEqual(task.request.text, { format: { type: 'json_schema', name: 'output_schema', schema, strict: true } });
  });

  test('generate (synchronous) answers structuredContent valid against output_schema (grammar)', async () => {
    const r = await alice.callTool({ name: 'generate', arguments: { prompt: 'Make one.', max_output_tokens: 800, output_schema: schema } });
    assertStructured(r as CallToolResult);
  });

  test('generate_long as a task: tasks/result carries the structuredContent (grammar)', async () => {
    const created = await alice.request(
      {
        method: 'tools/call',
        params: { name: 'generate_long', arguments: { prompt: 'Make one.', max_output_tokens: 800, output_schema: schema }, task: {} },
      },
      CreateTaskResultSchema,
    );
    // tasks/result waits for the task to end.
    const result = await alice.request({ method: 'tasks/result', params: { taskId: created.task.taskId } }, CallToolResultSchema);
    assertStructured(result);
  });

  test('2026-07-28: generate answers structuredContent valid against output_schema (grammar)', async () => {
    // Below 256 tokens: a synchronous generate in this era (modernTasks.ts LONG_GENERATION_TOKENS).
    const result = await modern.result('tools/call', {
      name: 'generate',
      arguments: { prompt: 'Make one.', max_output_tokens: 255, output_schema: schema },
    });
    assert.equal(result.resultType, 'complete');
    assertStructured(result);
  });

  test('a keyword the backend cannot enforce (pattern) is -32602 naming output_schema…, in both eras (backend check)', async () => {
    const withPattern = { ...schema, properties: { ...schema.properties, title: { type: 'string', pattern: '^[A-Z]+$' } } };
    const e = await rpcError(alice.callTool({ name: 'generate', arguments: { prompt: 'x', output_schema: withPattern } }));
    assert.equal(e.code, ErrorCode.InvalidParams);
    const data = e.data as { code: string; param: string };
    assert.equal(data.code, 'invalid_json_schema');
    assert.match(data.param, /^output_schema/);
    const r = await modern.request('tools/call', { name: 'generate', arguments: { prompt: 'x', output_schema: withPattern } });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, -32602);
    assert.equal(r.body.error.data.code, 'invalid_json_schema');
    assert.match(r.body.error.data.param, /^output_schema/);
  });
});

function deep(levels: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < levels; i++) s = { type: 'object', properties: { a: s } };
  return s;
}
