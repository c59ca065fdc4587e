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
# <<< cuda-setup
# --------------------------------------------------------------------------------------------------

# Release profile: building the dependencies optimized once costs about the same as a dev build,
# and the reference-backend tests then run many times faster.
PROFILE_ARGS=(--release)

mkdir -p target
LOG=target/test-output.txt
echo "== cargo test --workspace ${PROFILE_ARGS[*]} $*"
start=$(date +%s)
cargo test --workspace "${PROFILE_ARGS[@]}" "$@" 2>&1 | tee "$LOG"
# One closing line with the totals over every test binary (cargo prints one result per binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^ignored/) s += $(i-1) } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$LOG"
echo "test.sh: done in $(( $(date +%s) - start )) s" >&2
