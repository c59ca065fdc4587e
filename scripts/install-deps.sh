#!/usr/bin/env bash
# Installs what building and testing nlmdenoise needs on Debian bookworm (x86-64): a C toolchain,
# pkg-config, the GStreamer development files and tools, the GStreamer plugins the command-line
# tool's encoded-file mode and its tests use (base: decodebin, videoconvert, opusenc, audiotestsrc,
# rawvideoparse; good: mp4mux, matroskamux, y4menc; ugly: x264enc; libav: avenc_aac and the
# avdec_* decoders), ffmpeg (demo clips, ffprobe in tests), Python 3 and pip.
# Idempotent: when every package is already installed it only checks and returns (no apt-get
# update). Runs as root (CI) or through sudo.
set -euo pipefail

PACKAGES=(
  build-essential
  pkg-config
  libgstreamer1.0-dev
  libgstreamer-plugins-base1.0-dev
  gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good
  gstreamer1.0-plugins-ugly
  gstreamer1.0-libav
  gstreamer1.0-tools
  ffmpeg
  python3
  python3-pip
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

# Rust: the project needs cargo (rust-version in Cargo.toml). Use the machine's rustup when cargo
# is not on PATH yet.
if ! command -v cargo >/dev/null 2>&1 && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    say "cargo missing; installing the stable toolchain with rustup"
    rustup toolchain install stable --profile minimal
    rustup default stable
  else
    say "ERROR: cargo is not installed and no rustup was found."
    say "Install Rust 1.85 or newer (https://rustup.rs or 'apt-get install cargo' where new enough), then re-run."
    exit 1
  fi
fi
say "$(cargo --version)"
