#!/usr/bin/env python3
"""Where the segment mode's time goes on several GPUs: process start-up alone and two at once,
a half of the input alone and both halves at once (one per GPU). Each command's wall time and
its last progress lines (--stats-period 0.5)."""
import subprocess, sys, time, threading

binary, src, frames, opts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]


def launch(seg, gpu, out):
    cmd = [binary, "-i", src, "-o", out, "-y", "--stats-period", "0.5", "--segment", seg, "--device-id", str(gpu), *opts]
    return cmd


def run_together(label, cmds):
    res = [None] * len(cmds)

    def go(i, c):
        t0 = time.monotonic()
        r = subprocess.run(c, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        res[i] = (time.monotonic() - t0, r.returncode, r.stderr.strip().splitlines()[-3:])

    ts = [threading.Thread(target=go, args=(i, c)) for i, c in enumerate(cmds)]
    t0 = time.monotonic()
    for t in ts: t.start()
    for t in ts: t.join()
    wall = time.monotonic() - t0
    print(f"## {label}: wall {wall:.2f} s")
    for i, (s, rc, tail) in enumerate(res):
        print(f"  [{i}] {s:.2f} s exit {rc}: " + " | ".join(x.strip()[-160:] for x in tail))
    sys.stdout.flush()


h = frames // 2
for rep in (1, 2):
    run_together(f"start-up, 1 frame, GPU 0 alone (rep {rep})", [launch("0:1", 0, "/dev/shm/p0.y4m")])
    run_together(f"start-up, 1 frame, GPU 0 and GPU 1 at once (rep {rep})", [launch("0:1", 0, "/dev/shm/p0.y4m"), launch("0:1", 1, "/dev/shm/p1.y4m")])
for rep in range(int(__import__("os").environ.get("REPS", "2"))):
    run_together(f"whole input, GPU 0 (rep {rep})", [launch(f"0:{frames}", 0, "/dev/shm/p0.y4m")])
    run_together(f"first half, GPU 0 alone (rep {rep})", [launch(f"0:{h}", 0, "/dev/shm/p0.y4m")])
    run_together(f"second half, GPU 1 alone (rep {rep})", [launch(f"{h}:{frames}", 1, "/dev/shm/p1.y4m")])
    run_together(f"both halves at once, GPU 0 and 1 (rep {rep})", [launch(f"0:{h}", 0, "/dev/shm/p0.y4m"), launch(f"{h}:{frames}", 1, "/dev/shm/p1.y4m")])
    run_together(f"both halves at once, both on GPU 0 (rep {rep})", [launch(f"0:{h}", 0, "/dev/shm/p0.y4m"), launch(f"{h}:{frames}", 0, "/dev/shm/p1.y4m")])
