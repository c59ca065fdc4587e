#!/usr/bin/env bash
# Run 137 (issue 29): the build of run 136 with the shared-memory limit of the search kernels set
# to the device's (engines with other search radii share them); the regression test on main's
# build (cuda_bm3d_base) and on this one; racecheck with window references; speed against main.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
timeout 60 $B/cuda_bm3d_base --nocapture --test-threads=1 engines_with_other_radii > $S/regression_base.txt 2>&1; echo "main's build, regression test: rc=$? $(el)"
grep -E "^test |test result|Err|panicked" $S/regression_base.txt | cut -c1-300 | head -5
timeout 120 $B/cuda_bm3d --nocapture --test-threads=6 > $S/cuda_bm3d.txt 2>&1; echo "cuda_bm3d rc=$? $(el)"
grep -E "^test |test result|panicked" $S/cuda_bm3d.txt | grep -v "running for" | cut -c1-250 | head -20
timeout 90 $B/cuda_sr --test-threads=6 > $S/cuda_sr.txt 2>&1; echo "cuda_sr rc=$? $(grep 'test result' $S/cuda_sr.txt) $(el)"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 40 $SAN --tool memcheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
for b in bench_bm3d_base bench_bm3d; do
  timeout 60 $B/$b --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt
  echo "$b done $(el)"
done
cat $S/bench.txt
