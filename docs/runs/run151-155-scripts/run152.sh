#!/usr/bin/env bash
# Run 152 (issue 29): group kernels A/B. A: main (fdbdedb). B: gathers batched (4 loads in flight
# per lane: group members and staged search squares) and the aggregation's Kaiser window read
# once per lane. C: B + the Haar transform along the group in registers, group kernels capped at
# 64 registers (8 blocks) but Wiener groups of 32 at 128 (4 blocks). D: C with 85 registers (6
# blocks) where C has 64. E: B with C's register caps. Every variant prints digests of its
# outputs (bench_bm3d --digest: all should agree). cuda_bm3d, memcheck, racecheck on C.
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
run() { local b=$1; shift; timeout 90 $B/bench_$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)|^digest|rror' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
for rep in 1 2; do
  for v in A B C D E; do
    d=; [ $rep = 1 ] && d=--digest
    run $v --profiles fast,normal,high --windows spatial,vbm3d $d
    run $v --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 $d
  done
done
echo "== digests"; grep digest $S/bench.txt | sort -k3,4 -s
echo "== rows"; grep -v digest $S/bench.txt | sort -t'|' -k2,3 -s
