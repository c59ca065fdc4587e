// Last pass of a frame: centre weight, normalisation and rounding, as src/nlm/reference.rs:
// centre weight = wref * largest other weight, round half up, clamp, and a zero weight sum (or no
// offset at all: n_off == 0) keeps the input sample.
//
// Samples whose result the intermediates cannot decide like the f64 definition are written here
// and also queued (args.exact, as nlm_fused.cu does) for the fused path's exact kernel
// (kernels/nlm_exact.cu, launched by the host right after this pass), which recomputes them in f64
// in the reference's order of operations and overwrites them:
//   * STORE_LOG (f32 welsch): the smallest exponent lies where the definition's weights are
//     (nearly) subnormal doubles (MP_LEVEL_DENORMAL .. MP_LEVEL_UNDERFLOW);
//   * otherwise: the largest weight is below args.exact_below (f32 bisquare: the edge of the
//     support, 1e-6 as weight.cuh; f16 / unorm10: too few steps of the stored weights and
//     distances to weigh the offsets against each other, including "every weight rounded to 0");
//   * f32 only (args.tie_window > 0): the mean lies within the float error of a rounding tie.
//
// Grid: (ceil(out_w / blockDim.x), out_h, groups).

extern "C" __global__ void __launch_bounds__(128) mp_finalize(const MpArgs args)
{
    const int px = blockIdx.x * blockDim.x + threadIdx.x;
    const int py = blockIdx.y;
    if (px >= args.out_w || py >= args.out_h) return;
    const MpGroup& grp = args.group[blockIdx.z];
    const unsigned long long n = (unsigned long long)args.out_w * args.out_h;
    const unsigned long long at = (unsigned long long)py * args.out_w + px;
    const float* state = args.accum + blockIdx.z * args.accum_floats;
    const unsigned char* target = args.ring + (unsigned long long)args.target_slot * args.frame_bytes;

    float wsum = 0.f, wc = 0.f;
    bool keep = args.n_off == 0;
    bool exact = false;
    if (!keep) {
        wsum = state[at];
        const float level = state[n + at];
#if STORE_LOG
        keep = level > MP_LEVEL_UNDERFLOW;   // every weight is 0 in f64
        exact = !keep && level > MP_LEVEL_DENORMAL;
        wc = args.wref;                       // the largest relative weight is 1
#else
        exact = level < args.exact_below;
        wc = args.wref * level;
#endif
    }
    const float total = wsum + wc;
#pragma unroll
    for (int o = 0; o < N_OUTPUTS; ++o) {
        const float centre = (float)reinterpret_cast<const mp_sample_t*>(target + grp.output[o])[at];
        float v = centre;
        if (!keep && total > 0.f) v = (state[(2 + o) * n + at] + wc * centre) / total;
        const float fl = floorf(v);
        exact |= !keep && fabsf(v - fl - 0.5f) < args.tie_window;
        const float q = fminf(fmaxf(fl + (v - fl >= 0.5f ? 1.f : 0.f), 0.f), MP_MAX_VALUE);
        reinterpret_cast<mp_sample_t*>(args.dst + grp.output[o])[at] = (mp_sample_t)q;
    }
    if (exact) {
        // One entry per sample and group: the list holds every sample of a frame, never overflows.
        const unsigned long long k = atomicAdd(args.exact, 1ull);
        if (k < args.exact_capacity) args.exact[1 + k] = ((unsigned long long)blockIdx.z << 32) | at;
    }
}
