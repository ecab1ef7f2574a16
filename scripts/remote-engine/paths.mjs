// Where the remote-engine tests keep the llama-server they build (outside the repo).
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const llamaSource = join(repoRoot, 'node_modules/node-llama-cpp/llama');
export const cacheDir = process.env.TASK_RUNTIME_ENGINES_DIR || join(homedir(), '.cache/task-runtime-engines');
export const engineMarker = join(cacheDir, 'ready.json');
export const serverBinary = (tag) => join(cacheDir, `llama.cpp-${tag}`, 'build/bin/llama-server');
