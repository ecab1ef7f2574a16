// Engines we cannot run here (vLLM, Ollama, LM Studio) and llama.cpp server, as the scripted engine's flavours
// (fixtures/fakeEngine.ts FLAVORS): their model lists and context lengths, slot probing only where it exists, usage
// with include_usage, their error bodies (context overflow → context_length_exceeded, model not found), their odd
// answers (LM Studio's 200 for unknown routes and errors, vLLM's old error objects and "abort" finish, Ollama's null
// model list and its silent mid-stream failures), on_restart "resume" offered or refused per kind, and the request
// fields of each kind (sampling under its names, response_format, logprobs) sent or refused at create.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { streamChat } from '../../../../src/backends/remote/chatStream';
import { DEFAULT_TIMEOUTS } from '../../../../src/backends/remote/engine';
import {
  engineErrorOf,
  isContextOverflow,
  kindFromModelList,
  resumeOffered,
  type EngineKind,
  type SamplingField,
} from '../../../../src/backends/remote/quirks';
import { RemoteBackend } from '../../../../src/backends/remote/remoteBackend';
import { BackendError, RequestRefusedError, type GenerateRequest, type TokenLogprob } from '../../../../src/runtime/backend';
import { isRuntimeError } from '../../../../src/runtime/errors';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import type { TaskRecord } from '../../../../src/runtime/task';
import {
  answer,
  FLAVORS,
  flavorStream,
  sseHead,
  startFakeEngine,
  type ChatHandler,
  type EngineFlavor,
  type FakeEngine,
} from '../../../fixtures/fakeEngine';
import { tempDir } from '../../runtime/helpers';

const root = tempDir('tr-kinds-');
let dirs = 0;
const engines: FakeEngine[] = [];
const runtimes: TaskRuntime[] = [];
after(async () => {
  for (const r of runtimes) await r.close();
  for (const e of engines) await e.close();
});

async function engine(
  flavor: EngineFlavor,
  chat: ChatHandler = flavorStream(flavor, ['Hello', ', ', 'world']),
  models = ['m1'],
): Promise<FakeEngine> {
  const e = await startFakeEngine(chat, models, flavor);
  engines.push(e);
  return e;
}

async function open(backend: RemoteBackend): Promise<TaskRuntime> {
  const r = await TaskRuntime.open({ dataDir: `${root}/${++dirs}`, backend, backendRetry: { attempts: 2, baseMs: 10, maxMs: 50 } });
  runtimes.push(r);
  return r;
}

function create(r: TaskRuntime, over: Partial<Parameters<TaskRuntime['createTask']>[0]> = {}): TaskRecord {
  return r.createTask({ origin: 'lmsp', principal: 'p', input: { model: 'e/m1', input: 'Hi', max_output_tokens: 16 }, ...over }).task;
}

const text = (t: TaskRecord) => (t.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0]?.content[0]?.text;

const expected: Record<EngineFlavor['name'], { context: number | null; concurrency: number; propsAsked: boolean; resume: boolean }> = {
  'llama.cpp': { context: 8192, concurrency: 2, propsAsked: true, resume: true },
  vllm: { context: 32768, concurrency: 4, propsAsked: false, resume: true },
  ollama: { context: null, concurrency: 4, propsAsked: false, resume: false },
  lmstudio: { context: null, concurrency: 4, propsAsked: false, resume: false },
};

for (const flavor of Object.values(FLAVORS)) {
  const want = expected[flavor.name];
  describe(`an engine of kind "${flavor.name}"`, () => {
    it(`lists its models with ${want.context ?? 'no'} context, ${want.propsAsked ? 'reads its slots' : 'asks no /props'}, streams with usage; resume ${want.resume ? 'offered' : 'refused'}`, async () => {
      const e = await engine(flavor);
      const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: flavor.name }]);
      await b.refresh();
      const ep = b.engines[0].endpoints[0];
      assert.equal(ep.state, 'up', ep.lastError);
      assert.equal(ep.looksLike, flavor.name, 'its owned_by names it');
      assert.deepEqual(
        b.listModels().map((m) => [m.id, m.maxContextLength]),
        [['e/m1', want.context]],
      );
      assert.equal(ep.concurrency, want.concurrency);
      assert.equal(
        e.requests.some((q) => q.path === '/props'),
        want.propsAsked,
      );
      const r = await open(b);
      const done = await r.waitForTerminal(create(r).id);
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      assert.equal(text(done), 'Hello, world');
      assert.deepEqual(done.usage, { input_tokens: 7, output_tokens: 3, total_tokens: 10 }, 'usage from the include_usage chunk');
      const sent = e.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
      assert.deepEqual(sent.stream_options, { include_usage: true });
      assert.equal(b.supportsResume('e/m1'), want.resume);
      if (want.resume) assert.equal(create(r, { onRestart: 'resume' }).onRestart, 'resume');
      else
        assert.throws(
          () => create(r, { onRestart: 'resume' }),
          (err) => isRuntimeError(err, 'unsupported_capability'),
        );
    });

    if (flavor.contextOverflow) {
      const overflow = flavor.contextOverflow;
      it("a prompt longer than the context fails the task with context_length_exceeded and the engine's words", async () => {
        const e = await engine(flavor, (_q, res) => answer(res, overflow));
        const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: flavor.name }]);
        await b.refresh();
        const r = await open(b);
        const done = await r.waitForTerminal(create(r).id);
        assert.equal(done.status, 'failed');
        assert.equal(done.error?.code, 'context_length_exceeded', done.error?.detail);
        assert.equal(done.error?.status, 400);
        assert.match(done.error!.detail, /does not fit the model's context \(HTTP 400: .*(context|n_ctx)/);
      });
    }

    if (flavor.modelNotFound) {
      const notFound = flavor.modelNotFound;
      it('a model the engine does not have fails with model_not_found and its message', async () => {
        const e = await engine(flavor, (_q, res) => answer(res, notFound));
        const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: flavor.name }]);
        await b.refresh();
        const r = await open(b);
        const done = await r.waitForTerminal(create(r).id);
        assert.equal(done.error?.code, 'model_not_found');
        assert.match(done.error!.detail, /HTTP 404: .*(not found|does not exist)/);
      });
    }
  });
}

describe('engine quirks', () => {
  it('Ollama with no model pulled answers "data": null: the engine is up with no models, not down', async () => {
    const e = await engine(FLAVORS.ollama, flavorStream(FLAVORS.ollama, ['x']), []);
    const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: 'ollama' }]);
    await b.refresh();
    assert.equal(b.engines[0].endpoints[0].state, 'up', b.engines[0].endpoints[0].lastError);
    assert.deepEqual(b.listModels(), []);
  });

  it('Ollama failing mid-stream (an empty chunk, then the stream ends without a finish): the task is interrupted', async () => {
    // streamResponse writes {"error": …} through the OpenAI writer, which turns it into an empty chunk; no [DONE].
    const e = await engine(FLAVORS.ollama, (_q, res) => {
      sseHead(res);
      const chunk = (content: string) =>
        `data: ${JSON.stringify({ ...FLAVORS.ollama.chunkFields, choices: [{ index: 0, delta: { role: 'assistant', content }, finish_reason: null }] })}\n\n`;
      res.write(chunk('partial'));
      res.end(chunk(''));
    });
    const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: 'ollama' }]);
    await b.refresh();
    const r = await open(b);
    const done = await r.waitForTerminal(create(r, { onRestart: 'fail' }).id);
    assert.equal(done.error?.code, 'backend_interrupted');
    assert.equal(text(done), 'partial');
  });

  it('vLLM before 0.10: an {"object": "error"} body is read (context overflow), and mid-stream it fails the task instead of passing as a chunk', async () => {
    const message =
      "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2984 in the messages, 16 in the completion).";
    const old = await engine(FLAVORS.vllm, (_q, res) =>
      answer(res, { status: 400, type: 'application/json', body: { object: 'error', message, type: 'BadRequestError', param: null, code: 400 } }),
    );
    const mid = await engine(FLAVORS.vllm, (_q, res) => {
      sseHead(res);
      res.write(
        `data: ${JSON.stringify({ ...FLAVORS.vllm.chunkFields, choices: [{ index: 0, delta: { content: 'a' }, finish_reason: null }] })}\n\n`,
      );
      res.write(
        `data: ${JSON.stringify({ object: 'error', message: 'CUDA out of memory', type: 'InternalServerError', param: null, code: 500 })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    });
    for (const [e, code, detail] of [
      [old, 'context_length_exceeded', /maximum context length is 2048/],
      [mid, 'backend_error', /reported an error mid-stream: CUDA out of memory/],
    ] as const) {
      const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: 'vllm' }]);
      await b.refresh();
      const r = await open(b);
      const done = await r.waitForTerminal(create(r).id);
      assert.equal(done.status, 'failed');
      assert.equal(done.error?.code, code);
      assert.match(done.error!.detail, detail);
    }
  });

  it('vLLM request validation (FastAPI 422 with a "detail" list) fails with invalid_request naming the field', async () => {
    const e = await engine(FLAVORS.vllm, (_q, res) =>
      answer(res, {
        status: 422,
        type: 'application/json',
        body: { detail: [{ type: 'missing', loc: ['body', 'messages'], msg: 'Field required', input: {} }] },
      }),
    );
    const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: 'vllm' }]);
    await b.refresh();
    const r = await open(b);
    const done = await r.waitForTerminal(create(r).id);
    assert.equal(done.error?.code, 'invalid_request');
    assert.match(done.error!.detail, /HTTP 422: body\.messages: Field required/);
  });

  it('vLLM finish_reason "abort" is an interruption (the on_restart policy decides), "error" a failure', async () => {
    const ending =
      (fr: string): ChatHandler =>
      (_q, res) => {
        sseHead(res);
        res.write(
          `data: ${JSON.stringify({ ...FLAVORS.vllm.chunkFields, choices: [{ index: 0, delta: { content: 'par' }, finish_reason: null }] })}\n\n`,
        );
        res.write(`data: ${JSON.stringify({ ...FLAVORS.vllm.chunkFields, choices: [{ index: 0, delta: { content: '' }, finish_reason: fr }] })}\n\n`);
        res.end('data: [DONE]\n\n');
      };
    const aborting = await engine(FLAVORS.vllm, ending('abort'));
    const healthy = await engine(FLAVORS.vllm, flavorStream(FLAVORS.vllm, ['whole']));
    const b = new RemoteBackend([{ name: 'e', urls: [aborting.base, healthy.base], kind: 'vllm', concurrency: [1] }]);
    await b.refresh();
    b.engines[0].endpoints[1].served = 1; // the aborting endpoint is picked first
    const r = await open(b);
    const retried = await r.waitForTerminal(create(r, { onRestart: 'retry' }).id);
    assert.equal(retried.status, 'succeeded', JSON.stringify(retried.error));
    assert.equal(retried.attempt, 2);
    assert.equal(text(retried), 'whole');

    const erroring = await engine(FLAVORS.vllm, ending('error'));
    const b2 = new RemoteBackend([{ name: 'e', urls: [erroring.base], kind: 'vllm' }]);
    await b2.refresh();
    const r2 = await open(b2);
    const failed = await r2.waitForTerminal(create(r2, { onRestart: 'retry' }).id);
    assert.equal(failed.error?.code, 'backend_error');
    assert.match(failed.error!.detail, /finish_reason "error"/);
  });

  it('vLLM resume: the continuation request has the final assistant message, continue_final_message and add_generation_prompt: false', async () => {
    const dying = await engine(FLAVORS.vllm, (_q, res) => {
      sseHead(res);
      res.write(
        `data: ${JSON.stringify({ ...FLAVORS.vllm.chunkFields, choices: [{ index: 0, delta: { content: 'Once upon' }, finish_reason: null }] })}\n\n`,
      );
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const healthy = await engine(FLAVORS.vllm, flavorStream(FLAVORS.vllm, [' a time.']));
    const b = new RemoteBackend([{ name: 'e', urls: [dying.base, healthy.base], kind: 'vllm', concurrency: [1] }]);
    await b.refresh();
    b.engines[0].endpoints[1].served = 1;
    const r = await open(b);
    const done = await r.waitForTerminal(
      create(r, { onRestart: 'resume', input: { model: 'e/m1', input: 'Tell a story', max_output_tokens: 10 } }).id,
    );
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.attempt, 1);
    assert.equal(text(done), 'Once upon a time.');
    const sent = healthy.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
    assert.deepEqual((sent.messages as unknown[]).at(-1), { role: 'assistant', content: 'Once upon' });
    assert.equal(sent.continue_final_message, true);
    assert.equal(sent.add_generation_prompt, false);
  });

  it('LM Studio at a URL that is not its /v1 base: the 200 {"error": "Unexpected endpoint or method"} answers say so', async () => {
    const e = await engine(FLAVORS.lmstudio);
    const b = new RemoteBackend([{ name: 'e', urls: [e.url], kind: 'lmstudio' }]);
    await b.refresh();
    const ep = b.engines[0].endpoints[0];
    assert.equal(ep.state, 'down');
    assert.match(ep.lastError!, /not a model list \(Unexpected endpoint or method\. \(GET \/models\)\); is the URL the OpenAI-style base/);
    await assert.rejects(
      streamChat({
        baseUrl: e.url,
        label: 'engine "e"',
        body: { model: 'm1', messages: [], stream: true },
        signal: new AbortController().signal,
        timeouts: DEFAULT_TIMEOUTS,
        maxEventBytes: 1 << 20,
        onDelta: () => {},
      }),
      (err: Error) =>
        err instanceof BackendError &&
        err.code === 'backend_error' &&
        /answered with an error: Unexpected endpoint or method\. \(POST \/chat\/completions\); the URL is probably not its OpenAI-style base/.test(
          err.message,
        ),
    );
  });

  it('LM Studio answering a context overflow with 200 and a JSON error (lmstudio-bug-tracker#2322): context_length_exceeded', async () => {
    const e = await engine(FLAVORS.lmstudio, (_q, res) =>
      answer(res, {
        status: 200,
        type: 'application/json; charset=utf-8',
        body: {
          error:
            'Trying to keep the first 6547 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough.',
        },
      }),
    );
    const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind: 'lmstudio' }]);
    await b.refresh();
    const r = await open(b);
    const done = await r.waitForTerminal(create(r).id);
    assert.equal(done.error?.code, 'context_length_exceeded');
    assert.match(done.error!.detail, /context length of only 4096 tokens/);
  });

  it("an unknown OpenAI-compatible server (kind openai) still has /props asked; LM Studio's 200 error for it leaves the default concurrency", async () => {
    const e = await engine(FLAVORS.lmstudio);
    const b = new RemoteBackend([{ name: 'e', urls: [e.base] }]);
    await b.refresh();
    assert.equal(b.engines[0].endpoints[0].state, 'up');
    assert.ok(e.requests.some((q) => q.path === '/props'));
    assert.equal(b.engines[0].endpoints[0].concurrency, 4);
    assert.equal(b.supportsResume('e/m1'), false, 'an unknown kind offers resume only when configured');
  });
});

describe('engine kinds as data', () => {
  it('resume: on by default for llama.cpp and vLLM (the configuration may turn it off), opt-in for openai, never for Ollama and LM Studio', () => {
    assert.deepEqual(
      (['llama.cpp', 'vllm', 'openai', 'ollama', 'lmstudio'] as const).map((k) => [
        k,
        resumeOffered(k, undefined),
        resumeOffered(k, true),
        resumeOffered(k, false),
      ]),
      [
        ['llama.cpp', true, true, false],
        ['vllm', true, true, false],
        ['openai', false, true, false],
        ['ollama', false, false, false],
        ['lmstudio', false, false, false],
      ],
    );
    assert.equal(resumeOffered(undefined, true), true);
    assert.throws(
      () => new RemoteBackend([{ name: 'o', urls: ['http://127.0.0.1:1/v1'], kind: 'ollama', resume: true }]),
      /cannot be offered: Ollama has no continue_final_message/,
    );
    assert.throws(() => new RemoteBackend([{ name: 'o', urls: ['http://127.0.0.1:1/v1'], kind: 'tgi' as never }]), /must be one of/);
  });

  it('error bodies of every shape are read; overflow messages of every engine are recognised, others are not', () => {
    assert.deepEqual(engineErrorOf({ error: { message: 'm', type: 't', code: 'c' } }), { message: 'm', type: 't', code: 'c' });
    assert.deepEqual(engineErrorOf({ error: 'plain' }), { message: 'plain' });
    assert.deepEqual(engineErrorOf({ object: 'error', message: 'old vllm', type: 'BadRequestError', code: 400 }), {
      message: 'old vllm',
      type: 'BadRequestError',
      code: '400',
    });
    assert.deepEqual(engineErrorOf({ detail: 'Not Found' }), { message: 'Not Found' });
    assert.equal(engineErrorOf({ choices: [], error: null }), undefined);
    assert.equal(engineErrorOf({ object: 'chat.completion.chunk' }), undefined);
    for (const f of Object.values(FLAVORS)) {
      if (f.contextOverflow) assert.ok(isContextOverflow(engineErrorOf(f.contextOverflow.body)!), f.name);
      if (f.modelNotFound) assert.ok(!isContextOverflow(engineErrorOf(f.modelNotFound.body)!), f.name);
    }
    assert.ok(isContextOverflow({ message: 'x', code: 'context_length_exceeded' }));
    assert.ok(!isContextOverflow({ message: "'messages' field is required" }));
    assert.equal(kindFromModelList({ data: [{ id: 'a', owned_by: 'someone' }] }), undefined);
  });
});

// What each kind's documentation says it takes (the sources are cited in quirks.ts), written out again here so that a
// changed table must be changed on purpose: the chat/completions name of each sampling field (null: none), the
// response_format types, and whether logprobs are reported (with the least top_logprobs that reports them).
const TAKES: Record<EngineKind, { sampling: Record<SamplingField, string | null>; formats: string[]; logprobs: false | { minTop: number } }> = {
  'llama.cpp': {
    sampling: {
      seed: 'seed',
      stop: 'stop',
      topK: 'top_k',
      minP: 'min_p',
      repeatPenalty: 'repeat_penalty',
      frequencyPenalty: 'frequency_penalty',
      presencePenalty: 'presence_penalty',
    },
    formats: ['json_object', 'json_schema'],
    logprobs: { minTop: 1 },
  },
  vllm: {
    sampling: {
      seed: 'seed',
      stop: 'stop',
      topK: 'top_k',
      minP: 'min_p',
      repeatPenalty: 'repetition_penalty',
      frequencyPenalty: 'frequency_penalty',
      presencePenalty: 'presence_penalty',
    },
    formats: ['json_object', 'json_schema'],
    logprobs: { minTop: 0 },
  },
  ollama: {
    sampling: {
      seed: 'seed',
      stop: 'stop',
      topK: null,
      minP: null,
      repeatPenalty: null,
      frequencyPenalty: 'frequency_penalty',
      presencePenalty: 'presence_penalty',
    },
    formats: ['json_object', 'json_schema'],
    logprobs: { minTop: 0 },
  },
  lmstudio: {
    sampling: {
      seed: 'seed',
      stop: 'stop',
      topK: 'top_k',
      minP: null,
      repeatPenalty: 'repeat_penalty',
      frequencyPenalty: 'frequency_penalty',
      presencePenalty: 'presence_penalty',
    },
    formats: ['json_schema'],
    logprobs: false,
  },
  openai: {
    sampling: {
      seed: 'seed',
      stop: 'stop',
      topK: null,
      minP: null,
      repeatPenalty: null,
      frequencyPenalty: 'frequency_penalty',
      presencePenalty: 'presence_penalty',
    },
    formats: ['json_object', 'json_schema'],
    logprobs: { minTop: 0 },
  },
};

const VALUES: Record<SamplingField, unknown> = {
  seed: 11,
  stop: ['END', '\n\n'],
  topK: 40,
  minP: 0.05,
  repeatPenalty: 1.1,
  frequencyPenalty: 0.5,
  presencePenalty: -0.5,
};
const PARAMS: Record<SamplingField, string> = {
  seed: 'task_runtime.seed',
  stop: 'task_runtime.stop',
  topK: 'task_runtime.top_k',
  minP: 'task_runtime.min_p',
  repeatPenalty: 'task_runtime.repeat_penalty',
  frequencyPenalty: 'task_runtime.frequency_penalty',
  presencePenalty: 'task_runtime.presence_penalty',
};
const SCHEMA_FORMAT = {
  type: 'json_schema' as const,
  name: 'answer',
  schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] },
  strict: true,
  description: 'An answer.',
};

/** An engine of `kind` (the OpenAI-shaped vLLM stream for `openai`, with the default model list) and its backend. */
async function kindEngine(kind: EngineKind, pieces = ['Hel', 'lo']): Promise<{ e: FakeEngine; b: RemoteBackend }> {
  const flavor = kind === 'openai' ? undefined : FLAVORS[kind];
  const e = await startFakeEngine(flavorStream(flavor ?? FLAVORS.vllm, pieces), ['m1'], flavor);
  engines.push(e);
  const b = new RemoteBackend([{ name: 'e', urls: [e.base], kind }]);
  await b.refresh();
  return { e, b };
}

/** Runs `over` on the backend directly; what onText received and the chat body the engine got. */
async function generate(e: FakeEngine, b: RemoteBackend, over: Partial<GenerateRequest>) {
  const pieces: Array<{ text: string; tokens: number; logprobs?: TokenLogprob[] }> = [];
  const before = e.requests.length;
  const result = await b.generate(
    { model: 'e/m1', messages: [{ role: 'user', content: 'Hi' }], maxOutputTokens: 16, ...over },
    { signal: new AbortController().signal, onText: (text, tokens, logprobs) => pieces.push({ text, tokens, logprobs }) },
  );
  const chat = e.requests.slice(before).filter((q) => q.path === '/v1/chat/completions');
  assert.equal(chat.length, 1);
  return { result, pieces, body: chat[0].body as Record<string, unknown> };
}

const BASELINE = ['messages', 'stream', 'stream_options', 'max_tokens', 'model'];
const extraFields = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([k]) => !BASELINE.includes(k)));

function refusedFor(kind: EngineKind, param: string) {
  return (err: unknown) =>
    err instanceof RequestRefusedError &&
    err.code === 'unsupported_capability' &&
    err.param === param &&
    err.message.includes(`"${kind}"`) &&
    err.message.includes(param);
}

for (const kind of Object.keys(TAKES) as EngineKind[]) {
  const takes = TAKES[kind];
  describe(`request fields for an engine of kind "${kind}"`, () => {
    it('each sampling field goes under the name the kind takes, or is refused before anything is sent', async () => {
      const { e, b } = await kindEngine(kind);
      for (const f of Object.keys(VALUES) as SamplingField[]) {
        const req = { [f]: VALUES[f], temperature: 1, topP: 0.9 } as Partial<GenerateRequest>;
        const name = takes.sampling[f];
        if (name) {
          b.checkRequest({ model: 'e/m1', messages: [], ...req });
          const { body } = await generate(e, b, req);
          assert.deepEqual(extraFields(body), { temperature: 1, top_p: 0.9, [name]: VALUES[f] }, f);
        } else {
          assert.throws(() => b.checkRequest({ model: 'e/m1', messages: [], ...req }), refusedFor(kind, PARAMS[f]), f);
          const sent = e.requests.length;
          await assert.rejects(
            b.generate({ model: 'e/m1', messages: [], ...req }, { signal: new AbortController().signal, onText: () => {} }),
            (err) => err instanceof BackendError && err.kind === 'failed' && err.code === 'unsupported_capability',
          );
          assert.equal(e.requests.length, sent, `${f}: nothing sent`);
        }
      }
    });

    it(`output formats: ${takes.formats.join(' and ')} as response_format${takes.formats.length < 2 ? ', the other refused' : ''}`, async () => {
      const { e, b } = await kindEngine(kind);
      const wire: Record<string, unknown> = {
        // llama.cpp server's bare json_object is no grammar (quirks.ts): it gets the schema of any object.
        json_object: kind === 'llama.cpp' ? { type: 'json_object', schema: { type: 'object' } } : { type: 'json_object' },
        json_schema: { type: 'json_schema', json_schema: { name: 'answer', schema: SCHEMA_FORMAT.schema, strict: true, description: 'An answer.' } },
      };
      for (const format of [{ type: 'json_object' as const }, SCHEMA_FORMAT]) {
        if (takes.formats.includes(format.type)) {
          b.checkRequest({ model: 'e/m1', messages: [], format });
          const { body } = await generate(e, b, { format });
          assert.deepEqual(body.response_format, wire[format.type]);
        } else {
          assert.throws(() => b.checkRequest({ model: 'e/m1', messages: [], format }), refusedFor(kind, 'text.format'));
        }
      }
      const { body } = await generate(e, b, { format: { type: 'json_schema', name: 'n', schema: {} } });
      assert.deepEqual(
        body.response_format === undefined ? undefined : (body.response_format as { json_schema: unknown }).json_schema,
        takes.formats.includes('json_schema') ? { name: 'n', schema: {} } : undefined,
        'strict and description only when given',
      );
    });

    it('on_restart "resume" with a format is refused (the engine would continue outside its grammar); "retry" is not', async () => {
      const { b } = await kindEngine(kind);
      const format = { type: 'json_schema' as const, name: 'n', schema: { type: 'object' } };
      if (!takes.formats.includes('json_schema'))
        return assert.throws(() => b.checkRequest({ model: 'e/m1', messages: [], format }, { onRestart: 'retry' }), refusedFor(kind, 'text.format'));
      b.checkRequest({ model: 'e/m1', messages: [], format }, { onRestart: 'retry' });
      b.checkRequest({ model: 'e/m1', messages: [] }, { onRestart: 'resume' });
      assert.throws(
        () => b.checkRequest({ model: 'e/m1', messages: [], format }, { onRestart: 'resume' }),
        (e: Error) => e instanceof RequestRefusedError && e.code === 'unsupported_capability' && e.param === 'on_restart',
      );
    });

    const lp = takes.logprobs;
    if (lp) {
      it(`log-probabilities: logprobs + top_logprobs (at least ${lp.minTop}), each piece with its token's entry and N alternatives`, async () => {
        const { e, b } = await kindEngine(kind, ['Hél', 'lo']);
        for (const top of [0, 2]) {
          b.checkRequest({ model: 'e/m1', messages: [], topLogprobs: top });
          const { body, pieces } = await generate(e, b, { topLogprobs: top });
          assert.equal(body.logprobs, true);
          assert.equal(body.top_logprobs, Math.max(top, lp.minTop));
          assert.deepEqual(
            pieces.map((p) => p.text),
            ['Hél', 'lo'],
          );
          for (const p of pieces) {
            assert.equal(p.tokens, 1);
            assert.deepEqual(p.logprobs, [
              {
                token: p.text,
                logprob: -0.25,
                bytes: [...Buffer.from(p.text, 'utf8')],
                top_logprobs: Array.from({ length: top }, (_, i) => {
                  const token = i ? `${p.text}~${i}` : p.text;
                  return { token, logprob: -0.25 - i, bytes: [...Buffer.from(token, 'utf8')] };
                }),
              },
            ]);
          }
        }
        const { body, pieces } = await generate(e, b, {});
        assert.ok(!('logprobs' in body) && !('top_logprobs' in body), 'not asked without topLogprobs');
        assert.ok(pieces.every((p) => p.logprobs === undefined));
      });
    } else {
      it('log-probabilities are refused: the kind reports none', async () => {
        const { b } = await kindEngine(kind);
        assert.throws(() => b.checkRequest({ model: 'e/m1', messages: [], topLogprobs: 0 }), refusedFor(kind, 'top_logprobs'));
      });
    }
  });
}

describe('request fields through the runtime', () => {
  it('a refused field is a create error naming it (nothing stored, nothing sent); an accepted one reaches the engine under its name', async () => {
    const { e, b } = await kindEngine('lmstudio');
    const r = await open(b);
    const input = (extra: Record<string, unknown>) => ({ model: 'e/m1', input: 'Hi', max_output_tokens: 16, ...extra });
    assert.throws(
      () => create(r, { input: input({ task_runtime: { min_p: 0.1 } }) }),
      (err) => isRuntimeError(err, 'unsupported_capability') && err.param === 'task_runtime.min_p' && /"lmstudio"/.test(err.message),
    );
    assert.throws(
      () => create(r, { input: input({ text: { format: { type: 'json_object' } } }) }),
      (err) => isRuntimeError(err, 'unsupported_capability') && err.param === 'text.format',
    );
    assert.throws(
      () => create(r, { input: input({ include: ['message.output_text.logprobs'] }) }),
      (err) => isRuntimeError(err, 'unsupported_capability') && err.param === 'top_logprobs',
    );
    assert.equal(r.listTasks({ principal: 'p' }).tasks.length, 0);
    assert.ok(!e.requests.some((q) => q.path === '/v1/chat/completions'));
    const done = await r.waitForTerminal(
      create(r, { input: input({ task_runtime: { repeat_penalty: 1.2, top_k: 7, stop: 'END' }, text: { format: SCHEMA_FORMAT } }) }).id,
    );
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const body = e.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
    assert.equal(body.repeat_penalty, 1.2);
    assert.equal(body.top_k, 7);
    assert.deepEqual(body.stop, ['END']);
    assert.deepEqual(body.response_format, {
      type: 'json_schema',
      json_schema: { name: 'answer', schema: SCHEMA_FORMAT.schema, strict: true, description: 'An answer.' },
    });
  });
});
