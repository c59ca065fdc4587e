#!/bin/bash
# Run 172b: what a user sees asking the multi-pass kernel for aggregation (the whole output).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console-multipass.txt") 2>&1
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
env | grep -i backtrace
timeout 60 $B/pipeline_bench 1920 1080 50 backend=cuda kernel=multipass aggregation-radius=2 patch-radius=3; echo "rc=$?"
timeout 60 $B/nlmdenoise -y -q $B/clips6/coffee-6f-sigma20.y4m -o /tmp/o.y4m --backend cuda --kernel multipass --aggregation-radius 2 --patch-radius 3; echo "rc=$?"
