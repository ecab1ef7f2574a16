// Server-Sent Events writer: id/event/data framing, heartbeat comments, a bounded buffer when the client reads
// slowly (the stream is dropped rather than buffered without end; the client resumes with Last-Event-ID), and
// clean shutdown when the client goes away. A stream counts as open (its close listeners wait, and with them the
// stream slot it holds) until the socket has taken everything written: a finished replay to a reader that does not
// read still holds its slot, and a reader that takes nothing for STALLED_READER_MS is dropped.
import type { ServerResponse } from 'node:http';

export interface SseFrame {
  id?: number | string;
  event?: string;
  data: string;
}

export interface SseWriterOptions {
  heartbeatMs?: number;
  /** What a heartbeat writes (default: a `: ping` comment); Anthropic streams need an `event: ping` frame. */
  heartbeatFrame?: SseFrame;
  /** Bytes queued while the socket is not draining before the stream is dropped. */
  maxBufferedBytes?: number;
  signal?: AbortSignal;
}

export const DEFAULT_HEARTBEAT_MS = 15_000;
/** Bytes the socket may hold unsent before a writer that can wait (a replay) waits for it to drain. */
export const REPLAY_HIGH_WATER_BYTES = 1024 * 1024;
/** A reader that takes nothing for this long while a replay or the stream's end waits on it is dropped. */
export const STALLED_READER_MS = 60_000;

export class SseWriter {
  /** No more writes. */
  private closed = false;
  /** The socket took everything (or is gone): the close listeners ran. */
  private released = false;
  private stall: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly closeListeners: Array<() => void> = [];
  private readonly maxBuffered: number;

  constructor(
    private readonly res: ServerResponse,
    options: SseWriterOptions = {},
  ) {
    this.maxBuffered = options.maxBufferedBytes ?? 8 * 1024 * 1024;
    res.statusCode = 200;
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    res.on('close', () => this.finish());
    options.signal?.addEventListener('abort', () => this.close(), { once: true });
    const every = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    if (every > 0) {
      const frame = options.heartbeatFrame;
      this.heartbeat = setInterval(() => (frame ? this.send(frame) : this.comment('ping')), every);
      this.heartbeat.unref();
    }
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** More is queued than the socket should hold: a writer that can wait (a replay) waits for `drained()`. */
  get congested(): boolean {
    return !this.closed && this.res.writableLength > REPLAY_HIGH_WATER_BYTES;
  }

  /** Resolves once the socket has taken what is queued, or the stream closed. */
  drained(): Promise<void> {
    if (!this.congested) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const stall = setTimeout(() => this.drop(), STALLED_READER_MS).unref();
      const done = () => {
        clearTimeout(stall);
        this.res.off('drain', done);
        resolve();
      };
      this.res.once('drain', done);
      this.onClose(done);
    });
  }

  /** After the stream ended and the socket took all of it, or the socket went away. */
  onClose(listener: () => void): void {
    if (this.released) listener();
    else this.closeListeners.push(listener);
  }

  send(frame: SseFrame): void {
    let text = '';
    if (frame.id !== undefined) text += `id: ${frame.id}\n`;
    if (frame.event !== undefined) text += `event: ${frame.event}\n`;
    for (const line of frame.data.split('\n')) text += `data: ${line}\n`;
    this.write(text + '\n');
  }

  comment(text: string): void {
    this.write(`: ${text}\n\n`);
  }

  /** Ends the stream after everything queued has been written. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.res.end();
    if (this.res.writableFinished) return this.finish();
    this.res.once('finish', () => this.finish());
    this.stall = setTimeout(() => this.drop(), STALLED_READER_MS).unref();
  }

  private drop(): void {
    this.res.destroy();
    this.finish();
  }

  private write(text: string): void {
    if (this.closed) return;
    // writableLength counts what the socket has not taken yet: a reader that stopped reading (more than the cap still
    // unsent before this frame) is cut off. The frame itself does not count, so one large event still goes out.
    if (this.res.writableLength > this.maxBuffered) return this.drop();
    this.res.write(text);
  }

  private finish(): void {
    if (this.released) return;
    this.released = true;
    this.closed = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.stall) clearTimeout(this.stall);
    for (const l of this.closeListeners.splice(0)) l();
  }
}

/** Why a stream slot was refused: the door's shared slots are taken, or the caller's own share is. */
export type GateRefusal = { refused: 'shared' } | { refused: 'principal'; current: number; max: number };

/**
 * Caps the simultaneously open SSE streams of a door: `max` shared slots for everyone, and at most `maxPerPrincipal`
 * streams of one principal (runtime/shares.ts), so one client cannot take the shared slots from the others. A stream
 * that is only its owner's business (the change stream) takes no shared slot and counts against its owner alone.
 */
export class SseGate {
  private open = 0;
  private readonly byPrincipal = new Map<string, number>();

  constructor(
    readonly max: number,
    readonly maxPerPrincipal = Infinity,
  ) {}

  /** A release function for the slot, or why there is none. `shared: false` takes no shared slot. */
  tryAcquire(principal: string, shared = true): (() => void) | GateRefusal {
    const mine = this.byPrincipal.get(principal) ?? 0;
    if (mine >= this.maxPerPrincipal) return { refused: 'principal', current: mine, max: this.maxPerPrincipal };
    if (shared && this.open >= this.max) return { refused: 'shared' };
    if (shared) this.open++;
    this.byPrincipal.set(principal, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (shared) this.open--;
      const n = (this.byPrincipal.get(principal) ?? 1) - 1;
      if (n > 0) this.byPrincipal.set(principal, n);
      else this.byPrincipal.delete(principal);
    };
  }

  /** Shared slots in use. */
  get count(): number {
    return this.open;
  }

  /** Streams a principal has open, shared or not. */
  countOf(principal: string): number {
    return this.byPrincipal.get(principal) ?? 0;
  }
}
