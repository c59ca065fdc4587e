#!/usr/bin/env bash
# Run 147 (issue 29): per-frame groups on the device as committed: separate group kernels
# (bm3d_hard_frames / bm3d_wiener_frames; the default kernels' argument offsets as main's), the
# own-frame search by the search kernel. cuda_bm3d, memcheck and racecheck, bench_bm3d against
# main (bench_bm3d_base) twice, per-frame-group rows of every profile, device memory at 2160p.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
timeout 170 $B/cuda_bm3d --nocapture --test-threads=6 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "^test |test result|panicked|frame groups" $S/cuda_bm3d.txt | grep -v "running for" | cut -c1-250 | head -30
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 60 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
run() { local b=$1; shift; timeout 90 $B/$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
for rep in 1 2; do
  for b in bench_bm3d_base bench_bm3d; do
    run $b --profiles fast,normal,high --windows spatial,vbm3d,live2
    run $b --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8
  done
  run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups
done
run bench_bm3d --profiles fast,normal,high --windows vbm3d,live2,offline2 --frame-groups
nvidia-smi --query-gpu=memory.used --format=csv,noheader -lms 100 > $S/mem4k.txt 2>&1 & SMI=$!
sleep 1; timeout 90 $B/bench_bm3d --frames 20 --width 3840 --height 2160 --profiles high --windows vbm3d,offline2 --block-step 4 --search-radius 8 --frame-groups 2>&1 | grep -E '^\| high' | tee -a $S/bench4k.txt
kill $SMI; echo "2160p memory.used max: $(sort -n $S/mem4k.txt | tail -1), idle: $(head -1 $S/mem4k.txt)"
cat $S/bench.txt
