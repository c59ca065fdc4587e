"""The denoisers compared, how each is run, and the strength lattice each is tuned on."""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Method:
    name: str            # short id used in tables
    family: str          # "nlmdenoise" or "ffmpeg"
    describe: str        # fixed parameters, for the docs
    knob: str            # name of the tuned parameter
    base: float          # first lattice point = base * sigma
    ratio: float         # lattice step (multiplicative)
    lo: float            # knob range
    hi: float
    # nlmdenoise only
    cli: tuple = ()      # fixed CLI arguments
    split_chroma: bool = False  # luma strength and chroma strength tuned separately (independent chroma)
    with_sigma: bool = True     # pass --sigma <true noise sigma>
    # ffmpeg only
    graph: str = ""      # filter with {v} for the knob value (and {v2} for a derived value)
    complex: bool = False

    def lattice(self, sigma: float, k: int) -> float:
        v = self.base * sigma * self.ratio ** k
        return float(f"{min(max(v, self.lo), self.hi):.4g}")


def nlm(name, describe, cli, split_chroma=True, with_sigma=True, base=0.8):
    return Method(name, "nlmdenoise", describe, "strength", base, 2 ** 0.25, 0.25, 1000.0,
                  cli=tuple(cli), split_chroma=split_chroma, with_sigma=with_sigma)


A3S2 = ["--search-radius", "3", "--patch-radius", "2", "--weighting", "welsch", "--temporal-future", "0"]

NLM = [
    nlm("nlm-p0", "spatial only: a=3 s=2, past 0, independent chroma, --sigma", A3S2 + ["--temporal-past", "0", "--chroma-mode", "independent"]),
    nlm("nlm-p1", "a=3 s=2, past 1, independent chroma, --sigma", A3S2 + ["--temporal-past", "1", "--chroma-mode", "independent"]),
    nlm("nlm-p2", "a=3 s=2, past 2, independent chroma, --sigma (engine defaults + sigma)", A3S2 + ["--temporal-past", "2", "--chroma-mode", "independent"]),
    nlm("nlm-p4", "a=3 s=2, past 4, independent chroma, --sigma", A3S2 + ["--temporal-past", "4", "--chroma-mode", "independent"]),
    nlm("nlm-p2-lg", "a=3 s=2, past 2, luma-guided chroma, --sigma", A3S2 + ["--temporal-past", "2", "--chroma-mode", "luma-guided"], split_chroma=False),
    nlm("nlm-p2-nosig", "a=3 s=2, past 2, independent chroma, no --sigma (no distance offset)", A3S2 + ["--temporal-past", "2", "--chroma-mode", "independent"], with_sigma=False, base=1.2),
]

FFMPEG = [
    Method("ff-nlmeans", "ffmpeg", "nlmeans (spatial): p=7 (7x7 patch), r=15 (15x15 search), pc/rc = p/r; s tuned", "s",
           0.7, 2 ** 0.5, 1.0, 30.0, graph="nlmeans=s={v}:p=7:r=15"),
    Method("ff-hqdn3d", "ffmpeg", "hqdn3d: luma_spatial tuned; chroma_spatial, luma_tmp, chroma_tmp at their default ratios (3/4, 3/2, 9/8 of it)", "luma_spatial",
           1.5, 2 ** 0.5, 0.5, 255.0, graph="hqdn3d={v}"),
    Method("ff-atadenoise", "ffmpeg", "atadenoise: s=9 frames, parallel; one knob t for all planes: threshold A = min(t, 0.3) "
           "(A's maximum), threshold B = min(2t, 5)", "t",
           0.008, 2 ** 0.5, 0.005, 2.5, graph="atadenoise=0a={va}:1a={va}:2a={va}:0b={v2}:1b={v2}:2b={v2}:s=9"),
    Method("ff-fftdnoiz", "ffmpeg", "fftdnoiz: 3-D, prev=1 next=1, block 32, overlap 0.5, wiener; sigma tuned", "sigma",
           3.0, 2 ** 0.5, 0.25, 100.0, graph="fftdnoiz=sigma={v}:prev=1:next=1"),
    Method("ff-bm3d", "ffmpeg", "bm3d basic estimate (block 16, bstep 4, group 1, the filter's defaults); sigma tuned. "
           "(group > 1 and the two-step final estimate left the clip almost unchanged in Debian's ffmpeg 5.1)", "sigma",
           4.0, 2 ** 0.5, 1.0, 2000.0, graph="bm3d=sigma={v}"),
]

ALL = {m.name: m for m in NLM + FFMPEG}


def nlm_command(binary, m: Method, noisy, out, sigma: float, h: float, hc: float) -> list[str]:
    cmd = [str(binary), "-y", "-i", str(noisy), "-o", str(out), "--backend", "cpu", "--quiet",
           *m.cli, "--strength", f"{h:g}", "--chroma-strength", f"{hc:g}"]
    if m.with_sigma:
        cmd += ["--sigma", f"{sigma:g}"]
    return cmd


def ffmpeg_command(m: Method, noisy, out, v: float) -> list[str]:
    g = m.graph.format(v=f"{v:g}", va=f"{min(v, 0.3):g}", v2=f"{min(2 * v, 5.0):g}")
    base = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(noisy)]
    filt = ["-filter_complex", g] if m.complex else ["-vf", g]
    return base + filt + ["-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", str(out)]


def run_label(m: Method, h: float, hc: float | None = None) -> str:
    if m.family == "nlmdenoise":
        if m.split_chroma:
            return f"h={h:g} hc={hc if hc is not None else h:g}"
        return f"h={h:g}"
    return f"{m.knob}={h:g}"
