#!/usr/bin/env python3
"""bm3d-triton (PyPI, GPU BM3D through PyTorch/Triton) beside nlmdenoise's BM3D: PSNR-Y on the
quality harness's clips and frames/s at 1920x1080, on the GPU machine (scripts/gpu.sh peers).

  python3 scripts/peers/run_bm3d_triton.py CLIPS_DIR OUT.md [--frames N]

CLIPS_DIR holds <seq>-<n>f-clean.y4m and <seq>-<n>f-sigma<s>.y4m (scripts/quality makes them;
`scripts/gpu.sh --collect` copies them into .devcarry/clips). The package's own settings are
BM3D's published ones (patch 8, stride 3, search radius 19, groups 16 / 32, thresholds 2500 /
400), i.e. our `high` profile with search radius 19; sigma is given in normalized units
(sigma / 255). Luma only, like the bm3d package comparison in docs/quality.md.
"""
import argparse
import glob
import os
import re
import sys
import time

import numpy as np
import torch
from bm3d_triton import denoise


def read_y4m_luma(path):
    data = open(path, "rb").read()
    nl = data.index(b"\n")
    head = data[:nl].decode().split()
    w = int(next(t[1:] for t in head if t[0] == "W"))
    h = int(next(t[1:] for t in head if t[0] == "H"))
    frames, pos, fsz = [], nl + 1, w * h * 3 // 2
    while pos < len(data):
        nl = data.index(b"\n", pos)
        pos = nl + 1
        frames.append(np.frombuffer(data[pos:pos + w * h], np.uint8).reshape(h, w))
        pos += fsz
    return frames


def psnr(a, b):
    m = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / max(m, 1e-12))


def run(y, sigma, two_step=True):
    t = torch.from_numpy(y.astype(np.float32) / 255.0).cuda()[None, None]
    out = denoise(t, sigma=sigma / 255.0, two_step=two_step)
    return np.clip(np.rint(out[0, 0].float().cpu().numpy() * 255.0), 0, 255)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("clips")
    ap.add_argument("out")
    ap.add_argument("--frames", type=int, default=2)
    a = ap.parse_args()
    lines = ["| clip | sigma | frames | bm3d-triton PSNR-Y (two steps) |", "| --- | ---: | ---: | ---: |"]
    for noisy in sorted(glob.glob(os.path.join(a.clips, "*-sigma*.y4m"))):
        m = re.match(r"(.*)-(\d+)f-sigma([\d.]+)\.y4m", os.path.basename(noisy))
        if not m:
            continue
        seq, n, sigma = m.group(1), m.group(2), float(m.group(3))
        clean = read_y4m_luma(os.path.join(a.clips, f"{seq}-{n}f-clean.y4m"))
        nz = read_y4m_luma(noisy)
        k = min(a.frames, len(nz))
        p = np.mean([psnr(clean[i], run(nz[i], sigma)) for i in range(k)])
        lines.append(f"| {seq} | {sigma:g} | {k} | {p:.2f} |")
        print(lines[-1], flush=True)
    # Speed at 1080p: luma and the two 4:2:0 chroma planes, GPU-resident, after warm-up (JIT).
    lines += ["", "| bm3d-triton, 1920x1080 I420 (Y + U + V as three calls) | steps | ms/frame | frames/s |", "| --- | ---: | ---: | ---: |"]
    for two_step in (False, True):
        planes = [torch.rand(1, 1, 1080, 1920, device="cuda"), torch.rand(1, 1, 540, 960, device="cuda"), torch.rand(1, 1, 540, 960, device="cuda")]
        for p in planes:
            denoise(p, sigma=20 / 255.0, two_step=two_step)
        torch.cuda.synchronize()
        reps = 5
        t = time.time()
        for _ in range(reps):
            for p in planes:
                denoise(p, sigma=20 / 255.0, two_step=two_step)
        torch.cuda.synchronize()
        ms = (time.time() - t) / reps * 1e3
        lines.append(f"| sigma 20 | {2 if two_step else 1} | {ms:.1f} | {1e3 / ms:.1f} |")
        print(lines[-1], flush=True)
    open(a.out, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
