#!/usr/bin/env bash
# The lead's one-call GPU run: every GPU correctness gate and every benchmark, on one machine.
#
#   here:   bash scripts/gpu-all.sh --collect    (runs the three collect steps below)
#   device: bash scripts/gpu-all.sh              (carry [".devcarry-h1", ".devcarry-chunks",
#                                                 ".devcarry-bench", ".gst-debs"])
#
# Steps (PARTS, default "fused chunks bench"):
#   fused   scripts/gpu-h1.sh STEPS="test san": cuda_vs_reference (fused kernel vs the f64 reference,
#           batched == single), compute-sanitizer memcheck + racecheck on the short filters
#   chunks  scripts/gpu-chunks.sh: chunk tests (host, GPU, 2 devices when present), cuda_multipass,
#           frames/s against chunk size, 1 vs 2 devices, the 18000-frame 1080p long run
#   bench   scripts/bench: the speed suite (kernel/engine/gst-launch/CPU/FFmpeg rows, sweeps)
# The device tool returns at most 8 files: every step writes under a scratch folder, bundled at the
# end into $OUT/all.tgz, with the console log in $OUT/console.txt.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--collect" ]; then
  set -e
  bash scripts/gpu-h1.sh --collect
  bash scripts/gpu-chunks.sh --collect
  bash scripts/bench --collect
  du -sh .devcarry-h1 .devcarry-chunks .devcarry-bench .gst-debs
  exit 0
fi
FINAL=${OUT:-/tmp/gpu-all}; mkdir -p "$FINAL"
S=$(mktemp -d)
PARTS=${PARTS:-fused chunks bench}
{
  for p in $PARTS; do
    echo "===== $p ($(date -u +%H:%M:%S))"
    mkdir -p "$S/$p"
    case $p in
      fused)  OUT=$S/$p STEPS=${FUSED_STEPS:-test san} bash scripts/gpu-h1.sh ;;
      chunks) OUT=$S/$p BUDGET=${CHUNK_BUDGET:-240} STEPS=${CHUNK_STEPS:-tests multipass sizes devices long} bash scripts/gpu-chunks.sh ;;
      bench)  OUT=$S/$p BUDGET=${BENCH_BUDGET:-240} bash scripts/bench ;;
      *) echo "unknown part $p" ;;
    esac
  done
  echo "===== done ($(date -u +%H:%M:%S))"
} 2>&1 | tee "$FINAL/console.txt"
tar czf "$FINAL/all.tgz" -C "$S" .
cp "$S/bench/results.md" "$FINAL/bench_results.md" 2>/dev/null || true
