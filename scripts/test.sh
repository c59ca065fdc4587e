#!/usr/bin/env bash
# The whole test suite: engine unit and integration tests, the command-line tool, the GStreamer
# element, and the CUDA kernel compile test (skipped, visibly, where NVRTC is missing).
#
#   bash scripts/test.sh
#
# Extra arguments go to `cargo test` (e.g. `bash scripts/test.sh --test engine`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"

# ---- CUDA / NVRTC setup (owned by the CUDA backend) ---------------------------------------------
# The kernel compile test needs libnvrtc. It is installed from PyPI (nvidia-cuda-nvrtc-cu12) and its
# library directory exported here, e.g. as NLMDENOISE_NVRTC_DIR / LD_LIBRARY_PATH.
# >>> cuda-setup
NVRTC_CACHE=.cache/nvrtc
NVRTC_LIB="$NVRTC_CACHE/nvidia/cuda_nvrtc/lib"
if [ ! -e "$NVRTC_LIB/libnvrtc.so.12" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$NVRTC_CACHE" nvidia-cuda-nvrtc-cu12 \
    || echo "cuda-setup: could not install nvidia-cuda-nvrtc-cu12 from PyPI" >&2
fi
if [ -e "$NVRTC_LIB/libnvrtc.so.12" ]; then
  export NLMDENOISE_NVRTC_DIR="$PWD/$NVRTC_LIB"
  export LD_LIBRARY_PATH="$NLMDENOISE_NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "cuda-setup: NVRTC from $NLMDENOISE_NVRTC_DIR (tests/nvrtc_compile.rs compiles every kernel variant)"
else
  echo "cuda-setup: NVRTC unavailable: tests/nvrtc_compile.rs will print SKIPPED and pass"
fi
# <<< cuda-setup
# --------------------------------------------------------------------------------------------------

# Release profile: measured on the 2-core development machine (2026-11-22, cold target directory,
# `cargo test --workspace [--release] --no-run`, then the run): release 216 s build + 4 s run,
# dev 286 s build + 3 s run (dev builds dependencies at opt-level 2 with full debug info).
PROFILE_ARGS=(--release --no-fail-fast)

mkdir -p target
LOG=target/test-output.txt
# Gates: formatting (rustfmt.toml), lints (workspace lints in Cargo.toml plus clippy's defaults, as
# errors) and the API docs (a broken intra-doc link is an error). Each fails the run on its own.
echo "== gates: cargo fmt --check"
cargo fmt --all --check
echo "== gates: cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== gates: cargo doc (broken intra-doc links denied)"
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" cargo doc --no-deps --workspace --lib --release --quiet
# The plugin's shared library, which the gst-launch test loads through GST_PLUGIN_PATH
# (`cargo test` builds only the rlib).
echo "== cargo build --release -p gst-plugin-nlmdenoise"
cargo build --release -p gst-plugin-nlmdenoise
echo "== the CUDA fault stand-in builds (scripts/faults, used by the GPU runner's faults part)"
bash scripts/faults/build_shim.sh target/faultcuda
echo "== cargo test --workspace ${PROFILE_ARGS[*]} $*"
start=$(date +%s)
# Tests that cannot run here (no GPU, no NVRTC) return early; libtest counts them as passed, so
# each also writes its name to this file (tests/common/mod.rs, `skip`) and the count below moves
# them from "passed" to "skipped".
export NLMDENOISE_TEST_SKIP_LOG="$PWD/target/test-skips.txt"
: > "$NLMDENOISE_TEST_SKIP_LOG"
status=0
cargo test --workspace "${PROFILE_ARGS[@]}" "$@" 2>&1 | tee "$LOG" || status=$?
# One closing line with the totals over every test binary (cargo prints one result per binary).
skipped_here=$(wc -l < "$NLMDENOISE_TEST_SKIP_LOG")
awk -v k="$skipped_here" '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^ignored/) s += $(i-1) } }
     END { printf "tests: %d passed, %d failed, %d skipped", p - k, f, s + k; if (k > 0) printf " (%d need a GPU or NVRTC: target/test-skips.txt)", k; printf "\n" }' "$LOG"
# The element tests once more under GStreamer's leaks tracer: each test binary deinitialises
# GStreamer when it exits, and exits with status 1 when the tracer finds an object still alive
# (plugins/nlmdenoise/tests/common/mod.rs, `init`). Only on a full run (no arguments).
if [ $# -eq 0 ]; then
  echo "== element tests under the leaks tracer (GST_TRACERS=leaks)"
  LEAKS_LOG=target/leaks-output.txt
  if env -u NLMDENOISE_TEST_SKIP_LOG GST_TRACERS=leaks GST_DEBUG=GST_TRACER:7 NLM_TEST_DEINIT_AT_EXIT=1 cargo test -p gst-plugin-nlmdenoise "${PROFILE_ARGS[@]}" \
      --test element --test scenarios --test upscale --test pipeline --test chunks --test zero_copy --test logging --test fuzz_element --test lifecycle --test cuda_memory > "$LEAKS_LOG" 2>&1; then
    echo "leaks tracer: $(grep -c '^test result: ok' "$LEAKS_LOG") test binaries, nothing alive at exit"
  else
    status=1
    grep -E '^test result|object-alive, |leaks tracer|panicked|^error' "$LEAKS_LOG" | cut -c1-300 | head -40
  fi
fi
# The segment-parallel driver (scripts/cluster) against the CLI it drives: plain Python unittest;
# its Ray tests need Ray, which scripts/install-cluster.sh puts in .cache/cluster-py (pip).
echo "== cluster driver: python3 -m unittest discover -s cluster"
bash scripts/install-cluster.sh || echo "test.sh: Ray could not be installed: the Ray tests report skipped" >&2
CLUSTER_LOG=target/cluster-test-output.txt
python3 -m unittest discover -s cluster -p 'test_*.py' -v 2>&1 | tee "$CLUSTER_LOG" || status=1
awk '/^Ran [0-9]+ tests/ { n = $2 } /skipped/ { if (match($0, /skipped=[0-9]+/)) s = substr($0, RSTART + 8, RLENGTH - 8) }
     /^FAILED/ { if (match($0, /failures=[0-9]+/)) f += substr($0, RSTART + 9, RLENGTH - 9); if (match($0, /errors=[0-9]+/)) f += substr($0, RSTART + 7, RLENGTH - 7) }
     END { printf "cluster tests: %d passed, %d failed, %d skipped\n", n - f - s, f, s }' "$CLUSTER_LOG"
echo "test.sh: done in $(( $(date +%s) - start )) s" >&2
exit "$status"
