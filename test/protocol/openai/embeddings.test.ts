// POST /lmsp/v1/embeddings against the real `serve` process and the tiny model, with the unmodified `openai` SDK
// (issue 41 item 1): `embeddings.create` with float, base64 (little-endian float32) and the SDK's own default (it
// asks for base64 and decodes) gives the same vectors; a batch keeps its order and equals its inputs embedded one by
// one; usage counts the tokens; /v1/embeddings is the same route. Bad input is a 400 in OpenAI's error shape naming
// the param; no token is a 401; an embeddings call makes no task. The embedding size is on /models before the first
// load (the file's header), so other `dimensions` is refused with the model still unloaded; /metrics counts calls,
// inputs and tokens.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { call, openAiServer } from '../lmsp/harness';

interface ListedModel {
  id: string;
  state: string;
  task_runtime: { embedding_dimensions: number | null };
}

/** The embeddings counters of /metrics for `model`. */
async function embeddingMetrics(server: Parameters<typeof call>[0], model: string) {
  const r = await call(server, 'GET', '/metrics');
  assert.equal(r.status, 200, r.text);
  const families = parsePrometheusTextFormat(r.text);
  const value = (name: string, labels: Record<string, string>) => {
    const f = families.find((x) => x.name === `task_runtime_${name}`);
    assert.ok(f, `no family ${name}`);
    const m = f.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
    return m ? Number(m.value) : 0;
  };
  return {
    succeeded: value('embedding_requests_total', { model, outcome: 'succeeded' }),
    failed: value('embedding_requests_total', { model, outcome: 'failed' }),
    inputs: value('embedding_inputs_total', { model }),
    tokens: value('embedding_prompt_tokens_total', { model }),
  };
}

const decode = (b64: string) => {
  const bytes = Buffer.from(b64, 'base64');
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
};

describe('embeddings with the openai npm client', () => {
  const ctx = openAiServer();

  it('before any load, /models lists the embedding size and other dimensions are refused with the model unloaded', async () => {
    const model = async () => ((await call(ctx.server, 'GET', '/models')).json.data as ListedModel[]).find((m) => m.id === ctx.server.model)!;
    const listed = await model();
    assert.equal(listed.state, 'unloaded');
    const dims = listed.task_runtime.embedding_dimensions!;
    assert.ok(Number.isInteger(dims) && dims > 0, JSON.stringify(listed));
    await assert.rejects(ctx.client.embeddings.create({ model: ctx.server.model, input: 'a', dimensions: dims + 1 }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.code, 'unsupported_capability');
      assert.equal(e.param, 'dimensions');
      return true;
    });
    assert.equal((await model()).state, 'unloaded');
    const r = await ctx.client.embeddings.create({ model: ctx.server.model, input: 'a', dimensions: dims, encoding_format: 'float' });
    assert.equal(r.data[0].embedding.length, dims);
    assert.equal((await model()).task_runtime.embedding_dimensions, dims);
  });

  it('/metrics counts calls by outcome, inputs and tokens', async () => {
    const before = await embeddingMetrics(ctx.server, ctx.server.model);
    const r = await ctx.client.embeddings.create({ model: ctx.server.model, input: ['one', 'two inputs'], encoding_format: 'float' });
    await assert.rejects(ctx.client.embeddings.create({ model: ctx.server.model, input: ['ok', 'word '.repeat(5000)] }));
    const after = await embeddingMetrics(ctx.server, ctx.server.model);
    assert.deepEqual(
      {
        succeeded: after.succeeded - before.succeeded,
        failed: after.failed - before.failed,
        inputs: after.inputs - before.inputs,
        tokens: after.tokens - before.tokens,
      },
      { succeeded: 1, failed: 1, inputs: 2, tokens: r.usage.prompt_tokens },
    );
  });

  it('float, base64 and the SDK default give the same normalized vector, usage counts tokens', async () => {
    const input = 'The quick brown fox';
    const float = await ctx.client.embeddings.create({ model: ctx.server.model, input, encoding_format: 'float' });
    assert.equal(float.object, 'list');
    assert.equal(float.model, ctx.server.model);
    assert.equal(float.data.length, 1);
    assert.equal(float.data[0].object, 'embedding');
    assert.equal(float.data[0].index, 0);
    const v = float.data[0].embedding;
    assert.ok(v.length > 0 && v.every(Number.isFinite));
    assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5);
    assert.ok(float.usage.prompt_tokens > 0);
    assert.equal(float.usage.total_tokens, float.usage.prompt_tokens);

    const b64 = await ctx.client.embeddings.create({ model: ctx.server.model, input, encoding_format: 'base64' });
    assert.equal(typeof b64.data[0].embedding, 'string');
    assert.deepEqual(decode(b64.data[0].embedding as unknown as string), v);

    const byDefault = await ctx.client.embeddings.create({ model: ctx.server.model, input });
    assert.deepEqual(byDefault.data[0].embedding, v);
  });

  it('a batch keeps its order and equals each input embedded alone; token arrays are inputs too', async () => {
    const inputs = ['first input', 'second', 'the third and last input'];
    const batch = await ctx.client.embeddings.create({ model: ctx.server.model, input: inputs, encoding_format: 'float' });
    assert.deepEqual(
      batch.data.map((d) => d.index),
      [0, 1, 2],
    );
    let tokens = 0;
    for (const [i, text] of inputs.entries()) {
      const one = await ctx.client.embeddings.create({ model: ctx.server.model, input: text, encoding_format: 'float' });
      assert.deepEqual(batch.data[i].embedding, one.data[0].embedding, `input ${i}`);
      tokens += one.usage.prompt_tokens;
    }
    assert.equal(batch.usage.prompt_tokens, tokens);

    const ids = await ctx.client.embeddings.create({ model: ctx.server.model, input: [5, 6, 7, 8], encoding_format: 'float' });
    assert.equal(ids.data.length, 1);
    const idBatch = await ctx.client.embeddings.create({
      model: ctx.server.model,
      input: [
        [5, 6, 7, 8],
        [9, 10],
      ],
      encoding_format: 'float',
    });
    assert.deepEqual(idBatch.data[0].embedding, ids.data[0].embedding);
    assert.equal(idBatch.data.length, 2);
  });

  it('dimensions equal to the model size is accepted, `user` too', async () => {
    const first = await ctx.client.embeddings.create({ model: ctx.server.model, input: 'x', encoding_format: 'float' });
    const dims = first.data[0].embedding.length;
    const same = await ctx.client.embeddings.create({ model: ctx.server.model, input: 'x', encoding_format: 'float', dimensions: dims, user: 'u1' });
    assert.deepEqual(same.data[0].embedding, first.data[0].embedding);
  });

  const bad: Array<[string, Record<string, unknown>, string]> = [
    ['an empty list', { input: [] }, 'input'],
    ['an empty string', { input: '' }, 'input'],
    ['an empty string in a list', { input: ['a', ''] }, 'input.1'],
    ['a negative token id', { input: [1, -2] }, 'input.1'],
    ['a token id outside the vocabulary', { input: [1, 2_000_000_000] }, 'input'],
    ['too many inputs', { input: Array.from({ length: 2049 }, () => 'a') }, 'input'],
    ['too many token ids', { input: Array.from({ length: 8193 }, () => 1) }, 'input'],
    ['a token array too long in a list', { input: [[1], Array.from({ length: 8193 }, () => 1)] }, 'input.1'],
    ['an unknown encoding_format', { input: 'a', encoding_format: 'int8' }, 'encoding_format'],
    ['other dimensions', { input: 'a', dimensions: 3 }, 'dimensions'],
    ['an unknown field', { input: 'a', foo: 1 }, 'foo'],
  ];
  for (const [what, body, param] of bad) {
    it(`${what} → 400 in OpenAI's error form with param ${param}`, async () => {
      await assert.rejects(ctx.client.embeddings.create({ model: ctx.server.model, ...body } as never), (e: unknown) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.status, 400);
        assert.equal(e.param, param, JSON.stringify(e.error));
        assert.equal((e.error as { type?: string }).type, 'invalid_request_error');
        return true;
      });
    });
  }

  it('an input longer than the model embeds → 400 context_length_exceeded', async () => {
    await assert.rejects(ctx.client.embeddings.create({ model: ctx.server.model, input: ['ok', 'word '.repeat(5000)] }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.BadRequestError);
      assert.equal(e.code, 'context_length_exceeded');
      assert.equal(e.param, 'input.1');
      return true;
    });
  });

  it('an unknown model → 404 model_not_found; no token → 401; no task is made', async () => {
    await assert.rejects(ctx.client.embeddings.create({ model: 'no-such-model', input: 'a' }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.NotFoundError);
      assert.equal(e.code, 'model_not_found');
      return true;
    });
    const anon = await call(ctx.server, 'POST', '/embeddings', { token: null, body: { model: ctx.server.model, input: 'a' } });
    assert.equal(anon.status, 401);
    const tasks = await call(ctx.server, 'GET', '/tasks?limit=100');
    assert.equal(tasks.json.data.length, 0);
  });

  it('/v1/embeddings is the same route', async () => {
    const viaV1 = new OpenAI({ apiKey: ctx.server.tokenA, baseURL: `${ctx.server.url}/v1`, maxRetries: 0 });
    const a = await viaV1.embeddings.create({ model: ctx.server.model, input: 'same', encoding_format: 'float' });
    const b = await ctx.client.embeddings.create({ model: ctx.server.model, input: 'same', encoding_format: 'float' });
    assert.deepEqual(a.data[0].embedding, b.data[0].embedding);
  });
});
