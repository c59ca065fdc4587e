"""PSNR and SSIM in numpy.

PSNR-Y: 10 log10(255^2 / MSE) of the luma plane.
PSNR-YUV: the same with the MSE pooled over every sample of Y, U and V (4:2:0: (4 MSE_Y + MSE_U +
MSE_V) / 6).
SSIM-Y: Wang et al. 2004 on luma: 11x11 Gaussian window (sigma 1.5), K1 0.01, K2 0.03, L 255,
'valid' region only (no padding), no down-sampling, mean of the SSIM map.
"""
from __future__ import annotations

import math

import numpy as np

PEAK = 255.0


def mse(a, b) -> float:
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    return float(np.mean(d * d))


def psnr_from_mse(m: float) -> float:
    return math.inf if m == 0 else 10.0 * math.log10(PEAK * PEAK / m)


def frame_scores(ref, test) -> dict:
    """ref/test: (Y, U, V) uint8 planes of one 4:2:0 frame."""
    my, mu, mv = (mse(r, t) for r, t in zip(ref, test))
    ny, nu, nv = (p.size for p in ref)
    myuv = (my * ny + mu * nu + mv * nv) / (ny + nu + nv)
    muv = (mu * nu + mv * nv) / (nu + nv)
    return {
        "psnr_y": psnr_from_mse(my),
        "psnr_uv": psnr_from_mse(muv),
        "psnr_yuv": psnr_from_mse(myuv),
        "ssim_y": ssim(ref[0], test[0]),
    }


def _gauss_kernel(size: int = 11, sigma: float = 1.5) -> np.ndarray:
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2
    k = np.exp(-(x * x) / (2 * sigma * sigma))
    return k / k.sum()


def _filt_valid(img: np.ndarray, k: np.ndarray) -> np.ndarray:
    n = len(k)
    h, w = img.shape
    tmp = sum(k[i] * img[:, i:w - n + 1 + i] for i in range(n))
    return sum(k[i] * tmp[i:h - n + 1 + i, :] for i in range(n))


def ssim(a, b, size: int = 11, sigma: float = 1.5) -> float:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch {a.shape} vs {b.shape}")
    if min(a.shape) < size:
        raise ValueError(f"plane {a.shape} smaller than the {size}x{size} SSIM window")
    k = _gauss_kernel(size, sigma)
    c1 = (0.01 * PEAK) ** 2
    c2 = (0.03 * PEAK) ** 2
    mu_a = _filt_valid(a, k)
    mu_b = _filt_valid(b, k)
    saa = _filt_valid(a * a, k) - mu_a * mu_a
    sbb = _filt_valid(b * b, k) - mu_b * mu_b
    sab = _filt_valid(a * b, k) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * sab + c2)
    den = (mu_a * mu_a + mu_b * mu_b + c1) * (saa + sbb + c2)
    return float(np.mean(num / den))


def clip_scores(ref_frames, test_frames) -> dict:
    """Mean over frames of each per-frame score."""
    if len(ref_frames) != len(test_frames):
        raise ValueError(f"frame count mismatch: reference {len(ref_frames)}, denoised {len(test_frames)}")
    per = [frame_scores(r, t) for r, t in zip(ref_frames, test_frames)]
    return {k: float(np.mean([p[k] for p in per])) for k in per[0]}
