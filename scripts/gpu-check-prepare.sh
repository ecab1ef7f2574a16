#!/usr/bin/env bash
# Prepares .gpu-check/ (ignored by git, ≤ 64 MiB) so that scripts/gpu-check.sh can run on a GPU machine that has
# nothing installed and no network: this machine's `node` (xz), the benches and the CLI bundled (one file each, side
# by side: the benches start their children from their own folder), the runtime's node_modules from the packaged
# linux-x64 extension (CPU and Vulkan builds), the llama.cpp source node-llama-cpp ships, prepared as build-engine
# prepares it and pruned to what llama-server (CUDA) and the native build compile (native-src.tar.xz), the
# speculative bench when branch `speculative` has added it, and the Vulkan loader plus
# the GL vendor-neutral dispatch libraries that NVIDIA's Vulkan ICD (libGLX_nvidia.so.0) needs on a server without
# a desktop stack (Debian packages, unpacked, never installed; docs/gpu.md says why each is there).
# Run here after `npm ci && npm run build`; needs apt (Debian) for the libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-check
rm -rf "$out" && mkdir -p "$out"/libs "$out"/xlibs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# node: the binary only (the bench and the server need nothing else from the Node distribution).
tar -C "$(dirname "$(readlink -f "$(command -v node)")")" -cJf "$out/node.tar.xz" node

# node_modules from the packaged extension (the CPU build too: the bench compares GPU with CPU).
node scripts/editor-harness/package.mjs linux-x64 --out "$work/ext.vsix" >/dev/null
unzip -q "$work/ext.vsix" 'extension/node_modules/*' -d "$work/vsix"
tar -C "$work/vsix/extension" -cJf "$out/node_modules.tar.xz" node_modules

# The benches and the CLI as files side by side: out/ (tsc) requires dev dependencies (zod, the MCP SDK) that the
# packaged node_modules does not have; esbuild bundles them like dist/, leaving node-llama-cpp and sql.js to
# node_modules. `require.main` is defined away in the bench entry so no other bundled module's "run me directly"
# block fires; the children and the CLI start from their own top-level code.
bundle_one() {
  npx esbuild "$1" --bundle --platform=node --format=cjs --target=node20 --log-level=warning \
    --external:node-llama-cpp --external:sql.js --outfile="$out/$2" "${@:3}"
}
bundle_one bench/gpuCheck.ts bench.js --define:require.main=undefined
bundle_one bench/batchingServeChild.ts batchingServeChild.js
bundle_one bench/nativeBuildChild.ts nativeBuildChild.js
bundle_one src/cli/main.ts cli.js
# build-engine's addon patches, where the bundled CLI looks for them (nativeBuild.ts: `native/` beside itself).
mkdir -p "$out/native" && cp src/backends/llama/native/*.patch "$out/native/"
bundle_one src/runtime/store/checkpointWorker.ts checkpointWorker.js
bundle_one src/backends/llama/grammarWorker.ts grammarWorker.js
# HOOK (issue 42 item 3): the speculative bench section, once branch `speculative` has added bench/speculative.ts —
# whatever its entry is named, the first exported function ending in "Bench" runs and prints its figures.
if [ -f bench/speculative.ts ]; then
  cat >"$work/speculativeEntry.ts" <<'TS'
import * as bench from '../../work-bench-link/speculative';
const run = Object.entries(bench).find(([k, v]) => k.endsWith('Bench') && typeof v === 'function')?.[1] as
  | ((o: Record<string, unknown>) => Promise<Record<string, unknown>>)
  | undefined;
if (!run) throw new Error('bench/speculative.ts exports no *Bench function');
run({}).then((r) => { for (const [k, v] of Object.entries(r)) console.log(k.padEnd(44), JSON.stringify(v)); process.exit(0); });
TS
  sed -i "s#../../work-bench-link/speculative#$PWD/bench/speculative#" "$work/speculativeEntry.ts"
  bundle_one "$work/speculativeEntry.ts" speculative.js --define:require.main=undefined
fi

# The llama.cpp source, as build-engine prepares it (nativeBuild.ts: node-llama-cpp's addon files beside a checkout
# of the bundled release with its patches applied, `.ready` marked), without what neither build compiles (model
# vocabularies, docs, tests, examples, other GPU backends): for llama-server (CUDA) and the native build there.
nlc=node_modules/node-llama-cpp
version=$(node -p "require('./$nlc/package.json').version")
tag=$(node -p "require('./$nlc/llama/llama.cpp.info.json').tag")
src="$work/src/src-nlc-$version-$tag"
mkdir -p "$src"
for item in CMakeLists.txt addon cmake profiles toolchains package.json llama.cpp.info.json; do
  [ -e "$nlc/llama/$item" ] && cp -r "$nlc/llama/$item" "$src/"
done
git clone --quiet "$nlc/llama/gitRelease.bundle" "$src/llama.cpp"
for patch in "$nlc"/llama/patches/*.diff; do
  [ -f "$patch" ] && git -C "$src/llama.cpp" apply "$PWD/$patch"
done
(cd "$src/llama.cpp" && rm -rf .git .github models docs tests examples gguf-py media pocs benches scripts conversion requirements \
  ggml/src/ggml-{vulkan,sycl,metal,cann,opencl,webgpu,musa,hexagon,zdnn,zendnn,openvino,virtgpu,et,hip})
date -u +%FT%TZ >"$src/.ready"
tar -C "$work/src" -cJf "$out/native-src.tar.xz" "$(basename "$src")"

# Vulkan loader + GL dispatch (into libs/), X client libraries (into xlibs/, so they never shadow the system's).
(cd "$work" && chmod 777 . && apt-get download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 \
  libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 >/dev/null)
for deb in "$work"/*.deb; do
  dir="$work/x/$(basename "$deb" .deb)"
  mkdir -p "$dir"
  dpkg -x "$deb" "$dir"
  case "$(basename "$deb")" in
    libx*|libbsd*|libmd*) dest="$out/xlibs" ;;
    *) dest="$out/libs" ;;
  esac
  find "$dir" -name '*.so*' \( -type f -o -type l \) -exec cp -a {} "$dest"/ \;
done
du -sh "$out"
size=$(du -sb "$out" | cut -f1)
[ "$size" -le $((64 * 1024 * 1024)) ] || echo "gpu-check-prepare: .gpu-check is $((size / 1024 / 1024)) MiB, over the 64 MiB a device run carries" >&2
