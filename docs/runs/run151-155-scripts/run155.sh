#!/usr/bin/env bash
# Run 155 (issue 29): run 154's kernels with the group kernels' registers left to ptxas (64, no
# spills for `fast` / `normal`; run 154's explicit 8-block minimum made ptxas spill) except Wiener
# groups of 32 (128), and the Wiener weights by the fast division. cuda_bm3d, memcheck, racecheck,
# bench_bm3d rows (digests change: the division).
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 130 $B/cuda_bm3d --nocapture --test-threads=10 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "test result|panicked|FAILED" $S/cuda_bm3d.txt | cut -c1-250 | head -12
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 40 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 40 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $S/memcheck.txt $S/racecheck.txt
run() { timeout 100 $B/bench_bm3d --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)|rror' >> $S/bench.txt; echo "$* done $(el)"; }
run --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8
run --profiles high --windows live2 --block-step 4 --search-radius 8 --frame-groups
run --profiles fast,normal,high --windows spatial,vbm3d,offline2
cat $S/bench.txt
