// Runs the LlamaBackend unit tests on the patched native build instead of the prebuilt binary (a check by hand of the
// one-step path, oneStep.ts, under every generation feature those tests cover):
//   node --import ./scripts/force-native.mjs --test out/test/unit/backends/llama/llamaBackend.test.js
// Every Llama a backend selects without a native build folder gets $TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR (else the
// native suite's cache, ~/.cache/task-runtime/test-native-builds); one that does not load there fails the test.
// Needs `npm run build` and a build in that folder (node scripts/test.mjs native makes one).
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

// The CommonJS module LlamaBackend calls (tsc's out/): its export is replaced in place.
const here = path.dirname(fileURLToPath(import.meta.url));
const hardware = createRequire(import.meta.url)(path.join(here, '..', 'out', 'src', 'backends', 'llama', 'hardware.js'));

const root = process.env.TASK_RUNTIME_TEST_NATIVE_BUILDS_DIR || path.join(os.homedir(), '.cache', 'task-runtime', 'test-native-builds');
const select = hardware.selectLlama;
let loaded = 0;
hardware.selectLlama = async (nlc, choice, log, nativeBuilds) => {
  const selection = await select(nlc, choice, log, nativeBuilds === false ? root : nativeBuilds);
  if (selection.build.kind !== 'native') throw new Error(`force-native: the native build did not load: ${JSON.stringify(selection.build)}`);
  loaded++;
  return selection;
};
process.on('exit', () => {
  if (loaded) process.stderr.write(`[force-native] ${loaded} Llama(s) on the native build in ${root}\n`);
});
