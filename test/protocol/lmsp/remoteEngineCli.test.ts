// `task-runtime serve --engine NAME=URL --engine-key-file NAME=FILE` against a scripted engine of the test's own:
// models appear as NAME/model-id in LMSP GET /models and MCP list_models, tasks from both doors run on the engine,
// "resume" is refused for remote models, and the key is in no log line, task record, event or store file.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { parseArgs, UsageError } from '../../../src/cli/args';
import { goodStream, startFakeEngine, type FakeEngine } from '../../fixtures/fakeEngine';
import { allFileText, lmspWaitTerminal, startServe, type Serve } from '../../fixtures/serveProcess';
import { connect } from '../mcp/harness';

const KEY = 'sk-cli-9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d';

describe('serve --engine', () => {
  let engine: FakeEngine;
  let serve: Serve;
  before(async () => {
    engine = await startFakeEngine(goodStream(['remote ', 'text']), ['m1', 'm2']);
    const keyFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tr-key-')), 'key');
    fs.writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
    serve = await startServe(['--engine', `gpu=${engine.base}`, '--engine-key-file', `gpu=${keyFile}`]);
  });
  after(async () => {
    await serve?.stop();
    await engine?.close();
  });

  it('lists the engine models as NAME/model-id (no demo model when only engines are given)', async () => {
    const r = await serve.lmspCall('GET', '/models');
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.json.data.map((m: { id: string; owned_by: string; state: string }) => [m.id, m.owned_by, m.state]),
      [
        ['gpu/m1', 'gpu', 'loaded'],
        ['gpu/m2', 'gpu', 'loaded'],
      ],
    );
    assert.equal((await serve.lmspCall('GET', '/models/gpu/m2')).json.id, 'gpu/m2');
    assert.match(serve.stderr(), /engine gpu: http:\/\/127\.0\.0\.1:\d+\/v1 up, 2 model\(s\), concurrency 4/);
    // Only remote models: "resume" is not advertised.
    const caps = JSON.stringify((await serve.lmspCall('GET', '/capabilities')).json);
    assert.match(caps, /"on_restart":\["fail","retry"\]/);
  });

  it('LMSP tasks run on the engine; on_restart "resume" is refused for a remote model', async () => {
    const created = await serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'gpu/m2', input: 'hi' }, on_restart: 'retry' });
    assert.equal(created.status, 202);
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.response.output[0].content[0].text, 'remote text');
    const chat = engine.requests.filter((q) => q.path === '/v1/chat/completions').at(-1)!;
    assert.equal((chat.body as { model: string }).model, 'm2');
    assert.equal(chat.headers.authorization, `Bearer ${KEY}`);
    const resume = await serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'gpu/m1', input: 'hi' }, on_restart: 'resume' });
    assert.equal(resume.status, 400);
    assert.equal(resume.json.code, 'unsupported_capability');
  });

  it('MCP list_models shows them and the generate tool runs on the engine', async () => {
    const client = await connect(serve.mcpUrl, serve.token);
    try {
      const list = await client.callTool({ name: 'list_models', arguments: {} });
      const text = (list.content as Array<{ text: string }>)[0].text;
      assert.match(text, /^gpu\/m1 \(loaded, remote engine gpu\)$/m);
      const r = await client.callTool({ name: 'generate', arguments: { model: 'gpu/m1', prompt: 'hi', max_output_tokens: 8 } }, CallToolResultSchema);
      assert.equal(r.isError, false);
      assert.match((r.content as Array<{ text: string }>)[0].text, /remote text/);
    } finally {
      await client.close();
    }
  });

  it('the key is in no log line and no file of the data directory', async () => {
    // A failing request too (its error text echoes the key): still scrubbed.
    engine.chat = (_q, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `bad key ${KEY}` } }));
    };
    const created = await serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'gpu/m1', input: 'hi' } });
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'failed');
    assert.match(done.error.detail, /bad key \[key\]/);
    const events = await fetch(`${serve.lmsp}/tasks/${created.json.id}/events`, { headers: { authorization: `Bearer ${serve.token}` } });
    assert.ok(!(await events.text()).includes(KEY));
    await serve.stop();
    assert.ok(!serve.stderr().includes(KEY), 'not in the log');
    assert.ok(!allFileText(serve.dataDir).includes(KEY), 'not in the store');
  });
});

describe('serve --engine arguments', () => {
  it('are checked: NAME=URL, http(s) only, no credentials in URLs, key files only for named engines', () => {
    const bad: Array<[string[], RegExp]> = [
      [['serve', '--engine', 'gpu'], /--engine must be NAME=VALUE/],
      [['serve', '--engine', 'gpu=ftp://h/v1'], /http or https/],
      [['serve', '--engine', `gpu=http://u:${KEY}@h/v1`], /must not contain credentials/],
      [['serve', '--engine', 'g p=http://h/v1'], /engine name/],
      [['serve', '--engine', 'gpu=http://a/v1', '--engine', 'gpu=http://b/v1'], /given twice/],
      [['serve', '--engine-key-file', 'gpu=/k'], /no --engine gpu=URL/],
      [['serve', '--engine', 'gpu=http://a/v1,http://b/v1', '--engine-concurrency', 'gpu=1,2,3'], /one per URL/],
      [['serve', '--engine', 'gpu=http://a/v1', '--engine-kind', 'gpu=tgi'], /must be one of llama\.cpp, vllm, ollama, lmstudio, openai/],
      [['serve', '--engine-kind', 'gpu=vllm'], /no --engine gpu=URL/],
      [
        ['serve', '--engine', 'ol=http://a/v1', '--engine-kind', 'ol=ollama', '--engine-resume', 'ol'],
        /resume" cannot be offered: Ollama has no continue_final_message/,
      ],
      [['serve', '--engine', 'lm=http://a/v1', '--engine-kind', 'lm=lmstudio', '--engine-resume', 'lm'], /resume" cannot be offered: LM Studio/],
      [['serve', '--engine', 'gpu=http://a/v1', '--engine-resume', 'gpu=maybe'], /on or off/],
    ];
    for (const [argv, re] of bad) {
      assert.throws(
        () => parseArgs(argv),
        (e: Error) => e instanceof UsageError && re.test(e.message) && !e.message.includes(KEY),
        argv.join(' '),
      );
    }
    const ok = parseArgs([
      'serve',
      '--engine',
      'gpu=http://a:8080/v1/,https://b/v1',
      '--engine-concurrency',
      'gpu=2',
      '--engine',
      'ol=http://127.0.0.1:11434/v1',
    ]);
    assert.equal(ok.command, 'serve');
    assert.deepEqual(ok.command === 'serve' && ok.engines, [
      { name: 'gpu', urls: ['http://a:8080/v1', 'https://b/v1'], concurrency: [2] },
      { name: 'ol', urls: ['http://127.0.0.1:11434/v1'] },
    ]);
    const kinds = parseArgs([
      'serve',
      '--engine',
      'v=http://a/v1',
      '--engine-kind',
      'v=vllm',
      '--engine-resume',
      'v=off',
      '--engine',
      'o=http://b/v1',
      '--engine-kind',
      'o=ollama',
      '--engine',
      'x=http://c/v1',
      '--engine-resume',
      'x',
    ]);
    assert.deepEqual(kinds.command === 'serve' && kinds.engines.map((e) => [e.name, e.kind, e.resume]), [
      ['v', 'vllm', false],
      ['o', 'ollama', undefined],
      ['x', undefined, true],
    ]);
  });
});
