#!/usr/bin/env python3
"""Where a process's start-up goes: CUDA initialisation and a context (libcuda through ctypes),
alone and two processes at once (GPU 0 and GPU 1); then the CLI on one frame, alone and two at
once, with the driver's JIT cache on (default) and off (CUDA_CACHE_DISABLE=1).
  startup.py BINARY INPUT.y4m [nlmdenoise options]"""
import ctypes
import os
import subprocess
import sys
import time
from multiprocessing import Process, Queue


def cuda_init(dev, q):
    t0 = time.monotonic()
    cu = ctypes.CDLL("libcuda.so.1")
    t1 = time.monotonic()
    assert cu.cuInit(0) == 0
    t2 = time.monotonic()
    d = ctypes.c_int()
    assert cu.cuDeviceGet(ctypes.byref(d), dev) == 0
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), d) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    ptr = ctypes.c_void_p()
    assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0  # the context is made on first use
    t3 = time.monotonic()
    q.put(f"GPU {dev}: dlopen {t1 - t0:.3f} s, cuInit {t2 - t1:.3f} s, context {t3 - t2:.3f} s")


def both(target, args_list):
    q = Queue()
    ps = [Process(target=target, args=(*a, q)) for a in args_list]
    t = time.monotonic()
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    return time.monotonic() - t, [q.get() for _ in ps]


for rep in (1, 2):
    wall, lines = both(cuda_init, [(0,)])
    print(f"#{rep} alone ({wall:.2f} s wall): {'; '.join(lines)}", flush=True)
    wall, lines = both(cuda_init, [(0,), (1,)])
    print(f"#{rep} two at once ({wall:.2f} s wall): {'; '.join(lines)}", flush=True)

binary, src, opts = sys.argv[1], sys.argv[2], sys.argv[3:]


def cli(dev, env, q):
    t = time.monotonic()
    r = subprocess.run([binary, "-q", "-y", src, f"/dev/shm/start{dev}.y4m", "--frames", "1", "--device-id", str(dev), *opts], env=env, capture_output=True)
    q.put(f"GPU {dev} {time.monotonic() - t:.2f} s (rc {r.returncode})")


for label, env in (("JIT cache on", dict(os.environ)), ("JIT cache off", dict(os.environ, CUDA_CACHE_DISABLE="1"))):
    for rep in (1, 2):
        _, a = both(cli, [(0, env)])
        _, b = both(cli, [(0, env), (1, env)])
        print(f"CLI 1 frame, {label} #{rep}: alone {a[0]}; two at once {'; '.join(b)}", flush=True)
