#!/usr/bin/env bash
# Run 150 (issue 29): members kept as 4 ints in the default group kernels too (ptxas sm_90: no
# spills for fast and normal; bench_bm3d_mi4) against run 149's build (bench_bm3d, 3 ints) and run
# 147's (bench_bm3d_base); cuda_bm3d, memcheck and racecheck on the 4-int build.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
timeout 170 $B/cuda_bm3d --nocapture --test-threads=6 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "test result|panicked" $S/cuda_bm3d.txt | cut -c1-250 | head -10
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 60 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $S/memcheck.txt $S/racecheck.txt
run() { local b=$1; shift; timeout 100 $B/$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
for b in bench_bm3d_base bench_bm3d bench_bm3d_mi4; do
  run $b --profiles fast,normal,high --windows spatial,vbm3d,live2
done
run bench_bm3d_mi4 --profiles fast,normal,high --windows vbm3d,live2,offline2 --frame-groups
run bench_bm3d_mi4 --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups
for b in bench_bm3d_base bench_bm3d bench_bm3d_mi4; do
  [ $(( $(date +%s) - START )) -gt 400 ] && break
  run $b --profiles fast,normal,high --windows spatial,vbm3d,live2
done
cat $S/bench.txt
