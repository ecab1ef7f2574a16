// Runs the mocha integration suite (out/test/integration/suite/index.js) inside code-server's Node extension
// host, with the extension loaded from the repo as a development extension. The exit code is the one the
// workbench reports through codeAutomationExit.
// Usage: node scripts/editor-harness/runIntegration.mjs [--extension-path DIR] [--artifacts DIR]
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { format } from 'node:util';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { launchBrowser } from './browser.mjs';
import { makeProfile, remoteUri, startCodeServer, workbenchUrl } from './codeServer.mjs';
import { repoRoot } from './paths.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const extensionPath = resolve(arg('--extension-path', repoRoot));
const testsPath = resolve(arg('--tests-path', join(repoRoot, 'out/test/integration/suite/index')));
const artifacts = resolve(arg('--artifacts', join(repoRoot, 'test-results/integration')));
/**
 * A second extension loaded next to ours: it uses our language models only through vscode.lm, as any other extension
 * would (test/integration/languageModels.test.ts drives it).
 */
const consumerPath = join(repoRoot, 'test/fixtures/lm-consumer');
const timeoutMs = Number(process.env.TASK_RUNTIME_INTEGRATION_TIMEOUT_MS ?? 600_000);

export async function runIntegration() {
  if (!existsSync(`${testsPath}.js`)) throw new Error(`editor harness: ${testsPath}.js not found; run \`npm run build\` first`);
  if (!existsSync(join(extensionPath, 'package.json'))) throw new Error(`editor harness: no package.json in ${extensionPath}`);
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  const profile = makeProfile(mkdtempSync(join(tmpdir(), 'task-runtime-integration-')));
  // The web workbench takes one development extension (a second extensionDevelopmentPath replaces the first): the
  // consumer is an installed extension instead, unpacked into the profile's extensions folder.
  cpSync(consumerPath, join(profile.extensionsDir, 'task-runtime-tests.lm-consumer-0.0.1'), { recursive: true });
  const started = Date.now();
  const report = join(artifacts, 'report.txt');
  const consoleLog = join(artifacts, 'workbench-console.log');
  // The extension host inherits the server's environment: tell the suite where the user data is and where to
  // write its report (the browser console mixes the host's output with the workbench's), and ask the extension for
  // its test API (TASK_RUNTIME_TEST_API, src/extension/constants.ts).
  const server = await startCodeServer(profile, {
    logFile: join(artifacts, 'code-server.log'),
    extraEnv: { TASK_RUNTIME_TEST_USER_DATA_DIR: profile.userDataDir, TASK_RUNTIME_TEST_REPORT: report, TASK_RUNTIME_TEST_API: '1' },
  });
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    let resolveExit;
    const exited = new Promise((r) => (resolveExit = r));
    await page.exposeFunction('codeAutomationLog', (type, args) => {
      const text = Array.isArray(args) ? format(...args) : String(args);
      appendFileSync(consoleLog, `[${type}] ${text}\n`);
    });
    await page.exposeFunction('codeAutomationExit', (code) => resolveExit(Number(code)));
    page.on('pageerror', (e) => process.stderr.write(`[workbench] ${e.message}\n`));
    const url = workbenchUrl(server, {
      payload: [
        ['extensionDevelopmentPath', remoteUri(server, extensionPath)],
        ['extensionTestsPath', remoteUri(server, testsPath)],
        ['skipWelcome', 'true'],
      ],
    });
    await page.goto(url);
    let timer;
    const timedOut = new Promise((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)));
    const code = await Promise.race([exited, timedOut]);
    clearTimeout(timer);
    await page.screenshot({ path: join(artifacts, 'workbench-at-exit.png') }).catch(() => {});
    if (existsSync(report)) process.stdout.write(readFileSync(report, 'utf8'));
    else console.error(`editor harness: the suite wrote no report; the workbench console is in ${consoleLog}`);
    if (code === 'timeout') {
      console.error(
        `editor harness: the integration suite did not report an exit code within ${timeoutMs} ms (is the extension test runner loading? see ${artifacts}/code-server.log)`,
      );
      return 1;
    }
    console.log(`[integration] exit code ${code} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return code;
  } finally {
    await browser.close().catch(() => {});
    await server.stop();
    rmSync(profile.root, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runIntegration().then(
    (code) => process.exit(code),
    (e) => {
      console.error(e?.message ?? e);
      process.exit(1);
    },
  );
}
