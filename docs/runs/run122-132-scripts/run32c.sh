#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for rep in 1 2 3; do
  timeout 100 $B/cuda_device_frames --nocapture --test-threads=4 > $O/device_frames_$rep.txt 2>&1; echo "device_frames #$rep rc=$? $(grep -E '^test result' $O/device_frames_$rep.txt)" | tee -a $O/summary.txt
  grep -E "differ|panicked" $O/device_frames_$rep.txt | head -5 | tee -a $O/summary.txt
done
(
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp
timeout 150 $B/element_cuda_memory --nocapture --test-threads=1 > $O/element.txt 2>&1; echo "element rc=$? $(grep -E '^test result' $O/element.txt)" | tee -a $O/summary.txt
grep -E "identical|panicked|SKIPPED" -A1 $O/element.txt | head -30 | tee -a $O/summary.txt
timeout 150 "$SAN" --tool memcheck --error-exitcode 9 $B/element_cuda_memory --test-threads=1 cuda_memory_nlm_matches > $O/memcheck_element.txt 2>&1; echo "memcheck element rc=$? $(grep -E 'ERROR SUMMARY|test result' $O/memcheck_element.txt | tr '\n' ' ')" | tee -a $O/summary.txt
)
BUDGET=300 bash scripts/gpu.sh cudamem > $O/gpu_console.txt 2>&1
cp $O/all.tgz $O/cudamem.tgz 2>/dev/null
tar xzf $O/all.tgz -C $O cudamem.txt 2>/dev/null; grep -vE "^\s+[0-9]+: |Stack backtrace" $O/cudamem.txt | head -150
