#!/usr/bin/env python3
"""PSNR-YUV (scripts/quality_lib/metrics.py's definition: MSE over Y, U and V samples per frame,
mean over frames) of NLM with and without patch-wise aggregation on the harness clips (first 6
frames, the harness's noisy clips at sigma 10/20/30), live (2 past) and offline (2 + 2), through
the CLI on the given backend. Prints a markdown table.
  quality.py NLMDENOISE CLIPS_DIR BACKEND"""
import subprocess
import sys
import tempfile
import numpy as np

binary, clips, backend = sys.argv[1], sys.argv[2], sys.argv[3]
CLIPS = ["coffee", "bunny", "samoyed", "cockatoo", "testsrc2", "mandelbrot"]
CONFIGS = {
    "defaults (p2s3)": [],
    "p3s3a2w2": ["--patch-radius", "3", "--aggregation-radius", "2", "--wref", "2"],
}
WINDOWS = {"live": ["--temporal-past", "2", "--temporal-future", "0"], "offline": ["--temporal-past", "2", "--temporal-future", "2"]}


def read(path):
    data = open(path, "rb").read()
    head, _, rest = data.partition(b"\n")
    f = dict((t[:1], t[1:]) for t in head.split()[1:])
    w, h = int(f[b"W"]), int(f[b"H"])
    cw, ch = (w + 1) // 2, (h + 1) // 2
    frames, pos = [], 0
    while pos < len(rest):
        nl = rest.index(b"\n", pos)
        pos = nl + 1
        y = np.frombuffer(rest, np.uint8, w * h, pos); pos += w * h
        u = np.frombuffer(rest, np.uint8, cw * ch, pos); pos += cw * ch
        v = np.frombuffer(rest, np.uint8, cw * ch, pos); pos += cw * ch
        frames.append(np.concatenate([y, u, v]).astype(np.float64))
    return frames


def psnr_yuv(ref, test):
    return float(np.mean([10 * np.log10(255.0 ** 2 / max(np.mean((a - b) ** 2), 1e-12)) for a, b in zip(ref, test)]))


print("| window | sigma | config | " + " | ".join(CLIPS) + " | mean |")
print("|---|---|---|" + "---|" * (len(CLIPS) + 1))
with tempfile.TemporaryDirectory() as tmp:
    out = f"{tmp}/out.y4m"
    for wname, wargs in WINDOWS.items():
        for sigma in (10, 20, 30):
            for cname, cargs in CONFIGS.items():
                row = []
                for c in CLIPS:
                    cmd = [binary, "-y", "-q", f"{clips}/{c}-6f-sigma{sigma}.y4m", "-o", out, "--backend", backend, "--sigma", str(sigma), *wargs, *cargs]
                    subprocess.run(cmd, check=True, capture_output=True)
                    row.append(psnr_yuv(read(f"{clips}/{c}-6f-clean.y4m"), read(out)))
                print(f"| {wname} | {sigma} | {cname} | " + " | ".join(f"{v:.3f}" for v in row) + f" | **{np.mean(row):.3f}** |", flush=True)
