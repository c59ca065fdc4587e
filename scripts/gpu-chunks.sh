#!/usr/bin/env bash
# Chunked processing / several GPUs (issue 7) on the GPU machine: the chunk tests (host and GPU),
# the multi-pass CUDA test, and bench_chunks (fps vs chunk size at 480p/720p/1080p plus small radii
# at 720p, 1 vs 2 devices with the time split, a 10-minute 1080p30 long run with peak RSS and
# device memory). Markdown tables go to $OUT: at most 8 files (env.txt tests_host.txt
# tests_gpu.txt multipass.txt bench_sizes.md bench_devices.md bench_long.md summary.txt), the
# device tool returns no more.
#
#   here:   bash scripts/gpu-chunks.sh --collect   (release build, strip --strip-debug -> .devcarry-chunks/)
#   device: bash scripts/gpu-chunks.sh             (run tool, carry [".devcarry-chunks"]; results -> $OUT)
#
# The GPU count is detected: with one GPU the 2-device rows and test are skipped; with none the
# GPU tests print SKIPPED and the benchmarks run a small CPU-backend version (to check the script).
# Every step has its own timeout and the whole run stays under BUDGET seconds (default 530).
# Environment: FRAMES (frames per sizes/devices run, default 400), LONG (long-run frames, 18000),
# STEPS (default "tests multipass sizes devices long").
set -u
cd "$(dirname "$0")/.."
B=.devcarry-chunks

if [ "${1:-}" = "--collect" ]; then
  set -e
  T=${CARGO_TARGET_DIR:-target}
  cargo build --release -p nlmdenoise --bin bench_chunks --test chunked --test chunked_cuda --test cuda_multipass
  rm -rf "$B"; mkdir -p "$B"
  for t in chunked chunked_cuda cuda_multipass; do
    cp "$(ls -t $T/release/deps/$t-* | grep -v '\.d$' | head -1)" "$B/$t"
  done
  cp "$T/release/bench_chunks" "$B/"
  strip --strip-debug "$B"/*
  du -sh "$B"; exit 0
fi

[ -x "$B/bench_chunks" ] || { echo "no $B/bench_chunks: run 'bash scripts/gpu-chunks.sh --collect' first"; exit 2; }
OUT=${OUT:-/tmp/gpu-chunks}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BUDGET=${BUDGET:-530}; FRAMES=${FRAMES:-400}; LONG=${LONG:-18000}
STEPS=${STEPS:-tests multipass sizes devices long}
START=$(date +%s)
summary=()
note() { echo "$*"; summary+=("$*"); }
# timeout for a step: its own limit, clipped to what is left of the budget.
left() { local l=$((BUDGET - ($(date +%s) - START) - 3)); [ "$1" -lt "$l" ] && echo "$1" || echo "$((l > 1 ? l : 1))"; }

GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
{
  date -u; echo "GPUs: $GPUS"; nproc; free -g | head -2
  [ "$GPUS" -gt 0 ] && nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,clocks.max.sm --format=csv
} > "$OUT/env.txt" 2>&1
note "device: $GPUS GPU(s) $( [ "$GPUS" -gt 0 ] && nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | paste -sd' ')"

if [ "$GPUS" -gt 0 ]; then
  BACKEND=cuda; SIZES=854x480,1280x720,1920x1080; CHUNKS=off,1,2,4,8,16,32,auto
  SMALL_SIZES=1280x720; SMALL_CHUNKS=off,1,4,16
else
  # No GPU: the same code paths on the CPU backend, small enough to finish.
  BACKEND=cpu; SIZES=320x240; CHUNKS=off,1,4,auto; FRAMES=16
  SMALL_SIZES=320x240; SMALL_CHUNKS=off,4
fi

for s in $STEPS; do case $s in
tests)
  timeout "$(left 40)" "$B/chunked" --test-threads=4 > "$OUT/tests_host.txt" 2>&1
  note "chunked (host backends): rc=$? $(grep -E '^test result' "$OUT/tests_host.txt")"
  timeout "$(left 120)" "$B/chunked_cuda" --nocapture --test-threads=1 > "$OUT/tests_gpu.txt" 2>&1
  note "chunked_cuda: rc=$? $(grep -E '^test result' "$OUT/tests_gpu.txt") $(grep -c '^SKIPPED' "$OUT/tests_gpu.txt") skipped"
  grep -E '^SKIPPED|panicked|refused as expected|auto at 4K|devices all' "$OUT/tests_gpu.txt" | cut -c1-300 ;;
multipass)
  timeout "$(left 150)" "$B/cuda_multipass" --nocapture --test-threads=1 > "$OUT/multipass.txt" 2>&1
  note "cuda_multipass: rc=$? $(grep -E '^test result' "$OUT/multipass.txt") $(grep -c '^SKIPPED' "$OUT/multipass.txt") skipped" ;;
sizes)
  timeout "$(left 200)" "$B/bench_chunks" sizes --backend $BACKEND --frames "$FRAMES" --sizes $SIZES --chunks $CHUNKS > "$OUT/bench_sizes.md" 2>&1
  note "bench sizes: rc=$?"
  # Small radii (search 1, patch 1): little work per frame, where batched launches pay most.
  echo -e "\n#### search radius 1, patch radius 1" >> "$OUT/bench_sizes.md"
  timeout "$(left 60)" "$B/bench_chunks" sizes --backend $BACKEND --frames "$FRAMES" --sizes $SMALL_SIZES --chunks $SMALL_CHUNKS --config live --search-radius 1 --patch-radius 1 >> "$OUT/bench_sizes.md" 2>&1
  note "bench sizes (radii 1/1): rc=$?"; grep -E '^\||^####' "$OUT/bench_sizes.md" | cut -d'|' -f2-12 ;;
devices)
  if [ "$GPUS" -ge 2 ]; then DEV=0,1; else DEV=0; note "devices: $GPUS GPU(s), the 2-device row is skipped"; fi
  if [ "$BACKEND" = cpu ]; then
    # 1080p on the CPU backend would take minutes: two simulated devices (1.5 ms per job, no
    # host CPU) show the dispatch path and how the caller's thread overlaps the workers.
    timeout "$(left 60)" "$B/bench_chunks" devices --backend sim --sim-us 1500 --devices 0,1 --chunk 8 --frames 200 --config live > "$OUT/bench_devices.md" 2>&1
    note "bench devices (no GPU: sim backend): rc=$?"; grep -E '^\|' "$OUT/bench_devices.md"
  else
    timeout "$(left 120)" "$B/bench_chunks" devices --backend $BACKEND --devices $DEV --frames $((FRAMES * 2)) > "$OUT/bench_devices.md" 2>&1
    note "bench devices: rc=$?"; grep -E '^\|' "$OUT/bench_devices.md"
  fi ;;
long)
  if [ "$BACKEND" = cpu ]; then
    note "long run: no GPU, skipped"
  else
    DEV=all
    timeout "$(left 150)" "$B/bench_chunks" long --backend $BACKEND --devices $DEV --long "$LONG" --config live > "$OUT/bench_long.md" 2>&1
    note "bench long ($LONG frames, devices $DEV): rc=$?"; grep -E '^\||^backend' "$OUT/bench_long.md"
  fi ;;
*) note "unknown step $s" ;;
esac; done

note "total $(($(date +%s) - START)) s"
printf '%s\n' "${summary[@]}" > "$OUT/summary.txt"
echo "---- summary"; cat "$OUT/summary.txt"
