// What activate() hands out: other extensions get the public API only; the test members (the task source with every
// prompt and output, tree snapshot, open panels, scripted confirmations) come only when the editor test harness sets
// TASK_RUNTIME_TEST_API=1 (issue #23: getTaskSource() was public).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { exportedApi, type TaskRuntimeExtensionApi, type TaskRuntimeTestMembers } from '../../../src/extension/api';
import { TEST_API_ENV } from '../../../src/extension/constants';

const publicApi: TaskRuntimeExtensionApi = {
  getEndpoint: () => undefined,
  isOwner: () => true,
  getRole: () => 'owner',
  whenReady: async () => undefined,
};
const testMembers = (): TaskRuntimeTestMembers => ({
  getTaskSource: () => {
    throw new Error('not used');
  },
  openEventPanels: () => [],
  getTreeSnapshot: async () => [],
  stubConfirmations: () => ({ asked: [], dispose: () => undefined }),
  startupFigures: () => undefined,
});
const TEST_ONLY = ['getTaskSource', 'openEventPanels', 'getTreeSnapshot', 'stubConfirmations', 'startupFigures'];

describe('extension API', () => {
  it('has no test members without the harness flag', () => {
    for (const env of [{}, { [TEST_API_ENV]: '' }, { [TEST_API_ENV]: '0' }, { [TEST_API_ENV]: 'true' }, { TASK_RUNTIME_TEST: '1' }]) {
      const api = exportedApi(publicApi, testMembers, env);
      assert.deepEqual(
        Object.keys(api).filter((k) => TEST_ONLY.includes(k)),
        [],
        `env ${JSON.stringify(env)}`,
      );
      assert.deepEqual(Object.keys(api).sort(), Object.keys(publicApi).sort());
    }
  });

  it('the public API hands out nothing that reads or makes tasks', () => {
    assert.deepEqual(Object.keys(publicApi).sort(), ['getEndpoint', 'getRole', 'isOwner', 'whenReady']);
  });

  it('adds the test members when the harness sets the flag to 1', () => {
    const api = exportedApi(publicApi, testMembers, { [TEST_API_ENV]: '1' });
    assert.deepEqual(
      Object.keys(api)
        .filter((k) => TEST_ONLY.includes(k))
        .sort(),
      [...TEST_ONLY].sort(),
    );
  });
});
