// Runs one task attempt on the backend, in three steps: start (queued → loading → running, loading the model when
// it is not loaded yet), stream (the backend's text, batched into delta events by DeltaBatcher, with snapshots for
// `resume` tasks) and finish (the terminal transition that fits how the stream ended).
import * as fs from 'node:fs';
import { join } from 'node:path';
import {
  isBackendError,
  isRequestError,
  type BackendError,
  type GenerateResult,
  type GenerationSnapshot,
  type ModelBackend,
  type OutputSegment,
  type RequestError,
  type TokenLogprob,
} from './backend';
import { OutputAssembler } from './outputItems';
import { DeltaBatcher } from './deltaBatcher';
import { newMessageId } from './ids';
import { answersByName, checkInputRequests, newRound, sameRound, unansweredKeys } from './input';
import { generateRequestOf } from './responses';
import type { TaskStore } from './taskStore';
import type { Delivered, TaskTransitions } from './transitions';
import type { InputRequest, InputResponse, Problem, RequestErrorObject, TaskRecord } from './task';
import { errorText, problem } from './problems';

export type StopReason = 'cancel' | 'deadline' | 'shutdown' | 'expired';

export interface GenerationSettings {
  /** Batch text deltas for at least this long before persisting them as one event. */
  deltaFlushMs: number;
  snapshotDir: string;
  snapshotEveryMs: number;
  /** Snapshots only once re-evaluating what the last one does not cover would take longer (see docs/runtime.md). */
  snapshotMinReevalMs: number;
  /** The runtime's clock, for the times written into responses. */
  now: () => number;
  log?: (msg: string) => void;
}

export interface ResumePoint {
  /** The last snapshot, if any; the backend uses it only when its text is a prefix of `text` (else re-evaluates). */
  snapshot?: GenerationSnapshot;
  /** All text of the attempt delivered before the restart (durable in the event log). */
  text: string;
  /** Output tokens delivered before the restart. */
  outputTokens: number;
  messageId: string;
  /** Their log-probabilities, when the request asked for them. */
  logprobs?: TokenLogprob[];
  /** Everything delivered by channel, when not all of it was answer text (Delivered.segments). */
  segments?: OutputSegment[];
}

/**
 * A run that ended without settling its task because the backend was unavailable or cut off (a remote engine): the
 * scheduler puts the task back in the queue (with a bounded number of retries) or fails it. `newAttempt` when the
 * run had opened its output (clients must drop what they got: a fresh response.created follows).
 */
export interface RequeueRequest {
  reason: string;
  retryAfterMs?: number;
  newAttempt: boolean;
  /** Continue in the same output item from `text` (on_restart "resume" on a backend that can) instead of a new attempt. */
  resume?: boolean;
  /** What clients received in this attempt (to resume from, or for the failure when retries run out). */
  delivered: Delivered & { tokens: number };
}

/** How the backend's stream ended: the text and tokens delivered, and its result or what it threw. */
type Streamed = { text: string; tokens: number; logprobs?: TokenLogprob[]; segments?: OutputSegment[]; reasoningTokens?: number } & (
  { ok: true; result: GenerateResult } | { ok: false; error: unknown }
);

export class GenerationRun {
  readonly abort = new AbortController();
  stopReason: StopReason | undefined;
  /** Set when the run ended asking to be queued again (see RequeueRequest). */
  requeue: RequeueRequest | undefined;
  /** Set when a durable write failed mid-run: the run stops and rejects with it; the runtime settles the task later. */
  storeError: Error | undefined;
  private running: Promise<void> | undefined;
  private readonly messageId: string;
  /** Persists the text received so far (set while the backend streams). */
  private flushText: (() => void) | undefined;
  /** The input round this run waits for, and how to hand it the answers. */
  private waiting: { round: number; resolve(answers: Record<string, InputResponse>): void } | undefined;
  /** Index of the next stored input round a requestInput call may replay; -1 once a call asked something new. */
  private replayAt = 0;
  /** Told when the run starts or stops waiting for input (the scheduler frees or takes back its slot). */
  onWaitChange: (() => void) | undefined;

  constructor(
    readonly taskId: string,
    readonly model: string,
    private readonly store: TaskStore,
    private readonly transitions: TaskTransitions,
    private readonly backend: ModelBackend,
    private readonly settings: GenerationSettings,
    private readonly resume?: ResumePoint,
  ) {
    this.messageId = resume?.messageId ?? newMessageId();
  }

  stop(reason: StopReason): void {
    this.stopReason ??= reason;
    this.abort.abort();
  }

  /** True while the backend waits for its client's input: the run holds no concurrency slot then. */
  get awaitingInput(): boolean {
    return this.waiting !== undefined;
  }

  /**
   * The runtime has recorded answers to every request of the round this run waits for and moved the task back to
   * running: hands them to the backend. False when this run waits for no such round.
   */
  inputAnswered(): boolean {
    const w = this.waiting;
    if (!w) return false;
    const stored = this.store.inputRoundsOf(this.taskId).find((r) => r.round === w.round);
    if (!stored || unansweredKeys(stored).length > 0) return false;
    this.waiting = undefined;
    this.onWaitChange?.();
    w.resolve(answersByName(stored));
    return true;
  }

  /** Settles when the run has ended, however it ended. */
  get done(): Promise<void> {
    return (this.running ?? Promise.resolve()).catch(() => {});
  }

  run(): Promise<void> {
    this.running ??= this.execute();
    return this.running;
  }

  private async execute(): Promise<void> {
    const running = await this.start();
    if (!running) return;
    this.finish(await this.stream(running));
  }

  /**
   * queued → loading → running. Returns the running task, or undefined when the run ended here (someone else moved
   * the task, the load failed, or the run was stopped while loading: those outcomes are written here).
   */
  private async start(): Promise<TaskRecord | undefined> {
    const id = this.taskId;
    const { transitions } = this;
    const running = { messageId: this.messageId, resumedTokens: this.resume?.outputTokens };

    // The start is written with a background sync: the backend starts while it is synced (together with the create,
    // when that is still being synced), and its first text is written after it, so nothing is shown out of order. If
    // the sync fails the start is rolled back and this run stops with the store error.
    const defer = {
      onFailed: (e: Error) => {
        this.storeError ??= e;
        this.abort.abort();
      },
    };
    const queued = this.store.getTask(id);
    if (queued && this.backend.isLoaded(queued.model)) {
      // Nothing to load: both transitions in one durable write, which is what a client waits for before text.
      return transitions.startRunning(id, { ...running, fromQueued: true, defer });
    }
    const loading = transitions.startLoading(id);
    if (!loading) return undefined;
    const model = loading.model;
    try {
      let lastReported = -1;
      await this.backend.load(model, {
        signal: this.abort.signal,
        onProgress: (p) => {
          // A handful of progress events, not hundreds.
          const pct = Math.floor(p * 10);
          if (pct === lastReported) return;
          lastReported = pct;
          transitions.loadProgress(id, model, p);
        },
      });
    } catch (e) {
      if (this.stopReason) return void this.finishStopped({ text: '', tokens: 0 });
      if (isBackendError(e) && e.kind !== 'failed') {
        this.requeue = { reason: e.message, retryAfterMs: e.retryAfterMs, newAttempt: false, delivered: { text: '', tokens: 0 } };
        return undefined;
      }
      if (isBackendError(e)) return void this.fail(problem(e.code, e.message), { text: '', tokens: 0 });
      const msg = errorText(e);
      this.settings.log?.(`task ${id}: model load failed: ${msg}`);
      return void this.fail(problem('model_load_failed', `The model "${model}" could not be loaded: ${msg}`), { text: '', tokens: 0 });
    }
    if (this.stopReason) return void this.finishStopped({ text: '', tokens: 0 });
    const started = transitions.startRunning(id, { ...running, defer });
    if (!started) this.finishStopped({ text: '', tokens: 0, messageId: this.messageId });
    return started;
  }

  /** Runs the backend's generation, persisting its text in batches. Never throws: the outcome is returned. */
  private async stream(running: TaskRecord): Promise<Streamed> {
    const id = this.taskId;
    const resumed = this.resume;
    // The output so far (a resumed attempt's delivered segments first): turns pieces into steps and items.
    const output = new OutputAssembler(this.messageId, resumed ? (resumed.segments ?? [{ text: resumed.text }]) : undefined);
    let tokens = resumed?.outputTokens ?? 0;
    // Output tokens of reasoning, counted where every one was seen: not after a resume that delivered reasoning before
    // the restart (the store keeps no count per channel), then unknown.
    let reasoningTokens = resumed?.segments?.some((s) => s.channel?.kind === 'reasoning') ? undefined : 0;
    // Log-probabilities of every delivered token, when the request asked for them (the final output part carries them).
    let logprobs = resumed?.logprobs ? [...resumed.logprobs] : undefined;
    // Writes run from timers and backend callbacks: a failed one (now, or its background sync later) must stop the
    // generation, not escape there.
    const stopOnStoreError = (e: Error) => {
      this.storeError ??= e;
      this.abort.abort();
    };
    // The attempt's first delta batch syncs on the loop (the first text, at once: docs/runtime.md "First delta near
    // the engine"); later ones are deferred: their sync runs on libuv's pool, shared by every task's batches written
    // meanwhile (8 streams through serve spent 0.7 ms of loop time per token in fdatasync when each batch synced on
    // the loop, holding back the consumers that feed the next batched decode).
    let firstWritten = false;
    const batcher = new DeltaBatcher({
      minWindowMs: this.settings.deltaFlushMs,
      now: () => performance.now(),
      write: (steps, snapshot) => {
        const defer = firstWritten ? { onFailed: stopOnStoreError } : undefined;
        firstWritten = true;
        // A task waiting for input keeps saying so.
        return this.transitions.progress(
          id,
          { messageId: this.messageId, tokens, output: steps, snapshot, waiting: this.waiting !== undefined },
          defer,
        );
      },
      onError: stopOnStoreError,
    });
    const snapshotsWanted = running.onRestart === 'resume' && this.backend.supportsResume(running.model);
    const snapDir = join(this.settings.snapshotDir, id);
    this.flushText = () => batcher.flush();
    try {
      if (snapshotsWanted) fs.mkdirSync(snapDir, { recursive: true });
      const result = await this.backend.generate(generateRequestOf(running.request, running.model), {
        signal: this.abort.signal,
        resumeFrom: resumed
          ? {
              snapshot: resumed.snapshot,
              text: resumed.text,
              outputTokens: resumed.outputTokens,
              ...(resumed.segments ? { segments: resumed.segments } : {}),
            }
          : undefined,
        onText: (piece, n, lp, channel) => {
          if (lp && !channel) (logprobs ??= []).push(...lp);
          tokens += n;
          if (channel?.kind === 'reasoning' && reasoningTokens !== undefined) reasoningTokens += n;
          batcher.add(output.push(piece, channel, channel ? undefined : lp));
        },
        snapshots: snapshotsWanted
          ? {
              dir: snapDir,
              everyMs: this.settings.snapshotEveryMs,
              minReevalMs: this.settings.snapshotMinReevalMs,
              // The snapshot and the text it covers are persisted in one batch.
              onSnapshot: (s) => batcher.flush(s),
            }
          : undefined,
        requestInput: (requests, options) => this.requestInput(requests, options?.message),
      });
      // The last item closes with the response: written with the text before the terminal batch.
      if (result.finishReason !== 'max_output_tokens') batcher.add(output.finish());
      return { text: output.text, segments: output.segments, tokens, logprobs, reasoningTokens, ok: true, result };
    } catch (error) {
      return { text: output.text, segments: output.segments, tokens, logprobs, ok: false, error };
    } finally {
      this.flushText = undefined;
      batcher.flush();
      batcher.close();
    }
  }

  /**
   * GenerateOptions.requestInput: replays a round this task already had answered (a new attempt after a restart),
   * else persists the text so far, then moves the task running → input_required with the new round, in one durable
   * batch, and waits until the runtime hands over the answers (inputAnswered) or the run is stopped.
   */
  private async requestInput(requests: Record<string, InputRequest>, message: string | undefined): Promise<Record<string, InputResponse>> {
    checkInputRequests(requests);
    if (this.waiting) throw new Error('requestInput: this run already waits for input');
    const signal = this.abort.signal;
    if (signal.aborted) throw abortError();
    const id = this.taskId;
    const rounds = this.store.inputRoundsOf(id);
    if (this.replayAt >= 0) {
      const stored = rounds[this.replayAt];
      if (stored && sameRound(stored, requests) && unansweredKeys(stored).length === 0) {
        this.replayAt++;
        return answersByName(stored);
      }
      this.replayAt = -1;
    }
    this.flushText?.();
    if (this.storeError) throw this.storeError;
    const round = newRound(rounds, requests, message);
    let parked: TaskRecord | undefined;
    try {
      parked = this.transitions.awaitInput(id, rounds, round);
    } catch (e) {
      // The store could not be written: the run stops and the scheduler settles the task once writes work again.
      this.storeError = e instanceof Error ? e : new Error(String(e));
      this.abort.abort();
      throw this.storeError;
    }
    // Not running any more: a cancel or a stop came first (it aborts the run too).
    if (!parked) throw abortError();
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (this.waiting?.round !== round.round) return;
        this.waiting = undefined;
        this.onWaitChange?.();
        reject(abortError());
      };
      this.waiting = {
        round: round.round,
        resolve: (answers) => {
          signal.removeEventListener('abort', onAbort);
          resolve(answers);
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.onWaitChange?.();
    });
  }

  /** The terminal transition for how the stream ended; rejects with the store error when a write failed. */
  private finish(streamed: Streamed): void {
    const id = this.taskId;
    const delivered = {
      text: streamed.text,
      tokens: streamed.tokens,
      messageId: this.messageId,
      logprobs: streamed.logprobs,
      ...(streamed.segments ? { segments: streamed.segments } : {}),
      ...(streamed.reasoningTokens ? { reasoningTokens: streamed.reasoningTokens } : {}),
    };
    if (this.storeError) throw this.storeError;
    if (!streamed.ok) {
      if (this.stopReason) return this.finishStopped(delivered);
      if (isRequestError(streamed.error)) return this.requestFailed(streamed.error, delivered);
      if (isBackendError(streamed.error)) return this.backendFailed(streamed.error, delivered);
      const msg = errorText(streamed.error);
      this.settings.log?.(`task ${id}: generation failed: ${msg}`);
      return this.fail(problem('model_error', `Generation failed: ${msg}`), delivered);
    }
    const current = this.store.getTask(id);
    if (!current) return;
    if (this.stopReason || current.status === 'cancelling') return this.finishStopped(delivered);
    this.transitions.succeed(id, streamed.result, delivered);
    this.dropSnapshots();
  }

  /**
   * A backend error after the task started running: nothing generated and unavailable → queued again (a new attempt,
   * since its output item was opened); cut off mid-output → the task's on_restart policy (`fail` fails it, `retry`
   * runs it again, `resume` continues the same output item where the backend can — a remote engine that continues
   * a final assistant message — else runs it again); an engine error → failed.
   */
  private backendFailed(e: BackendError, delivered: Delivered & { messageId: string; tokens: number }): void {
    const current = this.store.getTask(this.taskId);
    if (!current || current.status !== 'running') return this.finishStopped(delivered);
    this.settings.log?.(`task ${this.taskId}: backend ${e.kind}: ${e.message}`);
    if (e.kind === 'failed') return this.fail(problem(e.code, e.message), delivered);
    const { text } = delivered;
    const cutOff = e.kind === 'interrupted' || text.length > 0;
    if (cutOff && current.onRestart === 'fail') {
      const detail = `${e.message} The task's on_restart policy is "fail", so it was not run again.`;
      return this.fail(problem('backend_interrupted', detail), delivered);
    }
    const resume = current.onRestart === 'resume' && text.length > 0 && this.backend.supportsResume(current.model);
    this.requeue = { reason: e.message, retryAfterMs: e.retryAfterMs, newAttempt: !resume, resume, delivered };
  }

  /** The backend ended the request with a protocol-level error (RequestError): failed, the error kept as given. */
  private requestFailed(e: RequestError, delivered: Delivered): void {
    const requestError = requestErrorObject(e);
    this.settings.log?.(`task ${this.taskId}: request error ${requestError.code}: ${requestError.message}`);
    this.fail({ ...problem('request_error', requestError.message), requestError }, delivered);
  }

  /** Ends a run that was stopped from outside: cancel → cancelled, deadline → failed; shutdown leaves it for recovery. */
  private finishStopped(delivered: Delivered): void {
    if (this.stopReason === 'shutdown' || this.stopReason === 'expired') return;
    if (this.stopReason === 'deadline') return this.fail(problem('deadline_exceeded', 'The task did not finish before its deadline.'), delivered);
    this.transitions.cancelled(this.taskId, delivered);
    this.dropSnapshots();
  }

  private fail(err: Problem, delivered: Delivered): void {
    this.transitions.fail(this.taskId, err, delivered);
    this.dropSnapshots();
  }

  private dropSnapshots(): void {
    fs.rmSync(join(this.settings.snapshotDir, this.taskId), { recursive: true, force: true });
  }
}

function abortError(): Error {
  return Object.assign(new Error('The task run was stopped.'), { name: 'AbortError' });
}

/** Largest `data` of a RequestError that is kept (as JSON); larger data is dropped. */
const MAX_REQUEST_ERROR_DATA_CHARS = 16 * 1024;

/** A backend's RequestError as stored: an integer code, scrubbed message, JSON data of bounded size. */
function requestErrorObject(e: RequestError): RequestErrorObject {
  const code = Number.isSafeInteger(e.code) ? e.code : -32603;
  const message = errorText(e.message || 'Request failed');
  let data: unknown;
  try {
    const json = e.data === undefined ? undefined : JSON.stringify(e.data);
    if (json !== undefined && json.length <= MAX_REQUEST_ERROR_DATA_CHARS) data = JSON.parse(json);
  } catch {
    /* not JSON: dropped */
  }
  return { code, message, ...(data !== undefined ? { data } : {}) };
}
