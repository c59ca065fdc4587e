#!/bin/bash
# Run 182 (issue #29): where the group kernels' time goes before the filtering is rewritten.
# Nsight Compute, full set with SASS-level stall sampling, of one luma launch each of the Wiener
# filtering and the hard-thresholding groups of a candidate-default 1 + 1 frame (1080p I420).
# Carry [".devcarry"]. `run.sh a`.
# Run 183 (`run.sh b`): the filtering's Haar transforms, shrinkage and Wiener weights in registers,
# gathers and sums through one address per member (group.cu): digests against the previous build
# (bench_bm3d_prev, d541e2a; the same bits expected), bench rows of both builds on one lease, Nsight
# Compute of the same two launches. `run.sh c`: every cuda_bm3d test, memcheck, racecheck, and
# synccheck of the tensor search.
# Run 184 (`run.sh d`): the columns specialised on the group size (no per-member bounds), the
# column passes' swizzle found once per lane; the filtering launch bounded to 5 blocks a SM
# (bench_bm3d) or 4 (bench_bm3d_b4): digests, bench rows of both and of d541e2a's candidate rows,
# Nsight Compute. Then `run.sh c` on this build.
# Run 185 (`run.sh e`, then `run.sh f`): each butterfly and Wiener product rounded on its own (no
# FMA contraction, as the shared-memory code had none), filtering bounds 5: digests (d541e2a's
# bits expected), bench rows of this build and d541e2a's, sanitizers; `run.sh f`: every
# cuda_bm3d test.
# Run 186 (`run.sh g`, the same build): the candidate default's cheaper neighbours that keep its
# picture (docs/tuning.md: the Wiener step's 2 seeds; hard block step 5), and the SASS-level
# profile of the two group launches for the next kernel work.
# Run 187 (`run.sh h`): the patch transforms' matrices as literals instead of constant memory
# (run 186: a uniform constant load for every two FMAs, 13% of the Wiener filtering's
# instructions): digests (d541e2a's bits expected), candidate rows of this build and run 185's
# (bench_bm3d_185) on one lease.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
PART=${1:-a}
exec > >(tee "$O/console-$PART.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
CAND="--profiles high --block-step 4 --search-radius 8 --frame-groups"
if [ "$PART" = a ]; then
for k in bm3d_wiener_frames_filter bm3d_hard_frames; do
  echo "== ncu full: $k"
  timeout 200 "$NCU" --set full --import-source no --kernel-name $k --launch-skip 4 --launch-count 1 -o "$O/$k" \
    $B/bench_bm3d --frames 4 $CAND --windows vbm3d > "$O/ncu_$k.log" 2>&1; echo "rc=$?"
  "$NCU" -i "$O/$k.ncu-rep" --page details > "$O/details_$k.txt" 2>&1
  "$NCU" -i "$O/$k.ncu-rep" --page source --csv --print-source sass > "$O/sass_$k.csv" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Issued Ipc|Issue Slots|Compute \(SM\)|Memory Throughput|Bank|Wavefronts|Stall|pipe" "$O/details_$k.txt" | head -60
  wc -c "$O/sass_$k.csv"
done
fi
if [ "$PART" = b ]; then
echo "== digests: this build, then d541e2a's"
for bin in bench_bm3d bench_bm3d_prev; do
  echo "-- $bin"
  timeout 150 $B/$bin --frames 1 --profiles fast,normal,high --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
  timeout 100 $B/$bin --frames 1 $CAND --windows vbm3d,offline2 --digest 2>&1 | grep -E "^digest"
  timeout 60 $B/$bin --frames 1 $CAND --bayes --windows vbm3d --digest 2>&1 | grep -E "^digest"
done
echo "== bench_bm3d 1080p I420: this build, then d541e2a's"
for bin in bench_bm3d bench_bm3d_prev; do
  echo "-- $bin"
  timeout 150 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 2>&1 | grep -E "^\| [a-z]"
  timeout 100 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
done
for k in bm3d_wiener_frames_filter bm3d_hard_frames; do
  echo "== ncu: $k"
  timeout 100 "$NCU" --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --kernel-name $k --launch-skip 4 --launch-count 1 \
    $B/bench_bm3d --frames 4 $CAND --windows vbm3d > "$O/ncu_b_$k.txt" 2>&1; echo "rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Executed Instructions  |Compute \(SM\)|highest-utilized|Dynamic Shared" "$O/ncu_b_$k.txt" | head -20
done
fi
if [ "$PART" = d ]; then
echo "== digests of this build (d541e2a's in run 183: high spatial 3dbcf49966c782ca, vbm3d 48810ef446465864, live2 ab0875883ca544b0)"
timeout 200 $B/bench_bm3d --frames 1 --profiles fast,normal,high --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
timeout 100 $B/bench_bm3d --frames 1 $CAND --windows vbm3d,offline2 --digest 2>&1 | grep -E "^digest"
timeout 60 $B/bench_bm3d --frames 1 $CAND --bayes --windows vbm3d --digest 2>&1 | grep -E "^digest"
echo "== bench_bm3d 1080p I420: this build (filter bounds 5), bounds 4, d541e2a's candidate rows"
for bin in bench_bm3d bench_bm3d_b4; do
  echo "-- $bin"
  timeout 150 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 2>&1 | grep -E "^\| [a-z]"
  timeout 100 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
done
echo "-- bench_bm3d_prev"
timeout 100 $B/bench_bm3d_prev --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
for k in bm3d_wiener_frames_filter bm3d_hard_frames; do
  echo "== ncu: $k"
  timeout 100 "$NCU" --section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --kernel-name $k --launch-skip 4 --launch-count 1 \
    $B/bench_bm3d --frames 4 $CAND --windows vbm3d > "$O/ncu_d_$k.txt" 2>&1; echo "rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Executed Instructions  |Compute \(SM\)|highest-utilized|Dynamic Shared" "$O/ncu_d_$k.txt" | head -20
done
fi
if [ "$PART" = e ]; then
echo "== digests of this build; d541e2a's (run 183): fast 54b4d6d710e199c9 af6419591c1deaf8 96038e220796b4e5, normal 8c433c34de08b55f d1e7e6af83424015 06feac9201f50b31, high 3dbcf49966c782ca 48810ef446465864 ab0875883ca544b0, candidate 63ca808d4b4085af 909693f9a18eaa49, bayes f165dbbcf813c236"
timeout 200 $B/bench_bm3d --frames 1 --profiles fast,normal,high --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
timeout 100 $B/bench_bm3d --frames 1 $CAND --windows vbm3d,offline2 --digest 2>&1 | grep -E "^digest"
timeout 60 $B/bench_bm3d --frames 1 $CAND --bayes --windows vbm3d --digest 2>&1 | grep -E "^digest"
echo "== bench_bm3d 1080p I420: this build, d541e2a's"
for bin in bench_bm3d bench_bm3d_prev; do
  echo "-- $bin"
  timeout 150 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial,vbm3d,live2,offline2 2>&1 | grep -E "^\| [a-z]"
  timeout 100 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  timeout 150 "$SAN" --tool $tool --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/$tool.txt 2>&1; echo "$tool rc=$?"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/$tool.txt | sort | uniq -c
done
fi
if [ "$PART" = f ]; then
echo "== cuda_bm3d, every test"
timeout 330 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d.txt | head -30
fi
if [ "$PART" = g ]; then
echo "== bench_bm3d 1080p I420, the candidate and its neighbours"
timeout 60 $B/bench_bm3d --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
timeout 60 $B/bench_bm3d --frames 30 $CAND --wiener-seeds 2 --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
timeout 60 $B/bench_bm3d --frames 30 $CAND --hard-block-step 5 --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
timeout 60 $B/bench_bm3d --frames 30 $CAND --hard-block-step 5 --wiener-seeds 2 --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
for k in bm3d_wiener_frames_filter bm3d_hard_frames; do
  echo "== ncu source counters: $k"
  timeout 100 "$NCU" --section SourceCounters --section InstructionStats --import-source no --kernel-name $k --launch-skip 4 --launch-count 1 -o "$O/g_$k" \
    $B/bench_bm3d --frames 4 $CAND --windows vbm3d > "$O/ncu_g_$k.log" 2>&1; echo "rc=$?"
  "$NCU" -i "$O/g_$k.ncu-rep" --page source --csv --print-source sass > "$O/sass_g_$k.csv" 2>&1
  rm -f "$O/g_$k.ncu-rep"
  gzip -9 "$O/sass_g_$k.csv"; ls -la "$O/sass_g_$k.csv.gz"
done
fi
if [ "$PART" = h ]; then
echo "== digests of this build; d541e2a's (run 183): fast 54b4d6d710e199c9 af6419591c1deaf8 96038e220796b4e5, normal 8c433c34de08b55f d1e7e6af83424015 06feac9201f50b31, high 3dbcf49966c782ca 48810ef446465864 ab0875883ca544b0, candidate 63ca808d4b4085af 909693f9a18eaa49, bayes f165dbbcf813c236"
timeout 120 $B/bench_bm3d --frames 1 --profiles fast,normal,high --windows spatial,vbm3d,live2 --digest 2>&1 | grep -E "^digest"
timeout 60 $B/bench_bm3d --frames 1 $CAND --windows vbm3d,offline2 --digest 2>&1 | grep -E "^digest"
timeout 40 $B/bench_bm3d --frames 1 $CAND --bayes --windows vbm3d --digest 2>&1 | grep -E "^digest"
echo "== bench_bm3d 1080p I420: this build, run 185's"
for bin in bench_bm3d bench_bm3d_185; do
  echo "-- $bin"
  timeout 40 $B/$bin --frames 30 $CAND --windows vbm3d,live2,offline2 2>&1 | grep -E "^\| high"
  timeout 40 $B/$bin --frames 30 $CAND --hard-block-step 5 --wiener-seeds 2 --windows vbm3d,live2 2>&1 | grep -E "^\| high"
  timeout 40 $B/$bin --frames 30 --profiles fast,normal,high --windows spatial 2>&1 | grep -E "^\| [a-z]"
done
fi
if [ "$PART" = c ]; then
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "== memcheck, racecheck, synccheck (sanitizer_smoke_bm3d)"
for tool in memcheck racecheck synccheck; do
  timeout 150 "$SAN" --tool $tool --error-exitcode 9 $B/cuda_bm3d --test-threads=1 sanitizer_smoke_bm3d > $O/$tool.txt 2>&1; echo "$tool rc=$?"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" $O/$tool.txt | sort | uniq -c
done
echo "== cuda_bm3d, every test"
timeout 300 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d.txt | head -30
fi
date -u
