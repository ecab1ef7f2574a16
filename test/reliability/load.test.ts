// Load: many queued tasks, pollers, SSE followers and MCP clients at once for a bounded time. Every follower's
// sequence is gap-free and matches the stored log; the server's RSS and the poll latency are reported (figures,
// not assertions: the machine is shared).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { call, removeDir, startServer, type Server } from '../protocol/lmsp/harness';
import { connect } from '../protocol/mcp/harness';
import { sleep } from '../support/wait';
import { QUICK, percentile, pick, readEventStream, recordFigures, rssBytes, seeded, type EventReader } from './support';

const SCALE = QUICK
  ? { tasks: 150, pollers: 40, followers: 10, mcpClients: 4, windowMs: 25_000 }
  : { tasks: 1000, pollers: 200, followers: 50, mcpClients: 20, windowMs: 120_000 };

test(
  `load: ${SCALE.tasks} queued tasks, ${SCALE.pollers} pollers, ${SCALE.followers} SSE followers, ${SCALE.mcpClients} MCP clients`,
  { timeout: 15 * 60_000 },
  async () => {
    // One client queues all of them: its per-principal share (256 by default, runtime/shares.ts) is raised with the
    // global cap, since this measures the server under load, not the share that would stop such a client.
    const server: Server = await startServer({ limits: { maxQueuedTasks: SCALE.tasks * 2, maxQueuedTasksPerPrincipal: SCALE.tasks * 2 } });
    const rand = seeded(777);
    const pid = server.proc.pid!;
    let requests = 0;
    let status5xx = 0;
    let maxRss = rssBytes(pid);
    const startRss = maxRss;
    const rssTimer = setInterval(() => (maxRss = Math.max(maxRss, rssBytes(pid))), 250);
    const problems: string[] = [];
    try {
      // Queue everything first (50 creates in flight at a time).
      const ids: string[] = [];
      for (let i = 0; i < SCALE.tasks; i += 50) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(50, SCALE.tasks - i) }, (_, k) =>
            call(server, 'POST', '/tasks', {
              body: { type: 'response', input: { model: server.model, input: `load ${i + k}`, max_output_tokens: 3 } },
            }),
          ),
        );
        requests += batch.length;
        for (const r of batch) {
          if (r.status >= 500) status5xx++;
          assert.equal(r.status, 202, r.text);
          ids.push(r.json.id);
        }
      }
      const end = Date.now() + SCALE.windowMs;
      // Spread over the queue: early ones replay finished logs, later ones are followed live while they run.
      const step = Math.max(1, Math.floor(ids.length / SCALE.followers));
      const followed = ids.filter((_, i) => i % step === 0).slice(0, SCALE.followers);
      const followers: EventReader[] = followed.map((id) => readEventStream(server, id));

      const pollLatency: number[] = [];
      const poller = async () => {
        while (Date.now() < end) {
          const t0 = performance.now();
          const r = await call(server, 'GET', `/tasks/${pick(rand, ids)}`);
          pollLatency.push(performance.now() - t0);
          requests++;
          if (r.status !== 200) {
            if (r.status >= 500) status5xx++;
            if (problems.length < 10) problems.push(`poll answered ${r.status}`);
          }
          await sleep(50 + Math.floor(rand() * 100));
        }
      };
      let mcpCalls = 0;
      let mcpErrors = 0;
      const mcpClient = async (n: number) => {
        const client = await connect(`${server.url}/mcp`, server.tokenA, `load-${n}`);
        try {
          while (Date.now() < end) {
            try {
              if (rand() < 0.5) await client.listTools();
              else await client.callTool({ name: 'get_task_text', arguments: { taskId: pick(rand, ids) } });
            } catch (e) {
              mcpErrors++;
              if (problems.length < 10) problems.push(`mcp: ${(e as Error).message}`);
            }
            mcpCalls++;
            await sleep(100 + Math.floor(rand() * 100));
          }
        } finally {
          await client.close();
        }
      };
      await Promise.all([...Array.from({ length: SCALE.pollers }, poller), ...Array.from({ length: SCALE.mcpClients }, (_, n) => mcpClient(n))]);
      requests += mcpCalls;

      // Followers of unfinished tasks are closed now; what they saw must still be a gap-free prefix of the log.
      for (const f of followers) f.close();
      let eventsChecked = 0;
      let lost = 0;
      for (let i = 0; i < followed.length; i++) {
        const seen = followers[i].events;
        seen.forEach((e, k) => {
          if (e.seq !== k) problems.push(`follower ${i}: event ${k} has seq ${e.seq} (lost or duplicated)`);
        });
        const stored = readEventStream(server, followed[i], { stopAtSeq: Math.max(0, seen.length - 1) });
        await stored.done;
        requests++;
        for (const e of seen) {
          eventsChecked++;
          if (stored.events[e.seq]?.type !== e.type) {
            lost++;
            problems.push(`follower ${i}: #${e.seq} ${e.type} vs stored ${stored.events[e.seq]?.type}`);
          }
        }
      }
      const counts = await call(server, 'GET', '/task_runtime/counts');
      clearInterval(rssTimer);
      const figures = {
        iterations: 1,
        faultsInjected: 0,
        requestsTried: requests,
        crashes: server.proc.exitCode === null ? 0 : 1,
        status5xx,
        dataLost: lost,
        notes: {
          scale: SCALE,
          tasksFinishedInWindow: counts.json?.by_status ? counts.json.by_status.succeeded : counts.json,
          followersCompleted: followers.filter((f) => f.events.some((e) => e.type === 'response.completed' || e.type === 'response.incomplete'))
            .length,
          eventsChecked,
          polls: pollLatency.length,
          pollP50Ms: Math.round(percentile(pollLatency, 50) * 10) / 10,
          pollP99Ms: Math.round(percentile(pollLatency, 99) * 10) / 10,
          mcpCalls,
          mcpErrors,
          rssStartMiB: Math.round(startRss / 2 ** 20),
          rssMaxMiB: Math.round(maxRss / 2 ** 20),
          firstProblems: problems.slice(0, 10),
        },
      };
      recordFigures('load', figures);
      assert.equal(await server.stop(), 0, 'clean stop after the load');
      assert.deepEqual(problems, []);
      assert.equal(status5xx, 0);
      assert.ok(maxRss < 2 * 2 ** 30, `RSS stayed bounded (${Math.round(maxRss / 2 ** 20)} MiB)`);
    } finally {
      clearInterval(rssTimer);
      await server.kill();
      removeDir(server.dataDir);
    }
  },
);
