// Shared pieces of the reliability suite: mode (quick/full), a seeded random source, an SSE reader over node:http
// (the backend's bounded parser), RSS sampling, and the figures each test records for the summary
// (scripts/reliability.mjs merges them).
import * as fs from 'node:fs';
import { request as httpRequest } from 'node:http';
import * as path from 'node:path';
import { SseParser } from '../../src/protocols/http/sseParser';
import type { Server } from '../protocol/lmsp/harness';

export const QUICK = process.env.RELIABILITY_QUICK === '1';

/** Figures of one section of the summary table. `dataLost` must stay 0. */
export interface Figures {
  iterations: number;
  faultsInjected: number;
  requestsTried: number;
  crashes: number;
  status5xx: number;
  dataLost: number;
  notes?: Record<string, unknown>;
}

export function recordFigures(section: string, figures: Figures): void {
  const dir = process.env.RELIABILITY_OUT_DIR;
  if (!dir) return;
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${section}.json`), JSON.stringify({ section, quick: QUICK, ...figures }, null, 2));
}

/** Park–Miller: the same seed gives the same workload and corpus. */
export function seeded(seed: number): () => number {
  let s = seed % 2147483647 || 1;
  return () => (s = (s * 48271) % 2147483647) / 2147483647;
}

export function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)];
}

export interface WireEvent {
  seq: number;
  type: string;
  data: any;
}

export interface EventReader {
  events: WireEvent[];
  status: Promise<number>;
  /** Resolves when the stream ended (server closed, terminal event, abort or error). */
  done: Promise<void>;
  close(): void;
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

/** Reads a task's SSE stream with node:http, keeping every event with its id; ends at the terminal event. */
export function readEventStream(
  server: Pick<Server, 'port' | 'tokenA'>,
  taskId: string,
  opts: { token?: string; stopAtSeq?: number } = {},
): EventReader {
  const events: WireEvent[] = [];
  let closeFn = () => {};
  let statusResolve: (n: number) => void = () => {};
  const status = new Promise<number>((r) => (statusResolve = r));
  const done = new Promise<void>((resolve) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: server.port,
        path: `/lmsp/v1/tasks/${taskId}/events`,
        headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${opts.token ?? server.tokenA}`, accept: 'text/event-stream' },
        agent: false,
      },
      (res) => {
        statusResolve(res.statusCode ?? 0);
        const parser = new SseParser(64 * 1024 * 1024);
        res.on('data', (chunk: Buffer) => {
          for (const ev of parser.pushEvents(chunk)) {
            if (ev.id === undefined) continue; // heartbeats are comments; every task event has an id
            const id = Number(ev.id);
            events.push({ seq: id, type: ev.event, data: JSON.parse(ev.data) });
            if (TERMINAL.has(ev.event) || (opts.stopAtSeq !== undefined && id >= opts.stopAtSeq)) {
              req.destroy();
              resolve();
            }
          }
        });
        res.on('end', () => resolve());
        res.on('error', () => resolve());
        res.on('close', () => resolve());
      },
    );
    req.on('error', () => {
      statusResolve(0);
      resolve();
    });
    closeFn = () => {
      req.destroy();
      resolve();
    };
    req.end();
  });
  return { events, status, done, close: () => closeFn() };
}

/** Resident set size of a process in bytes (Linux). */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Files the store set aside as damaged. */
export function quarantinedFiles(dataDir: string): string[] {
  const dir = path.join(dataDir, 'store');
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => n.includes('.corrupt-')) : [];
}
