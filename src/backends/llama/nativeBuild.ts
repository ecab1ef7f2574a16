// A native engine build for this machine: node-llama-cpp 3.21.1's addon and the llama.cpp source it ships, compiled
// with OpenMP (a persistent thread pool) and native CPU flags into a cache outside node_modules, so that it survives
// `npm ci` and is shared by `serve` and the editor. The prebuilt binaries have no OpenMP and attach no ggml thread
// pool, so every decode with more than one thread makes and joins a throwaway pool (docs/hardware.md); this build
// does not. This file owns the cache: its key (node-llama-cpp's version + platform/arch + the CPU's model and flags),
// what a finished build leaves (build.json, written last), finding one, and making one (`task-runtime build-engine`,
// the editor's Build Native Engine). Loading it is hardware.ts's. Figures: docs/native-build.md.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * The revision of what build-engine compiles beyond node-llama-cpp's own source, part of the key: 2 = with
 * native/decode-and-sample.patch (one thread-pool round trip per token). A build of an older revision (revision 1 had
 * no patch and no revision in its key) is another key, so it is never mistaken for this one; build-engine makes the
 * new one and startup offers it.
 */
export const NATIVE_BUILD_REVISION = 2;
/** The manifest a finished build leaves in its folder; its presence means the build completed and loaded once. */
export const MANIFEST_FILE = 'build.json';
/** What this build changes against the prebuilt binary (and why: see the header). */
export const NATIVE_CMAKE_OPTIONS: Readonly<Record<string, string>> = {
  GGML_OPENMP: 'ON',
  GGML_NATIVE: 'ON',
  // One self-contained addon: its ggml/llama libraries cannot collide with the prebuilt binary's same-named shared
  // libraries when both are loaded in one process (the GPU probe loads a prebuilt one first).
  BUILD_SHARED_LIBS: 'OFF',
};

export interface MachineIdentity {
  platform: string;
  arch: string;
  cpuModel: string;
  /** The CPU's feature flags (x86 `flags`, arm `Features`), sorted; empty where the OS does not list them. */
  cpuFlags: string[];
}

/** This machine's identity, as a native build depends on it (-march=native). */
export function machineIdentity(cpuinfo = readCpuinfo()): MachineIdentity {
  const m = /^(?:flags|Features)\s*:\s*(.*)$/m.exec(cpuinfo);
  const cpuFlags = m ? [...new Set(m[1].trim().split(/\s+/).filter(Boolean))].sort() : [];
  return { platform: process.platform, arch: process.arch, cpuModel: os.cpus()[0]?.model.trim() ?? '', cpuFlags };
}

function readCpuinfo(): string {
  try {
    return fs.readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return '';
  }
}

/**
 * The cache key of a build: node-llama-cpp's version, platform, arch and a hash of the CPU's model and flags.
 * Another CPU (or another node-llama-cpp) is another key, so a build never loads where it was not made for.
 */
export function nativeBuildKey(nodeLlamaCppVersion: string, machine: MachineIdentity): string {
  const flags = [...new Set(machine.cpuFlags)].sort().join(' ');
  const hash = createHash('sha256').update(`${machine.platform}\n${machine.arch}\n${machine.cpuModel}\n${flags}`).digest('hex').slice(0, 12);
  const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_');
  return `nlc-${safe(nodeLlamaCppVersion)}-${safe(machine.platform)}-${safe(machine.arch)}-cpu-${hash}-r${NATIVE_BUILD_REVISION}`;
}

/** Where builds are kept: $TASK_RUNTIME_NATIVE_BUILDS_DIR, else the user's cache folder (outside node_modules). */
export function nativeBuildsRoot(env: NodeJS.ProcessEnv = process.env, platform: string = process.platform, home = os.homedir()): string {
  if (env.TASK_RUNTIME_NATIVE_BUILDS_DIR) return path.resolve(env.TASK_RUNTIME_NATIVE_BUILDS_DIR);
  const base =
    platform === 'win32'
      ? env.LOCALAPPDATA || path.join(home, 'AppData', 'Local')
      : platform === 'darwin'
        ? path.join(home, 'Library', 'Caches')
        : env.XDG_CACHE_HOME || path.join(home, '.cache');
  return path.join(base, 'task-runtime', 'native-builds');
}

export interface NativeBuildManifest {
  key: string;
  nodeLlamaCppVersion: string;
  /** The llama.cpp release node-llama-cpp ships (its llama.cpp.info.json tag). */
  llamaCppRelease: string;
  cmakeOptions: Record<string, string>;
  /** The addon, relative to the build's folder. */
  binding: string;
  builtAt: string;
  buildSeconds: number;
  machine: MachineIdentity;
  /** NATIVE_BUILD_REVISION of the build (absent: revision 1, before the one-step patch). */
  revision?: number;
  /** The patches applied to node-llama-cpp's addon source, as `<file> sha256:<hex>` (ADDON_PATCHES). */
  addonPatches?: string[];
}

/**
 * What build-engine applies to its own copy of node-llama-cpp's addon source (never to node_modules), in order:
 * decode-and-sample.patch adds `decodeBatchAndSample` (one thread-pool round trip per generated token; oneStep.ts
 * uses it where the loaded addon has it). Files beside this module in dist/ and out/ (scripts/build.mjs copies them).
 */
export const ADDON_PATCHES: readonly string[] = ['decode-and-sample.patch'];

/** Where an addon patch file is: `native/` beside this module (dist/, out/src/backends/llama/), else the source tree. */
export function addonPatchPath(name: string): string {
  const candidates = [
    path.join(__dirname, 'native', name),
    path.resolve(__dirname, '..', '..', '..', '..', 'src', 'backends', 'llama', 'native', name),
  ];
  return candidates.find((c) => fs.existsSync(c)) ?? candidates[0];
}

/** The manifest's record of the addon patches this code applies (`<file> sha256:<hex>`); throws when one is missing. */
export function addonPatchIds(): string[] {
  return ADDON_PATCHES.map(
    (name) =>
      `${name} sha256:${createHash('sha256')
        .update(fs.readFileSync(addonPatchPath(name)))
        .digest('hex')}`,
  );
}

export type NativeBuildState =
  | { state: 'ready'; key: string; dir: string; bindingPath: string; manifest: NativeBuildManifest }
  | { state: 'absent' | 'broken'; key: string; dir: string; reason: string };

/** The build for `key` under `root`: ready, absent, or broken (with why). Reads files only; loads nothing. */
export function findNativeBuild(root: string, key: string): NativeBuildState {
  const dir = path.join(root, key);
  const file = path.join(dir, MANIFEST_FILE);
  if (!fs.existsSync(file)) {
    const older = supersededBuilds(root, key).find((name) => fs.existsSync(path.join(root, name, MANIFEST_FILE)));
    const note = older ? `; ${older} is an older build without the one-step patch, not used` : '';
    return { state: 'absent', key, dir, reason: `no native build for this machine (key ${key}; task-runtime build-engine makes one)${note}` };
  }
  const broken = (why: string): NativeBuildState => ({ state: 'broken', key, dir, reason: `the native build ${key} is unusable: ${why}` });
  let manifest: NativeBuildManifest;
  try {
    manifest = JSON.parse(fs.readFileSync(file, 'utf8')) as NativeBuildManifest;
  } catch (err) {
    return broken(`${MANIFEST_FILE} is not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (!manifest || typeof manifest !== 'object' || typeof manifest.binding !== 'string' || typeof manifest.llamaCppRelease !== 'string') {
    return broken(`${MANIFEST_FILE} lacks binding/llamaCppRelease`);
  }
  if (manifest.key !== key) return broken(`${MANIFEST_FILE} names key ${String(manifest.key)}`);
  // A build of this key made from another patch (or none) is not this build: build-engine brings it up to date.
  let wanted: string[];
  try {
    wanted = addonPatchIds();
  } catch (err) {
    return broken(`an addon patch file is missing (${err instanceof Error ? err.message : String(err)})`);
  }
  const had = Array.isArray(manifest.addonPatches) ? manifest.addonPatches : [];
  if (manifest.revision !== NATIVE_BUILD_REVISION || had.join('\n') !== wanted.join('\n')) {
    return broken(
      `it was built from other addon patches (${had.join(', ') || 'none'}; now ${wanted.join(', ')}); task-runtime build-engine rebuilds it`,
    );
  }
  const bindingPath = path.resolve(dir, manifest.binding);
  if (!bindingPath.startsWith(dir + path.sep)) return broken('its binding path leaves the build folder');
  if (!fs.existsSync(bindingPath)) return broken(`${manifest.binding} is missing`);
  return { state: 'ready', key, dir, bindingPath, manifest };
}

/** node-llama-cpp's package folder, version and the llama.cpp release it ships. */
export interface NodeLlamaCppPackage {
  dir: string;
  version: string;
  llamaCppRelease: string;
}

export function nodeLlamaCppPackage(): NodeLlamaCppPackage {
  // The package's exports name only its entry (dist/index.js); its folder is two levels up.
  const dir = path.resolve(path.dirname(require.resolve('node-llama-cpp')), '..');
  const version = String((JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: unknown }).version);
  let llamaCppRelease = 'unknown';
  try {
    llamaCppRelease = String((JSON.parse(fs.readFileSync(path.join(dir, 'llama', 'llama.cpp.info.json'), 'utf8')) as { tag: unknown }).tag);
  } catch {
    // Reported by what needs it (the build); finding a build needs only the version.
  }
  return { dir, version, llamaCppRelease };
}

/** The key and state of this machine's build under the default (or given) root. */
export function localNativeBuild(root = nativeBuildsRoot()): NativeBuildState {
  return findNativeBuild(root, nativeBuildKey(nodeLlamaCppPackage().version, machineIdentity()));
}

/** The prepared llama.cpp source of a build (node-llama-cpp's addon files beside a checkout of its llama.cpp). */
export function sourceDir(root: string, pkg: NodeLlamaCppPackage): string {
  return path.join(root, `src-nlc-${pkg.version}-${pkg.llamaCppRelease}`);
}

/**
 * What a build needs that this machine lacks (empty: it can build). With the source already prepared under `root`
 * (an earlier build, or a GPU check's carried copy), neither git nor node-llama-cpp's source bundle is needed.
 */
export function missingBuildTools(pkg: NodeLlamaCppPackage | undefined, has: (cmd: string) => boolean = onPath, root = nativeBuildsRoot()): string[] {
  const missing: string[] = [];
  const prepared = pkg !== undefined && fs.existsSync(path.join(sourceDir(root, pkg), '.ready'));
  if (!has('cmake')) missing.push('cmake');
  if (!['c++', 'g++', 'clang++'].some(has) && process.platform !== 'win32') missing.push('a C++ compiler (g++ or clang++)');
  if (!prepared && !has('git')) missing.push('git');
  // node-llama-cpp's CMakeLists runs `node` to find node-addon-api's headers.
  if (!has('node')) missing.push('node on PATH');
  if (pkg && !prepared && !fs.existsSync(path.join(pkg.dir, 'llama', 'gitRelease.bundle'))) {
    missing.push("node-llama-cpp's llama.cpp source (llama/gitRelease.bundle; the packaged extension leaves it out: build with the CLI from npm)");
  }
  return missing;
}

function onPath(cmd: string): boolean {
  const probe =
    process.platform === 'win32' ? spawnSync('where', [cmd], { stdio: 'ignore' }) : spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
  return probe.status === 0;
}

export interface BuildProgress {
  /** 'source' (copying/cloning), 'configure', 'compile' (with fraction), 'verify', 'done'. */
  phase: 'source' | 'configure' | 'compile' | 'verify' | 'done';
  /** 0..1 of the compile steps, when the build tool says. */
  fraction?: number;
  message: string;
}

export interface BuildOptions {
  root?: string;
  /** Parallel compile jobs (default: the cores). */
  jobs?: number;
  onProgress?: (p: BuildProgress) => void;
  /** The compiler's own lines (for a log). */
  onOutput?: (line: string) => void;
  signal?: AbortSignal;
}

/** The cmake-js `compile` arguments of a native build (what node-llama-cpp passes for its own source builds). */
export function cmakeArguments(outDir: string, jobs: number): string[] {
  const platform = process.platform === 'win32' ? 'win' : process.platform === 'darwin' ? 'mac' : process.platform;
  const options: Record<string, string> = {
    GGML_BUILD_NUMBER: '1',
    CMAKE_CONFIGURATION_TYPES: 'Release',
    NLC_CURRENT_PLATFORM: `${platform}-${process.arch}`,
    NLC_TARGET_PLATFORM: `${platform}-${process.arch}`,
    NLC_VARIANT: 'native',
    // CPU only: a GPU runs on node-llama-cpp's prebuilt GPU binaries (hardware.ts).
    GGML_METAL: 'OFF',
    GGML_CCACHE: 'OFF',
    LLAMA_CURL: 'OFF',
    LLAMA_HTTPLIB: 'OFF',
    LLAMA_BUILD_BORINGSSL: 'OFF',
    LLAMA_OPENSSL: 'OFF',
    ...NATIVE_CMAKE_OPTIONS,
  };
  return [
    'compile',
    '--log-level',
    'warn',
    '--config',
    'Release',
    `--arch=${process.arch}`,
    '--out',
    outDir,
    `--parallel=${jobs}`,
    ...Object.entries(options).map(([k, v]) => `--CD${k}=${v}`),
  ];
}

class BuildError extends Error {}

/**
 * Builds this machine's native engine into the cache (minutes: ~13 CPU-minutes here) and returns it once it loaded
 * in a child process. Idempotent: a ready build is returned as is; an interrupted one continues (the build tool's
 * own incremental build). Throws with the step that failed and its last output lines.
 */
export async function buildNativeEngine(options: BuildOptions = {}): Promise<NativeBuildState & { state: 'ready' }> {
  const root = options.root ?? nativeBuildsRoot();
  const pkg = nodeLlamaCppPackage();
  const machine = machineIdentity();
  const key = nativeBuildKey(pkg.version, machine);
  const found = findNativeBuild(root, key);
  if (found.state === 'ready') return found;
  const missing = missingBuildTools(pkg, undefined, root);
  if (missing.length) throw new BuildError(`cannot build the native engine here: missing ${missing.join(', ')}`);
  const progress = options.onProgress ?? (() => {});
  const output = options.onOutput ?? (() => {});
  const started = Date.now();
  const dir = path.join(root, key);
  fs.rmSync(path.join(dir, MANIFEST_FILE), { force: true });
  fs.mkdirSync(dir, { recursive: true });

  const src = sourceDir(root, pkg);
  if (!fs.existsSync(path.join(src, '.ready'))) {
    progress({ phase: 'source', message: `preparing the llama.cpp ${pkg.llamaCppRelease} source node-llama-cpp ${pkg.version} ships` });
    fs.rmSync(src, { recursive: true, force: true });
    fs.mkdirSync(src, { recursive: true });
    const llamaDir = path.join(pkg.dir, 'llama');
    for (const item of ['CMakeLists.txt', 'addon', 'cmake', 'profiles', 'toolchains', 'package.json', 'llama.cpp.info.json']) {
      if (fs.existsSync(path.join(llamaDir, item))) fs.cpSync(path.join(llamaDir, item), path.join(src, item), { recursive: true });
    }
    await run(
      'git clone',
      'git',
      ['clone', '--quiet', path.join(llamaDir, 'gitRelease.bundle'), path.join(src, 'llama.cpp')],
      {},
      output,
      options.signal,
    );
    const patches = path.join(llamaDir, 'patches');
    const diffs = fs.existsSync(patches) ? fs.readdirSync(patches).filter((f) => f.endsWith('.diff') || f.endsWith('.patch')) : [];
    for (const diff of diffs.sort()) {
      await run('git apply', 'git', ['apply', path.join(patches, diff)], { cwd: path.join(src, 'llama.cpp') }, output, options.signal);
    }
    fs.writeFileSync(path.join(src, '.ready'), new Date().toISOString());
  }
  progress({ phase: 'source', message: `applying ${ADDON_PATCHES.join(', ')} to the addon source` });
  const addonPatches = addonPatchIds();
  await patchAddonSource(pkg, src, output, options.signal);

  const jobs = options.jobs ?? Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
  const cmakeJs = require.resolve('cmake-js/bin/cmake-js', { paths: [pkg.dir] });
  const addonApi = path.dirname(require.resolve('node-addon-api/package.json', { paths: [pkg.dir] }));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    // node-llama-cpp's CMakeLists asks `node` for node-addon-api from the source folder, outside any node_modules.
    NODE_PATH: [path.dirname(addonApi), process.env.NODE_PATH].filter(Boolean).join(path.delimiter),
    ELECTRON_RUN_AS_NODE: '1',
  };
  const outDir = path.join(dir, 'build');
  progress({ phase: 'configure', message: `configuring (OpenMP, native CPU flags, ${jobs} job(s)) in ${outDir}` });
  await run(
    'compile',
    process.execPath,
    [cmakeJs, ...cmakeArguments(outDir, jobs)],
    { cwd: src, env },
    (line) => {
      output(line);
      const m = /^\[(\d+)\/(\d+)\]/.exec(line) ?? /^\[\s*(\d+)%\]/.exec(line);
      if (m) {
        const fraction = m[2] ? Number(m[1]) / Number(m[2]) : Number(m[1]) / 100;
        progress({ phase: 'compile', fraction, message: `compiling ${Math.round(fraction * 100)} %` });
      }
    },
    options.signal,
  );
  const candidates = ['Release/llama-addon.node', 'llama-addon.node', 'bin/llama-addon.node'];
  const binding = candidates.map((c) => path.join('build', c)).find((c) => fs.existsSync(path.join(dir, c)));
  if (!binding) throw new BuildError(`compile: the build finished without llama-addon.node in ${outDir}`);

  progress({ phase: 'verify', message: 'loading the build in a child process' });
  await verifyBinding(path.join(dir, binding), output, options.signal);
  const manifest: NativeBuildManifest = {
    key,
    nodeLlamaCppVersion: pkg.version,
    llamaCppRelease: pkg.llamaCppRelease,
    cmakeOptions: { ...NATIVE_CMAKE_OPTIONS },
    binding: binding.split(path.sep).join('/'),
    builtAt: new Date().toISOString(),
    buildSeconds: Math.round((Date.now() - started) / 1000),
    machine,
    revision: NATIVE_BUILD_REVISION,
    addonPatches,
  };
  const tmp = path.join(dir, `${MANIFEST_FILE}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(manifest, null, 2));
  fs.renameSync(tmp, path.join(dir, MANIFEST_FILE));
  progress({ phase: 'done', message: `native engine ${key} built in ${manifest.buildSeconds} s` });
  const ready = findNativeBuild(root, key);
  if (ready.state !== 'ready') throw new BuildError(ready.reason);
  for (const line of removeSupersededBuilds(root, key)) progress({ phase: 'done', message: line });
  return ready;
}

/**
 * The builds in `root` that the build `key` replaces: this machine's and node-llama-cpp version's builds of an
 * earlier revision (revision 1 had no `-rN` in its key). Builds for another CPU or version are not touched.
 */
export function supersededBuilds(root: string, key: string): string[] {
  const m = /^(.*)-r(\d+)$/.exec(key);
  if (!m) return [];
  const [, base, revision] = m;
  let names: string[];
  try {
    names = fs.readdirSync(root);
  } catch {
    return [];
  }
  return names
    .filter((name) => {
      if (name === base) return true;
      const older = /^(.*)-r(\d+)$/.exec(name);
      return older !== null && older[1] === base && Number(older[2]) < Number(revision);
    })
    .sort();
}

/**
 * Removes the builds `key` replaces (a revision-1 build is ~270 MB with its objects), once `key` is ready: what each
 * removal did, as lines for the build's progress. A build another process still has loaded keeps working where the
 * OS allows unlinking it (POSIX); where it does not, the build is left, and the line says why.
 */
export function removeSupersededBuilds(root: string, key: string): string[] {
  return supersededBuilds(root, key).map((name) => {
    try {
      fs.rmSync(path.join(root, name), { recursive: true, force: true });
      return `removed ${name}, which ${key} replaces`;
    } catch (err) {
      return `kept ${name} (replaced by ${key}): ${(err as Error).message}`;
    }
  });
}

/**
 * Makes the build's addon source node-llama-cpp's own plus ADDON_PATCHES: the pristine addon is copied to a scratch
 * folder, patched there with `git apply` (a node-llama-cpp whose addon moved fails here, naming the patch), and only
 * the files whose content differs are written into the source, so an incremental build recompiles just those.
 */
async function patchAddonSource(pkg: NodeLlamaCppPackage, src: string, output: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-addon-'));
  try {
    fs.cpSync(path.join(pkg.dir, 'llama', 'addon'), path.join(scratch, 'addon'), { recursive: true });
    // The scratch folder may lie inside some git work tree: the ceiling keeps `git apply` from finding it (inside
    // one, paths are taken from its top and the patch would be skipped).
    const env = { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(fs.realpathSync(scratch)) };
    for (const name of ADDON_PATCHES) {
      await run(`git apply ${name}`, 'git', ['apply', addonPatchPath(name)], { cwd: scratch, env }, output, signal);
    }
    syncTree(path.join(scratch, 'addon'), path.join(src, 'addon'));
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** Copies `from` into `to`, writing only files whose content differs (their mtimes drive the incremental build). */
function syncTree(from: string, to: string): void {
  fs.mkdirSync(to, { recursive: true });
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const a = path.join(from, entry.name);
    const b = path.join(to, entry.name);
    if (entry.isDirectory()) {
      syncTree(a, b);
      continue;
    }
    const content = fs.readFileSync(a);
    if (fs.existsSync(b) && fs.readFileSync(b).equals(content)) continue;
    fs.writeFileSync(b, content);
  }
}

/** Loads the addon and initializes its backends in a child process: a build that crashes never takes us down. */
async function verifyBinding(bindingPath: string, output: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const script = `const b = require(${JSON.stringify(bindingPath)}); if (typeof b.AddonContext.prototype.decodeBatchAndSample !== 'function') { console.error('the addon lacks decodeBatchAndSample (decode-and-sample.patch)'); process.exit(4); } b.loadBackends(); b.init().then(() => { process.stdout.write('ok ' + (b.getGpuType() || 'cpu') + '\\n'); process.exit(0); }, (e) => { console.error(e); process.exit(3); });`;
  await run('verify', process.execPath, ['-e', script], { env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' } }, output, signal);
}

function run(
  step: string,
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv },
  onLine: (line: string) => void,
  signal?: AbortSignal,
): Promise<void> {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const take = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split(/\r?\n/)) {
        if (!line.trim()) continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        onLine(line);
      }
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const abort = () => child.kill('SIGTERM');
    signal?.addEventListener('abort', abort, { once: true });
    child.once('error', (err) => {
      signal?.removeEventListener('abort', abort);
      reject(new BuildError(`${step}: ${cmd}: ${err.message}`));
    });
    child.once('close', (code, sig) => {
      signal?.removeEventListener('abort', abort);
      if (signal?.aborted) return reject(new BuildError(`${step}: cancelled`));
      if (code === 0) return resolve();
      reject(new BuildError(`${step} failed (${code ?? sig}):\n${tail.join('\n')}`));
    });
  });
}

/**
 * What to tell a user at start about the native build (serve: a log line; the editor: a notification): undefined when
 * it is in use or cannot be built here (tools missing: then nothing nags), else the offer.
 */
export function nativeBuildOffer(state: NativeBuildState, missingTools: readonly string[]): string | undefined {
  if (state.state === 'ready') return undefined;
  if (state.state === 'broken') return `${state.reason}; task-runtime build-engine builds it again (the prebuilt binary is used meanwhile)`;
  if (missingTools.length) return undefined;
  return (
    "no native engine build for this machine: node-llama-cpp's prebuilt binary is used. `task-runtime build-engine` " +
    '(editor: "Task Runtime: Build Native Engine") compiles one with OpenMP and native CPU flags in minutes; ' +
    'measured here 1.4x tokens/s on a 674 MB model and 2 threads faster than 1 (docs/native-build.md)'
  );
}

/**
 * The start-up offer for this machine (serve logs it, the editor shows it), or undefined where a build is in use or
 * cannot be made here. The tools are looked for (a few blocking `command -v`) only where no build is ready.
 */
export function startupBuildOffer(root = nativeBuildsRoot()): string | undefined {
  const pkg = nodeLlamaCppPackage();
  const state = findNativeBuild(root, nativeBuildKey(pkg.version, machineIdentity()));
  return state.state === 'ready' ? undefined : nativeBuildOffer(state, missingBuildTools(pkg, undefined, root));
}
