#!/bin/bash
# Run 188 (issue #29): the hard-thresholding step's predictive search of 8-bit samples on bytes
# with integer dot products (group.cu staged_ssd_bytes: ||c||^2 - 2 r.c by IDP4A; exact, so the
# same bits expected). Carry [".devcarry"]: bench_bm3d and cuda_bm3d of this build, bench_bm3d_prev
# (run 187's build, e0d0ab3's code).
# `run.sh a`: digests of this build against run 183's (d541e2a; runs 185 and 187 matched them),
# bench rows of both builds on one lease, memcheck and racecheck. `run.sh b`: every cuda_bm3d test,
# `high`'s digests, Nsight Compute of the hard groups' luma launch (this build and the previous).
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
echo "== digests of this build; d541e2a's (run 183): fast 54b4d6d710e199c9 af6419591c1deaf8 96038e220796b4e5, normal 8c433c34de08b55f d1e7e6af83424015 06feac9201f50b31, candidate 63ca808d4b4085af 909693f9a18eaa49, bayes f165dbbcf813c236"
timeout 120 $B/bench_bm3d --frames 1 --profiles fast,normal --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
timeout 60 $B/bench_bm3d --frames 1 $CAND --windows vbm3d,offline2 --digest 2>&1 | grep -E "^digest"
timeout 40 $B/bench_bm3d --frames 1 $CAND --bayes --windows vbm3d --digest 2>&1 | grep -E "^digest"
echo "== bench_bm3d 1080p I420: this build, run 187's"
for bin in bench_bm3d bench_bm3d_prev; do
  echo "-- $bin"
  timeout 40 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
  timeout 40 $B/$bin --frames 30 $CAND --wiener-seeds 2 --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
  timeout 40 $B/$bin --frames 30 $CAND --hard-block-step 5 --wiener-seeds 2 --windows vbm3d,live2 2>&1 | grep -E "^\| high"
  timeout 120 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 2>&1 | grep -E "^\| [a-z]"
done
for tool in memcheck racecheck; do
  timeout 150 "$SAN" --tool $tool --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/$tool.txt 2>&1; echo "$tool rc=$?"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/$tool.txt | sort | uniq -c
done
fi
if [ "$PART" = b ]; then
echo "== cuda_bm3d, every test"
timeout 330 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d.txt | head -30
echo "== high digests; d541e2a's: 3dbcf49966c782ca 48810ef446465864 ab0875883ca544b0"
timeout 150 $B/bench_bm3d --frames 1 --profiles high --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
for bin in bench_bm3d bench_bm3d_prev; do
  k=bm3d_hard_frames
  echo "== ncu: $k, $bin"
  timeout 100 "$NCU" --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --kernel-name $k --launch-skip 4 --launch-count 1 \
    $B/$bin --frames 4 $CAND --windows vbm3d > "$O/ncu_${bin}_$k.txt" 2>&1; echo "rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Executed Instructions  |Compute \(SM\)|highest-utilized|Dynamic Shared" "$O/ncu_${bin}_$k.txt" | head -20
done
fi
date -u
