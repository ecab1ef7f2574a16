// Reading the workspace index from another place than the run that writes it: the MCP door's search_workspace tool
// and the editor's search command. A reader holds a read-only copy of the store and loads it again when the files on
// disk changed (a run wrote more), so every search sees every file finished so far, also while a run goes on in
// this or another window. Where indexes live: `<data directory>/workspace-index/<workspace key>/`.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { searchIndex, VectorCache, type SearchHit } from './indexer';
import { IndexStore } from './store';

export const INDEX_FOLDER = 'workspace-index';

/** The folder of one workspace's index: a key from its folders' URIs (order does not matter). */
export function indexDirFor(dataDir: string, workspaceFolders: readonly string[]): string {
  const key = createHash('sha256')
    .update([...workspaceFolders].sort().join('\n'))
    .digest('hex')
    .slice(0, 16);
  return join(dataDir, INDEX_FOLDER, key);
}

/** A built index as a search sees it. */
export interface WorkspaceIndexView {
  /** The model its vectors come from: a query must be embedded with it. */
  model: string;
  dimensions: number;
  files: number;
  chunks: number;
  /** `topK` from 1 to MAX_TOP_K (else RangeError); `query` of `dimensions` values. */
  search(query: Float32Array, topK: number): SearchHit[];
}

/** What the MCP door is given: the index as it is now, or undefined when none was built. */
export interface WorkspaceIndexSource {
  current(): Promise<WorkspaceIndexView | undefined>;
}

export class IndexReader implements WorkspaceIndexSource {
  private store: IndexStore | undefined;
  private signature = '';
  private loading: Promise<IndexStore | undefined> | undefined;
  private readonly cache = new VectorCache();

  constructor(readonly dir: string) {}

  async current(): Promise<WorkspaceIndexView | undefined> {
    const store = await this.load();
    const model = store?.model;
    const dimensions = store?.dimensions;
    if (!store || model === undefined || dimensions === undefined) return undefined;
    const counts = store.counts();
    if (counts.files === 0) return undefined;
    return {
      model,
      dimensions,
      ...counts,
      search: (query, topK) => searchIndex(store, query, topK, this.cache),
    };
  }

  private load(): Promise<IndexStore | undefined> {
    this.loading ??= this.reload().finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async reload(): Promise<IndexStore | undefined> {
    if (!IndexStore.exists(this.dir)) {
      this.drop();
      return undefined;
    }
    // A writer's checkpoint renames the image, then empties the journal: a load that straddles it may miss records,
    // so it is repeated until the files stayed the same while it read them.
    for (let attempt = 0; attempt < 5; attempt++) {
      const before = IndexStore.signature(this.dir);
      if (this.store && before === this.signature) return this.store;
      const store = await IndexStore.open(this.dir, { readOnly: true });
      if (IndexStore.signature(this.dir) === before) {
        this.drop();
        this.store = store;
        this.signature = before;
        return store;
      }
      store.close();
    }
    return this.store;
  }

  private drop(): void {
    this.store?.close();
    this.store = undefined;
    this.signature = '';
  }

  close(): void {
    this.drop();
  }
}
