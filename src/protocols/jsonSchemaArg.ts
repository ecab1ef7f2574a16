// A JSON Schema a client hands a door for the output (LMSP `text.format.schema`, MCP `output_schema`): one bound on
// its size for both doors, checked before it is stored with the task. What the schema may say is the backend's
// check (ModelBackend.checkRequest refuses keywords it cannot enforce); this only keeps a hostile document small
// enough to store, echo and compile.
import { z } from 'zod';

/** Nesting depth and member count of the JSON document (not of the schema's own levels). */
export const SCHEMA_LIMITS = { maxDepth: 64, maxNodes: 10_000 } as const;

/** Depth and node count of a JSON value, counting stops once either bound is passed. */
function jsonShape(value: unknown): { depth: number; nodes: number } {
  let nodes = 0;
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length && nodes <= SCHEMA_LIMITS.maxNodes && deepest <= SCHEMA_LIMITS.maxDepth) {
    const [v, depth] = stack.pop()!;
    nodes++;
    deepest = Math.max(deepest, depth);
    if (v !== null && typeof v === 'object') for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return { depth: deepest, nodes };
}

/** A JSON Schema object within SCHEMA_LIMITS. */
export const jsonSchemaArg = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  const { depth, nodes } = jsonShape(schema);
  if (depth > SCHEMA_LIMITS.maxDepth) ctx.addIssue({ code: 'custom', message: `the schema nests deeper than ${SCHEMA_LIMITS.maxDepth} levels` });
  else if (nodes > SCHEMA_LIMITS.maxNodes) ctx.addIssue({ code: 'custom', message: `the schema has more than ${SCHEMA_LIMITS.maxNodes} members` });
});
