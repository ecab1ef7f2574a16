#!/usr/bin/env bash
# Prepares .gpu-check/ (ignored by git, ≤ 64 MiB) so that scripts/gpu-check.sh can run on a GPU machine that has
# nothing installed and no network: this machine's `node` (xz), the runtime's node_modules from the packaged
# linux-x64 extension (Vulkan build only: its package carries the CPU back-ends too), and the Vulkan loader plus
# the GL vendor-neutral dispatch libraries that NVIDIA's Vulkan ICD (libGLX_nvidia.so.0) needs on a server without
# a desktop stack (Debian packages, unpacked, never installed; ../shared/design/GPU.md says why each is there).
# Run here after `npm ci && npm run build`; needs apt (Debian) for the libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-check
rm -rf "$out" && mkdir -p "$out"/libs "$out"/xlibs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# node: the binary only (the bench and the server need nothing else from the Node distribution).
tar -C "$(dirname "$(readlink -f "$(command -v node)")")" -cJf "$out/node.tar.xz" node

# node_modules from the packaged extension, without the CPU-only package.
node scripts/editor-harness/package.mjs linux-x64 --out "$work/ext.vsix" >/dev/null
unzip -q "$work/ext.vsix" 'extension/node_modules/*' -d "$work/vsix"
tar -C "$work/vsix/extension" --exclude='node_modules/@node-llama-cpp/linux-x64' -cJf "$out/node_modules.tar.xz" node_modules

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
