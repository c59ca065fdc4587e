#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=$PWD/.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
timeout 200 $B/element_cuda_memory --nocapture --test-threads=1 > $O/element.txt 2>&1; echo "element rc=$? $(grep -E '^test result' $O/element.txt)" | tee -a $O/summary.txt
grep -E "identical|panicked|SKIPPED" -A2 $O/element.txt | head -40 | tee -a $O/summary.txt
cd /tmp
P="--sigma 12 --temporal-past 1 --temporal-future 1 --backend cuda"
timeout 120 $B/nlmdenoise $B/clip540.mp4 gpu.y4m $P > $O/cli_gpu.txt 2>&1; echo "cli gpu rc=$?" | tee -a $O/summary.txt; tail -6 $O/cli_gpu.txt | tee -a $O/summary.txt
timeout 60 gst-launch-1.0 -q filesrc location=$B/clip540.mp4 ! qtdemux ! h264parse ! nvh264dec ! cudadownload ! videoconvert ! video/x-raw,format=I420 ! y4menc ! filesink location=dec.y4m; echo "decode to y4m rc=$?" | tee -a $O/summary.txt
timeout 120 $B/nlmdenoise dec.y4m ref.y4m $P > $O/cli_ref.txt 2>&1; echo "cli y4m rc=$?" | tee -a $O/summary.txt; tail -4 $O/cli_ref.txt | tee -a $O/summary.txt
ls -la gpu.y4m ref.y4m dec.y4m | tee -a $O/summary.txt
cmp gpu.y4m ref.y4m && echo "IDENTICAL gpu-decoded CLI output and y4m-path output" | tee -a $O/summary.txt
R="--sigma 12 --temporal-past 2 --temporal-future 0 --search-radius 3 --patch-radius 2 --pipeline-depth 2 --backend cuda"
for rep in 1 2; do
  timeout 60 $B/nlmdenoise $B/clip1080.mp4 $R > $O/cli_1080_$rep.txt 2>&1; echo "cli 1080 discard rc=$?: $(grep -E 'frames .* in ' $O/cli_1080_$rep.txt | tail -1)" | tee -a $O/summary.txt
  grep "decoded on the GPU" $O/cli_1080_$rep.txt | tee -a $O/summary.txt
  s=$(date +%s.%N); timeout 60 gst-launch-1.0 -q filesrc location=$B/clip1080.mp4 ! qtdemux ! h264parse ! nvh264dec ! cudadownload ! fakesink; e=$(date +%s.%N); echo "decode only (gst-launch, 600 frames, start included): $(echo "$e - $s" | bc) s" | tee -a $O/summary.txt
  s=$(date +%s.%N); timeout 60 gst-launch-1.0 -q filesrc location=$B/clip1080.mp4 ! qtdemux ! h264parse ! nvh264dec ! cudadownload ! videoconvert ! video/x-raw,format=I420 ! y4menc ! fakesink; e=$(date +%s.%N); echo "decode + y4menc (600 frames): $(echo "$e - $s" | bc) s" | tee -a $O/summary.txt
done
