#!/usr/bin/env python3
"""How fast motion may be before the temporal window stops helping (issue 31's question: does the
predictive search follow motion, or does its radius decide what is found?).

The harness's coffee photograph panned right at 0.7, 3.3, 6.6 and 12.5 samples a frame (no zoom,
sub-pixel: every frame resampled with Lanczos-3), 352x288, 8 frames, white noise of sigma 20 (the
harness's noise rule); each method through the command-line tool (CPU backend, the true sigma),
PSNR-YUV over frames 2-5 (full 2 + 2 windows). Prints one Markdown table (docs/tuning.md,
"Motion").

  target/quality/venv/bin/python docs/experiments/motion-speed.py [--binary target/release/nlmdenoise]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from quality_lib import clips, metrics, y4m  # noqa: E402

SPEEDS = [0.7, 3.3, 6.6, 12.5]
W, H, N, SIGMA = 352, 288, 8, 20.0
ROWS = {
    "NLM spatial": ["--temporal-past", "0", "--temporal-future", "0"],
    "NLM 2 + 2": ["--temporal-past", "2", "--temporal-future", "2"],
    "BM3D normal spatial": ["--algorithm", "bm3d", "--bm3d-profile", "normal", "--temporal-past", "0", "--temporal-future", "0"],
    "BM3D normal 2 + 2": ["--algorithm", "bm3d", "--bm3d-profile", "normal", "--temporal-past", "2", "--temporal-future", "2"],
    "BM3D normal 2 + 2, seed radius 8": ["--algorithm", "bm3d", "--bm3d-profile", "normal", "--temporal-past", "2", "--temporal-future", "2", "--bm3d-seed-radius", "8"],
    "BM3D normal 2 + 2, motion seeds": ["--algorithm", "bm3d", "--bm3d-profile", "normal", "--temporal-past", "2", "--temporal-future", "2", "--bm3d-motion", "true"],
    "candidate default (high, step 4, radius 8, per-frame groups) 2 + 2": [
        "--algorithm", "bm3d", "--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--bm3d-frame-groups", "true",
        "--temporal-past", "2", "--temporal-future", "2"],
    "candidate default, motion seeds": [
        "--algorithm", "bm3d", "--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--bm3d-frame-groups", "true",
        "--temporal-past", "2", "--temporal-future", "2", "--bm3d-motion", "true"],
}


def pan(img: np.ndarray, speed: float) -> list[np.ndarray]:
    ih, iw, _ = img.shape
    f = img.astype(np.float64)
    frames = []
    for t in range(N):
        x0, y0 = 20.0 + 0.37 + speed * t, (ih - H) / 2 + 0.21
        if x0 + W - 1 > iw - 1:
            raise RuntimeError("pan leaves the photograph")
        rx = clips.resample_matrix(W, iw, x0, 1.0)
        ry = clips.resample_matrix(H, ih, y0, 1.0)
        out = np.stack([ry @ f[:, :, c] @ rx.T for c in range(3)], axis=-1)
        frames.append(np.clip(np.rint(out), 0, 255).astype(np.uint8))
    return frames


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", type=Path, default=ROOT / "target" / "release" / "nlmdenoise")
    a = ap.parse_args()
    work = ROOT / "target" / "quality" / "motion"
    work.mkdir(parents=True, exist_ok=True)
    img = clips._decode_rgb(clips._pkg_file("skimage", "data/coffee.png"))
    noisy_paths, cleans = {}, {}
    for s in SPEEDS:
        clean_path = work / f"coffee-pan{s:g}-clean.y4m"
        clips._rgb_to_y4m(pan(img, s), clean_path)
        clean = y4m.read(clean_path)
        noisy_paths[s] = work / f"coffee-pan{s:g}-sigma{SIGMA:g}.y4m"
        y4m.write(noisy_paths[s], clips.add_noise(clean, clips.unit_noise(f"coffee-pan{s:g}", clean), SIGMA))
        cleans[s] = clean
    print("| method | " + " | ".join(f"{s:g} samples/frame" for s in SPEEDS) + " |")
    print("| --- | " + " | ".join("---:" for _ in SPEEDS) + " |")
    for name, args in ROWS.items():
        cells = []
        for s in SPEEDS:
            out = work / "out.y4m"
            cmd = [str(a.binary), "-i", str(noisy_paths[s]), "-o", str(out), "-y", "-q", "--sigma", f"{SIGMA:g}", *args]
            subprocess.run(cmd, check=True)
            test = y4m.read(out)
            cells.append(np.mean([metrics.frame_scores(cleans[s].frames[i], test.frames[i])["psnr_yuv"] for i in range(2, N - 2)]))
        print(f"| {name} | " + " | ".join(f"{c:.2f}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
