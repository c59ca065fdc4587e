#!/bin/bash
# Run 177: the BM3D own-frame search on tensor cores (kernels/bm3d/search_tc.cu, issue #29):
# agreement (bit for bit against the f32 search with 8-bit samples in step 1; the f64 reference
# otherwise), sanitizers, bench_bm3d with the tensor search on and off on one lease, Nsight
# Compute of both search kernels. Carry [".devcarry"]. Parts: `run.sh a` (the new test, the
# benchmark rows, Nsight Compute), `run.sh b` (memcheck, racecheck, every cuda_bm3d test).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
PART=${1:-a}
exec > >(tee "$O/console-$PART.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
CAND="--profiles high --block-step 4 --search-radius 8 --frame-groups"
if [ "$PART" = a ]; then
echo "== cuda_bm3d tensor_search_matches_the_f32_search"
timeout 150 $B/cuda_bm3d --test-threads=1 --nocapture tensor_search > $O/tensor_test.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed|skip" $O/tensor_test.txt | head -20
echo "== bench_bm3d 1080p I420, tensor search on / off, same lease"
for ts in true false; do
  timeout 200 $B/bench_bm3d --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 --tensor-search $ts 2>&1 | grep -E "^\|"
  timeout 100 $B/bench_bm3d --frames 30 $CAND --windows vbm3d,live2,offline2 --tensor-search $ts 2>&1 | grep -E "^\| high"
done
echo "== ncu: one candidate-default 1 + 1 frame's search launches, tensor / f32"
for ts in true false; do
  timeout 120 "$NCU" --kernel-name regex:bm3d_search --launch-skip 16 --launch-count 4 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    $B/bench_bm3d --frames 4 $CAND --windows vbm3d --tensor-search $ts > "$O/ncu_search_$ts.txt" 2>&1; echo "rc=$?"
  grep -E "bm3d_search|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Throughput|Memory Throughput|Issued Ipc|Dynamic Shared|L1/TEX Hit|Executed Ipc" "$O/ncu_search_$ts.txt" | head -60
done
fi
if [ "$PART" = b ]; then
echo "== memcheck, racecheck (sanitizer_smoke_bm3d: window references, so the tensor search of both steps)"
timeout 200 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/memcheck.txt 2>&1; echo "rc=$?"; grep -E "ERROR SUMMARY|test result" $O/memcheck.txt | sort | uniq -c
timeout 200 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/racecheck.txt 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/racecheck.txt | sort | uniq -c
echo "== cuda_bm3d, every test"
timeout 330 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d.txt | head -30
fi
date -u
if [ "$PART" = c ]; then
# Run 178: the second build (distances over the whole union, 8-byte stores; seeds from the group).
echo "== cuda_bm3d: the tensor test and the search-related tests"
timeout 300 $B/cuda_bm3d --test-threads=4 tensor_search window_references_reuse frame_groups_match high_profile_at spatial_and_temporal > $O/tests_c.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/tests_c.txt | head -20
echo "== bench_bm3d, tensor search on / off"
for ts in true false; do
  timeout 200 $B/bench_bm3d --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 --tensor-search $ts 2>&1 | grep -E "^\| [a-z]"
  timeout 100 $B/bench_bm3d --frames 30 $CAND --windows vbm3d,live2,offline2 --tensor-search $ts 2>&1 | grep -E "^\| high"
done
echo "== ncu: search launches of this build, without its selection (nosel), the f32 search"
for v in "bench_bm3d --tensor-search true" "bench_bm3d_nosel --tensor-search true" "bench_bm3d --tensor-search false"; do
  echo "-- $v"
  timeout 100 "$NCU" --kernel-name regex:bm3d_search --launch-skip 16 --launch-count 4 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    $B/$v --frames 4 $CAND --windows vbm3d > "$O/ncu_c_$(echo $v | tr -d ' -' ).txt" 2>&1; echo "rc=$?"
  grep -E "  bm3d_search|Duration|Achieved Occupancy|Compute \(SM\) Throughput|Issued Ipc" "$O/ncu_c_$(echo $v | tr -d ' -' ).txt" | head -24
done
echo "== ncu: one high spatial frame, every launch"
timeout 150 "$NCU" --launch-skip 36 --launch-count 14 --section SpeedOfLight --section Occupancy $B/bench_bm3d --frames 4 --profiles high --windows spatial > $O/ncu_high_spatial.txt 2>&1; echo "rc=$?"
grep -E "^  [a-z_0-9]+ \(|Duration|Achieved Occupancy" $O/ncu_high_spatial.txt | head -50
fi
if [ "$PART" = d ]; then
# Run 179: the selection in three passes (lo, a histogram of 32 buckets, WarpBest over the
# buckets that can hold the group), against run 178's build (bench_bm3d_prev) on one lease.
echo "== cuda_bm3d: the tensor test and the search-related tests"
timeout 300 $B/cuda_bm3d --test-threads=4 tensor_search window_references_reuse frame_groups_match high_profile_at spatial_and_temporal > $O/tests_d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/tests_d.txt | head -20
echo "== bench_bm3d: this build, then run 178's"
for bin in bench_bm3d bench_bm3d_prev; do
  echo "-- $bin"
  timeout 200 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 2>&1 | grep -E "^\| [a-z]"
  timeout 100 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
done
echo "== ncu: search launches of one candidate-default 1 + 1 frame, this build"
timeout 100 "$NCU" --kernel-name regex:bm3d_search --launch-skip 16 --launch-count 4 --section SpeedOfLight --section Occupancy --section WarpStateStats \
  $B/bench_bm3d --frames 4 $CAND --windows vbm3d > "$O/ncu_d.txt" 2>&1; echo "rc=$?"
grep -E "  bm3d_search|Duration|Achieved Occupancy|Compute \(SM\) Throughput|Issued Ipc" "$O/ncu_d.txt" | head -24
fi
if [ "$PART" = e ]; then
# Run 180: the Wiener step's block matching in a launch of its own (group.cu PHASE 1 / 2), on and
# off on one lease; every cuda_bm3d test; memcheck and racecheck; Nsight Compute of one frame.
echo "== cuda_bm3d, every test"
timeout 200 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d_e.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d_e.txt | head -30
echo "== memcheck, racecheck (sanitizer_smoke_bm3d)"
timeout 90 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/memcheck_e.txt 2>&1; echo "rc=$?"; grep -E "ERROR SUMMARY|test result" $O/memcheck_e.txt | sort | uniq -c
timeout 90 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/racecheck_e.txt 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/racecheck_e.txt | sort | uniq -c
echo "== bench_bm3d: Wiener matching apart (default) / in one launch"
for wa in true false; do
  timeout 100 $B/bench_bm3d --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2 --wiener-apart $wa 2>&1 | grep -E "^\| [a-z]"
  timeout 60 $B/bench_bm3d --frames 30 $CAND --windows vbm3d,live2,offline2 --wiener-apart $wa 2>&1 | grep -E "^\| high"
done
echo "== ncu: one candidate-default 1 + 1 frame, every launch"
timeout 60 "$NCU" --launch-skip 40 --launch-count 20 --section SpeedOfLight --section Occupancy $B/bench_bm3d --frames 4 $CAND --windows vbm3d > $O/ncu_frame_e.txt 2>&1; echo "rc=$?"
grep -E "^  [a-z_0-9]+ \(|Duration|Achieved Occupancy" $O/ncu_frame_e.txt | head -70
fi
if [ "$PART" = f ]; then
# Run 181: the Wiener step apart for groups of 32 only; the two cuda_bm3d tests run 180 did not
# see through (its 200 s limit), bench rows apart (default) / in one launch.
echo "== cuda_bm3d spatial_and_temporal_gray_i420, wiener_matching_apart_gives_the_same_bits"
timeout 200 $B/cuda_bm3d --test-threads=2 spatial_and_temporal wiener_matching_apart > $O/tests_f.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/tests_f.txt | head
echo "== bench_bm3d: default / in one launch"
for wa in true false; do
  timeout 80 $B/bench_bm3d --frames 30 --profiles normal,high --windows spatial,vbm3d --wiener-apart $wa 2>&1 | grep -E "^\| [a-z]"
  timeout 60 $B/bench_bm3d --frames 30 $CAND --windows vbm3d,live2 --wiener-apart $wa 2>&1 | grep -E "^\| high"
done
fi
