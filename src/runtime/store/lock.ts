// One writer per data directory. The lock file names its owner (pid, start, heartbeat, a random token);
// a lock whose process is gone, or whose heartbeat stopped long ago, may be taken over.
// A process killed a moment ago may still exist while the kernel tears it down (a large model's memory, a GPU
// context): acquireWaiting looks at such an owner again every LOCK_POLL_MS for a bounded time (`serve`:
// SERVE_LOCK_WAIT_MS) before refusing, so a restart right after a SIGKILL takes over instead of exiting.
import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { isRuntimeError, RuntimeError } from '../errors';
import { isProcessAlive } from '../process';

export interface LockOwner {
  pid: number;
  host: string;
  token: string;
  startedAt: number;
  heartbeatAt: number;
  /** Whatever the owner wants other processes to know (e.g. its endpoint). */
  info?: Record<string, unknown>;
}

const LOCK_FILE = 'owner.lock';
const HEARTBEAT_MS = 5_000;
const STALE_MS = 60_000;
/** How long `serve` waits at start for a live owner on this host to go away before refusing (acquireWaiting). */
export const SERVE_LOCK_WAIT_MS = 5_000;
const LOCK_POLL_MS = 100;

export interface LockWait {
  /** Longest wait for a live owner on this host to go away, ms. */
  maxMs: number;
  /** Between two looks at the owner (default LOCK_POLL_MS). */
  pollMs?: number;
  /** The clock and the pause between looks (default Date.now and a timer). */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export function readLockOwner(dataDir: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(fs.readFileSync(join(dataDir, LOCK_FILE), 'utf8')) as LockOwner;
    return typeof owner?.pid === 'number' && typeof owner.token === 'string' ? owner : undefined;
  } catch {
    return undefined;
  }
}

export function isLockStale(owner: LockOwner, now = Date.now()): boolean {
  if (owner.host !== hostname()) return now - owner.heartbeatAt > STALE_MS;
  return !isProcessAlive(owner.pid) || now - owner.heartbeatAt > STALE_MS;
}

export class DataDirLock {
  private timer: NodeJS.Timeout | undefined;
  private owner: LockOwner;
  private lost = false;

  private constructor(
    private readonly dataDir: string,
    owner: LockOwner,
    private readonly onLost: () => void,
  ) {
    this.owner = owner;
    this.timer = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
    this.timer.unref();
  }

  static acquire(dataDir: string, onLost: () => void = () => {}): DataDirLock {
    const path = join(dataDir, LOCK_FILE);
    const now = Date.now();
    const owner: LockOwner = {
      pid: process.pid,
      host: hostname(),
      token: randomBytes(16).toString('hex'),
      startedAt: now,
      heartbeatAt: now,
    };
    for (let attempt = 0; attempt < 3; attempt++) {
      const tmp = `${path}.${owner.token}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify(owner));
      try {
        fs.linkSync(tmp, path); // atomic create-if-absent
        fs.unlinkSync(tmp);
        return new DataDirLock(dataDir, owner, onLost);
      } catch (e) {
        fs.unlinkSync(tmp);
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const current = readLockOwner(dataDir);
      if (current && !isLockStale(current)) {
        throw new RuntimeError(
          'store_locked',
          `The data directory is in use by process ${current.pid} (since ${new Date(current.startedAt).toISOString()}).`,
        );
      }
      // Stale (or unreadable): move it aside, then make sure what we moved is what we judged stale.
      const aside = `${path}.stale-${randomBytes(4).toString('hex')}`;
      try {
        fs.renameSync(path, aside);
      } catch {
        continue;
      }
      let moved: LockOwner | undefined;
      try {
        moved = JSON.parse(fs.readFileSync(aside, 'utf8'));
      } catch {
        moved = undefined;
      }
      if (current && moved && moved.token !== current.token) {
        // Someone else took over between our read and our rename: give it back.
        try {
          fs.linkSync(aside, path);
        } catch {
          // they lost it; their heartbeat will notice
        }
      }
      fs.rmSync(aside, { force: true });
    }
    throw new RuntimeError('store_locked', 'Could not take the data directory lock.');
  }

  /**
   * acquire(), and while a live owner on this host holds the lock, acquire() again every `pollMs` until it has gone
   * or `maxMs` have passed; then the refusal says how long it waited. An owner on another host is refused at once:
   * only its heartbeat can tell it is gone, and that takes STALE_MS.
   */
  static async acquireWaiting(dataDir: string, onLost: () => void, wait: LockWait): Promise<DataDirLock> {
    const now = wait.now ?? Date.now;
    const sleep = wait.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    const pollMs = Math.max(1, wait.pollMs ?? LOCK_POLL_MS);
    const started = now();
    for (;;) {
      try {
        return DataDirLock.acquire(dataDir, onLost);
      } catch (e) {
        if (!isRuntimeError(e, 'store_locked')) throw e;
        const owner = readLockOwner(dataDir);
        if (owner && owner.host !== hostname()) throw e;
        const left = started + wait.maxMs - now();
        if (left <= 0) {
          throw new RuntimeError('store_locked', `${e.message.replace(/\.$/, '')}; waited ${formatSeconds(wait.maxMs)} for it to exit.`);
        }
        await sleep(Math.min(pollMs, left));
      }
    }
  }

  get isLost(): boolean {
    return this.lost;
  }

  setInfo(info: Record<string, unknown>): void {
    this.owner = { ...this.owner, info };
    this.heartbeat();
  }

  private heartbeat(): void {
    if (this.lost) return;
    const current = readLockOwner(this.dataDir);
    if (!current || current.token !== this.owner.token) {
      this.lost = true;
      this.stopTimer();
      this.onLost();
      return;
    }
    this.owner = { ...this.owner, heartbeatAt: Date.now() };
    const path = join(this.dataDir, LOCK_FILE);
    const tmp = `${path}.${this.owner.token}.hb`;
    try {
      fs.writeFileSync(tmp, JSON.stringify(this.owner));
      fs.renameSync(tmp, path);
    } catch {
      // a missed heartbeat is harmless; staleness needs many
    }
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  release(): void {
    this.stopTimer();
    if (this.lost) return;
    const current = readLockOwner(this.dataDir);
    if (current?.token === this.owner.token) fs.rmSync(join(this.dataDir, LOCK_FILE), { force: true });
    this.lost = true;
  }
}

function formatSeconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
