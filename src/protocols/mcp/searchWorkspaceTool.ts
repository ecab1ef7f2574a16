// The search_workspace tool (issue 41 item 3): semantic search over the workspace index the editor built. Kept in
// its own file beside tools.ts so that other tools land there without touching it. The door holds no index: it is
// handed a WorkspaceIndexSource at construction (the owning window's reader of its workspace's index; `serve` and a
// window without an index hand none, and the tool then says that no index exists). The query is embedded by the
// runtime with the model the index was built with, as the calling client (its share of embeddings calls applies).
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isRuntimeError, RuntimeError } from '../../runtime/errors';
import { MAX_TOP_K } from '../../workspaceIndex/indexer';
import type { CallerContext, McpContext } from './context';
import { invalidParams, toMcpError } from './errors';
import type { ToolSpec } from './tools';

export const SEARCH_WORKSPACE = 'search_workspace';
export const MAX_QUERY_CHARS = 8000;
export const DEFAULT_TOP_K = 10;

export const SEARCH_WORKSPACE_ARGS = z
  .object({
    query: z
      .string()
      .max(MAX_QUERY_CHARS)
      .refine((q) => q.trim().length > 0, { message: 'the query must not be empty' })
      .describe('What to look for, in words or code; compared by meaning with chunks of the workspace files.'),
    top_k: z.number().int().min(1).max(MAX_TOP_K).optional().describe(`How many results (1 to ${MAX_TOP_K}, default ${DEFAULT_TOP_K}).`),
  })
  .strict();
export type SearchWorkspaceArgs = z.infer<typeof SEARCH_WORKSPACE_ARGS>;

export const SEARCH_WORKSPACE_SPEC: ToolSpec = {
  name: SEARCH_WORKSPACE,
  description:
    'Semantic search over the editor\'s workspace index (built with the editor command "Index Workspace"): the ' +
    'chunks of workspace files closest in meaning to the query, best first. structuredContent.results holds each ' +
    "chunk's path, start_line, end_line (1-based, inclusive), cosine score and text. Read-only.",
  taskSupport: 'forbidden',
  args: SEARCH_WORKSPACE_ARGS,
  readOnly: true,
};

export const NO_INDEX_MESSAGE =
  'No workspace index exists here: run the command "Task Runtime: Index Workspace" in the editor window that runs ' +
  'the task runtime, then search again.';

export async function searchWorkspace(ctx: McpContext, caller: CallerContext, args: SearchWorkspaceArgs): Promise<CallToolResult> {
  const index = await ctx.workspaceIndex?.current();
  if (!index) return { content: [{ type: 'text', text: NO_INDEX_MESSAGE }], isError: true };
  let vector: Float32Array;
  try {
    const out = await ctx.runtime.embed({ principal: caller.principal, model: index.model, inputs: [args.query], signal: caller.signal });
    vector = out.vectors[0];
  } catch (e) {
    // The runtime names its `input`; the client sent `query`.
    if (isRuntimeError(e) && e.param?.startsWith('input')) throw toMcpError(new RuntimeError(e.code, e.message, 'query', e.limit));
    throw toMcpError(e);
  }
  if (vector.length !== index.dimensions) {
    return {
      content: [
        {
          type: 'text',
          text: `The model "${index.model}" now gives vectors of ${vector.length} values, the index holds ${index.dimensions}: index the workspace again.`,
        },
      ],
      isError: true,
    };
  }
  let hits;
  try {
    hits = index.search(vector, args.top_k ?? DEFAULT_TOP_K);
  } catch (e) {
    throw invalidParams(e instanceof Error ? e.message : String(e));
  }
  const results = hits.map((h) => ({ path: h.path, start_line: h.startLine, end_line: h.endLine, score: h.score, text: h.text }));
  const lines = results.map((r) => `${r.path}:${r.start_line}-${r.end_line} (${r.score.toFixed(3)})\n${r.text}`);
  return {
    content: [{ type: 'text', text: results.length ? lines.join('\n\n') : 'The index holds no chunk to compare with.' }],
    structuredContent: { results },
  };
}
