// What the events panel is told went in: input items (messages, tool calls and outputs with JSON formatted), the
// sampling and format options, the tools; and where the model runs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inputView, toModelView } from '../../../../src/extension/webview/panelViews';

describe('panel input view', () => {
  it('lists each input item on its own and formats JSON', () => {
    const view = inputView({
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'Weather in Seoul?' }] },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Seoul"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '{"temp":3}' },
      ],
      temperature: 0.2,
      max_output_tokens: 64,
      task_runtime: { seed: 7, top_k: 40 },
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true } },
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather now', parameters: { type: 'object' } }],
      tool_choice: 'auto',
    });
    assert.equal(view.instructions, 'Be brief.');
    assert.deepEqual(view.items, [
      { kind: 'message', role: 'user', text: 'Weather in Seoul?' },
      { kind: 'function_call', callId: 'call_1', name: 'get_weather', arguments: '{\n  "city": "Seoul"\n}' },
      { kind: 'function_call_output', callId: 'call_1', output: '{\n  "temp": 3\n}' },
    ]);
    assert.deepEqual(view.options.slice(0, 4), [
      ['max_output_tokens', '64'],
      ['temperature', '0.2'],
      ['task_runtime.seed', '7'],
      ['task_runtime.top_k', '40'],
    ]);
    assert.match(view.options.find(([k]) => k === 'text.format')![1], /^json_schema answer \(strict\)\n\{\n  "type": "object"\n\}$/);
    assert.deepEqual(view.tools, [{ name: 'get_weather', description: 'Weather now', parameters: '{\n  "type": "object"\n}' }]);
    assert.equal(view.toolChoice, 'auto');
  });

  it('says where a model runs', () => {
    const gpu = toModelView({
      id: 'tiny',
      source: '/m.gguf',
      state: 'loaded',
      demo: false,
      hardware: 'cuda (H200), 33/33 layers',
      hardwareInfo: { compute: 'cuda', devices: ['NVIDIA H200'], gpuLayers: 33, totalLayers: 33, threads: 4, threadsFrom: 'default' },
      contextLength: 8192,
    });
    assert.deepEqual([gpu.compute, gpu.devices, gpu.gpuLayers, gpu.contextLength], ['cuda', ['NVIDIA H200'], 33, 8192]);
    const remote = toModelView({ id: 'big', source: 'big', state: 'loaded', demo: false, engine: 'lab' });
    assert.deepEqual([remote.compute, remote.engine, remote.threads], ['remote', 'lab', null]);
  });
});
