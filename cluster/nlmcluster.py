"""Segment-parallel offline denoising: one input cut into segments of frames, each segment denoised
by its own `nlmdenoise --segment START:END` run on a worker (a GPU or CPU cores of this machine,
or of a Ray cluster), the segments verified and joined without re-encoding, the source's audio
muxed once. The joined output equals a single run's (y4m: byte for byte; H.264: every frame once,
the segments' own encoded frames) because each segment run reads the context its temporal window
needs around it (cli/src/main.rs, `Segment`).

    scripts/cluster INPUT OUTPUT [driver options] [-- nlmdenoise options]

docs/cluster.md has the user's guide (options, Ray cluster recipe, the manifest, measurements).

Files: the output's working folder (default OUTPUT.parts/) holds `manifest.json` (the plan and
every segment verified so far) and the segment files. A segment is written under a name of its
own per attempt (`seg-0003.a2.part.y4m`) and renamed to `seg-0003.y4m` only once its run exited 0
and the file held its frames; the manifest is rewritten (atomically) after each. A rerun of the
same command resumes: verified segments are kept, everything else is redone.
"""
from __future__ import annotations

import argparse
import atexit
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_VERSION = 1
ROOT = Path(__file__).resolve().parent.parent

# nlmdenoise options the driver sets itself for every segment run.
RESERVED = {"--segment", "--segment-in-place", "--frames", "-o", "--output", "-i", "--input", "--psnr-ref", "--container", "-q", "--quiet"}
# Options that take no value (so that the next word is not taken for theirs).
FLAGS = {"--no-novelty-gate", "--no-audio", "--no-autorotate", "-y", "--overwrite", "-n", "--no-overwrite", "-v", "-vv", "--verbose"}


# Files to remove however the driver ends (atexit; a killed driver's are removed by the next run).
TEMPORARIES: list[Path] = []


@atexit.register
def _remove_temporaries() -> None:
    for p in TEMPORARIES:
        p.unlink(missing_ok=True)


class DriverError(Exception):
    """A failure the user can act on: printed as one line, exit status 1."""


# ---- nlmdenoise's options ----------------------------------------------------------------------


def option_values(args: list[str]) -> dict[str, str]:
    """The `--name value` / `--name=value` pairs of an nlmdenoise command line (flags map to '')."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and "=" in a:
            k, v = a.split("=", 1)
            out[k] = v
        elif a in FLAGS:
            out[a] = ""
        elif a.startswith("-") and i + 1 < len(args):
            out[a] = args[i + 1]
            i += 1
        elif a.startswith("-"):
            out[a] = ""
        else:
            raise DriverError(f"'{a}': nlmdenoise options after -- take the form --name value (the input and output are the driver's)")
        i += 1
    bad = sorted(set(out) & RESERVED)
    if bad:
        raise DriverError(f"{', '.join(bad)}: set by the driver for each segment; leave them out of the nlmdenoise options")
    return out


# ---- probing -----------------------------------------------------------------------------------


@dataclass
class Y4mFile:
    header: bytes  # the header line, newline included
    frame_bytes: int  # samples per frame (without the FRAME line)
    frames: int
    complete: bool  # no trailing partial frame
    plain: bool = True  # every frame line is a bare FRAME (fixed offsets: in-place segments)


def y4m_frame_bytes(header: bytes) -> int:
    fields = header.split()
    if not fields or fields[0] != b"YUV4MPEG2":
        raise DriverError("not a YUV4MPEG2 stream")
    w = h = None
    cs = "420"
    for f in fields[1:]:
        if f[:1] == b"W":
            w = int(f[1:])
        elif f[:1] == b"H":
            h = int(f[1:])
        elif f[:1] == b"C":
            cs = f[1:].decode()
    if not w or not h:
        raise DriverError("y4m header without a size")
    depth = 1
    m = re.search(r"p(\d+)$", cs)
    if m and int(m.group(1)) > 8:
        depth = 2
    luma = w * h
    if cs.startswith("mono"):
        samples = luma
    elif cs.startswith("444"):
        samples = 3 * luma
    elif cs.startswith("422"):
        samples = luma + 2 * (((w + 1) // 2) * h)
    else:  # 420 variants
        samples = luma + 2 * (((w + 1) // 2) * ((h + 1) // 2))
    return samples * depth


def read_y4m(path: Path) -> Y4mFile:
    """Header and frame count of a y4m file, reading only the FRAME lines."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        header = f.readline(4096)
        if not header.endswith(b"\n"):
            raise DriverError(f"'{path}': no complete y4m header")
        frame_bytes = y4m_frame_bytes(header)
        frames, pos, plain = 0, len(header), True
        while pos < size:
            f.seek(pos)
            line = f.readline(4096)
            if not line.startswith(b"FRAME") or not line.endswith(b"\n"):
                return Y4mFile(header, frame_bytes, frames, False, plain)
            plain = plain and line == b"FRAME\n"
            pos += len(line) + frame_bytes
            if pos > size:
                return Y4mFile(header, frame_bytes, frames, False, plain)
            frames += 1
    return Y4mFile(header, frame_bytes, frames, True, plain)


def verify_in_place(path: Path, start: int, end: int) -> None:
    """Frames start..end of an output assembled in place (`nlmdenoise --segment-in-place`): a
    header, and a FRAME line where each of them starts. Raises DriverError otherwise."""
    try:
        with open(path, "rb") as f:
            header = f.readline(4096)
            if not header.endswith(b"\n"):
                raise DriverError(f"'{path.name}': no y4m header")
            record = len(b"FRAME\n") + y4m_frame_bytes(header)
            for i in range(start, end):
                f.seek(len(header) + i * record)
                if f.read(6) != b"FRAME\n":
                    raise DriverError(f"'{path.name}': frame {i} is missing")
    except OSError as e:
        raise DriverError(f"'{path.name}': {e.strerror}") from None


def is_y4m(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(9) == b"YUV4MPEG2"


def ffmpeg_video_frames(path: Path, decode: bool) -> int:
    """As ffprobe_video_frames, with ffmpeg alone (static builds often come without ffprobe)."""
    codec = [] if decode else ["-c", "copy"]
    r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-map", "0:v:0", *codec, "-f", "null", "-progress", "pipe:1", "-"], capture_output=True, text=True)
    counts = re.findall(r"^frame=(\d+)", r.stdout, re.M)
    if r.returncode != 0 or not counts:
        raise DriverError(f"'{path}': cannot count its video frames ({(r.stderr.strip() or 'no video stream').splitlines()[-1]})")
    if decode and r.stderr.strip():
        raise DriverError(f"'{path}': does not decode cleanly ({r.stderr.strip().splitlines()[-1]})")
    return int(counts[-1])


def ffprobe_video_frames(path: Path, decode: bool) -> int:
    """Video frames of a media file by ffprobe: decoded (`decode`: every frame must decode) or
    demuxed packets."""
    if shutil.which("ffprobe") is None and shutil.which("ffmpeg") is not None:
        return ffmpeg_video_frames(path, decode)
    what = ["-count_frames", "-show_entries", "stream=nb_read_frames"] if decode else ["-count_packets", "-show_entries", "stream=nb_read_packets"]
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", *what, "-of", "csv=p=0", str(path)], capture_output=True, text=True)
    text = r.stdout.strip().splitlines()
    if r.returncode != 0 or not text or not text[0].strip().isdigit():
        raise DriverError(f"'{path}': cannot count its video frames ({(r.stderr.strip() or 'no video stream').splitlines()[-1]})")
    if decode and r.stderr.strip():
        raise DriverError(f"'{path}': does not decode cleanly ({r.stderr.strip().splitlines()[-1]})")
    return int(text[0].strip())


@dataclass
class Probe:
    frames: int
    y4m: Y4mFile | None  # None: an encoded input (decoded by GStreamer in each segment run)


def probe_input(path: Path) -> Probe:
    if not path.is_file():
        raise DriverError(f"cannot open input '{path}': not a file")
    if is_y4m(path):
        y = read_y4m(path)
        if y.frames == 0:
            raise DriverError(f"'{path}': no complete frame")
        if not y.complete:
            raise DriverError(f"'{path}': damaged or truncated after frame {y.frames} (nlmdenoise INPUT OUTPUT on its own keeps the frames before it)")
        return Probe(y.frames, y)
    if shutil.which("ffprobe") is None and shutil.which("ffmpeg") is None:
        raise DriverError("ffprobe or ffmpeg (Debian package ffmpeg) is needed to plan an encoded input")
    # Demuxed packets: the frames a decode gives when the file is sound (each segment run then
    # checks that its frames all arrive).
    n = ffprobe_video_frames(path, decode=False)
    if n == 0:
        raise DriverError(f"'{path}': no video frame")
    return Probe(n, None)


def plan_segments(frames: int, segments: int) -> list[tuple[int, int]]:
    """`segments` consecutive ranges of frames, their lengths differing by at most one."""
    if segments < 1:
        raise DriverError("--segments must be at least 1")
    if segments > frames:
        raise DriverError(f"{segments} segments do not fit an input of {frames} frames")
    cuts = [round(i * frames / segments) for i in range(segments + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(segments)]


# ---- the manifest ------------------------------------------------------------------------------


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class Manifest:
    path: Path
    data: dict
    lock: threading.Lock = field(default_factory=threading.Lock)

    def segment(self, i: int) -> dict:
        return self.data["segments"][i]

    def mark_done(self, i: int, name: str, frames: int, seconds: float, worker: str) -> None:
        with self.lock:
            self.data["segments"][i].update({"file": name, "frames": frames, "seconds": round(seconds, 3), "worker": worker, "done": True})
            write_json_atomic(self.path, self.data)


def run_key(input_path: Path, container: str, nlm_args: list[str], plan: list[tuple[int, int]]) -> str:
    st = input_path.stat()
    text = json.dumps([str(input_path.resolve()), st.st_size, st.st_mtime_ns, container, nlm_args, plan])
    return hashlib.sha256(text.encode()).hexdigest()


# ---- running a segment ------------------------------------------------------------------------


def _die_with_parent() -> None:
    # A segment run ends with the driver (Linux): no orphan keeps writing a part file.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def segment_command(binary: str, input_path: str, part: str, seg: tuple[int, int], nlm_args: list[str], device: str | None, threads: int | None, in_place: bool = False) -> list[str]:
    cmd = [binary, "-i", input_path, "-o", part, "-y", "-q", "--segment", f"{seg[0]}:{seg[1]}", *(["--segment-in-place"] if in_place else []), *nlm_args]
    if device is not None:
        cmd += ["--device-id", device]
    if threads:
        cmd += ["--threads", str(threads)]
    return cmd


def run_segment_process(cmd: list[str]) -> tuple[int, str, float]:
    """Runs one segment; (exit status, the end of its standard error, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
    return p.returncode, p.stderr.strip()[-2000:], time.monotonic() - t0


def verify_segment(path: Path, expected: int, media: bool) -> int:
    """The frames of a finished segment file, checked: all there, each decodable (media) or
    complete (y4m). Raises DriverError otherwise."""
    if not path.is_file() or path.stat().st_size == 0:
        raise DriverError(f"'{path.name}': missing or empty")
    if media:
        n = ffprobe_video_frames(path, decode=True)
    else:
        y = read_y4m(path)
        if not y.complete:
            raise DriverError(f"'{path.name}': ends inside a frame")
        n = y.frames
    if n != expected:
        raise DriverError(f"'{path.name}': {n} frames, {expected} expected")
    return n


# ---- executors ---------------------------------------------------------------------------------


@dataclass
class Job:
    index: int
    segment: tuple[int, int]
    attempt: int


class LocalExecutor:
    """One worker per GPU (`--device-id N`) or per share of this machine's CPU cores."""

    def __init__(self, gpus: list[str], cpu_workers: int, threads: int | None):
        self.slots: list[tuple[str, str | None, int | None]] = [(f"gpu{g}", g, None) for g in gpus] or [(f"cpu{i}", None, threads) for i in range(cpu_workers)]
        self.free = list(range(len(self.slots)))
        self.pool = ThreadPoolExecutor(max_workers=len(self.slots))
        self.describe = f"local, {len(self.slots)} worker(s): " + ", ".join(s[0] for s in self.slots)

    @property
    def workers(self) -> int:
        return len(self.slots)

    def submit(self, make_cmd, job: Job):
        slot = self.free.pop(0)
        name, device, threads = self.slots[slot]
        cmd = make_cmd(job, device, threads)

        def work():
            try:
                return run_segment_process(cmd) + (name,)
            finally:
                self.free.append(slot)

        return self.pool.submit(work)

    def has_free(self) -> bool:
        return bool(self.free)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class RayExecutor:
    """Ray tasks, one per segment: `num_gpus=1` each (Ray sets CUDA_VISIBLE_DEVICES, the run uses
    device 0 of what it sees) or `num_cpus=threads`. Ray retries a task whose worker died
    (`max_retries`); the driver retries a run that failed."""

    def __init__(self, address: str | None, gpu: bool | None, threads: int, retries: int, ship_binary: Path | None):
        try:
            import ray
        except ImportError as e:
            raise DriverError("--executor ray needs Ray: bash scripts/install-cluster.sh (pip into .cache/cluster-py), or pip install 'ray==2.52.1'") from e
        self.ray = ray
        runtime_env = {"working_dir": str(ship_binary)} if ship_binary else None
        kwargs = {"address": address} if address else {"num_cpus": os.cpu_count(), "include_dashboard": False}
        ray.init(runtime_env=runtime_env, log_to_driver=False, configure_logging=False, **kwargs)
        res = ray.cluster_resources()
        if gpu is None:  # --gpus auto: GPU workers where the cluster has GPUs
            gpu = res.get("GPU", 0) >= 1
        self.gpu = gpu
        if gpu and res.get("GPU", 0) < 1:
            raise DriverError("the Ray cluster has no GPU (pass --gpus none for CPU workers)")
        self.threads = threads
        per = {"num_gpus": 1, "num_cpus": 1} if gpu else {"num_cpus": threads}

        @ray.remote(max_retries=retries, **per)
        def segment_task(cmd: list[str], shipped: bool):
            import socket

            if shipped:
                # The binary travelled in the task's working directory (runtime_env), whose
                # packaging drops the execute bit.
                exe = os.path.abspath(cmd[0])
                os.chmod(exe, 0o755)
                cmd = [exe] + cmd[1:]
            code, err, secs = run_segment_process(cmd)
            return code, err, secs, socket.gethostname()

        self.task = segment_task
        self.shipped = ship_binary is not None
        slots = int(res.get("GPU", 0)) if gpu else max(1, int(res.get("CPU", 1)) // threads)
        self._workers = max(1, slots)
        self.in_flight = 0
        self.describe = f"ray ({address or 'local instance'}), {self._workers} worker slot(s) of {'1 GPU' if gpu else f'{threads} CPU'}"

    @property
    def workers(self) -> int:
        return self._workers

    def has_free(self) -> bool:
        # Ray queues tasks itself; a little more than one per slot keeps every worker busy.
        return self.in_flight < self._workers + 1

    def submit(self, make_cmd, job: Job):
        from concurrent.futures import Future

        cmd = make_cmd(job, "0" if self.gpu else None, None if self.gpu else self.threads)
        ref = self.task.remote(cmd, self.shipped)
        fut: Future = Future()
        self.in_flight += 1

        def waiter():
            try:
                fut.set_result(tuple(self.ray.get(ref)))
            except Exception as e:  # a task that Ray could not complete after its retries
                fut.set_result((-1, f"ray: {type(e).__name__}: {e}", 0.0, "?"))
            finally:
                self.in_flight -= 1

        threading.Thread(target=waiter, daemon=True).start()
        return fut

    def shutdown(self) -> None:
        self.ray.shutdown()


# ---- joining -----------------------------------------------------------------------------------


class Y4mJoiner:
    """Appends verified y4m segments to the output's temporary file in plan order as they arrive,
    on a thread of its own, so that joining overlaps the segments still running: the first
    segment's header, then every segment's frames (all headers must be the same)."""

    def __init__(self, out_tmp: Path, count: int):
        self.out_tmp, self.count = out_tmp, count
        self.ready: dict[int, Path] = {}
        self.cond = threading.Condition()
        self.error: Exception | None = None
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._run, name="y4m-joiner", daemon=True)
        self.thread.start()

    def add(self, index: int, path: Path) -> None:
        with self.cond:
            self.ready[index] = path
            self.cond.notify()

    def _run(self) -> None:
        first = None
        try:
            with open(self.out_tmp, "wb") as out:
                for i in range(self.count):
                    with self.cond:
                        while i not in self.ready:
                            self.cond.wait()
                        path = self.ready.pop(i)
                    t0 = time.monotonic()
                    with open(path, "rb") as f:
                        header = f.readline()
                        if first is None:
                            first = header
                            out.write(header)
                        elif header != first:
                            raise DriverError(f"'{path.name}': header {header!r} differs from the first segment's {first!r}")
                        shutil.copyfileobj(f, out, 1 << 22)
                    self.seconds += time.monotonic() - t0
        except Exception as e:  # reported by finish()
            self.error = e

    def finish(self) -> float:
        """Waits for every segment to be appended; the seconds spent copying."""
        self.thread.join()
        if self.error is not None:
            raise self.error if isinstance(self.error, DriverError) else DriverError(f"joining the segments: {self.error}")
        return self.seconds


def join_media(parts: list[Path], source: Path, out_tmp: Path, container: str, audio: bool) -> str:
    """Concatenates the segments' H.264 streams (no re-encode) and muxes the source's audio (and,
    in Matroska, its subtitles) once. Returns what became of the audio."""
    if shutil.which("ffmpeg") is None:
        raise DriverError("ffmpeg (Debian package ffmpeg) is needed to join encoded segments")
    listing = out_tmp.parent / "concat.txt"
    listing.write_text("".join(f"file '{p.resolve()}'\n" for p in parts))
    fmt = "mp4" if container == "mp4" else "matroska"
    base = ["ffmpeg", "-nostdin", "-y", "-v", "error", "-f", "concat", "-safe", "0", "-i", str(listing)]
    attempts = []
    if audio:
        extra = ["-map", "1:s?"] if container == "mkv" else []
        attempts.append(("copied from the source", [*base, "-i", str(source), "-map", "0:v:0", "-map", "1:a:0?", *extra, "-c", "copy"]))
        enc = ["-c:a", "aac", "-b:a", "128k"] if container == "mp4" else ["-c:a", "libopus", "-b:a", "128k"]
        attempts.append(("re-encoded (the source's codec does not fit the container)", [*base, "-i", str(source), "-map", "0:v:0", "-map", "1:a:0?", "-c:v", "copy", *enc]))
    else:
        attempts.append(("none", [*base, "-map", "0:v:0", "-c", "copy"]))
    errors = []
    for what, cmd in attempts:
        r = subprocess.run([*cmd, "-f", fmt, str(out_tmp)], capture_output=True, text=True)
        if r.returncode == 0:
            listing.unlink(missing_ok=True)
            return what
        errors.append(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}")
    raise DriverError(f"joining the segments failed: {'; '.join(errors)}")


def source_has_audio(path: Path) -> bool:
    if shutil.which("ffprobe") is None:
        r = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-i", str(path)], capture_output=True, text=True)
        return re.search(r"Stream #\S+.*: Audio:", r.stderr) is not None
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "stream=index", "-of", "csv=p=0", str(path)], capture_output=True, text=True)
    return r.returncode == 0 and bool(r.stdout.strip())


# ---- noise level -------------------------------------------------------------------------------

NOISE_LINE = re.compile(r"noise sigma \(estimated, 8-bit units\): (?:first .*?; last )?(?:luma )?([0-9.]+)(?:, chroma ([0-9.]+))?")


def estimate_sigma(binary: str, input_path: Path, nlm_args: list[str], frames: int) -> tuple[float, float | None]:
    """The noise estimate of nlmdenoise itself over the input's first `frames` frames, fixed
    for every segment (an estimate that moves along the stream would differ per segment)."""
    # The estimate does not depend on the algorithm: the cheapest denoising serves.
    cmd = [binary, "-i", str(input_path), "--frames", str(frames), "--sigma", "auto", "--algorithm", "nlm", "--temporal-past", "0", "--temporal-future", "0", "--search-radius", "1", "--patch-radius", "1"]
    backend = option_values(nlm_args).get("--backend")
    if backend:
        cmd += ["--backend", backend]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    m = NOISE_LINE.search(r.stderr)
    if r.returncode != 0 or not m:
        raise DriverError(f"estimating the noise level failed (give --sigma after --): {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return float(m.group(1)), (float(m.group(2)) if m.group(2) else None)


# ---- the driver --------------------------------------------------------------------------------


def fmt_time(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def detect_gpus() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return [str(i) for i, line in enumerate(r.stdout.splitlines()) if line.startswith("GPU ")] if r.returncode == 0 else []


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        argv, nlm_args = argv[:cut], argv[cut + 1 :]
    else:
        nlm_args = []
    p = argparse.ArgumentParser(
        prog="scripts/cluster",
        description="Denoise INPUT into OUTPUT in segments spread over GPUs or CPU workers, of this machine (local) or of a Ray cluster; "
        "options after -- go to every nlmdenoise segment run (docs/cluster.md).",
    )
    p.add_argument("input")
    p.add_argument("output", help=".y4m, .mp4 or .mkv (H.264, the source's audio muxed once)")
    p.add_argument("--executor", choices=["local", "ray"], default="local", help="local: worker processes on this machine; ray: Ray tasks (default: local)")
    p.add_argument("--address", help="Ray cluster address (ray start --head prints it; default: a Ray instance of this process)")
    p.add_argument("--gpus", default="auto", help="GPU workers: a list of device numbers (local), 'auto' (every GPU nvidia-smi lists, or Ray's), or 'none' for CPU workers")
    p.add_argument("--cpu-workers", type=int, default=0, help="CPU workers (local, --gpus none; default: one per 4 cores, at least 1)")
    p.add_argument("--threads", type=int, default=0, help="threads per CPU worker (default: the cores shared out)")
    p.add_argument("--segments", type=int, default=0, help="segments to cut the input into (default: one per worker, more for long inputs: at most 3000 frames each)")
    p.add_argument("--retries", type=int, default=2, help="times a failed segment is run again (default 2)")
    p.add_argument("--work-dir", help="folder for the manifest and the segments (default: OUTPUT.parts; on a filesystem every worker sees)")
    p.add_argument("--binary", default=str(ROOT / "target" / "release" / "nlmdenoise"), help="the nlmdenoise binary the workers run (default: target/release/nlmdenoise)")
    p.add_argument("--ship-binary", action="store_true", help="ray: send the binary to the workers in the task's runtime environment (working_dir) instead of running it from a path they share")
    p.add_argument("--noise-frames", type=int, default=50, help="frames the noise estimate reads when no --sigma or --strength is given (default 50)")
    p.add_argument("--keep-parts", action="store_true", help="keep the working folder after a successful join")
    p.add_argument(
        "--join",
        choices=["in-place", "copy"],
        help="y4m output: in-place (every segment run writes its frames at their places in one file, renamed to OUTPUT at the end: no copy) "
        "or copy (a file per segment, appended to OUTPUT in order). Default: in-place with local workers when the input's frame lines carry no "
        "parameters, copy otherwise (Ray workers may not share the file)",
    )
    p.add_argument("-y", "--overwrite", action="store_true", help="overwrite OUTPUT")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p.parse_args(argv), nlm_args


def main(argv: list[str] | None = None) -> int:
    args, nlm_args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return drive(args, nlm_args)
    except DriverError as e:
        print(f"scripts/cluster: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scripts/cluster: interrupted; rerun the same command to resume (verified segments are kept)", file=sys.stderr)
        return 130


def drive(args: argparse.Namespace, nlm_args: list[str]) -> int:
    def say(msg: str) -> None:
        if not args.quiet:
            print(f"scripts/cluster: {msg}", file=sys.stderr, flush=True)

    t_start = time.monotonic()
    input_path = Path(args.input)
    output = Path(args.output)
    container = output.suffix.lower().lstrip(".")
    if container not in ("y4m", "mp4", "mkv"):
        raise DriverError(f"cannot tell the output format from '{output}': name it .y4m, .mp4 or .mkv")
    if output.exists() and not args.overwrite:
        raise DriverError(f"the output '{output}' exists; pass -y to overwrite it")
    binary = shutil.which(args.binary) or args.binary
    if not os.access(binary, os.X_OK):
        raise DriverError(f"no nlmdenoise binary at '{binary}' (cargo build --release, or --binary PATH)")
    opts = option_values(nlm_args)
    probe = probe_input(input_path)
    media_out = container != "y4m"

    # A fixed noise level for every segment (see estimate_sigma).
    if not any(k in opts for k in ("--sigma", "--strength", "--chroma-strength")) and "--scale" not in opts:
        luma, chroma = estimate_sigma(binary, input_path, nlm_args, min(args.noise_frames, probe.frames))
        nlm_args = [*nlm_args, "--sigma", f"{luma:.3f}"]
        if chroma is not None and opts.get("--algorithm") == "bm3d" and "--chroma-sigma" not in opts:
            nlm_args += ["--chroma-sigma", f"{chroma:.3f}"]
        say(f"noise sigma estimated over the first {min(args.noise_frames, probe.frames)} frames: luma {luma:.2f}" + (f", chroma {chroma:.2f}" if chroma else "") + " (fixed for every segment)")
    elif opts.get("--sigma") == "auto":
        raise DriverError("--sigma auto would estimate per segment and differ from one run; give a value, or leave --sigma out for one estimate")

    # Workers.
    cpu_only = opts.get("--backend") == "cpu" or args.gpus == "none"
    cores = os.cpu_count() or 1
    if args.executor == "ray":
        gpu = False if cpu_only else (None if args.gpus == "auto" else True)
        threads = args.threads or max(1, cores // max(1, args.cpu_workers or 1))
        executor: LocalExecutor | RayExecutor = RayExecutor(args.address, gpu, threads, args.retries, Path(binary).parent if args.ship_binary else None)
        if args.ship_binary:
            binary = "./" + Path(binary).name
        use_gpus = executor.gpu
    else:
        gpu_list = [] if cpu_only else (detect_gpus() if args.gpus == "auto" else [g.strip() for g in args.gpus.split(",") if g.strip()])
        workers = args.cpu_workers or max(1, cores // 4)
        threads = args.threads or max(1, cores // workers)
        executor = LocalExecutor(gpu_list, workers, threads)
        use_gpus = bool(gpu_list)
    if not use_gpus and "--backend" not in opts:
        nlm_args = [*nlm_args, "--backend", "cpu"]

    # y4m output assembled in place (no copy at the join) where every frame's offset is known.
    in_place = False
    if not media_out:
        plain = probe.y4m is not None and probe.y4m.plain
        if args.join == "in-place" and not plain:
            raise DriverError("--join in-place needs a y4m input whose frame lines carry no parameters")
        in_place = plain and (args.join == "in-place" or (args.join is None and args.executor == "local"))

    # One segment per worker (each process start costs CUDA initialisation and a kernel load),
    # more for long inputs so that a retry redoes at most 3000 frames.
    segments = args.segments or min(probe.frames, max(executor.workers, -(-probe.frames // 3000)))
    plan = plan_segments(probe.frames, segments)

    # The working folder and its manifest.
    work = Path(args.work_dir) if args.work_dir else output.with_name(output.name + ".parts")
    work.mkdir(parents=True, exist_ok=True)
    key = run_key(input_path, container + (" in place" if in_place else ""), nlm_args, plan)
    mpath = work / "manifest.json"
    data = None
    if mpath.exists():
        try:
            data = json.loads(mpath.read_text())
        except (OSError, ValueError):
            data = None
        if data is not None and (data.get("version") != MANIFEST_VERSION or data.get("key") != key):
            raise DriverError(f"'{work}' holds the parts of another run (other input, options or plan); remove it or pass --work-dir")
    if data is None:
        data = {"version": MANIFEST_VERSION, "key": key, "input": str(input_path.resolve()), "output": str(output.resolve()), "nlmdenoise": nlm_args, "frames": probe.frames, "segments": [{"start": s, "end": e, "done": False} for s, e in plan]}
        write_json_atomic(mpath, data)
    manifest = Manifest(mpath, data)
    # The output assembled in place: in the working folder when it shares the output's
    # filesystem (the final rename needs it), else beside the output.
    out_dir = output.resolve().parent
    if not out_dir.is_dir():
        raise DriverError(f"the output's folder '{out_dir}' does not exist")
    same_fs = work.resolve().stat().st_dev == out_dir.stat().st_dev
    assembly = work / "output.y4m" if same_fs else output.with_name(f".{output.name}.assembling")
    if in_place and not any(seg.get("done") for seg in data["segments"]):
        assembly.unlink(missing_ok=True)

    # What earlier runs left: verified segments are kept (checked again), the rest redone.
    ext = container
    todo = []
    for i, (s, e) in enumerate(plan):
        seg = manifest.segment(i)
        final = work / f"seg-{i:04d}.{ext}"
        if seg.get("done"):
            try:
                if in_place:
                    verify_in_place(assembly, s, e)
                else:
                    verify_segment(final, e - s, media_out)
                continue
            except DriverError as err:
                say(f"segment {i} ({s}:{e}) is redone: {err}")
                seg["done"] = False
        todo.append(i)
    for stale in work.glob("*.part.*"):
        stale.unlink(missing_ok=True)
    kept = len(plan) - len(todo)
    say(f"{input_path.name}: {probe.frames} frames in {len(plan)} segments ({kept} already done), {executor.describe}")
    # y4m output: joined as the segments come (a rerun joins again from the first).
    out_tmp = output.with_name(f".{output.name}.joining{os.getpid()}")
    TEMPORARIES.append(out_tmp)
    # What a killed driver left half-joined (its process is gone).
    for stale in output.parent.glob(f".{output.name}.joining*"):
        pid = stale.name.rsplit("joining", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.unlink(missing_ok=True)
    joiner = Y4mJoiner(out_tmp, len(plan)) if not media_out and not in_place else None
    if joiner is not None:
        for i in range(len(plan)):
            if i not in todo:
                joiner.add(i, work / manifest.segment(i)["file"])
    t_plan = time.monotonic() - t_start

    # Run.
    frames_todo = sum(plan[i][1] - plan[i][0] for i in todo)
    frames_done = 0
    t_run = time.monotonic()
    attempts = {i: 0 for i in todo}
    queue = list(todo)
    running: dict = {}

    def part_of(job: Job) -> Path:
        return assembly if in_place else work / f"seg-{job.index:04d}.a{job.attempt}.part.{ext}"

    def make_cmd(job: Job, device, threads):
        return segment_command(binary, str(input_path.resolve()), str(part_of(job).resolve()), job.segment, nlm_args, device, threads, in_place)

    failures = []
    try:
        while queue or running:
            while queue and executor.has_free():
                i = queue.pop(0)
                attempts[i] += 1
                job = Job(i, plan[i], attempts[i])
                running[executor.submit(make_cmd, job)] = job
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                job = running.pop(fut)
                code, err, secs, worker = fut.result()
                part = part_of(job)
                final = work / f"seg-{job.index:04d}.{ext}"
                s, e = job.segment
                problem = None
                if code != 0:
                    last = err.splitlines()[-1] if err else ""
                    problem = f"exit status {code}" + (f": {last}" if last else "")
                else:
                    try:
                        if in_place:
                            verify_in_place(assembly, s, e)
                        else:
                            verify_segment(part, e - s, media_out)
                    except DriverError as v:
                        problem = str(v)
                if problem is None:
                    if not in_place:
                        os.replace(part, final)
                    manifest.mark_done(job.index, assembly.name if in_place else final.name, e - s, secs, worker)
                    if joiner is not None:
                        joiner.add(job.index, final)
                    frames_done += e - s
                    elapsed = time.monotonic() - t_run
                    fps = frames_done / max(elapsed, 1e-9)
                    left = (frames_todo - frames_done) / fps if fps > 0 else 0
                    n_done = sum(1 for x in manifest.data["segments"] if x.get("done"))
                    say(f"segment {job.index} ({s}:{e}) done on {worker} in {secs:.1f} s; {n_done}/{len(plan)} segments, {frames_done}/{frames_todo} frames, {fps:.1f} frames/s, ETA {fmt_time(left)}")
                    continue
                if not in_place:  # in place, the retry writes the same range over
                    part.unlink(missing_ok=True)
                if job.attempt <= args.retries:
                    say(f"segment {job.index} ({s}:{e}) failed on {worker} ({problem}); retrying ({job.attempt}/{args.retries})")
                    queue.insert(0, job.index)
                else:
                    failures.append(f"segment {job.index} ({s}:{e}): {problem}")
                    # A segment that fails every attempt fails the run: stop starting others.
                    queue.clear()
    finally:
        executor.shutdown()
    t_segments = time.monotonic() - t_run
    if failures:
        out_tmp.unlink(missing_ok=True)  # the joiner thread, waiting for a segment, ends with the process
        raise DriverError(f"{'; '.join(failures)}; after {args.retries} retries. The verified segments are kept in '{work}': rerun to resume")

    # Join into a temporary name beside the output, check it, then rename.
    parts = [work / manifest.segment(i)["file"] for i in range(len(plan))]
    t_join = time.monotonic()
    try:
        if in_place:
            audio_note = "none (y4m)"
            copy_s = 0.0
            y = read_y4m(assembly)
            n = y.frames if y.complete else -1
        elif joiner is None:
            audio = source_has_audio(input_path)
            audio_note = join_media(parts, input_path, out_tmp, container, audio)
            n = ffprobe_video_frames(out_tmp, decode=True)
            copy_s = time.monotonic() - t_join
        else:
            audio_note = "none (y4m)"
            copy_s = joiner.finish()
            y = read_y4m(out_tmp)
            n = y.frames if y.complete else -1
        if n != probe.frames:
            raise DriverError(f"the joined output has {n} frames, {probe.frames} expected; nothing was written to '{output}'")
        os.replace(assembly if in_place else out_tmp, output)
    finally:
        out_tmp.unlink(missing_ok=True)
    join_s = time.monotonic() - t_join
    if not args.keep_parts:
        shutil.rmtree(work, ignore_errors=True)
    total = time.monotonic() - t_start
    say(
        f"{output}: {probe.frames} frames in {total:.1f} s ({probe.frames / max(total, 1e-9):.1f} frames/s overall): planning {t_plan:.1f} s, "
        f"segments {t_segments:.1f} s, joining {copy_s:.1f} s ({'in place: no copy' if in_place else 'overlapped with the segments' if joiner is not None else 'after them'}) + {join_s:.1f} s at the end; audio: {audio_note}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
