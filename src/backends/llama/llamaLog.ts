// llama.cpp's own log lines, routed into ours. Without a logger node-llama-cpp prints them to the console, and
// what its addon cannot hand to JavaScript goes to stdout, which for `serve` must carry the ready line alone. A
// grammar llama.cpp failed to parse was written out whole (~3 MB/s sustained, terminal escapes raw): here every
// line is cleaned of escapes and control characters, cut to MAX_LINE characters, and at most LINES_PER_WINDOW lines
// pass per WINDOW_MS, the rest counted and reported as dropped when the next window opens.
// (The parse error text itself is written by llama.cpp to stderr directly; jsonSchema.ts keeps every grammar we
// build within its parser's limits, so it is not reached.)

export const MAX_LINE = 400;
export const LINES_PER_WINDOW = 20;
export const WINDOW_MS = 10_000;

const ESCAPES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b./g;
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]+/g;

/** One line of llama.cpp's text as our log shows it: no escapes, no control characters, at most MAX_LINE. */
export function cleanLogLine(text: string): string {
  const clean = text.replace(ESCAPES, '').replace(CONTROLS, ' ').trim();
  return clean.length > MAX_LINE ? `${clean.slice(0, MAX_LINE)}… (${clean.length - MAX_LINE} more characters)` : clean;
}

/** node-llama-cpp's `logger` option: (level, message) → `log`, cleaned and rate-limited. `now`: the clock. */
export function llamaLogger(log: (line: string) => void, now: () => number = Date.now): (level: string, message: string) => void {
  let windowStart = Number.NEGATIVE_INFINITY;
  let passed = 0;
  let dropped = 0;
  return (level, message) => {
    const line = cleanLogLine(message);
    if (!line) return;
    const t = now();
    if (t - windowStart >= WINDOW_MS) {
      if (dropped > 0)
        log(`llama.cpp: ${dropped} log line${dropped === 1 ? '' : 's'} dropped (more than ${LINES_PER_WINDOW} in ${WINDOW_MS / 1000} s)`);
      windowStart = t;
      passed = 0;
      dropped = 0;
    }
    if (passed >= LINES_PER_WINDOW) {
      dropped++;
      return;
    }
    passed++;
    log(`llama.cpp ${level}: ${line}`);
  };
}
