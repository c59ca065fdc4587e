#!/bin/bash
# Run 165: issue #36 on two GPUs, the segment mode with the y4m join in place (and by copying
# beside it). Carry [".devcarry", ".gst-debs"]: nlmdenoise, ffmpeg-static.xz; scripts/bench_cluster
# and cluster/ travel with the tree.
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
ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30,noise=alls=12:allf=t -frames:v 1200 -pix_fmt yuv420p $W/probe.y4m
# Warm the PTX cache (the first process compiles).
for cfg in "--sigma 12 --temporal-past 2 --temporal-future 0" "--sigma 12 --algorithm bm3d --temporal-past 1 --temporal-future 1" "--sigma 12 --algorithm bm3d --bm3d-profile high --temporal-past 1 --temporal-future 1" "--sigma 12 --algorithm bm3d --bm3d-profile high --bm3d-block-step 4 --bm3d-search-radius 8 --bm3d-frame-groups true --temporal-past 1 --temporal-future 1"; do
  for g in $(seq 0 $((GPUS-1))); do $B/nlmdenoise -q -y $W/probe.y4m /dev/shm/w.y4m --frames 2 --device-id $g $cfg; done
done
echo "== timeline, NLM R-live"
timeout 60 python3 docs/runs/run165-scripts/timeline.py $B/nlmdenoise $W/probe.y4m 1200 --sigma 12 --temporal-past 2 --temporal-future 0
echo "== timeline, BM3D normal 1 + 1"
timeout 90 python3 docs/runs/run165-scripts/timeline.py $B/nlmdenoise $W/probe.y4m 1200 --sigma 12 --algorithm bm3d --temporal-past 1 --temporal-future 1
rm -f $W/probe.y4m /dev/shm/t0.y4m /dev/shm/t1.y4m /dev/shm/w.y4m
echo "== bench_cluster 1080p 1200"
timeout 230 python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --per-gpu 2 --joins in-place,copy --log $O/cluster-log.txt \
  --sizes 1920x1080:1200 --configs nlm-live,nlm-offline,bm3d-normal --h264-configs nlm-live,bm3d-normal --h264-sizes 1920x1080
echo "== bench_cluster 1080p 300, BM3D high and the candidate default"
timeout 100 python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --log $O/cluster-log.txt \
  --sizes 1920x1080:300 --configs bm3d-high,bm3d-candidate --outputs y4m
echo "== bench_cluster 1080p 3600 (the first 600 frames repeated), NLM R-live"
timeout 90 python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --log $O/cluster-log.txt \
  --sizes 1920x1080:3600 --configs nlm-live --outputs y4m
echo "== bench_cluster 2160p 400"
timeout 90 python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --log $O/cluster-log.txt \
  --sizes 3840x2160:400 --configs nlm-live,bm3d-normal --outputs y4m
date -u
