#!/usr/bin/env bash
# Run 151b: the source pages (SASS, stall samples per instruction) of run 151's two reports,
# as one archive (run 151's output had more files than come back).
cd "$(dirname "$0")/../../.."
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
T=$(mktemp -d)
for k in bm3d_wiener_frames bm3d_hard_frames; do
  $NCU -i .devcarry/$k.ncu-rep --page source --csv --print-source sass > $T/src_$k.csv 2> $T/src_$k.err
  echo "$k rc=$? $(wc -l < $T/src_$k.csv) lines"; head -3 $T/src_$k.csv | cut -c1-600; cat $T/src_$k.err | head -5
done
tar czf $OUT/src.tgz -C $T .
