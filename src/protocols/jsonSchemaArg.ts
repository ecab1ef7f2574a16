// A JSON Schema a client hands a door for the output (LMSP `text.format.schema`, MCP `output_schema`): one bound on
// its size for both doors, checked before it is stored with the task. What the schema may say is the backend's
// check (ModelBackend.checkRequest refuses keywords it cannot enforce); this only keeps a hostile document small
// enough to store, echo and compile.
import { z } from 'zod';

/**
 * Nesting depth, member count and text of the JSON document (not of the schema's own levels). The text bound (keys
 * and string values, in characters) is OpenAI's idea (its strict mode allows 120 000 characters of names, enum and
 * const values) with room to spare: a schema is stored with its task and echoed by its first events, and a 2 MB
 * enum held the event loop ~0.5 s to store (bench/hostile.ts).
 */
export const SCHEMA_LIMITS = { maxDepth: 64, maxNodes: 10_000, maxTextChars: 256 * 1024 } as const;

/** Depth, node count and text of a JSON value, counting stops once any bound is passed. */
function jsonShape(value: unknown): { depth: number; nodes: number; text: number } {
  let nodes = 0;
  let deepest = 0;
  let text = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length && nodes <= SCHEMA_LIMITS.maxNodes && deepest <= SCHEMA_LIMITS.maxDepth && text <= SCHEMA_LIMITS.maxTextChars) {
    const [v, depth] = stack.pop()!;
    nodes++;
    deepest = Math.max(deepest, depth);
    if (typeof v === 'string') text += v.length;
    else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (!Array.isArray(v)) text += k.length;
        stack.push([child, depth + 1]);
      }
    }
  }
  return { depth: deepest, nodes, text };
}

/** A JSON Schema object within SCHEMA_LIMITS. */
export const jsonSchemaArg = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  const { depth, nodes, text } = jsonShape(schema);
  if (depth > SCHEMA_LIMITS.maxDepth) ctx.addIssue({ code: 'custom', message: `the schema nests deeper than ${SCHEMA_LIMITS.maxDepth} levels` });
  else if (nodes > SCHEMA_LIMITS.maxNodes) ctx.addIssue({ code: 'custom', message: `the schema has more than ${SCHEMA_LIMITS.maxNodes} members` });
  else if (text > SCHEMA_LIMITS.maxTextChars)
    ctx.addIssue({ code: 'custom', message: `the schema's names and strings exceed ${SCHEMA_LIMITS.maxTextChars} characters` });
});
