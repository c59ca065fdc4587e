#!/usr/bin/env bash
# Run 146 (issue 29): per-frame groups on the device, second look: the members' sum slots kept in
# shared memory (4 ints a member) against run 145's build (bench_bm3d_base: main); the own-frame
# search by the search kernel before each frame's group launch (bench_bm3d_fgsearch) against
# inline (bench_bm3d); Nsight Compute on high step 4 radius 8 with frame groups, 1 + 1.
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
run() { local b=$1; shift; timeout 90 $B/$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
for rep in 1 2; do
  for b in bench_bm3d_base bench_bm3d bench_bm3d_fgsearch; do
    run $b --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 --frame-groups
    run $b --profiles fast,normal --windows spatial,vbm3d,live2
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  for b in bench_bm3d bench_bm3d_fgsearch; do
    timeout 150 $NCU --kernel-name regex:bm3d_ --launch-skip 60 --launch-count 16 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis $B/$b --frames 12 --profiles high --windows vbm3d --block-step 4 --search-radius 8 --frame-groups > $S/ncu_$b.txt 2>&1
    echo "ncu $b rc=$? $(el)"
  done
fi
cat $S/bench.txt
