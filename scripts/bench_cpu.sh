#!/usr/bin/env bash
# CPU backend vs FFmpeg's nlmeans filter on a noisy 720p 8-bit 4:2:0 clip.
#
#   scripts/bench_cpu.sh [FRAMES]        (default 20 frames; WORK=/tmp/nlm-bench-cpu)
#
# 1. builds bench_cpu (release);
# 2. makes the clean clip with ffmpeg's testsrc2 (1280x720, 30 fps) and adds Gaussian noise,
#    sigma 12 8-bit code values, seed 1 (bench_cpu noise: SplitMix64 + Box-Muller);
# 3. for two spatial settings (patch 7x7 / search 15x15 and patch 3x3 / search 7x7, no temporal
#    frames) runs a small strength grid for both filters and keeps each one's best PSNR against
#    the clean clip (all planes pooled, "PSNR-YUV"; luma PSNR printed too);
# 4. times both at their best strength, alternating ours / ffmpeg, best of RUNS (default 3).
#
# Ours: the engine alone (frames already in memory; unpack + denoise + pack timed), bisquare
# weighting, wref 2, strength grid below, all cores (--threads 0). FFmpeg: wall-clock time of
# `ffmpeg -f rawvideo -i noisy.yuv -vf nlmeans=... -f null -` (reading the raw file included),
# default threading (all cores). Prints a markdown table.
set -euo pipefail

FRAMES=${1:-20}
RUNS=${RUNS:-3}
W=1280
H=720
SIGMA=12
WORK=${WORK:-/tmp/nlm-bench-cpu}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/target/release/bench_cpu"

mkdir -p "$WORK"
cd "$ROOT"
cargo build --release --bin bench_cpu >&2
cd "$WORK"

echo "== clip: testsrc2 ${W}x${H}, $FRAMES frames, Gaussian noise sigma $SIGMA seed 1" >&2
ffmpeg -v error -y -f lavfi -i "testsrc2=size=${W}x${H}:rate=30" -frames:v "$FRAMES" -pix_fmt yuv420p -f rawvideo clean.yuv
"$BIN" noise --input clean.yuv --output noisy.yuv --width $W --height $H --sigma $SIGMA --seed 1
NOISY_PSNR=$("$BIN" psnr --reference clean.yuv --input noisy.yuv --width $W --height $H)

psnr() { "$BIN" psnr --reference clean.yuv --input "$1" --width $W --height $H; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }
load() { cut -d' ' -f1 /proc/loadavg; }

ffmpeg_run() { # s p r output
  ffmpeg -v error -y -nostdin -f rawvideo -s ${W}x${H} -pix_fmt yuv420p -i noisy.yuv -vf "nlmeans=s=$1:p=$2:r=$3" -f rawvideo "$4"
}

ffmpeg_time() { # s p r -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  ffmpeg -v error -nostdin -f rawvideo -s ${W}x${H} -pix_fmt yuv420p -i noisy.yuv -vf "nlmeans=s=$1:p=$2:r=$3" -f null -
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

ours_args() { # patch_radius search_radius strength
  echo "--input noisy.yuv --width $W --height $H --patch-radius $1 --search-radius $2 --strength $3 --weighting bisquare --wref 2 --threads 0"
}

ROWS=()
for cfg in "3 7 6,8,10,12 20,24,28,32" "1 3 5,6,7,8,10 32,36,40,44,48"; do
  set -- $cfg
  PR=$1; SR=$2; FF_GRID=$3; OUR_GRID=$4
  P=$((2 * PR + 1)); R=$((2 * SR + 1))
  echo "== patch ${P}x${P}, search ${R}x${R}" >&2

  best_ff=""; best_ff_psnr=-1; best_ff_y=""
  for s in ${FF_GRID//,/ }; do
    ffmpeg_run "$s" "$P" "$R" ff.yuv
    out=$(psnr ff.yuv); v=$(echo "$out" | field psnr_yuv)
    echo "   ffmpeg s=$s: $out" >&2
    if (( $(echo "$v > $best_ff_psnr" | bc -l) )); then best_ff=$s; best_ff_psnr=$v; best_ff_y=$(echo "$out" | field psnr_y); fi
  done

  best_h=""; best_psnr=-1; best_y=""
  for h in ${OUR_GRID//,/ }; do
    "$BIN" run $(ours_args "$PR" "$SR" "$h") --output ours.yuv >/dev/null
    out=$(psnr ours.yuv); v=$(echo "$out" | field psnr_yuv)
    echo "   ours strength=$h: $out" >&2
    if (( $(echo "$v > $best_psnr" | bc -l) )); then best_h=$h; best_psnr=$v; best_y=$(echo "$out" | field psnr_y); fi
  done

  ours_best=0; ff_best=1000000000; loads=()
  for i in $(seq 1 "$RUNS"); do
    loads+=("$(load)")
    f=$("$BIN" run $(ours_args "$PR" "$SR" "$best_h") | field fps)
    t=$(ffmpeg_time "$best_ff" "$P" "$R")
    echo "   run $i: ours $f fps, ffmpeg $(echo "$FRAMES / $t" | bc -l | cut -c1-6) fps (load ${loads[-1]})" >&2
    if (( $(echo "$f > $ours_best" | bc -l) )); then ours_best=$f; fi
    if (( $(echo "$t < $ff_best" | bc -l) )); then ff_best=$t; fi
  done
  ff_fps=$(echo "$FRAMES / $ff_best" | bc -l)
  ratio=$(echo "$ours_best / $ff_fps" | bc -l)
  ROWS+=("$(printf '| %dx%d / %dx%d | %.2f | %.2f | %.2fx | %s (s=%s) | %s (strength %s) | %s / %s | %s |' \
    "$P" "$P" "$R" "$R" "$ours_best" "$ff_fps" "$ratio" "$best_ff_psnr" "$best_ff" "$best_psnr" "$best_h" "$best_ff_y" "$best_y" "${loads[*]}")")
done

echo
echo "Clip: testsrc2 ${W}x${H} yuv420p, $FRAMES frames, noise sigma $SIGMA (noisy: $NOISY_PSNR)."
echo "FFmpeg grid per setting: s in {6,8,10,12} (7x7) and {5,6,7,8,10} (3x3); ours: bisquare, wref 2, strength in {20,24,28,32} (7x7) and {32,36,40,44,48} (3x3)."
echo "fps: best of $RUNS alternating runs; ours = engine only, all cores; ffmpeg = whole process, default threads (all cores)."
echo
echo "| patch / search | ours fps | ffmpeg fps | ours / ffmpeg | ffmpeg PSNR-YUV (best s) | ours PSNR-YUV (best) | PSNR-Y ffmpeg / ours | load avg at runs |"
echo "|---|---|---|---|---|---|---|---|"
for r in "${ROWS[@]}"; do echo "$r"; done
