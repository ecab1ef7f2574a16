// A second window mirrors the owner's tasks through the `task_runtime/changes` feed, which carries live changes only.
// Against an owner whose feed answers only when the test says so: a change made between the window's first list and
// the feed's connect must still reach the tree (every connect reloads), `connected()` resolves exactly when the feed
// is up, and a reconnect reloads again.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { RemoteTaskSource } from '../../../../src/extension/model/remoteTaskSource';
import { TaskTreeModel, type TreeChange } from '../../../../src/extension/model/treeModel';
import { TASK_STATUSES, type TaskStatus } from '../../../../src/runtime/task';

const TOKEN = 'test-token';

/** A task object as the owner's LMSP door writes it (with the vendor member the editor reads). */
function taskObject(id: string, status: TaskStatus, updatedAtMs: number) {
  return {
    id,
    object: 'task',
    type: 'response',
    status,
    created_at: 1,
    updated_at: Math.floor(updatedAtMs / 1000),
    response_id: `resp_${id}`,
    on_restart: 'fail',
    response: null,
    error: null,
    task_runtime: {
      status,
      origin: 'lmsp',
      title: id,
      model: 'tiny',
      status_message: null,
      output_tokens: 0,
      attempt: 1,
      created_at_ms: 1000,
      updated_at_ms: updatedAtMs,
    },
  };
}

/** A minimal owner: lists and counts from a map; the change feed is held open without headers until released. */
class FakeOwner {
  readonly tasks = new Map<string, ReturnType<typeof taskObject>>();
  private server: Server | undefined;
  private heldFeeds: ServerResponse[] = [];
  private openFeeds: ServerResponse[] = [];
  private feedWaiters: Array<() => void> = [];
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/lmsp/v1`;
  }

  set(id: string, status: TaskStatus, updatedAtMs: number): void {
    this.tasks.set(id, taskObject(id, status, updatedAtMs));
  }

  /** Resolves when a change-feed request is waiting (held) at the owner. */
  feedRequested(): Promise<void> {
    if (this.heldFeeds.length) return Promise.resolve();
    return new Promise((resolve) => this.feedWaiters.push(resolve));
  }

  /** Answers the held feed requests: headers and the `subscribed` comment, as the real door does. */
  releaseFeeds(): void {
    for (const res of this.heldFeeds.splice(0)) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': subscribed\n\n');
      this.openFeeds.push(res);
    }
  }

  /** Cuts every open feed connection (an owner hiccup). */
  dropFeeds(): void {
    for (const res of this.openFeeds.splice(0)) res.destroy();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401).end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://owner');
    const path = url.pathname.replace(/^\/lmsp\/v1/, '');
    if (path === '/task_runtime/changes') {
      this.heldFeeds.push(res);
      for (const w of this.feedWaiters.splice(0)) w();
      return;
    }
    if (path === '/task_runtime/counts') {
      const byStatus = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
      for (const t of this.tasks.values()) byStatus[t.task_runtime.status]++;
      json(res, { object: 'task_runtime.counts', by_status: byStatus, total: this.tasks.size });
      return;
    }
    if (path === '/tasks') {
      const statuses = url.searchParams.get('status')?.split(',');
      const data = [...this.tasks.values()].filter((t) => !statuses || statuses.includes(t.status));
      json(res, { object: 'list', data, next_cursor: null, has_more: false });
      return;
    }
    res.writeHead(404).end();
  }

  async close(): Promise<void> {
    for (const res of [...this.heldFeeds, ...this.openFeeds]) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** The next tree change that satisfies `pred`; fails after `ms` naming what it waited for. */
function nextChange(model: TaskTreeModel, pred: (c: TreeChange) => boolean, what: string, ms = 30_000): Promise<TreeChange> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      sub.dispose();
      reject(new Error(`timed out waiting for ${what}`));
    }, ms);
    const sub = model.onDidChange((c) => {
      if (!pred(c)) return;
      clearTimeout(timer);
      sub.dispose();
      resolve(c);
    });
  });
}

describe('remote task source: change feed connect', () => {
  let owner: FakeOwner;

  before(async () => {
    owner = new FakeOwner();
    await owner.start();
  });
  after(async () => {
    await owner.close();
  });

  it('a change made before the feed connects reaches the tree: the first connect reloads too', async () => {
    owner.tasks.clear();
    owner.set('task_a', 'queued', 1000);
    const source = new RemoteTaskSource({ lmspUrl: owner.url, token: TOKEN });
    const model = new TaskTreeModel(source, { intervalMs: 0 });
    try {
      // The window lists while its feed is still connecting (held at the owner).
      await owner.feedRequested();
      await model.reload();
      assert.deepEqual(
        (await model.groupChildren('queued')).map((n) => n.kind === 'task' && n.id),
        ['task_a'],
      );
      // The task finishes now: the owner has no feed subscriber yet, so no change event is ever sent for it.
      owner.set('task_a', 'succeeded', 2000);
      const reloaded = nextChange(model, (c) => c.root && model.groupCount('succeeded') === 1, 'the tree to reload after the feed connected');
      owner.releaseFeeds();
      await source.connected();
      await reloaded;
      assert.equal(model.groupCount('queued'), 0);
      assert.deepEqual(
        (await model.groupChildren('succeeded')).map((n) => n.kind === 'task' && n.task.status),
        ['succeeded'],
      );
    } finally {
      model.dispose();
      source.dispose();
    }
  });

  it('connected() waits for the feed, and every reconnect asks listeners to reload', async () => {
    owner.tasks.clear();
    const source = new RemoteTaskSource({ lmspUrl: owner.url, token: TOKEN });
    let reloads = 0;
    source.onDidInvalidate(() => reloads++);
    const sub = source.onDidChangeTask(() => undefined);
    try {
      await owner.feedRequested();
      let connected = false;
      const first = source.connected().then(() => (connected = true));
      // Still held at the owner: another request/response round trip proves connected() has not resolved.
      await source.counts();
      assert.equal(connected, false, 'connected() resolved before the feed answered');
      owner.releaseFeeds();
      await first;
      assert.equal(reloads, 1, 'the first connect asks for a reload');
      await source.connected(); // resolves at once while connected

      owner.dropFeeds();
      await owner.feedRequested(); // the source reconnects
      let reconnected = false;
      const again = source.connected().then(() => (reconnected = true));
      await source.counts();
      assert.equal(reconnected, false, 'connected() resolved while the feed was down');
      owner.releaseFeeds();
      await again;
      assert.equal(reloads, 2, 'the reconnect asks for a reload');
    } finally {
      sub.dispose();
      source.dispose();
    }
  });

  it('a pending connected() rejects when the source is disposed', async () => {
    const source = new RemoteTaskSource({ lmspUrl: owner.url, token: TOKEN });
    const sub = source.onDidChangeTask(() => undefined);
    await owner.feedRequested();
    const pending = source.connected();
    sub.dispose();
    source.dispose();
    await assert.rejects(pending, /disposed/);
  });
});
