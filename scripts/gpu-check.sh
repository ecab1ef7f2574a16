#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, runs the `hardware` bench (bench/hardware.ts) on the Vulkan build and
# prints the ratios: raw GPU vs LMSP SSE tokens/s (goal ≥ 0.9), first-delta overhead (goal ≤ 5 ms), GPU vs CPU, and
# `auto` threads vs the best count. Installs nothing and reaches no network.
#
# Where the repo is set up (npm ci && npm run build): bash scripts/gpu-check.sh
# On a bare GPU machine: prepare on a set-up one with `bash scripts/gpu-check-prepare.sh` (writes .gpu-check/),
# then copy the repo with .gpu-check/ over and run this script there.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=$PWD/.gpu-check

NODE=${NODE:-$(command -v node || true)}
if [ -z "$NODE" ] && [ -f "$bundle/node.tar.xz" ]; then
  [ -x "$bundle/bin/node" ] || { mkdir -p "$bundle/bin" && tar -xJf "$bundle/node.tar.xz" -C "$bundle/bin"; }
  NODE=$bundle/bin/node
fi
[ -n "$NODE" ] || { echo "gpu-check: no node (put it on PATH, set NODE, or run scripts/gpu-check-prepare.sh)" >&2; exit 2; }

if [ ! -d node_modules/node-llama-cpp ]; then
  [ -f "$bundle/node_modules.tar.xz" ] || { echo "gpu-check: no node_modules (npm ci, or scripts/gpu-check-prepare.sh)" >&2; exit 2; }
  tar -xJf "$bundle/node_modules.tar.xz" -C .
fi
# The bundled bench from the prepared bundle, else the build's (which needs the dev dependencies of npm ci).
# GPU_CHECK_BENCH: another script to run in the same setting (e.g. a bundled experiment).
bench=out/bench/hardware.js
[ -f "$bundle/hardware-bench.js" ] && [ ! -d node_modules/zod ] && bench=$bundle/hardware-bench.js
bench=${GPU_CHECK_BENCH:-$bench}
[ -f "$bench" ] || { echo "gpu-check: $bench missing (npm run build, or scripts/gpu-check-prepare.sh)" >&2; exit 2; }

# Vulkan loader: the system's, else the unpacked one (node-llama-cpp looks for libvulkan.so* in LD_LIBRARY_PATH).
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
  [ -d "$bundle/libs" ] && export LD_LIBRARY_PATH="$bundle/libs:$bundle/xlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NVIDIA's ICD manifest: a driver mounted into a container (e.g. /usr/local/nvidia) is not where the loader looks.
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
           /etc/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$f" ]; then export VK_DRIVER_FILES=$f; break; fi
  done
fi
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu-check: nvidia-smi not found; continuing"
echo "gpu-check: node $("$NODE" -v), VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}, $(nproc) cores"
# The Vulkan build is the one packaged with the extension; CUDA (when installed) is left out so this checks Vulkan.
export TASK_RUNTIME_BENCH_GPU=vulkan
exec "$NODE" "$bench" "${@}"
