// Tool schemas a local call grammar cannot enforce, loosened instead of refused. Claude Code's tools use JSON Schema
// 2020-12 keywords (exclusiveMinimum, pattern, …) that the runtime's grammar does not compile, and the runtime refuses
// a schema it cannot enforce (400, naming the keyword). On this door a tool schema is first a description for the
// model, and a 400 would end Claude Code's turn, so a refused keyword is dropped (the model still sees the rest) and,
// where the refusal is not about one keyword, that tool takes any object. A tool with `strict: true` is never
// loosened: its refusal stands, as strict promises arguments valid against the whole schema.
import type { ResponseFunctionTool, ResponseRequest } from '../../runtime/task';
import type { HttpProblem } from '../http/problem';

/** Refusals loosened before one is answered (each drops one keyword or one tool's schema). */
export const MAX_LOOSENINGS = 64;

/** The request with the schema part a refusal names loosened; undefined when the refusal is not a tool schema's. */
export function loosenToolSchema(input: ResponseRequest, refusal: HttpProblem): ResponseRequest | undefined {
  const m = /^tools[[.](\d+)\]?\.parameters((?:\.[^.]+)*)$/.exec(refusal.extra.param ?? '');
  const tools = input.tools;
  const found = m && tools?.[Number(m[1])];
  const tool = found && found.type === 'function' ? (found as ResponseFunctionTool) : undefined;
  if (!m || !tools || !tool || tool.strict === true || !tool.parameters) return undefined;
  const parameters = structuredClone(tool.parameters);
  const steps = m[2].split('.').filter((s) => s !== '');
  const key = steps.pop();
  let parent: unknown = parameters;
  for (const s of steps) parent = parent && typeof parent === 'object' ? (parent as Record<string, unknown>)[s] : undefined;
  const loosened =
    key !== undefined && parent && typeof parent === 'object' && !Array.isArray(parent) && key in parent && /cannot be enforced/.test(refusal.detail)
      ? (delete (parent as Record<string, unknown>)[key], parameters)
      : undefined;
  const { parameters: _old, ...rest } = tool;
  const replaced: ResponseFunctionTool = loosened ? { ...rest, parameters: loosened } : rest;
  return { ...input, tools: tools.map((t, i) => (i === Number(m[1]) ? replaced : t)) };
}
