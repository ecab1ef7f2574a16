// The runtime's view of a model backend. Backends live in src/backends and are handed to the runtime by a
// composition root; the runtime never imports one.

export type ModelState = 'unloaded' | 'loading' | 'loaded' | 'error';

export interface ModelInfo {
  /** Stable id clients put in `model`. */
  id: string;
  /** Where the weights come from: a local path or a model URI. */
  source: string;
  state: ModelState;
  /** Trained context length when known (after load), else null. */
  maxContextLength: number | null;
  /** True for the generated random-weight demo model. */
  demo: boolean;
}

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant';
  content: string;
}

export interface GenerateRequest {
  model: string;
  instructions?: string;
  messages: ChatMessage[];
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  seed?: number;
}

/** Where a resumable generation stands; written by the backend, read back after a restart. */
export interface GenerationSnapshot {
  /** File the backend wrote its state to (context-sequence state). */
  statePath: string;
  /** Output text produced up to the snapshot. */
  text: string;
  /** Output tokens produced up to the snapshot. */
  outputTokens: number;
}

export interface GenerateOptions {
  signal: AbortSignal;
  /** Called for every decoded piece of text, in order. `tokens` is the number of tokens the piece covers. */
  onText(text: string, tokens: number): void;
  /**
   * Continue from this snapshot instead of starting over (only when `supportsSnapshots`). `continueText` is output
   * that clients already received after the snapshot was taken: the backend feeds it to the model (without emitting
   * it again) before generating further, so no delivered text is generated twice.
   */
  resumeFrom?: GenerationSnapshot & { continueText?: string };
  /**
   * Ask the backend to save its state into `dir` about every `everyMs`; it calls `onSnapshot` after each save,
   * with text/outputTokens covering everything emitted through onText before the save.
   */
  snapshots?: { dir: string; everyMs: number; onSnapshot(snapshot: GenerationSnapshot): void };
}

export type FinishReason = 'stop' | 'max_output_tokens' | 'aborted';

export interface GenerateResult {
  finishReason: FinishReason;
  inputTokens: number;
  outputTokens: number;
}

export interface LoadOptions {
  signal?: AbortSignal;
  onProgress?(progress: number): void;
}

export interface ModelBackend {
  readonly name: string;
  /** True when generate() honours resumeFrom/snapshots (LMSP on_restart "resume"). */
  readonly supportsSnapshots: boolean;
  listModels(): ModelInfo[];
  /** Resolve a request's `model` (undefined = default) to a known model id, or undefined when unknown. */
  resolveModel(model: string | undefined): string | undefined;
  isLoaded(modelId: string): boolean;
  load(modelId: string, options?: LoadOptions): Promise<void>;
  generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult>;
  dispose(): Promise<void>;
}
