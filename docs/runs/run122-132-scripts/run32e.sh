#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=$PWD/.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $O/summary.txt
timeout 100 $B/cuda_device_frames --nocapture --test-threads=4 > $O/device_frames.txt 2>&1; echo "device_frames rc=$? $(grep -E '^test result' $O/device_frames.txt)" | tee -a $O/summary.txt
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
timeout 200 $B/element_cuda_memory --nocapture --test-threads=1 > $O/element.txt 2>&1; echo "element rc=$? $(grep -E '^test result' $O/element.txt)" | tee -a $O/summary.txt
grep -E "panicked" -A2 $O/element.txt | head -20 | tee -a $O/summary.txt
timeout 150 "$SAN" --tool memcheck --error-exitcode 9 $B/element_cuda_memory --test-threads=1 flush_mid_window adopts > $O/memcheck_element.txt 2>&1; echo "memcheck element (flush, adoption) rc=$? $(grep -E 'ERROR SUMMARY|test result' $O/memcheck_element.txt | tr '\n' ' ')" | tee -a $O/summary.txt
cd /tmp
P="--sigma 12 --temporal-past 1 --temporal-future 1 --backend cuda"
timeout 120 $B/nlmdenoise $B/clip540.mp4 gpu.y4m $P > $O/cli_gpu.txt 2>&1; echo "cli gpu rc=$?" | tee -a $O/summary.txt; tail -5 $O/cli_gpu.txt | tee -a $O/summary.txt
timeout 60 gst-launch-1.0 -q filesrc location=$B/clip540.mp4 ! qtdemux ! h264parse ! nvh264dec ! cudadownload ! videoconvert ! video/x-raw,format=I420 ! y4menc ! filesink location=dec.y4m; echo "decode to y4m rc=$?" | tee -a $O/summary.txt
timeout 120 $B/nlmdenoise dec.y4m ref.y4m $P > $O/cli_ref.txt 2>&1; echo "cli y4m rc=$?" | tee -a $O/summary.txt
head -1 gpu.y4m | tee -a $O/summary.txt; head -1 ref.y4m | tee -a $O/summary.txt
a=$(head -1 gpu.y4m | wc -c); b=$(head -1 ref.y4m | wc -c)
cmp <(tail -c +$((a+1)) gpu.y4m) <(tail -c +$((b+1)) ref.y4m) && echo "IDENTICAL frames: CLI decoding on the GPU and the y4m path" | tee -a $O/summary.txt
cd - >/dev/null
RLIVE="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2"
timeout 60 .devcarry/bench_cuda --brief --only kernel --iters 300 2>&1 | grep -E 'R-live' | tee -a $O/summary.txt
for extra in "strength=10" ""; do
  timeout 60 $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda $RLIVE $extra > $O/srccuda_$extra.txt 2>&1; grep -E "source=cuda|^\| 3000" $O/srccuda_$extra.txt | tee -a $O/summary.txt
done
timeout 60 $B/pipeline_bench decode=$B/clip1080.h264 $RLIVE strength=10 > $O/decode.txt 2>&1; grep -E "^\| #|^\| 600" $O/decode.txt | tee -a $O/summary.txt
