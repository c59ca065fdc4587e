#!/bin/bash
# Run 173: after the review (c249bcc): every CUDA NLM agreement test (aggregation radii 3-6 and an
# aggregated batched launch added), memcheck on the aggregation tests. Carry [".devcarry"].
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console-review.txt") 2>&1
date -u
timeout 150 $B/cuda_vs_reference --test-threads=4 2>&1 | grep -E "^test |test result|panicked"
timeout 300 "$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" --tool memcheck --error-exitcode 9 $B/cuda_vs_reference --test-threads=2 patch_wise_aggregation batched > $O/memcheck.txt 2>&1; echo "rc=$?"
grep -E "ERROR SUMMARY|test result" $O/memcheck.txt | sort | uniq -c
date -u
