// Formats runtime records in LMSP's wire vocabulary (ch.7 task object, Responses objects, models, discovery).
import type { RuntimeLimits } from '../../runtime/api';
import { describeHardware, type ModelHardware, type ModelInfo } from '../../runtime/backend';
import { inputText, responseObject } from '../../runtime/responses';
import { queueObject, type QueueInfo } from '../../runtime/queue';
import type { Problem, TaskRecord, TaskStatus } from '../../runtime/task';
import { LMSP_PREFIX, LMSP_PROTOCOL, LMSP_VERSION, OBJECTS, PATHS, TASK_PATHS, TASK_TYPE_RESPONSE, type LmspTaskStatus } from './lmspConstants';

const seconds = (ms: number) => Math.floor(ms / 1000);

export function lmspStatus(status: TaskStatus): LmspTaskStatus {
  return status === 'input_required' ? 'running' : status;
}

/** Runtime statuses a LMSP status filter covers. */
export function runtimeStatuses(statuses: readonly LmspTaskStatus[]): TaskStatus[] {
  return statuses.flatMap((s): TaskStatus[] => (s === 'running' ? ['running', 'input_required'] : [s]));
}

export function eventsUrl(taskId: string): string {
  return `${LMSP_PREFIX}${PATHS.tasks}/${taskId}${TASK_PATHS.events}`;
}

/**
 * A Responses object as it goes on the wire. `output_text` is a convenience the OpenAI SDK computes itself and
 * only when the field is absent, so a server-sent one (even empty) would hide the text from its stream helper.
 */
export function wireResponse(response: Record<string, unknown>): Record<string, unknown>;
export function wireResponse(response: Record<string, unknown> | null): Record<string, unknown> | null;
export function wireResponse(response: Record<string, unknown> | null): Record<string, unknown> | null {
  if (!response || !('output_text' in response)) return response;
  const { output_text: _sdkComputes, ...rest } = response;
  return rest;
}

/**
 * The task object exactly as ch.7 §7.1 lists it (`response` only when succeeded, `error` only when failed), plus a
 * vendor member `task_runtime` that Responses clients ignore and the editor's other windows read. The prompt is
 * included only on request (single-task reads), so lists and change feeds stay small.
 */
export function toTaskObject(task: TaskRecord, options: { withPrompt?: boolean; queue?: QueueInfo | null } = {}): Record<string, unknown> {
  const status = lmspStatus(task.status);
  return {
    id: task.id,
    object: OBJECTS.task,
    type: TASK_TYPE_RESPONSE,
    status,
    created_at: seconds(task.createdAt),
    updated_at: seconds(task.updatedAt),
    response_id: task.responseId,
    events_url: eventsUrl(task.id),
    on_restart: task.onRestart,
    response: status === 'succeeded' ? wireResponse(task.response) : null,
    error: status === 'failed' ? lmspProblem(task.error) : null,
    task_runtime: {
      status: task.status,
      origin: task.origin,
      title: task.title,
      model: task.model,
      status_message: task.statusMessage,
      output_tokens: task.outputTokens,
      attempt: task.attempt,
      priority: task.priority,
      // A queued task's place: position in the order tasks will start, expected start (runtime/queue.ts).
      ...(options.queue ? { queue: queueObject(options.queue) } : {}),
      // Which route made it (lmsp_route: responses, chat_completions, tasks, anthropic_messages); absent for other doors.
      ...(typeof task.meta.lmsp_route === 'string' ? { route: task.meta.lmsp_route } : {}),
      created_at_ms: task.createdAt,
      updated_at_ms: task.updatedAt,
      ...(options.withPrompt ? { prompt: inputText(task.request, { roles: ['user'], separator: '\n\n' }) } : {}),
    },
  };
}

/** A Responses object with a queued task's place in its vendor member (`task_runtime.queue`), as GET /responses/{id} answers. */
export function withQueue(response: Record<string, unknown>, queue: QueueInfo | null): Record<string, unknown> {
  if (!queue) return response;
  const vendor = (response.task_runtime as Record<string, unknown> | undefined) ?? {};
  return { ...response, task_runtime: { ...vendor, queue: queueObject(queue) } };
}

/**
 * task.error in LMSP's own form: the problem object. A protocol-level error a backend ended the request with
 * (`request_error`) is told by its code and detail; the JSON-RPC error object kept beside it is the MCP door's.
 */
function lmspProblem(problem: Problem | null): Problem | null {
  if (!problem?.requestError) return problem;
  const { requestError: _mcpOnly, ...rest } = problem;
  return rest;
}

/**
 * The stored Responses object, or a snapshot of one still being produced: every field a finished one has (a
 * background response is polled as `queued`, then `in_progress`, with `background`, `store` and
 * `previous_response_id` echoed), the output not yet (it is on the event stream while it runs).
 */
export function toResponseObject(task: TaskRecord): Record<string, unknown> {
  if (task.response) return wireResponse(task.response);
  return wireResponse(responseObject(task, { status: task.status === 'queued' ? 'queued' : 'in_progress' }));
}

/**
 * `created` of every model object (OpenAI's list shape has it; a local file or an engine's model has no creation
 * time we know): when this server process started, as vLLM's and llama.cpp's servers give their own start or request time.
 */
const MODELS_CREATED = seconds(Date.now());

export function toModelObject(model: ModelInfo): Record<string, unknown> {
  return {
    id: model.id,
    object: OBJECTS.model,
    created: MODELS_CREATED,
    state: model.state,
    max_context_length: model.maxContextLength,
    // What its generation supports, as the backend knows it (docs/lmsp.md, "Model capabilities"); unknown: false.
    capabilities: { tools: model.capabilities?.tools ?? false, vision: false, reasoning: model.capabilities?.reasoning ?? false },
    owned_by: model.engine ?? 'local',
    demo: model.demo,
    // Vendor member: the context a task runs with (prompt + output must fit it; null until known), the length of its
    // embedding vectors (null until known: a local file's header, docs/embeddings.md) and what the loaded model runs
    // on (absent before the first load).
    task_runtime: {
      context_length: model.contextLength ?? null,
      concurrency: model.concurrency ?? null,
      embedding_dimensions: model.embeddingDimensions ?? null,
      ...(model.hardware ? { hardware: hardwareObject(model.hardware) } : {}),
    },
  };
}

function hardwareObject(h: ModelHardware): Record<string, unknown> {
  return {
    compute: h.compute,
    devices: h.devices,
    gpu_layers: h.gpuLayers,
    total_layers: h.totalLayers,
    vram_bytes: h.vram ? { total: h.vram.total, used: h.vram.used } : null,
    threads: h.threads,
    threads_from: h.threadsFrom,
    threads_cap: h.threadsCap ?? null,
    prompt_threads: h.promptThreads ?? h.threads,
    thread_tokens_per_second: h.threadTokensPerSecond ?? null,
    fallback_reason: h.fallbackReason ?? null,
    warmup_ms: h.warmupMs !== undefined ? Math.round(h.warmupMs) : null,
    sequences: h.sequences ?? null,
    build: h.build ? { kind: h.build.kind, key: h.build.key ?? null, reason: h.build.reason ?? null } : null,
    summary: describeHardware(h),
  };
}

export function capabilitiesDocument(limits: RuntimeLimits, supportsResume: boolean, maxBodyBytes: number): Record<string, unknown> {
  return {
    object: OBJECTS.service,
    protocol: LMSP_PROTOCOL,
    version: LMSP_VERSION,
    capabilities: {
      responses: true,
      streaming: true,
      tasks: true,
      event_resume: true,
      idempotency: true,
      on_restart: limits.onRestart.filter((p) => p !== 'resume' || supportsResume),
      model_management: false,
      task_list: true,
      task_delete: true,
    },
    limits: {
      event_history_seconds: limits.eventHistorySeconds,
      task_retention_seconds: limits.taskRetentionSeconds,
      idempotency_key_ttl_seconds: limits.idempotencyKeyTtlSeconds,
      max_concurrent_tasks: limits.maxConcurrentTasks,
      max_queued_tasks: limits.maxQueuedTasks,
      max_body_bytes: maxBodyBytes,
    },
  };
}
