#!/bin/bash
# Run 190 (issue #29): `normal` re-fitted as the default profile (`high`'s picture at real-time
# speed: block step 4, search radius 8, groups 16 / 32, 3 seeds of radius 4 and the Wiener step's
# 2, window references; per-frame groups with future frames as before). Carry [".devcarry"]:
# bench_bm3d and cuda_bm3d of this build, bench_bm3d_prev (run 189's build: the previous `normal`).
# The profile rows (live windows: window references, per-frame groups off by default), `normal`
# live with per-frame groups, `normal` 1 + 1 three times; then every cuda_bm3d test.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$PWD/.devcarry
exec > >(tee "$O/console.txt") 2>&1
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
echo "== bench_bm3d 1080p I420, this build"
timeout 150 $B/bench_bm3d --frames 30 --profiles normal,fast,high --windows vbm3d,live2,offline2,spatial,vbm3d,vbm3d 2>&1 | grep -E "^\| [a-z]"
timeout 40 $B/bench_bm3d --frames 30 --profiles normal --frame-groups --windows live2 2>&1 | grep -E "^\| [a-z]"
echo "== the previous normal (run 189's build)"
timeout 60 $B/bench_bm3d_prev --frames 30 --profiles normal --windows vbm3d,live2,offline2,spatial 2>&1 | grep -E "^\| [a-z]"
date -u
echo "== cuda_bm3d, every test"
timeout 330 $B/cuda_bm3d --test-threads=4 > $O/cuda_bm3d.txt 2>&1; echo "rc=$?"
grep -E "^test |test result|panicked|seed" $O/cuda_bm3d.txt | head -30
date -u
