// What a LlamaBackend generation hands its onText callback, collected: the pieces with their channels, the function
// calls they make up, and the pieces as the resume segments a restarted runtime would give back (the store's view).
import type { OutputChannel, OutputSegment } from '../../src/runtime/backend';

export interface Piece {
  text: string;
  tokens: number;
  channel?: OutputChannel;
}

/** Collects the pieces; with `stop` and `ac`, aborts the generation once `stop` says so (where a SIGKILL would land). */
export function collector(stop?: (pieces: Piece[]) => boolean, ac?: AbortController) {
  const pieces: Piece[] = [];
  return {
    pieces,
    onText(text: string, tokens: number, _l?: unknown, channel?: OutputChannel) {
      pieces.push({ text, tokens, ...(channel ? { channel } : {}) });
      if (stop?.(pieces)) ac?.abort();
    },
  };
}

/** The calls in the pieces, by callId in the order they started, with their arguments text. */
export function callsOf(pieces: readonly Piece[]): Array<{ callId: string; name: string; arguments: string }> {
  const calls = new Map<string, { callId: string; name: string; arguments: string }>();
  for (const p of pieces) {
    if (p.channel?.kind !== 'function_call') continue;
    const c = calls.get(p.channel.callId) ?? { callId: p.channel.callId, name: p.channel.name, arguments: '' };
    c.arguments += p.text;
    calls.set(c.callId, c);
  }
  return [...calls.values()];
}

/** The pieces as resume segments (consecutive pieces of one channel joined). */
export function segmentsOf(pieces: readonly Piece[]): OutputSegment[] {
  const out: OutputSegment[] = [];
  for (const p of pieces) {
    const last = out.at(-1);
    if (last && JSON.stringify(last.channel) === JSON.stringify(p.channel)) last.text += p.text;
    else out.push({ ...(p.channel ? { channel: p.channel } : {}), text: p.text });
  }
  return out;
}
