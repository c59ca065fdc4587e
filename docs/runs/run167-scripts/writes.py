#!/usr/bin/env python3
"""Write rates into a tmpfs file (/dev/shm), in 3110406-byte records (a 1080p I420 frame and its
FRAME line), as the segment runs write an output assembled in place: one writer or two into one
file (each its half), into pages that are new, reserved (fallocate, size kept) or written before;
two writers into two files; and the rate of the reservation itself. Prints one line per case."""
import ctypes
import os
import sys
import time
from multiprocessing import Process, Queue

REC = 3110406
N = int(sys.argv[1]) if len(sys.argv) > 1 else 600
D = sys.argv[2] if len(sys.argv) > 2 else "/dev/shm"
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def writer(path, first, n, q):
    buf = b"x" * REC
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    t = time.monotonic()
    for i in range(n):
        os.pwrite(fd, buf, (first + i) * REC)
    os.close(fd)
    q.put(time.monotonic() - t)


def run(case, jobs):
    q = Queue()
    t = time.monotonic()
    ps = [Process(target=writer, args=(*j, q)) for j in jobs]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    wall = time.monotonic() - t
    each = [q.get() for _ in ps]
    total = sum(j[2] for j in jobs) * REC
    print(f"{case:45s} {total / wall / 1e9:6.2f} GB/s in all ({wall:.2f} s); each writer {', '.join(f'{j[2] * REC / s / 1e9:.2f}' for j, s in zip(jobs, each))} GB/s", flush=True)


def reserve(path, size):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    t = time.monotonic()
    r = libc.fallocate(fd, 1, 0, size)
    dt = time.monotonic() - t
    os.close(fd)
    return r, dt


f, g = f"{D}/w-a", f"{D}/w-b"
for rep in (1, 2):
    for p in (f, g):
        if os.path.exists(p):
            os.unlink(p)
    run(f"#{rep} one writer, new pages", [(f, 0, N)])
    run(f"#{rep} one writer, over written pages", [(f, 0, N)])
    os.unlink(f)
    run(f"#{rep} two writers, one file, new pages", [(f, 0, N // 2), (f, N // 2, N // 2)])
    run(f"#{rep} two writers, one file, written pages", [(f, 0, N // 2), (f, N // 2, N // 2)])
    os.unlink(f)
    run(f"#{rep} two writers, two files, new pages", [(f, 0, N // 2), (g, 0, N // 2)])
    os.unlink(f), os.unlink(g)
    r, dt = reserve(f, N * REC)
    print(f"#{rep} fallocate (keep size) of {N * REC / 1e9:.2f} GB: rc {r}, {N * REC / dt / 1e9:.2f} GB/s ({dt:.2f} s)", flush=True)
    run(f"#{rep} two writers, one file, reserved pages", [(f, 0, N // 2), (f, N // 2, N // 2)])
    os.unlink(f)
    reserve(f, N * REC)
    run(f"#{rep} one writer, reserved pages", [(f, 0, N)])
    os.unlink(f)
