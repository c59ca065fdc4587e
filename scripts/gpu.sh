#!/usr/bin/env bash
# The one GPU runner: every GPU test, sanitizer check and benchmark, in named parts. Build here,
# run there (the device tool's machine has no Rust and no GStreamer).
#
#   here:    bash scripts/gpu.sh --collect
#            release build of every GPU test binary, the benchmark binaries and pipeline_bench,
#            stripped into .devcarry/ (with compute_90 PTX of every kernel variant for ptxas), the
#            Debian GStreamer runtime into .gst-debs/ (../shared/gst-runtime) and FFmpeg's static
#            build for the CPU comparison rows. BASE_BENCH=path/to/bench_cuda adds another build's
#            benchmark as .devcarry/bench_cuda_base (kernel-only A/B rows on the same lease);
#            EXTRA_BENCH="name:path ..." adds more as .devcarry/bench_cuda_<name>; FFMPEG=1 adds
#            FFmpeg's static build for the speed suite's CPU rows (`bench` part).
#   device:  bash scripts/gpu.sh [PART ...]         (carry [".devcarry", ".gst-debs"])
#            default parts: env tests sanitizer kernel gst
#
# Parts:
#   env        device, driver, clocks, host, git revision
#   tests      cuda_vs_reference (fused kernel vs the f64 reference, batched == single),
#              cuda_multipass, chunked_cuda, cuda_bm3d (BM3D vs its f64 reference), chunked and
#              bm3d (host backends), cuda_stored (NV12/P010/RGB (de)interleaved on the device ==
#              on the host), nvrtc_compile with the machine's NVRTC
#   sanitizer  compute-sanitizer memcheck and racecheck on every kernel (fused, exact, multi-pass,
#              BM3D, stored-frame conversion)
#   sr         super-resolution: cuda_sr (CUDA vs the f64 reference), memcheck and racecheck on
#              its kernels, bench_sr (kernel-only and end-to-end frames/s)
#   cudamem    memory:CUDAMemory (nvcodec in .gst-debs): the element tests on the GPU
#              (tests/cuda_memory.rs), pre-made CUDA frames into nlmdenoise (pipeline_bench
#              source=cuda) beside kernel-only rows, and H.264 decoded by nvh264dec with and
#              without nlmdenoise (NLM R-live, BM3D normal) and nlmupscale (pipeline_bench decode=)
#   ptxas      registers, spills and stack of every fused variant (sm_90)
#   kernel     kernel-only rows (R-live, R-knlm, 1080p), twice, for this build and every carried
#              bench_cuda_<name>: same-lease A/B
#   gst        appsrc ! nlmdenoise ! fakesink at 1080p (pipeline_bench), R-live and R-knlm with the
#              noise estimated (the default) and R-live with a fixed strength (no estimate)
#   formats    NV12, P010 and RGBA end to end with stored frames converted on the GPU against
#              on the host (bench_cuda --format, NLMDENOISE_CUDA_DEVICE_LAYOUT), I420 beside
#              them; NV12 and P010 through appsrc ! nlmdenoise ! fakesink, lent and copied
#   scaling    one GPU against two (bench_chunks devices): NLM R-live and offline at 1080p and
#              2160p, BM3D normal spatial and 1 + 1 at 1080p, super-resolution x2 (2 + 2) from
#              960x540 and from 1080p
#   soak       100,000 1080p frames through appsrc ! nlmdenoise backend=cuda ! fakesink: resident
#              and device memory, fds and threads every 10,000 frames, slopes (examples/soak.rs)
#   cluster    the segment-parallel driver (scripts/bench_cluster, local workers on 1, 2, 4, 8 GPUs
#              up to the host's, y4m joined in place) against the plain CLI and the chunked path:
#              1080p BM3D normal (2400 frames), the candidate default (1200), NLM R-live (3600),
#              BM3D high (300), 2160p NLM and BM3D normal (400), H.264 out (needs CLUSTER=1 at
#              --collect: x264enc and FFmpeg's static build; a run of its own: about 8 minutes on
#              four GPUs, BUDGET=560)
#   cutcost    the scene-cut test's cost on the streaming thread: appsrc ! nlmdenoise ! fakesink,
#              NLM R-live at 1080p, I420 and NV12, own buffers and the proposed pool, and frames
#              in CUDA memory (source=cuda), each with scene-cut=0 and the default, twice
#   cli        the command-line tool on a 600-frame 1080p y4m file in the page cache, R-live with
#              sigma 12 and with the estimate: to /dev/null and to a file, beside dd's write rate
#   faults     device memory taken by another process before the stream starts (backend=cuda:
#              a clear error; backend=auto: warning and CPU fallback) and while it runs (the
#              running stream is unaffected); NVRTC hidden (a mount namespace over the CUDA
#              library folder) with backend=auto and backend=cuda; through the CUDA fault
#              stand-in (scripts/faults/make_cuda_shim.py) a kernel launch failing, a real GPU
#              trap (context lost) and the device gone, mid-stream, backend=cuda and auto
#              (examples/fault_pipeline.rs: frames received = out + reported lost); device
#              memory taken between two caps, the second needing a new engine (OOM at
#              reconfiguration)
#   bm3d       BM3D frames/s at 1080p through the engine (bench_bm3d: profiles x windows; the
#              candidate default profile and its cheaper neighbours) and through GStreamer
#   peers      bm3d-triton (PyPI, carried wheel) on the harness clips and at 1080p
#              (scripts/peers/run_bm3d_triton.py)
#   bench      the speed suite (scripts/bench: resolutions, sweeps, GStreamer, CPU, FFmpeg rows)
#   chunks     frames/s against chunk size, 1 vs all devices, the 18000-frame 1080p long run
#   ncu        Nsight Compute on one R-live fused launch (stall reasons, occupancy)
#   ncu_bm3d   Nsight Compute on BM3D launches of a 1080p frame (normal profile; the Bayesian
#              estimate's kernel with the candidate default)
#   ab         this build against another (collected with BASE=.../target/release), alternating on
#              the same lease: kernel rows, the engine end to end (copied and lent frames),
#              appsrc ! nlmdenoise ! fakesink (own buffers and the proposed pool), the chunked rows
#              at 1080p and BM3D fast/normal spatial and 1 + 1
#
# Knobs (environment): BUDGET (seconds for the whole run, default 560; every step's timeout is
# capped by what is left), FRAMES (per chunk-size run, 400), LONG (long-run frames, 18000).
#
# What comes back (the device tool returns at most 8 files): $OUT/console.txt (everything
# printed), $OUT/summary.txt (one line per step) and $OUT/all.tgz (every log and table).
set -u
cd "$(dirname "$0")/.."
B=.devcarry

if [ "${1:-}" = "--collect" ]; then
  set -e
  T=${CARGO_TARGET_DIR:-target}
  TESTS="cuda_vs_reference cuda_multipass chunked_cuda chunked nvrtc_compile cuda_bm3d bm3d cuda_sr sr cuda_stored cuda_device_frames"
  echo "== cargo build (release): GPU tests, benchmarks, pipeline_bench"
  cargo build --release -p nlmdenoise $(for t in $TESTS; do echo --test $t; done)
  cargo build --release -p nlmdenoise-bench
  cargo build --release -p nlmdenoise-cli
  cargo build --release -p gst-plugin-nlmdenoise --example pipeline_bench --example soak --example fault_pipeline --test cuda_memory
  rm -rf "$B"; mkdir -p "$B/ptx" "$B/faultcuda"
  cp "$(ls -t $T/release/deps/cuda_memory-* | grep -v '\.d$' | head -1)" "$B/element_cuda_memory"
  bash scripts/faults/build_shim.sh "$B/faultcuda"
  for t in $TESTS; do
    cp "$(ls -t $T/release/deps/$t-* | grep -v '\.d$' | head -1)" "$B/$t"
  done
  cp $T/release/bench_cuda $T/release/bench_chunks $T/release/bench_multipass $T/release/bench_bm3d $T/release/bench_sr $T/release/examples/pipeline_bench $T/release/examples/soak $T/release/examples/fault_pipeline $T/release/nlmdenoise "$B/"
  if [ -n "${BASE_BENCH:-}" ]; then cp "$BASE_BENCH" "$B/bench_cuda_base"; fi
  # BASE=path/to/another/target/release: that build's benchmarks as <name>_base (the `ab` part).
  if [ -n "${BASE:-}" ]; then
    for b in bench_cuda bench_chunks bench_bm3d; do cp "$BASE/$b" "$B/${b}_base"; done
    cp "$BASE/examples/pipeline_bench" "$B/pipeline_bench_base"
  fi
  # LEAN=1: without what the chosen parts do not use (the carry limit is 64 MiB).
  if [ "${LEAN:-0}" = 1 ]; then rm -f "$B/soak" "$B/bench_multipass" "$B/bench_sr"; [ "${CLUSTER:-0}" = 1 ] || rm -f "$B/nlmdenoise"; fi
  for e in ${EXTRA_BENCH:-}; do cp "${e#*:}" "$B/bench_cuda_${e%%:*}"; done
  find "$B" -maxdepth 1 -type f -exec strip --strip-debug {} +
  [ "${LEAN:-0}" = 1 ] && SKIP_PTX=1
  # PTX of every variant for the ptxas part (needs pip's NVRTC here; scripts/test.sh installs it).
  NVRTC=.cache/nvrtc/nvidia/cuda_nvrtc/lib
  if [ -e "$NVRTC/libnvrtc.so.12" ] && [ -z "${SKIP_PTX:-}" ]; then
    NLMDENOISE_NVRTC_DIR="$PWD/$NVRTC" NLMDENOISE_PTX_DUMP="$PWD/$B/ptx" "$B/nvrtc_compile" every_variant >/dev/null 2>&1 || echo "PTX dump failed (ptxas part will be empty)"
  fi
  # Peers: bm3d-triton's wheel (pure Python; torch and triton are on the GPU machine) and the
  # quality harness's noisy clips, cut to 2 frames (scripts/quality makes them: target/quality).
  mkdir -p "$B/wheels" "$B/clips"
  [ -f .cache/wheel/bm3d_triton-0.1.1-py3-none-any.whl ] || python3 -m pip download --quiet --no-deps --only-binary=:all: --dest .cache/wheel 'bm3d-triton==0.1.1'
  cp .cache/wheel/bm3d_triton-0.1.1-py3-none-any.whl "$B/wheels/"
  # PEERS=0: no clips (the carry limit is 64 MiB; only the peers part reads them).
  for f in target/quality/work/clips/*-6f-*.y4m; do
    [ -f "$f" ] && [ "${PEERS:-1}" != 0 ] || continue
    python3 - "$f" "$B/clips/$(basename "$f" | sed 's/-6f-/-2f-/')" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
parts = data.split(b"FRAME")
open(sys.argv[2], "wb").write(b"FRAME".join(parts[:3]))
PY
  done
  # FFmpeg for the speed suite's CPU comparison rows (FFMPEG=1; 21 MB of the 64 MB a call may
  # carry): the static build (johnvansickle.com, GPL) that PyPI's imageio-ffmpeg wheel ships.
  if { [ "${FFMPEG:-0}" = 1 ] || [ "${CLUSTER:-0}" = 1 ]; } && [ ! -f .cache/ffmpeg-static.xz ]; then
    mkdir -p .cache/wheel
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --dest .cache/wheel 'imageio-ffmpeg==0.7.0'
    python3 - <<'PY'
import zipfile, glob, shutil
w = glob.glob(".cache/wheel/imageio_ffmpeg-0.7.0-*.whl")[0]
with zipfile.ZipFile(w) as z:
    name = [n for n in z.namelist() if "/binaries/ffmpeg-" in n][0]
    with z.open(name) as src, open(".cache/ffmpeg-static", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
    xz -T0 -6 -f .cache/ffmpeg-static
  fi
  if [ "${FFMPEG:-0}" = 1 ] || [ "${CLUSTER:-0}" = 1 ]; then cp .cache/ffmpeg-static.xz "$B/"; fi
  # With plugins-bad's nvcodec (nvh264dec, cudaupload, cudadownload) for the cudamem part.
  if [ ! -f .gst-debs/activate.sh ] || ! ls .gst-debs/gstreamer1.0-plugins-bad_*.deb >/dev/null 2>&1; then
    NVCODEC=1 ../shared/gst-runtime/fetch.sh "$PWD/.gst-debs"
    cp ../shared/gst-runtime/activate.sh .gst-debs/
  fi
  # H.264 clips for the cudamem part's decode rows (x264enc here; the GPU machine has no encoder):
  # 600 frames of 1080p, 300 of 960x540.
  if [ "${H264:-1}" = 1 ] && gst-inspect-1.0 x264enc >/dev/null 2>&1; then
    mkdir -p .cache/h264
    [ -f .cache/h264/clip1080.h264 ] || gst-launch-1.0 -q videotestsrc pattern=smpte horizontal-speed=3 num-buffers=600 ! video/x-raw,width=1920,height=1080,framerate=25/1,format=I420 ! x264enc speed-preset=ultrafast bitrate=4000 key-int-max=50 ! h264parse ! video/x-h264,stream-format=byte-stream,alignment=au ! filesink location=.cache/h264/clip1080.h264
    [ -f .cache/h264/clip540.h264 ] || gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=300 ! video/x-raw,width=960,height=540,framerate=25/1,format=I420 ! x264enc speed-preset=ultrafast bitrate=2000 key-int-max=50 ! h264parse ! video/x-h264,stream-format=byte-stream,alignment=au ! filesink location=.cache/h264/clip540.h264
    cp .cache/h264/clip1080.h264 .cache/h264/clip540.h264 "$B/"
  fi
  # CLUSTER=1: x264enc (plugins-ugly, libx264) for the cluster part's H.264 rows.
  if [ "${CLUSTER:-0}" = 1 ] && ! ls .gst-debs/gstreamer1.0-plugins-ugly_*.deb >/dev/null 2>&1; then
    (cd .gst-debs && apt-get download -qq gstreamer1.0-plugins-ugly libx264-164)
  fi
  du -sh "$B" .gst-debs
  echo "carry: [\".devcarry\", \".gst-debs\"]"
  exit 0
fi

[ -x "$B/cuda_vs_reference" ] || { echo "no $B/: run 'bash scripts/gpu.sh --collect' here first"; exit 2; }
FINAL=${OUT:-/tmp/gpu-out}; mkdir -p "$FINAL"
S=$(mktemp -d)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
BUDGET=${BUDGET:-560}; FRAMES=${FRAMES:-400}; LONG=${LONG:-18000}
START=$(date +%s)
PARTS=${*:-env tests sanitizer kernel gst}
# tmo CAP: the next step's timeout: CAP seconds, or what is left of BUDGET when that is less.
tmo() { local l=$((BUDGET - ($(date +%s) - START) - 3)); [ "$l" -lt 1 ] && l=1; echo $((l < $1 ? l : $1)); }
note() { echo "$*"; echo "$*" >> "$S/summary.txt"; }
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)

run_part() {
  case $1 in
  env)
    { date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; free -g | head -2
      ls -l /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null; "$SAN" --version 2>/dev/null | tail -1
      echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; } > "$S/env.txt" 2>&1
    note "device: $GPUS GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | paste -sd' ')" ;;
  tests)
    for t in ${TESTS:-cuda_vs_reference cuda_multipass chunked_cuda chunked cuda_bm3d bm3d cuda_stored cuda_device_frames}; do
      timeout "$(tmo 150)" $B/$t --nocapture --test-threads=4 > "$S/$t.txt" 2>&1
      note "$t: rc=$? $(grep -E '^test result' "$S/$t.txt") $(grep -c '^SKIPPED' "$S/$t.txt") skipped"
      grep -E 'FAIL|panicked' "$S/$t.txt" | cut -c1-300 | head -20
    done
    [ -n "${TESTS:-}" ] && return 0  # a chosen list of test binaries only
    timeout "$(tmo 200)" $B/nvrtc_compile --nocapture > "$S/nvrtc_compile.txt" 2>&1
    note "nvrtc_compile (this machine's NVRTC): rc=$? $(grep -E '^test result' "$S/nvrtc_compile.txt") $(grep -c 'SKIPPED' "$S/nvrtc_compile.txt") skipped" ;;
  sanitizer)
    timeout "$(tmo 200)" "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=4 sanitizer_smoke batched chroma_modes > "$S/memcheck_fused.txt" 2>&1
    note "memcheck (fused + exact): rc=$? $(grep -E 'ERROR SUMMARY|test result' "$S/memcheck_fused.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_multipass --test-threads=2 f32_group_kinds f32_temporal > "$S/memcheck_multipass.txt" 2>&1
    note "memcheck (multi-pass): rc=$? $(grep -E 'ERROR SUMMARY|test result' "$S/memcheck_multipass.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 200)" "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 sanitizer_smoke > "$S/racecheck_fused.txt" 2>&1
    note "racecheck (fused + exact): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$S/racecheck_fused.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_multipass --test-threads=2 f32_group_kinds > "$S/racecheck_multipass.txt" 2>&1
    note "racecheck (multi-pass): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$S/racecheck_multipass.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=2 sanitizer_smoke_bm3d formats_patch_sizes high_profile_at_its_own_radius > "$S/memcheck_bm3d.txt" 2>&1
    note "memcheck (bm3d): rc=$? $(grep -E 'ERROR SUMMARY|test result' "$S/memcheck_bm3d.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=2 sanitizer_smoke_bm3d high_profile_at_its_own_radius > "$S/racecheck_bm3d.txt" 2>&1
    note "racecheck (bm3d): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$S/racecheck_bm3d.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_stored --test-threads=1 sanitizer_smoke_stored > "$S/memcheck_stored.txt" 2>&1
    note "memcheck (stored frames): rc=$? $(grep -E 'ERROR SUMMARY|test result' "$S/memcheck_stored.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_stored --test-threads=1 sanitizer_smoke_stored > "$S/racecheck_stored.txt" 2>&1
    note "racecheck (stored frames): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$S/racecheck_stored.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_device_frames --test-threads=1 sanitizer_smoke_device_frames > "$S/memcheck_device_frames.txt" 2>&1
    note "memcheck (device frames): rc=$? $(grep -E 'ERROR SUMMARY|test result' "$S/memcheck_device_frames.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_device_frames --test-threads=1 sanitizer_smoke_device_frames > "$S/racecheck_device_frames.txt" 2>&1
    note "racecheck (device frames): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$S/racecheck_device_frames.txt" | sort | uniq -c | paste -sd' ' -)" ;;
  cudamem)
    # memory:CUDAMemory through the elements (needs nvcodec in .gst-debs): the element tests on
    # the GPU, then rates: pre-made CUDA frames into nlmdenoise against kernel-only, and GPU
    # decoding with and without the element (steady state, first to last frame at the sink).
    [ -f .gst-debs/activate.sh ] || { note "cudamem: no .gst-debs"; return 0; }
    (
      source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
      export GST_PLUGIN_FEATURE_RANK=nvh264sldec:NONE
      gst-inspect-1.0 nvcodec 2>&1 | grep -E 'cudaupload|cudadownload|nvh264dec' > "$S/cudamem_nvcodec.txt"
      timeout "$(tmo 200)" $B/element_cuda_memory --nocapture --test-threads=1 > "$S/cudamem_tests.txt" 2>&1
      echo "element tests rc=$? $(grep -E '^test result' "$S/cudamem_tests.txt") $(grep -c '^SKIPPED' "$S/cudamem_tests.txt") skipped" > "$S/cudamem.txt"
      grep -E 'FAIL|panicked|identical' "$S/cudamem_tests.txt" | cut -c1-300 | head -30 >> "$S/cudamem.txt"
      RLIVE="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2"
      for rep in 1 2; do
        timeout "$(tmo 60)" $B/bench_cuda --brief --only kernel --iters 300 2>&1 | grep -E 'kernel' | sed "s/^/kernel #$rep: /" >> "$S/cudamem.txt"
        for extra in "strength=10" ""; do
          echo "== source=cuda NV12 R-live $extra #$rep" >> "$S/cudamem.txt"
          timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda $RLIVE $extra >> "$S/cudamem.txt" 2>&1 || echo "exit $? source=cuda $extra" >> "$S/cudamem.txt"
        done
        echo "== source=own NV12 R-live strength=10 #$rep (system memory, for comparison)" >> "$S/cudamem.txt"
        timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 3000 format=NV12 $RLIVE strength=10 >> "$S/cudamem.txt" 2>&1
      done
      if [ -f "$B/clip1080.h264" ]; then
        for cfg in "$RLIVE strength=10" "$RLIVE" "backend=cuda algorithm=bm3d bm3d-profile=normal sigma=10" "backend=cuda algorithm=bm3d bm3d-profile=normal sigma=10 temporal-past=1 temporal-future=1"; do
          echo "== decode 1080p: $cfg" >> "$S/cudamem.txt"
          timeout "$(tmo 90)" $B/pipeline_bench decode=$B/clip1080.h264 $cfg >> "$S/cudamem.txt" 2>&1 || echo "exit $? decode $cfg" >> "$S/cudamem.txt"
        done
        echo "== decode 540p: nlmupscale scale=2" >> "$S/cudamem.txt"
        timeout "$(tmo 90)" $B/pipeline_bench decode=$B/clip540.h264 element=nlmupscale backend=cuda scale=2 >> "$S/cudamem.txt" 2>&1 || echo "exit $? decode upscale" >> "$S/cudamem.txt"
        echo "== source=cuda 960x540 nlmupscale scale=2" >> "$S/cudamem.txt"
        timeout "$(tmo 90)" $B/pipeline_bench 960 540 1500 format=NV12 source=cuda element=nlmupscale backend=cuda scale=2 >> "$S/cudamem.txt" 2>&1
      fi
    )
    note "cudamem: $(head -1 "$S/cudamem.txt")" ;;
  ptxas)
    for f in "$B"/ptx/*.ptx; do
      [ -f "$f" ] || continue
      echo "$(basename "$f"): $(ptxas -arch=sm_90 -v "$f" -o /dev/null 2>&1 | grep -Eo 'Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)|[0-9]+ bytes stack frame' | paste -sd, -)"
    done > "$S/ptxas.txt" 2>&1
    note "ptxas: $(grep -c registers "$S/ptxas.txt") variants; max $(grep -Eo 'Used [0-9]+' "$S/ptxas.txt" | awk '{print $2}' | sort -n | tail -1) registers; spills: $(grep -Eo '[1-9][0-9]* bytes spill' "$S/ptxas.txt" | head -1)" ;;
  kernel)
    for rep in 1 2; do
      for other in $B/bench_cuda_*; do
        [ -x "$other" ] || continue
        timeout "$(tmo 60)" "$other" --brief --only kernel --iters 200 2>&1 | grep -E 'kernel' | sed "s/^/${other##*bench_cuda_} #$rep: /" | tee -a "$S/kernel.txt"
      done
      timeout "$(tmo 60)" $B/bench_cuda --brief --only kernel --iters 200 2>&1 | grep -E 'kernel' | sed "s/^/this build #$rep: /" | tee -a "$S/kernel.txt"
    done
    note "kernel rows: $(grep -c kernel "$S/kernel.txt") (kernel.txt)" ;;
  gst)
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        for cfg in "backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2" \
                   "backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10" \
                   "backend=cuda pipeline-depth=2 temporal-past=1 temporal-future=1 search-radius=2 patch-radius=4"; do
          timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 1500 $cfg >> "$S/gst.txt" 2>&1 || echo "exit $? for $cfg" >> "$S/gst.txt"
        done
        # The engine alone, end to end: host frames copied in and out, and planar frames lent.
        for rep in 1 2; do
          timeout "$(tmo 60)" $B/bench_cuda --brief --only e2e --config live --frames 3000 2>&1 | grep -E '^\|' >> "$S/gst.txt"
        done
        # Frames lent (zero-copy, the default) against copied, alternating: a source pushing its
        # own buffers, and one writing into the element's proposed pool (source=pool).
        for rep in 1 2; do
          for source in "" source=pool; do
            for zc in true false; do
              timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 2000 backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10 zero-copy=$zc $source >> "$S/gst.txt" 2>&1 || echo "exit $? for zero-copy=$zc $source" >> "$S/gst.txt"
            done
          done
        done
        timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 2000 backend=cuda pipeline-depth=2 temporal-past=1 temporal-future=1 search-radius=2 patch-radius=4 source=pool >> "$S/gst.txt" 2>&1
        # The same output bytes every way on the GPU (direct I/O from and into lent frames).
        for mode in "zero-copy=true" "zero-copy=false" "zero-copy=true source=pool"; do
          echo "== $mode checksum" >> "$S/gst.txt"
          timeout "$(tmo 60)" $B/fault_pipeline 1920 1080 150 backend=cuda pipeline-depth=2 temporal-past=2 temporal-future=1 $mode 2>&1 | grep -E '^frames in|rror|source=pool' >> "$S/gst.txt"
        done
      )
      grep -E '^\||^==|^frames in|^source thread' "$S/gst.txt"; note "gst: $(grep -c 'appsrc !' "$S/gst.txt") rows (gst.txt)"
    else
      note "gst: no .gst-debs/activate.sh (run --collect here)"
    fi ;;
  formats)
    # Formats that interleave components: the engine end to end with stored frames
    # (de)interleaved on the GPU (the default) against unpacked and packed on the host
    # (NLMDENOISE_CUDA_DEVICE_LAYOUT=0), I420 beside them; then through GStreamer.
    for rep in 1 2; do
      for fmt in I420 NV12 P010_10LE RGBA; do
        for layout in 1 0; do
          [ "$fmt" = I420 ] && [ "$layout" = 0 ] && continue
          NLMDENOISE_CUDA_DEVICE_LAYOUT=$layout timeout "$(tmo 60)" $B/bench_cuda --brief --only e2e --config live --frames 2000 --format $fmt 2>&1 \
            | grep -E '^\| R-' | sed "s/^/device-layout=$layout /" >> "$S/formats.txt"
        done
      done
    done
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        # The same output bytes lent, copied and written into the pool (stored frames on the GPU).
        for fmt in NV12 RGBA; do
          for mode in "zero-copy=true" "zero-copy=false" "zero-copy=true source=pool"; do
            echo "== $fmt $mode checksum" >> "$S/formats.txt"
            timeout "$(tmo 60)" $B/fault_pipeline 1920 1080 150 format=$fmt backend=cuda pipeline-depth=2 temporal-past=2 temporal-future=1 $mode 2>&1 | grep -E '^frames in|rror' >> "$S/formats.txt"
          done
        done
        for fmt in NV12 P010_10LE; do
          for source in "" source=pool; do
            for zc in true false; do
              timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 2000 format=$fmt backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10 zero-copy=$zc $source >> "$S/formats.txt" 2>&1 || echo "exit $? for $fmt zero-copy=$zc $source" >> "$S/formats.txt"
            done
          done
        done
      )
    fi
    grep -E '^device-layout|appsrc|^==|^frames in' "$S/formats.txt" | grep -v 'appsrc ! fakesink'; note "formats: $(grep -c 'R-live' "$S/formats.txt") engine rows, $(grep -c 'appsrc.*nlmdenoise' "$S/formats.txt") gst rows (formats.txt)" ;;
  soak)
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        timeout "$(tmo 200)" $B/soak 1920 1080 ${SOAK_FRAMES:-100000} backend=cuda pipeline-depth=2 > "$S/soak.md" 2>&1
        echo "exit $?" >> "$S/soak.md"
      )
      note "soak: $(grep -E 'frames/s|slope|exit' "$S/soak.md" | paste -sd' ' -)"
    fi ;;
  cluster)
    if [ -f .gst-debs/activate.sh ] && [ -f "$B/ffmpeg-static.xz" ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        mkdir -p /tmp/bin && xz -dc "$B/ffmpeg-static.xz" > /tmp/bin/ffmpeg && chmod +x /tmp/bin/ffmpeg
        export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
        # Most important first (each step's timeout is capped by what is left of BUDGET): BM3D
        # normal and the candidate default on a long 1080p input (GPU-bound), NLM R-live (host-
        # bound), BM3D high, 2160p, H.264 out.
        bc() { timeout "$(tmo "$1")" python3 scripts/bench_cluster --gpus "$GPUS" --binary "$B/nlmdenoise" --segments 0 --log "$S/cluster-log.txt" "${@:2}" >> "$S/cluster.md" 2>&1; }
        bc 120 --sizes 1920x1080:2400 --configs bm3d-normal --outputs y4m
        bc 120 --sizes 1920x1080:1200 --configs bm3d-candidate --outputs y4m
        bc 120 --sizes 1920x1080:3600 --configs nlm-live --outputs y4m
        bc 100 --sizes 1920x1080:300 --configs bm3d-high --outputs y4m
        bc 100 --sizes 3840x2160:400 --configs nlm-live,bm3d-normal --outputs y4m
        bc 100 --sizes 1920x1080:1200 --configs nlm-live --outputs h264 --per-gpu 2 --h264-configs nlm-live --h264-sizes 1920x1080
      )
      note "cluster: $(grep -c '^| 1920' "$S/cluster.md") rows, $(grep -c 'DIFFERS' "$S/cluster.md") differing y4m outputs (cluster.md)"
    else
      note "cluster: skipped (collect with CLUSTER=1)"
    fi ;;
  cutcost)
    [ -f .gst-debs/activate.sh ] || { note "cutcost: no .gst-debs"; return 0; }
    (
      source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
      RLIVE="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10"
      for rep in 1 2; do
        for src in "format=I420" "format=NV12" "format=I420 source=pool" "format=NV12 source=pool" "format=NV12 source=cuda"; do
          for cut in "scene-cut=0" ""; do
            echo "== $src $cut #$rep" >> "$S/cutcost.txt"
            timeout "$(tmo 60)" $B/pipeline_bench 1920 1080 2000 $src $RLIVE $cut >> "$S/cutcost.txt" 2>&1 || echo "exit $?" >> "$S/cutcost.txt"
          done
        done
      done
    )
    grep -E '^==|^\| (appsrc|2000 frames)' "$S/cutcost.txt" | cut -c1-200; note "cutcost: $(grep -c '^| appsrc' "$S/cutcost.txt") rows (cutcost.txt)" ;;
  cli)
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        python3 - <<'PY'
import numpy as np
w, h, n = 1920, 1080, 600
rng = np.random.default_rng(1)
x = np.linspace(0, 200, w)[None, :] + np.linspace(0, 40, h)[:, None]
frames = []
for k in range(8):
    y = np.clip(x + 3 * k + rng.normal(0, 12, (h, w)), 0, 255).astype(np.uint8)
    c = np.clip(128 + rng.normal(0, 12, (h // 2, w // 2 * 2)), 0, 255).astype(np.uint8)
    frames.append(b"FRAME\n" + y.tobytes() + c.tobytes())
with open("/tmp/in1080.y4m", "wb") as f:
    f.write(b"YUV4MPEG2 W1920 H1080 F60:1 Ip A1:1 C420jpeg\n")
    for i in range(n):
        f.write(frames[i % 8])
PY
        cat /tmp/in1080.y4m > /dev/null  # into the page cache
        for s in "--sigma 12" "--sigma auto"; do
          for rep in 1 2; do
            $B/nlmdenoise -y -i /tmp/in1080.y4m -o /dev/null --backend cuda --pipeline-depth 2 --temporal-past 2 --temporal-future 0 $s 2>&1 | grep -E 'fps' | sed "s|^|/dev/null $s: |" | tee -a "$S/cli.txt"
          done
          $B/nlmdenoise -y -i /tmp/in1080.y4m -o /tmp/out1080.y4m --backend cuda --pipeline-depth 2 --temporal-past 2 --temporal-future 0 $s 2>&1 | grep -E 'fps' | sed "s|^|file $s: |" | tee -a "$S/cli.txt"
          sync; rm -f /tmp/out1080.y4m
        done
        dd if=/dev/zero of=/tmp/ddtest bs=16M count=120 conv=fdatasync 2>&1 | tail -1 | sed 's/^/dd write: /' | tee -a "$S/cli.txt"
        rm -f /tmp/ddtest /tmp/in1080.y4m
      )
      note "cli: $(grep -c fps "$S/cli.txt") rows (cli.txt)"
    fi ;;
  faults)
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        HOG='import sys, time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - 150e6), dtype=torch.uint8, device="cuda")
print("hog: holding", x.numel() >> 20, "MiB of", total >> 20, flush=True)
time.sleep(float(sys.argv[1]))'
        python3 -c "$HOG" 40 > "$S/fault_hog.txt" 2>&1 & hog=$!
        sleep 8
        for be in cuda auto; do
          echo "== device memory taken before the start, backend=$be" >> "$S/faults.txt"
          GST_DEBUG=nlmdenoise:3 GST_DEBUG_NO_COLOR=1 timeout 60 $B/pipeline_bench 1920 1080 60 backend=$be pipeline-depth=2 >> "$S/faults.txt" 2>&1; echo "exit $?" >> "$S/faults.txt"
        done
        kill $hog 2>/dev/null; wait $hog 2>/dev/null
        echo "== device memory taken while the stream runs (backend=cuda)" >> "$S/faults.txt"
        ( sleep 2; python3 -c "$HOG" 10 >> "$S/fault_hog.txt" 2>&1 ) &
        GST_DEBUG=nlmdenoise:3 GST_DEBUG_NO_COLOR=1 timeout 60 $B/pipeline_bench 1920 1080 12000 backend=cuda pipeline-depth=2 >> "$S/faults.txt" 2>&1; echo "exit $?" >> "$S/faults.txt"
        wait
        # Faults inside the driver, mid-stream (the launch counter starts at the first kernel).
        for fault in launch-error trap lost; do
          for be in cuda auto; do
            if [ $be = cuda ]; then size="1920 1080 400"; else size="640 360 400"; fi
            echo "== injected: $fault at kernel launch 120, backend=$be ($size)" >> "$S/faults.txt"
            LD_LIBRARY_PATH="$PWD/$B/faultcuda:${LD_LIBRARY_PATH:-}" CUDA_FAULT=$fault CUDA_FAULT_AT=120 GST_DEBUG=nlmdenoise:2 GST_DEBUG_NO_COLOR=1 \
              timeout 120 $B/fault_pipeline $size backend=$be pipeline-depth=2 temporal-past=2 temporal-future=1 >> "$S/faults.txt" 2>&1; echo "exit $?" >> "$S/faults.txt"
          done
        done
        # Stored frames (NV12 written into the element's pool and lent out, converted on the GPU)
        # through a GPU trap: cuda names the lost frames, auto goes on on the CPU with them.
        for be in cuda auto; do
          if [ $be = cuda ]; then size="1920 1080 400"; else size="640 360 400"; fi
          echo "== injected: trap at kernel launch 120, backend=$be, NV12 from the pool ($size)" >> "$S/faults.txt"
          LD_LIBRARY_PATH="$PWD/$B/faultcuda:${LD_LIBRARY_PATH:-}" CUDA_FAULT=trap CUDA_FAULT_AT=120 GST_DEBUG=nlmdenoise:2 GST_DEBUG_NO_COLOR=1 \
            timeout 120 $B/fault_pipeline $size format=NV12 source=pool backend=$be pipeline-depth=2 temporal-past=2 temporal-future=1 >> "$S/faults.txt" 2>&1; echo "exit $?" >> "$S/faults.txt"
        done
        # Device memory running out at a reconfiguration: 640x360 runs, the source pauses, a hog
        # takes all but 40 MB, then 1920x1080 caps need a new engine.
        for be in cuda auto; do
          echo "== device memory taken before a caps change 640x360 -> 1920x1080, backend=$be" >> "$S/faults.txt"
          ( sleep 4; python3 -c "${HOG/150e6/40e6}" 25 >> "$S/fault_hog.txt" 2>&1 ) & hogger=$!
          GST_DEBUG=nlmdenoise:3 GST_DEBUG_NO_COLOR=1 timeout 120 $B/fault_pipeline 640 360 70 pause-at=40:14 change-at=40:1920x1080 backend=$be pipeline-depth=2 >> "$S/faults.txt" 2>&1; echo "exit $?" >> "$S/faults.txt"
          wait $hogger
        done
        mkdir -p /tmp/empty-cuda
        for be in auto cuda; do
          echo "== NVRTC hidden, backend=$be" >> "$S/faults.txt"
          timeout 60 unshare -m bash -c "for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d \$d ] && mount --bind /tmp/empty-cuda \$d; done; \
            LD_LIBRARY_PATH=\$(echo \$LD_LIBRARY_PATH | tr : '\\n' | grep -v cuda | paste -sd: -) GST_DEBUG=nlmdenoise:3 GST_DEBUG_NO_COLOR=1 $B/pipeline_bench 640 360 30 backend=$be" >> "$S/faults.txt" 2>&1; echo "exit $?" >> "$S/faults.txt"
        done
      )
      note "faults: $(grep -cE '^exit' "$S/faults.txt") runs (faults.txt)"; grep -E '^==|^exit|rror|arning|appsrc ! nlmdenoise|hog|^frames in|shim|panick' "$S/faults.txt" "$S/fault_hog.txt" | cut -c1-300
    fi ;;
  bm3d)
    timeout "$(tmo 240)" $B/bench_bm3d --frames ${BM3D_FRAMES:-120} ${BM3D_PROFILES:+--profiles $BM3D_PROFILES} > "$S/bm3d.md" 2>&1
    note "bench_bm3d: rc=$?"; grep -E '^\|' "$S/bm3d.md"
    # The candidate default profile (`high` step 4 radius 8, per-frame groups), with the Bayesian
    # estimate, and its cheaper neighbours that keep the picture (docs/tuning.md).
    for extra in "" "--bayes" "--hard-block-step 5" "--seeds 2" "--wiener-seeds 2" "--hard-block-step 5 --wiener-seeds 2"; do
      timeout "$(tmo 120)" $B/bench_bm3d --frames 30 --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups $extra 2>&1 | grep -E '^\| high' >> "$S/bm3d_candidates.md"
    done
    note "bench_bm3d candidates: rc=$?"; cat "$S/bm3d_candidates.md"
    if [ -n "${BM3D_SWEEP:-}" ]; then
      timeout "$(tmo 240)" $B/bench_bm3d --frames ${BM3D_FRAMES:-120} --windows ${BM3D_SWEEP_WINDOWS:-spatial} --sweep "$BM3D_SWEEP" > "$S/bm3d_sweep.md" 2>&1
      note "bench_bm3d sweep: rc=$?"; grep -E '^\|' "$S/bm3d_sweep.md"
    fi
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        for cfg in "bm3d-profile=fast temporal-past=2 bm3d-steps=1" "bm3d-profile=normal temporal-past=2 bm3d-steps=1" \
                   "bm3d-profile=fast temporal-past=0" "bm3d-profile=normal temporal-past=0"; do
          timeout "$(tmo 90)" $B/pipeline_bench 1920 1080 300 backend=cuda pipeline-depth=2 algorithm=bm3d sigma=20 $cfg >> "$S/gst_bm3d.txt" 2>&1 || echo "exit $? for $cfg" >> "$S/gst_bm3d.txt"
        done
      )
      grep -E '^\| appsrc ! nlmdenoise|exit' "$S/gst_bm3d.txt"; note "gst bm3d: $(grep -c 'appsrc ! nlmdenoise' "$S/gst_bm3d.txt") rows"
    fi ;;
  sr)
    # Super-resolution: CUDA against the reference, compute-sanitizer on every kernel, speed.
    timeout "$(tmo 150)" $B/cuda_sr --nocapture --test-threads=4 > "$S/cuda_sr.txt" 2>&1
    note "cuda_sr: rc=$? $(grep -E '^test result' "$S/cuda_sr.txt") $(grep -c '^SKIPPED' "$S/cuda_sr.txt") skipped"
    grep -E 'FAIL|panicked' "$S/cuda_sr.txt" | cut -c1-300 | head -20
    timeout "$(tmo 150)" "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_sr --test-threads=2 sanitizer_smoke_sr > "$S/memcheck_sr.txt" 2>&1
    note "memcheck (sr): rc=$? $(grep -E 'ERROR SUMMARY|test result' "$S/memcheck_sr.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 150)" "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_sr --test-threads=2 sanitizer_smoke_sr > "$S/racecheck_sr.txt" 2>&1
    note "racecheck (sr): rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test result' "$S/racecheck_sr.txt" | sort | uniq -c | paste -sd' ' -)"
    timeout "$(tmo 200)" $B/bench_sr --frames ${SR_FRAMES:-200} --sizes ${SR_SIZES:-960x540,1920x1080} --iterations ${SR_ITERATIONS:-1,2} --radii ${SR_RADII:-p3r2,p2r3} > "$S/sr.md" 2>&1
    note "bench_sr: rc=$?"; grep -E '^\||backend' "$S/sr.md"
    if [ -f .gst-debs/activate.sh ]; then
      (
        source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
        for cfg in "960 540 1000 temporal-past=2 temporal-future=2" "960 540 1000 temporal-past=2 temporal-future=2 patch-radius=2 search-radius=3" "960 540 1000 temporal-past=2" "1920 1080 300 temporal-past=2 temporal-future=2"; do
          timeout "$(tmo 90)" $B/pipeline_bench $cfg element=nlmupscale backend=cuda pipeline-depth=2 scale=2 >> "$S/gst_sr.txt" 2>&1 || echo "exit $? for $cfg" >> "$S/gst_sr.txt"
        done
      )
      grep -E '^\| appsrc ! nlmupscale|exit' "$S/gst_sr.txt"; note "gst sr: $(grep -c 'appsrc ! nlmupscale' "$S/gst_sr.txt") rows"
    fi ;;
  peers)
    python3 -m pip install -q --no-index --no-deps --target /tmp/peers $B/wheels/*.whl > "$S/peers_install.txt" 2>&1
    PYTHONPATH=/tmp/peers timeout "$(tmo 300)" python3 scripts/peers/run_bm3d_triton.py $B/clips "$S/peers.md" > "$S/peers.txt" 2>&1
    note "peers (bm3d-triton): rc=$?"; cat "$S/peers.md" 2>/dev/null || tail -20 "$S/peers.txt" ;;
  bench)
    mkdir -p "$S/bench"
    OUT=$S/bench B=$B BUDGET=$(tmo 400) bash scripts/bench > "$S/bench/console.txt" 2>&1
    note "bench: rc=$? (bench/results.md)" ;;
  chunks)
    if [ "$GPUS" -ge 2 ]; then DEV=0,1; else DEV=0; fi
    timeout "$(tmo 200)" $B/bench_chunks sizes --backend cuda --frames "$FRAMES" --sizes 854x480,1280x720,1920x1080 --chunks off,1,2,4,8,16,32,auto > "$S/chunks_sizes.md" 2>&1
    note "chunks sizes: rc=$?"
    timeout "$(tmo 120)" $B/bench_chunks devices --backend cuda --devices $DEV --frames $((FRAMES * 2)) > "$S/chunks_devices.md" 2>&1
    note "chunks devices ($DEV): rc=$?"
    timeout "$(tmo 150)" $B/bench_chunks long --backend cuda --devices all --long "$LONG" --config live > "$S/chunks_long.md" 2>&1
    note "chunks long ($LONG frames): rc=$?"; grep -E '^\||^backend' "$S"/chunks_*.md | cut -c1-200 ;;
  scaling)
    # One device against two (or all listed), the same code and lease: NLM R-live and offline at
    # 1080p and 2160p, BM3D normal (spatial, and 1 past + 1 future) at 1080p.
    if [ "$GPUS" -ge 2 ]; then DEV=0,1; else DEV=0; fi
    for size in 1920x1080 3840x2160; do
      n=$([ "$size" = 1920x1080 ] && echo 1200 || echo 400)
      timeout "$(tmo 150)" $B/bench_chunks devices --backend cuda --devices $DEV --size $size --frames $n >> "$S/scaling.md" 2>&1
    done
    for cfg in bm3d bm3d-offline; do
      timeout "$(tmo 150)" $B/bench_chunks devices --backend cuda --devices $DEV --config $cfg --frames 300 >> "$S/scaling.md" 2>&1
    done
    for size in 960x540 1920x1080; do
      timeout "$(tmo 150)" $B/bench_chunks devices --backend cuda --devices $DEV --config sr --size $size --frames 300 >> "$S/scaling.md" 2>&1
    done
    grep -E '^\| (R-|offline|BM3D|V-BM3D|SR)|^###' "$S/scaling.md" | cut -c1-220; note "scaling ($DEV): $(grep -c '^| ' "$S/scaling.md") rows" ;;
  ab)
    for rep in 1 2; do
      for build in base this; do
        sfx=$([ $build = base ] && echo _base || echo)
        [ -x "$B/bench_cuda$sfx" ] || { note "ab: no $B/bench_cuda$sfx"; continue; }
        timeout "$(tmo 60)" "$B/bench_cuda$sfx" --brief --only kernel --iters 200 2>&1 | grep -E 'kernel' | sed "s/^/$build #$rep: /" >> "$S/ab.txt"
        timeout "$(tmo 60)" "$B/bench_cuda$sfx" --brief --only e2e --config live --frames 3000 2>&1 | grep -E '^\|' | sed "s/^/$build #$rep: /" >> "$S/ab.txt"
        if [ -f .gst-debs/activate.sh ]; then
          (
            source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
            for source in "" source=pool; do
              timeout "$(tmo 90)" "$B/pipeline_bench$sfx" 1920 1080 2000 backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10 zero-copy=true $source 2>&1 | grep -E 'appsrc' | sed "s/^/$build #$rep: /" >> "$S/ab.txt"
            done
          )
        fi
        timeout "$(tmo 120)" "$B/bench_chunks$sfx" sizes --backend cuda --frames 400 --sizes 1920x1080 --chunks off,4,16,auto 2>&1 | grep -E '^\| 1920' | sed "s/^/$build #$rep: /" >> "$S/ab.txt"
        timeout "$(tmo 120)" "$B/bench_bm3d$sfx" --frames 60 --profiles fast,normal --windows spatial,vbm3d 2>&1 | grep -E '^\| (fast|normal)' | sed "s/^/$build #$rep: /" >> "$S/ab.txt"
      done
    done
    cut -c1-220 "$S/ab.txt"; note "ab: $(wc -l < "$S/ab.txt") rows (ab.txt)" ;;
  ncu_bm3d)
    # Where one 1080p frame of the normal profile spends its time: the first hard and Wiener
    # launches of the luma plane after warm-up.
    if [ -x "$NCU" ]; then
      timeout "$(tmo 200)" "$NCU" --kernel-name regex:bm3d_ --launch-skip 24 --launch-count 3 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        $B/bench_bm3d --frames 4 --profiles normal --windows spatial > "$S/ncu_bm3d.txt" 2>&1
      note "ncu bm3d: rc=$?"
      grep -E 'bm3d_(hard|wiener|finish)|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Stall|Issued Ipc|Dynamic Shared' "$S/ncu_bm3d.txt" | head -60
      # The Bayesian estimate's kernel (the candidate default with --bayes, 1 + 1, luma).
      timeout "$(tmo 90)" "$NCU" --kernel-name regex:bm3d_bayes --launch-skip 4 --launch-count 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
        $B/bench_bm3d --frames 3 --profiles high --block-step 4 --search-radius 8 --windows vbm3d --frame-groups --bayes > "$S/ncu_bm3d_bayes.txt" 2>&1
      note "ncu bm3d bayes: rc=$?"
      grep -E 'bm3d_bayes|Duration|Registers Per|Achieved Occupancy|Block Limit Shared|Compute \(SM\) Throughput|Issued Ipc' "$S/ncu_bm3d_bayes.txt" | head -12
    else note "ncu: not installed"; fi ;;
  ncu)
    if [ -x "$NCU" ]; then
      timeout "$(tmo 150)" "$NCU" --kernel-name regex:nlm_fused --launch-skip 40 --launch-count 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
        $B/bench_cuda --brief --only kernel --config live --iters 20 > "$S/ncu.txt" 2>&1
      note "ncu: rc=$?"
    else note "ncu: not installed"; fi ;;
  *) note "unknown part $1" ;;
  esac
}

{
  for p in $PARTS; do
    echo "===== $p (+$(( $(date +%s) - START )) s)"
    run_part "$p"
  done
  echo "===== done (+$(( $(date +%s) - START )) s)"
} 2>&1 | tee "$FINAL/console.txt"
cp "$S/summary.txt" "$FINAL/summary.txt" 2>/dev/null
tar czf "$FINAL/all.tgz" -C "$S" .
