#!/usr/bin/env bash
# Run 153 (issue 29): group kernels A/B, second round (run 152: the staged search squares batched
# everywhere cost temporal rows 3%; the Haar transform in registers at 64 registers cost them 5%).
# A: main. E: run 152's E (gathers and staging batched, Kaiser once per lane, Wiener groups of 32
# at 128 registers). F: gathers batched, staging not, Haar in registers for Wiener groups of 32
# only (128 registers), others at 64. G: F + staging batched for Wiener groups of 32 only. H: F
# without the register Haar. Digests: all should agree. No tests (the kernels' outputs are bit
# for bit main's: digests).
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
B=.devcarry; S=$OUT/r; mkdir -p $S
START=$(date +%s); el() { echo "+$(( $(date +%s) - START )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > $S/env.txt 2>&1; cat $S/env.txt
run() { local b=$1; shift; timeout 90 $B/bench_$b --frames 30 "$@" 2>&1 | grep -E '^\| (fast|normal|high)|^digest|rror' | sed "s/^/$b /" >> $S/bench.txt; echo "$b $* done $(el)"; }
for rep in 1; do
  for v in A E F G H; do
    d=; [ $rep = 1 ] && d=--digest
    run $v --profiles fast,normal,high --windows spatial,vbm3d $d
    run $v --profiles high --windows vbm3d,live2,offline2 --block-step 4 --search-radius 8 $d
  done
done
echo "== digests"; grep digest $S/bench.txt | sort -k3,4 -s
echo "== rows"; grep -v digest $S/bench.txt | sort -t'|' -k2,3 -s
