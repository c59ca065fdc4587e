#!/usr/bin/env bash
# Lead's batched GPU run (device machine): multi-pass tests and sanitizer, the CUDA benchmark
# (kernel only and end to end) and the element through GStreamer. Builds nothing: expects release
# binaries in .devcarry-lead/ (bash scripts/gpu-lead-run.sh --collect, here) and the Debian
# GStreamer runtime in .gst-debs/ (../shared/gst-runtime/fetch.sh .gst-debs; cp activate.sh there).
# Logs go to $OUT.
set -u
B=.devcarry-lead
if [ "${1:-}" = "--collect" ]; then
  set -e
  cargo build --release -p nlmdenoise --bins --tests
  cargo build --release -p gst-plugin-nlmdenoise --example pipeline_bench
  rm -rf "$B"; mkdir -p "$B"
  for t in cuda_multipass cuda_vs_reference; do
    cp "$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)" "$B/$t"
  done
  cp target/release/bench_multipass target/release/bench_cuda target/release/examples/pipeline_bench "$B/"
  strip --strip-debug "$B"/*
  du -sh "$B"
  exit 0
fi
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
date -u | tee -a "$OUT/device.txt"

if [ "${SKIP_MULTIPASS:-0}" != 1 ]; then
  echo "== multipass tests" > "$OUT/multipass.txt"
  timeout 120 $B/cuda_multipass --nocapture --test-threads=4 2>&1 | grep -E 'PASS|FAIL|SKIPPED|panicked|test result|SEED' >> "$OUT/multipass.txt"
  echo "== multipass memcheck" >> "$OUT/multipass.txt"
  timeout 60 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_multipass --test-threads=2 f32_group_kinds f32_temporal 2>&1 | grep -E 'ERROR SUMMARY|test result|Invalid' | sort | uniq -c >> "$OUT/multipass.txt"
  grep -E 'FAIL|test result|SUMMARY' "$OUT/multipass.txt" | cut -c1-300
fi

echo "== cuda_vs_reference" > "$OUT/fused.txt"
timeout 100 $B/cuda_vs_reference --test-threads=8 >> "$OUT/fused.txt" 2>&1
grep -E 'FAIL|panicked|test result' "$OUT/fused.txt" | cut -c1-300

echo "== bench_cuda" > "$OUT/bench_cuda.txt"
timeout 150 $B/bench_cuda --iters 100 --frames 600 >> "$OUT/bench_cuda.txt" 2>&1
tail -30 "$OUT/bench_cuda.txt"

echo "== GStreamer" > "$OUT/gst.txt"
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
R_LIVE="temporal-past=2 search-radius=3 patch-radius=2"
R_KNLM="temporal-past=1 temporal-future=1 search-radius=2 patch-radius=4"
for cfg in "backend=cuda $R_LIVE" "backend=cuda pipeline-depth=2 $R_LIVE" "backend=cuda pipeline-depth=2 $R_KNLM"; do
  echo "-- $cfg" >> "$OUT/gst.txt"
  timeout 60 $B/pipeline_bench 1920 1080 1500 $cfg >> "$OUT/gst.txt" 2>&1 || echo "exit $?" >> "$OUT/gst.txt"
done
cat "$OUT/gst.txt"
