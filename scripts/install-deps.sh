#!/usr/bin/env bash
# Installs what building and testing nlmdenoise needs on Debian bookworm (x86-64): a C toolchain,
# pkg-config, the GStreamer development files and tools, the GStreamer plugins the command-line
# tool's encoded-file mode and its tests use (base: decodebin, videoconvert, opusenc, audiotestsrc,
# rawvideoparse; good: mp4mux, matroskamux, y4menc; ugly: x264enc; libav: avenc_aac and the
# avdec_* decoders), ffmpeg (demo clips, ffprobe in tests), Python 3 and pip.
# Idempotent: when every package is already installed it only checks and returns (no apt-get
# update). Runs as root (CI) or through sudo.
set -euo pipefail

# Rust: the project needs cargo and rustc at least RUST_MIN (rust-version in Cargo.toml). Debian
# bookworm's own rustc is 1.63, too old; when no new enough toolchain is found, rustup's installer
# (https://rustup.rs) puts the stable one under ~/.cargo and the script says so.
RUST_MIN=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml" | head -n 1)
RUST_MIN=${RUST_MIN:-1.85}

# "ok VERSION", "old VERSION" or "missing" for the cargo on PATH.
rust_status() {
  if ! command -v cargo >/dev/null 2>&1; then echo missing; return; fi
  local v
  v=$(cargo --version 2>/dev/null | awk '{ print $2 }')
  if [[ -z "$v" ]]; then echo missing; return; fi
  if [[ "$(printf '%s\n%s\n' "$RUST_MIN" "${v%%-*}" | sort -V | head -n 1)" == "$RUST_MIN" ]]; then
    echo "ok $v"
  else
    echo "old $v"
  fi
}

if [[ "${1:-}" == "--rust-check" ]]; then
  # For tests: report what would be done about Rust, change nothing.
  case "$(rust_status)" in
    ok*) echo "rust: $(rust_status | cut -d' ' -f2) is new enough (>= $RUST_MIN)" ;;
    old*) echo "rust: $(rust_status | cut -d' ' -f2) is older than $RUST_MIN; would install the stable toolchain with rustup" ;;
    *) echo "rust: cargo not found; would install the stable toolchain with rustup" ;;
  esac
  exit 0
fi

PACKAGES=(
  build-essential
  pkg-config
  libgstreamer1.0-dev
  libgstreamer-plugins-base1.0-dev
  gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good
  gstreamer1.0-plugins-ugly
  gstreamer1.0-plugins-bad
  gstreamer1.0-libav
  gstreamer1.0-tools
  ffmpeg
  python3
  python3-pip
  curl
  ca-certificates
)

say() { echo "install-deps: $*" >&2; }

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    say "missing packages (${missing[*]}) and neither root nor sudo available; install them by hand"
    exit 1
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "system packages present"
fi

if [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
status=$(rust_status)
if [[ "$status" != ok* ]]; then
  if [[ "$status" == old* ]]; then
    say "cargo ${status#old } is older than the $RUST_MIN this project needs"
  else
    say "cargo not found"
  fi
  if command -v rustup >/dev/null 2>&1; then
    say "installing the stable Rust toolchain with rustup"
    rustup toolchain install stable --profile minimal
    rustup default stable
  else
    say "installing Rust (stable) with rustup's installer from https://sh.rustup.rs into $HOME/.cargo"
    command -v curl >/dev/null 2>&1 || { say "ERROR: curl is needed to fetch rustup"; exit 1; }
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain stable
  fi
  export PATH="$HOME/.cargo/bin:$PATH"
  status=$(rust_status)
  if [[ "$status" != ok* ]]; then
    say "ERROR: still no Rust >= $RUST_MIN ($status); install it from https://rustup.rs and re-run"
    exit 1
  fi
fi
say "$(cargo --version)"
