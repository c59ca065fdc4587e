// The exact path: samples the fused kernel queued (args.exact) are recomputed here one warp
// each, in f64, with the reference backend's order of operations (src/backend/reference.rs), so
// they round like the definition. Rare on real video (rounding ties, hopeless patches); common
// only on noise-only test content. Uses the fused kernel's compile-time constants and arguments.

__device__ __forceinline__ double exact_sample(const unsigned char* frame, unsigned long long plane, int w, int h, int x,
                                               int y)
{
    return (double)reinterpret_cast<const sample_t*>(frame + plane)[mirror_index(y, h) * w + mirror_index(x, w)];
}

#define EXACT_EXP_SPLIT 600.0

// Every f64 operation below is an explicit _rn intrinsic: the compiler must not fuse a multiply
// and an add into one FMA, which would round differently from the reference (Rust does not fuse).
__device__ __forceinline__ double exact_weight(double d2, double h, double offset)
{
    const double d = fmax(__dsub_rn(d2, offset), 0.0);
#if WEIGHTING == WEIGHTING_WELSCH
    const double x = __ddiv_rn(d, __dmul_rn(h, h));
    // Below exp(-700) the reference's weights are (or approach) subnormal doubles; exp() on the
    // GPU is not trusted to underflow gradually there, so scale through a normal intermediate:
    // the final multiply rounds to the subnormal grid like a correctly rounded exp would.
    return x > EXACT_EXP_SPLIT ? __dmul_rn(exp(EXACT_EXP_SPLIT - x), exp(-EXACT_EXP_SPLIT)) : exp(-x);
#else
    const double t = fmax(__dsub_rn(1.0, __ddiv_rn(d, __dmul_rn(h, h))), 0.0);
    return __dmul_rn(t, t);
#endif
}

// One warp per queued sample: the lanes compute the weights of 32 (frame, offset) pairs at a time
// (each patch distance summed in the reference's order), lane 0 then adds them up in the
// reference's order. A skipped pair (the target's centre, or past the last pair) has weight and
// value 0: adding an exact 0 changes no sum, so lane 0's 32 steps have no branch.
//
// Where it fits, the warp first stages every guide sample the sample's pairs read (per frame and
// guide plane the search window plus patch halo, mirrored) in shared memory, all lanes loading
// at once; the patch sums then read shared memory instead of making dependent trips to global
// memory. Squared differences of integer samples and their sums are integers below 2^53, so
// summing them in integers gives the reference's f64 sum exactly, in any order.
//
// Blocks of EXACT_WARPS warps, each taking queued samples in turn, with a small stage per warp
// (EXACT_STAGE below; R-live 1.2 KB), and enough of them (launch::exact_grid) that every sample of a frame has its own warp.
// Measured and not kept (H100 runs 37-43): one small block per SM beside the fused blocks (too
// few warps: the pass outlasted the frame), five rounds of pairs per lane at once (more shared
// memory and registers per block, slower), the samples recomputed inside the fused kernel's
// blocks (their tiles waited for them), other grid sizes (264-4224 blocks: equal).

constexpr int EXACT_RW = 2 * SEARCH_R * STEP_X + PATCH_D;   // staged window per frame and guide
constexpr int EXACT_RH = 2 * SEARCH_R * STEP_Y + PATCH_D;
constexpr int EXACT_REGION = N_GUIDES * EXACT_RH * EXACT_RW;
// Staged samples per warp: five frames' windows (at least 512, at most 4096 samples): windows
// that do not fit are read from global memory, several times slower (a 4-frame window at search
// radius 3 fell out of a 512-sample stage and cost 16% of the kernel time, run 46).
constexpr int EXACT_STAGE = EXACT_REGION * 5 < 512 ? 512 : (EXACT_REGION * 5 > 4096 ? 4096 : EXACT_REGION * 5);
constexpr int EXACT_LOAD_BATCH = 8;                          // staging loads in flight per lane
constexpr int EXACT_WARPS = 4;
// Output o's value of a pair is a staged guide sample (the patch centre) where outputs are guides.
constexpr bool EXACT_VALUES_STAGED = OUTPUTS_ARE_GUIDES != 0;
#if SAMPLE_BYTES == 1
typedef int ssd_t;                 // <= 3 * 225 * 255^2 < 2^31
#else
typedef unsigned long long ssd_t;
#endif

// (a - b)^2 of two samples (no absolute value needed; 16-bit squares need 64 bits).
__device__ __forceinline__ ssd_t sq_diff(int a, int b)
{
    const int d = a - b;
    return SAMPLE_BYTES == 1 ? (ssd_t)(d * d) : (ssd_t)((long long)d * d);
}

extern "C" __global__ void __launch_bounds__(EXACT_WARPS * 32) nlm_exact(const NlmArgs args)
{
    __shared__ double weights_[EXACT_WARPS][32];
    __shared__ double values_[EXACT_WARPS][32][N_OUTPUTS];
    __shared__ unsigned short stage_[EXACT_WARPS][EXACT_STAGE];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    double* weights = weights_[warp];
    double (*values)[N_OUTPUTS] = values_[warp];
    unsigned short* st = stage_[warp];
    const JobView jv{args.jobs ? args.jobs + blockIdx.z : nullptr, args};
    const unsigned long long* list = jv.exact() + args.exact_offset;
    const int n_frames = jv.n_frames(), tgt_index = jv.target();
    unsigned char* dst = jv.dst();
    const unsigned long long count = min(list[0], args.exact_capacity);
    const double norm = __ddiv_rn(1.0, __dmul_rn((double)N_GUIDES, (double)(PATCH_D * PATCH_D)));
    const double inv_scale2 = __ddiv_rn(1.0, __dmul_rn((double)args.scale_to_8bit, (double)args.scale_to_8bit));
    const int offsets = SEARCH_D * SEARCH_D;
    const int pairs = n_frames * offsets;
    const int staged_samples = n_frames * EXACT_REGION;
    const bool staged = staged_samples <= EXACT_STAGE;
    for (unsigned long long e = blockIdx.x * (unsigned long long)EXACT_WARPS + warp; e < count;
         e += (unsigned long long)gridDim.x * EXACT_WARPS) {
        const unsigned long long entry = list[1 + e];
        const NlmGroup& grp = args.group[entry >> 32];
        const unsigned at = (unsigned)entry;
        const int px = at % args.out_w, py = at / args.out_w;
        const double h = grp.h;
        const unsigned char* target = args.ring + (unsigned long long)jv.slot(tgt_index) * args.frame_bytes;
        // Top-left guide coordinate of the staged window.
        const int gx0 = (px - SEARCH_R) * STEP_X - PATCH_R, gy0 = (py - SEARCH_R) * STEP_Y - PATCH_R;
        if (staged) {
            __syncwarp();   // the previous sample's window is no longer read
            for (int i0 = 0; i0 < staged_samples; i0 += 32 * EXACT_LOAD_BATCH) {
                sample_t v[EXACT_LOAD_BATCH];
#pragma unroll
                for (int b = 0; b < EXACT_LOAD_BATCH; ++b) {
                    const int i = i0 + b * 32 + lane;
                    if (i < staged_samples) {
                        const int f = i / EXACT_REGION, r = i - f * EXACT_REGION;
                        const int g = r / (EXACT_RH * EXACT_RW), q = r - g * (EXACT_RH * EXACT_RW);
                        const int y = q / EXACT_RW, x = q - y * EXACT_RW;
                        const unsigned char* frame = args.ring + (unsigned long long)jv.slot(f) * args.frame_bytes;
                        v[b] = reinterpret_cast<const sample_t*>(frame + grp.guide[g])[mirror_index(gy0 + y, args.guide_h) * args.guide_w +
                                                                                        mirror_index(gx0 + x, args.guide_w)];
                    }
                }
#pragma unroll
                for (int b = 0; b < EXACT_LOAD_BATCH; ++b)
                    if (i0 + b * 32 + lane < staged_samples) st[i0 + b * 32 + lane] = v[b];
            }
            __syncwarp();
        }
        double sums[N_OUTPUTS];
        for (int o = 0; o < N_OUTPUTS; ++o) sums[o] = 0.0;
        double total = 0.0, wmax = 0.0;
        for (int base = 0; base < pairs; base += 32) {
            const int k = base + lane;
            double wt = 0.0;
            double val[N_OUTPUTS];
            for (int o = 0; o < N_OUTPUTS; ++o) val[o] = 0.0;
            if (k < pairs) {
                const int f = k / offsets, r = k - f * offsets;
                const int dy = r / SEARCH_D - SEARCH_R, dx = r % SEARCH_D - SEARCH_R;
                if (!(f == tgt_index && dx == 0 && dy == 0)) {
                    const unsigned char* frame = args.ring + (unsigned long long)jv.slot(f) * args.frame_bytes;
                    // Values first: their loads (global where not staged) overlap the distance.
                    if (EXACT_VALUES_STAGED && staged) {
                        for (int o = 0; o < N_OUTPUTS; ++o)
                            val[o] = st[f * EXACT_REGION + o * EXACT_RH * EXACT_RW + (dy + SEARCH_R + PATCH_R) * EXACT_RW + dx + SEARCH_R + PATCH_R];
                    } else {
                        for (int o = 0; o < N_OUTPUTS; ++o) val[o] = exact_sample(frame, grp.output[o], args.out_w, args.out_h, px + dx, py + dy);
                    }
                    ssd_t ssd = 0;
                    if (staged) {
                        const unsigned short* tw = st + tgt_index * EXACT_REGION + SEARCH_R * STEP_Y * EXACT_RW + SEARCH_R * STEP_X;
                        const unsigned short* rw = st + f * EXACT_REGION + (dy + SEARCH_R) * STEP_Y * EXACT_RW + (dx + SEARCH_R) * STEP_X;
#pragma unroll
                        for (int g = 0; g < N_GUIDES; ++g)
#pragma unroll
                            for (int ky = 0; ky < PATCH_D; ++ky)
#pragma unroll
                                for (int kx = 0; kx < PATCH_D; ++kx) {
                                    const int o = g * EXACT_RH * EXACT_RW + ky * EXACT_RW + kx;
                                    ssd += sq_diff(tw[o], rw[o]);
                                }
                    } else {
                        for (int g = 0; g < N_GUIDES; ++g) {
                            for (int ky = -PATCH_R; ky <= PATCH_R; ++ky) {
                                for (int kx = -PATCH_R; kx <= PATCH_R; ++kx) {
                                    const int a = (int)exact_sample(target, grp.guide[g], args.guide_w, args.guide_h, px * STEP_X + kx, py * STEP_Y + ky);
                                    const int b = (int)exact_sample(frame, grp.guide[g], args.guide_w, args.guide_h, (px + dx) * STEP_X + kx,
                                                                    (py + dy) * STEP_Y + ky);
                                    ssd += sq_diff(a, b);
                                }
                            }
                        }
                    }
                    wt = exact_weight(__dmul_rn(__dmul_rn((double)ssd, norm), inv_scale2), h, (double)args.distance_offset);
                }
            }
            weights[lane] = wt;
            wmax = fmax(wmax, wt);   // order-free: each lane's own, the warp's at the end
            for (int o = 0; o < N_OUTPUTS; ++o) values[lane][o] = val[o];
            __syncwarp();
            if (lane == 0) {
#pragma unroll
                for (int j = 0; j < 32; ++j) {
                    const double w = weights[j];
                    total = __dadd_rn(total, w);
#pragma unroll
                    for (int o = 0; o < N_OUTPUTS; ++o) sums[o] = __dadd_rn(sums[o], __dmul_rn(w, values[j][o]));
                }
            }
            __syncwarp();
        }
        for (int off = 16; off > 0; off /= 2) wmax = fmax(wmax, __shfl_xor_sync(0xffffffffu, wmax, off));
        if (lane == 0) {
            const double wc = __dmul_rn((double)args.wref, wmax);
            total = __dadd_rn(total, wc);
            for (int o = 0; o < N_OUTPUTS; ++o) {
                const double centre = exact_sample(target, grp.output[o], args.out_w, args.out_h, px, py);
                const double value = total > 0.0 ? __ddiv_rn(__dadd_rn(sums[o], __dmul_rn(wc, centre)), total) : centre;
                const double q = fmin(fmax(floor(__dadd_rn(value, 0.5)), 0.0), (double)MAX_VALUE);
                reinterpret_cast<sample_t*>(dst + grp.output[o])[at] = (sample_t)q;
            }
        }
    }
}
