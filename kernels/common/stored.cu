// Samples between a format's own memory layout ("stored frames": NV12's interleaved U/V plane,
// P010's 16-bit pairs, packed RGB) and the engine's planes, on the device: the host then copies
// frames as they are stored and never (de)interleaves them (src/device/cuda/stored.rs).
//
// One launch moves every component of a frame: blockIdx.z picks the component, x runs along a
// row and y over rows (grid-stride, so any height fits the grid's y limit).
//
// Compile-time constants (set by the host with -D):
//   SAMPLE_BYTES        1 or 2 (little-endian words)
//   STORED_ARGS_BYTES   sizeof(StoredArgs) on the host, checked below
#pragma once

#define STORED_MAX_COMPONENTS 4

typedef unsigned long long u64;

// One component: where its samples lie in the stored frame and in its plane.
struct ComponentMove {
    u64 stored;         // device address of row 0 of the component's memory plane
    u64 plane;          // device address of the component's plane (rows without padding)
    unsigned pitch;     // bytes between rows of the memory plane
    unsigned offset;    // byte offset of the component's first sample in a row
    unsigned step;      // bytes between consecutive samples of the component in a row
    unsigned width;     // samples per row of the plane
    unsigned height;    // rows of the plane
    unsigned pad;
};

struct StoredArgs {
    ComponentMove c[STORED_MAX_COMPONENTS];
};

static_assert(sizeof(StoredArgs) == STORED_ARGS_BYTES, "StoredArgs differs from the host's");

#if SAMPLE_BYTES == 1
typedef unsigned char sample_t;
#else
typedef unsigned short sample_t;
#endif

// Stored frame -> planes (after the upload of a stored frame).
extern "C" __global__ void stored_unpack(StoredArgs a)
{
    const ComponentMove m = a.c[blockIdx.z];
    const unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= m.width) return;
    for (unsigned y = blockIdx.y; y < m.height; y += gridDim.y) {
        const unsigned char* from = (const unsigned char*)m.stored + (size_t)y * m.pitch + m.offset + (size_t)x * m.step;
        ((sample_t*)m.plane)[(size_t)y * m.width + x] = *(const sample_t*)from;
    }
}

// Planes -> stored frame (before the download of a stored frame). Every byte of a stored row
// belongs to exactly one component, so the components of one memory plane never write the same
// byte.
extern "C" __global__ void stored_pack(StoredArgs a)
{
    const ComponentMove m = a.c[blockIdx.z];
    const unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= m.width) return;
    for (unsigned y = blockIdx.y; y < m.height; y += gridDim.y) {
        unsigned char* to = (unsigned char*)m.stored + (size_t)y * m.pitch + m.offset + (size_t)x * m.step;
        *(sample_t*)to = ((const sample_t*)m.plane)[(size_t)y * m.width + x];
    }
}
