// One BM3D step for the reference patches of one plane group in one frame of the window (code
// `ref_code`: the target's, or with window references each frame's in turn, one launch each):
// one warp per reference patch does the block matching, the collaborative filtering and the
// aggregation into the sums of the members' frames (`sum_slot`) (src/bm3d/mod.rs has the
// definition; src/bm3d/cpu.rs computes the same on the host).
//
//   1. The reference patch goes to shared memory.
//   2. Block matching (sums of squared differences over the group's planes, read from the ring
//      frames in step 1 and from the basic estimates in step 2): the reference's frame
//      exhaustively (own_frame_search) or its result kept by bm3d_search (search.cu), then the
//      other frames of the window around the seeds taken from the frame one step closer to it
//      (predictive search; with motion seeds the first seed's companion, moved along the coarse
//      motion of motion.cu, goes first), each position once, a candidate per lane at a time.
//      Those within tau go to the warp's running selection of the best NMAX - 1 (WarpBest,
//      select.cuh), every one to its lane's seed list of the frame.
//   3. The group: the reference patch and the best NMAX - 1 in key order, cut to a power of two.
//   4. Per plane: in step 2 the basic estimate's group goes to shared memory, through the DCT and
//      the Haar transform along the group, and its coefficients give the Wiener weights (kept as
//      f16, in registers); then the noisy group, through the 2D transform (bior1.5 in step 1,
//      DCT in step 2) and the Haar transform, hard thresholding (step 1) or Wiener shrinkage
//      (step 2), back;
//      the patches of frames with sums (the target's, or with per-frame groups every frame's)
//      are added to the fixed-point numerators with the group's weight and the Kaiser window,
//      and the weight to the patch's corner in `wimg` (bm3d_finish.cu turns those into the
//      denominators).
//
// Shared memory per warp, `a.group_floats` (the host sizes it, src/bm3d/cuda.rs `group_floats`):
// the reference patch (BM3D_MAX_PLANES x PP floats), the selection's queue (64 keys), the seeds
// (padded to 4 ints), the members (NMAX x 4 ints), then the group buffer: NMAX x PP floats, or a
// predictive-search square of n_planes x (2 seed_radius + PATCH)^2 floats while the group is
// searched, whichever is larger (8-bit samples in the hard step: the reference packed, n_planes x
// PP bytes, then the square as bytes, rows `staged_pitch` apart: less than the floats).

template <bool WIENER>
struct Step {
    static constexpr int NMAX = WIENER ? NMAX_WIENER : NMAX_HARD;
};

// Per-warp shared memory layout, in floats (the host computes the same total).
#define REF_FLOATS (BM3D_MAX_PLANES * PP)
#define QUEUE_FLOATS 128  // 64 keys
// The seeds and, with motion seeds, the first one's companion; a multiple of 4: the group buffer
// stays 16-byte aligned.
#define SEED_INTS ((2 * (SEEDS + 1) + 3) & ~3)

// f32 <-> f16, round to nearest (no cuda_fp16.h: NVRTC may lack it).
__device__ __forceinline__ unsigned short f32_to_f16(float v)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

__device__ __forceinline__ float f16_to_f32(unsigned short h)
{
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
    return v;
}

// A sample of a plane in 8-bit units at (x, y) of the extent (mirrored beyond the plane).
__device__ __forceinline__ float noisy_at(const unsigned char* plane, int x, int y, const Bm3dArgs& a)
{
    x = x < a.w ? x : mirror_index(x, a.w);
    y = y < a.h ? y : mirror_index(y, a.h);
#if SAMPLE_BYTES == 1
    return (float)__ldg(plane + y * a.w + x) * a.inv_scale;
#else
    return (float)__ldg((const unsigned short*)plane + y * a.w + x) * a.inv_scale;
#endif
}

__device__ __forceinline__ float basic_at(const float* plane, int x, int y, const Bm3dArgs& a)
{
    x = x < a.w ? x : mirror_index(x, a.w);
    y = y < a.h ? y : mirror_index(y, a.h);
    return __ldg(plane + y * a.w + x);
}

// The same without the border rule (MIRROR false: (x, y) lies inside the plane).
template <bool MIRROR>
__device__ __forceinline__ float noisy_in(const unsigned char* plane, int x, int y, const Bm3dArgs& a)
{
    if (MIRROR) return noisy_at(plane, x, y, a);
#if SAMPLE_BYTES == 1
    return (float)__ldg(plane + y * a.w + x);
#else
    return (float)__ldg((const unsigned short*)plane + y * a.w + x) * a.inv_scale;
#endif
}

template <bool MIRROR>
__device__ __forceinline__ float basic_in(const float* plane, int x, int y, const Bm3dArgs& a)
{
    if (MIRROR) return basic_at(plane, x, y, a);
    return __ldg(plane + y * a.w + x);
}

__device__ __forceinline__ const unsigned char* noisy_plane(const Bm3dArgs& a, int code, int j)
{
    return a.ring + (u64)a.slot[code] * a.frame_bytes + a.plane_bytes[j];
}

__device__ __forceinline__ const float* basic_plane(const Bm3dArgs& a, int code, int j)
{
    return a.basic + (u64)a.slot[code] * a.basic_floats + a.basic_plane[j];
}

// The matching value of plane j of the frame at `code`: noisy (step 1) or basic (step 2).
template <bool WIENER>
__device__ __forceinline__ float match_at(const Bm3dArgs& a, int code, int j, int x, int y)
{
    if (WIENER) return basic_at(basic_plane(a, code, j), x, y, a);
    return noisy_at(noisy_plane(a, code, j), x, y, a);
}

// Sum of squared differences between the reference patch (shared memory) and the patch at (x, y)
// of the frame at `code`. MIRROR: the plane is smaller than a patch and reads beyond it follow
// the border rule; otherwise every patch lies inside the plane and a row is read straight from
// its start (two partial sums, so the FMAs of a row do not wait on each other).
template <bool WIENER, bool MIRROR>
__device__ __forceinline__ float patch_ssd(const Bm3dArgs& a, const float* ref, int code, int x, int y)
{
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < a.n_planes; ++j) {
        if (MIRROR) {
#pragma unroll
            for (int i = 0; i < PATCH; ++i) {
#pragma unroll
                for (int c = 0; c < PATCH; ++c) {
                    const float d = ref[j * PP + i * PATCH + c] - match_at<WIENER>(a, code, j, x + c, y + i);
                    s0 = fmaf(d, d, s0);
                }
            }
        } else if (WIENER) {
            const float* p = basic_plane(a, code, j) + y * a.w + x;
#pragma unroll
            for (int i = 0; i < PATCH; ++i) {
#pragma unroll
                for (int c = 0; c < PATCH; c += 2) {
                    const float d0 = ref[j * PP + i * PATCH + c] - __ldg(p + i * a.w + c);
                    const float d1 = ref[j * PP + i * PATCH + c + 1] - __ldg(p + i * a.w + c + 1);
                    s0 = fmaf(d0, d0, s0);
                    s1 = fmaf(d1, d1, s1);
                }
            }
        } else {
#if SAMPLE_BYTES == 1
            // 8-bit samples are 8-bit code values already (scale 1).
            const unsigned char* p = noisy_plane(a, code, j) + y * a.w + x;
#define BM3D_SAMPLE(q) ((float)__ldg(q))
#else
            const unsigned short* p = (const unsigned short*)noisy_plane(a, code, j) + y * a.w + x;
#define BM3D_SAMPLE(q) ((float)__ldg(q) * a.inv_scale)
#endif
#pragma unroll
            for (int i = 0; i < PATCH; ++i) {
#pragma unroll
                for (int c = 0; c < PATCH; c += 2) {
                    const float d0 = ref[j * PP + i * PATCH + c] - BM3D_SAMPLE(p + i * a.w + c);
                    const float d1 = ref[j * PP + i * PATCH + c + 1] - BM3D_SAMPLE(p + i * a.w + c + 1);
                    s0 = fmaf(d0, d0, s0);
                    s1 = fmaf(d1, d1, s1);
                }
            }
#undef BM3D_SAMPLE
        }
    }
    return s0 + s1;
}

// The matching value of plane j at (x, y) of the frame at `code`, MIRROR as noisy_in.
template <bool WIENER, bool MIRROR>
__device__ __forceinline__ float match_in(const Bm3dArgs& a, int code, int j, int x, int y)
{
    if (WIENER) return basic_in<MIRROR>(basic_plane(a, code, j), x, y, a);
    return noisy_in<MIRROR>(noisy_plane(a, code, j), x, y, a);
}

// Sum of squared differences between the reference patch and the staged patch whose first
// sample is `p` (rows `rw` floats apart, planes `plane_floats` apart; shared memory).
__device__ __forceinline__ float staged_ssd(const float* ref, const float* p, int n_planes, int rw, int plane_floats)
{
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < n_planes; ++j) {
#pragma unroll
        for (int i = 0; i < PATCH; ++i) {
#pragma unroll
            for (int c = 0; c < PATCH; c += 2) {
                const float d0 = ref[j * PP + i * PATCH + c] - p[j * plane_floats + i * rw + c];
                const float d1 = ref[j * PP + i * PATCH + c + 1] - p[j * plane_floats + i * rw + c + 1];
                s0 = fmaf(d0, d0, s0);
                s1 = fmaf(d1, d1, s1);
            }
        }
    }
    return s0 + s1;
}

// The predictive search of 8-bit samples in the hard-thresholding step (no border reads) stages
// its squares as bytes and scores them with integer dot products: ||r - c||^2 = ||r||^2 +
// ||c||^2 - 2 r.c, four samples per IDP4A, exact in 32-bit integers (at most 3 x 64 x 255^2 <
// 2^24, so the float the selection takes equals the f32 sum of squared differences bit for bit).
// A row of a staged square takes ceil(PATCH / 4) + 1 aligned words, funnel-shifted to the
// candidate's first byte: about 12 instructions for an 8-sample row against staged_ssd's 26
// (run 188: the hard groups' luma launch 2.76 -> 2.11 ms).
#define PATCH_WORDS (PATCH / 4)

// Bytes between the rows of a staged square of `rw` columns: a multiple of 4, with a word of
// slack after the row for the last aligned read.
__device__ __forceinline__ int staged_pitch(int rw)
{
    return ((rw + 3) & ~3) + 4;
}

// ||c||^2 - 2 r.c for the staged candidate whose first sample is byte `u` of the row at `row0`
// (4-byte aligned; rows `pitch` bytes apart, planes `plane_bytes` apart) against the packed
// reference `refw` (PATCH_WORDS words a row, PP / 4 a plane).
__device__ __forceinline__ int staged_ssd_bytes(const unsigned* refw, const unsigned char* row0, int u, int n_planes, int pitch, int plane_bytes)
{
    const unsigned* w = (const unsigned*)(row0 + (u & ~3));
    const unsigned shift = 8 * (u & 3);
    const int wpitch = pitch >> 2, wplane = plane_bytes >> 2;
    unsigned cc = 0, rc = 0;
    for (int j = 0; j < n_planes; ++j) {
#pragma unroll
        for (int i = 0; i < PATCH; ++i) {
            unsigned x[PATCH_WORDS + 1];
#pragma unroll
            for (int k = 0; k <= PATCH_WORDS; ++k) x[k] = w[j * wplane + i * wpitch + k];
#pragma unroll
            for (int k = 0; k < PATCH_WORDS; ++k) {
                const unsigned c = __funnelshift_r(x[k], x[k + 1], shift);
                cc = __dp4a(c, c, cc);
                rc = __dp4a(c, refw[j * (PP / 4) + i * PATCH_WORDS + k], rc);
            }
        }
    }
    return (int)cc - 2 * (int)rc;
}

// Loads in flight per lane when a warp copies samples to shared memory (the members of a
// group): a batch's loads are all issued before its stores, so a lane waits on memory once per
// batch rather than once per sample (the copies were latency-bound).
#define GATHER_BATCH 4

// A 64-bit value of lane `src` (a pointer: one member's, to every lane that works on it).
__device__ __forceinline__ u64 shfl_u64(u64 v, int src)
{
    const unsigned lo = __shfl_sync(0xFFFFFFFFu, (unsigned)v, src);
    const unsigned hi = __shfl_sync(0xFFFFFFFFu, (unsigned)(v >> 32), src);
    return ((u64)hi << 32) | lo;
}

// Plane j of the n members (`members`: 4 ints each, code, y, x, ...) into the group buffer g
// (`gidx`): their basic estimates (BASIC) or noisy samples. Element e = e0 + lane of the group is
// sample e % PP of member e / PP. Without border reads each lane < n finds its member's first
// sample once and hands it to the lanes that read that member (a shuffle): the loads need one
// add each instead of the member's frame, plane and row found per sample.
//
// 8x8 patches take the path of whole members: lane l reads samples l and l + 32 of every member
// (rows 0-3 and 4-7, the same two offsets from each member's first sample), members in batches of
// four from a multiple of four, so that member m0 + i has the swizzle i (`gidx`): the store
// offsets are the lane's four `lane ^ (8 i)`, found once. Per sample a load, a store and half a
// shuffle, against the general path's division of the element index, swizzle and shuffle each.
template <bool BASIC>
__device__ __forceinline__ float member_sample(const Bm3dArgs& a, u64 base, int off)
{
    if (BASIC) return __ldg((const float*)base + off);
#if SAMPLE_BYTES == 1
    return (float)__ldg((const unsigned char*)base + off);
#else
    return (float)__ldg((const unsigned short*)base + off) * a.inv_scale;
#endif
}

template <bool BASIC, bool MIRROR>
__device__ __forceinline__ void gather_group(const Bm3dArgs& a, float* g, const int* members, int n, int j, int lane)
{
    const int total = n * PP;
    u64 first = 0;
    if (!MIRROR && lane < n) {
        const int code = members[4 * lane], at = members[4 * lane + 1] * a.w + members[4 * lane + 2];
        first = BASIC ? (u64)(basic_plane(a, code, j) + at) : (u64)(noisy_plane(a, code, j) + (u64)at * SAMPLE_BYTES);
    }
    if (!MIRROR && PATCH == 8) {
        const int off_lo = (lane >> 3) * a.w + (lane & 7), off_hi = off_lo + 4 * a.w;
        for (int m0 = 0; m0 < n; m0 += 4) {
            float v[8];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const u64 base = shfl_u64(first, (m0 + i) & 31);  // every lane takes part
                if (m0 + i < n) {
                    v[2 * i] = member_sample<BASIC>(a, base, off_lo);
                    v[2 * i + 1] = member_sample<BASIC>(a, base, off_hi);
                }
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if (m0 + i < n) {
                    float* at = g + (m0 + i) * PP + (lane ^ (8 * i));  // gidx(m0 + i, lane)
                    at[0] = v[2 * i];
                    at[32] = v[2 * i + 1];
                }
            }
        }
        return;
    }
    for (int e0 = 0; e0 < total; e0 += 32 * GATHER_BATCH) {
        float v[GATHER_BATCH];
#pragma unroll
        for (int b = 0; b < GATHER_BATCH; ++b) {
            const int e = e0 + 32 * b + lane;
            const int m = e / PP, p = e % PP;
            v[b] = 0.0f;
            if (MIRROR) {
                if (e < total) {
                    const int code = members[4 * m], y = members[4 * m + 1] + p / PATCH, x = members[4 * m + 2] + p % PATCH;
                    v[b] = BASIC ? basic_in<true>(basic_plane(a, code, j), x, y, a) : noisy_in<true>(noisy_plane(a, code, j), x, y, a);
                }
            } else {
                const u64 base = shfl_u64(first, m & 31);  // every lane takes part; m < n where e < total
                if (e < total) {
                    const int off = (p / PATCH) * a.w + p % PATCH;
                    if (BASIC) {
                        v[b] = __ldg((const float*)base + off);
                    } else {
#if SAMPLE_BYTES == 1
                        v[b] = (float)__ldg((const unsigned char*)base + off);
#else
                        v[b] = (float)__ldg((const unsigned short*)base + off) * a.inv_scale;
#endif
                    }
                }
            }
        }
#pragma unroll
        for (int b = 0; b < GATHER_BATCH; ++b) {
            const int e = e0 + 32 * b + lane;
            if (e < total) g[gidx(e / PP, e % PP)] = v[b];
        }
    }
}

__device__ __forceinline__ int corner(int i, int step, int extent)
{
    return min(i * step, extent - PATCH);
}

// The exhaustive search of the reference patch at (x0, y0) in its own frame (`a.ref_code`): every
// corner within `a.radius` but R itself, one candidate per lane at a time (patch_ssd: few
// registers, which the filtering that follows needs; search.cu scores columns of candidates).
// Those within tau are offered to `top`; every one goes into the lane's seed list.
template <bool WIENER, bool MIRROR, int K>
__device__ __forceinline__ void own_frame_search(const Bm3dArgs& a, const float* ref, int x0, int y0,
                                                 WarpBest<K>& top, u64 (&seed_list)[SEEDS], int lane)
{
    const int max_x = a.ew - PATCH, max_y = a.eh - PATCH;
    const int xa = max(x0 - a.radius, 0), xb = min(x0 + a.radius, max_x);
    const int ya = max(y0 - a.radius, 0), yb = min(y0 + a.radius, max_y);
    const int cols = xb - xa + 1, count = cols * (yb - ya + 1);
    for (int base = 0; base < count; base += 32) {
        const int c = base + lane;
        const int x = xa + c % cols, y = ya + c / cols;
        const bool ok = c < count && !(x == x0 && y == y0);
        const float d = ok ? patch_ssd<WIENER, MIRROR>(a, ref, a.ref_code, x, y) : 0.0f;
        const u64 k = make_key(d, a.ref_code, y, x);
        top.offer(ok && d <= a.tau_ssd, k);
        if (ok) list_insert(seed_list, k);
    }
}

// Step 4's work along the group, one coefficient t of every patch (a column) at a time in
// registers: each lane takes coefficients lane and lane + 32 (PP = 64; with PP = 16 the lanes
// below 16 one). N is the group's size (a power of two), a compile-time constant so that the
// columns and the Haar butterflies need no per-member bounds (the *_any functions pick N).
constexpr int COLUMN_COEFS = PP >= 32 ? PP / 32 : 1;

// The Wiener weights of the basic estimate's transformed group in g (before the Haar transform
// along the group), as f16 in omega_pair[m] (coefficient lane in the low half, lane + 32 in the
// high); returns the lane's sum of their squares.
template <int N, int NW>
__device__ __forceinline__ float wiener_weights(const float* g, int lane, float sigma, unsigned (&omega_pair)[NW])
{
    float weight_part = 0.0f;
#pragma unroll
    for (int c = 0; c < COLUMN_COEFS; ++c) {
        const int t = lane + 32 * c;
        if (t >= PP) continue;
        float v[N];
        load_column(g, t, v);
        haar_regs(v, false);
#pragma unroll
        for (int m = 0; m < N; ++m) {
            const float bv = v[m];
            // The operations written out, so that the bits do not depend on what the compiler
            // fuses. The fast division (within 2 ulp): an IEEE division brings a range check and
            // a branch per coefficient (FCHK, run 151's profile); the agreement rule with the f64
            // reference does not see the difference.
            const float b2 = __fmul_rn(bv, bv);
            const float omega = sigma == 0.0f ? 1.0f : __fdividef(b2, fmaf(sigma, sigma, b2));
            const unsigned h = f32_to_f16(omega);
            omega_pair[m] = c == 0 ? h : (omega_pair[m] | (h << 16));
            weight_part = fmaf(omega, omega, weight_part);
        }
    }
    return weight_part;
}

// The noisy group's transformed coefficients in g along the group: Haar, Wiener shrinkage by
// omega_pair (WIENER) or hard thresholding at thr, inverse Haar. Returns the lane's count of kept
// coefficients (hard thresholding; 0 for Wiener).
template <bool WIENER, int N, int NW>
__device__ __forceinline__ float shrink_columns(float* g, int lane, float thr, const unsigned (&omega_pair)[NW])
{
    float kept = 0.0f;
#pragma unroll
    for (int c = 0; c < COLUMN_COEFS; ++c) {
        const int t = lane + 32 * c;
        if (t >= PP) continue;
        float v[N];
        load_column(g, t, v);
        haar_regs(v, false);
#pragma unroll
        for (int m = 0; m < N; ++m) {
            if (WIENER) {
                v[m] = __fmul_rn(v[m], f16_to_f32((unsigned short)(omega_pair[m] >> (16 * c))));
            } else if (fabsf(v[m]) <= thr) {
                v[m] = 0.0f;
            } else {
                kept += 1.0f;
            }
        }
        haar_regs(v, true);
        store_column(g, t, v);
    }
    return kept;
}

// N of a group of n (a power of two <= NW, the step's largest group), capped at NW so that no
// larger arrays are made.
#define BM3D_GROUP_SIZES(CALL)                     \
    switch (n) {                                   \
        case 32: return CALL(NW < 32 ? NW : 32);   \
        case 16: return CALL(NW < 16 ? NW : 16);   \
        case 8: return CALL(NW < 8 ? NW : 8);      \
        case 4: return CALL(NW < 4 ? NW : 4);      \
        case 2: return CALL(NW < 2 ? NW : 2);      \
        default: return CALL(1);                   \
    }

template <int NW>
__device__ __forceinline__ float wiener_weights_any(const float* g, int n, int lane, float sigma, unsigned (&omega_pair)[NW])
{
#define BM3D_CALL(N) wiener_weights<N>(g, lane, sigma, omega_pair)
    BM3D_GROUP_SIZES(BM3D_CALL)
#undef BM3D_CALL
}

template <bool WIENER, int NW>
__device__ __forceinline__ float shrink_any(float* g, int n, int lane, float thr, const unsigned (&omega_pair)[NW])
{
#define BM3D_CALL(N) shrink_columns<WIENER, N>(g, lane, thr, omega_pair)
    BM3D_GROUP_SIZES(BM3D_CALL)
#undef BM3D_CALL
}

// FRAMES: per-frame groups, members added to the sums of their own frames (`sum_slot`); otherwise
// only the target's members (frame code BM3D_CODE_BIAS) are, to the one set of sums at num / wimg
// (a separate kernel, so that the default path keeps its registers).
// PHASE 0: the whole step in one launch; 1: block matching only (steps 1-3), the group written to
// a.group_members; 2: filtering and aggregation only (step 4) of the group read from there. The
// Wiener step with groups of 32 runs apart (src/bm3d/cuda.rs): in one launch it runs at a quarter
// of the SM's warps (128 registers; before runs 182-187 its group buffer held it there too),
// which the block matching, a matter of load latency, needs more of.
template <bool WIENER, bool MIRROR, bool FRAMES, int PHASE>
__device__ void bm3d_step(const Bm3dArgs& a)
{
    constexpr int NMAX = Step<WIENER>::NMAX;
    extern __shared__ __align__(16) float smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int r = blockIdx.x * WARPS + warp;
    if (r >= a.refs_x * a.refs_y) return;  // whole warps leave together
    // A multiple of 4 (the host's): the compiler then knows every warp's reference patch is
    // 16-byte aligned and reads its rows as vectors.
    float* ref = smem + warp * ((a.group_floats >> 2) << 2);
    u64* queue = (u64*)(ref + REF_FLOATS);      // 64 keys (WarpBest)
    int* seeds = (int*)(queue + 64);            // (SEEDS + 1) x (y, x)
    int* members = seeds + SEED_INTS;           // NMAX x (code, y, x, with FRAMES the sum slot or -1)
    float* g = (float*)(members + 4 * NMAX);    // NMAX x PP (noisy group, `gidx`), 16-byte aligned

    const int x0 = corner(r % a.refs_x, a.block_step, a.ew);
    const int y0 = corner(r / a.refs_x, a.block_step, a.eh);
    const int max_x = a.ew - PATCH, max_y = a.eh - PATCH;
    const float tau = a.tau_ssd;

    int n;
    if (PHASE != 2) {
        // 1. The reference patch.
        for (int e = lane; e < a.n_planes * PP; e += 32) {
            const int j = e / PP, p = e % PP;
            ref[e] = match_at<WIENER>(a, a.ref_code, j, x0 + p % PATCH, y0 + p / PATCH);
        }
        __syncwarp();

        // The group's best NMAX - 1 keys within tau besides R, across the lanes (WarpBest).
        WarpBest<NMAX - 1> top;
        u64 seed_list[SEEDS];
        list_clear(seed_list);

        // 2a. The reference's frame, exhaustively, or its result kept by bm3d_search (the same
        // candidates: the best NMAX - 1 within tau, ascending, and the best SEEDS - 1, keys of frame
        // code 0).
        if (a.cache) {
            const u64* kept = a.cache + (u64)r * (NMAX + SEEDS);
            const u64 code_bits = (u64)a.ref_code << 28;
            u64 k = lane < NMAX - 1 ? kept[lane] : KEY_NONE;
            top.start(queue, lane, k == KEY_NONE ? KEY_NONE : k | code_bits);
            if (lane == 0) {
                seeds[0] = y0; seeds[1] = x0;
                for (int s = 1; s < a.n_seeds; ++s) {
                    k = kept[(NMAX - 1) + s - 1];
                    seeds[2 * s] = k == KEY_NONE ? -1 : key_y(k);
                    seeds[2 * s + 1] = k == KEY_NONE ? -1 : key_x(k);
                }
            }
        } else {
            top.start(queue, lane, KEY_NONE);
            own_frame_search<WIENER, MIRROR>(a, ref, x0, y0, top, seed_list, lane);
            // Seeds of the reference frame's neighbours: R, then the best others.
            if (lane == 0) { seeds[0] = y0; seeds[1] = x0; }
            for (int s = 1; s < a.n_seeds; ++s) {
                const u64 k = warp_take_best(seed_list);
                if (lane == 0) {
                    seeds[2 * s] = k == KEY_NONE ? -1 : key_y(k);
                    seeds[2 * s + 1] = k == KEY_NONE ? -1 : key_x(k);
                }
            }
        }
        __syncwarp();
        int first[2 * SEEDS];
    #pragma unroll
        for (int s = 0; s < 2 * SEEDS; ++s) first[s] = seeds[s];

        // 2b. The other frames: predictive search, backwards then forwards: the squares of side
        // 2 seed_radius + 1 around the seeds, each position once (a position in an earlier seed's
        // square is that seed's). Each seed's square of patches is staged in the group buffer (free
        // until step 4): its candidates then read shared memory, not L1 lines of several rows each.
        float* stage = g;
        // 8-bit samples of the hard step: the squares as bytes after the reference packed four
        // samples a word (staged_ssd_bytes), and the reference's squared norm.
        constexpr bool BYTES = !WIENER && !MIRROR && SAMPLE_BYTES == 1;
        unsigned* refw = (unsigned*)g;
        unsigned char* stage_bytes = (unsigned char*)g + a.n_planes * PP;
        int ref_norm = 0;
        if (BYTES) {
            for (int e = lane; e < a.n_planes * (PP / 4); e += 32) {
                const int j = e / (PP / 4), q = 4 * (e % (PP / 4));
                const unsigned char* p = noisy_plane(a, a.ref_code, j) + (y0 + q / PATCH) * a.w + x0 + q % PATCH;
                refw[e] = (unsigned)__ldg(p) | ((unsigned)__ldg(p + 1) << 8) | ((unsigned)__ldg(p + 2) << 16) | ((unsigned)__ldg(p + 3) << 24);
                ref_norm = (int)__dp4a(refw[e], refw[e], (unsigned)ref_norm);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ref_norm += __shfl_xor_sync(0xFFFFFFFFu, ref_norm, o);
        }
        for (int dir = -1; dir <= 1; dir += 2) {
            if (dir == 1) {
                __syncwarp();
    #pragma unroll
                for (int s = 0; s < 2 * SEEDS; ++s) if (lane == 0) seeds[s] = first[s];
                __syncwarp();
            }
            for (int code = a.ref_code + dir; code >= 0 && code < BM3D_FRAME_CODES && a.slot[code] >= 0; code += dir) {
                int squares = a.n_seeds;
                if (a.motion != nullptr) {
                    // Motion seeds: the first seed's companion, moved along the coarse motion from
                    // the frame one step closer (code - dir) to this one, goes first.
                    int moved = 0;
                    __syncwarp();  // every lane has read the seeds (`first` included)
                    if (lane == 0 && seeds[0] >= 0) {
                        const int sy = seeds[0], sx = seeds[1];
                        const int span = MOTION_CELL * MOTION_BLOCK;
                        const int by = min(sy / span, a.motion_bh - 1), bx = min(sx / span, a.motion_bw - 1);
                        const int* v = a.motion + (u64)a.slot[code - dir] * a.motion_stride + (dir > 0 ? a.motion_dir : 0) + 2 * (by * a.motion_bw + bx);
                        const int my = min(max(sy + MOTION_CELL * v[0], 0), max_y), mx = min(max(sx + MOTION_CELL * v[1], 0), max_x);
                        if (my != sy || mx != sx) {
                            for (int s = a.n_seeds; s > 0; --s) { seeds[2 * s] = seeds[2 * s - 2]; seeds[2 * s + 1] = seeds[2 * s - 1]; }
                            seeds[0] = my; seeds[1] = mx;
                            moved = 1;
                        }
                    }
                    squares += __shfl_sync(0xFFFFFFFFu, moved, 0);
                    __syncwarp();
                }
                list_clear(seed_list);
                for (int si = 0; si < squares; ++si) {
                    const int sy = seeds[2 * si], sx = seeds[2 * si + 1];
                    if (sy < 0) continue;  // warp-uniform
                    // Corners [xa, xb] x [ya, yb]; the staged samples [xa, xb + PATCH) x [ya, yb + PATCH).
                    const int xa = max(sx - a.seed_radius, 0), xb = min(sx + a.seed_radius, max_x);
                    const int ya = max(sy - a.seed_radius, 0), yb = min(sy + a.seed_radius, max_y);
                    const int cw = xb - xa + 1, count = cw * (yb - ya + 1);
                    const int rw = cw + PATCH - 1, rh = yb - ya + PATCH, plane_floats = rw * rh;
                    const int pitch = staged_pitch(rw), plane_bytes = pitch * rh;
                    __syncwarp();  // the previous square's candidates are scored
                    // Whole rows per pass (rw <= 2 BM3D_MAX_SEED_RADIUS + PATCH <= 32): no division
                    // per sample.
                    const int rows_per_pass = 32 / rw, col = lane % rw, row0 = lane / rw;
                    if (row0 < rows_per_pass) {
                        for (int j = 0; j < a.n_planes; ++j) {
                            for (int row = row0; row < rh; row += rows_per_pass) {
                                if (BYTES) {
                                    stage_bytes[j * plane_bytes + row * pitch + col] = __ldg(noisy_plane(a, code, j) + (ya + row) * a.w + xa + col);
                                } else {
                                    stage[j * plane_floats + row * rw + col] = match_in<WIENER, MIRROR>(a, code, j, xa + col, ya + row);
                                }
                            }
                        }
                    }
                    __syncwarp();
                    for (int base = 0; base < count; base += 32) {
                        const int c = base + lane;
                        const int u = c % cw, v = c / cw;
                        const int x = xa + u, y = ya + v;
                        bool ok = c < count;
                        for (int q = 0; ok && q < si; ++q) {
                            const int qy = seeds[2 * q], qx = seeds[2 * q + 1];
                            ok = !(qy >= 0 && abs(qy - y) <= a.seed_radius && abs(qx - x) <= a.seed_radius);
                        }
                        float d = 0.0f;
                        if (ok && BYTES) d = (float)(ref_norm + staged_ssd_bytes(refw, stage_bytes + v * pitch, u, a.n_planes, pitch, plane_bytes));
                        else if (ok) d = staged_ssd(ref, stage + v * rw + u, a.n_planes, rw, plane_floats);
                        const u64 k = make_key(d, code, y, x);
                        top.offer(ok && d <= tau, k);
                        if (ok) list_insert(seed_list, k);
                    }
                }
                __syncwarp();
                for (int s = 0; s < a.n_seeds; ++s) {
                    const u64 k = warp_take_best(seed_list);
                    if (lane == 0) {
                        seeds[2 * s] = k == KEY_NONE ? -1 : key_y(k);
                        seeds[2 * s + 1] = k == KEY_NONE ? -1 : key_x(k);
                    }
                }
                __syncwarp();
            }
        }
        top.finish();

        // 3. The group: R, then the best keys in order, cut to a power of two.
        const bool member = lane < NMAX - 1 && top.best != KEY_NONE;
        const int count = 1 + __popc(__ballot_sync(0xFFFFFFFFu, member));
        if (lane == 0) { members[0] = a.ref_code; members[1] = y0; members[2] = x0; if (FRAMES) members[3] = a.sum_slot[a.ref_code]; }
        if (member) {
            members[4 * (lane + 1)] = key_code(top.best);
            members[4 * (lane + 1) + 1] = key_y(top.best);
            members[4 * (lane + 1) + 2] = key_x(top.best);
            if (FRAMES) members[4 * (lane + 1) + 3] = a.sum_slot[key_code(top.best)];
        }
        n = 1 << (31 - __clz(count));
        __syncwarp();
        if (PHASE == 1) {
            // Block matching apart: the group for the filtering launch that follows.
            int* keep = a.group_members + (u64)r * BAYES_MEMBER_INTS;
            if (lane == 0) keep[0] = n;
            for (int e = lane; e < 4 * n; e += 32) keep[4 + e] = members[e];
            return;
        }
    } else {
        // Filtering apart: the group the block-matching launch wrote.
        const int* keep = a.group_members + (u64)r * BAYES_MEMBER_INTS;
        n = keep[0];
        for (int e = lane; e < 4 * n; e += 32) members[e] = keep[4 + e];
        __syncwarp();
    }
    // With the Bayesian estimate (bayes.cu, launched next), the group it estimates.
    if (WIENER && a.bayes_members) {
        int* keep = a.bayes_members + (u64)r * BAYES_MEMBER_INTS;
        if (lane == 0) keep[0] = n;
        for (int e = lane; e < 4 * n; e += 32) keep[4 + e] = members[e];
    }

    // 4. Filtering and aggregation, plane by plane. The Haar transforms along the group, the
    // shrinkage and the Wiener weights work on one coefficient of every patch at a time in
    // registers (wiener_weights, shrink_columns), the weights kept there as f16 pairs between the basic
    // estimate's group and the noisy one.
    const u64 extent = (u64)a.ew * a.eh;
    for (int j = 0; j < a.n_planes; ++j) {
        const float sigma = a.sigma[j];
        float weight_part = 0.0f;
        unsigned omega_pair[NMAX];  // Wiener only
        if (WIENER) {
            // The basic estimate's group first, in g: its coefficients give the Wiener weights.
            gather_group<true, MIRROR>(a, g, members, n, j, lane);
            __syncwarp();
            transform2<Bm3dFwd<true>>(g, n, lane);
            weight_part = wiener_weights_any(g, n, lane, sigma, omega_pair);
            __syncwarp();
        }
        gather_group<false, MIRROR>(a, g, members, n, j, lane);
        __syncwarp();
        transform2<Bm3dFwd<WIENER>>(g, n, lane);
        weight_part += shrink_any<WIENER>(g, n, lane, a.lambda_ * sigma, omega_pair);
        __syncwarp();
        const float weight = 1.0f / fmaxf(warp_sum(weight_part), 1.0f);
        transform2<Bm3dInv<WIENER>>(g, n, lane);
        // With the Bayesian estimate, this step's estimate is half of the group's (bayes.cu adds
        // the other half with this weight); a power of two, so the products stay exact.
        const bool bayes = WIENER && a.bayes_members;
        if (bayes && lane == 0) a.bayes_weight[(u64)r * BM3D_MAX_PLANES + j] = weight;
        const float half = bayes ? 0.5f : 1.0f;
        // The group's weight, the Kaiser window and the fixed-point scale, per lane: element e of
        // the group (e = lane mod 32) is coefficient p = (lane + (e & 32)) mod PP of its patch
        // (PP is 16 or 64), so a lane needs two window values, read once (a constant-memory read
        // indexed by lane is serialised across the warp). FIXED_ONE is a power of two, so the
        // product equals weight * window * value * FIXED_ONE bit for bit.
        const float scale_lo = half * weight * BM3D_KAISER[lane % PP] * BM3D_FIXED_ONE;
        const float scale_hi = half * weight * BM3D_KAISER[(lane + 32) % PP] * BM3D_FIXED_ONE;
        // Lane m < n finds member m's first sum (none: its frame keeps no sums) and hands it to
        // the lanes that add that member's samples, as gather_group does.
        u64 first = 0;
        if (lane < n) {
            const int ss = FRAMES ? members[4 * lane + 3] : (members[4 * lane] == BM3D_CODE_BIAS ? 0 : -1);
            if (ss >= 0)
                first = (u64)(a.num + (FRAMES ? (u64)ss * a.sum_stride : 0) + j * extent + (u64)members[4 * lane + 1] * a.ew + members[4 * lane + 2]);
        }
        if (!MIRROR && PATCH == 8) {
            // Whole members, as gather_group's path for 8x8 patches: samples lane and lane + 32.
            const int off_lo = (lane >> 3) * a.ew + (lane & 7), off_hi = off_lo + 4 * a.ew;
            for (int m0 = 0; m0 < n; m0 += 4) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const u64 base = shfl_u64(first, (m0 + i) & 31);  // every lane takes part
                    if (m0 + i >= n || base == 0) continue;
                    const float* at = g + (m0 + i) * PP + (lane ^ (8 * i));  // gidx(m0 + i, lane)
                    atomicAdd((unsigned long long*)base + off_lo, (unsigned long long)__float2ll_rn(scale_lo * at[0]));
                    atomicAdd((unsigned long long*)base + off_hi, (unsigned long long)__float2ll_rn(scale_hi * at[32]));
                }
            }
        } else {
            for (int e0 = 0; e0 < n * PP; e0 += 32) {
                const int e = e0 + lane, m = e / PP, p = e % PP;
                const u64 base = shfl_u64(first, m & 31);
                if (e >= n * PP || base == 0) continue;
                const long long v = __float2ll_rn(((e & 32) ? scale_hi : scale_lo) * g[gidx(m, p)]);
                atomicAdd((unsigned long long*)base + (p / PATCH) * a.ew + p % PATCH, (unsigned long long)v);
            }
        }
        const int ss = lane >= n ? -1 : FRAMES ? members[4 * lane + 3] : (members[4 * lane] == BM3D_CODE_BIAS ? 0 : -1);
        if (ss >= 0) {
            const long long wv = __float2ll_rn(weight * BM3D_FIXED_ONE);
            long long* wimg = a.wimg + (FRAMES ? (u64)ss * a.sum_stride : 0) + j * extent;
            atomicAdd((unsigned long long*)(wimg + (u64)members[4 * lane + 1] * a.ew + members[4 * lane + 2]), (unsigned long long)wv);
        }
        __syncwarp();
    }
}

// Registers of the group kernels: ptxas's own choice (64 a thread, 8 blocks of 4 warps), but
// Wiener groups of 32 in one launch may use 128 (4 blocks; fewer spills: +3-6% on the rows that
// ran them when their shared memory held them to 4 blocks anyway, runs 152-153), and their
// filtering launch apart 96 (5 blocks, what its 40 KB of shared memory a block allows: +2%
// against 128, run 184).
#define GROUP_BOUNDS_HARD __launch_bounds__(WARPS * 32)
#if NMAX_WIENER >= 32
#define GROUP_BOUNDS_WIENER __launch_bounds__(WARPS * 32, 4)
#define GROUP_BOUNDS_FILTER __launch_bounds__(WARPS * 32, 5)
#else
#define GROUP_BOUNDS_WIENER __launch_bounds__(WARPS * 32)
#define GROUP_BOUNDS_FILTER __launch_bounds__(WARPS * 32)
#endif

// Planes at least a patch wide and high (nearly always) take the path without border reads.
#define BM3D_GROUP_KERNEL(name, bounds, wiener, frames, phase)                        \
    extern "C" __global__ void bounds name(const Bm3dArgs a)                          \
    {                                                                                 \
        if (a.w >= PATCH && a.h >= PATCH) bm3d_step<wiener, false, frames, phase>(a); \
        else bm3d_step<wiener, true, frames, phase>(a);                               \
    }
BM3D_GROUP_KERNEL(bm3d_hard, GROUP_BOUNDS_HARD, false, false, 0)
BM3D_GROUP_KERNEL(bm3d_wiener, GROUP_BOUNDS_WIENER, true, false, 0)
BM3D_GROUP_KERNEL(bm3d_hard_frames, GROUP_BOUNDS_HARD, false, true, 0)
BM3D_GROUP_KERNEL(bm3d_wiener_frames, GROUP_BOUNDS_WIENER, true, true, 0)
// The Wiener step apart: block matching (shared memory for the staged squares only, registers
// of ptxas's choice) and filtering.
BM3D_GROUP_KERNEL(bm3d_wiener_match, GROUP_BOUNDS_HARD, true, false, 1)
BM3D_GROUP_KERNEL(bm3d_wiener_filter, GROUP_BOUNDS_FILTER, true, false, 2)
BM3D_GROUP_KERNEL(bm3d_wiener_frames_match, GROUP_BOUNDS_HARD, true, true, 1)
BM3D_GROUP_KERNEL(bm3d_wiener_frames_filter, GROUP_BOUNDS_FILTER, true, true, 2)
