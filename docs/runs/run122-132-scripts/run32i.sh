#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=$PWD/.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $O/summary.txt
for t in cuda_stored cuda_device_frames; do
  timeout 100 $B/$t --nocapture --test-threads=4 > $O/$t.txt 2>&1; echo "$t rc=$? $(grep -E '^test result' $O/$t.txt)" | tee -a $O/summary.txt
done
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
R="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2"
for rep in 1 2; do
  for pb in pipeline_bench_base pipeline_bench; do
    for src in "source=cuda" ""; do
      timeout 60 $B/$pb 1920 1080 3000 format=NV12 $src $R > $O/p.txt 2>&1
      echo "$pb ${src:-source=own} estimated #$rep: $(grep -E 'nlmdenoise' $O/p.txt | grep -v '^|---' | awk -F'|' '{print $5}' | head -1) | $(grep -E '^\| 3000' $O/p.txt)" | tee -a $O/summary.txt
    done
  done
done
