#!/usr/bin/env bash
# Kernel helper's GPU run: fused-kernel tests (incl. batched == single), the multi-pass and
# chunked GPU tests, compute-sanitizer memcheck + racecheck on a short filter, ncu on one R-live
# luma launch, bench_cuda rows, a tile sweep (SWEEP="28,8,7 24,8,7 ..."), `nomerge`: kernel-only rows
# with one fused launch per plane size (NLMDENOISE_CUDA_MERGE_PLANES=0).
#   here:   bash scripts/gpu-h1.sh --collect      (release binaries -> .devcarry-h1/)
#   device: bash scripts/gpu-h1.sh                (carry [".devcarry-h1"]; logs -> $OUT)
# STEPS (env, default "test bench ncu san") picks the parts.
set -u
B=.devcarry-h1
if [ "${1:-}" = "--collect" ]; then
  set -e
  T=${CARGO_TARGET_DIR:-target}
  cargo build --release -p nlmdenoise --bin bench_cuda --test cuda_vs_reference --test cuda_multipass --test chunked_cuda
  rm -rf "$B"; mkdir -p "$B"
  for t in cuda_vs_reference cuda_multipass chunked_cuda; do
    cp "$(ls -t $T/release/deps/$t-* | grep -v '\.d$' | head -1)" "$B/$t"
  done
  cp $T/release/bench_cuda "$B/"
  # Optional baseline for the `ab` step: BASE_BENCH=path/to/another/bench_cuda.
  if [ -n "${BASE_BENCH:-}" ]; then cp "$BASE_BENCH" "$B/bench_cuda_base"; fi
  # More builds for the `ab` step: EXTRA_BENCH="name:path ..." -> $B/bench_cuda_<name>.
  for e in ${EXTRA_BENCH:-}; do cp "${e#*:}" "$B/bench_cuda_${e%%:*}"; done
  strip --strip-debug "$B"/*
  du -sh "$B"; exit 0
fi
OUT=${OUT:-/tmp/gpu-h1}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN=/usr/local/cuda/bin/compute-sanitizer; NCU=/usr/local/cuda/bin/ncu
STEPS=${STEPS:-test bench ncu san}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"; date -u | tee -a "$OUT/device.txt"
for s in $STEPS; do case $s in
test)
  timeout 150 $B/cuda_vs_reference --test-threads=8 > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?"; grep -E 'FAIL|panicked|test result|batched ==' "$OUT/tests.txt" | cut -c1-300
  for t in cuda_multipass chunked_cuda; do
    timeout 120 $B/$t --test-threads=4 > "$OUT/$t.txt" 2>&1
    echo "$t rc=$?"; grep -E 'FAIL|panicked|test result|skip' "$OUT/$t.txt" | cut -c1-300
  done ;;
bench)
  timeout ${BENCH_T:-200} $B/bench_cuda --iters 200 --frames 600 ${BENCH_ARGS:-} > "$OUT/bench.txt" 2>&1
  echo "bench rc=$?"; grep -E '^\||^fp32|^host' "$OUT/bench.txt" ;;
nomerge)
  NLMDENOISE_CUDA_MERGE_PLANES=0 timeout 60 $B/bench_cuda --brief --only kernel --iters 200 2>&1 | grep -E 'kernel' | sed 's/^/one launch per plane size: /' | tee "$OUT/nomerge.txt" ;;
ab)
  # Kernel-only rows, same lease: other builds ($B/bench_cuda_<name>: BASE_BENCH, EXTRA_BENCH,
  # built from other checkouts, when carried) against this build, and this build under each VARIANTS entry
  # (config:tile, e.g. "live:28,8,7,5 knlm:24,8,5,6"; the tile's 4th field is MIN_BLOCKS).
  for rep in 1 2; do
    for other in $B/bench_cuda_*; do
      [ -x "$other" ] || continue
      timeout 40 "$other" --brief --only kernel --iters 200 2>&1 | grep -E 'kernel' | sed "s/^/${other##*bench_cuda_} #$rep: /" | tee -a "$OUT/ab.txt"
    done
    timeout 40 $B/bench_cuda --brief --only kernel --iters 200 2>&1 | grep -E 'kernel' | sed "s/^/new #$rep: /" | tee -a "$OUT/ab.txt"
  done
  for v in ${VARIANTS:-}; do
    NLMDENOISE_CUDA_TILE=${v#*:} timeout 30 $B/bench_cuda --brief --only kernel --iters 200 --config ${v%%:*} 2>&1 | grep -E 'kernel' | sed "s/^/tile $v: /" | tee -a "$OUT/ab.txt"
  done ;;
ncuw)
  # Where the warps wait: one R-live launch (the second timed one), warp-state and scheduler sections.
  if [ -x $NCU ]; then
    timeout 150 $NCU --kernel-name regex:nlm_fused --launch-skip 40 --launch-count 1 --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum' \
      $B/bench_cuda --brief --only kernel --config live --iters 20 > "$OUT/ncuw.txt" 2>&1
    echo "ncuw rc=$?"; grep -E 'Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots|Issued Ipc|Stall|Warp Cycles|Eligible|No Eligible|Block Limit|Pipe|inst_executed|bank|wavefronts' "$OUT/ncuw.txt" | head -40
    grep -E 'issue_stalled' "$OUT/ncuw.txt" | awk '$NF+0 > 0.05' | sort -k3 -g -r | head -14
  else echo "no ncu"; fi ;;
sweep)
  for t in ${SWEEP:-}; do
    NLMDENOISE_CUDA_TILE=$t timeout 25 $B/bench_cuda --brief --only kernel --iters 100 2>&1 | grep -E 'kernel' | sed "s/^/tile $t /" | tee -a "$OUT/sweep.txt"
  done ;;
ncu)
  if [ -x $NCU ]; then
    timeout 150 $NCU --kernel-name regex:nlm_ --launch-skip 60 --launch-count 2 --set full \
      $B/bench_cuda --brief --only kernel --config live --iters 20 > "$OUT/ncu.txt" 2>&1
    echo "ncu rc=$?"; grep -E 'nlm_fused|nlm_exact|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc A|Shared Memory Throughput|L1/TEX Hit|Compute \(SM\) Throughput|Block Limit|Stall|One or More Eligible|Bank' "$OUT/ncu.txt" | head -60
  else echo "no ncu"; fi ;;
san)
  timeout 120 $SAN --tool memcheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=4 sanitizer_smoke batched chroma_modes > "$OUT/memcheck.txt" 2>&1
  echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|test result' "$OUT/memcheck.txt" | sort | uniq -c | paste -sd' ' -)"
  timeout 120 $SAN --tool racecheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 sanitizer_smoke > "$OUT/racecheck.txt" 2>&1
  echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$OUT/racecheck.txt" | sort | uniq -c | paste -sd' ' -)" ;;
esac; done
