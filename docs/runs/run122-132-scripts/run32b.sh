#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 120 $B/cuda_device_frames --nocapture --test-threads=1 > $O/device_frames.txt 2>&1; echo "device_frames rc=$?" | tee -a $O/summary.txt
grep -E "differ|result|panicked" $O/device_frames.txt | head -20 | tee -a $O/summary.txt
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
GST_DEBUG=nlmdenoise:7 timeout 60 $B/pipeline_bench 320 240 20 format=NV12 source=cuda backend=cuda sigma=10 > $O/dbg_source_cuda.txt 2>&1
grep -E "input: caps|cannot be mapped|adopt|context|CUDA" $O/dbg_source_cuda.txt | sort | uniq -c | sort -rn | head -20 | tee -a $O/summary.txt
timeout 150 $B/element_cuda_memory --nocapture --test-threads=1 > $O/element.txt 2>&1; echo "element rc=$?" | tee -a $O/summary.txt
grep -E "identical|panicked|result" -A1 $O/element.txt | head -30 | tee -a $O/summary.txt
RLIVE="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2"
timeout 60 $B/pipeline_bench decode=$B/clip1080.h264 $RLIVE strength=10 > $O/decode1.txt 2>&1; tail -12 $O/decode1.txt | tee -a $O/summary.txt
timeout 60 $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda $RLIVE strength=10 > $O/srccuda.txt 2>&1; tail -9 $O/srccuda.txt | tee -a $O/summary.txt
