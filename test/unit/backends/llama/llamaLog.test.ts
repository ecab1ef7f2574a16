// llama.cpp's log lines reach our log cleaned and rate-limited (llamaLog.ts; hardening issue row 6): escapes and
// control characters removed, long lines cut, a flood reduced to LINES_PER_WINDOW lines and one "dropped" line
// per window. And a real Llama made by selectLlama hands its lines to our log, not to the console.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { selectLlama } from '../../../../src/backends/llama/hardware';
import { cleanLogLine, LINES_PER_WINDOW, llamaLogger, MAX_LINE, WINDOW_MS } from '../../../../src/backends/llama/llamaLog';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';

describe('llama.cpp log lines', () => {
  it('are cleaned of terminal escapes and control characters, and cut', () => {
    assert.equal(cleanLogLine('\u001b[31mred\u001b[0m text\u0007\n'), 'red text');
    assert.equal(cleanLogLine('a\u001b]0;title\u0007b\tc\u0000d'), 'ab c d');
    const long = cleanLogLine('x'.repeat(MAX_LINE + 50));
    assert.ok(long.startsWith('x'.repeat(MAX_LINE)) && long.endsWith('(50 more characters)'));
    assert.equal(cleanLogLine('\n\n'), '');
  });

  it('a flood passes LINES_PER_WINDOW lines a window, then says how many were dropped', () => {
    let now = 1_000;
    const lines: string[] = [];
    const logger = llamaLogger(
      (l) => lines.push(l),
      () => now,
    );
    for (let i = 0; i < 500; i++) logger('error', `line ${i}\n`);
    assert.equal(lines.length, LINES_PER_WINDOW);
    assert.equal(lines[0], 'llama.cpp error: line 0');
    now += WINDOW_MS;
    logger('warn', 'after');
    assert.deepEqual(lines.slice(LINES_PER_WINDOW), [
      `llama.cpp: ${500 - LINES_PER_WINDOW} log lines dropped (more than ${LINES_PER_WINDOW} in 10 s)`,
      'llama.cpp warn: after',
    ]);
  });

  it("a Llama from selectLlama hands llama.cpp's lines to our log", async () => {
    const nlc = await importNodeLlamaCpp();
    const lines: string[] = [];
    const selection = await selectLlama(nlc, 'off', (l) => lines.push(l));
    try {
      // A grammar llama.cpp cannot parse makes it log "failed to parse grammar" (and write the text to stderr).
      await assert.rejects(selection.llama.createGrammar({ grammar: 'root ::= (' }));
      // The addon hands lines over asynchronously: wait for it, a bounded number of turns.
      await new Promise<void>((resolve, reject) => {
        let turns = 0;
        const check = () => {
          if (lines.some((l) => /failed to parse grammar/.test(l))) resolve();
          else if (++turns > 200_000) reject(new Error(`no line reached our log: ${JSON.stringify(lines)}`));
          else setImmediate(check);
        };
        check();
      });
      assert.ok(lines.every((l) => l.startsWith('llama.cpp')));
    } finally {
      await selection.llama.dispose();
    }
  });
});
