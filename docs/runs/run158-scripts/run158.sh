#!/usr/bin/env bash
# Run 158 (issue 31): motion seeds on by default in every profile, scene cuts found in frames
# pushed in device memory. cuda_device_frames (the new scene-cut case), cuda_bm3d (every
# comparison with the f64 reference now runs with motion seeds), memcheck and racecheck on both
# smoke tests, the element's CUDA-memory tests, the cut test's cost on CUDA-memory input
# (pipeline_bench source=cuda, scene-cut=0 against the default), BM3D frames/s as the profiles now run.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in cuda_device_frames cuda_bm3d; do
  timeout 200 $B/$t --nocapture --test-threads=10 > $S/$t.txt 2>&1; echo "$t rc=$? $(el)"
  grep -E "test result|panicked|FAILED|motion seeds off" $S/$t.txt | cut -c1-250 | head -12
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in "cuda_device_frames sanitizer_smoke_device_frames" "cuda_bm3d sanitizer_smoke_bm3d"; do
  set -- $t
  timeout 60 $SAN --tool memcheck --error-exitcode 9 $B/$1 --test-threads=1 $2 > $S/memcheck_$1.txt 2>&1; echo "memcheck $1 rc=$? $(el)"
  timeout 150 $SAN --tool racecheck --error-exitcode 9 $B/$1 --test-threads=1 $2 > $S/racecheck_$1.txt 2>&1; echo "racecheck $1 rc=$? $(el)"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck_$1.txt $S/racecheck_$1.txt
done
(
  source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
  export GST_PLUGIN_FEATURE_RANK=nvh264sldec:NONE
  timeout 200 $B/element_cuda_memory --nocapture --test-threads=1 > $S/element_cuda_memory.txt 2>&1; echo "element_cuda_memory rc=$? $(el)"
  grep -E "test result|panicked|FAILED|SKIPPED" $S/element_cuda_memory.txt | cut -c1-250 | head
  RLIVE="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10"
  for rep in 1 2; do
    for cut in "scene-cut=0" ""; do
      echo "== source=cuda NV12 R-live $cut #$rep" >> $S/cut_cost.txt
      timeout 90 $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda $RLIVE $cut >> $S/cut_cost.txt 2>&1 || echo "exit $?" >> $S/cut_cost.txt
    done
  done
  echo "pipeline_bench done $(el)"
  grep -E "^==|^\|" $S/cut_cost.txt | cut -c1-220 | head -60
)
run() { timeout 150 $B/bench_bm3d --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)|rror' >> $S/bench.txt; echo "bench_bm3d $* done $(el)"; }
run --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2
run --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups
cat $S/bench.txt
