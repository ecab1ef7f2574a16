// The one server-sent-events reader: strict WHATWG framing (lines end in \n, \r\n or \r, also split across chunks;
// an empty line ends an event; `data:` lines join with \n; `event:` names it and `id:` labels it, the last id carrying
// over; comments (`:`) and other fields are ignored) and bounded: the bytes come from another process, so a line or an
// event larger than `maxEventBytes` is an SseLimitError rather than unbounded buffering. Each reader picks its cap
// for what it reads (an engine's chunks, an owner window's task events, a test's whole responses; see docs/remote.md).
//
// It lives beside the SSE writer (sse.ts) because it is HTTP framing, and protocols/http imports nothing but Node and
// itself: the remote engine client (backends/remote), the editor's remote task source (extension/model) and the
// tests' reader (test/fixtures/sse.ts) all read it without an arrow into a door, the runtime or a composition root.

export class SseLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SseLimitError';
  }
}

export interface SseEvent {
  /** The joined `data:` lines. */
  data: string;
  /** The `event:` field, or "message" when the event named none. */
  event: string;
  /** The `id:` field, when the event had one. */
  id?: string;
}

export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private dataBytes = 0;
  private event = '';
  private id: string | undefined;
  private sawCr = false;
  private readonly decoder = new TextDecoder('utf-8', { fatal: false });

  constructor(private readonly maxEventBytes = 1024 * 1024) {}

  /** Feeds bytes; returns the data of every event completed by them. */
  push(chunk: Uint8Array): string[] {
    return this.events(this.decoder.decode(chunk, { stream: true })).map((e) => e.data);
  }

  /** Feeds bytes; returns every event completed by them, with its name and id. */
  pushEvents(chunk: Uint8Array): SseEvent[] {
    return this.events(this.decoder.decode(chunk, { stream: true }));
  }

  /** Text input: the data of every event completed by it. */
  feed(text: string): string[] {
    return this.events(text).map((e) => e.data);
  }

  /** Text input: every event completed by it. */
  events(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 10 && this.sawCr) {
        // \r\n: the \r already ended the line.
        this.sawCr = false;
        start = i + 1;
        continue;
      }
      this.sawCr = false;
      if (c !== 10 && c !== 13) continue;
      this.sawCr = c === 13;
      const line = this.buffer + text.slice(start, i);
      this.buffer = '';
      start = i + 1;
      const ev = this.line(line);
      if (ev !== undefined) out.push(ev);
    }
    this.buffer += text.slice(start);
    if (this.buffer.length + this.dataBytes > this.maxEventBytes) {
      throw new SseLimitError(`an event of the stream is larger than ${this.maxEventBytes} bytes`);
    }
    return out;
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') {
      const named = this.event;
      this.event = '';
      if (!this.data.length) return undefined;
      const ev: SseEvent = { data: this.data.join('\n'), event: named || 'message' };
      if (this.id !== undefined) ev.id = this.id;
      this.data = [];
      this.dataBytes = 0;
      return ev;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') {
      this.event = value.slice(0, 256);
      return undefined;
    }
    if (field === 'id') {
      // The last event id persists across events (WHATWG); one with a NUL is ignored.
      if (!value.includes('\u0000')) this.id = value.slice(0, 256);
      return undefined;
    }
    if (field !== 'data') return undefined;
    this.dataBytes += value.length + 1;
    if (this.dataBytes > this.maxEventBytes) throw new SseLimitError(`an event of the stream is larger than ${this.maxEventBytes} bytes`);
    this.data.push(value);
    return undefined;
  }

  /** True when an event was started but not finished (the stream ended mid-event). */
  get partial(): boolean {
    return this.data.length > 0 || this.buffer.length > 0;
  }
}
