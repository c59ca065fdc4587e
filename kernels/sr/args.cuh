// Launch arguments of the super-resolution kernels, passed by value. The Rust mirror is `SrArgs`
// in src/sr/cuda.rs; both sides check the size (SR_ARGS_BYTES is set by the host).
//
// Compile-time constants (set by the host with -D, src/sr/cuda.rs):
//   SAMPLE_BYTES 1 or 2 (stored samples of the ring and output frames)
//   PATCH        patch radius p (the fuse kernel unrolls over it)
//   RADIUS       search radius r, low-resolution samples (likewise)
//   TILE         high-resolution samples per block side of the fuse kernel
#pragma once

#define SR_MAX_FRAMES 15     // frames of a temporal window (past 7 + 1 + future 7)

typedef unsigned long long u64;

struct SrArgs {
    const unsigned char* ring;       // low-resolution frames (ring slots of frame_bytes each)
    u64 frame_bytes;
    u64 plane_offset;                // byte offset of the plane in a ring frame
    unsigned char* out;              // output frame (output layout), or null: write `next`
    u64 out_plane_offset;            // byte offset of the plane in an output frame
    const float* estimate;           // E: the current high-resolution estimate (8-bit units)
    const float* degraded;           // B = D(E)
    float* next;                     // the kernel's output plane
    const float* gated;              // sr_correct: R = g (F - B) of sr_fuse
    float* residual;                 // sr_initial: a low-resolution float plane (w x h) to
                                     // interpolate instead of the ring's target, or null
    const float* lr_target;          // sr_residual: the denoised target (w x h), or null: the ring's
    int slot[SR_MAX_FRAMES];         // ring slots of the window's frames; slot[0] is the target
    int n_frames;
    int w, h;                        // low-resolution plane size
    int out_w, out_h;                // high-resolution plane size
    int scale;                       // integer factor s
    float sigma2;                    // sigma^2, 8-bit units squared
    float inv_h2;                    // 1 / h^2
    float inv_n;                     // 1 / (2p+1)^2
    float fusion;                    // share of the fused correction
    float novelty_gain;              // gain of the novelty gate (src/sr/mod.rs); 0: no gate
    int accumulate;                  // sr_initial: add to `next` instead of writing it
    float inv_scale;                 // 1 / (stored units per 8-bit code value)
    float stored_scale;              // stored units per 8-bit code value
    unsigned max_value;              // largest stored sample
};

__device__ __forceinline__ float load_sample(const unsigned char* plane, int i)
{
#if SAMPLE_BYTES == 1
    return (float)plane[i];
#else
    return (float)((const unsigned short*)plane)[i];
#endif
}

// Rounds half up to stored units and clamps (src/bm3d/mod.rs `to_stored`).
__device__ __forceinline__ void store_sample(unsigned char* plane, int i, float v, const SrArgs& a)
{
    const float s = floorf(v * a.stored_scale + 0.5f);
    const unsigned q = (unsigned)fminf(fmaxf(s, 0.0f), (float)a.max_value);
#if SAMPLE_BYTES == 1
    plane[i] = (unsigned char)q;
#else
    ((unsigned short*)plane)[i] = (unsigned short)q;
#endif
}
