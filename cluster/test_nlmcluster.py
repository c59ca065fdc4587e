"""Tests of the segment-parallel driver (cluster/nlmcluster.py) against the single-process CLI.

    python3 -m unittest discover -s cluster -p 'test_*.py'     (scripts/test.sh runs them)

Needs target/release/nlmdenoise and ffmpeg; the Ray tests need Ray (bash scripts/install-cluster.sh)
and are reported as skipped without it (scripts/test.sh installs it, so CI runs them).
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "nlmdenoise"
DRIVER = ROOT / "scripts" / "cluster"
SITE = ROOT / ".cache" / "cluster-py"
sys.path.insert(0, str(ROOT / "cluster"))
import nlmcluster  # noqa: E402


def have_ray() -> bool:
    env = dict(os.environ, PYTHONPATH=str(SITE))
    return subprocess.run([sys.executable, "-c", "import ray"], env=env, capture_output=True).returncode == 0


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def cli(*args: str) -> None:
    subprocess.run([str(BINARY), "-q", "-y", *args], check=True)


def driver(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"driver failed ({p.returncode}): {p.stderr}")
    return p


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def decoded_md5(path: Path) -> str:
    """MD5 of the decoded video frames (raw I420)."""
    out = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"], capture_output=True, check=True).stdout
    return hashlib.md5(out).hexdigest()


def frame_times(path: Path, stream: str) -> list[str]:
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-of", "csv=p=0", str(path)], capture_output=True, text=True, check=True).stdout
    return sorted((line.strip().rstrip(",") for line in out.splitlines() if line.strip()), key=float)


class Fixture(unittest.TestCase):
    tmp: Path

    @classmethod
    def setUpClass(cls):
        if not BINARY.exists():
            raise unittest.SkipTest(f"{BINARY} not built (cargo build --release -p nlmdenoise-cli)")
        cls._dir = tempfile.TemporaryDirectory(prefix="nlmcluster-test-")
        cls.tmp = Path(cls._dir.name)
        # A small noisy clip with motion: 96x64, 21 frames.
        ffmpeg("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25,noise=alls=18:allf=t", "-frames:v", "21", "-pix_fmt", "yuv420p", str(cls.tmp / "in.y4m"))

    def single_run(self, src: Path, name: str, opts: list[str]) -> Path:
        """The plain CLI's output for `src` with `opts` (CPU backend): the reference of a joined one."""
        single = self.tmp / f"{name}.y4m"
        cli(str(src), str(single), "--backend", "cpu", *opts)
        return single

    @classmethod
    def tearDownClass(cls):
        cls._dir.cleanup()


class PlanAndOptions(unittest.TestCase):
    def test_plan_is_balanced_and_covers_every_frame_once(self):
        for frames, n in [(21, 1), (21, 3), (21, 7), (1000, 7), (5, 5)]:
            plan = nlmcluster.plan_segments(frames, n)
            self.assertEqual(len(plan), n)
            self.assertEqual(plan[0][0], 0)
            self.assertEqual(plan[-1][1], frames)
            for (a, b), (c, _) in zip(plan, plan[1:]):
                self.assertEqual(b, c)
            lengths = [e - s for s, e in plan]
            self.assertLessEqual(max(lengths) - min(lengths), 1)

    def test_a_plan_that_does_not_fit_is_refused(self):
        with self.assertRaisesRegex(nlmcluster.DriverError, "do not fit"):
            nlmcluster.plan_segments(4, 5)

    def test_options_the_driver_sets_are_refused(self):
        with self.assertRaisesRegex(nlmcluster.DriverError, "--frames"):
            nlmcluster.option_values(["--frames", "3"])
        self.assertEqual(nlmcluster.option_values(["--sigma=4", "--no-audio", "--algorithm", "bm3d"]), {"--sigma": "4", "--no-audio": "", "--algorithm": "bm3d"})


class Y4mIdentity(Fixture):
    """Joined y4m output byte-identical to one CLI run, for NLM and BM3D, past and future
    windows, 1, 3 and 7 segments."""

    CASES = {
        "nlm-offline": ["--sigma", "12", "--temporal-past", "2", "--temporal-future", "2"],
        "nlm-live": ["--sigma", "12", "--temporal-past", "3", "--temporal-future", "0"],
        "bm3d-normal-1+1": ["--sigma", "12", "--algorithm", "bm3d", "--temporal-past", "1", "--temporal-future", "1"],
        "bm3d-high-2+2": ["--sigma", "12", "--algorithm", "bm3d", "--bm3d-profile", "high", "--temporal-past", "2", "--temporal-future", "2"],
    }

    def test_joined_output_equals_a_single_run(self):
        src = self.tmp / "in.y4m"
        for name, opts in self.CASES.items():
            single = self.tmp / f"single-{name}.y4m"
            cli(str(src), str(single), "--backend", "cpu", *opts)
            for n, join in ((1, "in-place"), (3, "in-place"), (7, "in-place"), (3, "copy")):
                with self.subTest(case=name, segments=n, join=join):
                    out = self.tmp / f"joined-{name}-{n}-{join}.y4m"
                    p = driver(str(src), str(out), "--segments", str(n), "--cpu-workers", "2", "--join", join, "--", *opts)
                    self.assertEqual(md5(out), md5(single))
                    self.assertIn("(in place: no copy)" if join == "in-place" else "(overlapped with the segments)", p.stderr)
                    self.assertFalse((self.tmp / f"{out.name}.parts").exists(), "the working folder is removed after a join")

    def test_in_place_is_the_default_and_frame_parameters_fall_back_to_copying(self):
        src = self.tmp / "in.y4m"
        opts = ["--sigma", "12", "--temporal-past", "1", "--temporal-future", "1"]
        single = self.single_run(src, "default-join", opts)
        out = self.tmp / "default-join-out.y4m"
        p = driver(str(src), str(out), "--segments", "3", "--", *opts)
        self.assertIn("(in place: no copy)", p.stderr)
        self.assertEqual(md5(out), md5(single))
        # Frame lines with parameters: offsets differ per frame, so the segments are copied.
        tagged = self.tmp / "tagged.y4m"
        tagged.write_bytes(src.read_bytes().replace(b"FRAME\n", b"FRAME Ixyz\n"))
        single = self.single_run(tagged, "tagged-single", opts)
        out = self.tmp / "tagged-out.y4m"
        p = driver(str(tagged), str(out), "--segments", "3", "--", *opts)
        self.assertIn("(overlapped with the segments)", p.stderr)
        self.assertEqual(md5(out), md5(single))
        p = driver(str(tagged), str(self.tmp / "tagged-2.y4m"), "--join", "in-place", "--", *opts, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("--join in-place needs a y4m input whose frame lines carry no parameters", p.stderr)
        # The CLI itself refuses such frames in place, and leaves the file it writes into alone.
        target = self.tmp / "tagged-target.y4m"
        target.write_bytes(b"keep")
        r = subprocess.run([str(BINARY), "-q", str(tagged), str(target), "--segment", "0:3", "--segment-in-place", "--backend", "cpu", *opts], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--segment-in-place needs plain FRAME lines", r.stderr)
        self.assertTrue(target.exists(), "a failed in-place run never removes the shared file")

    def test_the_noise_estimate_is_made_once_and_shared(self):
        src = self.tmp / "in.y4m"
        out = self.tmp / "auto.y4m"
        p = driver(str(src), str(out), "--segments", "3")
        self.assertRegex(p.stderr, r"noise sigma estimated over the first 21 frames: luma [0-9.]+")
        sigma = float(__import__("re").search(r"luma ([0-9.]+)", p.stderr).group(1))
        single = self.tmp / "auto-single.y4m"
        cli(str(src), str(single), "--backend", "cpu", "--sigma", f"{sigma:.3f}")
        self.assertEqual(md5(out), md5(single))


class Recovery(Fixture):
    def wrapper(self, body: str) -> Path:
        w = self.tmp / f"wrap-{time.monotonic_ns()}.sh"
        w.write_text(f"#!/bin/sh\nREAL='{BINARY}'\n{body}\nexec \"$REAL\" \"$@\"\n")
        w.chmod(0o755)
        return w

    def test_a_worker_killed_mid_segment_is_retried_and_the_output_is_unchanged(self):
        src = self.tmp / "in.y4m"
        opts = ["--sigma", "12", "--temporal-past", "2", "--temporal-future", "1"]
        single = self.single_run(src, "kill-single", opts)
        record = 6 + 96 * 64 * 3 // 2
        header = src.read_bytes().index(b"\n") + 1
        for join in ("copy", "in-place"):
            with self.subTest(join=join):
                mark = self.tmp / f"killed-once-{join}"
                # The first run of segment 7:14 writes part of its frames (-o is the 4th argument:
                # its own file, or in place the shared one, where frames 7.. start), then dies by
                # SIGKILL.
                write = f'head -c 5000 {src} > "$4"' if join == "copy" else f'head -c 5000 /dev/urandom | dd of="$4" bs=1 seek={header + 7 * record} conv=notrunc status=none'
                w = self.wrapper(f'case "$*" in *"--segment 7:14"*) if [ ! -e {mark} ]; then touch {mark}; {write}; kill -9 $$; fi;; esac')
                out = self.tmp / f"kill-{join}.y4m"
                p = driver(str(src), str(out), "--segments", "3", "--cpu-workers", "1", "--join", join, "--binary", str(w), "--", *opts)
                self.assertTrue(mark.exists())
                self.assertRegex(p.stderr, r"segment 1 \(7:14\) failed on cpu\d \(exit status -9\); retrying \(1/2\)")
                self.assertEqual(md5(out), md5(single))

    def test_a_killed_driver_resumes_with_its_verified_segments_and_the_same_output(self):
        src = self.tmp / "in.y4m"
        opts = ["--sigma", "12", "--algorithm", "bm3d", "--temporal-past", "1", "--temporal-future", "1"]
        single = self.single_run(src, "resume-single", opts)
        for join in ("copy", "in-place"):
            with self.subTest(join=join):
                out = self.tmp / f"resume-{join}.y4m"
                work = self.tmp / f"{out.name}.parts"
                # Segment 2 of 3 hangs (writing nothing) until the driver is killed.
                hang = self.wrapper('case "$*" in *"--segment 14:21"*) "$REAL" "$@" --frames 1 >/dev/null 2>&1; exec sleep 60;; esac')
                args = [sys.executable, str(DRIVER), str(src), str(out), "--segments", "3", "--cpu-workers", "1", "--join", join, "--binary", str(hang), "--", *opts]
                d = subprocess.Popen(args, stderr=subprocess.DEVNULL)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    m = work / "manifest.json"
                    if m.exists() and sum(s.get("done", False) for s in json.loads(m.read_text())["segments"]) == 2:
                        break
                    time.sleep(0.1)
                time.sleep(0.3)
                d.send_signal(signal.SIGKILL)
                d.wait()
                self.assertFalse(out.exists(), "no output from a killed driver")
                done = [s.get("done", False) for s in json.loads((work / "manifest.json").read_text())["segments"]]
                self.assertEqual(done, [True, True, False])
                if join == "in-place":
                    # A done segment's frames damaged in the shared file since: found, redone.
                    with open(work / "output.y4m", "r+b") as f:
                        f.seek(src.read_bytes().index(b"FRAME"))
                        f.write(b"XXXXX")
                p = driver(str(src), str(out), "--segments", "3", "--cpu-workers", "1", "--join", join, "--", *opts)
                self.assertIn("(2 already done)" if join == "copy" else "(1 already done)", p.stderr)
                if join == "in-place":
                    self.assertIn("segment 0 (0:7) is redone: 'output.y4m': frame 0 is missing", p.stderr)
                self.assertEqual(md5(out), md5(single))
                self.assertEqual(list(self.tmp.glob(f".{out.name}.joining*")), [], "the killed driver's half-joined file is removed")
                self.assertFalse(work.exists())

    def test_a_partial_segment_file_is_never_used(self):
        src = self.tmp / "in.y4m"
        opts = ["--sigma", "12"]
        out = self.tmp / "partial.y4m"
        single = self.single_run(src, "partial-single", opts)
        # A segment marked done whose file lost its end: verified again, found short, redone.
        driver(str(src), str(out), "--segments", "3", "--keep-parts", "--join", "copy", "--", *opts)
        seg = self.tmp / "partial.y4m.parts" / "seg-0001.y4m"
        seg.write_bytes(seg.read_bytes()[:-100])
        out.unlink()
        p = driver(str(src), str(out), "--segments", "3", "--join", "copy", "--", *opts)
        self.assertIn("segment 1 (7:14) is redone", p.stderr)
        self.assertEqual(md5(out), md5(single))


class BadInput(Fixture):
    def test_clear_errors_and_no_output(self):
        src = self.tmp / "in.y4m"
        cut = self.tmp / "cut.y4m"
        cut.write_bytes(src.read_bytes()[:20000])
        audio_only = self.tmp / "audio.mka"
        ffmpeg("-f", "lavfi", "-i", "sine=f=440:sample_rate=48000", "-t", "1", "-c:a", "libopus", str(audio_only))
        damaged = self.tmp / "damaged.mp4"
        damaged.write_bytes(b"\x00\x00\x00\x18ftypisom" + os.urandom(4000))
        cases = [
            ([str(cut), "x1.y4m"], "damaged or truncated after frame"),
            ([str(src), "x2.y4m", "--segments", "50"], "50 segments do not fit an input of 21 frames"),
            ([str(audio_only), "x3.mkv"], "no video"),
            ([str(damaged), "x4.mp4"], "cannot count its video frames"),
            ([str(src), "x5.y4m", "--", "--frames", "3"], "set by the driver"),
            ([str(src), "x6.avi"], "name it .y4m, .mp4 or .mkv"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                args = [a if not a.startswith("x") else str(self.tmp / a) for a in args]
                p = driver(*args, check=False)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(message, p.stderr)
                self.assertFalse(Path(args[1]).exists())
        # An output in a folder that does not exist, the working folder elsewhere: an error, not a traceback.
        p = driver(str(src), str(self.tmp / "no-such-folder" / "x7.y4m"), "--work-dir", str(self.tmp / "wd7"), "--", "--sigma", "9", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("the output's folder", p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_a_segment_that_fails_every_attempt_fails_the_run_and_keeps_the_good_ones(self):
        src = self.tmp / "in.y4m"
        w = self.tmp / "fail.sh"
        w.write_text(f'#!/bin/sh\ncase "$*" in *"--segment 10:21"*) echo "nlmdenoise: error: simulated" >&2; exit 1;; esac\nexec {BINARY} "$@"\n')
        w.chmod(0o755)
        out = self.tmp / "fails.y4m"
        p = driver(str(src), str(out), "--segments", "2", "--retries", "1", "--join", "copy", "--binary", str(w), "--", "--sigma", "9", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("segment 1 (10:21): exit status 1: nlmdenoise: error: simulated; after 1 retries", p.stderr)
        self.assertFalse(out.exists())
        self.assertTrue((self.tmp / "fails.y4m.parts" / "seg-0000.y4m").exists())


class Mp4(Fixture):
    def test_joined_mp4_plays_with_every_frame_once_the_source_timestamps_and_audio(self):
        src = self.tmp / "src.mp4"
        ffmpeg("-f", "lavfi", "-i", "testsrc2=size=128x96:rate=25,noise=alls=15:allf=t", "-f", "lavfi", "-i", "sine=f=440:sample_rate=48000",
               "-t", "2", "-c:v", "libx264", "-g", "10", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(src))
        out = self.tmp / "joined.mp4"
        driver(str(src), str(out), "--segments", "3", "--keep-parts", "-q", "--", "--sigma", "10", "--temporal-past", "1", "--temporal-future", "1")
        self.assertEqual(nlmcluster.ffprobe_video_frames(out, decode=True), 50)
        self.assertEqual(frame_times(out, "v"), frame_times(src, "v"))
        self.assertEqual(frame_times(out, "a"), frame_times(src, "a"), "the source's audio, muxed once")
        # No re-encode at the join: the joined stream decodes to the segments' frames.
        parts = sorted((self.tmp / "joined.mp4.parts").glob("seg-*.mp4"))
        self.assertEqual(len(parts), 3)
        cat = b"".join(subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(p), "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"], capture_output=True, check=True).stdout for p in parts)
        self.assertEqual(decoded_md5(out), hashlib.md5(cat).hexdigest())

    def test_segments_of_a_decoded_input_are_frame_exact(self):
        # y4m out of an H.264 input: the join equals one run, so each segment run counted its frames right.
        src = self.tmp / "src2.mp4"
        ffmpeg("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25,noise=alls=15:allf=t", "-t", "1.2", "-c:v", "libx264", "-g", "7", "-bf", "2", "-pix_fmt", "yuv420p", str(src))
        opts = ["--sigma", "10", "--algorithm", "bm3d", "--temporal-past", "1", "--temporal-future", "1"]
        single = self.single_run(src, "src2-single", opts)
        out = self.tmp / "src2-joined.y4m"
        driver(str(src), str(out), "--segments", "4", "-q", "--", *opts)
        self.assertEqual(md5(out), md5(single))


class SegmentRuns(Fixture):
    """`nlmdenoise --segment` itself on decoded inputs: the seek to the keyframe before, and the
    fallback to decoding from the start where a seek cannot keep the frame numbers."""

    def join(self, src: Path, cuts: list[int], opts: list[str]) -> tuple[bytes, str]:
        data, logs = b"", ""
        for s, e in zip(cuts, cuts[1:]):
            part = self.tmp / "part.y4m"
            p = subprocess.run([str(BINARY), str(src), str(part), "-y", "-v", "--segment", f"{s}:{e}", *opts], capture_output=True, text=True, check=True)
            logs += p.stderr
            raw = part.read_bytes()
            data += raw if s == 0 else raw[raw.index(b"\n") + 1 :]
        return data, logs

    def test_a_segment_far_into_a_file_seeks_to_the_keyframe_before(self):
        src = self.tmp / "long.mp4"
        ffmpeg("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25,noise=alls=15:allf=t", "-f", "lavfi", "-i", "sine=f=440:sample_rate=48000",
               "-t", "12", "-c:v", "libx264", "-g", "40", "-bf", "2", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(src))
        opts = ["--sigma", "10", "--backend", "cpu", "--temporal-past", "2", "--temporal-future", "1"]
        single = self.tmp / "long-single.y4m"
        cli(str(src), str(single), *opts)
        data, logs = self.join(src, [0, 97, 205, 300], opts)
        whole = single.read_bytes()
        self.assertEqual(hashlib.md5(data).hexdigest(), hashlib.md5(whole).hexdigest())
        # Frames 95 and 203 (the contexts' first) are reached from the keyframes before them
        # (x264 adds some at scene cuts), not from frame 0.
        import re

        starts = {int(t): int(k) for k, t in re.findall(r"decoding from frame (\d+) \(sought towards frame (\d+)\)", logs)}
        self.assertEqual(sorted(starts), [95, 203])
        self.assertTrue(55 <= starts[95] <= 95 and 163 <= starts[203] <= 203, starts)

    def test_a_variable_rate_input_is_decoded_from_its_start_and_stays_frame_exact(self):
        src = self.tmp / "vfr.mkv"
        # Frame N at (N + 0.3 * (N mod 3)) / 25 s: most keyframes are off the 25 Hz grid.
        ffmpeg("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25,noise=alls=15:allf=t", "-frames:v", "80", "-vf", "settb=1/1000,setpts='(N+0.3*mod(N,3))/25/TB'",
               "-fps_mode", "vfr", "-enc_time_base", "1/1000", "-c:v", "libx264", "-g", "10", "-pix_fmt", "yuv420p", str(src))
        opts = ["--sigma", "10", "--backend", "cpu", "--temporal-past", "1", "--temporal-future", "1"]
        single = self.tmp / "vfr-single.y4m"
        cli(str(src), str(single), *opts)
        n = nlmcluster.ffprobe_video_frames(src, decode=False)
        self.assertEqual(n, 80)
        data, logs = self.join(src, [0, 21, 42, 58, n], opts)
        self.assertEqual(hashlib.md5(data).hexdigest(), md5(single))
        self.assertIn("landed at", logs)
        self.assertIn("decoding from the start instead", logs)


@unittest.skipUnless(have_ray(), "Ray not installed (bash scripts/install-cluster.sh)")
class OnRay(Fixture):
    def test_ray_cpu_workers_give_the_single_run_output(self):
        src = self.tmp / "in.y4m"
        opts = ["--sigma", "12", "--algorithm", "bm3d", "--temporal-past", "2", "--temporal-future", "1"]
        single = self.single_run(src, "ray-single", opts)
        out = self.tmp / "ray.y4m"
        p = driver(str(src), str(out), "--executor", "ray", "--gpus", "none", "--threads", "1", "--segments", "3", "--", *opts)
        self.assertIn("ray (local instance)", p.stderr)
        self.assertEqual(md5(out), md5(single))
        # The binary shipped in the tasks' runtime environment instead of a shared path.
        out2 = self.tmp / "ray-shipped.y4m"
        ship = self.tmp / "ship"
        ship.mkdir()
        (ship / "nlmdenoise").write_bytes(BINARY.read_bytes())
        (ship / "nlmdenoise").chmod(0o755)
        driver(str(src), str(out2), "--executor", "ray", "--gpus", "none", "--threads", "1", "--segments", "2", "--ship-binary", "--binary", str(ship / "nlmdenoise"), "--", *opts)
        self.assertEqual(md5(out2), md5(single))


if __name__ == "__main__":
    unittest.main()
