// The MCP tool outcome of a generation that asked for JSON (output_schema), from stored records alone: parsed
// structuredContent with the run in _meta; a tool error for output that is not a JSON object (cut off or unconstrained);
// the usual shape without a schema. Independent of any model, so it holds whatever the backend generates.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RUN_META_KEY, toolOutcome } from '../../../../src/protocols/mcp/mcpTaskView';
import { argumentOf, OUTPUT_SCHEMA_NAME, toResponseRequest } from '../../../../src/protocols/mcp/tools';
import { newTaskRecord } from '../../../../src/runtime/newTask';
import { responseObject, type ResponseStatus } from '../../../../src/runtime/responses';
import type { ResponseRequest, TaskRecord } from '../../../../src/runtime/task';

const schema = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false };

function finished(input: ResponseRequest, text: string, status: ResponseStatus = 'completed'): TaskRecord {
  const task = newTaskRecord({
    origin: 'mcp',
    principal: 'p',
    title: 't',
    input: { ...input, model: 'm' },
    onRestart: 'fail',
    ttlMs: null,
    deadlineAt: null,
    meta: {},
    now: 1_000,
  });
  task.status = 'succeeded';
  task.outputTokens = 5;
  task.response = responseObject(task, { status, text, messageId: 'msg_1', incompleteReason: status === 'incomplete' ? 'max_output_tokens' : null });
  return task;
}

const withSchema = toResponseRequest({ prompt: 'x', output_schema: schema }, 512);

describe('MCP output_schema outcome', () => {
  it('output_schema becomes a strict json_schema text.format; a refusal param maps back to the argument', () => {
    assert.deepEqual(withSchema.text, { format: { type: 'json_schema', name: OUTPUT_SCHEMA_NAME, schema, strict: true } });
    assert.equal(toResponseRequest({ prompt: 'x' }, 512).text, undefined);
    assert.equal(argumentOf('text.format.schema.properties.a.pattern'), 'output_schema.properties.a.pattern');
    assert.equal(argumentOf('text.format.schema'), 'output_schema');
    assert.equal(argumentOf('max_output_tokens'), 'max_output_tokens');
  });

  it('valid JSON: structuredContent is the parsed object, the text stays, the run is in _meta', () => {
    const task = finished(withSchema, '{"a": 42}');
    const outcome = toolOutcome(task);
    assert.ok(outcome && 'result' in outcome);
    assert.deepEqual(outcome.result.structuredContent, { a: 42 });
    assert.deepEqual(outcome.result.content, [{ type: 'text', text: '{"a": 42}' }]);
    assert.equal(outcome.result.isError, false);
    const run = outcome.result._meta?.[RUN_META_KEY] as Record<string, unknown>;
    assert.equal(run.taskId, task.id);
    assert.equal(run.status, 'completed');
    assert.equal(run.outputTokens, 5);
  });

  it('JSON cut off at max_output_tokens, or not an object: a tool error with the text, never structuredContent from it', () => {
    const cut = toolOutcome(finished(withSchema, '{"a": 4', 'incomplete'));
    assert.ok(cut && 'result' in cut);
    assert.equal(cut.result.isError, true);
    assert.equal((cut.result.structuredContent as { status: string }).status, 'incomplete');
    assert.match((cut.result.content[0] as { text: string }).text, /max_output_tokens[\s\S]*\{"a": 4/);
    for (const text of ['[1, 2]', 'noise', 'null']) {
      const bad = toolOutcome(finished(withSchema, text));
      assert.ok(bad && 'result' in bad);
      assert.equal(bad.result.isError, true, text);
      assert.equal((bad.result.structuredContent as { status: string }).status, 'invalid_output');
    }
  });

  it('without output_schema the result keeps its shape', () => {
    const task = finished({ input: 'x' }, '{"a": 1}');
    const outcome = toolOutcome(task);
    assert.ok(outcome && 'result' in outcome);
    assert.deepEqual(outcome.result.structuredContent, {
      status: 'completed',
      text: '{"a": 1}',
      taskId: task.id,
      model: 'm',
      outputTokens: 5,
      usage: null,
    });
    assert.equal(outcome.result._meta, undefined);
  });

  it('a run-time refusal (invalid_json_schema) is the request error -32602, as the other request errors', () => {
    const task = finished(withSchema, '');
    task.status = 'failed';
    task.response = null;
    task.error = { type: 'about:blank', title: 'Bad schema', status: 400, detail: 'pattern is not supported', code: 'invalid_json_schema' };
    const outcome = toolOutcome(task);
    assert.ok(outcome && 'error' in outcome);
    assert.equal(outcome.error.code, -32602);
  });
});
