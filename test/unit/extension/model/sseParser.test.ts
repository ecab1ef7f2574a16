// The editor's SSE parser: frames split anywhere across chunks, with every line ending.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SseParser, type SseMessage } from '../../../../src/extension/model/sseParser';

describe('SseParser', () => {
  it('parses frames split across chunks with every line ending', () => {
    const got: SseMessage[] = [];
    const p = new SseParser((m) => got.push(m));
    p.push(': ping\n\nid: 0\nevent: response.created\ndata: {"a":');
    p.push('1}\r\n\r');
    p.push('\nid: 1\rdata: x\rdata: y\r\r');
    p.push('data: no id\n\n');
    assert.deepEqual(got, [
      { id: '0', event: 'response.created', data: '{"a":1}' },
      { id: '1', event: 'message', data: 'x\ny' },
      { id: '1', event: 'message', data: 'no id' },
    ]);
  });
});
