#!/usr/bin/env python3
"""PSNR-YUV (scripts/quality_lib/metrics.py's definition: MSE over Y, U and V samples, per frame,
mean over frames) of BM3D configurations on the harness clips (6 frames, the harness's own noisy
clips at sigma 10/20/30/40), with the CUDA backend. Prints a markdown table.
  quality.py NLMDENOISE CLIPS_DIR"""
import subprocess
import sys
import numpy as np

binary, clips = sys.argv[1], sys.argv[2]
CLIPS = ["coffee", "bunny", "samoyed", "cockatoo", "testsrc2", "mandelbrot"]
CAND = ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--bm3d-frame-groups", "true"]
CONFIGS = {
    "high 2 + 2 (today)": ["--bm3d-profile", "high", "--temporal-past", "2", "--temporal-future", "2"],
    "candidate 2 + 2": [*CAND, "--temporal-past", "2", "--temporal-future", "2"],
    "candidate 2 + 2, bayes": [*CAND, "--bm3d-bayes", "true", "--temporal-past", "2", "--temporal-future", "2"],
    "candidate 1 + 1, bayes": [*CAND, "--bm3d-bayes", "true", "--temporal-past", "1", "--temporal-future", "1"],
    "candidate live 2 past, bayes": [*CAND, "--bm3d-bayes", "true", "--temporal-past", "2", "--temporal-future", "0"],
}


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
        y = np.frombuffer(rest, np.uint8, w * h, pos).reshape(h, w); pos += w * h
        u = np.frombuffer(rest, np.uint8, cw * ch, pos); pos += cw * ch
        v = np.frombuffer(rest, np.uint8, cw * ch, pos); pos += cw * ch
        frames.append((y, u, v))
    return frames


def psnr_yuv(ref, test):
    out = []
    for r, t in zip(ref, test):
        se = sum(float(np.sum((a.astype(np.float64) - b.astype(np.float64)) ** 2)) for a, b in zip(r, t))
        n = sum(a.size for a in r)
        out.append(10 * np.log10(255.0 ** 2 / (se / n)))
    return float(np.mean(out))


print("| sigma | config | " + " | ".join(CLIPS) + " | mean |")
print("|---|---|" + "---|" * (len(CLIPS) + 1))
for sigma in (30, 20, 40, 10):
    for name, opts in CONFIGS.items():
        scores = []
        for c in CLIPS:
            clean = read(f"{clips}/{c}-6f-clean.y4m")
            r = subprocess.run([binary, "-q", "-y", f"{clips}/{c}-6f-sigma{sigma}.y4m", "/tmp/q.y4m", "--backend", "cuda", "--algorithm", "bm3d", "--sigma", str(sigma), *opts], capture_output=True, text=True)
            scores.append(psnr_yuv(clean, read("/tmp/q.y4m")) if r.returncode == 0 else float("nan"))
            if r.returncode != 0:
                print(f"<!-- {name} {c} sigma {sigma}: rc {r.returncode}: {r.stderr.strip()[-300:]} -->")
        print(f"| {sigma} | {name} | " + " | ".join(f"{s:.2f}" for s in scores) + f" | **{np.mean(scores):.3f}** |", flush=True)
