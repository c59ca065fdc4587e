"""Runs denoisers on noisy clips, scores them, and searches each method's best strength."""
from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

from . import metrics, y4m
from .methods import Method, ffmpeg_command, nlm_command, run_label


def file_id(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:12]


def ffmpeg_id() -> str:
    out = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.splitlines()
    return out[0].split()[2] if out else "unknown"


class Runner:
    """Runs one (clip, sigma, method, strength) and caches the scores in a JSON-lines file."""

    def __init__(self, workdir: Path, binary: Path | None, log=print, fresh: bool = False):
        self.workdir = workdir
        self.binary = binary
        self.log = log
        self.cache_path = workdir / "results.jsonl"
        self.tool_ids = {"ffmpeg": "ffmpeg-" + ffmpeg_id()}
        if binary is not None:
            # run a private copy: the shared target/ may be rebuilt while an evaluation runs
            ident = "nlmdenoise-" + file_id(binary)
            self.tool_ids["nlmdenoise"] = ident
            copy = workdir / "bin" / ident
            if not copy.exists():
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(binary, copy.with_suffix(".tmp"))
                os.replace(copy.with_suffix(".tmp"), copy)
            self.binary = copy
        self.cache: dict[str, dict] = {}
        if self.cache_path.exists() and not fresh:
            for line in self.cache_path.read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    self.cache[r["key"]] = r
        self._clean: dict[str, list] = {}
        self._ids: dict[str, str] = {}
        self.runs = 0

    def clean_frames(self, path: Path):
        if str(path) not in self._clean:
            self._clean[str(path)] = y4m.read(path).frames
        return self._clean[str(path)]

    def run(self, seq: str, clips: dict, sigma: float, m: Method, h: float, hc: float | None = None) -> dict:
        if m.family == "nlmdenoise" and self.binary is None:
            raise RuntimeError("nlmdenoise binary not available")
        if m.split_chroma and hc is None:
            hc = h
        label = run_label(m, h, hc)
        noisy = clips[sigma]
        if str(noisy) not in self._ids:
            self._ids[str(noisy)] = file_id(noisy)[:8]
        key = "|".join([self.tool_ids[m.family], noisy.name, self._ids[str(noisy)], m.name, label])
        if key in self.cache:
            return self.cache[key]
        out = self.workdir / f"out-{os.getpid()}.y4m"
        if m.family == "nlmdenoise":
            cmd = nlm_command(self.binary, m, noisy, out, sigma, h, hc if hc is not None else h)
        else:
            cmd = ffmpeg_command(m, noisy, out, h)
        load = os.getloadavg()[0]
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True)
        wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise RuntimeError(f"denoiser failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stderr.decode(errors='replace')[-3000:]}")
        clean = self.clean_frames(clips["clean"])
        test = y4m.read(out).frames
        scores = metrics.clip_scores(clean, test)
        out.unlink()
        n = len(clean)
        res = {
            "key": key, "seq": seq, "sigma": sigma, "method": m.name, "params": label,
            "h": h, "hc": hc, "frames": n,
            "s_per_frame": wall / n,
            "cpu_s_per_frame": ((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)) / n,
            "load1": load,
            "command": " ".join(map(str, cmd)),
            **scores,
        }
        self.runs += 1
        self.log(f"  {seq} sigma={sigma:g} {m.name:14s} {label:18s} PSNR-Y {scores['psnr_y']:6.2f} "
                 f"PSNR-YUV {scores['psnr_yuv']:6.2f} SSIM-Y {scores['ssim_y']:.4f}  {wall / n * 1000:7.1f} ms/frame")
        self.cache[key] = res
        with open(self.cache_path, "a") as f:
            f.write(json.dumps(res) + "\n")
        return res


def retime(runner: Runner, seq: str, clips: dict, sigma: float, m: Method, best: dict, repeats: int) -> dict:
    """Re-runs the best setting `repeats` times (output discarded) and returns a copy of `best`
    whose times are the minimum over all runs, which filters out most of the load of a shared
    machine."""
    out = dict(best)
    if repeats <= 0:
        return out
    tkey = f"timing{repeats}|{best['key']}"
    if tkey in runner.cache:
        t = runner.cache[tkey]
        out.update(s_per_frame=t["s_per_frame"], cpu_s_per_frame=t["cpu_s_per_frame"], timing_runs=t["timing_runs"])
        return out
    null = runner.workdir / f"timing-{os.getpid()}.y4m"
    for _ in range(repeats):
        if m.family == "nlmdenoise":
            cmd = nlm_command(runner.binary, m, clips[sigma], null, sigma, best["h"], best["hc"] if best["hc"] is not None else best["h"])
        else:
            cmd = ffmpeg_command(m, clips[sigma], null, best["h"])
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True)
        wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise RuntimeError(f"timing run failed: {' '.join(map(str, cmd))}")
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        out["s_per_frame"] = min(out["s_per_frame"], wall / best["frames"])
        out["cpu_s_per_frame"] = min(out["cpu_s_per_frame"], cpu / best["frames"])
    null.unlink(missing_ok=True)
    out["timing_runs"] = repeats + 1
    rec = {"key": tkey, "s_per_frame": out["s_per_frame"], "cpu_s_per_frame": out["cpu_s_per_frame"],
           "timing_runs": repeats + 1, "load1": os.getloadavg()[0]}
    runner.cache[tkey] = rec
    with open(runner.cache_path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    return out


def _climb(evaluate, objective, k0: int = 0, kmin: int = -12, kmax: int = 12, max_steps: int = 12) -> tuple[int, bool]:
    """Hill-climbs on the integer lattice towards a local maximum of objective(evaluate(k)).
    Returns (k, interior): interior is False when k is a range end or the step limit was hit."""
    k = k0
    f = lambda j: objective(evaluate(j))
    for _ in range(max_steps):
        here = f(k)
        up = f(k + 1) if k + 1 <= kmax else -math.inf
        down = f(k - 1) if k - 1 >= kmin else -math.inf
        if up > here and up >= down:
            k += 1
        elif down > here:
            k -= 1
        else:
            return k, kmin < k < kmax
    return k, False


def _refine(m: Method, sigma: float, k: int, vals: dict) -> float:
    """Continuous optimum by a parabola through lattice points k-1, k, k+1 in log(strength)."""
    if any(j not in vals or not math.isfinite(vals[j]) for j in (k - 1, k, k + 1)):
        return m.lattice(sigma, k)
    f0, fm, fp = vals[k], vals[k - 1], vals[k + 1]
    den = fm - 2 * f0 + fp
    d = 0.0 if den >= 0 else max(-1.0, min(1.0, 0.5 * (fm - fp) / den))
    lo, hi = m.lattice(sigma, k - 1), m.lattice(sigma, k + 1)
    if lo == hi:
        return m.lattice(sigma, k)
    return float(f"{m.base * sigma * m.ratio ** (k + d):.4g}")


def _kbounds(m: Method, sigma: float) -> tuple[int, int]:
    """Lattice indices whose values stay inside the knob range (values clamp beyond them)."""
    unit = m.base * sigma
    # the first index past each end clamps to the end value, so the range ends are tried too
    kmin = math.floor(math.log(m.lo / unit) / math.log(m.ratio) + 1e-9)
    kmax = math.ceil(math.log(m.hi / unit) / math.log(m.ratio) - 1e-9)
    return max(kmin, -12), min(kmax, 12)


def best_strength(runner: Runner, seq: str, clips: dict, sigma: float, m: Method) -> dict:
    """Searches the method's strength lattice; returns the best run plus the search record."""
    kmin, kmax = _kbounds(m, sigma)
    k0 = min(max(0, kmin), kmax)
    runs: dict[int, dict] = {}

    def ev(k):
        if k not in runs:
            runs[k] = runner.run(seq, clips, sigma, m, m.lattice(sigma, k))
        return runs[k]

    tried = lambda key: {k: r[key] for k, r in runs.items()}
    if m.split_chroma:
        ky, iy = _climb(ev, lambda r: r["psnr_y"], k0, kmin, kmax)
        kc, ic = _climb(ev, lambda r: r["psnr_uv"], ky, kmin, kmax)
        hy, hc = m.lattice(sigma, ky), m.lattice(sigma, kc)
        best = runs[ky] if ky == kc else runner.run(seq, clips, sigma, m, hy, hc)
        return {"best": best, "grid": sorted(runs.values(), key=lambda r: r["h"]),
                "h_opt": _refine(m, sigma, ky, tried("psnr_y")), "hc_opt": _refine(m, sigma, kc, tried("psnr_uv")),
                "edge": not (iy and ic), "edge_luma": not iy, "edge_chroma": not ic}
    k, interior = _climb(ev, lambda r: r["psnr_yuv"], k0, kmin, kmax)
    return {"best": runs[k], "grid": sorted(runs.values(), key=lambda r: r["h"]),
            "h_opt": _refine(m, sigma, k, tried("psnr_yuv")), "hc_opt": None, "edge": not interior,
            "edge_luma": not interior, "edge_chroma": False}
