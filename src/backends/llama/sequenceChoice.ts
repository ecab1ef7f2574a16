// Which kept sequence of a model's context a generation takes (contextPool.ts acquire): prefix reuse, and the cache
// key of a conversation (an agent's prompt_cache_key or session). Agents' conversations share a long
// system-and-tools head, and by prefix alone a new conversation takes the sequence holding another's whole history
// and erases it; so a key goes back to its own sequence, and no request erases more of another key's conversation
// than it reuses while a fresh sequence is free. Pure, so the rule is tested without a model.
import type { Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };

/** A free sequence as acquire weighs it: its id, its kept tokens, the cache key it last ran for. */
export interface SequenceCandidate {
  id: number;
  tokens: readonly Token[];
  owner?: string;
}

/** Leading tokens `a` and `b` share. */
export function commonPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Which free sequence a generation that evaluates `tokens` first should take (its index), or -1 for a fresh one
 * (only when `freshAvailable`). In order: a sequence this cache key last ran on that shares anything; else the
 * longest shared prefix, a sequence of no key winning ties with one of another key, then the lowest id (busy ids stay
 * contiguous); but a sequence of another key is passed over, for a fresh one or one that costs no one, when taking it
 * would erase more of that conversation than it saves this one (the header's reason). A fresh sequence also when no
 * kept one shares anything, so that kept prefixes stay for someone they fit.
 */
export function pickSequence(
  candidates: readonly SequenceCandidate[],
  tokens: readonly Token[],
  cacheKey: string | undefined,
  freshAvailable: boolean,
): number {
  let best = -1;
  let bestScore: number[] | undefined;
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i]!;
    const shared = commonPrefix(c.tokens, tokens);
    const own = shared > 0 && cacheKey !== undefined && c.owner === cacheKey;
    const othersLoss = c.owner !== undefined && !own ? c.tokens.length - shared : 0;
    // Compared in order, larger wins; the id negated so that the lowest wins the last tie.
    const score = [own ? 1 : 0, othersLoss <= shared ? 1 : 0, shared, c.owner === undefined ? 1 : 0, -c.id];
    if (!bestScore || beats(score, bestScore)) {
      best = i;
      bestScore = score;
    }
  }
  if (!bestScore) return -1;
  const [own, harmless, shared] = bestScore;
  if (freshAvailable && (shared <= 0 || (!own && !harmless))) return -1;
  return best;
}

/** `a` before `b` in lexicographic order, larger first. */
function beats(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return false;
}
