#!/bin/bash
# Run 169: the BM3D Bayesian estimate on the GPU (issue #31): cuda_bm3d (every BM3D test, the new
# bayes_estimate_matches_the_reference among them), compute-sanitizer memcheck and racecheck on
# it, bench_bm3d rows of the candidate default with and without it, the harness's quality grid
# on the GPU, Nsight Compute on its kernel. Carry [".devcarry"]: cuda_bm3d, bench_bm3d,
# nlmdenoise, clips/ (the harness clips cut to 6 frames).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
echo "== cuda_bm3d"
timeout 170 $B/cuda_bm3d --test-threads=4 2>&1 | grep -E "^test |test result|bayes|panicked|SKIPPED" | head -60
echo "== bench_bm3d, the candidate default with and without the Bayesian estimate (1080p, 30 frames)"
for extra in "" "--bayes"; do
  timeout 60 $B/bench_bm3d --frames 30 --profiles high --block-step 4 --search-radius 8 --windows vbm3d,live2,offline2 --frame-groups $extra 2>&1 | grep -E "^\|" | grep -v "^| profile\|^|--"
done
echo "== quality grid (CUDA)"
timeout 200 python3 docs/runs/run169-scripts/quality.py $B/nlmdenoise $B/clips
echo "== memcheck"
timeout 70 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=2 bayes_estimate > $O/memcheck_bayes.txt 2>&1; echo "rc=$?"; grep -E "ERROR SUMMARY|test result" $O/memcheck_bayes.txt | sort | uniq -c
echo "== racecheck"
timeout 70 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=2 bayes_estimate > $O/racecheck_bayes.txt 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/racecheck_bayes.txt | sort | uniq -c
echo "== ncu"
timeout 60 "$NCU" --kernel-name regex:bm3d_bayes --launch-skip 4 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $B/bench_bm3d --frames 3 --profiles high --block-step 4 --search-radius 8 --windows vbm3d --frame-groups --bayes > $O/ncu_bayes.txt 2>&1; echo "rc=$?"
grep -E "bm3d_bayes|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|Stall|Issued Ipc|Dynamic Shared|Grid Size" $O/ncu_bayes.txt | head -40
date -u
