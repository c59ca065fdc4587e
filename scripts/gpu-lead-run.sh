#!/usr/bin/env bash
# Lead's batched GPU run (device machine): multi-pass tests, sanitizer and benchmark, then the
# element through GStreamer. Builds nothing: expects release binaries in .devcarry-lead/ and the
# Debian GStreamer runtime in .gst-debs/ (see ../shared/gst-runtime/README.md). Logs go to $OUT.
set -u
B=.devcarry-lead
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
date -u | tee -a "$OUT/device.txt"

echo "== multipass tests" | tee "$OUT/multipass.txt"
timeout 120 $B/cuda_multipass --nocapture --test-threads=4 2>&1 | grep -E 'PASS|FAIL|SKIPPED|panicked|test result|SEED' >> "$OUT/multipass.txt"
echo "== multipass memcheck" >> "$OUT/multipass.txt"
timeout 90 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_multipass --test-threads=2 f32_group_kinds f32_temporal 2>&1 | grep -E 'ERROR SUMMARY|test result|Invalid' | sort | uniq -c >> "$OUT/multipass.txt"
echo "== multipass racecheck" >> "$OUT/multipass.txt"
timeout 60 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_multipass --test-threads=2 f32_group_kinds 2>&1 | grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' | sort | uniq -c >> "$OUT/multipass.txt"
echo "== multipass bench" >> "$OUT/multipass.txt"
timeout 100 $B/bench_multipass --quick --iters 10 >> "$OUT/multipass.txt" 2>&1
tail -60 "$OUT/multipass.txt"

echo "== GStreamer" | tee "$OUT/gst.txt"
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
R_LIVE="temporal-past=2 search-radius=3 patch-radius=2"
R_KNLM="temporal-past=1 temporal-future=1 search-radius=2 patch-radius=4"
for cfg in "backend=cuda $R_LIVE" "backend=cuda pipeline-depth=2 $R_LIVE" "backend=cuda pipeline-depth=2 $R_KNLM" "backend=cpu $R_LIVE"; do
  n=1500; case "$cfg" in backend=cpu*) n=30;; esac
  echo "-- $cfg" >> "$OUT/gst.txt"
  timeout 70 $B/pipeline_bench 1920 1080 $n $cfg >> "$OUT/gst.txt" 2>&1 || echo "exit $?" >> "$OUT/gst.txt"
done
cat "$OUT/gst.txt"
