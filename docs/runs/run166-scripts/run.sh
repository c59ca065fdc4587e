#!/bin/bash
# Run 166: issue #36 on four GPUs, one lease: the segment mode (y4m joined in place) on 1, 2 and 4
# GPUs beside the plain CLI and the chunked path. Carry [".devcarry", ".gst-debs"]: nlmdenoise,
# ffmpeg-static.xz; scripts/bench_cluster and cluster/ travel with the tree. Most important first.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; free -g | head -2; df -h /dev/shm | tail -1
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
mkdir -p /tmp/bin && xz -dc "$B/ffmpeg-static.xz" > /tmp/bin/ffmpeg && chmod +x /tmp/bin/ffmpeg
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
W=/dev/shm/nlm-bench; mkdir -p $W
ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30,noise=alls=12:allf=t -frames:v 4 -pix_fmt yuv420p $W/warm.y4m
# Warm the PTX cache (the first process compiles; one cache for every GPU of the host).
for cfg in "--sigma 12 --temporal-past 2 --temporal-future 0" "--sigma 12 --algorithm bm3d --temporal-past 1 --temporal-future 1" "--sigma 12 --algorithm bm3d --bm3d-profile high --temporal-past 1 --temporal-future 1" "--sigma 12 --algorithm bm3d --bm3d-profile high --bm3d-block-step 4 --bm3d-search-radius 8 --bm3d-frame-groups true --temporal-past 1 --temporal-future 1"; do
  s=$(date +%s.%N); $B/nlmdenoise -q -y $W/warm.y4m /dev/shm/w.y4m --frames 2 --device-id 0 $cfg; echo "warm ($cfg): $(python3 -c "import time; print(round(time.time() - $s, 1))") s"
done
rm -f $W/warm.y4m /dev/shm/w.y4m
bc() { timeout "$1" python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --log $O/cluster-log.txt "${@:2}"; }
echo "== 1080p 2400 (600 frames repeated), BM3D normal 1 + 1"
bc 110 --sizes 1920x1080:2400 --configs bm3d-normal --outputs y4m
echo "== 1080p 3600 (600 frames repeated), NLM R-live"
bc 70 --sizes 1920x1080:3600 --configs nlm-live --outputs y4m
echo "== 1080p 600, the candidate default; 300, BM3D high"
bc 60 --sizes 1920x1080:600 --configs bm3d-candidate --outputs y4m
bc 70 --sizes 1920x1080:300 --configs bm3d-high --outputs y4m
echo "== 2160p 400"
bc 60 --sizes 3840x2160:400 --configs nlm-live,bm3d-normal --outputs y4m
echo "== 1080p 1200, H.264 out"
bc 60 --sizes 1920x1080:1200 --configs nlm-live --outputs h264 --per-gpu 2 --h264-configs nlm-live --h264-sizes 1920x1080
date -u
