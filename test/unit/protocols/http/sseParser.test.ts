// The one SSE reader (src/protocols/http/sseParser.ts), as each of its readers uses it: data only (the engine
// client), events with names and ids (the editor's remote task source, the tests' reader), bytes split anywhere
// (inside a line ending, inside a UTF-8 character), and the cap on an event's size.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SseLimitError, SseParser, type SseEvent } from '../../../../src/protocols/http/sseParser';

describe('SseParser', () => {
  it('frames events across chunk boundaries, CRLF and CR line ends, comments and multi-line data', () => {
    const p = new SseParser(1024);
    assert.deepEqual(p.feed(': comment\r\ndata: {"a"'), []);
    assert.deepEqual(p.feed(':1}\r'), []);
    assert.deepEqual(p.feed('\n\r\ndata: x\ndata: y\n\nevent: e\rdata:z\r\r'), ['{"a":1}', 'x\ny', 'z']);
    assert.equal(p.partial, false);
    p.feed('data: half');
    assert.equal(p.partial, true);
  });

  it('keeps event names and ids for readers that want them (the last id carries over, as WHATWG says)', () => {
    const p = new SseParser(1024);
    assert.deepEqual(p.events('id: 1\nevent: response.created\ndata: {}\n\ndata: x\n\nid: 2\nevent: a\n\nevent: b\r\ndata: y\r\n\r\n'), [
      { data: '{}', event: 'response.created', id: '1' },
      { data: 'x', event: 'message', id: '1' },
      { data: 'y', event: 'b', id: '2' },
    ]);
  });

  it('a CR that ends one chunk and the LF that starts the next are one line end', () => {
    const p = new SseParser(1024);
    const got: SseEvent[] = [];
    // A second line end there would be an empty line: it would end the event early and lose `event: named`.
    const chunks = [
      ': ping\n\nid: 0\nevent: response.created\ndata: {"a":',
      '1}\r\n\r',
      '\nid: 1\revent: named\r',
      '\ndata: x\rdata: y\r\r',
      'data: no id\n\n',
    ];
    for (const chunk of chunks) got.push(...p.events(chunk));
    assert.deepEqual(got, [
      { id: '0', event: 'response.created', data: '{"a":1}' },
      { id: '1', event: 'named', data: 'x\ny' },
      { id: '1', event: 'message', data: 'no id' },
    ]);
  });

  it('decodes bytes split inside a UTF-8 character, and ignores an id with NUL', () => {
    const p = new SseParser(1024);
    const bytes = new TextEncoder().encode('id: 7\ndata: {"t":"é✓"}\n\nid: 8\u0000\ndata: z\n\n');
    const got: SseEvent[] = [];
    for (let i = 0; i < bytes.length; i += 3) got.push(...p.pushEvents(bytes.subarray(i, i + 3)));
    assert.deepEqual(got, [
      { id: '7', event: 'message', data: '{"t":"é✓"}' },
      { id: '7', event: 'message', data: 'z' },
    ]);
  });

  it('refuses an event larger than its cap, also when it never ends a line', () => {
    assert.throws(() => new SseParser(100).feed(`data: ${'x'.repeat(200)}\n\n`), SseLimitError);
    assert.throws(() => new SseParser(100).feed('data: ' + 'x'.repeat(200)), SseLimitError);
    let many = '';
    for (let i = 0; i < 30; i++) many += 'data: xxxxx\n';
    assert.throws(() => new SseParser(100).feed(many), SseLimitError, 'many short data lines add up');
    assert.deepEqual(new SseParser(100).feed(`data: ${'x'.repeat(80)}\n\n`), ['x'.repeat(80)], 'under the cap is fine');
  });
});
