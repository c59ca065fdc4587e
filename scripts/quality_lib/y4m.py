"""Minimal YUV4MPEG2 reader/writer for 8-bit 4:2:0 clips."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_C420 = {"420", "420jpeg", "420paldv", "420mpeg2"}


@dataclass
class Clip:
    width: int
    height: int
    fps: str = "25:1"
    frames: list = field(default_factory=list)  # each (Y, U, V) uint8 arrays

    def __len__(self) -> int:
        return len(self.frames)


def _parse_header(line: bytes) -> tuple[int, int, str]:
    toks = line.decode("ascii", "replace").split()
    if not toks or toks[0] != "YUV4MPEG2":
        raise ValueError("not a YUV4MPEG2 stream")
    w = h = None
    fps = "25:1"
    colour = "420jpeg"
    for t in toks[1:]:
        k, v = t[0], t[1:]
        if k == "W":
            w = int(v)
        elif k == "H":
            h = int(v)
        elif k == "F":
            fps = v
        elif k == "C":
            colour = v
    if w is None or h is None:
        raise ValueError("y4m header lacks W or H")
    if colour not in _C420:
        raise ValueError(f"y4m colour space C{colour} is not 8-bit 4:2:0")
    if w % 2 or h % 2:
        raise ValueError(f"odd 4:2:0 size {w}x{h}")
    return w, h, fps


def read(path) -> Clip:
    with open(path, "rb") as f:
        data = f.read()
    nl = data.index(b"\n")
    w, h, fps = _parse_header(data[:nl])
    clip = Clip(w, h, fps)
    ysz, csz = w * h, (w // 2) * (h // 2)
    pos = nl + 1
    while pos < len(data):
        nl = data.index(b"\n", pos)
        if not data[pos:nl].startswith(b"FRAME"):
            raise ValueError(f"{path}: bad frame marker at byte {pos}")
        pos = nl + 1
        end = pos + ysz + 2 * csz
        if end > len(data):
            raise ValueError(f"{path}: truncated frame {len(clip.frames)}")
        buf = np.frombuffer(data, np.uint8, ysz + 2 * csz, pos)
        y = buf[:ysz].reshape(h, w)
        u = buf[ysz:ysz + csz].reshape(h // 2, w // 2)
        v = buf[ysz + csz:].reshape(h // 2, w // 2)
        clip.frames.append((y, u, v))
        pos = end
    return clip


def write(path, clip: Clip) -> None:
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{clip.width} H{clip.height} F{clip.fps} Ip A1:1 C420jpeg\n".encode())
        for y, u, v in clip.frames:
            f.write(b"FRAME\n")
            for p in (y, u, v):
                f.write(np.ascontiguousarray(p, dtype=np.uint8).tobytes())
