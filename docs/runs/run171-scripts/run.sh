#!/bin/bash
# Run 171: NLM patch-wise aggregation in the fused kernel (issue #30): agreement with the f64
# reference, the whole CUDA NLM test file, kernel speed of the fitted setting beside R-live (tile
# sweep), Nsight Compute of both, sanitizers. Carry [".devcarry"]. Parts (one device call each,
# 600 s at most): `run.sh a` (tests of aggregation, benchmarks, Nsight Compute), `run.sh b`
# (sanitizers, every test of the file), `run.sh c` (kernel rows of the patch/search/aggregation
# grid; the BM3D Bayesian estimate's agreement test alone, issue #31).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
PART=${1:-a}
exec > >(tee "$O/console-$PART.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
FIT="--search-radius 3 --patch-radius 3 --aggregation-radius 2 --wref 2"
if [ "$PART" = a ]; then
echo "== cuda_vs_reference patch_wise_aggregation"
timeout 150 $B/cuda_vs_reference --test-threads=2 --nocapture patch_wise_aggregation > $O/agg_tests.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/agg_tests.txt | head -20
echo "== bench_cuda kernel rows (1080p I420): R-live, then the fitted setting live / offline, tiles"
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 --config live 2>&1 | grep -E "^\|" 
for t in "" 24,8,4 28,8,4 32,8,4 20,8,4 28,8,7 16,8,7; do
  echo "-- tile ${t:-default}"
  env ${t:+NLMDENOISE_CUDA_TILE=$t} timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0 2>&1 | grep -E "^\| custom"
done
echo "-- with sigma 12 (distance offset), live and 2 + 2; R-live with sigma 12"
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0,2 --sigma 12 2>&1 | grep -E "^\| custom"
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 --config live --sigma 12 2>&1 | grep -E "^\| R-live"
echo "-- end to end (engine, host frames, depth 2), fitted live"
timeout 90 $B/bench_cuda --brief --only e2e --frames 600 $FIT --past 2 --future 0 2>&1 | grep -E "^\| custom"
echo "== ncu (one launch each: R-live, fitted live)"
for args in "--config live" "$FIT --past 2 --future 0"; do
  timeout 120 "$NCU" --kernel-name nlm_fused --launch-skip 20 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats \
    $B/bench_cuda --brief --only kernel --iters 20 $args > "$O/ncu_$(echo $args | tr -d ' -' | head -c 40).txt" 2>&1; echo "rc=$?"
done
for f in $O/ncu_*.txt; do echo "-- $f"; grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Throughput|Memory Throughput|Issued Ipc|Dynamic Shared|Local|Stall|L1/TEX Hit|Executed Ipc" $f | head -24; done
fi
if [ "$PART" = b ]; then
echo "== memcheck, racecheck"
timeout 150 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 sanitizer_smoke patch_wise_aggregation_keeps > $O/memcheck_fused.txt 2>&1; echo "rc=$?"; grep -E "ERROR SUMMARY|test result" $O/memcheck_fused.txt | sort | uniq -c
timeout 200 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 sanitizer_smoke > $O/racecheck_fused.txt 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/racecheck_fused.txt | sort | uniq -c
echo "== register cap: 3 blocks a SM (no spills in ptxas -v) against the default 5"
for t in 24,8,7,3 28,8,7,3; do
  echo "-- tile $t"
  NLMDENOISE_CUDA_TILE=$t timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0 2>&1 | grep -E "^\| custom"
done
echo "== cuda_vs_reference, every test"
timeout 240 $B/cuda_vs_reference --test-threads=4 > $O/cuda_vs_reference.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked" $O/cuda_vs_reference.txt | head -30
fi
if [ "$PART" = c ]; then
echo "== kernel rows (1080p I420): patch x search radius, pixel-wise (wref 1) and aggregated (wref 2), live and offline"
timeout 200 $B/bench_cuda --brief --only kernel --iters 200 --search-radius 2,3 --patch-radius 2,3,4 --past 2 --future 0,2 2>&1 | grep -E "^\| custom"
timeout 250 $B/bench_cuda --brief --only kernel --iters 200 --search-radius 2,3 --patch-radius 2,3,4 --aggregation-radius 1,2 --wref 2 --past 2 --future 0,2 2>&1 | grep -E "^\| custom"
echo "== cuda_bm3d bayes_estimate_matches_the_reference alone (issue #31; not concluded in run 170)"
timeout 120 $B/cuda_bm3d --test-threads=1 --exact bayes_estimate_matches_the_reference > $O/bayes_test.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/bayes_test.txt | head
fi
date -u
