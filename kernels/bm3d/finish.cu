// The estimate of every sample of one plane of a BM3D step: the fixed-point numerator over the
// denominator, which is the sum over the patches covering the sample of their weight (by corner,
// `wimg`) times the Kaiser window at the sample's place in the patch. Step 1 of a two-step run
// writes the basic estimate (f32, 8-bit units); the last step rounds into the output frame.
// One thread per sample; blockIdx.y = plane of the group.

extern "C" __global__ void bm3d_finish(const Bm3dArgs a)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y;
    if (i >= a.w * a.h || j >= a.n_planes) return;
    const int x = i % a.w, y = i / a.w;
    const u64 extent = (u64)a.ew * a.eh;
    const long long* wimg = a.wimg + j * extent;
    double den = 0.0;
#pragma unroll
    for (int r = 0; r < PATCH; ++r) {
        if (y - r < 0) break;
#pragma unroll
        for (int c = 0; c < PATCH; ++c) {
            if (x - c < 0) break;
            const long long wv = wimg[(u64)(y - r) * a.ew + (x - c)];
            if (wv != 0) den += (double)wv * (double)BM3D_KAISER[r * PATCH + c];
        }
    }
    const double num = (double)a.num[j * extent + (u64)y * a.ew + x];
    const float v = den > 0.0 ? (float)(num / den) : 0.0f;
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
