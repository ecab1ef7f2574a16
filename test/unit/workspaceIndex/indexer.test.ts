// The workspace index engine (issue 41 item 3) on plain Node with the real tiny generated model: a temp folder is
// indexed, then changed; the embedder is the llama backend itself, wrapped to count what it is asked to embed. What
// must hold: only changed files are embedded again, deleted files leave the index, an interrupted run keeps its
// finished files (also without a clean close, as after a crash) and the next run does not redo them, and a query
// equal to a chunk's text finds that chunk first. The chunker's line ranges and overlap are checked on their own.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { chunkText } from '../../../src/workspaceIndex/chunker';
import { PROBE_TEXT, searchIndex, updateIndex, type Embedder, type ListedFile } from '../../../src/workspaceIndex/indexer';
import { IndexReader } from '../../../src/workspaceIndex/reader';
import { IndexBusyError, IndexStore, JOURNAL_FILE } from '../../../src/workspaceIndex/store';
import { testModelPath } from '../../fixtures/testModel';

/** The files of `root` as the editor's listing would give them (every file, sorted). */
function listFolder(root: string): ListedFile[] {
  const out: ListedFile[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else {
        const st = fs.statSync(full);
        out.push({
          path: path.relative(root, full).split(path.sep).join('/'),
          mtime: st.mtimeMs,
          size: st.size,
          read: async () => fs.readFileSync(full),
        });
      }
    }
  };
  walk(root);
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

function fileText(name: string, lines: number): string {
  return Array.from({ length: lines }, (_, i) => `${name} line ${i + 1}: value_${name}_${i * 7} = compute(${i}, "${name}");`).join('\n') + '\n';
}

describe('workspace index engine (real tiny model)', () => {
  const backend = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], threads: 1, concurrency: 1 });
  let root: string;
  let indexDir: string;
  /** Texts embedded since the last reset, the probe excluded. */
  let embedded: string[] = [];
  const embedder: Embedder = {
    async embed(texts, signal) {
      for (const t of texts) if (t !== PROBE_TEXT) embedded.push(t);
      const r = await backend.embed('tiny', texts, { signal });
      return { model: 'tiny', vectors: r.vectors };
    },
  };
  const embeddedFiles = (files: ListedFile[], texts: string[]) =>
    new Set(
      files
        .filter((f) =>
          texts.some((t) =>
            t.startsWith(
              f.path
                .replace(/\.txt$/, '')
                .split('/')
                .pop() + ' line',
            ),
          ),
        )
        .map((f) => f.path),
    );

  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'wsindex-src-'));
    indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wsindex-db-'));
    fs.mkdirSync(path.join(root, 'sub'));
    for (const name of ['alpha', 'beta', 'gamma', 'delta']) fs.writeFileSync(path.join(root, `${name}.txt`), fileText(name, 40));
    fs.writeFileSync(path.join(root, 'sub', 'epsilon.txt'), fileText('epsilon', 12));
    fs.writeFileSync(path.join(root, 'blob.bin'), Buffer.from([1, 0, 2, 0, 3]));
  });
  after(async () => {
    await backend.dispose();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(indexDir, { recursive: true, force: true });
  });

  it('indexes every text file, skips a binary one, and keeps line ranges and texts', async () => {
    const store = await IndexStore.open(indexDir);
    try {
      const files = listFolder(root);
      const r = await updateIndex(store, { files, embedder });
      assert.equal(r.model, 'tiny');
      assert.equal(r.embedded, 5);
      assert.equal(r.skipped, 1);
      assert.equal(r.interrupted, false);
      assert.deepEqual([...store.files().keys()].sort(), ['alpha.txt', 'beta.txt', 'delta.txt', 'gamma.txt', 'sub/epsilon.txt']);
      assert.equal(store.counts().chunks, r.chunks);
      assert.equal(embedded.length, r.chunks);
      assert.ok(r.chunks > 5, `several chunks per long file, got ${r.chunks}`);
    } finally {
      store.close();
    }
  });

  it('a query equal to a chunk text finds that chunk first, with score 1', async () => {
    const store = await IndexStore.open(indexDir, { readOnly: true });
    try {
      const lines = fs.readFileSync(path.join(root, 'gamma.txt'), 'utf8').split('\n');
      const chunk = chunkText(lines.join('\n'))[1];
      const q = (await backend.embed('tiny', [chunk.text], { signal: new AbortController().signal })).vectors[0];
      const hits = searchIndex(store, q, 3);
      assert.equal(hits.length, 3);
      assert.deepEqual(
        { path: hits[0].path, start: hits[0].startLine, end: hits[0].endLine, text: hits[0].text },
        { path: 'gamma.txt', start: chunk.startLine, end: chunk.endLine, text: chunk.text },
      );
      assert.ok(Math.abs(hits[0].score - 1) < 1e-5, String(hits[0].score));
      assert.ok(hits[1].score <= hits[0].score && hits[2].score <= hits[1].score);
      assert.throws(() => searchIndex(store, q, 0), RangeError);
      assert.throws(() => searchIndex(store, q, 51), RangeError);
    } finally {
      store.close();
    }
  });

  it('a second run embeds only the changed file, and drops a deleted one', async () => {
    fs.writeFileSync(path.join(root, 'beta.txt'), fileText('beta', 41));
    fs.rmSync(path.join(root, 'delta.txt'));
    // Same content, new mtime: read and hashed again, not embedded.
    const t = new Date(Date.now() + 5000);
    fs.utimesSync(path.join(root, 'alpha.txt'), t, t);
    embedded = [];
    const store = await IndexStore.open(indexDir);
    try {
      const files = listFolder(root);
      const r = await updateIndex(store, { files, embedder });
      assert.deepEqual([...embeddedFiles(files, embedded)], ['beta.txt']);
      assert.equal(r.embedded, 1);
      assert.equal(r.dropped, 1);
      assert.equal(r.unchanged, 3);
      assert.equal(store.files().has('delta.txt'), false);
      const q = (await backend.embed('tiny', [chunkText(fileText('delta', 40))[0].text], { signal: new AbortController().signal })).vectors[0];
      assert.ok(searchIndex(store, q, 50).every((h) => h.path !== 'delta.txt'));
      assert.equal(store.files().get('alpha.txt')?.mtime, fs.statSync(path.join(root, 'alpha.txt')).mtimeMs);
    } finally {
      store.close();
    }
  });

  it('an interrupted run keeps its finished files, even without a clean close; the next run does not redo them', async () => {
    for (const name of ['alpha', 'beta', 'gamma']) fs.writeFileSync(path.join(root, `${name}.txt`), fileText(name, 30));
    const files = listFolder(root);
    embedded = [];
    const ac = new AbortController();
    const crashed = await IndexStore.open(indexDir);
    const r = await updateIndex(crashed, {
      files,
      embedder,
      signal: ac.signal,
      onProgress: (p) => {
        if (p.path === 'alpha.txt') ac.abort();
      },
    });
    assert.equal(r.interrupted, true);
    assert.deepEqual([...embeddedFiles(files, embedded)], ['alpha.txt']);
    // No close: the journal holds the finished file, the image does not.
    assert.ok(fs.statSync(path.join(indexDir, JOURNAL_FILE)).size > 0);
    embedded = [];
    const store = await IndexStore.open(indexDir);
    try {
      const again = await updateIndex(store, { files, embedder });
      assert.equal(again.interrupted, false);
      assert.deepEqual([...embeddedFiles(files, embedded)].sort(), ['beta.txt', 'gamma.txt']);
      assert.equal(again.unchanged, 2); // alpha (done before the interruption) and sub/epsilon
    } finally {
      store.close();
    }
  });

  it('a reader sees the index, and another model resets it', async () => {
    const reader = new IndexReader(indexDir);
    try {
      const view = await reader.current();
      assert.equal(view?.model, 'tiny');
      assert.equal(view?.files, 4);
      const other: Embedder = { embed: async (texts, signal) => ({ ...(await embedder.embed(texts, signal)), model: 'tiny-2' }) };
      embedded = [];
      const store = await IndexStore.open(indexDir);
      try {
        const r = await updateIndex(store, { files: listFolder(root), embedder: other });
        assert.equal(r.embedded, 4);
      } finally {
        store.close();
      }
      assert.equal((await reader.current())?.model, 'tiny-2');
      assert.equal(await new IndexReader(path.join(indexDir, 'none')).current(), undefined);
    } finally {
      reader.close();
    }
  });

  it('a second writer in another live process is refused', async () => {
    fs.writeFileSync(path.join(indexDir, 'index.lock'), String(process.ppid));
    await assert.rejects(IndexStore.open(indexDir), IndexBusyError);
    fs.rmSync(path.join(indexDir, 'index.lock'));
  });
});

describe('chunkText', () => {
  it('covers every line with ~200-token chunks that overlap, 1-based inclusive ranges', () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i + 1} ${'x'.repeat(30)}`).join('\n') + '\n';
    const chunks = chunkText(text);
    assert.ok(chunks.length > 5);
    assert.equal(chunks[0].startLine, 1);
    assert.equal(chunks[chunks.length - 1].endLine, 300);
    for (const c of chunks) {
      assert.ok(c.text.length <= 800, `${c.text.length}`);
      assert.equal(
        c.text,
        text
          .split('\n')
          .slice(c.startLine - 1, c.endLine)
          .join('\n'),
      );
    }
    for (let i = 1; i < chunks.length; i++) {
      assert.ok(chunks[i].startLine <= chunks[i - 1].endLine, 'overlap');
      assert.ok(chunks[i].startLine > chunks[i - 1].startLine, 'progress');
    }
  });

  it('cuts a line longer than a chunk into pieces of that line, and skips blank text', () => {
    const chunks = chunkText(`short\n${'y'.repeat(2000)}\n\n\n`);
    assert.deepEqual(
      chunks.map((c) => [c.startLine, c.endLine, c.text.length]),
      [
        [1, 1, 5],
        [2, 2, 800],
        [2, 2, 800],
        [2, 2, 400],
      ],
    );
    assert.deepEqual(chunkText(''), []);
    assert.deepEqual(chunkText('\n  \n'), []);
    assert.throws(() => chunkText('x', { maxTokens: 0 }), RangeError);
    assert.throws(() => chunkText('x', { maxTokens: 10, overlapTokens: 10 }), RangeError);
  });
});
