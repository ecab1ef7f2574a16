// The models a backend serves, by id, and each one's load state. Ids are unique and fixed when the backend is made
// (from the configuration, or derived from the source); the first model is the default. A load runs once however
// many callers ask for it (they share one promise); a failed load leaves the model in `error`, and the next load
// tries again.

import * as path from 'node:path';
import type { ModelCapabilities, ModelHardware, ModelInfo, ModelState } from '../../runtime/backend';
import { isModelUri } from '../modelSource';

export interface LlamaModelConfig {
  /** Id clients use; defaults to the file name without extension. */
  id?: string;
  /** Local .gguf path or node-llama-cpp model URI (hf:owner/repo:quant, https://…). */
  source: string;
  /** The generated random-weight demo model. */
  demo?: boolean;
}

/** What a loaded model must tell its entry. */
export interface LoadedModelInfo {
  hardware: ModelHardware;
  /** The model's trained context length. */
  trainContextSize: number;
  /** The context each generation runs with (tokens). */
  contextSize: number;
  /** Generations at once (sequences of the batched context). */
  concurrency: number;
  /** What its generation supports (capabilities.ts), from the file and the resolved template. */
  capabilities?: ModelCapabilities;
}

export interface ModelEntry<Loaded extends LoadedModelInfo> {
  readonly id: string;
  readonly source: string;
  readonly demo: boolean;
  state: ModelState;
  loading?: Promise<void>;
  loaded?: Loaded;
  maxContextLength: number | null;
  /** The embedding vector's length: from the file's header (prepare), then the loaded model's. */
  embeddingDimensions?: number;
  /** What its generation supports: from the file's header (prepare), then from the load (kept after an unload). */
  capabilities?: ModelCapabilities;
}

/** A file's name without `.gguf`; for a URI, what follows the scheme with every run of other characters as `-`. */
export function defaultModelId(source: string): string {
  if (isModelUri(source)) return source.replace(/^[a-z0-9+.-]+:/i, '').replace(/[^A-Za-z0-9._-]+/g, '-');
  return path.basename(source).replace(/\.gguf$/i, '');
}

export class ModelEntries<Loaded extends LoadedModelInfo> {
  readonly all: readonly ModelEntry<Loaded>[];

  /** Throws on a duplicate id. */
  constructor(configs: readonly LlamaModelConfig[]) {
    const seen = new Set<string>();
    this.all = configs.map((m) => {
      const id = m.id ?? defaultModelId(m.source);
      if (seen.has(id)) throw new Error(`duplicate model id "${id}"`);
      seen.add(id);
      return { id, source: m.source, demo: !!m.demo, state: 'unloaded', maxContextLength: null };
    });
  }

  get(id: string): ModelEntry<Loaded> | undefined {
    return this.all.find((e) => e.id === id);
  }

  /** The id a request's `model` names: the first model's when empty, undefined when unknown. */
  resolve(model: string | undefined): string | undefined {
    if (!model) return this.all[0]?.id;
    return this.get(model)?.id;
  }

  list(): ModelInfo[] {
    return this.all.map((e) => ({
      id: e.id,
      source: e.source,
      state: e.state,
      maxContextLength: e.maxContextLength,
      contextLength: e.loaded?.contextSize ?? null,
      demo: e.demo,
      ...(e.loaded ? { concurrency: e.loaded.concurrency } : {}),
      ...(e.loaded ? { hardware: e.loaded.hardware } : {}),
      ...(e.embeddingDimensions !== undefined ? { embeddingDimensions: e.embeddingDimensions } : {}),
      ...((e.loaded?.capabilities ?? e.capabilities) ? { capabilities: { ...(e.loaded?.capabilities ?? e.capabilities)! } } : {}),
    }));
  }

  /** Loads model `id` with `start`, unless it is loaded or loading (then it joins that load). */
  load(id: string, start: (entry: ModelEntry<Loaded>) => Promise<Loaded>): Promise<void> {
    const entry = this.get(id);
    if (!entry) return Promise.reject(new Error(`unknown model "${id}"`));
    if (entry.state === 'loaded') return Promise.resolve();
    if (!entry.loading) {
      entry.state = 'loading';
      entry.loading = start(entry).then(
        (loaded) => {
          entry.loaded = loaded;
          entry.maxContextLength = loaded.trainContextSize;
          entry.state = 'loaded';
          entry.loading = undefined;
        },
        (err: unknown) => {
          entry.state = 'error';
          entry.loading = undefined;
          throw err;
        },
      );
    }
    return entry.loading;
  }

  /** Sets a loaded model `unloaded` and hands back what was loaded, for the caller to free (undefined: not loaded). */
  unload(id: string): Loaded | undefined {
    const e = this.get(id);
    if (!e || e.state !== 'loaded' || !e.loaded) return undefined;
    const loaded = e.loaded;
    e.loaded = undefined;
    e.state = 'unloaded';
    return loaded;
  }

  /** Waits for loads under way, sets every model `unloaded` and hands back what was loaded, for the caller to free. */
  async unloadAll(): Promise<Loaded[]> {
    await Promise.allSettled(this.all.map((e) => e.loading));
    const freed: Loaded[] = [];
    for (const e of this.all) {
      if (e.loaded) freed.push(e.loaded);
      e.loaded = undefined;
      e.state = 'unloaded';
    }
    return freed;
  }
}
