// The tools of a Responses request as the model sees them, and the way back (Codex CLI's dialect, docs/codex.md).
// A stored request keeps its tools as the client sent them; this is computed from them wherever it is needed (the
// GenerateRequest, the history's calls, the door's output items), so a restart or a resume sees the same names.
//   function   offered as it is.
//   custom     (freeform) offered as a function with one string parameter `input`; the call's `input` is that string.
//   namespace  its members offered as `<namespace>__<name>`, each description prefixed with the namespace's.
//   any other  (OpenAI's hosted tools: web_search, file_search, mcp, …) left out of what the model sees; the
//              response names them in `task_runtime.ignored_tools`.
import type { ToolDefinition } from './backend';
import type { ResponseCustomTool, ResponseFunctionTool, ResponseNamespaceTool, ResponseTool } from './task';

/** Between a namespace and a member's name in the name the model sees. */
export const NAMESPACE_SEPARATOR = '__';

/** Tool types the model is offered; any other type is a hosted tool this runtime cannot run. */
export const MODEL_TOOL_TYPES: ReadonlySet<string> = new Set(['function', 'custom', 'namespace']);

/** What a name the model sees stands for. */
export interface ToolTarget {
  kind: 'function' | 'custom';
  /** The name inside its namespace (the whole name when there is none). */
  name: string;
  namespace?: string;
}

/** The parameters a custom tool is offered with: its raw input as one string. */
export const CUSTOM_TOOL_PARAMETERS = {
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw input of the tool.' } },
  required: ['input'],
  additionalProperties: false,
} as const;

export function flatToolName(name: string, namespace?: string): string {
  return namespace ? `${namespace}${NAMESPACE_SEPARATOR}${name}` : name;
}

export function isModelTool(t: ResponseTool): t is ResponseFunctionTool | ResponseCustomTool | ResponseNamespaceTool {
  return MODEL_TOOL_TYPES.has(t.type);
}

/** The tools the model sees, in order, each with what it stands for (flattened names; duplicates are the door's 400). */
export function modelToolsOf(tools: readonly ResponseTool[] | undefined): Array<{ definition: ToolDefinition; target: ToolTarget }> {
  const out: Array<{ definition: ToolDefinition; target: ToolTarget }> = [];
  const add = (t: ResponseFunctionTool | ResponseCustomTool, ns?: ResponseNamespaceTool) => {
    const prefix = ns?.description ? `${ns.description}\n\n` : '';
    const description = ns ? `${prefix}${t.description ?? ''}`.trim() : t.description;
    const name = flatToolName(t.name, ns?.name);
    const target: ToolTarget = { kind: t.type === 'custom' ? 'custom' : 'function', name: t.name, ...(ns ? { namespace: ns.name } : {}) };
    const definition: ToolDefinition =
      t.type === 'custom'
        ? { name, description: customDescription(description, t.format), parameters: { ...CUSTOM_TOOL_PARAMETERS } }
        : {
            name,
            ...(description ? { description } : {}),
            ...(t.parameters !== undefined ? { parameters: t.parameters } : {}),
            ...(t.strict !== undefined ? { strict: t.strict } : {}),
          };
    if (definition.description === undefined || definition.description === '') delete definition.description;
    out.push({ definition, target });
  };
  for (const t of tools ?? []) {
    if (t.type === 'function' || t.type === 'custom') add(t as ResponseFunctionTool | ResponseCustomTool);
    else if (t.type === 'namespace') for (const member of (t as ResponseNamespaceTool).tools) add(member, t as ResponseNamespaceTool);
  }
  return out;
}

/** A custom tool's grammar is not enforced: the model is told it instead (docs/lmsp.md, "Codex dialect"). */
function customDescription(description: string | undefined, format: ResponseCustomTool['format']): string | undefined {
  const grammar = format?.type === 'grammar' ? `The input must follow this ${format.syntax} grammar:\n${format.definition}` : '';
  const text = [description, 'Put the raw input in the `input` string.', grammar].filter((s) => s).join('\n\n');
  return text || undefined;
}

/** Names the model sees → what they stand for (the reverse of the flattening, rebuilt from the request). */
export function toolTargetsOf(tools: readonly ResponseTool[] | undefined): Map<string, ToolTarget> {
  return new Map(modelToolsOf(tools).map((t) => [t.definition.name, t.target]));
}

/** The name the model sees for a named tool_choice: `namespace` + name, or a name already flattened. */
export function choiceName(choice: { name: string; namespace?: string }): string {
  return flatToolName(choice.name, choice.namespace);
}

/** Hosted tools of a request, by position in `tools`: what the response reports as ignored. */
export function ignoredToolsOf(tools: readonly ResponseTool[] | undefined): Array<{ index: number; type: string }> {
  return (tools ?? []).flatMap((t, index) => (isModelTool(t) ? [] : [{ index, type: t.type }]));
}

/** The arguments text of a custom tool's call for the model's history: its raw input in the `input` string. */
export function customCallArguments(input: string): string {
  return JSON.stringify({ input });
}

/** A custom tool's raw input from the arguments the model wrote: `input` when it is a string, else the text itself. */
export function customCallInput(args: string): string {
  try {
    const v = JSON.parse(args) as unknown;
    if (typeof v === 'object' && v !== null && typeof (v as { input?: unknown }).input === 'string') return (v as { input: string }).input;
  } catch {
    // Not JSON (cut off at the token limit, or a template that wrote raw text): the text as it is.
  }
  return args;
}

/**
 * The decoded start of the `input` string in arguments still being written (`{"input": "…`): what a stream can
 * already show of a custom tool's input. Stops before an escape that is not complete yet; empty when the arguments
 * do not start that way (the whole input then comes at the end).
 */
export function partialCustomInput(args: string): string {
  const head = /^\s*\{\s*"input"\s*:\s*"/.exec(args);
  if (!head) return '';
  let out = '';
  for (let i = head[0].length; i < args.length; i++) {
    const c = args[i];
    if (c === '"') break;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = args[i + 1];
    if (next === undefined) break;
    if (next === 'u') {
      const hex = args.slice(i + 2, i + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) break;
      out += String.fromCharCode(parseInt(hex, 16));
      i += 5;
      continue;
    }
    const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
    if (!(next in simple)) break;
    out += simple[next];
    i += 1;
  }
  return out;
}
