B=.devcarry
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for s in "" "--sigma 12" "--sigma 3"; do
  echo "== kernel $s"; timeout 60 $B/bench_cuda --only kernel --config live --iters 200 $s 2>&1 | grep -E '^\|' 
done
for s in "" "--sigma 12" "--sigma auto"; do
  echo "== e2e $s"; timeout 60 $B/bench_cuda --brief --only e2e --config live --frames 900 $s 2>&1 | grep -E '^\|'
done
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
for cfg in "strength=10" "sigma=12" "" "sigma=3"; do
  timeout 60 $B/pipeline_bench 1920 1080 1500 backend=cuda pipeline-depth=2 temporal-past=2 search-radius=3 patch-radius=2 $cfg 2>&1 | grep 'nlmdenoise'
done
