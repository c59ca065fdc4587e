// The estimate of every sample of one plane of a BM3D step: the fixed-point numerator over the
// denominator, which is the sum over the patches covering the sample of their weight (by corner,
// `wimg`) times the Kaiser window at the sample's place in the patch. The window is the product
// of two 1D windows, so the denominators are two passes of PATCH taps over a shared-memory tile
// of `wimg` (rows, then columns) instead of PATCH^2 reads per sample. Step 1 of a two-step run
// writes the basic estimate (f32, 8-bit units); the last step rounds into the output frame.
// Blocks of FINISH_W x FINISH_H samples; blockIdx.z = plane of the group.

#define FINISH_W 32
#define FINISH_H 8
#define HALO (PATCH - 1)

extern "C" __global__ void __launch_bounds__(FINISH_W * FINISH_H) bm3d_finish(const Bm3dArgs a)
{
    __shared__ double wt[FINISH_H + HALO][FINISH_W + HALO];  // wimg, tile and halo above-left
    __shared__ double rows[FINISH_H + HALO][FINISH_W];       // after the row pass
    const int j = blockIdx.z;
    const int bx = blockIdx.x * FINISH_W, by = blockIdx.y * FINISH_H;
    const int tx = threadIdx.x % FINISH_W, ty = threadIdx.x / FINISH_W;
    const u64 extent = (u64)a.ew * a.eh;
    const long long* wimg = a.wimg + j * extent;
    for (int i = threadIdx.x; i < (FINISH_H + HALO) * (FINISH_W + HALO); i += FINISH_W * FINISH_H) {
        const int r = i / (FINISH_W + HALO), c = i % (FINISH_W + HALO);
        const int y = by + r - HALO, x = bx + c - HALO;
        wt[r][c] = (y >= 0 && x >= 0 && y < a.eh && x < a.ew) ? (double)wimg[(u64)y * a.ew + x] : 0.0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < (FINISH_H + HALO) * FINISH_W; i += FINISH_W * FINISH_H) {
        const int r = i / FINISH_W, c = i % FINISH_W;
        double s = 0.0;
#pragma unroll
        for (int k = 0; k < PATCH; ++k) s += wt[r][c + HALO - k] * (double)BM3D_KAISER1[k];
        rows[r][c] = s;
    }
    __syncthreads();
    const int x = bx + tx, y = by + ty;
    if (x >= a.w || y >= a.h || j >= a.n_planes) return;
    double den = 0.0;
#pragma unroll
    for (int k = 0; k < PATCH; ++k) den += rows[ty + HALO - k][tx] * (double)BM3D_KAISER1[k];
    const double num = (double)a.num[j * extent + (u64)y * a.ew + x];
    const float v = den > 0.0 ? (float)(num / den) : 0.0f;
    const int i = y * a.w + x;
    if (a.basic_out) {
        a.basic_out[a.basic_plane[j] + i] = v;
        return;
    }
    const float s = floorf(v * a.scale + 0.5f);
    const unsigned q = (unsigned)fminf(fmaxf(s, 0.0f), (float)a.max_value);
#if SAMPLE_BYTES == 1
    a.out[a.plane_bytes[j] + i] = (unsigned char)q;
#else
    ((unsigned short*)(a.out + a.plane_bytes[j]))[i] = (unsigned short)q;
#endif
}
