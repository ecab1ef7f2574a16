// Packages a platform-specific .vsix: production build, then a staging copy of the extension whose node_modules
// holds only the runtime dependencies, with node-llama-cpp's prebuilt binaries pruned to the target's variants
// (the real node_modules is never touched). No sources, tests or source maps go in.
// GPU builds ship beside the CPU one where they fit the 60 MB budget: Vulkan on linux-x64 and win32-x64 (NVIDIA,
// AMD and Intel GPUs through the driver's Vulkan), Metal on darwin-arm64. CUDA (~143 MB packed with its runtime
// libraries) does not fit; `npm i node-llama-cpp` installs it for the headless CLI, and `gpu: auto` prefers it.
// Variants npm did not install (other platforms') are fetched once from the registry with `npm pack` into
// ~/.cache/task-runtime-packages, so every target can be packaged on any machine.
// Usage: node scripts/editor-harness/package.mjs [target] [--out FILE] [--no-build]   (target default linux-x64)
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, join, relative, resolve, sep } from 'node:path';
import { repoRoot } from './paths.mjs';

/** vsce target → the @node-llama-cpp prebuilt packages it ships (CPU first, then the GPU build that fits). */
export const LLAMA_VARIANTS = {
  'linux-x64': ['linux-x64', 'linux-x64-vulkan'],
  'linux-arm64': ['linux-arm64'],
  'linux-armhf': ['linux-armv7l'],
  'darwin-arm64': ['mac-arm64-metal'],
  'darwin-x64': ['mac-x64'],
  'win32-x64': ['win-x64', 'win-x64-vulkan'],
  'win32-arm64': ['win-arm64'],
};
const PACKAGE_CACHE = join(homedir(), '.cache', 'task-runtime-packages');

/** Files inside runtime dependencies that are never loaded at run time. */
const DEPENDENCY_PRUNE = [
  // git bundle of llama.cpp sources and local build output: only for building from source, which we never do.
  'node-llama-cpp/llama/gitRelease.bundle',
  'node-llama-cpp/llama/localBuilds',
];
/**
 * Runtime dependencies never loaded by the extension: typescript is node-llama-cpp's optional peer, imported only
 * by its `inspect gpu` CLI command (dist/cli/commands/inspect/commands/InspectGpuCommand.js); 23.6 MB unpacked.
 */
const NEVER_LOADED_PACKAGES = new Set(['typescript']);
/** sql.js ships many builds; Node loads only main (dist/sql-wasm.js) and its .wasm. */
const SQLJS_KEEP = new Set(['sql-wasm.js', 'sql-wasm.wasm']);

const BUDGET_BYTES = 60 * 1024 * 1024;

function fail(msg) {
  console.error(`package: ${msg}`);
  process.exit(1);
}

function parseArgs() {
  const args = process.argv.slice(2);
  const outIdx = args.indexOf('--out');
  const out = outIdx >= 0 ? resolve(args[outIdx + 1]) : undefined;
  const positional = args.filter((a, i) => !a.startsWith('--') && (outIdx < 0 || i !== outIdx + 1));
  return { target: positional[0] ?? 'linux-x64', out, build: !args.includes('--no-build') };
}

/** Absolute paths of the installed production dependency packages (top of each node_modules chain only). */
function productionPackages() {
  const r = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
  const paths = r.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && l !== repoRoot);
  if (!paths.length) fail(`npm ls --omit=dev found no dependencies (exit ${r.status}): ${r.stderr}`);
  const top = join(repoRoot, 'node_modules') + sep;
  // Nested packages come along with their parent's directory copy.
  return paths.filter((p) => p.startsWith(top) && !relative(top, p).includes(`${sep}node_modules${sep}`));
}

function isOtherLlamaVariant(rel, variants) {
  const m = /^@node-llama-cpp\/([^/]+)/.exec(rel.split(sep).join('/'));
  return !!m && !variants.includes(m[1]);
}

/** Copies @node-llama-cpp/VARIANT@VERSION into the staging node_modules from the registry tarball (cached). */
function stageFetchedVariant(variant, version, stagingModules) {
  const name = `@node-llama-cpp/${variant}@${version}`;
  mkdirSync(PACKAGE_CACHE, { recursive: true });
  const tgz = join(PACKAGE_CACHE, `node-llama-cpp-${variant}-${version}.tgz`);
  if (!existsSync(tgz)) {
    const r = spawnSync('npm', ['pack', name, '--pack-destination', PACKAGE_CACHE, '--silent'], { encoding: 'utf8' });
    const file = r.stdout.trim().split('\n').pop();
    if (r.status !== 0 || !file || !existsSync(join(PACKAGE_CACHE, file))) fail(`npm pack ${name} failed: ${r.stderr || r.stdout}`);
    if (join(PACKAGE_CACHE, file) !== tgz) cpSync(join(PACKAGE_CACHE, file), tgz);
  }
  const dest = join(stagingModules, '@node-llama-cpp', variant);
  mkdirSync(dest, { recursive: true });
  execFileSync('tar', ['-xzf', tgz, '-C', dest, '--strip-components=1']);
}

function stage(target, variants) {
  const staging = join(tmpdir(), `task-runtime-vsix-${target}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });

  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  // The dev-only parts of the manifest do not belong in the shipped one.
  delete pkg.devDependencies;
  delete pkg.scripts;
  writeFileSync(join(staging, 'package.json'), JSON.stringify(pkg, null, 2));
  for (const f of ['README.md', 'CHANGELOG.md', 'LICENSE', 'LICENSE.md', 'package-lock.json']) {
    if (existsSync(join(repoRoot, f))) cpSync(join(repoRoot, f), join(staging, f));
  }
  if (!existsSync(join(repoRoot, 'dist/extension.js'))) fail('dist/extension.js missing (the build did not produce the extension bundle)');
  cpSync(join(repoRoot, 'dist'), join(staging, 'dist'), { recursive: true, filter: (src) => !src.endsWith('.map') });
  for (const dir of ['media', 'l10n']) {
    if (existsSync(join(repoRoot, dir))) cpSync(join(repoRoot, dir), join(staging, dir), { recursive: true });
  }
  for (const f of readdirSync(repoRoot).filter((n) => /^package\.nls(\.[\w-]+)?\.json$/.test(n))) cpSync(join(repoRoot, f), join(staging, f));

  const nm = join(repoRoot, 'node_modules');
  const staged = new Set();
  for (const dir of productionPackages()) {
    const rel = relative(nm, dir);
    if (isOtherLlamaVariant(rel, variants) || NEVER_LOADED_PACKAGES.has(rel.split(sep).join('/'))) continue;
    const m = /^@node-llama-cpp[\\/](.+)$/.exec(rel);
    if (m) staged.add(m[1]);
    cpSync(dir, join(staging, 'node_modules', rel), {
      recursive: true,
      dereference: true,
      filter: (src) => {
        const r = relative(nm, src).split(sep).join('/');
        if (DEPENDENCY_PRUNE.some((p) => r === p || r.startsWith(`${p}/`))) return false;
        if (r.startsWith('sql.js/dist/') && !SQLJS_KEEP.has(basename(r))) return false;
        if (isOtherLlamaVariant(r.replace(/^.*node_modules\//, ''), variants)) return false;
        return true;
      },
    });
  }
  const version = JSON.parse(readFileSync(join(nm, 'node-llama-cpp/package.json'), 'utf8')).version;
  for (const variant of variants) {
    if (!staged.has(variant)) stageFetchedVariant(variant, version, join(staging, 'node_modules'));
  }
  writeFileSync(
    join(staging, '.vscodeignore'),
    ['**/*.map', '**/*.ts', '!**/*.d.ts', '**/.github/**', '**/test/**', '**/tests/**', 'package-lock.json', '.vscodeignore'].join('\n') + '\n',
  );
  return staging;
}

function listVsix(vsix) {
  const out = execFileSync('unzip', ['-Z1', vsix], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return out.split('\n').filter(Boolean);
}

/** The vsix must hold the target's binary packages only, and no sources, tests or maps of ours. */
function checkContents(vsix, wanted) {
  const entries = listVsix(vsix);
  const problems = [];
  const variants = new Set(entries.map((e) => /node_modules\/@node-llama-cpp\/([^/]+)\//.exec(e)?.[1]).filter(Boolean));
  if (variants.size !== wanted.length || !wanted.every((v) => variants.has(v))) {
    problems.push(`node-llama-cpp binary packages: ${[...variants].join(', ') || 'none'} (want ${wanted.join(', ')})`);
  }
  for (const e of entries) {
    if (e.endsWith('.map')) problems.push(`map: ${e}`);
    if (/^extension\/(src|test|out|bench|webview-ui|scripts)\//.test(e)) problems.push(`source/test: ${e}`);
  }
  if (!entries.includes('extension/dist/extension.js')) problems.push('extension/dist/extension.js missing');
  return { entries, problems };
}

export function packageVsix({ target = 'linux-x64', out, build = true } = {}) {
  const variants = LLAMA_VARIANTS[target];
  if (!variants) fail(`unknown target ${target}; one of ${Object.keys(LLAMA_VARIANTS).join(', ')}`);
  const started = Date.now();
  if (build) execFileSync(process.execPath, [join(repoRoot, 'scripts/build.mjs'), '--production', '--no-tsc'], { stdio: 'inherit', cwd: repoRoot });
  const staging = stage(target, variants);
  const pkg = JSON.parse(readFileSync(join(staging, 'package.json'), 'utf8'));
  const vsix = out ?? join(repoRoot, `${pkg.name}-${target}-${pkg.version}.vsix`);
  const vsce = join(repoRoot, 'node_modules/@vscode/vsce/vsce');
  const r = spawnSync(
    process.execPath,
    [vsce, 'package', '--target', target, '--out', vsix, '--allow-missing-repository', '--skip-license', '--no-rewrite-relative-links'],
    {
      cwd: staging,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  if (r.status !== 0) fail(`vsce package exited ${r.status}`);
  const { entries, problems } = checkContents(vsix, variants);
  const size = statSync(vsix).size;
  if (size > BUDGET_BYTES) problems.push(`size ${(size / 1048576).toFixed(1)} MB over the ${BUDGET_BYTES / 1048576} MB budget`);
  if (problems.length) fail(`${vsix} rejected:\n  ${problems.slice(0, 20).join('\n  ')}`);
  rmSync(staging, { recursive: true, force: true });
  console.log(
    `package: ${vsix} (${target}, ${(size / 1048576).toFixed(1)} MB, ${entries.length} files) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return vsix;
}

if (import.meta.url === `file://${process.argv[1]}`) packageVsix(parseArgs());
