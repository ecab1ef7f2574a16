// Crash: the real server process is SIGKILLed at random moments of a mixed workload (creates with every on_restart
// policy, cancels, SSE followers, polls, frequent checkpoints). After each restart every acknowledged task and every
// event a client received is there with the same seq and type, sequences never repeat or jump, each interrupted
// task is resolved by its policy, and the store opened with nothing set aside.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, removeDir, startServer, tempDataDir, type Server } from '../protocol/lmsp/harness';
import { sleep } from '../support/wait';
import { QUICK, pick, quarantinedFiles, readEventStream, recordFigures, seeded, type EventReader } from './support';

const ITERATIONS = Number(process.env.RELIABILITY_CRASH_ITERATIONS ?? (QUICK ? 20 : 200));
const POLICIES = ['fail', 'retry', 'resume'] as const;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const TERMINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

interface Known {
  id: string;
  policy: (typeof POLICIES)[number];
  /** Events some client received: seq → type. */
  events: Map<number, string>;
  cancelAcked: boolean;
  lastIteration: number;
}

const env = { TASK_RUNTIME_CHECKPOINT_BYTES: '8192' };

test(`SIGKILL during a mixed workload, ${ITERATIONS} times: nothing acknowledged is lost`, { timeout: 30 * 60_000 }, async () => {
  const dataDir = tempDataDir();
  const rand = seeded(20250607);
  const known = new Map<string, Known>();
  const figures = { requests: 0, kills: 0, created: 0, cancels: 0, eventsChecked: 0, dataLost: 0, status5xx: 0, restartFailed: 0, requeued: 0 };
  const problems: string[] = [];
  const lose = (what: string) => {
    figures.dataLost++;
    if (problems.length < 20) problems.push(what);
  };

  const see = (k: Known, events: { seq: number; type: string }[]) => {
    for (const e of events) {
      const before = k.events.get(e.seq);
      if (before !== undefined && before !== e.type) lose(`${k.id}#${e.seq} was ${before}, now ${e.type} (sequence id reused)`);
      k.events.set(e.seq, e.type);
    }
  };

  async function verify(server: Server, tasks: Known[], iteration: number): Promise<void> {
    assert.deepEqual(quarantinedFiles(dataDir), [], `nothing quarantined after kill #${iteration}`);
    assert.doesNotMatch(server.stderr(), /moved .* aside|is damaged/, 'the store opened cleanly');
    for (const k of tasks) {
      figures.requests++;
      const r = await call(server, 'GET', `/tasks/${k.id}`);
      if (r.status !== 200) {
        lose(`acknowledged task ${k.id} answered ${r.status} after kill #${iteration}`);
        continue;
      }
      const status: string = r.json.task_runtime.status;
      const maxSeen = Math.max(0, ...k.events.keys());
      const reader = readEventStream(server, k.id, TERMINAL.has(status) ? {} : { stopAtSeq: maxSeen });
      const timer = setTimeout(() => reader.close(), 10_000);
      await reader.done;
      clearTimeout(timer);
      figures.requests++;
      const stored = reader.events;
      stored.forEach((e, i) => {
        if (e.seq !== i) lose(`${k.id}: event ${i} has seq ${e.seq} (gap or repeat)`);
        if (e.data.sequence_number !== e.seq) lose(`${k.id}#${e.seq}: sequence_number ${e.data.sequence_number}`);
      });
      if (stored[0]?.type !== 'response.created') lose(`${k.id}: stream does not start with response.created`);
      for (const [seq, type] of k.events) {
        figures.eventsChecked++;
        if (stored[seq]?.type !== type) lose(`${k.id}#${seq}: received ${type}, stored ${stored[seq]?.type ?? 'nothing'}`);
      }
      // Whole batches only: a terminal task's log ends with its terminal event, and only then.
      const last = stored[stored.length - 1];
      if (TERMINAL.has(status) && !TERMINAL_EVENTS.has(last?.type ?? '')) lose(`${k.id}: ${status} but its log ends with ${last?.type}`);
      // Resolved by policy.
      if (k.cancelAcked && status !== 'cancelled') lose(`${k.id}: cancel was acknowledged, status is ${status}`);
      if (k.policy === 'fail' && !TERMINAL.has(status)) lose(`${k.id}: on_restart fail but ${status} after restart`);
      if (r.json.error?.code === 'server_restarted') {
        figures.restartFailed++;
        if (k.policy !== 'fail') lose(`${k.id}: on_restart ${k.policy} but failed with server_restarted`);
      }
      if (r.json.task_runtime.attempt > 1) figures.requeued++;
      see(k, stored);
    }
  }

  async function workload(server: Server, iteration: number, runMs: number): Promise<EventReader[]> {
    const readers: Array<{ k: Known; reader: EventReader }> = [];
    const ids = () => [...known.keys()];
    const end = Date.now() + runMs;
    const worker = async () => {
      while (Date.now() < end) {
        const r = rand();
        try {
          if (r < 0.4 || known.size === 0) {
            const policy = pick(rand, POLICIES);
            figures.requests++;
            const long = rand() < 0.2;
            const res = await call(server, 'POST', '/tasks', {
              body: {
                type: 'response',
                on_restart: policy,
                input: {
                  model: server.model,
                  input: `crash ${iteration} ${figures.created}`,
                  max_output_tokens: long ? 400 : 5 + Math.floor(rand() * 80),
                  ...(rand() < 0.7 ? { temperature: 0 } : {}),
                },
              },
            });
            if (res.status >= 500) figures.status5xx++;
            if (res.status === 202) {
              figures.created++;
              const k: Known = { id: res.json.id, policy, events: new Map(), cancelAcked: false, lastIteration: iteration };
              known.set(k.id, k);
              if (rand() < 0.5) readers.push({ k, reader: readEventStream(server, k.id) });
            }
          } else if (r < 0.55) {
            const k = known.get(pick(rand, ids()))!;
            figures.requests++;
            figures.cancels++;
            const res = await call(server, 'POST', `/tasks/${k.id}/cancel`);
            if (res.status >= 500) figures.status5xx++;
            if (res.status === 200 && ['cancelling', 'cancelled'].includes(res.json.task_runtime.status)) k.cancelAcked = true;
            k.lastIteration = iteration;
          } else if (r < 0.85) {
            const k = known.get(pick(rand, ids()))!;
            figures.requests++;
            const res = await call(server, 'GET', `/tasks/${k.id}`);
            if (res.status >= 500) figures.status5xx++;
          } else {
            const k = known.get(pick(rand, ids()))!;
            figures.requests++;
            k.lastIteration = iteration;
            readers.push({ k, reader: readEventStream(server, k.id) });
          }
        } catch {
          // the connection broke: only possible once the kill started
        }
        await sleep(Math.floor(rand() * 10));
      }
    };
    const killAt = sleep(runMs).then(async () => {
      figures.kills++;
      await server.kill();
    });
    await Promise.all([worker(), worker(), worker(), killAt]);
    for (const { k, reader } of readers) {
      reader.close();
      see(k, reader.events);
      if (reader.events.length) k.lastIteration = iteration;
    }
    return readers.map((r) => r.reader);
  }

  let server = await startServer({ dataDir, env });
  try {
    for (let i = 0; i < ITERATIONS; i++) {
      await workload(server, i, 100 + Math.floor(rand() * 1200));
      server = await startServer({ dataDir, env });
      const recent = [...known.values()].filter((k) => k.lastIteration === i);
      const older = [...known.values()].filter((k) => k.lastIteration !== i);
      const sample = Array.from({ length: Math.min(10, older.length) }, () => pick(rand, older));
      await verify(server, [...recent, ...new Set(sample)], i);
    }
    await verify(server, [...known.values()], ITERATIONS);
    assert.equal(await server.stop(), 0, 'clean stop');
  } finally {
    await server.kill();
    removeDir(dataDir);
    recordFigures('crash', {
      iterations: ITERATIONS,
      faultsInjected: figures.kills,
      requestsTried: figures.requests,
      crashes: 0,
      status5xx: figures.status5xx,
      dataLost: figures.dataLost,
      notes: {
        tasksCreated: figures.created,
        cancels: figures.cancels,
        eventsChecked: figures.eventsChecked,
        failedByRestartPolicy: figures.restartFailed,
        rerunAfterRestart: figures.requeued,
        firstProblems: problems,
      },
    });
  }
  assert.deepEqual(problems, [], 'nothing acknowledged was lost');
  assert.equal(figures.status5xx, 0);
  assert.ok(figures.created > ITERATIONS, `the workload created tasks (${figures.created})`);
});
