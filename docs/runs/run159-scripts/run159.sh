#!/usr/bin/env bash
# Run 159 (issue 31): the scene-cut test of frames in device memory from cell sums made on the
# device (kernels/common/scene.cu) instead of every 4th row copied to the host (run 158: 232 us
# a 1080p frame). cuda_device_frames, memcheck and racecheck on the scene-cut case, the element's
# CUDA-memory tests, pipeline_bench source=cuda with scene-cut=0 against the default, twice.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B/cuda_device_frames --nocapture --test-threads=4 > $S/cuda_device_frames.txt 2>&1; echo "cuda_device_frames rc=$? $(el)"
grep -E "test result|panicked|FAILED" $S/cuda_device_frames.txt | cut -c1-250 | head -12
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 120 $SAN --tool memcheck --error-exitcode 9 $B/cuda_device_frames --test-threads=1 device_frames_find_scene_cuts_as_the_host_path > $S/memcheck.txt 2>&1; echo "memcheck rc=$? $(el)"
timeout 200 $SAN --tool racecheck --error-exitcode 9 $B/cuda_device_frames --test-threads=1 device_frames_find_scene_cuts_as_the_host_path > $S/racecheck.txt 2>&1; echo "racecheck rc=$? $(el)"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|test result" $S/memcheck.txt $S/racecheck.txt
(
  source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
  export GST_PLUGIN_FEATURE_RANK=nvh264sldec:NONE
  timeout 200 $B/element_cuda_memory --nocapture --test-threads=1 > $S/element_cuda_memory.txt 2>&1; echo "element_cuda_memory rc=$? $(el)"
  grep -E "test result|panicked|FAILED" $S/element_cuda_memory.txt | cut -c1-250 | head
  RLIVE="backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 strength=10"
  for rep in 1 2; do
    for cut in "scene-cut=0" ""; do
      echo "== source=cuda NV12 R-live $cut #$rep" >> $S/cut_cost.txt
      timeout 90 $B/pipeline_bench 1920 1080 3000 format=NV12 source=cuda $RLIVE $cut >> $S/cut_cost.txt 2>&1 || echo "exit $?" >> $S/cut_cost.txt
    done
  done
  echo "pipeline_bench done $(el)"
  grep -E "^==|^\|" $S/cut_cost.txt | grep -v "appsrc ! fakesink" | cut -c1-220 | head -60
)
