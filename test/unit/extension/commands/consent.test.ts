// Commands another extension can run (issue #23): the ones that hand out the token or change the model ask the user
// first, through the confirm function the commands get in their constructor (the real one is a modal), check an
// argument exactly as the input box checks typed text, and give the caller nothing secret back. On the code before
// the fix, Copy MCP Server Config returned the config with the token and asked nothing, and Select / Download Model
// with a string switched the global model at once, whatever the string was.
import { vscodeStub } from '../vscodeStub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { EndpointCommands } from '../../../../src/extension/commands/endpointCommands';
import { ModelCommands, modelUriProblem } from '../../../../src/extension/commands/modelCommands';
import type { RegisterCommand } from '../../../../src/extension/commands/register';
import { Commands } from '../../../../src/extension/constants';

const TOKEN = 'tok-SECRET-1234567890';

/** Captures the handlers a command family registers, to run them as the editor would. */
function capture(): { register: RegisterCommand; run: (id: string, ...args: unknown[]) => Promise<unknown> } {
  const handlers = new Map<string, (...args: unknown[]) => unknown>();
  return {
    register: (id, fn) => {
      handlers.set(id, fn);
      return { dispose() {} };
    },
    run: async (id, ...args) => {
      const fn = handlers.get(id);
      if (!fn) throw new Error(`${id} not registered`);
      return fn(...args);
    },
  };
}

/** A confirm function that answers `answer` and records what it was asked. */
function prompt(answer: boolean) {
  const asked: string[] = [];
  return { asked, confirm: async (message: string) => (asked.push(message), answer) };
}

const log = { show() {}, info() {}, warn() {}, error() {} } as never;

function endpointCommands(answer: boolean) {
  const p = prompt(answer);
  const c = capture();
  new EndpointCommands(
    {
      service: {
        endpoint: { url: 'http://127.0.0.1:1', port: 1, lmspUrl: 'http://127.0.0.1:1/lmsp/v1', mcpUrl: 'http://127.0.0.1:1/mcp' },
        restart: async () => {},
        tokenChanged: async () => {},
      },
      tokens: { get: async () => TOKEN, regenerate: async () => TOKEN },
      log,
      confirm: p.confirm,
    },
    c.register,
  );
  return { ...p, run: c.run };
}

function modelCommands(answer: boolean) {
  const p = prompt(answer);
  const c = capture();
  const restarts: number[] = [];
  new ModelCommands(
    {
      service: { role: 'owner', restart: async () => void restarts.push(1), runtime: undefined },
      source: { listModels: async () => [] },
      confirm: p.confirm,
    },
    c.register,
  );
  return { ...p, run: c.run, restarts };
}

beforeEach(() => {
  vscodeStub.clipboardWrites.length = 0;
  vscodeStub.configUpdates.length = 0;
});

describe('Copy MCP Server Config asks first and returns nothing secret', () => {
  it('declined: nothing on the clipboard, nothing returned but false', async () => {
    const e = endpointCommands(false);
    const result = await e.run(Commands.copyMcpConfig);
    assert.equal(result, false);
    assert.equal(e.asked.length, 1);
    assert.match(e.asked[0]!, /access token/);
    assert.deepEqual(vscodeStub.clipboardWrites, []);
  });

  it('accepted: the config with the token goes to the clipboard only; the caller gets true', async () => {
    const e = endpointCommands(true);
    const result = await e.run(Commands.copyMcpConfig, 'any', { argument: true });
    assert.equal(result, true);
    assert.ok(!JSON.stringify(result).includes(TOKEN));
    assert.equal(e.asked.length, 1);
    assert.equal(vscodeStub.clipboardWrites.length, 1);
    assert.match(vscodeStub.clipboardWrites[0]!, new RegExp(`Bearer ${TOKEN}`));
  });
});

describe('Select Model / Download Model with an argument', () => {
  const bad = ['/home/alice/My Models/x.gguf', 'file:///etc/passwd', 'http://evil.example/x.gguf', 'hf:', '', ' ', 'ftp://x/y.gguf'];

  it('the argument is checked exactly as the input box checks typed text', () => {
    for (const v of bad) assert.ok(modelUriProblem(v), v);
    for (const v of ['hf:owner/repo:Q4_K_M', 'https://example.com/m.gguf', '  hf:a/b  ']) assert.equal(modelUriProblem(v), undefined, v);
  });

  for (const id of [Commands.selectModel, Commands.downloadModel]) {
    it(`${id}: a value the input box refuses is refused with its message, before any question`, async () => {
      const m = modelCommands(true);
      for (const v of bad) {
        await assert.rejects(() => m.run(id, v) as Promise<unknown>, /Enter hf:owner\/repo\[:quant\] or an https URL/, v);
      }
      await assert.rejects(() => m.run(id, 42) as Promise<unknown>, /a model URI/);
      assert.deepEqual(m.asked, []);
      assert.deepEqual(vscodeStub.configUpdates, []);
      assert.deepEqual(m.restarts, []);
    });

    it(`${id}: a valid URI switches nothing when the user declines`, async () => {
      const m = modelCommands(false);
      const result = await m.run(id, 'hf:owner/repo:Q4_K_M');
      assert.ok(result === undefined || result === false);
      assert.equal(m.asked.length, 1);
      assert.match(m.asked[0]!, /hf:owner\/repo:Q4_K_M/);
      assert.deepEqual(vscodeStub.configUpdates, []);
      assert.deepEqual(m.restarts, []);
    });
  }

  it('Select Model: a valid URI the user confirms becomes the global model', async () => {
    const m = modelCommands(true);
    assert.equal(await m.run(Commands.selectModel, ' hf:owner/repo:Q4_K_M '), 'hf:owner/repo:Q4_K_M');
    assert.equal(m.asked.length, 1);
    assert.deepEqual(
      vscodeStub.configUpdates.map((u) => [u.key, u.value, u.target]),
      [['model', 'hf:owner/repo:Q4_K_M', 1]],
    );
  });
});
