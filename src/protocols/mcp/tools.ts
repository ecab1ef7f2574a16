// The tools the MCP door offers: argument schemas (zod, also published as JSON Schema), task support as each kind
// of client can use it, and the mapping of generation arguments onto a Responses-style runtime request.
import { z } from 'zod';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { SAMPLING_FIELDS, withSampling } from '../../runtime/requestFields';
import type { ResponseRequest } from '../../runtime/task';
import { numericSamplingZod } from '../shared/sampling';
import { jsonSchemaArg } from '../jsonSchemaArg';
import { EMBEDDING_LIMITS } from '../openai/embeddingsRoutes';
import { SEARCH_WORKSPACE_SPEC } from './searchWorkspaceTool';

export type TaskSupport = 'forbidden' | 'optional' | 'required';

/** Input caps: oversized arguments are rejected with -32602 before any task exists. */
export const MAX_PROMPT_CHARS = 200_000;
export const MAX_MESSAGES = 256;
export const MAX_OUTPUT_TOKENS = 8192;

const message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant']),
    content: z.string().max(MAX_PROMPT_CHARS),
  })
  .strict();

function generationArgs(defaultMaxTokens: number) {
  return z
    .object({
      prompt: z.string().min(1).max(MAX_PROMPT_CHARS).optional().describe('The user prompt. Give this or `messages`.'),
      messages: z.array(message).min(1).max(MAX_MESSAGES).optional().describe('A conversation to continue, oldest first. Give this or `prompt`.'),
      instructions: z.string().max(MAX_PROMPT_CHARS).optional().describe('System instructions for the model.'),
      model: z.string().min(1).max(256).optional().describe('Model id from list_models; default model when omitted.'),
      max_output_tokens: z
        .number()
        .int()
        .min(1)
        .max(MAX_OUTPUT_TOKENS)
        .optional()
        .describe(
          `Upper bound on generated tokens; prompt + this must fit the model's context (default ${defaultMaxTokens}, capped to the room the prompt leaves).`,
        ),
      temperature: numericSamplingZod('temperature').optional().describe(SAMPLING_FIELDS.temperature.description),
      output_schema: jsonSchemaArg
        .refine((s) => s['type'] === 'object', { message: 'the root of output_schema must be {"type": "object", …}' })
        .optional()
        .describe(
          'A JSON Schema (root type "object") the answer must follow: the model is constrained to it and the result ' +
            'carries the parsed JSON as structuredContent. A keyword the server cannot enforce is refused (-32602).',
        ),
    })
    .strict()
    .refine((a) => (a.prompt === undefined) !== (a.messages === undefined), {
      message: 'give exactly one of `prompt` or `messages`',
    });
}

export const GENERATE_ARGS = generationArgs(512);
export const GENERATE_LONG_ARGS = generationArgs(2048);
export type GenerationArgs = z.infer<typeof GENERATE_ARGS>;

export const GET_TASK_TEXT_ARGS = z
  .object({
    taskId: z.string().min(1).max(200).describe('Id of a task you started here, through LMSP, or in the editor.'),
    maxChars: z.number().int().min(0).max(1_000_000).optional().describe('Return at most the last N characters.'),
  })
  .strict();

export const LIST_MODELS_ARGS = z.object({}).strict();

export const CANCEL_TASKS_ARGS = z
  .object({
    status: z
      .array(z.enum(['queued', 'running']))
      .min(1)
      .max(2)
      .optional()
      .describe('Which of your tasks: "queued" (default), "running", or both.'),
    model: z.string().min(1).max(256).optional().describe('Only tasks of this model.'),
  })
  .strict();

/** The embeddings route's limits (docs/embeddings.md): the same inputs are refused on both doors. */
const embedText = z.string().min(1).max(EMBEDDING_LIMITS.maxInputChars);

export const EMBED_ARGS = z
  .object({
    model: z.string().min(1).max(256).optional().describe('Model id from list_models; default model when omitted.'),
    input: z
      .union([embedText, z.array(embedText).min(1).max(EMBEDDING_LIMITS.maxInputs)])
      .describe(`A text, or up to ${EMBEDDING_LIMITS.maxInputs} texts, to embed (each 1 to ${EMBEDDING_LIMITS.maxInputChars} characters).`),
  })
  .strict();
export type EmbedArgs = z.infer<typeof EMBED_ARGS>;

export interface ToolSpec {
  name: string;
  /** As a client that declared tasks reads it. */
  description: string;
  /**
   * As a client without tasks reads it (legacy: no `capabilities.tasks` at initialize; modern: no tasks extension
   * on the request), when it differs: such a client never sends a task, so a task-only tool is run to completion
   * inside its tools/call and must not be described as task-only.
   */
  descriptionWithoutTasks?: string;
  /** As published to a client that declared tasks; see `taskSupportFor`. */
  taskSupport: TaskSupport;
  args: z.ZodType;
  readOnly: boolean;
  /** Default max_output_tokens of a generation tool; undefined for the read-only helpers. */
  defaultMaxTokens?: number;
}

export const TOOL_SPECS: readonly ToolSpec[] = [
  {
    name: 'generate',
    description:
      'Generate a response with a local model. Runs as an MCP task when the client asks for one, otherwise waits ' +
      'for the answer. Returns the text and, in structuredContent, the task id, model and token usage — or, with ' +
      'output_schema, the answer parsed as JSON valid against that schema (the task details then in _meta).',
    taskSupport: 'optional',
    args: GENERATE_ARGS,
    readOnly: false,
    defaultMaxTokens: 512,
  },
  {
    name: 'generate_long',
    description:
      'Long-form generation with a local model (larger default output). Always runs as an MCP task: poll ' +
      'tasks/get, then fetch the text with tasks/result. Takes output_schema like generate.',
    descriptionWithoutTasks:
      'Long-form generation with a local model (larger default output; can take minutes). Waits for the answer; ' +
      'with a progressToken, progress notifications count the tokens generated. Cancelling the call stops the ' +
      'generation. Takes output_schema like generate.',
    taskSupport: 'required',
    args: GENERATE_LONG_ARGS,
    readOnly: false,
    defaultMaxTokens: 2048,
  },
  {
    name: 'get_task_text',
    description:
      "Read a task's status and the text generated so far, by id — also for tasks started elsewhere (the LMSP " +
      'endpoint or the editor). Read-only.',
    taskSupport: 'forbidden',
    args: GET_TASK_TEXT_ARGS,
    readOnly: true,
  },
  {
    name: 'list_models',
    description: 'List the local models this server can run, with their load state.',
    taskSupport: 'forbidden',
    args: LIST_MODELS_ARGS,
    readOnly: true,
  },
  {
    name: 'cancel_tasks',
    description:
      'Cancel your queued tasks (or running ones, or both), optionally only those of one model, at once. Returns ' +
      'the tasks it cancelled; calling it again finds none left.',
    taskSupport: 'forbidden',
    args: CANCEL_TASKS_ARGS,
    readOnly: false,
  },
  {
    name: 'embed',
    description:
      'Embed one text or a list of texts with a local model: one L2-normalized vector per text, in order, in ' +
      'structuredContent (model, dimensions, data [{index, embedding}], usage). Answered directly; no task is made.',
    taskSupport: 'forbidden',
    args: EMBED_ARGS,
    readOnly: true,
  },
  SEARCH_WORKSPACE_SPEC,
];

export const TOOLS_BY_NAME = new Map(TOOL_SPECS.map((t) => [t.name, t]));

const schemas = new Map<string, Tool['inputSchema']>();
/** Built from zod once per tool (milliseconds each), shared by both lists. */
function inputSchema(spec: ToolSpec): Tool['inputSchema'] {
  let schema = schemas.get(spec.name);
  if (!schema) {
    const json = z.toJSONSchema(spec.args, { io: 'input' }) as Record<string, unknown>;
    delete json['$schema'];
    schema = json as Tool['inputSchema'];
    schemas.set(spec.name, schema);
  }
  return schema;
}

/**
 * A tool's taskSupport as one client can use it. A client without tasks never sends `params.task`, so to it a
 * task-only tool is `optional`: its tools/call runs the task to completion and answers the result (toolCall.ts).
 * (`required` would make it unusable — the SDK client even refuses to call it.) A client with tasks sees the
 * tool as declared.
 */
export function taskSupportFor(spec: ToolSpec, clientTasks: boolean): TaskSupport {
  return !clientTasks && spec.taskSupport === 'required' ? 'optional' : spec.taskSupport;
}

export function descriptionFor(spec: ToolSpec, clientTasks: boolean): string {
  return clientTasks ? spec.description : (spec.descriptionWithoutTasks ?? spec.description);
}

const listed = new Map<boolean, Tool[]>();
/** tools/list for a client that declared tasks (`clientTasks`) or not; built once each. */
export function listTools(clientTasks: boolean): Tool[] {
  let tools = listed.get(clientTasks);
  if (!tools) {
    tools = TOOL_SPECS.map((spec) => ({
      name: spec.name,
      description: descriptionFor(spec, clientTasks),
      inputSchema: inputSchema(spec),
      execution: { taskSupport: taskSupportFor(spec, clientTasks) },
      annotations: { readOnlyHint: spec.readOnly, openWorldHint: false },
    }));
    listed.set(clientTasks, tools);
  }
  return tools;
}

/** zod issues → one readable line for the -32602 message. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'arguments'}: ${i.message}`).join('; ');
}

/** The `text.format` name an MCP `output_schema` is stored under (a Responses format must be named). */
export const OUTPUT_SCHEMA_NAME = 'output_schema';

/** Where a request field of the runtime's (Responses) vocabulary is in a generation tool's arguments. */
export function argumentOf(param: string): string {
  return param.startsWith('text.format.schema') ? `output_schema${param.slice('text.format.schema'.length)}` : param;
}

export function toResponseRequest(args: GenerationArgs, defaultMaxTokens: number): ResponseRequest {
  const request: ResponseRequest = {
    input: args.prompt ?? (args.messages ?? []).map((m) => ({ type: 'message', role: m.role, content: m.content })),
    max_output_tokens: args.max_output_tokens ?? defaultMaxTokens,
  };
  // The caller's max_output_tokens must fit with the prompt (else context_length_exceeded, -32602); the default is
  // "up to", capped to the room the prompt leaves on a small-context model.
  if (args.max_output_tokens === undefined) request.task_runtime = { cap_max_output_tokens: true };
  if (args.model !== undefined) request.model = args.model;
  if (args.instructions !== undefined) request.instructions = args.instructions;
  if (args.output_schema !== undefined) {
    request.text = { format: { type: 'json_schema', name: OUTPUT_SCHEMA_NAME, schema: args.output_schema, strict: true } };
  }
  return withSampling(request, { temperature: args.temperature });
}
