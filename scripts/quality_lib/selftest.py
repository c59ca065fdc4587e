"""`scripts/quality --self-test`: checks of the metrics, clip I/O, noise and search helpers."""
from __future__ import annotations

import math
import tempfile
import traceback
from pathlib import Path

import numpy as np

from . import clips, evaluate, metrics, y4m
from .methods import ALL, ffmpeg_command, nlm_command


def _frame(w=64, h=48, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(h, w), (h // 2, w // 2), (h // 2, w // 2)])


def t_identical_is_inf_and_one():
    f = _frame()
    s = metrics.frame_scores(f, f)
    assert math.isinf(s["psnr_y"]) and math.isinf(s["psnr_yuv"]), s
    assert abs(s["ssim_y"] - 1.0) < 1e-12, s


def t_known_mse():
    f = _frame()
    g = (np.clip(f[0].astype(int) + np.where(np.arange(f[0].size).reshape(f[0].shape) % 2, 3, -3), 0, 255).astype(np.uint8), f[1], f[2])
    # exact MSE of the clipped difference
    my = float(np.mean((g[0].astype(float) - f[0]) ** 2))
    s = metrics.frame_scores(f, g)
    assert abs(s["psnr_y"] - 10 * math.log10(255 ** 2 / my)) < 1e-9, s
    # pooled 4:2:0 MSE: luma has 4x the samples of each chroma plane, chroma error is 0
    assert abs(s["psnr_yuv"] - 10 * math.log10(255 ** 2 / (my * 4 / 6))) < 1e-9, s
    # a constant error of 2 on every sample: PSNR = 10 log10(65025 / 4)
    a = np.full((32, 32), 100, np.uint8)
    assert abs(metrics.psnr_from_mse(metrics.mse(a, a + 2)) - 42.1102) < 1e-3


def t_ssim_closed_form():
    # constant planes: SSIM = (2 x y + C1) / (x^2 + y^2 + C1)
    x, y = 100.0, 120.0
    c1 = (0.01 * 255) ** 2
    want = (2 * x * y + c1) / (x * x + y * y + c1)
    got = metrics.ssim(np.full((20, 20), x), np.full((20, 20), y))
    assert abs(got - want) < 1e-9, (got, want)


def t_ssim_orders_noise():
    rng = np.random.default_rng(1)
    base = np.cumsum(rng.normal(size=(64, 64)), axis=1) * 4 + 128
    s5 = metrics.ssim(base, base + rng.normal(0, 5, base.shape))
    s20 = metrics.ssim(base, base + rng.normal(0, 20, base.shape))
    assert 1 > s5 > s20 > 0, (s5, s20)
    assert abs(metrics.ssim(base, base + 7) - metrics.ssim(base + 7, base)) < 1e-12


def t_y4m_roundtrip_and_errors():
    with tempfile.TemporaryDirectory() as d:
        c = y4m.Clip(64, 48, "30000:1001", [_frame(seed=i) for i in range(3)])
        p = Path(d) / "a.y4m"
        y4m.write(p, c)
        r = y4m.read(p)
        assert (r.width, r.height, r.fps, len(r)) == (64, 48, "30000:1001", 3)
        for a, b in zip(c.frames, r.frames):
            assert all(np.array_equal(x, y) for x, y in zip(a, b))
        p.write_bytes(p.read_bytes()[:-10])
        try:
            y4m.read(p)
            raise AssertionError("truncated clip accepted")
        except ValueError:
            pass
        p.write_bytes(b"YUV4MPEG2 W64 H48 F25:1 C444\nFRAME\n")
        try:
            y4m.read(p)
            raise AssertionError("4:4:4 accepted")
        except ValueError:
            pass


def t_noise_level_and_seed():
    c = y4m.Clip(128, 96, "25:1", [tuple(np.full(s, 128, np.uint8) for s in [(96, 128), (48, 64), (48, 64)])] * 4)
    n1 = clips.unit_noise("x", c)
    n2 = clips.unit_noise("x", c)
    n3 = clips.unit_noise("y", c)
    assert all(np.array_equal(a, b) for fa, fb in zip(n1, n2) for a, b in zip(fa, fb))
    assert not np.array_equal(n1[0][0], n3[0][0])
    noisy = clips.add_noise(c, n1, 10.0)
    for plane in range(3):
        d = np.concatenate([(f[plane].astype(float) - 128).ravel() for f in noisy.frames])
        assert abs(d.std() - math.sqrt(100 + 1 / 12)) < 0.4, (plane, d.std())
        assert abs(d.mean()) < 0.3


def t_resample():
    m = clips.resample_matrix(10, 10, 0.0, 1.0)
    assert np.allclose(m, np.eye(10))
    m = clips.resample_matrix(8, 40, 8.3, 1.25)
    assert np.allclose(m.sum(axis=1), 1.0)
    # away from the clamped edges a ramp comes out as the ramp at the sampled positions
    # (normalised Lanczos reproduces linear functions only approximately: within 0.01)
    ramp = np.arange(40, dtype=float)
    assert np.allclose(m @ ramp, 8.3 + 1.25 * np.arange(8), atol=0.01)
    # a half-pixel shift of an impulse splits it symmetrically
    m = clips.resample_matrix(20, 20, 0.5, 1.0)
    imp = np.zeros(20)
    imp[10] = 1.0
    out = m @ imp
    assert abs(out[9] - out[10]) < 1e-12 and out[9] > 0.4


def t_search_finds_peak():
    m = ALL["ff-hqdn3d"]
    # concave objective in lattice index with its peak at k=3
    val = {}
    ev = lambda k: val.setdefault(k, {"psnr_yuv": -(k - 3) ** 2})
    assert evaluate._climb(ev, lambda r: r["psnr_yuv"], 0, -5, 8) == (3, True)
    # bounded: stops at the range end and says so
    assert evaluate._climb(ev, lambda r: r["psnr_yuv"], 0, -5, 2) == (2, False)
    # still rising when the step limit is hit: not an interior optimum either
    assert evaluate._climb(ev, lambda r: r["psnr_yuv"], -5, -9, 9, max_steps=4) == (-1, False)
    # parabola vertex at k = 3.25 is recovered by the refinement
    f = {j: -(j - 3.25) ** 2 for j in (2, 3, 4)}
    h = evaluate._refine(m, 10.0, 3, f)
    assert abs(h - m.base * 10 * m.ratio ** 3.25) < 1e-3 * h, h


def t_lattice_and_commands():
    m = ALL["ff-atadenoise"]
    assert m.lattice(30, 12) == 2.5 and m.lattice(5, -12) == 0.005
    lo, hi = evaluate._kbounds(m, 20)
    assert m.lattice(20, hi) == 2.5 and m.lattice(20, hi - 1) < 2.5 and m.lattice(20, lo) == 0.005 and m.lattice(20, lo + 1) > 0.005
    cmd = ffmpeg_command(m, "in.y4m", "out.y4m", 0.1)
    assert "atadenoise=0a=0.1:1a=0.1:2a=0.1:0b=0.2:1b=0.2:2b=0.2:s=9" in cmd
    cmd = ffmpeg_command(m, "in.y4m", "out.y4m", 0.6)
    assert "atadenoise=0a=0.3:1a=0.3:2a=0.3:0b=1.2:1b=1.2:2b=1.2:s=9" in cmd
    cmd = nlm_command("nlm", ALL["nlm-p2"], "in.y4m", "o.y4m", 20, 13.5, 9)
    assert cmd[cmd.index("--strength") + 1] == "13.5" and cmd[cmd.index("--sigma") + 1] == "20"
    assert "--sigma" not in nlm_command("nlm", ALL["nlm-p2-nosig"], "i", "o", 20, 1, 1)


TESTS = [v for k, v in sorted(globals().items()) if k.startswith("t_")]


def run() -> int:
    passed = failed = 0
    for t in TESTS:
        try:
            t()
            passed += 1
            print(f"ok   {t.__name__}")
        except Exception:
            failed += 1
            print(f"FAIL {t.__name__}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
