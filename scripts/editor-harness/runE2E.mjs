// Runs the Playwright UI suite (out/test/e2e/**/*.test.js, mocha) against code-server with the packaged .vsix
// installed into a clean extensions dir. The tests reach the server and browser through a harness object on
// globalThis (see test/e2e/support/harness.ts), so they can restart the editor.
// Usage: node scripts/editor-harness/runE2E.mjs [--vsix FILE] [--artifacts DIR] [--only TEXT]
// (--only: run just the test files whose path contains TEXT, e.g. `--only instrument`).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { launchBrowser } from './browser.mjs';
import { installExtension, makeProfile, startCodeServer, workbenchUrl } from './codeServer.mjs';
import { packageVsix } from './package.mjs';
import { repoRoot } from './paths.mjs';

const require = createRequire(join(repoRoot, 'package.json'));

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

function testFiles(dir, acc = []) {
  if (!existsSync(dir)) return acc;
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) testFiles(p, acc);
    else if (name.endsWith('.test.js')) acc.push(p);
  }
  return acc;
}

export async function runE2E() {
  const artifacts = resolve(arg('--artifacts', join(repoRoot, 'test-results/e2e')));
  const only = arg('--only');
  const files = testFiles(join(repoRoot, 'out/test/e2e')).filter((f) => !only || f.includes(only));
  if (!files.length) throw new Error('editor harness: no UI tests under out/test/e2e; run `npm run build` first');
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  const vsix = arg('--vsix') ? resolve(arg('--vsix')) : packageVsix({ out: join(artifacts, 'task-runtime-linux-x64.vsix') });

  // The built-in demo model runs at 1 500–2 600 tokens/s and ends after 30–100 tokens: its tasks are over before
  // a person (or this suite) can see one running and cancel it. So the suite's model is a larger generated one, a
  // real local .gguf through the `taskRuntime.model` setting (embd 512, 8 layers, 86 MB: ~110 tokens/s on one
  // thread here alone, ~11 under the suite's load; it runs to the end of its 1 024-token context, so every task is
  // long enough to watch and cancel, and none is empty). Its name keeps "demo" for the Chat view's picker test.
  // Measured: at 2 048 tokens of context a task took 175 s of the 180 s a test waits for it; embd 384 ended some
  // tasks at their first token (an empty result). `taskRuntime.threads: 2` exercises a number as a bound
  // (threadCalibration.ts). chat.allowAnonymousAccess: the Chat view sends with our model while nobody is signed in
  // (issue #21, measured).
  const { writeTestModel } = require(join(repoRoot, 'out/src/backends/llama/demoModel.js'));
  const profileDir = mkdtempSync(join(tmpdir(), 'task-runtime-e2e-'));
  const modelFile = join(profileDir, 'task-runtime-demo-e2e.gguf');
  writeTestModel(modelFile, { seed: 3, embd: 512, layers: 8, contextLength: 1024 });
  const profile = makeProfile(profileDir, { 'taskRuntime.model': modelFile, 'taskRuntime.threads': 2, 'chat.allowAnonymousAccess': true });
  const logFile = join(artifacts, 'code-server.log');
  const installStarted = Date.now();
  installExtension(profile, vsix);
  console.log(`[e2e] installed ${vsix} in ${((Date.now() - installStarted) / 1000).toFixed(1)} s`);

  let server;
  let port;
  const browser = await launchBrowser();
  const harness = {
    artifactsDir: artifacts,
    profile,
    get url() {
      if (!server) throw new Error('code-server is not running');
      return server.url;
    },
    async startEditor() {
      // The same port after a restart keeps the workbench origin (and its browser-side state) the same.
      server = await startCodeServer(profile, { logFile, port });
      port = server.port;
      return server.url;
    },
    async stopEditor() {
      await server?.stop();
      server = undefined;
    },
    workbenchUrl() {
      return workbenchUrl(server);
    },
    newPage() {
      return browser.newPage({ viewport: { width: 1400, height: 900 } });
    },
  };
  globalThis.taskRuntimeEditorHarness = harness;

  const Mocha = require('mocha');
  const mocha = new Mocha({ ui: 'bdd', color: false, timeout: 180_000, reporter: 'spec', bail: true });
  for (const f of files) mocha.addFile(f);
  const started = Date.now();
  try {
    await harness.startEditor();
    const { failures, passes } = await new Promise((r) => {
      const runner = mocha.run((failures) => r({ failures, passes: runner.stats?.passes ?? 0 }));
    });
    console.log(`[e2e] suite took ${((Date.now() - started) / 1000).toFixed(1)} s; artifacts in ${artifacts}`);
    console.log(`e2e: ${passes} passed, ${failures} failed`);
    return failures ? 1 : 0;
  } finally {
    delete globalThis.taskRuntimeEditorHarness;
    await browser.close().catch(() => {});
    await harness.stopEditor();
    rmSync(profile.root, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runE2E().then(
    (code) => process.exit(code),
    (e) => {
      console.error(e?.message ?? e);
      process.exit(1);
    },
  );
}
