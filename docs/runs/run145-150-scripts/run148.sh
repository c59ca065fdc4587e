#!/usr/bin/env bash
# Run 148 (issue 29): group buffers swizzled (kernels/bm3d/transform.cuh `gidx`: bank-conflict-free
# column passes, row passes as 16-byte vectors) against run 147's build (bench_bm3d_base, commit
# ed37c25): cuda_bm3d, memcheck and racecheck, bench_bm3d twice, Nsight Compute of one frame.
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
run() { local b=$1; shift; timeout 90 $B/$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
for rep in 1 2; do
  for b in bench_bm3d_base bench_bm3d; do
    run $b --profiles fast,normal,high --windows spatial,vbm3d,live2
    run $b --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $(( $(date +%s) - START )) -lt 420 ]; then
  timeout 120 $NCU --kernel-name regex:bm3d_ --launch-skip 60 --launch-count 16 --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis $B/bench_bm3d --frames 12 --profiles high --windows vbm3d --block-step 4 --search-radius 8 --frame-groups > $S/ncu.txt 2>&1
  echo "ncu rc=$? $(el)"
fi
cat $S/bench.txt
