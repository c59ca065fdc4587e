"""Experiment (branch exp/per-frame-groups): PSNR-YUV at sigma 20 over the first 6 frames of the six
harness clips, per-frame groups (NLMDENOISE_EXP_GROUP_WINDOW=P,F) against today's definition."""
import os, subprocess, sys, time
from pathlib import Path
ROOT = Path("/work/main")
sys.path.insert(0, str(ROOT / "scripts"))
from quality_lib import clips, metrics, y4m
SEQS = ["coffee", "bunny", "samoyed", "cockatoo", "testsrc2", "mandelbrot"]
work = ROOT / "target" / "quality" / "work"
n, sigma = 6, 20.0
data = {}
for seq in SEQS:
    paths = clips.prepare(clips.SEQUENCES[seq], [sigma], work)
    data[seq] = (y4m.read(paths["clean"]).frames[:n], paths[sigma])
def run(flags, env_window):
    scores = []
    t = time.time()
    for seq in SEQS:
        clean, noisy = data[seq]
        out = Path(f"/tmp/exp-{os.getpid()}.y4m")
        env = dict(os.environ)
        if env_window:
            env["NLMDENOISE_EXP_GROUP_WINDOW"] = env_window
        cmd = ["/tmp/exp-nlmdenoise", "-y", "-i", str(noisy), "-o", str(out), "--backend", "cpu", "--quiet", "--algorithm", "bm3d", "--sigma", "20", "--frames", str(n), *flags]
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        frames = y4m.read(out).frames
        out.unlink()
        scores.append(metrics.clip_scores(clean, frames)["psnr_yuv"])
    return scores, time.time() - t
for name, flags, win in [
    ("per-frame groups 2 + 2, high", ["--bm3d-profile", "high", "--temporal-past", "7", "--temporal-future", "7"], "2,2"),
    ("per-frame groups 1 + 1, high", ["--bm3d-profile", "high", "--temporal-past", "7", "--temporal-future", "7"], "1,1"),
    ("today 1 + 1, high", ["--bm3d-profile", "high", "--temporal-past", "1", "--temporal-future", "1"], None),
    ("per-frame groups 2 + 2, high step 4 radius 8", ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--temporal-past", "7", "--temporal-future", "7"], "2,2"),
    ("per-frame groups 1 + 1, high step 4 radius 8", ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--temporal-past", "7", "--temporal-future", "7"], "1,1"),
    ("today 1 + 1, high step 4 radius 8", ["--bm3d-profile", "high", "--bm3d-block-step", "4", "--bm3d-search-radius", "8", "--temporal-past", "1", "--temporal-future", "1"], None),
]:
    s, dt = run(flags, win)
    print(f"| {name} | {' | '.join(f'{v:.2f}' for v in s)} | {sum(s)/len(s):.3f} | {dt:.0f} |", flush=True)
