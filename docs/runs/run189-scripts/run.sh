#!/bin/bash
# Run 189 (issue #29): BM3D's gathers and sums of 8x8 patches by whole members (group.cu
# gather_group's and the aggregation's PATCH == 8 paths: samples lane and lane + 32 of each member,
# the swizzle a constant per member of a batch of four; same values, same integer sums, so the
# same bits expected). Carry [".devcarry"]: bench_bm3d and cuda_bm3d of this build (the hard
# groups' registers of ptxas's choice), bench_bm3d_b8 (the hard and matching launches bounded to
# 8 blocks, 64 registers), bench_bm3d_prev (run 188's build, 505c18b).
# `run.sh a`: digests against d541e2a's (run 183), bench rows of the three builds on one lease,
# Nsight Compute of the Wiener filtering's and the hard groups' luma launches of this build and
# the previous. `run.sh b`: every cuda_bm3d test, memcheck, racecheck, `high`'s digests.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
PART=${1:-a}
exec > >(tee "$O/console-$PART.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CAND="--profiles high --block-step 4 --search-radius 8 --frame-groups"
if [ "$PART" = a ]; then
echo "== digests; d541e2a's (run 183): fast 54b4d6d710e199c9 af6419591c1deaf8 96038e220796b4e5, normal 8c433c34de08b55f d1e7e6af83424015 06feac9201f50b31, candidate 63ca808d4b4085af 909693f9a18eaa49, bayes f165dbbcf813c236"
for bin in bench_bm3d bench_bm3d_b8; do
  echo "-- $bin"
  timeout 120 $B/$bin --frames 1 --profiles fast,normal --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
  timeout 60 $B/$bin --frames 1 $CAND --windows vbm3d,offline2 --digest 2>&1 | grep -E "^digest"
  timeout 40 $B/$bin --frames 1 $CAND --bayes --windows vbm3d --digest 2>&1 | grep -E "^digest"
done
echo "== bench_bm3d 1080p I420: this build, bounds 8, run 188's"
for bin in bench_bm3d bench_bm3d_b8 bench_bm3d_prev; do
  echo "-- $bin"
  timeout 40 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
  timeout 40 $B/$bin --frames 30 $CAND --wiener-seeds 2 --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
  timeout 120 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 2>&1 | grep -E "^\| [a-z]"
done
for bin in bench_bm3d bench_bm3d_prev; do
  for k in bm3d_wiener_frames_filter bm3d_hard_frames bm3d_wiener_frames_match; do
    echo "== ncu: $k, $bin"
    timeout 100 "$NCU" --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --kernel-name $k --launch-skip 4 --launch-count 1 \
      $B/$bin --frames 4 $CAND --windows vbm3d > "$O/ncu_${bin}_$k.txt" 2>&1; echo "rc=$?"
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Executed Instructions  |highest-utilized" "$O/ncu_${bin}_$k.txt" | head -20
  done
done
fi
if [ "$PART" = b ]; then
echo "== cuda_bm3d, every test"
timeout 330 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d.txt | head -30
for tool in memcheck racecheck; do
  timeout 150 "$SAN" --tool $tool --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/$tool.txt 2>&1; echo "$tool rc=$?"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/$tool.txt | sort | uniq -c
done
echo "== high digests; d541e2a's: 3dbcf49966c782ca 48810ef446465864 ab0875883ca544b0"
timeout 150 $B/bench_bm3d --frames 1 --profiles high --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
fi
date -u
