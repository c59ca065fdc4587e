// Pass 3 of a pack: weighted sums at each output sample.
//
// One thread per output sample p. For offset j of the pack it adds W_j(p) * O_u(p + q_j); for a
// spatial pack (symmetric) it also adds the pair's mirror image, W_j(p - q_j) * O_t(p - q_j),
// which is the weight of offset -q_j at p (w(p, p+q) = w(p+q, p)). Only the thread's own sample
// is written, so every store is coalesced and no two threads touch the same accumulator.
//
// Accumulator images per group (out_w x out_h each): wsum, level, acc[N_OUTPUTS], where level is
// the smallest exponent seen (STORE_LOG: weights are kept relative to it, as weight.cuh) or else
// the largest weight.
//
// Grid: (ceil(out_w / blockDim.x), out_h, groups).

__device__ __forceinline__ float mp_fetch_lane(const unsigned int* images, unsigned long long image_words,
                                               unsigned long long at, int j)
{
    float lane[LANES];
    mp_decode(images[(j / LANES) * image_words + at], lane);
    float v = lane[0];
#pragma unroll
    for (int l = 1; l < LANES; ++l)
        if (j % LANES == l) v = lane[l];
    return v;
}

extern "C" __global__ void __launch_bounds__(128) mp_accumulate(const MpArgs args)
{
    const int px = blockIdx.x * blockDim.x + threadIdx.x;
    const int py = blockIdx.y;
    if (px >= args.out_w || py >= args.out_h) return;
    const MpGroup& grp = args.group[blockIdx.z];
    const unsigned long long n = (unsigned long long)args.out_w * args.out_h;
    const unsigned long long at = (unsigned long long)py * args.out_w + px;
    float* state = args.accum + blockIdx.z * args.accum_floats;

    float wsum, level, acc[N_OUTPUTS];
    if (args.first) {
        wsum = 0.f;
        level = STORE_LOG ? MP_LEVEL_NONE : 0.f;
#pragma unroll
        for (int o = 0; o < N_OUTPUTS; ++o) acc[o] = 0.f;
    } else {
        wsum = state[at];
        level = state[n + at];
#pragma unroll
        for (int o = 0; o < N_OUTPUTS; ++o) acc[o] = state[(2 + o) * n + at];
    }

    const unsigned int* wimg = args.wbuf + blockIdx.z * args.group_words;
    const unsigned char* target = args.ring + (unsigned long long)args.target_slot * args.frame_bytes;
    float wf[MP_P];
    mp_fetch(wimg, args.image_words, (unsigned long long)(py - args.ey0) * args.ew + (px - args.ex0), wf);
    float wb[MP_P];
    float vf[MP_P][N_OUTPUTS], vb[MP_P][N_OUTPUTS];
#pragma unroll
    for (int j = 0; j < MP_P; ++j) {
        wb[j] = 0.f;
#pragma unroll
        for (int o = 0; o < N_OUTPUTS; ++o) vf[j][o] = vb[j][o] = 0.f;
        if (j < args.n_off) {
            const unsigned char* frame = args.ring + (unsigned long long)args.slot[j] * args.frame_bytes;
            const int dx = args.dx[j], dy = args.dy[j];
#pragma unroll
            for (int o = 0; o < N_OUTPUTS; ++o) vf[j][o] = mp_load(frame + grp.output[o], args.out_w, args.out_h, px + dx, py + dy);
            if (args.symmetric) {
                wb[j] = mp_fetch_lane(wimg, args.image_words, (unsigned long long)(py - dy - args.ey0) * args.ew + (px - dx - args.ex0), j);
#pragma unroll
                for (int o = 0; o < N_OUTPUTS; ++o) vb[j][o] = mp_load(target + grp.output[o], args.out_w, args.out_h, px - dx, py - dy);
            }
        }
    }

#if STORE_LOG
    // wf / wb hold exponents: weight = 2^(level - x) relative to the smallest exponent.
    float lo = level;
#pragma unroll
    for (int j = 0; j < MP_P; ++j) {
        if (j < args.n_off) {
            lo = fminf(lo, wf[j]);
            if (args.symmetric) lo = fminf(lo, wb[j]);
        }
    }
    const float rescale = exp2f(lo - level);   // 1 unless a closer patch appeared
    level = lo;
    wsum *= rescale;
#pragma unroll
    for (int o = 0; o < N_OUTPUTS; ++o) acc[o] *= rescale;
#pragma unroll
    for (int j = 0; j < MP_P; ++j) {
        if (j < args.n_off) {
            const float w = exp2f(level - wf[j]);
            wsum += w;
#pragma unroll
            for (int o = 0; o < N_OUTPUTS; ++o) acc[o] = fmaf(w, vf[j][o], acc[o]);
            if (args.symmetric) {
                const float u = exp2f(level - wb[j]);
                wsum += u;
#pragma unroll
                for (int o = 0; o < N_OUTPUTS; ++o) acc[o] = fmaf(u, vb[j][o], acc[o]);
            }
        }
    }
#else
#pragma unroll
    for (int j = 0; j < MP_P; ++j) {
        if (j < args.n_off) {
            wsum += wf[j];
            level = fmaxf(level, wf[j]);
#pragma unroll
            for (int o = 0; o < N_OUTPUTS; ++o) acc[o] = fmaf(wf[j], vf[j][o], acc[o]);
            if (args.symmetric) {
                wsum += wb[j];
                level = fmaxf(level, wb[j]);
#pragma unroll
                for (int o = 0; o < N_OUTPUTS; ++o) acc[o] = fmaf(wb[j], vb[j][o], acc[o]);
            }
        }
    }
#endif

    state[at] = wsum;
    state[n + at] = level;
#pragma unroll
    for (int o = 0; o < N_OUTPUTS; ++o) state[(2 + o) * n + at] = acc[o];
}
