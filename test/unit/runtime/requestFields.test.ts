// The one table of request fields (requestFields.ts): the runtime refuses what the table refuses whoever calls
// createTask (the editor's local path skips the doors), the doors' zod types accept exactly what the runtime does,
// and the request's sampling reaches the backend the same from every place the table puts it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { samplingZod } from '../../../src/protocols/shared/sampling';
import { isRuntimeError } from '../../../src/runtime/errors';
import {
  checkRequest,
  fieldProblem,
  paramOf,
  SAMPLING_FIELD_NAMES,
  samplingOf,
  withSampling,
  type SamplingField,
} from '../../../src/runtime/requestFields';
import { generateRequestOf } from '../../../src/runtime/responses';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { ScriptedBackend, says } from '../../fixtures/scriptedBackend';
import { tempDir } from './helpers';

/** Values at and just beyond each field's bounds, with whether the table allows them. */
const PROBES: Record<SamplingField, Array<[unknown, boolean]>> = {
  temperature: [
    [0, true],
    [2, true],
    [2.01, false],
    [-0.1, false],
    ['1', false],
  ],
  topP: [
    [0, true],
    [1, true],
    [1.5, false],
  ],
  seed: [
    [42, true],
    [-7, true],
    [1.5, false],
    [Number.MAX_SAFE_INTEGER + 2, false],
  ],
  stop: [
    ['END', true],
    [['a', 'b', 'c', 'd'], true],
    [['a', 'b', 'c', 'd', 'e'], false],
    ['', false],
    [[], false],
  ],
  topK: [
    [0, true],
    [1000, true],
    [1001, false],
    [2.5, false],
  ],
  minP: [
    [0, true],
    [1, true],
    [1.1, false],
  ],
  repeatPenalty: [
    [0.0001, true],
    [2, true],
    [0, false],
  ],
  frequencyPenalty: [
    [-2, true],
    [2, true],
    [2.5, false],
  ],
  presencePenalty: [
    [-2, true],
    [-2.5, false],
  ],
};

describe('request fields', () => {
  it("every field is probed, and the doors' zod type agrees with the runtime's check on every probe", () => {
    assert.deepEqual(Object.keys(PROBES).sort(), [...SAMPLING_FIELD_NAMES].sort());
    for (const field of SAMPLING_FIELD_NAMES) {
      for (const [value, ok] of PROBES[field]) {
        assert.equal(fieldProblem(field, value) === undefined, ok, `${field} ${JSON.stringify(value)}`);
        assert.equal(samplingZod(field).safeParse(value).success, ok, `zod ${field} ${JSON.stringify(value)}`);
      }
    }
  });

  it('checkRequest names the param where the request holds it', () => {
    const refusal = (request: object) => {
      try {
        checkRequest({ input: 'hi', ...request } as never);
        return undefined;
      } catch (e) {
        assert.ok(isRuntimeError(e, 'invalid_request'), String(e));
        return e.param;
      }
    };
    assert.equal(refusal({ temperature: 5 }), 'temperature');
    assert.equal(refusal({ task_runtime: { seed: 1.5 } }), 'task_runtime.seed');
    assert.equal(refusal({ max_output_tokens: 0 }), 'max_output_tokens');
    assert.equal(refusal({ top_logprobs: 21 }), 'top_logprobs');
    assert.equal(refusal({ input: 42 }), 'input');
    assert.equal(refusal({ temperature: 1, task_runtime: { seed: 3, stop: 'x' } }), undefined);
  });

  it('withSampling puts each field where the table says; samplingOf reads it back as the backend gets it', () => {
    const sampling = { temperature: 0.5, topP: 0.9, seed: 7, stop: ['END'], topK: 40 };
    const request = withSampling({ input: 'hi', task_runtime: { cap_max_output_tokens: true } } as Record<string, unknown>, sampling);
    assert.equal(request['temperature'], 0.5);
    assert.deepEqual(request['task_runtime'], { cap_max_output_tokens: true, seed: 7, stop: ['END'], top_k: 40 });
    assert.deepEqual(samplingOf(request as never), sampling);
    assert.deepEqual(samplingOf({ input: 'x', task_runtime: { stop: 'one' } } as never), { stop: ['one'] });
    const g = generateRequestOf(request as never, 'm');
    for (const f of Object.keys(sampling) as SamplingField[]) assert.deepEqual(g[f], sampling[f as keyof typeof sampling], f);
    assert.equal(paramOf('topK'), 'task_runtime.top_k');
  });

  it('createTask refuses an invalid request whoever calls it (no door in between)', async () => {
    const runtime = await TaskRuntime.open({ dataDir: tempDir(), backend: new ScriptedBackend(says('x')), deltaFlushMs: 0 });
    try {
      assert.throws(
        () => runtime.createTask({ origin: 'editor', principal: 'editor', input: { model: 'm', input: 'hi', temperature: 5 } }),
        (e) => isRuntimeError(e, 'invalid_request') && e.param === 'temperature',
      );
      assert.equal(runtime.listTasks({}).tasks.length, 0, 'nothing stored');
    } finally {
      await runtime.close();
    }
  });
});
