// `npm run test:vscode`: the same mocha integration suite in a desktop VS Code downloaded by
// @vscode/test-electron, for machines that can reach the VS Code download service (not this CI, which uses
// code-server: npm run test:editor). Needs a display on Linux (run under xvfb-run).
// Usage: node scripts/editor-harness/runVscode.mjs [vscode version, default stable]
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './paths.mjs';

const require = createRequire(join(repoRoot, 'package.json'));
const { runTests } = require('@vscode/test-electron');

const root = mkdtempSync(join(tmpdir(), 'task-runtime-vscode-'));
const userDataDir = join(root, 'user-data');
const report = join(root, 'report.txt');
mkdirSync(userDataDir, { recursive: true });
let code = 1;
try {
  code = await runTests({
    version: process.argv[2] ?? 'stable',
    // Ours, and the fixture extension that uses our language models through vscode.lm (as runIntegration.mjs).
    extensionDevelopmentPath: [repoRoot, join(repoRoot, 'test/fixtures/lm-consumer')],
    extensionTestsPath: join(repoRoot, 'out/test/integration/suite/index'),
    launchArgs: [
      join(root),
      '--user-data-dir',
      userDataDir,
      '--extensions-dir',
      join(root, 'extensions'),
      '--disable-workspace-trust',
      '--skip-welcome',
    ],
    extensionTestsEnv: { TASK_RUNTIME_TEST_USER_DATA_DIR: userDataDir, TASK_RUNTIME_TEST_REPORT: report, TASK_RUNTIME_TEST_API: '1' },
  }).then(
    () => 0,
    () => 1,
  );
  try {
    process.stdout.write(readFileSync(report, 'utf8'));
  } catch {
    console.error('test:vscode: the suite wrote no report');
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
process.exit(code);
