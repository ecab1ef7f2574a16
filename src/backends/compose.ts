// The one place that decides which backends serve, for both roots (cli/serve.ts, extension/host/localHost.ts):
// - local model sources go to one LlamaBackend; a path is made absolute, a URI (modelSource.ts) is kept;
// - the generated demo model is served only when neither a model nor an engine is given (extra members do not count:
//   they add models, they are not what the user asked to serve);
// - engines go to one RemoteBackend, probed before this returns so that the doors open with model lists and slot
//   counts known (bounded by each engine's probe timeout; an engine that is down is probed again on demand);
// - one member is served as itself, more through CompositeBackend, in the order llama, remote, extra members.
import * as path from 'node:path';
import type { ModelBackend } from '../runtime/backend';
import { CompositeBackend } from './composite';
import { ensureDemoModel } from './llama/demoModel';
import type { ConcurrencyChoice, ContextSizeChoice } from './llama/contextChoice';
import type { PromptLookupChoice } from './llama/speculative';
import type { GpuChoice, GpuLayersChoice, NativeBuildsChoice, ThreadsChoice } from './llama/hardware';
import { LlamaBackend } from './llama/llamaBackend';
import { isModelUri } from './modelSource';
import type { EngineConfig } from './remote/config';
import type { RemoteEngine } from './remote/engine';
import { RemoteBackend } from './remote/remoteBackend';

export interface ComposeOptions {
  /** Model sources: GGUF paths or model URIs. */
  models: readonly string[];
  /** Remote engines, API keys included. */
  engines: readonly EngineConfig[];
  /** The data directory: the thread calibration is cached there, models are downloaded and generated in DIR/models. */
  dataDir: string;
  llama: {
    threads: ThreadsChoice;
    gpu: GpuChoice;
    gpuLayers: GpuLayersChoice;
    contextSize?: ContextSizeChoice;
    concurrency?: ConcurrencyChoice;
    /** Idle models unload after this long (ms; 0 = never). */
    keepAliveMs?: number;
    /** Speculative decoding (backends/llama/speculative.ts): prompt lookup, and a draft model's GGUF path. */
    promptLookup?: PromptLookupChoice;
    draftModel?: string;
    /** Where the native build is looked for (nativeBuild.ts), or false: the prebuilt binary only (default). */
    nativeBuilds?: NativeBuildsChoice;
  };
  /** More members, served after the local and remote models. */
  members?: readonly ModelBackend[];
  log: (message: string) => void;
}

export interface ComposedBackend {
  /** What the runtime is given; disposing it disposes every member. */
  backend: ModelBackend;
  /** The generated demo model's path, when it is served (its output is noise: the root says so). */
  demoModel?: string;
  /** The engines as first probed (empty without engines), for the root to report. */
  engines: readonly RemoteEngine[];
}

export async function composeBackend(options: ComposeOptions): Promise<ComposedBackend> {
  const { dataDir, log } = options;
  const modelsDir = path.join(dataDir, 'models');
  const models: Array<{ source: string; demo?: boolean }> = options.models.map((source) => ({
    source: isModelUri(source) ? source : path.resolve(source),
  }));
  let demoModel: string | undefined;
  if (models.length === 0 && options.engines.length === 0) {
    demoModel = ensureDemoModel(modelsDir);
    models.push({ source: demoModel, demo: true });
  }
  const members: ModelBackend[] = [];
  let engines: readonly RemoteEngine[] = [];
  if (models.length) {
    members.push(new LlamaBackend({ models, ...options.llama, cacheDir: dataDir, modelsDir, log }));
  }
  if (options.engines.length) {
    const remote = new RemoteBackend([...options.engines], { log });
    members.push(remote);
    await remote.refresh();
    engines = remote.engines;
  }
  members.push(...(options.members ?? []));
  return { backend: members.length === 1 ? members[0] : new CompositeBackend(members), demoModel, engines };
}
