// extensionTestsPath runner: runs the integration tests with mocha inside the editor's extension host (code-server
// or @vscode/test-electron). The returned promise rejects when a test fails, which the editor turns into exit code 1.
import { appendFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { format } from 'node:util';
import Mocha from 'mocha';

function testFiles(dir: string, acc: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) testFiles(p, acc);
    else if (name.endsWith('.test.js')) acc.push(p);
  }
  return acc;
}

/** The runner may ask for a copy of the report in a file, since the host's console is mixed with the editor's. */
function reportSink(): (line: string) => void {
  const file = process.env['TASK_RUNTIME_TEST_REPORT'];
  return (line) => {
    if (file) appendFileSync(file, line + '\n');
  };
}

export function run(): Promise<void> {
  const sink = reportSink();
  const log = console.log;
  // Mocha's reporters print through Base.consoleLog (console.log as it was when mocha loaded); tee it.
  const tee = (...args: unknown[]) => {
    sink(format(...args));
    log(...args);
  };
  const base = Mocha.reporters.Base as unknown as { consoleLog: (...args: unknown[]) => void };
  base.consoleLog = tee;
  const mocha = new Mocha({ ui: 'bdd', color: false, timeout: 120_000, reporter: 'spec' });
  const grep = process.env['TASK_RUNTIME_TEST_GREP'];
  if (grep) mocha.grep(grep);
  const files = testFiles(join(__dirname, '..'));
  if (!files.length) return Promise.reject(new Error(`no integration tests under ${join(__dirname, '..')}`));
  for (const f of files) mocha.addFile(f);
  return new Promise((resolve, reject) => {
    const runner = mocha.run((failures) => {
      const passes = runner.stats?.passes ?? 0;
      tee(`integration: ${passes} passed, ${failures} failed`);
      base.consoleLog = log;
      if (failures > 0) reject(new Error(`${failures} integration test(s) failed`));
      else resolve();
    });
  });
}
