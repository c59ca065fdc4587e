#!/usr/bin/env bash
# Run 122 (issue 32): device frames in the engine, memory:CUDAMemory through the elements.
cd "$(dirname "$0")/.."
export BUDGET=${BUDGET:-400}
TESTS="cuda_device_frames cuda_stored cuda_vs_reference chunked_cuda cuda_sr cuda_bm3d" bash scripts/gpu.sh env cudamem tests
S=$OUT/extra; mkdir -p $S
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 100 "$SAN" --tool memcheck --error-exitcode 9 .devcarry/cuda_device_frames --test-threads=1 sanitizer_smoke_device_frames > $S/memcheck_device_frames.txt 2>&1; echo "memcheck rc=$?" >> $S/san.txt
timeout 100 "$SAN" --tool racecheck --error-exitcode 9 .devcarry/cuda_device_frames --test-threads=1 sanitizer_smoke_device_frames > $S/racecheck_device_frames.txt 2>&1; echo "racecheck rc=$?" >> $S/san.txt
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/*check_device_frames.txt >> $S/san.txt
cat $S/san.txt
