// The search_workspace tool (issue 41 item 3) on both MCP eras: the SDK's real Client (2025-11-25) and the raw
// 2026-07-28 client, against the in-process door given a reader of a workspace index built here with the runtime's
// own embeddings of the generated model. Before the index exists the tool says so (isError, no exception); after,
// a query equal to a chunk's text finds that chunk first with its path and 1-based line range; bad arguments
// (empty or blank query, top_k out of range, unknown field) are -32602 in each era's form.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { chunkText } from '../../../src/workspaceIndex/chunker';
import { updateIndex, type ListedFile } from '../../../src/workspaceIndex/indexer';
import { IndexReader } from '../../../src/workspaceIndex/reader';
import { IndexStore } from '../../../src/workspaceIndex/store';
import { NO_INDEX_MESSAGE } from '../../../src/protocols/mcp/searchWorkspaceTool';
import { connect, startInProcess, TOKENS, type InProcessServer } from './harness';
import { ModernClient } from './modernClient';

const FILES: Record<string, string> = {
  'src/math.ts': Array.from({ length: 200 }, (_, i) => `export const add${i} = (a: number) => a + ${i};`).join('\n') + '\n',
  'docs/readme.md': Array.from({ length: 30 }, (_, i) => `Paragraph ${i}: the scheduler runs queued tasks in order.`).join('\n') + '\n',
};

interface Result {
  path: string;
  start_line: number;
  end_line: number;
  score: number;
  text: string;
}

describe('MCP search_workspace', () => {
  let server: InProcessServer;
  let client: Client;
  let modern: ModernClient;
  let indexDir: string;
  let reader: IndexReader;

  before(async () => {
    indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-wsindex-'));
    reader = new IndexReader(indexDir);
    server = await startInProcess({ door: { workspaceIndex: reader } });
    client = await connect(server.mcpUrl, TOKENS.alice);
    modern = new ModernClient(server.mcpUrl, TOKENS.alice, false);
  });
  after(async () => {
    await client?.close();
    reader?.close();
    await server?.close();
    fs.rmSync(indexDir, { recursive: true, force: true });
  });

  test('without an index the tool says that none exists, in both eras', async () => {
    const r = await client.callTool({ name: 'search_workspace', arguments: { query: 'scheduler' } });
    assert.equal(r.isError, true);
    assert.equal((r.content as { text: string }[])[0].text, NO_INDEX_MESSAGE);
    const m = await modern.result('tools/call', { name: 'search_workspace', arguments: { query: 'scheduler' } });
    assert.equal(m.isError, true);
    assert.equal(m.resultType, 'complete');
    assert.match(m.content[0].text, /No workspace index exists/);
  });

  test('after indexing, a query equal to a chunk finds it first, with path, lines, score and text', async () => {
    const store = await IndexStore.open(indexDir);
    try {
      const files: ListedFile[] = Object.entries(FILES).map(([p, text]) => ({
        path: p,
        mtime: 1,
        size: Buffer.byteLength(text),
        read: async () => Buffer.from(text),
      }));
      const embedder = {
        embed: async (texts: string[], signal: AbortSignal) => {
          const r = await server.runtime.embed({ principal: 'editor', model: undefined, inputs: texts, signal });
          return { model: r.model, vectors: r.vectors };
        },
      };
      const r = await updateIndex(store, { files, embedder });
      assert.equal(r.embedded, 2);
    } finally {
      store.close();
    }
    const chunk = chunkText(FILES['src/math.ts'])[1];
    const legacy = await client.callTool({ name: 'search_workspace', arguments: { query: chunk.text, top_k: 3 } });
    assert.equal(legacy.isError, undefined);
    const results = (legacy.structuredContent as { results: Result[] }).results;
    assert.equal(results.length, 3);
    assert.deepEqual(
      { path: results[0].path, start_line: results[0].start_line, end_line: results[0].end_line, text: results[0].text },
      { path: 'src/math.ts', start_line: chunk.startLine, end_line: chunk.endLine, text: chunk.text },
    );
    assert.ok(Math.abs(results[0].score - 1) < 1e-4, String(results[0].score));
    assert.match((legacy.content as { text: string }[])[0].text, /^src\/math\.ts:\d+-\d+ \(1\.000\)/);

    const m = await modern.result('tools/call', { name: 'search_workspace', arguments: { query: chunk.text } });
    assert.equal(m.resultType, 'complete');
    assert.equal(m.structuredContent.results.length, 10); // the default top_k
    assert.deepEqual(m.structuredContent.results[0], results[0]);
  });

  test('bad arguments are -32602 in both eras', async () => {
    const bad: Array<Record<string, unknown>> = [
      {},
      { query: '' },
      { query: '   \n' },
      { query: 'x', top_k: 0 },
      { query: 'x', top_k: 51 },
      { query: 'x', top_k: 1.5 },
      { query: 'x', other: 1 },
    ];
    for (const args of bad) {
      await assert.rejects(
        client.callTool({ name: 'search_workspace', arguments: args }),
        (e: unknown) => e instanceof McpError && e.code === ErrorCode.InvalidParams,
        JSON.stringify(args),
      );
      const r = await modern.request('tools/call', { name: 'search_workspace', arguments: args });
      assert.equal(r.body.error?.code, -32602, JSON.stringify(args));
    }
    await assert.rejects(
      client.callTool({ name: 'search_workspace', arguments: { query: 'x'.repeat(8001) } }),
      (e: unknown) => e instanceof McpError && e.code === ErrorCode.InvalidParams,
    );
  });
});
