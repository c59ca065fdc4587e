#!/bin/bash
# Run 175: prototype of aggregation over the patches on a grid of step 2 in the fused kernel
# (experiment build: docs/experiments/nlm-aggregation-grid-cuda.diff, NLM_EXP_AGG_GRID=1, tile
# 32 x 32): its kernel rate beside the full aggregation and R-live, and its picture through the
# CLI against the CPU experiment build's (NLM_EXP_GRID=2, run on the development machine).
# Carry [".devcarry", ".gst-debs"].
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u
FIT="--search-radius 3 --patch-radius 3 --aggregation-radius 2 --wref 2"
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 --config live 2>&1 | grep -E "^\| R-live"
echo "-- full aggregation (default tile)"
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0,2 2>&1 | grep -E "^\| custom"
echo "-- grid of step 2 (prototype)"
NLM_EXP_AGG_GRID=1 timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0,2 2>&1 | grep -E "^\| custom"
NLM_EXP_AGG_GRID=1 timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0 --sigma 12 2>&1 | grep -E "^\| custom"
echo "-- the grid prototype's picture through the CLI (CUDA)"
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
NLM_EXP_AGG_GRID=1 timeout 300 python3 docs/runs/run172-scripts/quality.py $B/nlmdenoise $B/clips6 cuda
date -u
