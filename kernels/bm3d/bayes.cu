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
// Shared memory per warp, BAYES_FLOATS (src/bm3d/cuda.rs `bayes_floats`):
//   bc   [NMAX_WIENER][PP + 1]           centred basic patches (padded rows: no bank conflicts)
//   yc   [NMAX_WIENER][PP + 1]           centred noisy patches, then the estimates
//   gm   [NMAX_WIENER][NMAX_WIENER + 1]  G / (n sigma^2), then its Cholesky factor (lower)
//   pz   [NMAX_WIENER][NMAX_WIENER + 1]  Bc yc^T / (n sigma^2) per member row, then z
//   mean [PP]
#define BAYES_ROW (PP + 1)
#define BAYES_GROW (NMAX_WIENER + 1)
#define BAYES_FLOATS (2 * NMAX_WIENER * BAYES_ROW + 2 * NMAX_WIENER * BAYES_GROW + PP)

template <bool FRAMES>
__device__ void bm3d_bayes_group(const Bm3dArgs& a)
{
    extern __shared__ float bayes_smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int r = blockIdx.x * WARPS + warp;
    if (r >= a.refs_x * a.refs_y) return;  // whole warps leave together
    float* bc = bayes_smem + warp * BAYES_FLOATS;
    float* yc = bc + NMAX_WIENER * BAYES_ROW;
    float* gm = yc + NMAX_WIENER * BAYES_ROW;
    float* pz = gm + NMAX_WIENER * BAYES_GROW;
    float* mean = pz + NMAX_WIENER * BAYES_GROW;
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
            for (int e = lane; e < n * n; e += 32) {
                const int p = e / n, q = e % n;
                float g = 0.0f, pr = 0.0f;
                for (int t = 0; t < PP; ++t) {
                    const float bq = bc[q * BAYES_ROW + t];
                    g += bc[p * BAYES_ROW + t] * bq;
                    pr += yc[p * BAYES_ROW + t] * bq;
                }
                gm[p * BAYES_GROW + q] = g * inv + (p == q ? 1.0f : 0.0f);
                pz[p * BAYES_GROW + q] = pr * inv;
            }
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
            // z = G^-1 (Bc (y_m - mu)) for member m = lane: L w = p, then L^T z = w.
            if (lane < n) {
                float* z = pz + lane * BAYES_GROW;
                for (int i = 0; i < n; ++i) {
                    float v = z[i];
                    for (int q = 0; q < i; ++q) v -= gm[i * BAYES_GROW + q] * z[q];
                    z[i] = v / gm[i * BAYES_GROW + i];
                }
                for (int i = n - 1; i >= 0; --i) {
                    float v = z[i];
                    for (int q = i + 1; q < n; ++q) v -= gm[q * BAYES_GROW + i] * z[q];
                    z[i] = v / gm[i * BAYES_GROW + i];
                }
            }
            __syncwarp();
            for (int e = lane; e < n * PP; e += 32) {
                const int m = e / PP, t = e % PP;
                float v = mean[t];
                for (int q = 0; q < n; ++q) v += pz[m * BAYES_GROW + q] * bc[q * BAYES_ROW + t];
                yc[m * BAYES_ROW + t] = v;
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
