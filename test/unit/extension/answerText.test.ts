// Reasoning never reaches answer text in the editor: a model that thinks before it answers (a scripted backend that
// emits a thought segment, then the answer, over a real runtime and store) is read through the editor's three
// readers of a result — the VS Code language-model provider's text parts, Open Result's document and Copy Text's
// clipboard — and each carries the answer alone. The doors' side is test/protocol/doors/answerText.test.ts; both
// read through runtime/responses.ts answerText and runtime/responseEvents.ts answerTextDelta.
import { vscodeStub } from './vscodeStub';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TaskCommands } from '../../../src/extension/commands/taskCommands';
import { TaskRuntimeChatProvider } from '../../../src/extension/lm/chatProvider';
import { LocalTaskSource } from '../../../src/extension/model/localTaskSource';
import { resultDocumentText } from '../../../src/extension/ui/resultDocument';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { ScriptedBackend, type Script } from '../../fixtures/scriptedBackend';
import { taskReaches } from '../../support/wait';
import { tempDir } from '../runtime/helpers';

const THOUGHT = 'THOUGHT-91c2: they asked for a greeting';
const ANSWER = 'Hello there.';

/** Reasoning first (its own channel), then the answer in two pieces. */
const thinksThenAnswers: Script = async (_req, o) => {
  o.onText(THOUGHT, 3, undefined, { kind: 'reasoning' });
  o.onText('Hello ', 1);
  o.onText('there.', 1);
  return { finishReason: 'stop', inputTokens: 4, outputTokens: 5 };
};

describe('answer text in the editor', () => {
  let runtime: TaskRuntime;
  let source: LocalTaskSource;

  before(async () => {
    runtime = await TaskRuntime.open({ dataDir: tempDir(), backend: new ScriptedBackend(thinksThenAnswers), deltaFlushMs: 0 });
    source = new LocalTaskSource(runtime, 'editor');
  });

  after(async () => {
    source?.dispose();
    await runtime?.close();
  });

  it('the language-model provider reports the answer as text parts, never the thought', async () => {
    const provider = new TaskRuntimeChatProvider({ source, onDidChangeState: () => ({ dispose() {} }), log: () => {} });
    const parts: Array<{ value?: string }> = [];
    const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose() {} }) };
    await provider.provideLanguageModelChatResponse(
      { id: 'm' } as never,
      [{ role: 1, content: [{ value: 'hi' }], name: undefined }] as never,
      {} as never,
      { report: (p: { value?: string }) => void parts.push(p) } as never,
      token as never,
    );
    assert.equal(parts.map((p) => p.value ?? '').join(''), ANSWER);
    assert.ok(!JSON.stringify(parts).includes(THOUGHT), JSON.stringify(parts));
  });

  it('Open Result and Copy Text give the answer; the stored response still has the reasoning item', async () => {
    const created = await source.create({ prompt: 'hi' });
    await taskReaches(runtime, created.id, (t) => t.status === 'succeeded', 'the task succeeds');
    const task = await source.get(created.id);
    assert.ok(task);
    const output = (task.response?.['output'] ?? []) as Array<{ type: string }>;
    assert.ok(
      output.some((i) => i.type === 'reasoning' && JSON.stringify(i).includes(THOUGHT)),
      JSON.stringify(output),
    );
    assert.equal(resultDocumentText(task), ANSWER);

    const commands = new TaskCommands({ source, log: { info() {} } } as never, () => ({ dispose() {} }));
    const copied = await commands.copyResult(created.id);
    assert.equal(copied, ANSWER);
    assert.equal(vscodeStub.clipboardWrites.at(-1), ANSWER);
  });
});
