// The Bayesian estimate of the Wiener step's groups (`bayes`, src/bm3d/mod.rs "Step 2 with the
// Bayesian estimate"; src/bm3d/cpu.rs and mod.rs `bayes_estimate` compute the same on the host):
// launched right after a Wiener group kernel with the same arguments and grid, one warp per
// reference patch, it reads the group that kernel formed (`bayes_members`) and its weight per
// plane (`bayes_weight`), estimates each member from the group's basic estimates
//
//     x_m = mu + Bc^T G^-1 Bc (y_m - mu),  G = Bc Bc^T + n sigma^2 I
//
// (mu the members' mean basic patch, Bc the centred basic patches as rows: the covariance's
// C (C + sigma^2 I)^-1 through the n x n Gram matrix), and adds half of it to the numerators
// with the Wiener step's weight and window; the Wiener kernel adds the other half, its own
// estimate's, and the weights. Scaled by 1 / (n sigma^2), G has eigenvalues of at least 1, which
// keeps its Cholesky factor well conditioned in f32.
//
// Shared memory per warp, BAYES_FLOATS (src/bm3d/cuda.rs `bayes_floats`), rows padded to a
// multiple of 4 floats (16-byte vector reads) and 4 more (rows 1 apart fall in other banks):
//   bc   [NMAX_WIENER][BAYES_ROW]   centred basic patches
//   work BAYES_WORK floats          centred noisy patches [NMAX_WIENER][BAYES_ROW]; then G /
//                                   (n sigma^2) and its Cholesky factor [NMAX_WIENER][BAYES_GROW];
//                                   then the estimates [NMAX_WIENER][BAYES_ROW]
//   zt   [NMAX_WIENER][BAYES_ZROW]  (Bc (y_m - mu))^T / (n sigma^2), column m per member; then z
//   mean [PP]
#define BAYES_ROW (PP + 4)
#define BAYES_GROW (NMAX_WIENER + 1)
#define BAYES_ZROW (NMAX_WIENER + 4)
#define BAYES_ROUND4(x) (((x) + 3) & ~3)
#define BAYES_WORK BAYES_ROUND4(NMAX_WIENER * BAYES_ROW > NMAX_WIENER * BAYES_GROW ? NMAX_WIENER * BAYES_ROW : NMAX_WIENER * BAYES_GROW)
#define BAYES_FLOATS BAYES_ROUND4(NMAX_WIENER * BAYES_ROW + BAYES_WORK + NMAX_WIENER * BAYES_ZROW + PP)
static_assert(BAYES_FLOATS == BAYES_FLOATS_HOST, "the host sizes another shared layout (src/bm3d/cuda.rs bayes_floats)");

// C[i][j] = sum over t < PP of A[i][t] B[j][t], for i, j < n (rows of BAYES_ROW floats), handed
// to store(i, j, value). Each lane accumulates a 4 x 8 tile, rows (lane >> 2) + 8 r and columns
// (lane & 3) + 4 c: twelve 16-byte reads per 128 multiply-adds, and the 8 lanes of a quarter warp
// read rows that fall in different banks.
template <typename Store>
__device__ __forceinline__ void warp_abt(const float* A, const float* B, int n, int lane, Store store)
{
    const int i0 = lane >> 2, j0 = lane & 3;
    float acc[4][8];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][c] = 0.0f;
    const int rows = n > 8 ? (n + 7) / 8 : 1, cols = n > 4 ? (n + 3) / 4 : 1;  // tile rows and columns in use
#pragma unroll 1
    for (int t = 0; t < PP; t += 4) {
        float4 a[4], b[8];
#pragma unroll
        for (int r = 0; r < 4; ++r) if (r < rows) a[r] = *(const float4*)(A + (i0 + 8 * r) * BAYES_ROW + t);
#pragma unroll
        for (int c = 0; c < 8; ++c) if (c < cols) b[c] = *(const float4*)(B + (j0 + 4 * c) * BAYES_ROW + t);
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < 8; ++c)
                if (r < rows && c < cols) {
                    float v = acc[r][c];
                    v = fmaf(a[r].x, b[c].x, v);
                    v = fmaf(a[r].y, b[c].y, v);
                    v = fmaf(a[r].z, b[c].z, v);
                    acc[r][c] = fmaf(a[r].w, b[c].w, v);
                }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c)
            if (i0 + 8 * r < n && j0 + 4 * c < n) store(i0 + 8 * r, j0 + 4 * c, acc[r][c]);
}

template <bool FRAMES>
__device__ void bm3d_bayes_group(const Bm3dArgs& a)
{
    extern __shared__ __align__(16) float bayes_smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int r = blockIdx.x * WARPS + warp;
    if (r >= a.refs_x * a.refs_y) return;  // whole warps leave together
    float* bc = bayes_smem + warp * BAYES_FLOATS;
    float* work = bc + NMAX_WIENER * BAYES_ROW;
    float* zt = work + BAYES_WORK;
    float* mean = zt + NMAX_WIENER * BAYES_ZROW;
    float* yc = work;  // the noisy patches, then the estimates (same rows)
    float* gm = work;  // between them, G and its factor
    // [BAYES_MEMBER_INTS]: n, 3 ints unused, then NMAX_WIENER x (code, y, x, sum slot).
    const int* group = a.bayes_members + (u64)r * BAYES_MEMBER_INTS;
    const int n = group[0];
    const int* members = group + 4;
    const u64 extent = (u64)a.ew * a.eh;
    for (int j = 0; j < a.n_planes; ++j) {
        const float sigma = a.sigma[j];
        for (int e = lane; e < n * PP; e += 32) {
            const int m = e / PP, p = e % PP;
            const int code = members[4 * m], y = members[4 * m + 1] + p / PATCH, x = members[4 * m + 2] + p % PATCH;
            bc[m * BAYES_ROW + p] = basic_at(basic_plane(a, code, j), x, y, a);
            yc[m * BAYES_ROW + p] = noisy_at(noisy_plane(a, code, j), x, y, a);
        }
        __syncwarp();
        if (sigma != 0.0f) {  // sigma 0: the estimate is the noisy patch itself
            for (int p = lane; p < PP; p += 32) {
                float s = 0.0f;
                for (int m = 0; m < n; ++m) s += bc[m * BAYES_ROW + p];
                mean[p] = s / n;
            }
            __syncwarp();
            for (int e = lane; e < n * PP; e += 32) {
                const int m = e / PP, p = e % PP;
                bc[m * BAYES_ROW + p] -= mean[p];
                yc[m * BAYES_ROW + p] -= mean[p];
            }
            __syncwarp();
            const float inv = 1.0f / (n * sigma * sigma);
            // zt[q][m] = (yc_m . bc_q) / (n sigma^2), then G / (n sigma^2) over the noisy patches.
            warp_abt(yc, bc, n, lane, [&](int m, int q, float v) { zt[q * BAYES_ZROW + m] = v * inv; });
            __syncwarp();
            warp_abt(bc, bc, n, lane, [&](int p, int q, float v) { gm[p * BAYES_GROW + q] = v * inv + (p == q ? 1.0f : 0.0f); });
            __syncwarp();
            // Cholesky, column by column: lane i owns row i.
            for (int c = 0; c < n; ++c) {
                if (lane == c) {
                    float d = gm[c * BAYES_GROW + c];
                    for (int q = 0; q < c; ++q) d -= gm[c * BAYES_GROW + q] * gm[c * BAYES_GROW + q];
                    gm[c * BAYES_GROW + c] = sqrtf(d);
                }
                __syncwarp();
                if (lane > c && lane < n) {
                    float v = gm[lane * BAYES_GROW + c];
                    for (int q = 0; q < c; ++q) v -= gm[lane * BAYES_GROW + q] * gm[c * BAYES_GROW + q];
                    gm[lane * BAYES_GROW + c] = v / gm[c * BAYES_GROW + c];
                }
                __syncwarp();
            }
            // z = G^-1 (Bc (y_m - mu)) for member m = lane (column m of zt): L w = p, L^T z = w.
            if (lane < n) {
                for (int i = 0; i < n; ++i) {
                    float v = zt[i * BAYES_ZROW + lane];
                    for (int q = 0; q < i; ++q) v -= gm[i * BAYES_GROW + q] * zt[q * BAYES_ZROW + lane];
                    zt[i * BAYES_ZROW + lane] = v / gm[i * BAYES_GROW + i];
                }
                for (int i = n - 1; i >= 0; --i) {
                    float v = zt[i * BAYES_ZROW + lane];
                    for (int q = i + 1; q < n; ++q) v -= gm[q * BAYES_GROW + i] * zt[q * BAYES_ZROW + lane];
                    zt[i * BAYES_ZROW + lane] = v / gm[i * BAYES_GROW + i];
                }
            }
            __syncwarp();
            // x_m = mu + Bc^T z_m, into yc's rows (G is no longer needed). Each lane: members
            // (lane >> 3) + 4 k, samples 4 (lane & 7) + 32 u .. + 3.
            {
                const int m0 = lane >> 3, t0 = 4 * (lane & 7);
                float4 acc[8][2];
#pragma unroll
                for (int k = 0; k < 8; ++k)
#pragma unroll
                    for (int u = 0; u < 2; ++u) acc[k][u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 1
                for (int q = 0; q < n; ++q) {
                    float4 b[2];
#pragma unroll
                    for (int u = 0; u < 2; ++u) if (t0 + 32 * u < PP) b[u] = *(const float4*)(bc + q * BAYES_ROW + t0 + 32 * u);
#pragma unroll
                    for (int k = 0; k < 8; ++k) {
                        if (m0 + 4 * k >= n) break;
                        const float z = zt[q * BAYES_ZROW + m0 + 4 * k];
#pragma unroll
                        for (int u = 0; u < 2; ++u) {
                            if (t0 + 32 * u >= PP) continue;
                            acc[k][u].x = fmaf(z, b[u].x, acc[k][u].x);
                            acc[k][u].y = fmaf(z, b[u].y, acc[k][u].y);
                            acc[k][u].z = fmaf(z, b[u].z, acc[k][u].z);
                            acc[k][u].w = fmaf(z, b[u].w, acc[k][u].w);
                        }
                    }
                }
                __syncwarp();  // every lane has read G's last use (the solve) long before; yc is free
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    if (m0 + 4 * k >= n) break;
#pragma unroll
                    for (int u = 0; u < 2; ++u) {
                        const int t = t0 + 32 * u;
                        if (t >= PP) continue;
                        float* out = yc + (m0 + 4 * k) * BAYES_ROW + t;
                        out[0] = mean[t] + acc[k][u].x;
                        out[1] = mean[t + 1] + acc[k][u].y;
                        out[2] = mean[t + 2] + acc[k][u].z;
                        out[3] = mean[t + 3] + acc[k][u].w;
                    }
                }
            }
            __syncwarp();
        }
        // Half of the estimate, with the Wiener step's weight and window (fixed point, as there).
        // Element e of the group is coefficient (lane + (e & 32)) mod PP of its patch (as in
        // group.cu): two window values per lane, read once.
        const float weight = 0.5f * a.bayes_weight[(u64)r * BM3D_MAX_PLANES + j];
        const float scale_lo = weight * BM3D_KAISER[lane % PP] * BM3D_FIXED_ONE;
        const float scale_hi = weight * BM3D_KAISER[(lane + 32) % PP] * BM3D_FIXED_ONE;
        for (int e = lane; e < n * PP; e += 32) {
            const int m = e / PP, p = e % PP;
            const int ss = FRAMES ? members[4 * m + 3] : (members[4 * m] == BM3D_CODE_BIAS ? 0 : -1);
            if (ss < 0) continue;
            const int y = members[4 * m + 1] + p / PATCH, x = members[4 * m + 2] + p % PATCH;
            const long long v = __float2ll_rn(((e & 32) ? scale_hi : scale_lo) * yc[m * BAYES_ROW + p]);
            long long* num = a.num + (FRAMES ? (u64)ss * a.sum_stride : 0) + j * extent;
            atomicAdd((unsigned long long*)(num + (u64)y * a.ew + x), (unsigned long long)v);
        }
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32) bm3d_bayes(const Bm3dArgs a) { bm3d_bayes_group<false>(a); }
extern "C" __global__ void __launch_bounds__(WARPS * 32) bm3d_bayes_frames(const Bm3dArgs a) { bm3d_bayes_group<true>(a); }
