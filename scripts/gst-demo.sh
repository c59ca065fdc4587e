#!/usr/bin/env bash
# GStreamer demo: denoise a generated noisy clip with the nlmdenoise element in gst-launch-1.0,
# print the throughput (frames per second) and the PSNR against the clean clip.
#
#   bash scripts/gst-demo.sh
#
# The clip is made by ffmpeg (testsrc2) with white Gaussian noise from `addnoise` (the same noise
# as scripts/demo.sh, which hands its clips over through GST_DEMO_CLEAN / GST_DEMO_NOISY), and
# stored as uncompressed video in AVI, which the base/good plugins can demux (there is no y4m
# demuxer in them). The element's output goes to y4menc so it can be compared with the clean clip.
#
# Environment knobs:
#   GST_DEMO_SIZE     frame size (default 640x360; use 1280x720 or 1920x1080 for the real thing)
#   GST_DEMO_FRAMES   frames (default 30)
#   GST_DEMO_SIGMA    Gaussian noise sigma, 8-bit units (default 15)
#   GST_DEMO_CLEAN, GST_DEMO_NOISY  use these y4m clips instead of making them
#   GST_DEMO_BACKEND  auto | cpu | cuda (default auto)
#   GST_DEMO_PROPS    extra element properties, e.g. "strength=12 temporal-future=1"
#   GST_DEMO_PROFILE  release | debug: which build to load (default release)
#   GST_DEMO_OUT      output directory (default out/gst-demo)
#   GST_DEMO_NO_BUILD set to 1 to use the existing build without running cargo
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${GST_DEMO_SIZE:-640x360}
FRAMES=${GST_DEMO_FRAMES:-30}
SIGMA=${GST_DEMO_SIGMA:-15}
BACKEND=${GST_DEMO_BACKEND:-auto}
PROPS=${GST_DEMO_PROPS:-}
PROFILE=${GST_DEMO_PROFILE:-release}
OUT=${GST_DEMO_OUT:-out/gst-demo}
# Absolute from here on: the registry, the clips and the logs go where the user said (a relative
# folder is taken from the repository root, where the script runs).
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

for tool in gst-launch-1.0 ffmpeg; do
  command -v "$tool" >/dev/null || { echo "gst-demo: $tool not found (see scripts/install-deps.sh)" >&2; exit 1; }
done
export PATH="$HOME/.cargo/bin:$PATH"

if [[ "${GST_DEMO_NO_BUILD:-0}" != 1 ]]; then
  echo "== building the plugin ($PROFILE)"
  if [[ "$PROFILE" == release ]]; then
    cargo build --release -p gst-plugin-nlmdenoise -p nlmdenoise-bench --bin addnoise
  else
    cargo build -p gst-plugin-nlmdenoise -p nlmdenoise-bench --bin addnoise
  fi
fi
PLUGIN_DIR=$(pwd)/target/$PROFILE
[[ -f "$PLUGIN_DIR/libgstnlmdenoise.so" ]] || { echo "gst-demo: $PLUGIN_DIR/libgstnlmdenoise.so missing" >&2; exit 1; }

# The plugin is found through GST_PLUGIN_PATH; a private registry file keeps the user's registry
# cache out of it and forces a rescan of the fresh build.
export GST_PLUGIN_PATH=$PLUGIN_DIR
export GST_REGISTRY=$OUT/registry.bin
mkdir -p "$OUT"
rm -f "$GST_REGISTRY"

CLEAN=${GST_DEMO_CLEAN:-$OUT/clean.y4m}
NOISY_Y4M=${GST_DEMO_NOISY:-$OUT/noisy.y4m}
NOISY=$OUT/noisy.avi
DENOISED=$OUT/denoised.y4m

if [[ -z "${GST_DEMO_NOISY:-}" ]]; then
  echo "== clip: testsrc2 $SIZE, $FRAMES frames at 25 fps, white Gaussian noise sigma $SIGMA (addnoise, seed 1)"
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=$SIZE:rate=25" \
    -frames:v "$FRAMES" -pix_fmt yuv420p -f yuv4mpegpipe "$CLEAN"
  target/$PROFILE/addnoise -i "$CLEAN" -o "$NOISY_Y4M" --sigma "$SIGMA" --seed 1
else
  FRAMES=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$NOISY_Y4M")
fi
ffmpeg -hide_banner -loglevel error -y -i "$NOISY_Y4M" -c:v rawvideo -pix_fmt yuv420p "$NOISY"

gst-inspect-1.0 nlmdenoise >/dev/null || { echo "gst-demo: GStreamer cannot load $PLUGIN_DIR/libgstnlmdenoise.so" >&2; exit 1; }

run() {
  # $1 = label, rest = the part of the pipeline between videoconvert and y4menc
  local label=$1; shift
  local log=$OUT/$label.log
  # shellcheck disable=SC2068
  GST_DEBUG=nlmdenoise:4 GST_DEBUG_NO_COLOR=1 gst-launch-1.0 -e filesrc location="$NOISY" ! decodebin ! videoconvert ! $@ ! videoconvert \
    ! y4menc ! filesink location="$OUT/$label.y4m" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  # gst-launch prints "Execution ended after H:MM:SS.NNNNNNNNN" (time spent in PLAYING).
  local t
  t=$(sed -n 's/^Execution ended after \([0-9:.]*\).*/\1/p' "$log" | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }')
  # Below a quarter of a second the start-up of gst-launch decides the time, not the frames.
  awk -v n="$FRAMES" -v t="$t" -v l="$label" 'BEGIN { if (t >= 0.25) printf "%-10s %6.2f s  %8.2f fps\n", l, t, n / t; else printf "%-10s %6.2f s  too short to time (GST_DEMO_SIZE=1280x720 or more GST_DEMO_FRAMES)\n", l, t }'
}

echo "== gst-launch-1.0 ... ! nlmdenoise backend=$BACKEND $PROPS ! ..."
echo "pipeline   time      throughput"
# The same pipeline without the element: what decoding, converting and writing cost alone.
run baseline identity
# shellcheck disable=SC2086
run denoised nlmdenoise backend="$BACKEND" $PROPS
# The element logs what it runs on (backend, format, latency) at INFO level.
grep -m1 -o 'denoising [0-9].*' "$OUT/denoised.log" || true

# "Y 31.20 dB, all planes 32.05 dB", as the command-line tool prints it (scripts/demo.sh too).
psnr() {
  ffmpeg -hide_banner -nostats -i "$1" -i "$CLEAN" -lavfi "[0:v][1:v]psnr" -f null - 2>&1 \
    | sed -n 's/.*PSNR y:\([0-9.inf]*\).* average:\([0-9.inf]*\).*/\1 \2/p' | tail -n 1 \
    | awk '{ printf "Y %.2f dB, all planes %.2f dB", $1, $2 }'
}
echo "PSNR noisy    vs clean: $(psnr "$OUT/baseline.y4m")"
echo "PSNR denoised vs clean: $(psnr "$DENOISED")"
