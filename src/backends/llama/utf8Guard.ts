// Keeps byte-fallback tokens (SentencePiece `<0xNN>`) to valid UTF-8 while a grammar constrains the output.
//
// Why: llama.cpp's grammar decodes a multi-byte character from its lead byte and accepts any continuation bytes, so it
// admits overlong forms, surrogates and bytes that start no character (C0, C1, F5–FF, a lone continuation byte). Those
// decode to U+FFFD — one grammar character becomes up to four string characters, and a `maxLength` the grammar kept
// is broken in the delivered JSON (seen on the demo model: `"5`k byw����"` against maxLength 8). The guard bans, by a
// token bias evaluated per sampled token, every byte token that would make the bytes so far invalid UTF-8, and in the
// middle of a character every token but the continuation bytes it allows. Vocabularies without byte tokens (byte-level
// BPE) get no guard (undefined).
//
// Speculative decoding (speculative.ts) samples several positions in one decode, each before the generation loop has
// accepted the token before it: `drafted` tells the guard a decode's drafted tokens, and the k-th bias asked for after
// it is the bias after those k drafts — the only case in which that position's sample is kept.

import type { LlamaModel, Token, TokenBias } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { NodeLlamaCpp } from './nodeLlamaCpp';

export interface Utf8Guard {
  /** The bias for the next token. */
  bias(): TokenBias;
  /** A token was sampled (delivered). */
  accept(token: Token): void;
  /** The next decode evaluates these drafted tokens after the last accepted one (header). */
  drafted(tokens: readonly Token[]): void;
}

/** Continuation bytes still needed, and the range the next one must fall in. */
interface Pending {
  need: number;
  range: [number, number];
}

export function utf8Guard(nlc: NodeLlamaCpp, model: LlamaModel): Utf8Guard | undefined {
  const names = (model.fileInfo.metadata.tokenizer as { ggml?: { tokens?: readonly string[] } } | undefined)?.ggml?.tokens;
  if (!names) return undefined;
  const byteOf = new Map<number, number>();
  names.forEach((n, id) => {
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(n);
    if (m) byteOf.set(id, parseInt(m[1]!, 16));
  });
  if (byteOf.size < 256) return undefined;
  const make = (banned: (id: number) => boolean) => {
    const b = new nlc.TokenBias(model.tokenizer);
    for (let id = 0; id < names.length; id++) if (banned(id)) b.set(id as Token, 'never');
    return b;
  };
  const boundary = make((id) => {
    const byte = byteOf.get(id);
    return byte !== undefined && ((byte >= 0x80 && byte <= 0xc1) || byte >= 0xf5);
  });
  const within = new Map<string, TokenBias>();
  const only = (lo: number, hi: number) => {
    const key = `${lo}-${hi}`;
    let b = within.get(key);
    if (!b) {
      b = make((id) => {
        const byte = byteOf.get(id);
        return byte === undefined || byte < lo || byte > hi;
      });
      within.set(key, b);
    }
    return b;
  };
  /** After the accepted tokens. */
  let state: Pending = { need: 0, range: [0x80, 0xbf] };
  /** The current decode's drafts and how many biases it has asked for. */
  let drafts: readonly Token[] = [];
  let asked = 0;
  const step = (s: Pending, token: Token): Pending => {
    const byte = byteOf.get(token);
    if (byte === undefined) return { need: 0, range: s.range };
    if (s.need > 0) return { need: s.need - 1, range: [0x80, 0xbf] };
    if (byte < 0x80) return { need: 0, range: s.range };
    if (byte <= 0xdf) return { need: 1, range: [0x80, 0xbf] };
    if (byte <= 0xef) return { need: 2, range: byte === 0xe0 ? [0xa0, 0xbf] : byte === 0xed ? [0x80, 0x9f] : [0x80, 0xbf] };
    return { need: 3, range: byte === 0xf0 ? [0x90, 0xbf] : byte === 0xf4 ? [0x80, 0x8f] : [0x80, 0xbf] };
  };
  return {
    bias: () => {
      let s = state;
      for (let i = 0; i < Math.min(asked, drafts.length); i++) s = step(s, drafts[i]!);
      asked++;
      return s.need === 0 ? boundary : only(s.range[0], s.range[1]);
    },
    accept(token) {
      state = step(state, token);
      drafts = [];
      asked = 0;
    },
    drafted(tokens) {
      drafts = tokens.slice();
      asked = 0;
    },
  };
}
