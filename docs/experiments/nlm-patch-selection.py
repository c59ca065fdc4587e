#!/usr/bin/env python3
"""Choosing NLM's patch size per block: how much could it gain? An experiment for issue #30
(docs/tuning.md, "NLM beyond patch and search radii").

Runs the CLI (CPU backend) with today's defaults (patch radius 2, search radius 3, the tool's
strengths) and with patch radius 4 (search radius 3, 0.8 times the strengths: its best scale in
scripts/quality_nlm_fit) on the six harness clips at sigma 10, 20, 30, live and offline, then scores
per clip and sigma (PSNR-YUV, mean over 24 frames), as gains over the defaults:

- patch radius 4 alone;
- a block oracle: per 16 x 16 (64 x 64) luma block and the co-located chroma blocks, the output
  with the smaller error against the clean clip (an upper bound for any per-block choice);
- a SURE choice, which needs no clean clip: per block, SURE = |f(y) - y|^2 + 2 sigma^2 div f(y)
  (up to a constant), the divergence estimated by Monte Carlo (one more run on y + 3b, b = +-1
  random, clipped: div ~ b . (f(y + 3b) - f(y)) / 3), blocks of 8, 16, 32.

  docs/experiments/nlm-patch-selection.py [--binary target/release/nlmdenoise] [--work DIR]

About 4 minutes on the 2-core development machine (144 CLI runs).
"""
import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from quality_lib import y4m  # noqa: E402

CLIPS = ROOT / "target" / "quality" / "work" / "clips"
SEQS = ["coffee", "bunny", "testsrc2", "mandelbrot", "samoyed", "cockatoo"]
SIGMAS = [10, 20, 30]
FACTORS = {"live": (0.71, 0.85), "offline": (0.68, 0.81)}  # src/params.rs, luma and chroma
CONFIGS = {"p2s3": (2, 3, 1.0), "p4s3": (4, 3, 0.8)}
EPS = 3


def psnr_yuv(ref, test):
    v = []
    for r, t in zip(ref, test):
        se = sum(float(((a.astype(float) - b) ** 2).sum()) for a, b in zip(r, t))
        v.append(10 * np.log10(255 ** 2 * sum(a.size for a in r) / se))
    return float(np.mean(v))


def block_sums(x, b):
    h, w = x.shape
    e = np.zeros(((h + b - 1) // b * b, (w + b - 1) // b * b))
    e[:h, :w] = x
    return e.reshape(e.shape[0] // b, b, e.shape[1] // b, b).sum(axis=(1, 3))


def choose(frames, scores, b):
    """Per frame and plane, the block-wise choice among frames[i] of the smallest scores[i]."""
    out = []
    for f in range(len(frames[0])):
        planes = []
        for p in range(3):
            bb = b if p == 0 else b // 2
            s = np.stack([block_sums(sc[f][p], bb) for sc in scores])
            shape = frames[0][f][p].shape
            pick = np.kron(np.argmin(s, axis=0), np.ones((bb, bb), int))[:shape[0], :shape[1]]
            planes.append(np.choose(pick, [fr[f][p] for fr in frames]))
        out.append(planes)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "nlmdenoise"))
    ap.add_argument("--work", default="/tmp/nlm-patch-selection")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)

    def run(src, name, seq, g, window):
        out = work / f"{name}-{seq}-{g}-{window}-{src.stem}.y4m"
        if not out.exists():
            p, r, k = CONFIGS[name]
            fl, fc = FACTORS[window]
            cmd = [a.binary, "-y", "-q", str(src), "-o", str(out), "--backend", "cpu", "--sigma", str(g), "--patch-radius", str(p),
                   "--search-radius", str(r), "--temporal-past", "2", "--temporal-future", "0" if window == "live" else "2"]
            if k != 1.0:
                cmd += ["--strength", f"{k * fl * g:.4g}", "--chroma-strength", f"{k * fc * g:.4g}"]
            subprocess.run(cmd, check=True, capture_output=True)
        return y4m.read(out).frames

    for window in ("live", "offline"):
        rows = {}
        for seq in SEQS:
            for g in SIGMAS:
                clean = y4m.read(CLIPS / f"{seq}-24f-clean.y4m").frames
                noisy_clip = y4m.read(CLIPS / f"{seq}-24f-sigma{g}.y4m")
                noisy = noisy_clip.frames
                rng = np.random.default_rng(1)
                bs = [[rng.choice([-1, 1], size=p.shape) for p in f] for f in noisy]
                pert = work / f"{seq}-24f-sigma{g}-pert.y4m"
                if not pert.exists():
                    noisy_clip.frames = [tuple(np.clip(p.astype(int) + EPS * b, 0, 255).astype(np.uint8) for p, b in zip(f, fb)) for f, fb in zip(noisy, bs)]
                    y4m.write(pert, noisy_clip)
                outs = [run(CLIPS / f"{seq}-24f-sigma{g}.y4m", n, seq, g, window) for n in CONFIGS]
                perts = [run(pert, n, seq, g, window) for n in CONFIGS]
                err = [[[(p.astype(float) - c) ** 2 for p, c in zip(f, cf)] for f, cf in zip(o, clean)] for o in outs]
                sure = [[[(p.astype(float) - y) ** 2 + 2 * g * g * b * (q.astype(float) - p) / EPS for p, q, y, b in zip(f, fq, fy, fb)]
                         for f, fq, fy, fb in zip(o, op, noisy, bs)] for o, op in zip(outs, perts)]
                base = psnr_yuv(clean, outs[0])
                rows[(seq, g)] = [psnr_yuv(clean, outs[1]) - base] + [psnr_yuv(clean, choose(outs, err, b)) - base for b in (16, 64)] + \
                    [psnr_yuv(clean, choose(outs, sure, b)) - base for b in (8, 16, 32)]
        print(f"\n{window}: PSNR-YUV gain over p2s3, dB (mean over sigma 10, 20, 30)\n")
        print("| clip | p4s3 | oracle 16 | oracle 64 | SURE 8 | SURE 16 | SURE 32 |\n| --- |" + " ---: |" * 6)
        for seq in SEQS + ["mean"]:
            keys = [k for k in rows if k[0] == seq or seq == "mean"]
            m = np.mean([rows[k] for k in keys], axis=0)
            print(f"| {seq} | " + " | ".join(f"{x:+.2f}" for x in m) + " |")


if __name__ == "__main__":
    main()
