// The own-frame search on tensor cores (sm_80 and later, 8x8 patches; src/bm3d/cuda.rs uses it
// where it fits, bm3d_search otherwise): the same candidates, keys and selection as bm3d_search
// (search.cu), with each distance as |r|^2 + |c|^2 - 2 r.c, the cross terms of 16 reference
// patches against 8 candidates at a time in one mma (m16n8k16: f16 inputs, f32 sums).
//
// A block takes a TC_SIDE x TC_SIDE tile of the reference grid (TC_REFS patches, one warp each)
// and the union of their search squares: uw x uh corners from (ux0, uy0), at most
// TC_UNION = side + (TC_SIDE - 1) block_step across and down (side = 2 radius + 1).
//   1. Per plane: the union's samples (round8(uw) + 8 columns, uh + 7 rows) less a shift mu (the
//      distances do not change), as f16 pairs (sample x, sample x + 1), so that a candidate's two
//      neighbouring samples are one 32-bit read at any x; with SPLIT (basic estimates, samples
//      of more than 8 bits) also the remainders v - f16(v) as a second pair array, and the cross
//      term as hi.hi + hi.lo + lo.hi (three mma: about f32's precision). The candidates' squared
//      norms by box sums (rows of 8, then columns).
//   2. Each warp takes rows of 8 candidates in turn: 4 (SPLIT: 12) mma over the 64 samples; a
//      lane's results are two neighbouring candidates of two reference patches, each pair one
//      8-byte store into that patch's distances over the whole union (distances added up over
//      the planes), without asking whether the candidate lies in the patch's square.
//   3. Warp m selects for reference patch m from the part of the union that is its square, as
//      bm3d_search does (search_select).
// Exact in step 1 with 8-bit samples: samples less an integer mu are integers of magnitude at most
// 255, exact in f16, and every product and partial sum stays below 2^24 (64 x 255^2 per plane, 3
// planes at most), so the distances, and the keys, equal bm3d_search's bit for bit.
//
// Shared memory (32-bit words; the host computes the same, src/bm3d/cuda.rs `search_tc_bytes`):
//   dist   [TC_REFS][TC_UNION][us] f32  each patch's distances over the union, us = round2(TC_UNION)
//   queue  [TC_REFS][128]               64 keys per warp (WarpBest)
//   hi     [uh + 7 <= TC_UNION + 7][tw] f16x2, tw = round8(TC_UNION) + 8
//   lo     the same, SPLIT only
//   rowsq  [TC_UNION + 7][TC_UNION] f32  sums of 8 squared samples along rows
//   norm   [TC_UNION][us] f32           squared norms of the candidates

#define TC_SIDE 4
#define TC_REFS (TC_SIDE * TC_SIDE)
#define TC_THREADS (TC_REFS * 32)

// One reference patch of the tile: its corner and search square.
struct TcRef {
    int x0, y0, xa, xb, ya, yb, cols;
    bool valid;
};

__device__ __forceinline__ TcRef tc_ref(const Bm3dArgs& a, int rx0, int ry0, int m)
{
    TcRef t;
    const int rx = rx0 + m % TC_SIDE, ry = ry0 + m / TC_SIDE;
    t.valid = rx < a.refs_x && ry < a.refs_y;
    t.x0 = corner(min(rx, a.refs_x - 1), a.block_step, a.ew);
    t.y0 = corner(min(ry, a.refs_y - 1), a.block_step, a.eh);
    t.xa = max(t.x0 - a.radius, 0);
    t.xb = min(t.x0 + a.radius, a.ew - PATCH);
    t.ya = max(t.y0 - a.radius, 0);
    t.yb = min(t.y0 + a.radius, a.eh - PATCH);
    t.cols = t.xb - t.xa + 1;
    return t;
}

#if __CUDA_ARCH__ >= 800 && PATCH == 8

// Sample (x, y) of plane j of the reference frame in 8-bit units (inside the plane).
template <bool WIENER>
__device__ __forceinline__ float tc_sample(const Bm3dArgs& a, int j, int x, int y)
{
    if (WIENER) return __ldg(basic_plane(a, a.ref_code, j) + y * a.w + x);
#if SAMPLE_BYTES == 1
    return (float)__ldg(noisy_plane(a, a.ref_code, j) + y * a.w + x);
#else
    return (float)__ldg((const unsigned short*)noisy_plane(a, a.ref_code, j) + y * a.w + x) * a.inv_scale;
#endif
}

// (first, second) as f16 in the low and high halves, rounded to nearest.
__device__ __forceinline__ unsigned tc_pack(float first, float second)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}

__device__ __forceinline__ float tc_low(unsigned p) { return f16_to_f32((unsigned short)(p & 0xFFFFu)); }
__device__ __forceinline__ float tc_high(unsigned p) { return f16_to_f32((unsigned short)(p >> 16)); }

// c += a b: a 16 x 16 (row major, f16), b 16 x 8 (column major, f16), c 16 x 8 f32.
__device__ __forceinline__ void tc_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <bool WIENER>
__device__ void bm3d_search_tc(const Bm3dArgs& a)
{
    constexpr bool SPLIT = WIENER || SAMPLE_BYTES != 1;
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int un = 2 * a.radius + 1 + (TC_SIDE - 1) * a.block_step;  // TC_UNION
    const int us = (un + 1) & ~1, tw = ((un + 7) & ~7) + 8;
    const int ref_floats = un * us;
    float* dist = smem;
    u64* queues = (u64*)(dist + TC_REFS * ref_floats);  // ref_floats is even
    unsigned* hi = (unsigned*)(queues + TC_REFS * 64);
    unsigned* lo = hi + (SPLIT ? tw * (un + 7) : 0);
    float* rowsq = (float*)(lo + tw * (un + 7));
    float* norm = rowsq + un * (un + 7);

    const int tiles_x = (a.refs_x + TC_SIDE - 1) / TC_SIDE;
    const int rx0 = (blockIdx.x % tiles_x) * TC_SIDE, ry0 = (blockIdx.x / tiles_x) * TC_SIDE;
    const TcRef first = tc_ref(a, rx0, ry0, 0);
    const TcRef last = tc_ref(a, rx0, ry0, TC_REFS - 1);  // clamped to the grid's last patch
    const int ux0 = first.xa, uy0 = first.ya;
    const int uw = last.xb - ux0 + 1, uh = last.yb - uy0 + 1;
    const int xblocks = (uw + 7) >> 3, rows = uh + PATCH - 1;

    // This lane's reference patches in the mma results: rows lane / 4 and lane / 4 + 8.
    const int g = lane >> 2, q = lane & 3;
    const TcRef r0 = tc_ref(a, rx0, ry0, g), r1 = tc_ref(a, rx0, ry0, g + 8);

    for (int j = 0; j < a.n_planes; ++j) {
        __syncthreads();  // the previous plane's reads of the tile are done
        // 1. The tile, less mu (an integer: 8-bit samples stay integers).
        const float mu = rintf(tc_sample<WIENER>(a, j, first.x0 + PATCH / 2, first.y0 + PATCH / 2));
        for (int e = threadIdx.x; e < tw * rows; e += TC_THREADS) {
            const int y = uy0 + e / tw, x = ux0 + e % tw;
            // Columns past the union's last candidate + 7 only feed discarded candidates.
            const float v0 = tc_sample<WIENER>(a, j, min(x, a.ew - 1), y) - mu;
            const float v1 = tc_sample<WIENER>(a, j, min(x + 1, a.ew - 1), y) - mu;
            const unsigned h = tc_pack(v0, v1);
            hi[e] = h;
            if (SPLIT) lo[e] = tc_pack(v0 - tc_low(h), v1 - tc_high(h));
        }
        __syncthreads();
        for (int e = threadIdx.x; e < uw * rows; e += TC_THREADS) {
            const int y = e / uw, x = e % uw;
            float s = 0.0f;
#pragma unroll
            for (int c = 0; c < PATCH; ++c) {
                const int at = y * tw + x + c;
                const float v = SPLIT ? tc_low(hi[at]) + tc_low(lo[at]) : tc_low(hi[at]);
                s = fmaf(v, v, s);
            }
            rowsq[y * un + x] = s;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < uw * uh; e += TC_THREADS) {
            const int y = e / uw, x = e % uw;
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < PATCH; ++i) s += rowsq[(y + i) * un + x];
            norm[y * us + x] = s;
        }
        __syncthreads();

        // 2. Cross terms. A (16 reference patches x 64 samples, k = row * 8 + column), per k-slice
        // of two patch rows: a lane holds rows g and g + 8, columns 2q, 2q + 1 and 8 further.
        unsigned ahi[4][4], alo[4][4];
        const int at0 = (r0.y0 - uy0) * tw + (r0.x0 - ux0) + 2 * q, at1 = (r1.y0 - uy0) * tw + (r1.x0 - ux0) + 2 * q;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            ahi[k][0] = r0.valid ? hi[at0 + 2 * k * tw] : 0u;
            ahi[k][1] = r1.valid ? hi[at1 + 2 * k * tw] : 0u;
            ahi[k][2] = r0.valid ? hi[at0 + (2 * k + 1) * tw] : 0u;
            ahi[k][3] = r1.valid ? hi[at1 + (2 * k + 1) * tw] : 0u;
            if (SPLIT) {
                alo[k][0] = r0.valid ? lo[at0 + 2 * k * tw] : 0u;
                alo[k][1] = r1.valid ? lo[at1 + 2 * k * tw] : 0u;
                alo[k][2] = r0.valid ? lo[at0 + (2 * k + 1) * tw] : 0u;
                alo[k][3] = r1.valid ? lo[at1 + (2 * k + 1) * tw] : 0u;
            }
        }
        const float n0 = norm[(r0.y0 - uy0) * us + (r0.x0 - ux0)], n1 = norm[(r1.y0 - uy0) * us + (r1.x0 - ux0)];
        float* d0 = dist + g * ref_floats;
        float* d1 = dist + (g + 8) * ref_floats;
        for (int nb = warp; nb < uh * xblocks; nb += TC_REFS) {
            const int cy = nb / xblocks, cx = (nb - cy * xblocks) << 3;  // union-relative
            // B: candidate (cx + g, cy), samples of patch rows 2k, 2k + 1, columns 2q, 2q + 1.
            const int at = cy * tw + cx + g + 2 * q;
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const unsigned b0 = hi[at + 2 * k * tw], b1 = hi[at + (2 * k + 1) * tw];
                tc_mma(c, ahi[k], b0, b1);
                if (SPLIT) {
                    tc_mma(c, ahi[k], lo[at + 2 * k * tw], lo[at + (2 * k + 1) * tw]);
                    tc_mma(c, alo[k], b0, b1);
                }
            }
            // Results: c[0], c[1] of patch g, c[2], c[3] of patch g + 8, for candidates ux and
            // ux + 1 (ux even, us even: 8-byte aligned). A candidate at uw (past the union, when
            // ux + 1 == uw) gets a value that is never read.
            const int ux = cx + 2 * q;
            if (ux >= uw) continue;
            const int at_d = cy * us + ux;
            const float2 nc = *(const float2*)(norm + at_d);
            // (|r|^2 + |c|^2) - 2 r.c; at least 0 (rounding with SPLIT), as the key needs.
            float2 e0 = make_float2(fmaxf(n0 + nc.x - 2.0f * c[0], 0.0f), fmaxf(n0 + nc.y - 2.0f * c[1], 0.0f));
            float2 e1 = make_float2(fmaxf(n1 + nc.x - 2.0f * c[2], 0.0f), fmaxf(n1 + nc.y - 2.0f * c[3], 0.0f));
            if (j > 0) {
                const float2 p0 = *(const float2*)(d0 + at_d), p1 = *(const float2*)(d1 + at_d);
                e0 = make_float2(p0.x + e0.x, p0.y + e0.y);
                e1 = make_float2(p1.x + e1.x, p1.y + e1.y);
            }
            if (r0.valid) *(float2*)(d0 + at_d) = e0;
            if (r1.valid) *(float2*)(d1 + at_d) = e1;
        }
    }
    __syncthreads();

    // 3. Selection, one warp per reference patch.
    const TcRef r = tc_ref(a, rx0, ry0, warp);
    if (!r.valid) return;
    const int count = r.cols * (r.yb - r.ya + 1);
    const float* window = dist + warp * ref_floats + (r.ya - uy0) * us + (r.xa - ux0);
    search_select<WIENER>(a, (ry0 + warp / TC_SIDE) * a.refs_x + rx0 + warp % TC_SIDE, window, us, queues + warp * 64, r.xa, r.ya, r.cols, count, r.y0 - r.ya,
                          r.x0 - r.xa, lane);
}

#endif

// Launched by the host only on devices of compute capability 8.0 and later, for 8x8 patches and
// planes of at least 8 x 8 samples (elsewhere bm3d_search).
extern "C" __global__ void __launch_bounds__(TC_THREADS, 2) bm3d_search_tc_hard(const Bm3dArgs a)
{
#if __CUDA_ARCH__ >= 800 && PATCH == 8
    bm3d_search_tc<false>(a);
#else
    __trap();
#endif
}

extern "C" __global__ void __launch_bounds__(TC_THREADS, 2) bm3d_search_tc_wiener(const Bm3dArgs a)
{
#if __CUDA_ARCH__ >= 800 && PATCH == 8
    bm3d_search_tc<true>(a);
#else
    __trap();
#endif
}
