#!/usr/bin/env bash
# Run 145 (issue 29): per-frame groups on the device (src/bm3d/cuda.rs `frame_groups`,
# kernels/bm3d/group.cu `sum_slot`): cuda_bm3d (the frame-group tests against the f64 reference),
# memcheck and racecheck on sanitizer_smoke_bm3d (now with frame groups), then bench_bm3d with
# and without --frame-groups against main (bench_bm3d_base) on the same lease.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
timeout 170 $B/cuda_bm3d --nocapture --test-threads=6 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "^test |test result|panicked|agree|PSNR" $S/cuda_bm3d.txt | grep -v "running for" | cut -c1-250 | head -40
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 60 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
run() { local b=$1; shift; timeout 90 $B/$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups
run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --frame-groups
run bench_bm3d --profiles fast,normal --windows vbm3d,live2,offline2 --frame-groups
for b in bench_bm3d_base bench_bm3d; do
  [ $(( $(date +%s) - START )) -gt 470 ] && break
  run $b --profiles fast,normal,high --windows spatial,vbm3d,live2
  run $b --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8
done
cat $S/bench.txt
