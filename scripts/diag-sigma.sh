#!/usr/bin/env bash
# What the noise estimate and a fixed sigma cost (runs 62-63): kernel-only and end-to-end rows
# with and without sigma, and GStreamer rows with a fixed strength, a fixed sigma and the estimate,
# twice each (hosts differ; compare within a run). Carry [".devcarry", ".gst-debs"].
B=.devcarry
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for s in "" "--sigma 12"; do
  echo "== kernel $s"; timeout 60 $B/bench_cuda --brief --only kernel --config live --iters 200 $s 2>&1 | grep -E '^\| R'
done
for rep in 1 2; do
  for s in "" "--sigma 12" "--sigma auto"; do
    echo "== e2e $s"; timeout 60 $B/bench_cuda --brief --only e2e --config live --frames 900 $s 2>&1 | grep -E '^\| R'
  done
done
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
for rep in 1 2; do
  for cfg in "strength=10" "sigma=12" "" ; do
    timeout 60 $B/pipeline_bench 1920 1080 2000 backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 $cfg 2>&1 | grep 'nlmdenoise'
  done
done
