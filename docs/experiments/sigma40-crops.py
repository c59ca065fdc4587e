"""Crops at sigma 40 (issue #31: no blotches at sigma 40): luma of the first full-window frame
(frame 2), noisy | `high` 2 + 2 | candidate default 2 + 2 | candidate live (2 past) | clean, on a
flat area of bunny and of coffee. CPU backend, the harness's clips.

    target/quality/venv/bin/python docs/experiments/sigma40-crops.py [BINARY]
"""
import importlib.machinery, importlib.util, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "release" / "nlmdenoise")
sys.argv = ["quality_bm3d", "--part", "profiles"]
loader = importlib.machinery.SourceFileLoader("qb", str(ROOT / "scripts" / "quality_bm3d"))
spec = importlib.util.spec_from_loader("qb", loader)
qb = importlib.util.module_from_spec(spec)
loader.exec_module(qb)
sigma, n = 40.0, 6
work = ROOT / "target" / "quality" / "work"
cand = ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8"]
runs = {
    "high 2 + 2": ["--bm3d-profile", "high", "--temporal-past", "2", "--temporal-future", "2"],
    "candidate 2 + 2": [*cand, "--temporal-past", "2", "--temporal-future", "2"],
    "candidate live": [*cand, "--temporal-past", "2", "--temporal-future", "0"],
}
areas = {"bunny": (130, 10), "coffee": (150, 20)}  # (y, x) of a 120x160 crop holding flat areas
for seq, (y0, x0) in areas.items():
    paths = qb.clips.prepare(qb.clips.SEQUENCES[seq], [sigma], work)
    clean = qb.y4m.read(paths["clean"]).frames[:n]
    noisy = qb.y4m.read(paths[sigma]).frames[:n]
    cut = lambda f: f[0][y0:y0 + 120, x0:x0 + 160]
    tiles = [cut(noisy[2])]
    for name, flags in runs.items():
        frames, _ = qb.run_ours(binary, paths[sigma], sigma, flags, frames=n)
        print(f"{seq} sigma 40 {name}: PSNR-YUV {qb.metrics.clip_scores(clean, frames)['psnr_yuv']:.2f}", flush=True)
        tiles.append(cut(frames[2]))
    tiles.append(cut(clean[2]))
    qb.write_crop(ROOT / "docs" / "img" / f"bm3d-sigma40-{seq}.png", tiles)
