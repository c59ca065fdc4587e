#!/usr/bin/env bash
# Demo: make a clean clip, add Gaussian noise with a fixed seed, denoise it with the nlmdenoise
# command-line tool and print the PSNR against the clean clip before and after; then the offline
# mode on an encoded file: the noisy clip as H.264 + AAC in MP4, denoised to a new MP4 with its
# audio kept.
#
#   bash scripts/demo.sh
#
# Environment knobs: DEMO_SIZE (default 640x360), DEMO_FRAMES (30), DEMO_SIGMA (15, 8-bit units),
# DEMO_BACKEND (auto), DEMO_ARGS (extra nlmdenoise flags), DEMO_OUT (out/demo).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${DEMO_SIZE:-640x360}
FRAMES=${DEMO_FRAMES:-30}
SIGMA=${DEMO_SIGMA:-15}
BACKEND=${DEMO_BACKEND:-auto}
OUT=${DEMO_OUT:-out/demo}

bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "== building (release; a few minutes the first time, cargo shows its progress)"
cargo build --release -p nlmdenoise-cli -p nlmdenoise-bench --bin nlmdenoise --bin addnoise
BIN=target/release
# One PSNR format for every part: "Y 31.20 dB, all planes 32.05 dB" (the tool's --psnr-ref format),
# from ffmpeg's psnr filter (its "average" is over all planes).
psnr() {
  ffmpeg -hide_banner -nostats -i "$1" -i "$2" -lavfi "[0:v][1:v]psnr" -f null - 2>&1 \
    | sed -n 's/.*PSNR y:\([0-9.inf]*\).* average:\([0-9.inf]*\).*/\1 \2/p' | tail -n 1 \
    | awk '{ printf "Y %.2f dB, all planes %.2f dB", $1, $2 }'
}

mkdir -p "$OUT"
CLEAN=$OUT/clean.y4m
NOISY=$OUT/noisy.y4m
DENOISED=$OUT/denoised.y4m

echo "== clean clip: ffmpeg testsrc2, $SIZE, $FRAMES frames, 4:2:0"
ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=$SIZE:rate=25" \
  -frames:v "$FRAMES" -pix_fmt yuv420p -f yuv4mpegpipe "$CLEAN"

echo "== noise: white Gaussian, sigma $SIGMA, seed 1"
"$BIN/addnoise" -i "$CLEAN" -o "$NOISY" --sigma "$SIGMA" --seed 1

echo "== denoising: nlmdenoise --backend $BACKEND --sigma $SIGMA ${DEMO_ARGS:-}  (strengths follow sigma)"
# shellcheck disable=SC2086
"$BIN/nlmdenoise" -y -i "$NOISY" -o "$DENOISED" --backend "$BACKEND" --psnr-ref "$CLEAN" --sigma "$SIGMA" ${DEMO_ARGS:-} 2>&1 | tee "$OUT/result.txt"

# A side-by-side video (noisy | denoised | clean) to look at; optional.
if ffmpeg -hide_banner -loglevel error -y -i "$NOISY" -i "$DENOISED" -i "$CLEAN" \
    -filter_complex hstack=inputs=3 -c:v libx264 -crf 12 -pix_fmt yuv420p "$OUT/compare.mp4" 2>/dev/null; then
  echo "== side by side (noisy | denoised | clean): $OUT/compare.mp4"
fi

# Offline mode on an encoded file: any input GStreamer decodes, H.264 (+ AAC audio) out.
NOISY_MP4=$OUT/noisy.mp4
DENOISED_MP4=$OUT/denoised.mp4
echo "== offline mode: the noisy clip as H.264 (crf 8) + AAC sine audio in MP4"
ffmpeg -hide_banner -loglevel error -y -i "$NOISY" -f lavfi -i "sine=frequency=440:sample_rate=48000" \
  -map 0:v -map 1:a -shortest -c:v libx264 -crf 8 -pix_fmt yuv420p -c:a aac -b:a 128k "$NOISY_MP4"
echo "== nlmdenoise $NOISY_MP4 $DENOISED_MP4 --backend $BACKEND  (past 2 + future 2, crf 20; noise level estimated)"
# shellcheck disable=SC2086
"$BIN/nlmdenoise" -y "$NOISY_MP4" "$DENOISED_MP4" --backend "$BACKEND" ${DEMO_ARGS:-} 2>&1 | tee "$OUT/result-mp4.txt"
echo "streams of $DENOISED_MP4: $(ffprobe -v error -show_entries stream=codec_name,codec_type -of csv=p=0 "$DENOISED_MP4" | tr '\n' ' ')"
echo "PSNR noisy.mp4    vs clean: $(psnr "$NOISY_MP4" "$CLEAN")"
echo "PSNR denoised.mp4 vs clean: $(psnr "$DENOISED_MP4" "$CLEAN")"

# The GStreamer element demo, when its script exists and the plugin builds here.
if [[ -f scripts/gst-demo.sh ]]; then
  echo "== GStreamer plugin"
  if cargo build --release -p gst-plugin-nlmdenoise; then
    # the same clean and noisy clip as above
    GST_DEMO_NO_BUILD=1 GST_DEMO_CLEAN="$CLEAN" GST_DEMO_NOISY="$NOISY" bash scripts/gst-demo.sh
  else
    echo "demo: the GStreamer plugin did not build; skipping scripts/gst-demo.sh" >&2
  fi
fi
