#!/bin/bash
# Run 172: NLM patch-wise aggregation on the GPU through the product (issue #30): every CUDA NLM
# agreement test after the shared-case refactor, the picture through the CLI on the CUDA backend
# (quality.py: the same table as the CPU backend's, docs/runs/run172-results/quality-cpu.txt),
# and the element through GStreamer (pipeline_bench, appsrc ! nlmdenoise ! fakesink, 1080p I420).
# Carry [".devcarry", ".gst-debs"] (.devcarry: cuda_vs_reference, nlmdenoise, pipeline_bench,
# clips6/ = the first 6 frames of the harness clips).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv
echo "== cuda_vs_reference, every test"
timeout 120 $B/cuda_vs_reference --test-threads=4 > $O/cuda_vs_reference.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked" $O/cuda_vs_reference.txt | head -20
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
echo "== the element: 1080p I420, 2 past frames, fixed strength 10 and sigma 12, defaults against aggregation"
for agg in "" "patch-radius=3 aggregation-radius=2 wref=2"; do
  for s in "strength=10" "sigma=12"; do
    timeout 90 $B/pipeline_bench 1920 1080 2000 backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 $s $agg 2>&1 | tail -3
  done
done
echo "== aggregation on the multi-pass kernel: a clear error"
timeout 60 $B/pipeline_bench 1920 1080 50 backend=cuda kernel=multipass aggregation-radius=2 patch-radius=3 2>&1 | tail -3
echo "== quality through the CLI, CUDA backend"
timeout 300 python3 docs/runs/run172-scripts/quality.py $B/nlmdenoise $B/clips6 cuda
date -u
