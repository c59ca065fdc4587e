#!/bin/bash
# Run 174: the aggregated kernel with the column box first (own rows in registers, only the edge
# rows through shared memory) and the row box by shuffles after it: agreement tests, speed
# against R-live, sanitizers. Carry [".devcarry"].
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console-v2.txt") 2>&1
date -u
FIT="--search-radius 3 --patch-radius 3 --aggregation-radius 2 --wref 2"
timeout 150 $B/cuda_vs_reference --test-threads=4 2>&1 | grep -E "^test |test result|panicked"
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 --config live 2>&1 | grep -E "^\| R-live"
for t in "" 28,8,7 32,8,7; do
  echo "-- tile ${t:-default}"
  env ${t:+NLMDENOISE_CUDA_TILE=$t} timeout 60 $B/bench_cuda --brief --only kernel --iters 200 $FIT --past 2 --future 0,2 2>&1 | grep -E "^\| custom"
done
timeout 60 $B/bench_cuda --brief --only kernel --iters 200 --search-radius 3 --patch-radius 2,3 --aggregation-radius 1,2 --wref 2 --past 2 2>&1 | grep -E "^\| custom"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$SAN" --tool memcheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 patch_wise_aggregation sanitizer_smoke batched > $O/memcheck.txt 2>&1; echo "rc=$?"; grep -E "ERROR SUMMARY|test result" $O/memcheck.txt | sort | uniq -c
timeout 200 "$SAN" --tool racecheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 sanitizer_smoke > $O/racecheck.txt 2>&1; echo "rc=$?"; grep -E "RACECHECK SUMMARY|test result" $O/racecheck.txt | sort | uniq -c
date -u
