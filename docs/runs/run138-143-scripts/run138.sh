#!/usr/bin/env bash
# Run 138 (issue 29): the predictive search's seed squares staged in shared memory (group.cu);
# part 1: tests, sanitizers, speed against main (bench_bm3d_base); part 2: high with block step
# 4 / search radius 8 and 2 + 2, Nsight Compute on one high 1 + 1 output frame.
# Runs 139-143 ran the commands listed in ../run138-143-bm3d-staging.md directly.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
PART=${1:-1}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
if [ "$PART" = 1 ]; then
timeout 150 $B/cuda_bm3d --nocapture --test-threads=6 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "^test |test result|panicked" $S/cuda_bm3d.txt | grep -v "running for" | cut -c1-250 | head -20
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 40 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
for b in bench_bm3d_base bench_bm3d bench_bm3d_base bench_bm3d; do
  [ $(( $(date +%s) - START )) -gt 480 ] && break
  timeout 70 $B/$b --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt
  echo "$b done $(el)"
done
fi
if [ "$PART" = 2 ]; then
timeout 60 $B/bench_bm3d --frames 30 --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 2>&1 | grep -E '^\| high' | sed "s/^/bench_bm3d /" >> $S/bench.txt
timeout 40 $B/bench_bm3d --frames 30 --profiles high --windows offline2 2>&1 | grep -E '^\| high' | sed "s/^/bench_bm3d /" >> $S/bench.txt
echo "variants done $(el)"
cat $S/bench.txt
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 200 $NCU --kernel-name regex:bm3d_ --launch-skip 44 --launch-count 20 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis $B/bench_bm3d --frames 4 --profiles high --windows vbm3d > $S/ncu_high.txt 2>&1
  echo "ncu rc=$? $(el)"
fi
fi
