// Pass 2 of a pack: horizontal box sums of the vertical sums, turned into weights.
//
// One thread per position (x, y) of the weight grid (origin ex0, ey0; ew x eh). The patch distance
// sum is D = sum_kx V(STEP_X * (x - ex0) + kx, y). Stored per offset:
//   f32 + welsch:   the exponent x = max(D k_dist - k_bias, 0)  (weight = 2^-x, see STORE_LOG)
//   f32 + bisquare: the weight
//   f16 / unorm10:  the weight; the vertical sums arrive normalized by the distance cut
//                   (v_scale), and a normalized sum >= 1 is past the cut: weight 0.
//
// Grid: (ceil(ew / blockDim.x), eh, groups).

extern "C" __global__ void __launch_bounds__(128) mp_weight(const MpArgs args)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y;
    if (x >= args.ew || y >= args.eh) return;
    const MpGroup& grp = args.group[blockIdx.z];
    const unsigned int* vin = args.vbuf + blockIdx.z * args.group_words;
    const unsigned long long row = (unsigned long long)y * args.vw + STEP_X * x;

    float sum[MP_P];
#pragma unroll
    for (int j = 0; j < MP_P; ++j) sum[j] = 0.f;
#pragma unroll
    for (int k = 0; k < PATCH_D; ++k) {
        float v[MP_P];
        mp_fetch(vin, args.image_words, row + k, v);
#pragma unroll
        for (int j = 0; j < MP_P; ++j) sum[j] += v[j];
    }

    float w[MP_P];
#pragma unroll
    for (int j = 0; j < MP_P; ++j) {
#if INTER == INTER_F32
        const float dist = sum[j];
        const bool cut = false;
#else
        const float dist = sum[j] * grp.v_cut;
        const bool cut = sum[j] >= 1.f;
#endif
#if WEIGHTING == 0
        const float e = fmaxf(fmaf(dist, grp.k_dist, -grp.k_bias), 0.f);
#if STORE_LOG
        w[j] = e;
#else
        w[j] = cut ? 0.f : exp2f(-e);
#endif
#else
        const float t = __saturatef(fmaf(-dist, grp.k_dist, 1.f + grp.k_bias));
        w[j] = cut ? 0.f : t * t;
#endif
        if (j >= args.n_off) w[j] = 0.f;
    }
    mp_store(args.wbuf + blockIdx.z * args.group_words, args.image_words, (unsigned long long)y * args.ew + x, w);
}
