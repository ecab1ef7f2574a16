// The VS Code provider's `capabilities.toolCalling` (what makes agent mode offer a model) is what the runtime knows
// of the model's generation (#39 item 4): over a real runtime with the llama backend serving the tiny chat model and
// the tiny reranker, a model not known yet (the editor reads no model file before a load) is offered with tool
// calling; once loaded, the chat model keeps it and the reranker — which cannot make calls — loses it.
import { vscodeStub } from '../vscodeStub';
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { chatModelInfos } from '../../../../src/extension/lm/chatMapping';
import { TaskRuntimeChatProvider } from '../../../../src/extension/lm/chatProvider';
import { LocalTaskSource } from '../../../../src/extension/model/localTaskSource';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { testModelPath, testRerankerPath } from '../../../fixtures/testModel';
import { tempDir } from '../../runtime/helpers';

void vscodeStub;

describe('chat provider capabilities', () => {
  const backend = new LlamaBackend({
    models: [
      { id: 'chat', source: testModelPath() },
      { id: 'ranker', source: testRerankerPath() },
    ],
  });
  let runtime: TaskRuntime | undefined;
  after(async () => {
    await runtime?.close();
    await backend.dispose();
  });

  it('toolCalling follows the model: unknown before a load, then what the file and template say', async () => {
    runtime = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0 });
    const source = new LocalTaskSource(runtime, 'editor');
    const provider = new TaskRuntimeChatProvider({ source, onDidChangeState: () => ({ dispose() {} }), log: () => {} });
    const toolCalling = async () =>
      Object.fromEntries((await provider.provideLanguageModelChatInformation()).map((m) => [m.id, m.capabilities.toolCalling]));
    assert.deepEqual(await toolCalling(), { chat: true, ranker: true });
    await backend.load('chat');
    await backend.load('ranker');
    assert.deepEqual(await toolCalling(), { chat: true, ranker: false });
    const listed = await source.listModels();
    assert.deepEqual(
      listed.map((m) => [m.id, m.capabilities]),
      [
        ['chat', { tools: true, reasoning: false }],
        ['ranker', { tools: false, reasoning: false }],
      ],
    );
  });

  it('a model the source knows nothing about is offered; one it knows cannot call is not', () => {
    const base = { source: 's', state: 'loaded', demo: false };
    const infos = chatModelInfos([
      { ...base, id: 'unknown' },
      { ...base, id: 'caller', capabilities: { tools: true, reasoning: true } },
      { ...base, id: 'embedder', capabilities: { tools: false, reasoning: false } },
    ]);
    assert.deepEqual(
      infos.map((m) => [m.id, m.capabilities.toolCalling]),
      [
        ['unknown', true],
        ['caller', true],
        ['embedder', false],
      ],
    );
  });
});
