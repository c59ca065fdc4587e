// The group transform of one warp, in its shared-memory group buffer g[n][PATCH * PATCH]: the
// orthonormal 2D DCT-II of each patch (rows, then columns; BM3D_DCT is the DCT matrix, generated
// by the host in front of the program: src/bm3d/cuda.rs) and the normalized Walsh-Hadamard
// transform along the group (its own inverse). Work items are spread over the lanes; each step
// ends with __syncwarp, so the next reads what the whole warp wrote.
#pragma once

#define PP (PATCH * PATCH)

// Rows (columns = false) or columns of every patch of g, forward or inverse.
__device__ __forceinline__ void dct_pass(float* g, int n, bool columns, bool inverse, int lane)
{
    for (int it = lane; it < n * PATCH; it += 32) {
        float* base = g + (it / PATCH) * PP;
        const int line = it % PATCH;
        const int stride = columns ? PATCH : 1;
        float* v = columns ? base + line : base + line * PATCH;
        float in[PATCH];
#pragma unroll
        for (int i = 0; i < PATCH; ++i) in[i] = v[i * stride];
#pragma unroll
        for (int f = 0; f < PATCH; ++f) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < PATCH; ++i) s = fmaf(inverse ? BM3D_DCT[i * PATCH + f] : BM3D_DCT[f * PATCH + i], in[i], s);
            v[f * stride] = s;
        }
    }
    __syncwarp();
}

__device__ __forceinline__ void dct2(float* g, int n, bool inverse, int lane)
{
    dct_pass(g, n, false, inverse, lane);
    dct_pass(g, n, true, inverse, lane);
}

// Normalized WHT of length n (a power of two) along the group at coefficient t: g[m * PP + t].
__device__ __forceinline__ void wht_column(float* g, int n, int t)
{
    for (int len = 1; len < n; len <<= 1) {
        for (int i = 0; i < n; i += 2 * len) {
            for (int j = i; j < i + len; ++j) {
                const float a = g[j * PP + t], b = g[(j + len) * PP + t];
                g[j * PP + t] = a + b;
                g[(j + len) * PP + t] = a - b;
            }
        }
    }
    const float s = rsqrtf((float)n);
    for (int m = 0; m < n; ++m) g[m * PP + t] *= s;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
