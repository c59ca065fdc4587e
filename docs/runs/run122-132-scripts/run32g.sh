#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=$PWD/.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $O/summary.txt
timeout 60 $B/bench_cuda --brief --only kernel --iters 300 2>&1 | grep -E 'R-live' | tee -a $O/summary.txt
for rep in 1 2; do
for d in 2 4; do
  for extra in "" "strength=10"; do
    timeout 60 $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda backend=cuda pipeline-depth=$d temporal-past=2 search-radius=3 patch-radius=2 $extra > $O/s_${d}_$rep.txt 2>&1
    echo "depth $d ${extra:-estimated} #$rep: $(grep -E 'source=cuda' $O/s_${d}_$rep.txt | awk -F'|' '{print $5}') | $(grep -E '^\| 3000' $O/s_${d}_$rep.txt)" | tee -a $O/summary.txt
  done
done
done
timeout 100 $B/cuda_device_frames --nocapture --test-threads=4 > $O/device_frames.txt 2>&1; echo "device_frames rc=$? $(grep -E '^test result' $O/device_frames.txt)" | tee -a $O/summary.txt
