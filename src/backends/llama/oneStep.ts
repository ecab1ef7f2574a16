// One native step per generated token (issue 42 item 2). node-llama-cpp 3.21.1 pays two thread-pool round trips per
// token: its batch dispatcher awaits `_ctx.decodeBatch()` (llama_decode on a libuv worker), and only then calls each
// sequence's logit mapper, which applies the sampler's config and awaits `_ctx.sampleToken()` (another worker hop).
// A native build with native/decode-and-sample.patch has `_ctx.decodeBatchAndSample(entries)`, which decodes and
// samples every entry in one worker job. This module puts node-llama-cpp's two calls together on our side, without
// touching its JS: where the loaded addon has the method, a batch's decodeBatch() is deferred (it resolves at once,
// so the dispatcher runs the mappers: they set their samplers' configs and call sampleToken, which is collected),
// and one decodeBatchAndSample call then decodes and samples them; each sampleToken promise resolves from its result.
//
// When the combined call is made: as soon as every output of the batch asked for a sample (the count comes from
// addToBatch), else two microtasks after decodeBatch() — the dispatcher calls the mappers synchronously one microtask
// after decodeBatch() resolves (withLock runs an unlocked callback at once), so by then every sampling that comes in
// that pass has; what comes later (speculative validation samples a sequence's further outputs one after another,
// each after the previous resolves; a `_noSampling` evaluation samples none) goes to the plain sampleToken after the
// decode, exactly as upstream. The batch's after-batch actions (checkpoints) wait for the decode, so nothing reads the
// context before it ran; a failed decode rejects the batch's generations as node-llama-cpp's own failed decodeBatch
// does (its `_dispatchErrorForQueuedDecodesAndDequeue`), and their collected samplings resolve as "no token".
//
// The sampling-race guard (samplingGuard.ts) is not needed where the samples run in the combined call: one thread
// samples them in order after the decode, and the first read reorders the outputs once. Samples that come after a
// batch with no combined sampling get its first-alone rule here. Seams: nativeSeams.ts (`oneStepSeamsOf`).
import type { LlamaContext } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { oneStepSeamsOf, type QueuedDecode } from './nativeSeams';
import { FirstReadAlone } from './samplingGuard';

const oneStepContexts = new WeakSet<LlamaContext>();

/** Whether `context` decodes and samples in one native step (decodeAndSampleInOneStep took it). */
export function usesOneStep(context: LlamaContext): boolean {
  return oneStepContexts.has(context);
}

interface Collected {
  args: unknown[];
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** A batch between initBatch and its decode's end. */
interface Batch {
  /** Outputs (logits) the batch holds: the most samplings it can get. */
  outputs: number;
  /** node-llama-cpp's queued decodes that put tokens in it. */
  decodes: Set<QueuedDecode>;
  collected: Collected[];
  /** Set once its decode was sent to the addon. */
  sent: boolean;
  /** Resolves when its decode ended: true when it succeeded. */
  decoded: Promise<boolean>;
  settle: (ok: boolean) => void;
}

/**
 * Sends each of `context`'s decodes and the samplings that follow it to the addon as one call, where the loaded
 * addon has `decodeBatchAndSample`; false (nothing changed) on the prebuilt binary or when a seam is missing.
 */
export function decodeAndSampleInOneStep(context: LlamaContext): boolean {
  const seams = oneStepSeamsOf(context);
  if (!seams) return false;
  oneStepContexts.add(context);
  const { native, queuedDecodes, failDecodes } = seams;
  const initBatch = native.initBatch;
  const addToBatch = native.addToBatch;
  const decodeBatch = native.decodeBatch;
  const sampleToken = native.sampleToken;
  const decodeBatchAndSample = native.decodeBatchAndSample;

  /** The batch being filled (initBatch … decodeBatch). */
  let filling: Batch | undefined;
  /** The batch whose decode was deferred and whose samplings are being collected. */
  let collecting: Batch | undefined;
  /** The latest sent batch's end (later samplings wait for it). */
  let lastDecode: Promise<boolean> = Promise.resolve(true);
  /** A plain decode's outputs are not read yet: its first sampling then runs alone (samplingGuard.ts says why). */
  const firstRead = new FirstReadAlone();

  /** A native call as a promise: a synchronous throw (bad arguments) becomes its rejection. */
  const call = <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return fn();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  };

  const newBatch = (): Batch => {
    let settle!: (ok: boolean) => void;
    const decoded = new Promise<boolean>((resolve) => (settle = resolve));
    return { outputs: 0, decodes: new Set(), collected: [], sent: false, decoded, settle };
  };

  const send = (batch: Batch) => {
    if (batch.sent) return;
    batch.sent = true;
    if (collecting === batch) collecting = undefined;
    lastDecode = batch.decoded;
    const entries = batch.collected;
    if (entries.length === 0) {
      firstRead.decoded();
      call(() => decodeBatch.call(native)).then(
        () => batch.settle(true),
        (err: unknown) => {
          failDecodes(batch.decodes, err);
          batch.settle(false);
        },
      );
      return;
    }
    firstRead.read();
    call(() =>
      decodeBatchAndSample.call(
        native,
        entries.map((e) => e.args),
      ),
    ).then(
      (results) => {
        entries.forEach((entry, i) => {
          const result = results[i];
          if (result instanceof Error) entry.reject(result);
          else entry.resolve(result);
        });
        batch.settle(true);
      },
      (err: unknown) => {
        // The decode failed: its generations are rejected with the error, as upstream; the mappers that wait on
        // these samplings get "no token" (sampleToken's -1), which nothing reads once the generation is rejected.
        failDecodes(batch.decodes, err);
        for (const entry of entries) entry.resolve(entry.args.length > 2 ? [-1] : -1);
        batch.settle(false);
      },
    );
  };

  // The addon's methods are read-only on its prototype: own properties shadow them (as samplingGuard.ts does).
  const define = (name: string, fn: (...args: never[]) => unknown) =>
    Object.defineProperty(native, name, { value: fn, configurable: true, writable: true });

  define('initBatch', (size: number) => {
    if (collecting && !collecting.sent) throw new Error('one-step decode: a new batch began before the previous one was decoded');
    filling = newBatch();
    return initBatch.call(native, size);
  });

  define('addToBatch', (sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array) => {
    const indexes = addToBatch.call(native, sequenceId, firstTokenIndex, tokens, logitIndexes);
    if (filling) {
      filling.outputs += indexes.length;
      const decode = queuedDecodes().find((d) => d.sequenceId === sequenceId);
      if (decode) filling.decodes.add(decode);
    }
    return indexes;
  });

  define('decodeBatch', () => {
    const batch = filling ?? newBatch();
    filling = undefined;
    if (batch.outputs === 0) {
      // Nothing to sample (a prompt chunk without logits): the plain decode, its failure node-llama-cpp's to handle.
      firstRead.decoded();
      const decoded = decodeBatch.call(native);
      lastDecode = decoded.then(
        () => true,
        () => false,
      );
      return decoded;
    }
    collecting = batch;
    // The batch's after-batch actions (interval checkpoints) run only after its decode, once per batch.
    for (const decode of batch.decodes) {
      const original = decode.afterBatchAction;
      decode.afterBatchAction = async (length: number) => {
        decode.afterBatchAction = original;
        if ((await batch.decoded) && original) await original(length);
      };
    }
    queueMicrotask(() => queueMicrotask(() => send(batch)));
    return Promise.resolve();
  });

  define('sampleToken', (...args: unknown[]) => {
    const batch = collecting;
    if (batch && !batch.sent) {
      return new Promise((resolve, reject) => {
        batch.collected.push({ args, resolve, reject });
        if (batch.collected.length >= batch.outputs) send(batch);
      });
    }
    // After the combined call: the decode has ended (or ends first) and its outputs were read in order.
    return lastDecode.then(() => firstRead.sample(() => sampleToken.apply(native, args)));
  });
  return true;
}
