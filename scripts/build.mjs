// Builds the extension and CLI bundles (esbuild, dist/), the webview bundle (dist/webview/) and the
// type-checked test/bench tree (tsc, out/).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const production = process.argv.includes('--production');
const skipTsc = process.argv.includes('--no-tsc');

// node-llama-cpp is ESM-only with prebuilt binaries and sql.js locates its .wasm beside itself: both stay in
// node_modules and are loaded at run time.
const external = ['vscode', 'node-llama-cpp', 'sql.js'];

const nodeEntries = [
  { in: 'src/extension/extension.ts', out: 'extension' },
  { in: 'src/cli/main.ts', out: 'cli' },
  // The store's checkpoint worker: foldWorkerClient.js starts it from its own directory (dist/ here, out/ under tsc).
  { in: 'src/runtime/store/checkpointWorker.ts', out: 'checkpointWorker' },
  // The grammar worker: grammarCompiler.js starts it from its own directory, like the checkpoint worker.
  { in: 'src/backends/llama/grammarWorker.ts', out: 'grammarWorker' },
].filter((e) => existsSync(join(root, e.in)));

rmSync(join(root, 'dist'), { recursive: true, force: true });
mkdirSync(join(root, 'dist'), { recursive: true });

if (nodeEntries.length) {
  await build({
    absWorkingDir: root,
    entryPoints: nodeEntries,
    outdir: 'dist',
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external,
    sourcemap: production ? false : 'linked',
    minify: production,
    logLevel: 'warning',
    banner: { js: '' },
  });
}

if (existsSync(join(root, 'webview-ui/src/main.ts'))) {
  await build({
    absWorkingDir: root,
    entryPoints: { main: 'webview-ui/src/main.ts', overview: 'webview-ui/src/overview.ts' },
    outdir: 'dist/webview',
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    sourcemap: production ? false : 'linked',
    minify: production,
    logLevel: 'warning',
  });
  const codicons = join(root, 'node_modules/@vscode/codicons/dist');
  if (existsSync(codicons)) {
    cpSync(join(codicons, 'codicon.css'), join(root, 'dist/webview/codicon.css'));
    cpSync(join(codicons, 'codicon.ttf'), join(root, 'dist/webview/codicon.ttf'));
  }
}

if (!skipTsc) {
  rmSync(join(root, 'out'), { recursive: true, force: true });
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.json')], {
    stdio: 'inherit',
  });
}

// The native build's addon patches (nativeBuild.ts reads them from `native/` beside itself): into dist/ (the CLI and
// extension bundles) and out/ (tsc's tree).
const patches = join(root, 'src/backends/llama/native');
if (existsSync(patches)) {
  cpSync(patches, join(root, 'dist/native'), { recursive: true });
  if (!skipTsc) cpSync(patches, join(root, 'out/src/backends/llama/native'), { recursive: true });
}
