#!/usr/bin/env python3
"""Where a segment run's time goes: each process's start-up (its start to the first frame's
clock, from the CLI's own "in X s"), its frames, and its exit after the summary line. The whole
input on GPU 0, then both halves at once on GPU 0 and GPU 1."""
import subprocess, sys, threading, time

binary, src, frames, opts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]


def one(seg, gpu, out, res, i):
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "-i", src, "-o", out, "-y", "--segment", seg, "--device-id", str(gpu), *opts], stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    summary_at, work = None, None
    for line in p.stderr:
        if line.startswith("nlmdenoise: ") and " in " in line and "fps" in line:
            summary_at = time.monotonic() - t0
            work = float(line.split(" in ")[1].split(" s ")[0])
    p.wait()
    end = time.monotonic() - t0
    res[i] = (seg, gpu, end, summary_at, work, p.returncode)


def together(label, jobs):
    res = [None] * len(jobs)
    ts = [threading.Thread(target=one, args=(*j, res, i)) for i, j in enumerate(jobs)]
    t0 = time.monotonic()
    [t.start() for t in ts]
    [t.join() for t in ts]
    print(f"## {label}: wall {time.monotonic() - t0:.2f} s")
    for seg, gpu, end, at, work, rc in res:
        if at is None:
            print(f"  {seg} GPU {gpu}: exit {rc} after {end:.2f} s (no summary line)")
        else:
            print(f"  {seg} GPU {gpu}: start-up {at - work:.2f} s, frames {work:.2f} s, exit after the summary {end - at:.2f} s; wall {end:.2f} s, exit {rc}")
    sys.stdout.flush()


h = frames // 2
for rep in (1, 2):
    together(f"whole input, GPU 0 (rep {rep})", [(f"0:{frames}", 0, "/dev/shm/t0.y4m")])
    together(f"both halves at once, GPU 0 and 1 (rep {rep})", [(f"0:{h}", 0, "/dev/shm/t0.y4m"), (f"{h}:{frames}", 1, "/dev/shm/t1.y4m")])
