// The native engine build (src/backends/llama/nativeBuild.ts, loaded by hardware.ts): its cache key and folder, what a
// cached build's state is read as, the start-up offer, and which binary a backend loads when the build is absent,
// broken or present (real node-llama-cpp binaries; the present case needs `task-runtime build-engine` to have run on
// this machine — it compiles for minutes, so no test builds it — and says so when skipped). CLI: cliNativeBuild.test.ts.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  cmakeArguments,
  findNativeBuild,
  missingBuildTools,
  sourceDir,
  localNativeBuild,
  machineIdentity,
  MANIFEST_FILE,
  nativeBuildKey,
  nativeBuildOffer,
  nativeBuildsRoot,
  nodeLlamaCppPackage,
  type MachineIdentity,
  type NativeBuildManifest,
  NATIVE_BUILD_REVISION,
  addonPatchIds,
  removeSupersededBuilds,
  supersededBuilds,
} from '../../../../src/backends/llama/nativeBuild';
import { selectLlama } from '../../../../src/backends/llama/hardware';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { describeHardware } from '../../../../src/runtime/backend';

const machine: MachineIdentity = { platform: 'linux', arch: 'x64', cpuModel: 'Some CPU', cpuFlags: ['sse2', 'avx2', 'fma'] };

describe('native build cache key', () => {
  it('names the node-llama-cpp version, platform and arch, and hashes the CPU', () => {
    const key = nativeBuildKey('3.21.1', machine);
    assert.match(key, new RegExp(`^nlc-3\\.21\\.1-linux-x64-cpu-[0-9a-f]{12}-r${NATIVE_BUILD_REVISION}$`));
    assert.equal(nativeBuildKey('3.21.1', machine), key, 'deterministic');
    assert.equal(nativeBuildKey('3.21.1', { ...machine, cpuFlags: ['fma', 'avx2', 'sse2', 'avx2'] }), key, 'flag order and repeats do not matter');
  });
  it('changes with anything the build depends on', () => {
    const key = nativeBuildKey('3.21.1', machine);
    const others = [
      nativeBuildKey('3.22.0', machine),
      nativeBuildKey('3.21.1', { ...machine, cpuFlags: ['sse2', 'avx2'] }),
      nativeBuildKey('3.21.1', { ...machine, cpuModel: 'Other CPU' }),
      nativeBuildKey('3.21.1', { ...machine, arch: 'arm64' }),
      nativeBuildKey('3.21.1', { ...machine, platform: 'darwin' }),
    ];
    assert.equal(new Set([key, ...others]).size, others.length + 1);
  });
  it('is a safe folder name whatever the version says', () => {
    assert.match(nativeBuildKey('1.0.0/../../x y', machine), /^nlc-1\.0\.0_\.\._\.\._x_y-linux-x64-cpu-[0-9a-f]{12}-r\d+$/);
  });
  it("reads the CPU's flags (x86 flags, arm Features) from cpuinfo, sorted and unique", () => {
    assert.deepEqual(machineIdentity('processor\t: 0\nflags\t\t: sse2 avx2 fma avx2\n\nflags\t: other\n').cpuFlags, ['avx2', 'fma', 'sse2']);
    assert.deepEqual(machineIdentity('Features\t: neon asimd fp\n').cpuFlags, ['asimd', 'fp', 'neon']);
    assert.deepEqual(machineIdentity('').cpuFlags, []);
  });
});

describe('native build cache folder', () => {
  it('is $TASK_RUNTIME_NATIVE_BUILDS_DIR, else the platform cache folder, never inside node_modules', () => {
    assert.equal(nativeBuildsRoot({ TASK_RUNTIME_NATIVE_BUILDS_DIR: '/x/y' }, 'linux', '/home/u'), path.resolve('/x/y'));
    assert.equal(nativeBuildsRoot({}, 'linux', '/home/u'), path.join('/home/u', '.cache', 'task-runtime', 'native-builds'));
    assert.equal(nativeBuildsRoot({ XDG_CACHE_HOME: '/c' }, 'linux', '/home/u'), path.join('/c', 'task-runtime', 'native-builds'));
    assert.equal(nativeBuildsRoot({}, 'darwin', '/Users/u'), path.join('/Users/u', 'Library', 'Caches', 'task-runtime', 'native-builds'));
    assert.equal(nativeBuildsRoot({ LOCALAPPDATA: 'C:\\L' }, 'win32', 'C:\\U'), path.join('C:\\L', 'task-runtime', 'native-builds'));
    assert.ok(!nativeBuildsRoot().includes('node_modules'));
  });
});

describe('what a build runs and needs', () => {
  it('compiles with OpenMP, native CPU flags and one self-contained addon, into the given folder', () => {
    const args = cmakeArguments('/cache/key/build', 3);
    assert.equal(args[0], 'compile');
    for (const a of ['--CDGGML_OPENMP=ON', '--CDGGML_NATIVE=ON', '--CDBUILD_SHARED_LIBS=OFF', '--CDGGML_METAL=OFF', '--parallel=3']) {
      assert.ok(args.includes(a), `${a} in ${args.join(' ')}`);
    }
    assert.equal(args[args.indexOf('--out') + 1], '/cache/key/build');
  });
  it('names the missing tools; a prepared source needs neither git nor the source bundle', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-native-tools-'));
    try {
      const pkg = { dir: path.join(root, 'no-such-package'), version: '3.21.1', llamaCppRelease: 'v0.4.0' };
      const none = () => false;
      const all = () => true;
      assert.deepEqual(missingBuildTools(pkg, all, root), [
        "node-llama-cpp's llama.cpp source (llama/gitRelease.bundle; the packaged extension leaves it out: build with the CLI from npm)",
      ]);
      assert.deepEqual(missingBuildTools(pkg, none, root).slice(0, 4), ['cmake', 'a C++ compiler (g++ or clang++)', 'git', 'node on PATH']);
      fs.mkdirSync(sourceDir(root, pkg), { recursive: true });
      fs.writeFileSync(path.join(sourceDir(root, pkg), '.ready'), '');
      assert.deepEqual(missingBuildTools(pkg, all, root), []);
      assert.deepEqual(
        missingBuildTools(pkg, (c) => c !== 'git', root),
        [],
        'git is not needed once the source is prepared',
      );
      assert.deepEqual(
        missingBuildTools(pkg, (c) => c !== 'cmake', root),
        ['cmake'],
      );
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('a cached build as found', () => {
  let root: string;
  const key = nativeBuildKey('3.21.1', machine);
  const write = (manifest: Partial<NativeBuildManifest> | string, binding?: string) => {
    const dir = path.join(root, key);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(path.join(dir, 'build', 'Release'), { recursive: true });
    if (binding !== undefined) fs.writeFileSync(path.join(dir, 'build', 'Release', 'llama-addon.node'), binding);
    fs.writeFileSync(path.join(dir, MANIFEST_FILE), typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
  };
  const manifest = (over: Partial<NativeBuildManifest> = {}): Partial<NativeBuildManifest> => ({
    key,
    nodeLlamaCppVersion: '3.21.1',
    llamaCppRelease: 'v0.4.0',
    cmakeOptions: { GGML_OPENMP: 'ON' },
    binding: 'build/Release/llama-addon.node',
    revision: NATIVE_BUILD_REVISION,
    addonPatches: addonPatchIds(),
    ...over,
  });
  before(() => (root = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-native-'))));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it('is absent without a manifest (an interrupted build leaves none), with the command that makes one', () => {
    const s = findNativeBuild(root, key);
    assert.equal(s.state, 'absent');
    assert.match(s.state === 'absent' ? s.reason : '', /no native build for this machine.*build-engine/);
    fs.mkdirSync(path.join(root, key, 'build'), { recursive: true });
    assert.equal(findNativeBuild(root, key).state, 'absent');
  });
  it('is broken, with why, when its manifest or addon is not right', () => {
    const reasons: Array<[Partial<NativeBuildManifest> | string, string | undefined, RegExp]> = [
      ['{not json', 'x', /not JSON/],
      [manifest(), undefined, /llama-addon\.node is missing/],
      [manifest({ key: 'another' }), 'x', /names key another/],
      [manifest({ binding: '../../elsewhere.node' }), 'x', /leaves the build folder/],
      [{ key }, 'x', /lacks binding/],
    ];
    for (const [m, binding, reason] of reasons) {
      write(m, binding);
      const s = findNativeBuild(root, key);
      assert.equal(s.state, 'broken', String(reason));
      assert.match(s.state === 'broken' ? s.reason : '', reason);
    }
  });
  it('is not this build when it was made from other addon patches (or none: revision 1), so build-engine rebuilds it', () => {
    const stale: Array<Partial<NativeBuildManifest>> = [
      manifest({ revision: undefined, addonPatches: undefined }),
      manifest({ addonPatches: ['decode-and-sample.patch sha256:0000'] }),
      manifest({ revision: NATIVE_BUILD_REVISION - 1 }),
    ];
    for (const m of stale) {
      write(m, 'x');
      const s = findNativeBuild(root, key);
      assert.equal(s.state, 'broken', JSON.stringify(m));
      assert.match(s.state === 'broken' ? s.reason : '', /built from other addon patches.*build-engine rebuilds it/);
    }
  });
  it('says so when only an older build (revision 1, without the one-step patch) is there', () => {
    const older = key.replace(/-r\d+$/, '');
    fs.rmSync(path.join(root, key), { recursive: true, force: true });
    fs.mkdirSync(path.join(root, older), { recursive: true });
    fs.writeFileSync(path.join(root, older, MANIFEST_FILE), '{}');
    const s = findNativeBuild(root, key);
    assert.equal(s.state, 'absent');
    assert.match(s.state === 'absent' ? s.reason : '', new RegExp(`${older} is an older build without the one-step patch, not used`));
    fs.rmSync(path.join(root, older), { recursive: true, force: true });
  });
  it('is ready with a manifest naming an addon that exists', () => {
    write(manifest(), 'x');
    const s = findNativeBuild(root, key);
    assert.equal(s.state, 'ready');
    assert.equal(s.state === 'ready' ? s.bindingPath : '', path.join(root, key, 'build', 'Release', 'llama-addon.node'));
  });
  it('offers a build at start only where it is missing and can be made', () => {
    const absent = findNativeBuild(path.join(root, 'none'), key);
    assert.match(nativeBuildOffer(absent, []) ?? '', /build-engine.*Build Native Engine/);
    assert.equal(nativeBuildOffer(absent, ['cmake']), undefined, 'no nagging where it cannot build');
    write(manifest(), 'x');
    assert.equal(nativeBuildOffer(findNativeBuild(root, key), []), undefined, 'ready: nothing to offer');
    write(manifest(), undefined);
    assert.match(nativeBuildOffer(findNativeBuild(root, key), ['cmake']) ?? '', /unusable.*builds it again/);
  });
});

describe('builds a new revision replaces', () => {
  it("are this machine's and version's earlier revisions only, and are removed once the new one is there", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-native-old-'));
    try {
      const key = nativeBuildKey('3.21.1', machine);
      const base = key.replace(/-r\d+$/, '');
      const otherCpu = nativeBuildKey('3.21.1', { ...machine, cpuModel: 'Another CPU' });
      const otherVersion = nativeBuildKey('3.22.0', machine);
      const names = [
        base,
        `${base}-r1`,
        key,
        `${base}-r${NATIVE_BUILD_REVISION + 1}`,
        otherCpu,
        otherCpu.replace(/-r\d+$/, ''),
        otherVersion,
        'src-nlc-3.21.1-v0.4.0',
      ];
      for (const name of names) {
        fs.mkdirSync(path.join(root, name, 'build'), { recursive: true });
        fs.writeFileSync(path.join(root, name, 'build', 'llama-addon.node'), 'x');
      }
      assert.deepEqual(supersededBuilds(root, key), [base, `${base}-r1`].sort());
      const lines = removeSupersededBuilds(root, key);
      assert.equal(lines.length, 2);
      for (const line of lines) assert.match(line, new RegExp(`^removed .* which ${key} replaces$`));
      assert.deepEqual(fs.readdirSync(root).sort(), names.filter((n) => n !== base && n !== `${base}-r1`).sort());
      assert.deepEqual(supersededBuilds(root, key), []);
      assert.deepEqual(supersededBuilds(path.join(root, 'missing'), key), []);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('which binary loads (real node-llama-cpp; this machine has no GPU)', () => {
  let root: string;
  let modelPath: string;
  let key: string;
  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-native-sel-'));
    modelPath = path.join(root, 'model.gguf');
    writeTestModel(modelPath, { seed: 5 });
    key = nativeBuildKey(nodeLlamaCppPackage().version, machineIdentity());
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  async function select(nativeBuilds: string | false) {
    const nlc = await importNodeLlamaCpp();
    const logs: string[] = [];
    const selection = await selectLlama(nlc, 'off', (l) => logs.push(l), nativeBuilds);
    await selection.llama.dispose();
    return { selection, logs };
  }

  it('without looking for a build: the prebuilt binary, nothing logged about builds', async () => {
    const { selection, logs } = await select(false);
    assert.deepEqual(selection.build, { kind: 'prebuilt' });
    assert.ok(!logs.some((l) => l.startsWith('engine:')), logs.join('\n'));
  });
  it('with no build cached: the prebuilt binary, and the log says why', async () => {
    const { selection, logs } = await select(path.join(root, 'empty'));
    assert.equal(selection.build.kind, 'prebuilt');
    assert.match(selection.build.kind === 'prebuilt' ? (selection.build.reason ?? '') : '', /no native build for this machine/);
    assert.ok(
      logs.some((l) => /^engine: prebuilt binary: no native build for this machine \(key nlc-/.test(l)),
      logs.join('\n'),
    );
  });
  it('with a build whose addon does not load: the prebuilt binary, the load error logged, the model still runs', async () => {
    const broken = path.join(root, 'broken');
    fs.mkdirSync(path.join(broken, key, 'build', 'Release'), { recursive: true });
    fs.writeFileSync(path.join(broken, key, 'build', 'Release', 'llama-addon.node'), 'not an ELF file');
    const m: NativeBuildManifest = {
      key,
      nodeLlamaCppVersion: nodeLlamaCppPackage().version,
      llamaCppRelease: 'v0.4.0',
      cmakeOptions: { GGML_OPENMP: 'ON' },
      binding: 'build/Release/llama-addon.node',
      builtAt: new Date().toISOString(),
      buildSeconds: 1,
      machine: machineIdentity(),
      revision: NATIVE_BUILD_REVISION,
      addonPatches: addonPatchIds(),
    };
    fs.writeFileSync(path.join(broken, key, MANIFEST_FILE), JSON.stringify(m));
    const { selection, logs } = await select(broken);
    assert.equal(selection.build.kind, 'prebuilt');
    const reason = selection.build.kind === 'prebuilt' ? (selection.build.reason ?? '') : '';
    assert.match(reason, new RegExp(`the native build ${key} did not load \\(.*(invalid ELF|too short|file)`));
    assert.ok(
      logs.some((l) => l === `engine: prebuilt binary: ${reason}`),
      logs.join('\n'),
    );
    assert.ok(!reason.includes(broken), `the reason (GET /models shows it) names no absolute path: ${reason}`);

    // Through the backend: the model loads and generates on the prebuilt binary; the report names it.
    const lines: string[] = [];
    const backend = new LlamaBackend({ models: [{ source: modelPath }], gpu: 'off', threads: 1, nativeBuilds: broken, log: (l) => lines.push(l) });
    try {
      const id = backend.resolveModel(undefined)!;
      await backend.load(id);
      const hw = backend.listModels()[0].hardware!;
      assert.equal(hw.build?.kind, 'prebuilt');
      assert.match(hw.build?.reason ?? '', /did not load/);
      assert.match(describeHardware(hw), /prebuilt binary/);
      const r = await backend.generate(
        { model: id, messages: [{ role: 'user', content: 'hi' }], maxOutputTokens: 3, temperature: 0 },
        { signal: new AbortController().signal, onText: () => undefined },
      );
      assert.equal(r.outputTokens, 3);
    } finally {
      await backend.dispose();
    }
  });
  it("with this machine's build cached (task-runtime build-engine): the native build, named in the report", async (t) => {
    const state = localNativeBuild();
    if (state.state !== 'ready') {
      t.skip(`no native build cached here (${state.state}): run task-runtime build-engine to cover this case`);
      return;
    }
    const lines: string[] = [];
    const backend = new LlamaBackend({
      models: [{ source: modelPath }],
      gpu: 'off',
      threads: 'auto',
      nativeBuilds: nativeBuildsRoot(),
      log: (l) => lines.push(l),
    });
    try {
      const id = backend.resolveModel(undefined)!;
      await backend.load(id);
      const hw = backend.listModels()[0].hardware!;
      assert.deepEqual(hw.build, { kind: 'native', key: state.key, oneStep: true });
      assert.match(describeHardware(hw), new RegExp(`native build ${state.key} \\(one step per token\\)`));
      assert.ok(
        lines.some((l) => l.startsWith(`engine: native build ${state.key} (GGML_OPENMP=ON GGML_NATIVE=ON`)),
        lines.join('\n'),
      );
      const r = await backend.generate(
        { model: id, messages: [{ role: 'user', content: 'hi' }], maxOutputTokens: 5, temperature: 0 },
        { signal: new AbortController().signal, onText: () => undefined },
      );
      assert.equal(r.outputTokens, 5);
    } finally {
      await backend.dispose();
    }
  });
});
