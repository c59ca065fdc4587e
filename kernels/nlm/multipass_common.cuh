// Multi-pass NLM (kernels/multipass_*.cu): shared constants, the by-value argument block and the
// storage of intermediates. The design is docs/multipass.md; the host side is
// src/nlm/cuda/multipass.rs (MpArgs mirrors the struct below; both sides check the size).
//
// Per weight group and frame, the search offsets are split into packs of up to P offsets; each
// pack runs three passes (vertical, weight, accumulate), then one finalize pass writes the frame:
//
//   vertical    V_j(x', y) = sum_g sum_ky (G_t(x', Sy y + ky) - G_u(x' + Sx dx_j, Sy (y + dy_j) + ky))^2
//   weight      W_j(x, y)  = weight(sum_kx V_j(Sx x + kx, y))
//   accumulate  per output sample: W_j(p) * O_u(p + q_j), and for spatial packs also the mirrored
//               pair W_j(p - q_j) * O_t(p - q_j) (w(p, p+q) = w(p+q, p))
//   finalize    centre weight, normalisation, rounding
//
// Intermediates are 32-bit words; a word holds LANES values of the pack: 1 float (INTER_F32), 2
// halves (INTER_F16) or 3 10-bit normalized values (INTER_UNORM10, bits 0-9, 10-19, 20-29). Word
// image i holds lanes i*LANES .. i*LANES+LANES-1 of every position.
#pragma once

#ifndef MP_P
#define MP_P 3            // offsets per pack (1..4)
#endif
#ifndef PATCH_R
#define PATCH_R 2
#endif
#ifndef N_GUIDES
#define N_GUIDES 1
#endif
#ifndef N_OUTPUTS
#define N_OUTPUTS 1
#endif
#ifndef STEP_X
#define STEP_X 1
#endif
#ifndef STEP_Y
#define STEP_Y 1
#endif
#ifndef SAMPLE_BYTES
#define SAMPLE_BYTES 1
#endif
#ifndef WEIGHTING
#define WEIGHTING 0       // 0 welsch, 1 bisquare (as weight.cuh)
#endif
#ifndef INTER
#define INTER 2           // 0 f32, 1 f16, 2 unorm10
#endif
#ifndef MP_ROWS
#define MP_ROWS 8         // vertical pass: output rows per thread
#endif

#define INTER_F32 0
#define INTER_F16 1
#define INTER_UNORM10 2

#define MP_MAX_P 4
#define MP_MAX_BATCH 3
#define MP_MAX_PLANES 3

#if SAMPLE_BYTES == 1
typedef unsigned char mp_sample_t;
#define MP_MAX_VALUE 255.f
#else
typedef unsigned short mp_sample_t;
#define MP_MAX_VALUE 65535.f
#endif

#if INTER == INTER_F32
#define LANES 1
#elif INTER == INTER_F16
#define LANES 2
#else
#define LANES 3
#endif
#define N_WORDS ((MP_P + LANES - 1) / LANES)

// f32 + welsch: the weight pass stores the weight's exponent x (weight = 2^-x) and the accumulate
// pass keeps weights relative to the smallest exponent seen (as weight.cuh), so nothing
// underflows. Otherwise the weight itself (in [0, 1]) is stored.
#define STORE_LOG (INTER == INTER_F32 && WEIGHTING == 0)

#define MP_LEVEL_NONE 3.0e38f
// As weight.cuh: above MP_LEVEL_UNDERFLOW every f64 weight of the definition is 0 (keep the
// input); between MP_LEVEL_DENORMAL and it the definition's own weights are (nearly) subnormal
// doubles, which float cannot imitate: such samples go to the exact f64 path.
#define MP_LEVEL_UNDERFLOW (745.5f * 1.4426950f)
#define MP_LEVEL_DENORMAL (700.f * 1.4426950f)

constexpr int PATCH_D = 2 * PATCH_R + 1;

static_assert(MP_P >= 1 && MP_P <= MP_MAX_P, "offsets per pack out of range");
static_assert(N_GUIDES <= MP_MAX_PLANES && N_OUTPUTS <= MP_MAX_PLANES, "too many planes");

// One weight group of the batch (blockIdx.z).
struct MpGroup {
    unsigned long long guide[MP_MAX_PLANES];   // byte offsets of the guide planes in a frame
    unsigned long long output[MP_MAX_PLANES];  // byte offsets of the output planes in a frame
    float k_dist;    // distance sum -> weight argument (launch.rs weight_constants)
    float k_bias;
    float v_scale;   // f16/unorm10: stored = min(V * v_scale, 1); 1 / v_scale = distance sum cut
    float v_cut;     // 1 / v_scale
};

struct MpArgs {
    const unsigned char* ring;          // ring frames
    unsigned char* dst;                 // output frame (ring layout)
    unsigned int* vbuf;                 // vertical sums, group z at vbuf + z * group_words
    unsigned int* wbuf;                 // weights, group z at wbuf + z * group_words
    float* accum;                       // accumulators, group z at accum + z * accum_floats
    unsigned long long frame_bytes;
    unsigned long long group_words;     // words per group in vbuf and wbuf
    unsigned long long image_words;     // words per word image (>= vw * eh and ew * eh)
    unsigned long long accum_floats;    // floats per group in accum: (2 + N_OUTPUTS) * out_w * out_h
    unsigned long long* exact;          // finalize: exact[0] count, exact[1..] samples for nlm_exact.cu
    unsigned long long exact_capacity;
    MpGroup group[MP_MAX_BATCH];
    int slot[MP_MAX_P];                 // ring slot of the frame each offset points into
    int dx[MP_MAX_P], dy[MP_MAX_P];     // offsets in output-plane samples
    int target_slot;
    int n_off;                          // offsets in this pack (1..MP_P); 0 in finalize: none at all
    int symmetric;                      // spatial pack of the target frame: add the mirrored pair
    int first;                          // first pack of the frame: accumulators start at zero
    int out_w, out_h;
    int guide_w, guide_h;
    int ex0, ey0, ew, eh;               // grid of the weight images (may extend past the plane)
    int vw;                             // columns of the vertical-sum images: STEP_X * (ew - 1) + PATCH_D
    float wref;
    float tie_window;                   // finalize: |v - floor(v) - 0.5| below this goes exact (f32)
    float exact_below;                  // finalize: a largest weight below this goes exact (not STORE_LOG)
};

#ifdef MP_ARGS_BYTES
static_assert(sizeof(MpArgs) == MP_ARGS_BYTES, "MpArgs layout differs from the host's");
#endif

__device__ __forceinline__ int mp_mirror(int x, int n)
{
    if (x >= 0 && x < n) return x;
    const int period = 2 * n;
    int r = x % period;
    if (r < 0) r += period;
    return r < n ? r : period - 1 - r;
}

__device__ __forceinline__ float mp_load(const unsigned char* plane, int w, int h, int x, int y)
{
    return (float)reinterpret_cast<const mp_sample_t*>(plane)[(long long)mp_mirror(y, h) * w + mp_mirror(x, w)];
}

// Packs LANES values (already normalized to [0, 1] for f16/unorm10) into one word.
__device__ __forceinline__ unsigned int mp_encode(const float* v)
{
#if INTER == INTER_F32
    return __float_as_uint(v[0]);
#elif INTER == INTER_F16
    unsigned short lo, hi;   // round to nearest half (no cuda_fp16.h: NVRTC may lack it)
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(lo) : "f"(v[0]));
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(hi) : "f"(v[1]));
    return (unsigned int)lo | ((unsigned int)hi << 16);
#else
    unsigned int word = 0;
#pragma unroll
    for (int l = 0; l < 3; ++l) {
        const float c = fminf(fmaxf(v[l], 0.f), 1.f);
        word |= (unsigned int)__float2uint_rn(c * 1023.f) << (10 * l);
    }
    return word;
#endif
}

__device__ __forceinline__ void mp_decode(unsigned int word, float* v)
{
#if INTER == INTER_F32
    v[0] = __uint_as_float(word);
#elif INTER == INTER_F16
    const unsigned short lo = (unsigned short)(word & 0xffffu), hi = (unsigned short)(word >> 16);
    asm("cvt.f32.f16 %0, %1;" : "=f"(v[0]) : "h"(lo));
    asm("cvt.f32.f16 %0, %1;" : "=f"(v[1]) : "h"(hi));
#else
#pragma unroll
    for (int l = 0; l < 3; ++l) v[l] = (float)((word >> (10 * l)) & 1023u) * (1.f / 1023.f);
#endif
}

// Writes the MP_P lanes of `v` (lanes >= n_off hold 0) as N_WORDS word images at index `at`.
__device__ __forceinline__ void mp_store(unsigned int* images, unsigned long long image_words, unsigned long long at,
                                         const float (&v)[MP_P])
{
#pragma unroll
    for (int i = 0; i < N_WORDS; ++i) {
        float lane[LANES];
#pragma unroll
        for (int l = 0; l < LANES; ++l) lane[l] = (i * LANES + l < MP_P) ? v[i * LANES + l] : 0.f;
        images[i * image_words + at] = mp_encode(lane);
    }
}

__device__ __forceinline__ void mp_fetch(const unsigned int* images, unsigned long long image_words, unsigned long long at,
                                         float (&v)[MP_P])
{
#pragma unroll
    for (int i = 0; i < N_WORDS; ++i) {
        float lane[LANES];
        mp_decode(images[i * image_words + at], lane);
#pragma unroll
        for (int l = 0; l < LANES; ++l)
            if (i * LANES + l < MP_P) v[i * LANES + l] = lane[l];
    }
}
