#!/usr/bin/env python3
"""Writes the C source of a fault-injecting stand-in for the CUDA driver library (libcuda.so).

Test tooling for docs/reliability.md, not part of the product: the product loads the driver by
name (cudarc's dynamic loading), so a directory holding this library put first on
LD_LIBRARY_PATH sits between the product and the real driver. Every driver function jumps
straight to the real one (one indirect jump each, generated for every name in SYMBOLS), except
cuLaunchKernel, which counts launches and, at the launch CUDA_FAULT_AT names, does what
CUDA_FAULT asks:

  launch-error  that launch returns CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES without running (a kernel
                launch failing; the context stays usable)
  trap          a kernel executing the PTX `trap` instruction runs on the caller's stream
                instead: a real fault on the GPU, found by the driver at the next
                synchronisation; the context is lost for good (CUDA_ERROR_LAUNCH_FAILED from
                then on), as when a device faults
  lost          that call and every later driver call return CUDA_ERROR_DEVICE_UNAVAILABLE (the
                device gone), except the error-string functions

The real driver: CUDA_FAULT_REAL_LIB, else libcuda.so.1 found by the dynamic loader (the stand-in
is named libcuda.so only, so that name reaches the real one).

usage: make_cuda_shim.py SYMBOLS_FILE > shim.c; cc -shared -fPIC -O2 -o DIR/libcuda.so shim.c -ldl
SYMBOLS_FILE: one driver function name per line (scripts/gpu.sh --collect takes them from the
cudarc bindings the product is built with).
"""
import sys

HEADER = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { SUCCESS = 0, DEVICE_UNAVAILABLE = 46, NOT_FOUND = 500, LAUNCH_OUT_OF_RESOURCES = 701 };
enum { MODE_NONE, MODE_LAUNCH_ERROR, MODE_TRAP, MODE_LOST };

#define N_SYMBOLS %(n)d
static const char *const names[N_SYMBOLS] = { %(names)s };
/* Read by the jumps below: one entry per name, the real function (or a stand-in). */
__attribute__((visibility("hidden"))) void *cuda_fault_table[N_SYMBOLS];

static CUresult missing(void) { return NOT_FOUND; }
static CUresult device_gone(void) { return DEVICE_UNAVAILABLE; }

typedef CUresult (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
typedef CUresult (*module_load_fn)(void **, const void *);
typedef CUresult (*get_function_fn)(void **, void *, const char *);

static void *real_lib;
static launch_fn real_launch;
static int mode;
static long fault_at;
static long launches;
static int gone;

static const char trap_ptx[] =
    ".version 6.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry cuda_fault_trap()\n{\n\ttrap;\n}\n";

__attribute__((constructor)) static void load_real_driver(void) {
    const char *path = getenv("CUDA_FAULT_REAL_LIB");
    real_lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!real_lib) {
        fprintf(stderr, "cuda-fault-shim: cannot load the real driver: %%s\n", dlerror());
    }
    for (int i = 0; i < N_SYMBOLS; i++) {
        void *f = real_lib ? dlsym(real_lib, names[i]) : NULL;
        cuda_fault_table[i] = f ? f : (void *)missing;
    }
    real_launch = real_lib ? (launch_fn)dlsym(real_lib, "cuLaunchKernel") : NULL;
    const char *m = getenv("CUDA_FAULT");
    const char *at = getenv("CUDA_FAULT_AT");
    if (m && *m) {
        mode = !strcmp(m, "launch-error") ? MODE_LAUNCH_ERROR : !strcmp(m, "trap") ? MODE_TRAP : !strcmp(m, "lost") ? MODE_LOST : MODE_NONE;
        if (mode == MODE_NONE) fprintf(stderr, "cuda-fault-shim: unknown CUDA_FAULT '%%s' (launch-error, trap, lost)\n", m);
    }
    fault_at = at ? atol(at) : 1;
    fprintf(stderr, "cuda-fault-shim: %%s at launch %%ld\n", mode ? m : "no fault", fault_at);
}

static void lose_device(void) {
    __atomic_store_n(&gone, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < N_SYMBOLS; i++) {
        /* Error strings keep working, so that the caller can still say what happened. */
        if (strncmp(names[i], "cuGetError", 10) != 0) cuda_fault_table[i] = (void *)device_gone;
    }
}

static CUresult launch_trap(void *stream) {
    module_load_fn load = (module_load_fn)dlsym(real_lib, "cuModuleLoadData");
    get_function_fn get = (get_function_fn)dlsym(real_lib, "cuModuleGetFunction");
    void *module = NULL, *function = NULL;
    CUresult r = load(&module, trap_ptx);
    if (r == SUCCESS) r = get(&function, module, "cuda_fault_trap");
    if (r != SUCCESS) {
        fprintf(stderr, "cuda-fault-shim: preparing the trap kernel failed (%%d)\n", r);
        return r;
    }
    return real_launch(function, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL);
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    if (__atomic_load_n(&gone, __ATOMIC_SEQ_CST)) return DEVICE_UNAVAILABLE;
    long n = __atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST);
    if (mode != MODE_NONE && n == fault_at) {
        fprintf(stderr, "cuda-fault-shim: injecting %%s at launch %%ld\n",
                mode == MODE_LAUNCH_ERROR ? "a launch error" : mode == MODE_TRAP ? "a GPU trap" : "device loss", n);
        switch (mode) {
        case MODE_LAUNCH_ERROR: return LAUNCH_OUT_OF_RESOURCES;
        case MODE_TRAP: return launch_trap(stream);
        case MODE_LOST: lose_device(); return DEVICE_UNAVAILABLE;
        }
    }
    if (!real_launch) return NOT_FOUND;
    return real_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
'''

TRAMPOLINE = '__asm__(".globl %(name)s\\n.type %(name)s,@function\\n%(name)s:\\n\\tjmp *cuda_fault_table+%(offset)d(%%rip)\\n");\n'


def main():
    names = sorted({line.strip() for line in open(sys.argv[1]) if line.strip().startswith("cu")})
    names = [n for n in names if n != "cuLaunchKernel"]
    out = HEADER % {"n": len(names), "names": ", ".join('"%s"' % n for n in names)}
    for i, name in enumerate(names):
        out += TRAMPOLINE % {"name": name, "offset": 8 * i}
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
