#!/usr/bin/env bash
# The one script run on the GPU machine: CUDA tests, compute-sanitizer (memcheck + racecheck),
# the ptxas resource report and the benchmark. Logs go to $OUT (the device tool brings them
# back). Binaries are built on the development machine and carried in .devcarry/:
#
#   bash scripts/gpu-run.sh --collect     # here: build release bins/tests, fill .devcarry/
#   bash scripts/gpu-run.sh               # on the GPU machine (run tool, carry [".devcarry"])
#
# Results are recorded in docs/benchmarks.md (CUDA section).
set -uo pipefail
cd "$(dirname "$0")/.."
C=.devcarry

if [ "${1:-}" = "--collect" ]; then
  set -e
  cargo build --release -p nlmdenoise --bins --tests
  rm -rf "$C"; mkdir -p "$C/ptx"
  for t in cuda_vs_reference nvrtc_compile; do
    cp "$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)" "$C/$t"
  done
  cp target/release/bench_cuda "$C/"
  strip --strip-debug "$C"/bench_cuda "$C"/cuda_vs_reference "$C"/nvrtc_compile
  NVRTC=.cache/nvrtc/nvidia/cuda_nvrtc/lib
  NLMDENOISE_NVRTC_DIR="$PWD/$NVRTC" NLMDENOISE_PTX_DUMP="$PWD/$C/ptx" "$C/nvrtc_compile" >/dev/null 2>&1
  du -sh "$C"
  exit 0
fi

OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
summary=()
note() { echo "$*"; summary+=("$*"); }

{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
  ls -l /usr/local/cuda/lib64/libnvrtc.so* ; "$SAN" --version | tail -1; nproc
} > "$OUT/env.txt" 2>&1
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"

# Registers, spills and static shared memory of every kernel variant (sm_90).
for f in "$C"/ptx/*.ptx; do
  echo "$(basename "$f"): $(ptxas -arch=sm_90 -v "$f" -o /dev/null 2>&1 | grep -Eo 'Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)|[0-9]+ bytes stack frame' | paste -sd, -)"
done > "$OUT/ptxas.txt" 2>&1
note "ptxas: $(grep -c registers "$OUT/ptxas.txt") variants; max $(grep -Eo 'Used [0-9]+' "$OUT/ptxas.txt" | awk '{print $2}' | sort -n | tail -1) registers; spills: $(grep -Eo '[1-9][0-9]* bytes spill' "$OUT/ptxas.txt" | head -1)"

timeout 300 "$C/cuda_vs_reference" --nocapture --test-threads=8 > "$OUT/tests.txt" 2>&1
note "cuda_vs_reference: rc=$? $(grep -E '^test result' "$OUT/tests.txt")"
timeout 200 "$C/nvrtc_compile" --nocapture every_variant_compiles_for_hopper_and_turing a_broken_variant >> "$OUT/tests.txt" 2>&1
note "nvrtc_compile (NVRTC 13): rc=$? $(grep -E '^test result' "$OUT/tests.txt" | tail -1)"

if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  timeout 400 "$SAN" --tool memcheck --leak-check full --error-exitcode 9 "$C/cuda_vs_reference" --test-threads=4 > "$OUT/memcheck.txt" 2>&1
  note "memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.txt" | sort | uniq -c | paste -sd' ' -)"
  timeout 400 "$SAN" --tool racecheck --error-exitcode 9 "$C/cuda_vs_reference" --test-threads=4 chroma_modes benchmark_parameters temporal_windows > "$OUT/racecheck.txt" 2>&1
  note "racecheck: rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.txt" | sort | uniq -c | paste -sd' ' -)"
fi

# Stall reasons and pipe use of one R-live luma launch (the largest of a frame).
if [ "${SKIP_NCU:-0}" != 1 ] && command -v ncu >/dev/null; then
  timeout 240 ncu --kernel-name nlm_fused --launch-skip 40 --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
    "$C/bench_cuda" --iters 10 --frames 10 > "$OUT/ncu.txt" 2>&1
  note "ncu: rc=$?"
fi

timeout 400 "$C/bench_cuda" ${BENCH_ARGS:---sweep} > "$OUT/bench.txt" 2>&1
note "bench: rc=$?"
grep -E '^\||^fp32|^host' "$OUT/bench.txt"
printf '%s\n' "${summary[@]}"
