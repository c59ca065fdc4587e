#!/usr/bin/env bash
# Run 157 (issue 31): motion seeds on the GPU (kernels/bm3d/motion.cu, the companion seed in
# kernels/bm3d/group.cu). cuda_bm3d (agreement with the f64 reference, motion seeds included),
# memcheck and racecheck, digests of main (993c893, bench_bm3d_base) against this build with
# motion seeds off (the group kernels changed: must be bit for bit main's), frames/s with and
# without motion seeds, Nsight Compute on the motion kernels.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/cuda_bm3d --nocapture --test-threads=10 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "test result|panicked|FAILED|motion seeds off" $S/cuda_bm3d.txt | cut -c1-250 | head -12
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 60 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
run() { local b=$1; shift; timeout 120 $B/$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)|^digest|rror' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
# Digests, motion seeds off: main against this build.
for b in bench_bm3d_base bench_bm3d; do
  run $b --profiles fast,normal,high --windows spatial,vbm3d,live2 --digest
  run $b --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups --digest
done
# Motion seeds: the candidate default, its cheaper neighbour, `normal`.
run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups --motion
run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups --hard-block-step 5 --wiener-seeds 2 --motion
run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups --hard-block-step 5 --wiener-seeds 2
run bench_bm3d --profiles fast,normal --windows vbm3d,live2,offline2 --motion
run bench_bm3d --profiles fast,normal --windows vbm3d,live2,offline2
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 90 $NCU --kernel-name regex:bm3d_motion --launch-count 4 --section SpeedOfLight --section Occupancy --section LaunchStats $B/bench_bm3d --frames 4 --profiles high --windows vbm3d --block-step 4 --search-radius 8 --frame-groups --motion > $S/ncu.txt 2>&1; echo "ncu rc=$? $(el)"
grep -E "^  bm3d_|Duration|Achieved Occupancy|Memory Throughput|Compute \(SM\) Throughput|Grid Size" $S/ncu.txt | head -40
echo "== digests"; grep digest $S/bench.txt | sort -k3,5 -s
echo "== rows"; grep -v digest $S/bench.txt
