#!/bin/bash
# Run 167: issue #36 on two GPUs. Where the in-place segment runs lose time (tmpfs write rates,
# process start-up), and the driver's reservation of the output's pages (the default since this
# run) against none (`--no-preallocate`), one lease. Carry [".devcarry", ".gst-debs"]:
# nlmdenoise, ffmpeg-static.xz; scripts/bench_cluster and cluster/ travel with the tree.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; free -g | head -2; df -h /dev/shm | tail -1; uname -r
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
mkdir -p /tmp/bin && xz -dc "$B/ffmpeg-static.xz" > /tmp/bin/ffmpeg && chmod +x /tmp/bin/ffmpeg
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
S=docs/runs/run167-scripts
echo "== tmpfs write rates (600 records of 3110406 bytes)"
timeout 60 python3 $S/writes.py 600
echo "== start-up"
ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30,noise=alls=12:allf=t -frames:v 4 -pix_fmt yuv420p /dev/shm/start.y4m
$B/nlmdenoise -q -y /dev/shm/start.y4m /dev/null --sigma 12 --temporal-past 2 --temporal-future 0  # the PTX cache
timeout 90 python3 $S/startup.py $B/nlmdenoise /dev/shm/start.y4m --sigma 12 --temporal-past 2 --temporal-future 0
bc() { timeout "$1" python3 scripts/bench_cluster --gpus $GPUS --binary $B/nlmdenoise --segments 0 --log $O/cluster-log.txt --outputs y4m "${@:2}"; }
echo "== 1080p 2400, BM3D normal 1 + 1"
bc 140 --sizes 1920x1080:2400 --configs bm3d-normal --joins in-place,in-place-unreserved
echo "== 1080p 3600, NLM R-live"
bc 90 --sizes 1920x1080:3600 --configs nlm-live --joins in-place,in-place-unreserved
echo "== 1080p 900, the candidate default 1 + 1"
bc 140 --sizes 1920x1080:900 --configs bm3d-candidate --joins in-place,in-place-unreserved
echo "== 2160p 400, BM3D normal 1 + 1 and NLM R-live"
bc 110 --sizes 3840x2160:400 --configs bm3d-normal,nlm-live --joins in-place,in-place-unreserved
date -u
