#!/bin/bash
# Run 168: issue #36 on two GPUs, the rows run 167 lost to its time limits: NLM R-live and offline
# on 3600 frames of 1080p, BM3D normal and NLM on 800 frames of 2160p, BM3D high on 600 frames of
# 1080p; segments joined in place (the default). Carry [".devcarry", ".gst-debs"].
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
echo "CPU: $(nproc) cores"; free -g | head -2
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
mkdir -p /tmp/bin && xz -dc "$B/ffmpeg-static.xz" > /tmp/bin/ffmpeg && chmod +x /tmp/bin/ffmpeg
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
bc() { timeout "$1" python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --log $O/cluster-log.txt --outputs y4m "${@:2}"; }
echo "== 1080p 3600, NLM R-live and offline"
bc 200 --sizes 1920x1080:3600 --configs nlm-live,nlm-offline
echo "== 2160p 800, BM3D normal 1 + 1 and NLM R-live"
bc 200 --sizes 3840x2160:800 --configs bm3d-normal,nlm-live
echo "== 1080p 600, BM3D high 1 + 1"
bc 150 --sizes 1920x1080:600 --configs bm3d-high
date -u
