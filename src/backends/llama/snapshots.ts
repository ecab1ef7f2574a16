// Resume snapshots: a sequence's llama.cpp state saved to a file while it generates, and loaded back into a fresh
// sequence after a restart. Invariants:
// - A snapshot is saved only at a consistent point: every earlier token evaluated into the sequence, the next one not
//   (the caller's loop position), and only while the text stream has no partial character pending.
// - Files are replaced atomically (temp file + rename): a crash leaves the previous snapshot or the new one.
// - A state file is loaded only into the model file it was taken with: its name starts with that file's content
//   fingerprint, since a state from another model may crash llama.cpp.
// - A snapshot that cannot be used is never an error: the sequence is cleared and the caller evaluates prompt +
//   delivered text again (that text is durable in the event log).
// When to save (every `everyMs`, once re-evaluating would cost more than `minReevalMs`) is measured in docs/runtime.md.

import { createHash, randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { LlamaContextSequence, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { GenerateOptions, GenerationSnapshot } from '../../runtime/backend';
import { errorText } from '../../runtime/problems';

/** Identifies a model file's content (size + a hash of its first 64 KiB): a file replaced in place is another model. */
export function modelFingerprint(filePath: string): string {
  const hash = createHash('sha256');
  const fd = fs.openSync(filePath, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    fs.readSync(fd, head, 0, head.length, 0);
    hash.update(String(size)).update(head);
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest('hex').slice(0, 16);
}

type SnapshotOptions = NonNullable<GenerateOptions['snapshots']>;

/** One generation's snapshots: one state file, overwritten at each save. */
export class SnapshotWriter {
  readonly statePath: string;
  private last = Date.now();

  /** `covered`: context tokens a state already covers (a restored snapshot's), 0 for a fresh sequence. */
  constructor(
    private readonly options: SnapshotOptions,
    fingerprint: string,
    private covered: number,
  ) {
    this.statePath = path.join(options.dir, `${fingerprint}-${randomUUID()}.llstate`);
  }

  /**
   * Whether to save now, with `nextTokenIndex` tokens in the sequence, given that evaluating runs at `reevalRate`
   * tokens/s: `everyMs` since the last save, and re-evaluating what no save covers would take `minReevalMs` or more.
   */
  due(nextTokenIndex: number, reevalRate: number): boolean {
    return Date.now() - this.last >= this.options.everyMs && ((nextTokenIndex - this.covered) / reevalRate) * 1000 >= this.options.minReevalMs;
  }

  /** Saves the state and reports it with what it covers: everything emitted so far. */
  async save(sequence: LlamaContextSequence, emitted: { text: string; outputTokens: number }): Promise<void> {
    const tmp = `${this.statePath}.${process.pid}.tmp`;
    await sequence.saveStateToFile(tmp);
    await fs.promises.rename(tmp, this.statePath);
    this.last = Date.now();
    this.covered = sequence.nextTokenIndex;
    this.options.onSnapshot({ statePath: this.statePath, text: emitted.text, outputTokens: emitted.outputTokens });
  }
}

export interface RestoredSnapshot {
  /** The state's last token, erased from the sequence: evaluate it again to get logits to sample from. */
  lastToken: Token;
  /** Context tokens the state held, that last token included. */
  contextTokens: number;
}

/**
 * Loads `snapshot` into an empty `sequence` of the model whose fingerprint is `fingerprint`. Undefined (sequence
 * cleared, reason logged) when it cannot be used.
 */
export async function restoreSnapshot(
  sequence: LlamaContextSequence,
  fingerprint: string,
  snapshot: GenerationSnapshot,
  log: (msg: string) => void,
): Promise<RestoredSnapshot | undefined> {
  try {
    if (!path.basename(snapshot.statePath).startsWith(fingerprint + '-')) {
      throw new Error('snapshot was taken with a different model file');
    }
    if (!fs.existsSync(snapshot.statePath)) throw new Error('snapshot state file is missing');
    await sequence.loadStateFromFile(snapshot.statePath, { acceptRisk: true });
    const tokens = sequence.contextTokens;
    if (tokens.length === 0 || tokens.length <= snapshot.outputTokens) {
      throw new Error('snapshot state does not match its token count');
    }
    // Logits are not part of the saved state: drop the last token and evaluate it again to sample the next one.
    const lastToken = tokens[tokens.length - 1]!;
    await sequence.eraseContextTokenRanges([{ start: tokens.length - 1, end: tokens.length }]);
    return { lastToken, contextTokens: tokens.length };
  } catch (err) {
    log(`resume: snapshot not used (${errorText(err, Number.POSITIVE_INFINITY)}); evaluating prompt + delivered text again`);
    await sequence.clearHistory();
    return undefined;
  }
}
