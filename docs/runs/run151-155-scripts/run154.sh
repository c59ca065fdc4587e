#!/usr/bin/env bash
# Run 154 (issue 29): the group kernels as committed (run 153's H: member gathers batched, the
# Kaiser window read once per lane, Wiener groups of 32 at 128 registers): cuda_bm3d, memcheck,
# racecheck, bench_bm3d rows with digests (must equal runs 152-153's), Nsight Compute durations of
# one `high` step 4 radius 8, 1 + 1 frame.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
timeout 170 $B/cuda_bm3d --nocapture --test-threads=6 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "^test |test result|panicked" $S/cuda_bm3d.txt | grep -v "running for" | cut -c1-250 | head -30
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 60 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
run() { timeout 120 $B/bench_bm3d --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)|^digest|rror' >> $S/bench.txt; echo "$* done $(el)"; }
run --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 --digest
run --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --digest
run --profiles high --windows live2 --block-step 4 --search-radius 8 --frame-groups
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 90 $NCU --kernel-name regex:bm3d_ --launch-skip 60 --launch-count 16 --section SpeedOfLight --section Occupancy $B/bench_bm3d --frames 12 --profiles high --windows vbm3d --block-step 4 --search-radius 8 > $S/ncu.txt 2>&1; echo "ncu rc=$? $(el)"
grep -E "^  bm3d_|Duration|Achieved Occupancy|Registers Per" $S/ncu.txt | head -64
cat $S/bench.txt
