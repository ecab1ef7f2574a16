// The Batch API's records (issue 41 item 2; docs/batches.md): uploaded files, batch jobs, and what an endpoint of a
// batch must do with one request line. The runtime owns the records and runs the jobs (batchJobs.ts); what a line
// means (OpenAI's /v1/responses, /v1/chat/completions, /v1/embeddings bodies) and how its answer is written is the
// OpenAI door's (protocols/openai/batchEndpoints.ts), injected as `BatchEndpoints`, as the webhook sender is.
import type { EmbedInput } from '../backend';
import type { EmbedOutcome } from '../embeddings';
import type { ResponseRequest, TaskRecord } from '../task';

export const FILE_PURPOSES = ['batch', 'batch_output'] as const;
export type FilePurpose = (typeof FILE_PURPOSES)[number];

export interface FileRecord {
  id: string;
  principal: string;
  purpose: FilePurpose;
  filename: string;
  bytes: number;
  createdAt: number;
}

export const BATCH_STATUSES = ['validating', 'in_progress', 'finalizing', 'completed', 'failed', 'expired', 'cancelling', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];

/** Statuses a batch never leaves. */
export const FINAL_BATCH_STATUSES: ReadonlySet<BatchStatus> = new Set(['completed', 'failed', 'expired', 'cancelled']);

/** The moments OpenAI's batch object reports, as ms since the epoch (the door writes seconds). */
export type BatchMoment = 'in_progress_at' | 'finalizing_at' | 'completed_at' | 'failed_at' | 'expired_at' | 'cancelling_at' | 'cancelled_at';

/** A refusal of the whole batch (OpenAI's `errors.data[]`): only when nothing of it can run. */
export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface BatchCounts {
  total: number;
  completed: number;
  failed: number;
}

export interface BatchRecord {
  id: string;
  principal: string;
  /** The endpoint every line targets, as OpenAI names it (`/v1/responses`). */
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  status: BatchStatus;
  createdAt: number;
  expiresAt: number;
  moments: Partial<Record<BatchMoment, number>>;
  outputFileId: string | null;
  errorFileId: string | null;
  errors: BatchError[] | null;
  metadata: Record<string, string> | null;
  counts: BatchCounts;
  /** Tokens of the finished items, summed (OpenAI's batch `usage`). */
  usage: { inputTokens: number; outputTokens: number };
}

/** One request line's answer as the output or error file writes it: `response.status_code` and `response.body`. */
export interface BatchAnswer {
  statusCode: number;
  body: unknown;
  usage?: { inputTokens: number; outputTokens: number };
}

/** What one line asks for, once its body was checked. */
export type BatchWork =
  | { kind: 'task'; input: ResponseRequest }
  | { kind: 'embed'; model: string | undefined; inputs: EmbedInput[]; answer(outcome: EmbedOutcome): BatchAnswer };

/** One endpoint a batch may target. Every method is synchronous and throws nothing it was not asked to. */
export interface BatchEndpoint {
  /** Checks a line's `body`; throws (a problem of the door, a RuntimeError) when it is not a valid request. */
  prepare(body: unknown): BatchWork;
  /** The answer of a line run as a task, from the task as it ended. */
  taskAnswer(task: TaskRecord): BatchAnswer;
  /** The answer of a line that could not run: what `prepare`, the create or the embedding call threw. */
  errorAnswer(e: unknown): BatchAnswer;
}

/** The endpoints batches may target, by OpenAI's path (`/v1/chat/completions`). */
export type BatchEndpoints = Readonly<Record<string, BatchEndpoint>>;

/**
 * Limits of the Batch API, each named in the refusal it causes (`limit.name`). OpenAI's: 200 MB a file, 50 000
 * requests a batch. Ours are smaller where the store holds the work: every line is a row while its batch lives.
 */
export const BATCH_LIMITS = {
  /** One uploaded file. */
  maxFileBytes: 100 * 1024 * 1024,
  /** Every file of a principal together (uploads and the outputs its batches wrote). */
  maxFileBytesPerPrincipal: 512 * 1024 * 1024,
  /** Lines of one batch's input file. */
  maxLines: 50_000,
  /** One line of an input file. */
  maxLineBytes: 4 * 1024 * 1024,
  /** `custom_id` length. */
  maxCustomIdChars: 512,
  /** Batches of one principal not yet finished. */
  maxOpenBatchesPerPrincipal: 16,
  /** Files of one principal. */
  maxFilesPerPrincipal: 1000,
} as const;

export const BATCH_LIMIT_NAMES = {
  fileBytes: 'max_file_bytes',
  fileBytesPerPrincipal: 'max_file_bytes_per_principal',
  lines: 'max_batch_lines',
  lineBytes: 'max_batch_line_bytes',
  openBatches: 'max_open_batches_per_principal',
  files: 'max_files_per_principal',
} as const;

/** The only completion window (OpenAI's): a batch not finished 24 h after its creation expires. */
export const COMPLETION_WINDOWS: Readonly<Record<string, number>> = { '24h': 24 * 3_600_000 };
