#!/bin/bash
# Run 170: the Bayesian estimate's kernel with register tiles (issue #31): its tests, speed,
# sanitizers, Nsight Compute, and the harness's quality grid on the GPU (run 169's grid failed:
# the CLI needs GStreamer's libraries). Carry [".devcarry", ".gst-debs"].
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
echo "== cuda_bm3d bayes_estimate, sanitizer_smoke_bm3d"
timeout 60 $B/cuda_bm3d --test-threads=4 bayes_estimate sanitizer_smoke 2>&1 | grep -E "^test |test result|bayes|panicked" | head
echo "== bench_bm3d, the candidate default with and without the Bayesian estimate (1080p, 30 frames)"
for extra in "" "--bayes"; do
  timeout 45 $B/bench_bm3d --frames 30 --profiles high --block-step 4 --search-radius 8 --windows vbm3d,live2,offline2 --frame-groups $extra 2>&1 | grep -E "^\| high"
done
echo "== ncu"
timeout 40 "$NCU" --kernel-name regex:bm3d_bayes --launch-skip 4 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $B/bench_bm3d --frames 3 --profiles high --block-step 4 --search-radius 8 --windows vbm3d --frame-groups --bayes > $O/ncu_bayes.txt 2>&1; echo "rc=$?"
grep -E "bm3d_bayes|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit Shared|Compute \(SM\) Throughput|Memory Throughput|Issued Ipc|Dynamic Shared|Local" $O/ncu_bayes.txt | head -20
echo "== memcheck, racecheck (sanitizer_smoke_bm3d)"
timeout 45 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_bm3d sanitizer_smoke > $O/memcheck_bm3d.txt 2>&1; echo "rc=$?"; grep -E "ERROR SUMMARY|test result" $O/memcheck_bm3d.txt | sort | uniq -c
timeout 60 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_bm3d sanitizer_smoke > $O/racecheck_bm3d.txt 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/racecheck_bm3d.txt | sort | uniq -c
echo "== quality grid (CUDA)"
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
timeout 130 python3 docs/runs/run170-scripts/quality.py $B/nlmdenoise $B/clips
date -u
