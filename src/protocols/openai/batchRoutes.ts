// OpenAI's Files and Batch APIs below the LMSP base URL (an OpenAI client's baseURL is /lmsp/v1, or /v1): upload a
// JSONL file of requests, run it as a batch job, poll it, cancel it, read its output and error files (docs/batches.md).
// The runtime stores and runs everything (runtime/batches); this file checks the wire and writes OpenAI's objects.
// Errors are the listener's problem+json with OpenAI's `{error: {message, type, param, code}}` member, so the
// unmodified `openai` SDK raises its typed errors; a refusal over a limit names it (`limit.name`).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { BatchRecord, FileRecord } from '../../runtime/batches/types';
import { BATCH_LIMIT_NAMES, BATCH_LIMITS } from '../../runtime/batches/types';
import { readJsonBody, readRawBody } from '../http/body';
import { HttpProblem } from '../http/problem';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from '../lmsp/deps';
import { lmspProblem, translate } from '../lmsp/problems';
import { parseBody } from '../lmsp/schemas';
import { sendJson } from '../lmsp/wire';
import { Readable } from 'node:stream';

const seconds = (ms: number | undefined) => (ms === undefined ? null : Math.floor(ms / 1000));

export function fileObject(f: FileRecord): Record<string, unknown> {
  return {
    id: f.id,
    object: 'file',
    bytes: f.bytes,
    created_at: seconds(f.createdAt),
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
    expires_at: null,
    status_details: null,
  };
}

export function batchObject(b: BatchRecord): Record<string, unknown> {
  const m = b.moments;
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    errors: b.errors ? { object: 'list', data: b.errors } : null,
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: seconds(b.createdAt),
    in_progress_at: seconds(m.in_progress_at),
    expires_at: seconds(b.expiresAt),
    finalizing_at: seconds(m.finalizing_at),
    completed_at: seconds(m.completed_at),
    failed_at: seconds(m.failed_at),
    expired_at: seconds(m.expired_at),
    cancelling_at: seconds(m.cancelling_at),
    cancelled_at: seconds(m.cancelled_at),
    request_counts: b.counts,
    usage: {
      input_tokens: b.usage.inputTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: b.usage.outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: b.usage.inputTokens + b.usage.outputTokens,
    },
    metadata: b.metadata,
  };
}

function notFound(what: 'file' | 'batch', id: string): HttpProblem {
  return lmspProblem('not_found', `No ${what} with id "${id.slice(0, 80)}".`, { param: what === 'file' ? 'file_id' : 'batch_id' });
}

/** `limit`, `after`, `order` of a list, each checked (400 naming it). */
function listQuery(ctx: RequestContext, maxLimit: number, defaultLimit: number): { limit: number; after?: string; order: 'asc' | 'desc' } {
  const q = ctx.url.searchParams;
  const rawLimit = q.get('limit');
  const limit = rawLimit === null ? defaultLimit : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) {
    throw lmspProblem('invalid_request', `Invalid value for "limit": an integer from 1 to ${maxLimit}.`, { param: 'limit' });
  }
  const order = q.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw lmspProblem('invalid_request', 'Invalid value for "order": "asc" or "desc".', { param: 'order' });
  const after = q.get('after') ?? undefined;
  if (after !== undefined && (after.length === 0 || after.length > 200)) {
    throw lmspProblem('invalid_request', 'Invalid value for "after": an id from an earlier page.', { param: 'after' });
  }
  return { limit, after, order };
}

function listObject<T extends { id: string }>(data: T[], hasMore: boolean): Record<string, unknown> {
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: hasMore };
}

// ---------------- files ----------------

/** Multipart overhead allowed beside the file itself (boundaries, the purpose field, headers). */
const MULTIPART_SLACK_BYTES = 64 * 1024;

export async function createFile(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type)) {
    throw new HttpProblem(415, 'unsupported_media_type', 'Upload a file as multipart/form-data with the fields "file" and "purpose".');
  }
  const raw = await readRawBody(req, BATCH_LIMITS.maxFileBytes + MULTIPART_SLACK_BYTES).catch((e: unknown) => {
    if (e instanceof HttpProblem && e.status === 413) {
      throw lmspProblem('payload_too_large', `The file exceeds ${BATCH_LIMITS.maxFileBytes} bytes (limit ${BATCH_LIMIT_NAMES.fileBytes}).`, {
        param: 'file',
        members: { limit: { name: BATCH_LIMIT_NAMES.fileBytes, max: BATCH_LIMITS.maxFileBytes, unit: 'bytes' } },
      });
    }
    throw e;
  });
  let form: FormData;
  try {
    form = await new Response(raw, { headers: { 'content-type': type } }).formData();
  } catch {
    throw lmspProblem('invalid_request', 'The request body is not valid multipart/form-data.');
  }
  const purpose = form.get('purpose');
  if (typeof purpose !== 'string') throw lmspProblem('invalid_request', 'Missing required parameter: "purpose".', { param: 'purpose' });
  if (purpose !== 'batch') {
    throw lmspProblem('invalid_request', `Invalid value for "purpose": "${purpose.slice(0, 40)}"; only "batch" is supported here.`, {
      param: 'purpose',
    });
  }
  const file = form.get('file');
  if (file === null || typeof file === 'string')
    throw lmspProblem('invalid_request', 'Missing required parameter: "file" (a file part).', { param: 'file' });
  const bytes = Buffer.from(await file.arrayBuffer());
  const filename = file.name || 'upload.jsonl';
  const record = translate(() => deps.runtime.files.create(ctx.principal, 'batch', filename, bytes));
  sendJson(res, 200, fileObject(record));
}

export function listFiles(deps: LmspDeps, res: ServerResponse, ctx: RequestContext): void {
  const { limit, after, order } = listQuery(ctx, 10_000, 10_000);
  const purpose = ctx.url.searchParams.get('purpose') ?? undefined;
  if (purpose !== undefined && purpose !== 'batch' && purpose !== 'batch_output') {
    throw lmspProblem('invalid_request', 'Invalid value for "purpose": "batch" or "batch_output".', { param: 'purpose' });
  }
  const page = translate(() => deps.runtime.files.list({ principal: ctx.principal, purpose, after, limit, order }));
  sendJson(res, 200, listObject(page.files.map(fileObject) as Array<{ id: string }>, page.hasMore));
}

export function getFile(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const f = deps.runtime.files.get(id, ctx.principal);
  if (!f) throw notFound('file', id);
  sendJson(res, 200, fileObject(f));
}

export function deleteFile(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const f = translate(() => deps.runtime.files.delete(id, ctx.principal));
  sendJson(res, 200, { id: f.id, object: 'file', deleted: true });
}

export function fileContent(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const bytes = translate(() => deps.runtime.files.content(id, ctx.principal));
  res.statusCode = 200;
  res.setHeader('Content-Type', 'application/octet-stream');
  res.setHeader('Content-Length', bytes.length);
  res.setHeader('Cache-Control', 'no-store');
  // In slices with backpressure (a file may be 100 MiB): a reader that stops reading holds a slice, not a copy.
  function* slices() {
    for (let at = 0; at < bytes.length; at += CONTENT_SLICE_BYTES) yield bytes.subarray(at, at + CONTENT_SLICE_BYTES);
  }
  Readable.from(slices()).pipe(res);
}

const CONTENT_SLICE_BYTES = 256 * 1024;

// ---------------- batches ----------------

const metadataSchema = z
  .record(z.string().min(1).max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, { message: 'at most 16 keys' });

export const createBatchSchema = z.strictObject({
  input_file_id: z.string().min(1).max(200),
  endpoint: z.string().min(1).max(200),
  completion_window: z.string().min(1).max(20),
  metadata: metadataSchema.nullable().optional(),
  output_expires_after: z.strictObject({ anchor: z.literal('created_at'), seconds: z.number().int().min(3600).max(2_592_000) }).optional(),
});

export async function createBatch(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = parseBody(createBatchSchema, await readJsonBody(req, deps.maxBodyBytes));
  if (body.output_expires_after !== undefined) {
    // Refused rather than ignored: output files here are kept until their owner deletes them.
    throw lmspProblem('unsupported_capability', '"output_expires_after" is not supported: output files are kept until deleted.', {
      param: 'output_expires_after',
    });
  }
  const batch = translate(() =>
    deps.runtime.batches.create({
      principal: ctx.principal,
      inputFileId: body.input_file_id,
      endpoint: body.endpoint,
      completionWindow: body.completion_window,
      metadata: body.metadata ?? null,
    }),
  );
  sendJson(res, 200, batchObject(batch));
}

export function listBatches(deps: LmspDeps, res: ServerResponse, ctx: RequestContext): void {
  const { limit, after } = listQuery(ctx, 100, 20);
  const page = translate(() => deps.runtime.batches.list({ principal: ctx.principal, after, limit }));
  sendJson(res, 200, listObject(page.batches.map(batchObject) as Array<{ id: string }>, page.hasMore));
}

export function getBatch(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const b = deps.runtime.batches.get(id, ctx.principal);
  if (!b) throw notFound('batch', id);
  sendJson(res, 200, batchObject(b));
}

export function cancelBatch(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  sendJson(res, 200, batchObject(translate(() => deps.runtime.batches.cancel(id, ctx.principal))));
}
