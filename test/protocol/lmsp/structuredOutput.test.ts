// Structured output and the sampling member through the LMSP door, with the unmodified `openai` SDK where a client
// would use it: text.format json_schema / json_object, top_logprobs and include, task_runtime sampling, and the 400s
// (problem+json, with the OpenAI `error` member the SDK reads) for what the door or the backend refuses.
// The demo model's weights are noise: only grammar-constrained output is checkable, so the tests that parse the
// output rely on the local backend constraining generation to the schema.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { call, openAiServer } from './harness';

const personSchema = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' }, admin: { type: 'boolean' } },
  required: ['name', 'age', 'admin'],
  additionalProperties: false,
};
const personFormat = { type: 'json_schema' as const, name: 'person', schema: personSchema, strict: true };

/** The SDK's error for a refused request: 400 with the code and param the server named. */
function refused(code: string, param: string) {
  return (e: unknown) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.code, code, e.message);
    assert.equal(e.param, param, e.message);
    return true;
  };
}

describe('structured output and sampling through LMSP (openai SDK)', () => {
  const ctx = openAiServer();

  it('json_schema: the response echoes the format and top_logprobs; output_text is JSON of the schema (grammar)', async () => {
    const r = await ctx.client.responses.create({
      model: ctx.server.model,
      input: 'A person, please.',
      max_output_tokens: 1024,
      text: { format: personFormat },
      ...({ top_logprobs: 2 } as object),
    });
    assert.deepEqual(r.text?.format, personFormat);
    assert.equal((r as unknown as { top_logprobs: number }).top_logprobs, 2);
    assert.equal(r.status, 'completed', JSON.stringify(r.incomplete_details));
    const value = JSON.parse(r.output_text);
    assert.deepEqual(Object.keys(value), ['name', 'age', 'admin']);
    assert.equal(typeof value.name, 'string');
    assert.ok(Number.isInteger(value.age));
    assert.equal(typeof value.admin, 'boolean');
  });

  it('responses.parse with zodTextFormat gives output_parsed (grammar)', async () => {
    const Person = z.object({ name: z.string().max(12), tags: z.array(z.enum(['a', 'b'])).max(3), score: z.number() });
    const r = await ctx.client.responses.parse({
      model: ctx.server.model,
      input: 'Describe someone.',
      max_output_tokens: 1024,
      text: { format: zodTextFormat(Person, 'someone') },
    });
    assert.ok(r.output_parsed, r.output_text);
    assert.deepEqual(Person.parse(r.output_parsed), r.output_parsed);
  });

  it('a json_schema stream has the Responses event types, and its text is JSON (grammar)', async () => {
    const stream = await ctx.client.responses.create({
      model: ctx.server.model,
      input: 'Stream a person.',
      max_output_tokens: 1024,
      text: { format: personFormat },
      stream: true,
    });
    const types: string[] = [];
    let deltas = '';
    let done: string | undefined;
    let final: OpenAI.Responses.Response | undefined;
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === 'response.output_text.delta') deltas += e.delta;
      if (e.type === 'response.output_text.done') done = e.text;
      if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
    }
    const order = [
      'response.created',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
    ];
    let at = -1;
    for (const t of order) {
      const i = types.indexOf(t, at + 1);
      assert.ok(i > at, `${t} after ${order[order.indexOf(t) - 1]} in ${types.join(',')}`);
      at = i;
    }
    assert.ok(final, types.join(','));
    assert.deepEqual(final!.text?.format, personFormat);
    assert.equal(done, deltas);
    assert.equal(final!.status, 'completed');
    assert.deepEqual(Object.keys(JSON.parse(deltas)), ['name', 'age', 'admin']);
  });

  it('a schema keyword the backend cannot enforce is 400 invalid_json_schema naming it (backend check)', async () => {
    const schema = {
      type: 'object',
      properties: { code: { type: 'string', pattern: '^[A-Z]{3}$' } },
      required: ['code'],
      additionalProperties: false,
    };
    await assert.rejects(
      () =>
        ctx.client.responses.create({
          model: ctx.server.model,
          input: 'x',
          text: { format: { type: 'json_schema', name: 'code', schema, strict: true } },
        }),
      (e: unknown) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.code, 'invalid_json_schema', e.message);
        assert.match(String(e.param), /^text\.format\.schema/);
        assert.match(e.message, /pattern/);
        return true;
      },
    );
  });

  it('bad formats are 400 invalid_request naming the param', async () => {
    const cases: Array<[unknown, string]> = [
      [{ type: 'xml' }, 'text.format.type'],
      [{ type: 'json_schema', name: 'has space', schema: personSchema }, 'text.format.name'],
      [{ type: 'json_schema', name: 'x'.repeat(65), schema: personSchema }, 'text.format.name'],
      [{ type: 'json_schema', name: 'person' }, 'text.format.schema'],
      [{ type: 'json_schema', name: 'person', schema: [personSchema] }, 'text.format.schema'],
      [{ type: 'json_schema', name: 'person', schema: nested(80) }, 'text.format.schema'],
      [{ type: 'json_schema', name: 'person', schema: personSchema, strict: 'yes' }, 'text.format.strict'],
      [{ type: 'json_schema', name: 'person', schema: personSchema, colour: 'red' }, 'text.format.colour'],
    ];
    for (const [format, param] of cases) {
      await assert.rejects(
        () => ctx.client.responses.create({ model: ctx.server.model, input: 'x', text: { format: format as never } }),
        refused('invalid_request', param),
      );
    }
  });

  it('json_object needs the word "json" in the input or instructions (as OpenAI)', async () => {
    await assert.rejects(
      () => ctx.client.responses.create({ model: ctx.server.model, input: 'hello', text: { format: { type: 'json_object' } } }),
      refused('invalid_request', 'text.format'),
    );
    const r = await ctx.client.responses.create({
      model: ctx.server.model,
      input: 'hello',
      instructions: 'Answer in JSON.',
      max_output_tokens: 2,
      text: { format: { type: 'json_object' } },
    });
    assert.deepEqual(r.text?.format, { type: 'json_object' });
  });

  it('sampling out of range is 400 invalid_request naming the field; in range it runs', async () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ seed: 1.5 }, 'task_runtime.seed'],
      [{ seed: 2 ** 60 }, 'task_runtime.seed'],
      [{ top_k: -1 }, 'task_runtime.top_k'],
      [{ top_k: 1001 }, 'task_runtime.top_k'],
      [{ min_p: 1.5 }, 'task_runtime.min_p'],
      [{ repeat_penalty: 0 }, 'task_runtime.repeat_penalty'],
      [{ repeat_penalty: 2.5 }, 'task_runtime.repeat_penalty'],
      [{ frequency_penalty: -3 }, 'task_runtime.frequency_penalty'],
      [{ presence_penalty: 2.1 }, 'task_runtime.presence_penalty'],
      [{ stop: '' }, 'task_runtime.stop'],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'task_runtime.stop'],
      [{ stop: ['x'.repeat(257)] }, 'task_runtime.stop.0'],
      [{ typical_p: 0.5 }, 'task_runtime.typical_p'],
    ];
    for (const [extras, param] of bad) {
      await assert.rejects(
        () => ctx.client.responses.create({ model: ctx.server.model, input: 'x', ...({ task_runtime: extras } as object) }),
        refused('invalid_request', param),
      );
    }
    await assert.rejects(
      () => ctx.client.responses.create({ model: ctx.server.model, input: 'x', ...({ top_logprobs: 21 } as object) }),
      refused('invalid_request', 'top_logprobs'),
    );
    const ok = await ctx.client.responses.create({
      model: ctx.server.model,
      input: 'x',
      max_output_tokens: 3,
      ...({
        task_runtime: { seed: 7, stop: ['\n\n'], top_k: 40, min_p: 0.05, repeat_penalty: 1.1, frequency_penalty: 0.5, presence_penalty: -0.5 },
      } as object),
    });
    assert.ok(['completed', 'incomplete'].includes(ok.status!));
  });

  it('include: only message.output_text.logprobs and reasoning.encrypted_content; another value is 400 unsupported_capability naming it', async () => {
    await assert.rejects(
      () =>
        ctx.client.responses.create({ model: ctx.server.model, input: 'x', include: ['message.output_text.logprobs', 'file_search_call.results'] }),
      (e: unknown) => refused('unsupported_capability', 'include.1')(e) && /file_search_call\.results/.test((e as Error).message),
    );
  });

  it('POST /tasks: the same checks, the params under input.', async () => {
    const input = { model: ctx.server.model, input: 'x', max_output_tokens: 2 };
    const cases: Array<[Record<string, unknown>, number, string, string]> = [
      [{ task_runtime: { top_k: 5000 } }, 400, 'invalid_request', 'input.task_runtime.top_k'],
      [{ text: { format: { type: 'json_schema', name: '', schema: personSchema } } }, 400, 'invalid_request', 'input.text.format.name'],
      [{ text: { format: { type: 'json_object' } } }, 400, 'invalid_request', 'input.text.format'],
      [{ include: ['file_search_call.results'] }, 400, 'unsupported_capability', 'input.include.0'],
    ];
    for (const [extra, status, code, param] of cases) {
      const r = await call(ctx.server, 'POST', '/tasks', { body: { type: 'response', input: { ...input, ...extra } } });
      assert.equal(r.status, status, r.text);
      assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
      assert.equal(r.json.code, code);
      assert.equal(r.json.param, param);
      // The OpenAI envelope beside the problem members says the same.
      assert.deepEqual(r.json.error, { message: r.json.detail, type: 'invalid_request_error', param, code });
    }
  });

  it('POST /tasks: a backend refusal names the param under input. (backend check)', async () => {
    const input = { model: ctx.server.model, input: 'x', max_output_tokens: 2 };
    const pattern = { type: 'object', properties: { a: { type: 'string', pattern: 'x+' } }, required: ['a'], additionalProperties: false };
    const r = await call(ctx.server, 'POST', '/tasks', {
      body: { type: 'response', input: { ...input, text: { format: { type: 'json_schema', name: 'p', schema: pattern } } } },
    });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 'invalid_json_schema');
    assert.match(r.json.param, /^input\.text\.format\.schema/);
  });

  it('the idempotency fingerprint covers text.format and the sampling member', async () => {
    const body = (extra: Record<string, unknown>) => ({ model: ctx.server.model, input: 'same', max_output_tokens: 2, ...extra });
    const first = await call(ctx.server, 'POST', '/responses', {
      body: body({ task_runtime: { seed: 1 } }),
      headers: { 'idempotency-key': 'fp-sampling' },
    });
    assert.equal(first.status, 200, first.text);
    const seed = await call(ctx.server, 'POST', '/responses', {
      body: body({ task_runtime: { seed: 2 } }),
      headers: { 'idempotency-key': 'fp-sampling' },
    });
    assert.equal(seed.status, 422);
    assert.equal(seed.json.code, 'idempotency_key_reused');
    const format = await call(ctx.server, 'POST', '/responses', {
      body: body({ task_runtime: { seed: 1 }, text: { format: { type: 'json_object' } }, instructions: 'json' }),
      headers: { 'idempotency-key': 'fp-sampling' },
    });
    assert.equal(format.status, 422);
    const again = await call(ctx.server, 'POST', '/responses', {
      body: body({ task_runtime: { seed: 1 } }),
      headers: { 'idempotency-key': 'fp-sampling' },
    });
    assert.equal(again.status, 200);
    assert.equal(again.json.id, first.json.id);
  });

  it('GET /models shows the context a task runs with (vendor member, null until known)', async () => {
    await ctx.client.responses.create({ model: ctx.server.model, input: 'load it', max_output_tokens: 1 });
    const r = await call(ctx.server, 'GET', `/models/${encodeURIComponent(ctx.server.model)}`);
    assert.equal(r.status, 200);
    assert.ok('context_length' in r.json.task_runtime, JSON.stringify(r.json));
    const n = r.json.task_runtime.context_length;
    assert.ok(n === null || (Number.isInteger(n) && n > 0), String(n));
    const list = await call(ctx.server, 'GET', '/models');
    assert.ok(list.json.data.every((m: { task_runtime?: object }) => m.task_runtime && 'context_length' in m.task_runtime));
  });
});

function nested(depth: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { type: 'array', items: s };
  return s;
}
