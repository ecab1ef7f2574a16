// A forced function call is durable like text (issue #19 item 6): a `resume` task SIGKILLed in the middle of a call's
// arguments continues inside the call grammar after a restart (the delivered arguments re-fed), so the response ends
// with one function_call item, opened once across the restart, whose arguments are valid JSON against the tool's
// parameters. Real `serve` process, real store, the demo model with the tool chat template.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import Ajv from 'ajv';
import { writeTestModel } from '../../../src/backends/llama/demoModel';
import { TOOLS_CHAT_TEMPLATE } from '../../fixtures/chatTemplates';
import { assertContiguous, call, followEvents, removeDir, startServer, TERMINAL_TYPES, waitForStatus } from './harness';

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
/** Arguments of a few thousand characters: the call is still open when the kill lands. */
const PARAMETERS = obj({ lines: { type: 'array', items: { type: 'string', minLength: 16, maxLength: 16 }, minItems: 200, maxItems: 200 } });
const TOOL = { type: 'function', name: 'write_lines', description: 'Writes lines', parameters: PARAMETERS, strict: true };

describe('a forced function call across a SIGKILL (on_restart resume)', () => {
  it('ends, after the restart, with one function_call item opened once, its arguments valid against the parameters', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-tools-restart-'));
    const modelFile = path.join(dir, 'tools.gguf');
    // A trained context of 8192: the prompt and the long arguments fit.
    writeTestModel(modelFile, { seed: 1, chatTemplate: TOOLS_CHAT_TEMPLATE, contextLength: 8192 });
    let server = await startServer({ args: ['--model', modelFile] });
    const dataDir = server.dataDir;
    try {
      const models = await call(server, 'GET', '/models');
      const model = (models.json.data as Array<{ id: string }>).map((m) => m.id).find((id) => id !== server.model)!;
      assert.ok(model, models.text);
      const created = await call(server, 'POST', '/tasks', {
        body: {
          type: 'response',
          input: {
            model,
            input: 'Write the lines.',
            tools: [TOOL],
            tool_choice: 'required',
            parallel_tool_calls: false,
            temperature: 1,
            task_runtime: { seed: 3 },
          },
          on_restart: 'resume',
        },
      });
      assert.equal(created.status, 202, created.text);
      const id = created.json.id as string;
      const { events: seen } = await followEvents(server, id, { until: (e) => e.type === 'response.function_call_arguments.delta' });
      await server.kill();
      assert.ok(!seen.some((e) => TERMINAL_TYPES.has(e.type) || e.type === 'response.function_call_arguments.done'), 'the call was open when killed');

      server = await startServer({ dataDir, args: ['--model', modelFile] });
      const done = await waitForStatus(server, id, ['succeeded', 'failed', 'cancelled']);
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      const items = (done.response.output as Array<Record<string, any>>).filter((o) => o.type === 'function_call');
      assert.equal(items.length, 1, JSON.stringify(done.response.output));
      const item = items[0]!;
      assert.equal(item.name, 'write_lines');
      assert.equal(item.status, 'completed');
      const validate = new Ajv({ strict: false }).compile(PARAMETERS);
      const args = JSON.parse(item.arguments as string) as unknown;
      assert.ok(validate(args), `${JSON.stringify(validate.errors)} in ${item.arguments}`);

      // The history: what was seen is its prefix; the call opened once, before the kill, and closed after the resume.
      const { events } = await followEvents(server, id);
      assertContiguous(events);
      assert.deepEqual(events.slice(0, seen.length), seen);
      const opened = events.filter((e) => e.type === 'response.output_item.added' && e.data.item.type === 'function_call');
      assert.equal(opened.length, 1, 'the call is opened once across the restart');
      assert.equal(opened[0]!.data.item.call_id, item.call_id);
      assert.ok(opened[0]!.id < seen.length, 'opened before the kill');
      const resumedAt = events.findIndex(
        (e, i) => i >= seen.length && e.type === 'task_runtime:task.status' && JSON.stringify(e.data).includes('resuming'),
      );
      const closedAt = events.findIndex((e) => e.type === 'response.output_item.done' && e.data.item.type === 'function_call');
      assert.ok(resumedAt > 0 && resumedAt < closedAt, `resumed (${resumedAt}) inside the call, closed after (${closedAt})`);
      assert.equal(events.filter((e) => e.type === 'response.created').length, 1, 'resumed, not started again');
      const deltas = events
        .filter((e) => e.type === 'response.function_call_arguments.delta')
        .map((e) => e.data.delta as string)
        .join('');
      assert.equal(deltas, item.arguments, 'the deltas across both attempts are the arguments, nothing twice');
      assert.equal(events.at(-1)!.type, 'response.completed');
    } finally {
      await server.stop();
      removeDir(dataDir);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
