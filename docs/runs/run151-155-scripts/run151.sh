#!/usr/bin/env bash
# Run 151 (issue 29): commits 344727f, 72ec09d, d189536 (not yet run on a GPU): cuda_bm3d,
# memcheck and racecheck; bench_bm3d rows with the new defaults; Nsight Compute source counters
# (SASS, warp stall samples per instruction) of one bm3d_wiener_frames and one bm3d_hard_frames
# launch of `high` step 4 radius 8, 1 + 1.
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
run bench_bm3d --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2
run bench_bm3d --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8
run bench_bm3d --profiles high --windows live2 --block-step 4 --search-radius 8 --frame-groups
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$NCU --version | tail -1
for k in bm3d_wiener_frames bm3d_hard_frames; do
  timeout 120 $NCU --kernel-name $k --launch-skip 6 --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy -o $S/$k $B/bench_bm3d --frames 8 --profiles high --windows vbm3d --block-step 4 --search-radius 8 > $S/ncu_$k.log 2>&1
  echo "ncu $k rc=$? $(el)"
  $NCU -i $S/$k.ncu-rep --page source --csv --print-source sass > $S/src_$k.csv 2> $S/src_$k.err; echo "source page rc=$? $(wc -l < $S/src_$k.csv) lines"
  $NCU -i $S/$k.ncu-rep --page details > $S/details_$k.txt 2>&1
done
cat $S/bench.txt
