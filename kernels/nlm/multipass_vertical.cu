// Pass 1 of a pack: squared differences of the guide planes and their vertical box sums.
//
// One thread per column x' of the vertical-sum images and MP_ROWS consecutive rows y of the
// weight grid. Column x' = STEP_X * ex0 - PATCH_R + c covers the patch columns of every weight
// position (border columns are mirrored per coordinate, exactly as src/planar.rs `mirror`). Each
// target guide sample is read once and feeds every offset of the pack.
//
// Grid: (ceil(vw / blockDim.x), ceil(eh / MP_ROWS), groups); any 1-D block size.

constexpr int MP_VROWS = STEP_Y * (MP_ROWS - 1) + PATCH_D;   // guide rows one thread reads

extern "C" __global__ void __launch_bounds__(128) mp_vertical(const MpArgs args)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r0 = blockIdx.y * MP_ROWS;                 // first row, relative to ey0
    if (c >= args.vw || r0 >= args.eh) return;
    const MpGroup& grp = args.group[blockIdx.z];
    const int gx = STEP_X * args.ex0 - PATCH_R + c;       // guide column (may lie outside)
    const int gy0 = STEP_Y * (args.ey0 + r0) - PATCH_R;   // first guide row
    const unsigned char* target = args.ring + (unsigned long long)args.target_slot * args.frame_bytes;

    float d[MP_P][MP_VROWS];
#pragma unroll
    for (int j = 0; j < MP_P; ++j)
#pragma unroll
        for (int k = 0; k < MP_VROWS; ++k) d[j][k] = 0.f;

#pragma unroll
    for (int g = 0; g < N_GUIDES; ++g) {
        const unsigned char* tplane = target + grp.guide[g];
#pragma unroll
        for (int k = 0; k < MP_VROWS; ++k) {
            const float t = mp_load(tplane, args.guide_w, args.guide_h, gx, gy0 + k);
#pragma unroll
            for (int j = 0; j < MP_P; ++j) {
                if (j < args.n_off) {
                    const unsigned char* rplane = args.ring + (unsigned long long)args.slot[j] * args.frame_bytes + grp.guide[g];
                    const float r = mp_load(rplane, args.guide_w, args.guide_h, gx + STEP_X * args.dx[j], gy0 + k + STEP_Y * args.dy[j]);
                    const float e = t - r;
                    d[j][k] = fmaf(e, e, d[j][k]);
                }
            }
        }
    }

    unsigned int* out = args.vbuf + blockIdx.z * args.group_words;
#pragma unroll
    for (int i = 0; i < MP_ROWS; ++i) {
        if (r0 + i < args.eh) {
            float v[MP_P];
#pragma unroll
            for (int j = 0; j < MP_P; ++j) {
                float s = 0.f;
#pragma unroll
                for (int k = 0; k < PATCH_D; ++k) s += d[j][STEP_Y * i + k];
#if INTER == INTER_F32
                v[j] = s;
#else
                v[j] = fminf(s * grp.v_scale, 1.f);   // saturates at the distance cut
#endif
            }
            mp_store(out, args.image_words, (unsigned long long)(r0 + i) * args.vw + c, v);
        }
    }
}
