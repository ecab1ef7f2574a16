// Writes a tiny random-weight llama GGUF (v3). Its output is noise, but loading, streaming, cancellation and state
// snapshots through llama.cpp are real, so tests and the demo never need to download a model. With pooling `rank` it
// writes a tiny reranker instead: llama.cpp reads a rank head (`cls.output.weight`) only for some architectures (BERT
// kinds, Qwen3), so that one is a Qwen3-architecture model (llama's plus per-head Q/K norms) with a two-label head
// ("yes"/"no": llama.cpp's Qwen3 rank pooling takes the last token and a softmax, so the score is P(yes)).

import * as fs from 'node:fs';
import * as path from 'node:path';

export interface TestModelOptions {
  /** PRNG seed; the same seed and options always give the same bytes. */
  seed?: number;
  /** Embedding width (multiple of the head count, 4). */
  embd?: number;
  layers?: number;
  /** Trained context length declared in the metadata (≥ 1024 so servers do not cap slots). */
  contextLength?: number;
  /**
   * Vocabulary size, padded with filler tokens (private-use characters no text contains, rarely sampled) to reach
   * it; default: the ~420 tokens text needs. A real model's 32 k–150 k rows make every logits row ~100–600 KB.
   */
  vocabSize?: number;
  /** Jinja chat template to embed (tokenizer.chat_template); none by default, like the demo model. */
  chatTemplate?: string;
  /**
   * Embedding pooling declared in the metadata (`llama.pooling_type`), as an embedding model's file declares it;
   * absent: none (llama.cpp's default: an embedding is the last token's). `rank`: a reranker (Qwen3 architecture with a
   * `cls.output` head; see the file's header).
   */
  poolingType?: 'mean' | 'cls' | 'last' | 'rank';
}

/** llama.cpp's enum llama_pooling_type. */
const POOLING_TYPES = { mean: 1, cls: 2, last: 3, rank: 4 } as const;

/** The reranker's head labels (`<arch>.classifier.output_labels`): Qwen3 rerankers' two. */
const RANK_LABELS = ['yes', 'no'];

export const DEMO_MODEL_FILE = 'task-runtime-demo.gguf';

const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
const GGUF_VERSION = 3;
const ALIGNMENT = 32;
const GGML_TYPE_F32 = 0;
const GGML_TYPE_F16 = 1;

export enum ValueType {
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
}

export type MetaValue =
  | { type: ValueType.UINT32 | ValueType.INT32 | ValueType.FLOAT32; value: number }
  | { type: ValueType.BOOL; value: boolean }
  | { type: ValueType.STRING; value: string }
  | { type: ValueType.ARRAY; itemType: ValueType.STRING; value: string[] }
  | { type: ValueType.ARRAY; itemType: ValueType.FLOAT32 | ValueType.INT32; value: number[] };

const EOS_ID = 2;
const EOS_ROW_SCALE = 3;
/** llama.cpp's llama_token_type, as `tokenizer.ggml.token_type` holds it. */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

// A few whole words so that sampled output contains word-like pieces, not only single characters.
const WORDS = [
  'the',
  'and',
  'of',
  'to',
  'in',
  'is',
  'that',
  'for',
  'it',
  'with',
  'as',
  'was',
  'on',
  'be',
  'at',
  'by',
  'this',
  'task',
  'model',
  'token',
  'runtime',
  'local',
  'stream',
  'text',
  'hello',
  'world',
  'data',
  'work',
  'time',
  'run',
];

interface Vocab {
  tokens: string[];
  scores: number[];
  types: number[];
  /** Tokens before the filler (the ones text tokenizes into). */
  textTokens: number;
}

/** First code point of the filler tokens: private-use characters, which no text tokenizes into. */
const FILLER_BASE = 0xe000;

function buildVocab(size = 0): Vocab {
  const tokens: string[] = ['<unk>', '<s>', '</s>'];
  const scores: number[] = [0, 0, 0];
  const types: number[] = [TOKEN_TYPE.unknown, TOKEN_TYPE.control, TOKEN_TYPE.control];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    scores.push(0);
    types.push(TOKEN_TYPE.byte);
  }
  // Printable ASCII as SentencePiece pieces (space is "▁"), so text tokenizes into characters, not bytes.
  for (let c = 0x20; c < 0x7f; c++) {
    tokens.push(c === 0x20 ? '\u2581' : String.fromCharCode(c));
    scores.push(-1000 - c);
    types.push(TOKEN_TYPE.normal);
  }
  // Two multi-byte characters as single tokens (exercise UTF-8 handling beyond byte tokens).
  for (const ch of ['é', '→']) {
    tokens.push(ch);
    scores.push(-2000);
    types.push(TOKEN_TYPE.normal);
  }
  WORDS.forEach((w, i) => {
    tokens.push('\u2581' + w);
    scores.push(-10 - i);
    types.push(TOKEN_TYPE.normal);
  });
  const textTokens = tokens.length;
  for (let i = 0; tokens.length < size; i++) {
    tokens.push(String.fromCodePoint(FILLER_BASE + (i % 6400)) + String.fromCodePoint(FILLER_BASE + Math.floor(i / 6400)));
    scores.push(-5000);
    types.push(TOKEN_TYPE.normal);
  }
  return { tokens, scores, types, textTokens };
}

/** mulberry32: small, fast, deterministic. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Tensor {
  name: string;
  /** GGML order: dims[0] is the innermost (row length). */
  dims: number[];
  data: Float32Array;
  /** Stored as F16 (half the bytes: large embedding tables); F32 by default. */
  f16?: boolean;
}

/** IEEE half-precision bits of `v` (round to nearest even; the random weights here are all in normal range). */
function halfBits(v: number): number {
  F32_VIEW[0] = v;
  const x = U32_VIEW[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  let mant = x & 0x7fffff;
  if (exp <= 0) return sign; // too small for a normal half: zero (no weight here is that small)
  if (exp >= 31) return sign | 0x7c00;
  let half = sign | (exp << 10) | (mant >>> 13);
  mant &= 0x1fff;
  if (mant > 0x1000 || (mant === 0x1000 && half & 1)) half++;
  return half;
}
const F32_VIEW = new Float32Array(1);
const U32_VIEW = new Uint32Array(F32_VIEW.buffer);

function tensorBytes(t: Tensor): Buffer {
  if (!t.f16) return Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const out = Buffer.alloc(t.data.length * 2);
  for (let i = 0; i < t.data.length; i++) out.writeUInt16LE(halfBits(t.data[i]), i * 2);
  return out;
}

class ByteWriter {
  private chunks: Buffer[] = [];
  length = 0;
  push(buf: Buffer): void {
    this.chunks.push(buf);
    this.length += buf.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v >>> 0);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  padTo(alignment: number): void {
    const pad = (alignment - (this.length % alignment)) % alignment;
    if (pad) this.push(Buffer.alloc(pad));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeValue(w: ByteWriter, v: MetaValue): void {
  w.u32(v.type);
  switch (v.type) {
    case ValueType.UINT32:
      w.u32(v.value);
      break;
    case ValueType.INT32:
      w.i32(v.value);
      break;
    case ValueType.FLOAT32:
      w.f32(v.value);
      break;
    case ValueType.BOOL:
      w.push(Buffer.from([v.value ? 1 : 0]));
      break;
    case ValueType.STRING:
      w.str(v.value);
      break;
    case ValueType.ARRAY:
      w.u32(v.itemType);
      w.u64(v.value.length);
      if (v.itemType === ValueType.STRING) for (const s of v.value as string[]) w.str(s);
      else if (v.itemType === ValueType.FLOAT32) for (const n of v.value as number[]) w.f32(n);
      else for (const n of v.value as number[]) w.i32(n);
      break;
  }
}

/** Random-weight tensor makers over one generator: uniform values in ±scale, ones (norms), and a matrix scaled by 1/√cols. */
export function randomTensors(rand: () => number) {
  const uniform = (n: number, scale: number): Float32Array => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = (rand() * 2 - 1) * scale;
    return a;
  };
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const matrix = (name: string, cols: number, rows: number, scale = 1 / Math.sqrt(cols)): Tensor => ({
    name,
    dims: [cols, rows],
    data: uniform(cols * rows, scale),
  });
  return { uniform, ones, matrix };
}

/** Builds the GGUF bytes in memory (deterministic for the given options). */
export function buildTestModel(opts: TestModelOptions = {}): Buffer {
  const seed = opts.seed ?? 1;
  const embd = opts.embd ?? 64;
  const layers = opts.layers ?? 2;
  const contextLength = Math.max(1024, opts.contextLength ?? 2048);
  const heads = 4;
  const headsKv = 4;
  if (embd % heads !== 0 || embd <= 0) throw new Error(`embd must be a positive multiple of ${heads}`);
  const headDim = embd / heads;
  const ff = embd * 2;
  const vocab = buildVocab(opts.vocabSize);
  const nVocab = vocab.tokens.length;
  const rand = prng(seed);
  const rank = opts.poolingType === 'rank';
  const arch = rank ? 'qwen3' : 'llama';

  const { uniform, ones, matrix } = randomTensors(rand);

  // Output rows with a larger norm win the argmax more often: text pieces get large rows so the noise reads a bit
  // like text, byte tokens small ones (they still occur, which exercises UTF-8 reassembly), and `</s>` a middling
  // one so that generations end on their own now and then (roughly every few hundred tokens).
  const outputMatrix = (): Tensor => {
    const data = uniform(embd * nVocab, 1);
    for (let t = 0; t < nVocab; t++) {
      const type = vocab.types[t];
      const rowScale = t === EOS_ID ? EOS_ROW_SCALE : type === TOKEN_TYPE.byte ? 1.5 : type === TOKEN_TYPE.normal && t < vocab.textTokens ? 4 : 0.5;
      const k = rowScale / Math.sqrt(embd);
      for (let i = 0; i < embd; i++) data[t * embd + i] *= k;
    }
    return { name: 'output.weight', dims: [embd, nVocab], data };
  };

  const tensors: Tensor[] = [
    matrix('token_embd.weight', embd, nVocab, 1),
    { name: 'output_norm.weight', dims: [embd], data: ones(embd) },
    outputMatrix(),
  ];
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`;
    tensors.push(
      { name: p + 'attn_norm.weight', dims: [embd], data: ones(embd) },
      matrix(p + 'attn_q.weight', embd, embd),
      matrix(p + 'attn_k.weight', embd, headDim * headsKv),
      matrix(p + 'attn_v.weight', embd, headDim * headsKv),
      matrix(p + 'attn_output.weight', embd, embd),
      ...(rank
        ? [
            { name: p + 'attn_q_norm.weight', dims: [headDim], data: ones(headDim) },
            { name: p + 'attn_k_norm.weight', dims: [headDim], data: ones(headDim) },
          ]
        : []),
      { name: p + 'ffn_norm.weight', dims: [embd], data: ones(embd) },
      matrix(p + 'ffn_gate.weight', embd, ff),
      matrix(p + 'ffn_up.weight', embd, ff),
      matrix(p + 'ffn_down.weight', ff, embd),
    );
  }
  if (rank) tensors.push(matrix('cls.output.weight', embd, RANK_LABELS.length, 4 / Math.sqrt(embd)));

  const u32 = (value: number): MetaValue => ({ type: ValueType.UINT32, value });
  const metadata: Array<[string, MetaValue]> = [
    ['general.architecture', { type: ValueType.STRING, value: arch }],
    ['general.name', { type: ValueType.STRING, value: 'task-runtime-demo' }],
    ['general.alignment', u32(ALIGNMENT)],
    [`${arch}.context_length`, u32(contextLength)],
    [`${arch}.embedding_length`, u32(embd)],
    [`${arch}.block_count`, u32(layers)],
    [`${arch}.feed_forward_length`, u32(ff)],
    [`${arch}.attention.head_count`, u32(heads)],
    [`${arch}.attention.head_count_kv`, u32(headsKv)],
    [`${arch}.rope.dimension_count`, u32(headDim)],
    [`${arch}.attention.layer_norm_rms_epsilon`, { type: ValueType.FLOAT32, value: 1e-5 }],
    ...(rank
      ? [[`${arch}.classifier.output_labels`, { type: ValueType.ARRAY, itemType: ValueType.STRING, value: RANK_LABELS }] as [string, MetaValue]]
      : []),
    ...(opts.poolingType ? [[`${arch}.pooling_type`, u32(POOLING_TYPES[opts.poolingType])] as [string, MetaValue]] : []),
    ['tokenizer.ggml.model', { type: ValueType.STRING, value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: ValueType.ARRAY, itemType: ValueType.STRING, value: vocab.tokens }],
    ['tokenizer.ggml.scores', { type: ValueType.ARRAY, itemType: ValueType.FLOAT32, value: vocab.scores }],
    ['tokenizer.ggml.token_type', { type: ValueType.ARRAY, itemType: ValueType.INT32, value: vocab.types }],
    ['tokenizer.ggml.unknown_token_id', u32(0)],
    ['tokenizer.ggml.bos_token_id', u32(1)],
    ['tokenizer.ggml.eos_token_id', u32(2)],
    ['tokenizer.ggml.add_bos_token', { type: ValueType.BOOL, value: true }],
    // A reranker's input is BOS query EOS document EOS (llama-server adds the EOSes only when the vocabulary says so).
    ['tokenizer.ggml.add_eos_token', { type: ValueType.BOOL, value: rank }],
  ];
  if (opts.chatTemplate) metadata.push(['tokenizer.chat_template', { type: ValueType.STRING, value: opts.chatTemplate }]);

  return encodeGguf(metadata, tensors);
}

/** GGUF v3 bytes: the key/value metadata, then the tensors (32-byte aligned). */
export function encodeGguf(metadata: ReadonlyArray<[string, MetaValue]>, tensors: readonly Tensor[]): Buffer {
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(tensors.length);
  w.u64(metadata.length);
  for (const [key, value] of metadata) {
    w.str(key);
    writeValue(w, value);
  }
  const bytes = tensors.map(tensorBytes);
  let offset = 0;
  tensors.forEach((t, i) => {
    w.str(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(t.f16 ? GGML_TYPE_F16 : GGML_TYPE_F32);
    w.u64(offset);
    offset += bytes[i].length;
    offset += (ALIGNMENT - (offset % ALIGNMENT)) % ALIGNMENT;
  });
  w.padTo(ALIGNMENT);
  for (const b of bytes) {
    w.push(b);
    w.padTo(ALIGNMENT);
  }
  return w.toBuffer();
}

/** Writes the tiny model to `outPath` atomically (temp file + rename). */
export function writeTestModel(outPath: string, opts?: TestModelOptions): void {
  writeGgufFile(outPath, buildTestModel(opts));
}

/** Writes GGUF bytes to `outPath` atomically (temp file + rename). */
export function writeGgufFile(outPath: string, bytes: Buffer): void {
  fs.mkdirSync(path.dirname(outPath), { recursive: true });
  const tmp = `${outPath}.${process.pid}.${Date.now()}.tmp`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, outPath);
}

/** Writes `<dir>/task-runtime-demo.gguf` if it is missing; returns its path. */
export function ensureDemoModel(dir: string): string {
  const target = path.join(dir, DEMO_MODEL_FILE);
  if (!fs.existsSync(target)) writeTestModel(target);
  return target;
}
