#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=$PWD/.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
for extra in "sigma=4" "sigma=12" "sigma=30" "" "strength=10"; do
  GST_DEBUG=nlmdenoise:4 timeout 60 $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 $extra > $O/s.txt 2>&1
  echo "${extra:-estimated}: $(grep -E 'source=cuda' $O/s.txt | awk -F'|' '{print $5}') | $(grep -E '^\| 3000' $O/s.txt) | $(grep -oE 'sigma [0-9.]+' $O/s.txt | tail -1)" | tee -a $O/summary.txt
done
