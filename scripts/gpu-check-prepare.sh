#!/usr/bin/env bash
# Prepares .gpu-check/ (ignored by git, ≤ 64 MiB) so that scripts/gpu-check.sh can run on a GPU machine that has
# nothing installed and no network: this machine's `node` (xz), the hardware bench bundled into one file, the
# runtime's node_modules from the packaged linux-x64 extension (CPU and Vulkan builds), and the Vulkan loader plus
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

# The hardware bench as one file: out/ (tsc) requires dev dependencies (zod, the MCP SDK) that the packaged
# node_modules does not have; esbuild bundles them like dist/, leaving node-llama-cpp and sql.js to node_modules.
npx esbuild bench/gpuCheck.ts --bundle --platform=node --format=cjs --target=node20 --log-level=warning \
  --define:require.main=undefined --external:node-llama-cpp --external:sql.js --outfile="$out/hardware-bench.js"

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
