#!/usr/bin/env bash
cd "$(dirname "$0")/.."
B=$PWD/.devcarry; O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source .gst-debs/activate.sh "$PWD/.gst-debs" /tmp/gst-runtime
export XDG_RUNTIME_DIR=/tmp GST_PLUGIN_PATH=$B/plugin
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $O/summary.txt
# Which CUDA context the decoder and the element use: the element's log and every
# have-context message on the bus (gst-launch -m prints messages).
GST_DEBUG=nlmdenoise:5 timeout 60 gst-launch-1.0 -m filesrc location=$B/clip540.h264 ! h264parse ! nvh264dec ! nlmdenoise backend=cuda sigma=10 ! cudadownload ! fakesink > $O/ctx.txt 2>&1
echo "decode pipeline rc=$?" | tee -a $O/summary.txt
grep -E "have-context|need-context" $O/ctx.txt | sed -E 's/structure: .*//' | sort | uniq -c | tee -a $O/summary.txt
grep -E "offering|adopting|found the CUDA context|CUDA memory \(memory" $O/ctx.txt | sed -E 's/^.*(nlmdenoise [^ ]+:[0-9]+)[^ ]* /\1 /' | cut -c1-200 | sort | uniq -c | tee -a $O/summary.txt
