#!/usr/bin/env bash
# GPU check (issue 42): one script that runs as is on a lent GPU machine (an H100/H200 with 16 cores, no network,
# ≤ 64 MiB carried, within 10 minutes) and prints every figure the issue asks for, side by side in one run:
#   1. builds, in parallel: llama.cpp's llama-server for CUDA (the GPU's own architecture, flash attention off on both
#      sides) from the llama.cpp source node-llama-cpp ships, and our native engine (`task-runtime build-engine`:
#      OpenMP, native CPU flags);
#   2. streams: the packaged build (our serve on the Vulkan binary the extension ships) against llama-server CUDA on
#      the same GGUF at 1/4/16/32 streams, and the Messages and Responses doors' first token (bench/gpuStreams.ts);
#   3. native: the native build's effect, one stream, prebuilt binary vs native build at 1/4/16 threads
#      (bench/nativeBuild.ts);
#   4. speculative: HOOK for the `speculative` bench section (branch `speculative`): runs it when present;
#   5. hardware: raw GPU vs LMSP SSE and the thread calibration (bench/hardware.ts), while time is left.
# Every step has a time limit inside GPU_CHECK_BUDGET_S (default 570 s; the CUDA build gets what leaves 300 s for the
# measurements); one that fails or runs out is reported and the next runs. Knobs: GPU_CHECK_CUDA_JOBS (12),
# GPU_CHECK_NATIVE_JOBS (4), GPU_CHECK_STREAMS, GPU_CHECK_EMBD/LAYERS/TOKENS/ROUNDS (bench/gpuStreams.ts),
# NATIVE_BENCH_THREADS/ROUNDS/MODELS (bench/nativeBuild.ts), TASK_RUNTIME_LLAMA_SERVER (skip the CUDA build). Output: the terminal, and $GPU_CHECK_OUT (default $OUT, else .gpu-check/out): one file per step and
# summary.txt.
#
# CPU half (no GPU here): bash scripts/gpu-check.sh --cpu-half — steps 2–4 on the CPU with a small model (llama-server:
# the one scripts/remote-engine/prepare.mjs built, else skipped; native build: the cached one, else skipped).
# Where the repo is set up (npm ci && npm run build): bash scripts/gpu-check.sh
# On a bare GPU machine: bash scripts/gpu-check-prepare.sh here (writes .gpu-check/: node, node_modules of the
# packaged extension, the benches bundled, the llama.cpp source), carry .gpu-check, run this script there.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bundle=$repo/.gpu-check
started=$(date +%s)
budget=${GPU_CHECK_BUDGET_S:-570}
left() { echo $((budget - ($(date +%s) - started))); }
cpu_half=0
[ "${1:-}" = "--cpu-half" ] && cpu_half=1
out=${GPU_CHECK_OUT:-${OUT:-$bundle/out}}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "gpu-check: $*" | tee -a "$summary" >&2; }

NODE=${NODE:-$(command -v node || true)}
if [ -z "$NODE" ] && [ -f "$bundle/node.tar.xz" ]; then
  [ -x "$bundle/bin/node" ] || { mkdir -p "$bundle/bin" && tar -xJf "$bundle/node.tar.xz" -C "$bundle/bin"; }
  NODE=$bundle/bin/node
fi
[ -n "$NODE" ] || { say "no node (put it on PATH, set NODE, or run scripts/gpu-check-prepare.sh)"; exit 2; }
# build-engine's cmake asks `node` for node-addon-api's headers.
export PATH="$(dirname "$NODE"):$PATH"

if [ ! -d node_modules/node-llama-cpp ]; then
  [ -f "$bundle/node_modules.tar.xz" ] || { say "no node_modules (npm ci, or scripts/gpu-check-prepare.sh)"; exit 2; }
  tar -xJf "$bundle/node_modules.tar.xz" -C .
fi
# The build's benches (need npm ci's dev dependencies), else the prepared bundle's.
if [ -d node_modules/zod ] && [ -f out/bench/gpuCheck.js ] && [ -f dist/cli.js ]; then
  bench=out/bench/gpuCheck.js
  cli=dist/cli.js
else
  bench=$bundle/bench.js
  cli=$bundle/cli.js
fi
[ -f "$bench" ] || { say "$bench missing (npm run build, or scripts/gpu-check-prepare.sh)"; exit 2; }

gpu=0
if [ $cpu_half = 0 ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
  nvidia-smi -L | tee -a "$summary"
else
  say "no GPU in use (--cpu-half or no nvidia-smi): the CPU half runs; the GPU half waits for a GPU machine"
fi

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
cores=$(nproc)
say "node $("$NODE" -v), $cores cores, VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}, budget ${budget} s"

# step NAME SECONDS CMD...: runs CMD with a time limit (capped by what is left), output to the terminal and
# $out/NAME.txt, and a line in summary.txt.
step() {
  local name=$1 want=$2
  shift 2
  local avail
  avail=$(($(left) - 10))
  if [ "$avail" -lt 30 ]; then
    say "$name: skipped (${avail} s left)"
    return 1
  fi
  [ "$want" -gt "$avail" ] && want=$avail
  say "$name: start (limit ${want} s)"
  local t0=$(date +%s) rc
  timeout --kill-after=5 "$want" "$@" 2>&1 | tee "$out/$name.txt"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) say "$name: done in $(($(date +%s) - t0)) s" ;;
    124 | 137) say "$name: ran out of its ${want} s (what it printed is in $name.txt)" ;;
    *) say "$name: failed (exit $rc; $name.txt)" ;;
  esac
  return "$rc"
}

# The llama.cpp source (node-llama-cpp's addon files beside llama.cpp): carried by the bundle, or already in the cache.
native_root=${TASK_RUNTIME_NATIVE_BUILDS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/task-runtime/native-builds}
if [ -f "$bundle/native-src.tar.xz" ] && ! ls -d "$native_root"/src-nlc-*/.ready >/dev/null 2>&1; then
  mkdir -p "$native_root" && tar -xJf "$bundle/native-src.tar.xz" -C "$native_root"
fi
src=$(ls -d "$native_root"/src-nlc-* 2>/dev/null | head -1)
# Builds of the current revision only (nativeBuild.ts: -r<N> keys; older ones, without the one-step patch, are not used).
native_ready() { ls "$native_root"/nlc-*-r[0-9]*/build.json >/dev/null 2>&1; }

# 1. Builds.
server_build_pid=
if [ $gpu = 1 ]; then
  if [ -n "${TASK_RUNTIME_LLAMA_SERVER:-}" ]; then
    say "llama-server: $TASK_RUNTIME_LLAMA_SERVER (given)"
  elif command -v nvcc >/dev/null && command -v cmake >/dev/null && [ -n "$src" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
    sbuild=/tmp/gpu-check-llama-server-cuda
    say "llama-server: building for CUDA sm_${cap} in the background (log llama-server-build.txt)"
    (
      cmake -S "$src/llama.cpp" -B "$sbuild" $(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_BUILD_TYPE=Release \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap" -DGGML_CUDA_FA=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON &&
        timeout $(($(left) - 300)) cmake --build "$sbuild" --target llama-server -j "${GPU_CHECK_CUDA_JOBS:-12}"
    ) >"$out/llama-server-build.txt" 2>&1 &
    server_build_pid=$!
  else
    say "llama-server: not built (needs nvcc, cmake and the carried source; or set TASK_RUNTIME_LLAMA_SERVER)"
  fi
  if native_ready; then
    say "native build: cached"
  else
    step build-engine 300 "$NODE" "$cli" build-engine --jobs "${GPU_CHECK_NATIVE_JOBS:-4}"
  fi
  if [ -n "$server_build_pid" ]; then
    wait "$server_build_pid"
    if [ -x "$sbuild/bin/llama-server" ]; then
      export TASK_RUNTIME_LLAMA_SERVER=$sbuild/bin/llama-server
      say "llama-server: built ($(tail -1 "$out/llama-server-build.txt"))"
    else
      say "llama-server: CUDA build failed or ran out of time (llama-server-build.txt: $(tail -1 "$out/llama-server-build.txt"))"
    fi
  fi
else
  native_ready && say "native build: cached" || say "native build: none cached (task-runtime build-engine makes one; the native step skips its side)"
  if [ -z "${TASK_RUNTIME_LLAMA_SERVER:-}" ] && [ -f "${TASK_RUNTIME_ENGINES_DIR:-$HOME/.cache/task-runtime-engines}/ready.json" ]; then
    say "llama-server: the one scripts/remote-engine/prepare.mjs built"
  fi
fi

# 2. Streams and the doors' first token, first (what a GPU machine is for): the packaged build (Vulkan) against
#    llama-server (CUDA, all layers).
if [ $gpu = 1 ]; then
  GPU_CHECK_GPU=${GPU_CHECK_GPU:-vulkan} GPU_CHECK_STREAMS=${GPU_CHECK_STREAMS:-1,4,16,32} \
    GPU_CHECK_LLAMA_SERVER_ARGS=${GPU_CHECK_LLAMA_SERVER_ARGS:--ngl 999 -fa off} GPU_CHECK_THREADS=${GPU_CHECK_THREADS:-$cores} \
    step streams 200 "$NODE" "$bench" streams
else
  GPU_CHECK_GPU=off GPU_CHECK_STREAMS=${GPU_CHECK_STREAMS:-1,4} GPU_CHECK_EMBD=${GPU_CHECK_EMBD:-256} \
    GPU_CHECK_LAYERS=${GPU_CHECK_LAYERS:-4} GPU_CHECK_TOKENS=${GPU_CHECK_TOKENS:-64} GPU_CHECK_THREADS=${GPU_CHECK_THREADS:-1} \
    step streams 240 "$NODE" "$bench" streams
fi

# 3. The native build's effect (CPU): one stream, prebuilt vs native, at each thread count.
if [ $gpu = 1 ]; then
  NATIVE_BENCH_THREADS=${NATIVE_BENCH_THREADS:-1,4,16} NATIVE_BENCH_ROUNDS=${NATIVE_BENCH_ROUNDS:-1} step native 150 "$NODE" "$bench" native
else
  NATIVE_BENCH_THREADS=${NATIVE_BENCH_THREADS:-1,2} NATIVE_BENCH_ROUNDS=${NATIVE_BENCH_ROUNDS:-1} step native 300 "$NODE" "$bench" native
fi

# 4. HOOK (issue 42 item 3, branch `speculative`): speculative decoding's bench section, when it exists.
if [ -f out/bench/speculative.js ] && [ -d node_modules/zod ]; then
  step speculative 120 "$NODE" out/bench/index.js speculative
elif [ -f "$bundle/speculative.js" ]; then
  step speculative 120 "$NODE" "$bundle/speculative.js"
else
  say "speculative: no bench section yet (branch speculative adds bench/speculative.ts; then npm run bench -- speculative)"
fi

# 5. The earlier hardware check (raw GPU vs LMSP SSE, threads), while time is left.
if [ $gpu = 1 ]; then
  TASK_RUNTIME_BENCH_GPU=vulkan step hardware 150 "$NODE" "$bench" hardware
fi
say "finished in $(($(date +%s) - started)) s; figures in $out"
