// POST /lmsp/v1/rerank against the real `serve` process with a generated reranker beside the chat model (issue 41
// item 1). No SDK has a rerank method, so the requests are raw fetches in the shape llama.cpp server and vLLM take:
// results sorted by score, best first, `index` pointing into `documents`; top_n cuts the list; return_documents
// adds each document's text; usage adds up the pairs' tokens; the same document scores the same in any batch;
// /v1/rerank is the same route. Bad input is a 400 in the OpenAI-style error form naming the param; a chat model
// (no rank head) is 400 unsupported_capability param model; an unknown model 404; no token 401; no task is made.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { testRerankerPath } from '../../fixtures/testModel';
import { call, openAiServer } from '../lmsp/harness';

interface RerankAnswer {
  id: string;
  object: string;
  model: string;
  results: Array<{ index: number; relevance_score: number; document?: { text: string } }>;
  usage: { prompt_tokens: number; total_tokens: number };
}

describe('rerank over raw HTTP', () => {
  const ctx = openAiServer(['--model', testRerankerPath()]);
  let reranker = '';
  before(async () => {
    const models = await call(ctx.server, 'GET', '/models');
    reranker = (models.json as { data: Array<{ id: string }> }).data.map((m) => m.id).find((id) => id !== ctx.server.model)!;
    assert.ok(reranker);
  });

  /** A raw fetch at the LMSP base URL (or `base`), as a llama.cpp / vLLM rerank client sends it. */
  const rerank = async (body: Record<string, unknown>, base = ctx.server.lmsp) => {
    const r = await fetch(`${base}/rerank`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ctx.server.tokenA}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: reranker, ...body }),
    });
    return { status: r.status, json: (await r.json()) as RerankAnswer & { error?: { param?: string; code?: string; type?: string } } };
  };

  const documents = ['hello world', 'the task runtime', 'data and time', 'x'];

  it('answers every document, best first, with usage; the same document scores the same in any batch', async () => {
    const r = await rerank({ query: 'hello', documents });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.match(r.json.id, /^rerank-/);
    assert.equal(r.json.object, 'list');
    assert.equal(r.json.model, reranker);
    assert.deepEqual(r.json.results.map((x) => x.index).sort(), [0, 1, 2, 3]);
    const scores = r.json.results.map((x) => x.relevance_score);
    assert.deepEqual(
      scores,
      [...scores].sort((a, b) => b - a),
    );
    assert.ok(scores.every((s) => s > 0 && s < 1));
    assert.ok(r.json.results.every((x) => x.document === undefined));
    assert.ok(r.json.usage.prompt_tokens > 0);
    assert.equal(r.json.usage.total_tokens, r.json.usage.prompt_tokens);

    let tokens = 0;
    for (const [i, doc] of documents.entries()) {
      const one = await rerank({ query: 'hello', documents: [doc] });
      assert.deepEqual(one.json.results, [{ index: 0, relevance_score: r.json.results.find((x) => x.index === i)!.relevance_score }]);
      tokens += one.json.usage.prompt_tokens;
    }
    assert.equal(r.json.usage.prompt_tokens, tokens);
  });

  it('top_n keeps the best n; return_documents adds each text', async () => {
    const all = await rerank({ query: 'hello', documents });
    const top = await rerank({ query: 'hello', documents, top_n: 2, return_documents: true });
    assert.equal(top.status, 200);
    assert.deepEqual(
      top.json.results.map((x) => ({ index: x.index, relevance_score: x.relevance_score })),
      all.json.results.slice(0, 2),
    );
    for (const x of top.json.results) assert.deepEqual(x.document, { text: documents[x.index] });
    // top_n above the count answers them all; usage counts every document evaluated.
    const many = await rerank({ query: 'hello', documents, top_n: 10 });
    assert.equal(many.json.results.length, 4);
    assert.equal(top.json.usage.prompt_tokens, all.json.usage.prompt_tokens);
  });

  const bad: Array<[string, Record<string, unknown>, string]> = [
    ['no query', { documents: ['a'] }, 'query'],
    ['an empty query', { query: '', documents: ['a'] }, 'query'],
    ['a query that is not a string', { query: ['a'], documents: ['a'] }, 'query'],
    ['no documents', { query: 'q' }, 'documents'],
    ['an empty document list', { query: 'q', documents: [] }, 'documents'],
    ['an empty document', { query: 'q', documents: ['a', ''] }, 'documents.1'],
    ['a document that is not a string', { query: 'q', documents: ['a', { text: 'b' }] }, 'documents.1'],
    ['too many documents', { query: 'q', documents: Array.from({ length: 1025 }, () => 'a') }, 'documents'],
    ['a document over 200 000 characters', { query: 'q', documents: ['a'.repeat(200_001)] }, 'documents.0'],
    ['top_n 0', { query: 'q', documents: ['a'], top_n: 0 }, 'top_n'],
    ['a fractional top_n', { query: 'q', documents: ['a'], top_n: 1.5 }, 'top_n'],
    ['return_documents not a boolean', { query: 'q', documents: ['a'], return_documents: 'yes' }, 'return_documents'],
    ['an unknown field', { query: 'q', documents: ['a'], texts: ['a'] }, 'texts'],
  ];
  for (const [what, body, param] of bad) {
    it(`${what} → 400 naming ${param}`, async () => {
      const r = await call(ctx.server, 'POST', '/rerank', { body: { model: reranker, ...body } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.param, param, r.text);
      assert.equal(r.json.error.type, 'invalid_request_error');
    });
  }

  it('a pair longer than the model ranks → 400 context_length_exceeded naming the document', async () => {
    const r = await rerank({ query: 'q', documents: ['ok', 'word '.repeat(3000)] });
    assert.equal(r.status, 400);
    assert.equal(r.json.error?.code, 'context_length_exceeded');
    assert.equal(r.json.error?.param, 'documents.1');
  });

  it('a chat model (no rank head) → 400 unsupported_capability param model; unknown model 404; no token 401; no task', async () => {
    const chat = await call(ctx.server, 'POST', '/rerank', { body: { model: ctx.server.model, query: 'q', documents: ['d'] } });
    assert.equal(chat.status, 400, chat.text);
    assert.equal(chat.json.error.code, 'unsupported_capability');
    assert.equal(chat.json.error.param, 'model');
    const unknown = await call(ctx.server, 'POST', '/rerank', { body: { model: 'no-such-model', query: 'q', documents: ['d'] } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, 'model_not_found');
    const anon = await call(ctx.server, 'POST', '/rerank', { token: null, body: { model: reranker, query: 'q', documents: ['d'] } });
    assert.equal(anon.status, 401);
    const tasks = await call(ctx.server, 'GET', '/tasks?limit=100');
    assert.equal(tasks.json.data.length, 0);
  });

  it('/v1/rerank is the same route', async () => {
    const viaV1 = await rerank({ query: 'same', documents }, `${ctx.server.url}/v1`);
    const direct = await rerank({ query: 'same', documents });
    assert.equal(viaV1.status, 200, JSON.stringify(viaV1.json));
    assert.deepEqual(viaV1.json.results, direct.json.results);
  });
});
