"""Experiments on BM3D's second step (issue #31): the candidate default (`high`, block step 4,
search radius 8; per-frame groups and motion seeds as the profile runs them) with 2 + 2 frames on
the harness's six clips, 6 frames, PSNR-YUV, CPU backend, through /tmp/nlmdenoise-exp built with
wiener-signal-power.diff (EXP_WIENER=variant[:value]) or bayes-second-step.diff
(EXP_BAYES=alpha,beta,uniform). VARIANTS: comma-separated, "0" the product's Wiener step,
"bayes[:a/b/u]", "blend"; SIGMA (default 20); FLAGS (default the candidate's).

    VARIANTS="0,bayes:1/1/1" SIGMA=20 target/quality/venv/bin/python docs/experiments/wiener-signal-power.py
"""
import importlib.machinery, importlib.util, os, sys, time
from pathlib import Path
ROOT = Path("/work/main")
sys.argv = ["quality_bm3d", "--part", "profiles"]
loader = importlib.machinery.SourceFileLoader("qb", str(ROOT / "scripts" / "quality_bm3d"))
spec = importlib.util.spec_from_loader("qb", loader)
qb = importlib.util.module_from_spec(spec)
loader.exec_module(qb)
sigma = float(os.environ.get("SIGMA", "20"))
n = 6
work = ROOT / "target" / "quality" / "work"
data = {}
for seq in qb.NOISE_SEQS:
    paths = qb.clips.prepare(qb.clips.SEQUENCES[seq], [sigma], work)
    data[seq] = (qb.y4m.read(paths["clean"]).frames[:n], paths[sigma])
flags = os.environ.get("FLAGS", "--bm3d-profile high --bm3d-block-step 4 --bm3d-search-radius 8").split() + ["--temporal-past", "2", "--temporal-future", "2"]
print(f"| variant | {' | '.join(qb.NOISE_SEQS)} | mean | s |", flush=True)
for variant in sys.argv_variants if False else os.environ["VARIANTS"].split(","):
    os.environ.pop("EXP_BAYES", None)
    os.environ.pop("EXP_BLEND", None)
    if variant == "blend":
        os.environ["EXP_BLEND"] = "1"
    elif variant.startswith("bayes"):
        os.environ["EXP_BAYES"] = variant[5:].lstrip(":").replace("/", ",")
    else:
        os.environ["EXP_WIENER"] = variant
    t = time.time()
    scores = []
    for seq in qb.NOISE_SEQS:
        clean, noisy = data[seq]
        frames, _ = qb.run_ours("/tmp/nlmdenoise-exp", noisy, sigma, flags, frames=n)
        scores.append(qb.metrics.clip_scores(clean, frames)["psnr_yuv"])
    print(f"| {variant} | {' | '.join(f'{v:.2f}' for v in scores)} | {sum(scores)/len(scores):.3f} | {time.time()-t:.0f} |", flush=True)
