// Bringing the index up to date with a listing of the workspace, and searching it. No vscode here: the listing (the
// editor's findFiles with .gitignore and files.exclude applied) and the embedder (the runtime in this process, or the
// owner window's LMSP route) are handed in, so the engine runs and is tested on plain Node.
//
// An update: files gone from the listing are dropped; a file whose size and mtime are as stored is kept without being
// read; any other file is read and hashed, and re-embedded only when its content hash changed. Each file is written
// to the store (synced) as soon as its chunks are embedded, so an interrupted run (cancel, pause, crash, reload)
// keeps every finished file and the next run goes on from there. A change of model empties the index first.
import { chunkText, type ChunkOptions } from './chunker';
import { sha256, type ChunkRecord, type IndexStore } from './store';

/** A file of the workspace as the listing gives it. */
export interface ListedFile {
  /** Workspace-relative, '/'-separated: the key in the index and what results show. */
  path: string;
  mtime: number;
  size: number;
  /** The content as UTF-8 text. */
  read(): Promise<Uint8Array>;
}

export interface Embedder {
  /** Vectors of `texts` in order, and the model id that made them. */
  embed(texts: string[], signal: AbortSignal): Promise<{ model: string; vectors: Float32Array[] }>;
}

export interface UpdateOptions {
  files: readonly ListedFile[];
  /**
   * Embeds with one model throughout. Asked once first (PROBE_TEXT) for its model id and vector size: another model
   * (or size) than the stored one empties the index before anything else.
   */
  embedder: Embedder;
  signal?: AbortSignal;
  /** Called after each file (done counts unchanged, skipped and embedded files). */
  onProgress?(p: UpdateProgress): void;
  /** Awaited between files: a pause holds the run here. */
  gate?(): Promise<void>;
  chunking?: ChunkOptions;
  /** Files larger than this are left out (default MAX_FILE_BYTES). */
  maxFileBytes?: number;
  /** Inputs per embeddings call (default EMBED_BATCH). */
  batchSize?: number;
}

export interface UpdateProgress {
  done: number;
  total: number;
  path?: string;
}

export interface UpdateResult {
  /** The model the vectors come from. */
  model: string;
  total: number;
  /** Files whose chunks were embedded in this run. */
  embedded: number;
  /** Files kept as they were. */
  unchanged: number;
  /** Files left out: too large, binary, not UTF-8 text, or with no text. */
  skipped: number;
  /** Stored files dropped because the listing no longer has them. */
  dropped: number;
  chunks: number;
  /** The run stopped early (signal): what is done is kept. */
  interrupted: boolean;
}

export const MAX_FILE_BYTES = 1024 * 1024;
export const EMBED_BATCH = 32;
/** The input of the call that tells the embedder's model and vector size before a run. */
export const PROBE_TEXT = 'workspace index';

function isBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8000).includes(0);
}

export async function updateIndex(store: IndexStore, options: UpdateOptions): Promise<UpdateResult> {
  const maxFileBytes = options.maxFileBytes ?? MAX_FILE_BYTES;
  const batchSize = options.batchSize ?? EMBED_BATCH;
  const signal = options.signal ?? new AbortController().signal;
  const result: Omit<UpdateResult, 'model'> = {
    total: options.files.length,
    embedded: 0,
    unchanged: 0,
    skipped: 0,
    dropped: 0,
    chunks: 0,
    interrupted: false,
  };
  const seen = new Set<string>();
  for (const f of options.files) {
    if (seen.has(f.path)) throw new Error(`The listing names ${f.path} twice`);
    seen.add(f.path);
  }
  const probe = await options.embedder.embed([PROBE_TEXT], signal);
  const dims = probe.vectors[0]?.length ?? 0;
  if (probe.vectors.length !== 1 || dims === 0) throw new Error('The embedder gave no vector for a test input');
  const model = probe.model;
  if (store.model !== model || store.dimensions !== dims) store.reset(model, dims);
  const stored = store.files();
  for (const path of stored.keys()) {
    if (!seen.has(path)) {
      store.dropFile(path);
      result.dropped += 1;
    }
  }
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let done = 0;
  for (const file of options.files) {
    await options.gate?.();
    if (signal.aborted) {
      result.interrupted = true;
      break;
    }
    const before = stored.get(file.path);
    if (before && before.size === file.size && before.mtime === file.mtime) {
      result.unchanged += 1;
    } else if (file.size > maxFileBytes) {
      if (before) store.dropFile(file.path);
      result.skipped += 1;
    } else {
      let text: string | undefined;
      try {
        const bytes = await file.read();
        text = isBinary(bytes) ? undefined : decoder.decode(bytes);
      } catch {
        // Not UTF-8, or gone / unreadable since it was listed: left out like a binary file.
        text = undefined;
      }
      const hash = text === undefined ? undefined : sha256(text);
      const chunks = text === undefined ? [] : chunkText(text, options.chunking);
      const entry = { path: file.path, hash: hash ?? '', mtime: file.mtime, size: file.size };
      if (text === undefined || chunks.length === 0) {
        if (before) store.dropFile(file.path);
        result.skipped += 1;
      } else if (before && before.hash === hash) {
        // Touched, not changed: keep the vectors, note the new mtime so that the next run does not read it again.
        store.touchFile(entry);
        result.unchanged += 1;
      } else {
        const records: ChunkRecord[] = [];
        for (let i = 0; i < chunks.length; i += batchSize) {
          const batch = chunks.slice(i, i + batchSize);
          const out = await options.embedder.embed(
            batch.map((c) => c.text),
            signal,
          );
          if (out.model !== model) throw new Error(`The embedder switched from the model "${model}" to "${out.model}" during the run`);
          if (out.vectors.length !== batch.length || out.vectors.some((v) => v.length !== dims)) {
            throw new Error(`The embedder gave ${out.vectors.length} vectors for ${batch.length} inputs, or vectors of another size than ${dims}`);
          }
          batch.forEach((c, j) => records.push({ ...c, hash: sha256(c.text), vector: out.vectors[j] }));
        }
        store.putFile(entry, records);
        result.embedded += 1;
        result.chunks += records.length;
      }
    }
    done += 1;
    options.onProgress?.({ done, total: options.files.length, path: file.path });
  }
  return { model, ...result };
}

export interface SearchHit {
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  text: string;
}

export const MAX_TOP_K = 50;

/** Cosine similarity of `query` with every stored chunk; the best `topK`, best first (ties: path, then line). */
export function searchIndex(store: IndexStore, query: Float32Array, topK: number, cache?: VectorCache): SearchHit[] {
  if (!Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) throw new RangeError(`top_k must be an integer from 1 to ${MAX_TOP_K}`);
  const { ids, vectors } = cache ? cache.get(store) : store.vectors();
  const qn = norm(query);
  if (qn === 0) return [];
  const scored: Array<{ id: number; score: number }> = [];
  for (let i = 0; i < ids.length; i++) {
    const v = vectors[i];
    if (v.length !== query.length) continue;
    const n = norm(v);
    if (n === 0) continue;
    let dot = 0;
    for (let k = 0; k < v.length; k++) dot += v[k] * query[k];
    scored.push({ id: ids[i], score: dot / (n * qn) });
  }
  scored.sort((a, b) => b.score - a.score || a.id - b.id);
  const hits: SearchHit[] = [];
  for (const s of scored.slice(0, topK)) {
    const c = store.chunk(s.id);
    if (c) hits.push({ path: c.path, startLine: c.startLine, endLine: c.endLine, score: s.score, text: c.text });
  }
  return hits;
}

function norm(v: Float32Array): number {
  let s = 0;
  for (let k = 0; k < v.length; k++) s += v[k] * v[k];
  return Math.sqrt(s);
}

/** The stored vectors, read once per store version (a search reads them all). */
export class VectorCache {
  private version = -1;
  private store: IndexStore | undefined;
  private data: { ids: number[]; vectors: Float32Array[] } = { ids: [], vectors: [] };

  get(store: IndexStore): { ids: number[]; vectors: Float32Array[] } {
    if (store !== this.store || store.version !== this.version) {
      this.data = store.vectors();
      this.store = store;
      this.version = store.version;
    }
    return this.data;
  }
}
