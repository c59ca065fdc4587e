// The exact path: samples the fused kernel queued (args.exact) are recomputed here one warp
// each, in f64, with the reference backend's order of operations (src/nlm/reference.rs), so
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
// (each patch distance summed in the reference's order) and their products with the values; one
// lane per running sum (EXACT_CHAINS below) then adds them up in the reference's order.
//
// Where it fits, the warp first stages every guide sample the sample's pairs read (per frame and
// guide plane the search window plus patch halo, mirrored) in shared memory, all lanes loading
// at once; the patch sums then read shared memory instead of making dependent trips to global
// memory. Squared differences of integer samples and their sums are integers below 2^53, so
// summing them in integers gives the reference's f64 sum exactly, in any order.
//
// Blocks of EXACT_WARPS warps, each taking queued samples in turn, with a small stage per warp
// (EXACT_STAGE below; R-live 1.2 KB), and enough of them (launch::exact_grid) that every sample
// of a frame has its own warp; the host launches them on a high-priority stream (cuda/mod.rs).
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

// Stages the guide windows of one sample (every frame f and guide plane g, top-left guide
// coordinate (gx0, gy0)) into st[(f * N_GUIDES + g) * EXACT_RH * EXACT_RW + y * EXACT_RW + x]. The
// window's position in a plane (mirrored at the borders) is the same for every frame and plane:
// each lane works out its positions once per sample, then loads them from every frame's planes,
// EXACT_POS_BATCH positions of all frames in flight at a time.
constexpr int EXACT_RHW = EXACT_RH * EXACT_RW;
constexpr int EXACT_POS_BATCH = 2;
__device__ __forceinline__ void stage_exact(unsigned short* st, const JobView& jv, const NlmArgs& args, const NlmGroup& grp,
                                            int n_frames, int gx0, int gy0, int lane)
{
    const bool inside = gx0 >= 0 && gy0 >= 0 && gx0 + EXACT_RW <= args.guide_w && gy0 + EXACT_RH <= args.guide_h;
    for (int i0 = 0; i0 < EXACT_RHW; i0 += 32 * EXACT_POS_BATCH) {
        int pos[EXACT_POS_BATCH];
#pragma unroll
        for (int b = 0; b < EXACT_POS_BATCH; ++b) {
            const int i = min(i0 + b * 32 + lane, EXACT_RHW - 1);   // lanes past the end repeat the last
            const int y = i / EXACT_RW, x = i - y * EXACT_RW;
            pos[b] = inside ? (gy0 + y) * args.guide_w + gx0 + x
                            : mirror_index(gy0 + y, args.guide_h) * args.guide_w + mirror_index(gx0 + x, args.guide_w);
        }
        for (int f = 0; f < n_frames; ++f) {
            const unsigned char* frame = args.ring + (unsigned long long)jv.slot(f) * args.frame_bytes;
            sample_t v[N_GUIDES][EXACT_POS_BATCH];
#pragma unroll
            for (int g = 0; g < N_GUIDES; ++g)
#pragma unroll
                for (int b = 0; b < EXACT_POS_BATCH; ++b) v[g][b] = reinterpret_cast<const sample_t*>(frame + grp.guide[g])[pos[b]];
#pragma unroll
            for (int g = 0; g < N_GUIDES; ++g)
#pragma unroll
                for (int b = 0; b < EXACT_POS_BATCH; ++b)
                    if (i0 + b * 32 + lane < EXACT_RHW) st[(f * N_GUIDES + g) * EXACT_RHW + i0 + b * 32 + lane] = v[g][b];
        }
    }
}

// A warp's running sums, as in the reference (src/nlm/reference.rs): chain 0 the total of the
// weights, chain o + 1 the sum of weight x value of output o. Lane L < EXACT_CHAINS keeps chain L
// and adds its 32 terms of a round in pair order (the lanes past the chains repeat the last one;
// their results are unused); each pair's lane rounds its products first, as the reference does.
constexpr int EXACT_CHAINS = 1 + N_OUTPUTS;
// The target's patch is held in registers across a sample's pairs where it is small.
constexpr int EXACT_PATCH = N_GUIDES * PATCH_D * PATCH_D;
constexpr bool EXACT_TARGET_IN_REGS = EXACT_PATCH <= 32;

extern "C" __global__ void __launch_bounds__(EXACT_WARPS * 32) nlm_exact(const NlmArgs args)
{
    __shared__ __align__(16) double terms_[EXACT_WARPS][EXACT_CHAINS][32];
    __shared__ unsigned short stage_[EXACT_WARPS][EXACT_STAGE];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    double (*terms)[32] = terms_[warp];
    const double* chain = terms[min(lane, EXACT_CHAINS - 1)];
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
    const bool staged = n_frames * EXACT_REGION <= EXACT_STAGE;
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
            stage_exact(st, jv, args, grp, n_frames, gx0, gy0, lane);
            __syncwarp();
        }
        const unsigned short* tw = st + tgt_index * EXACT_REGION + SEARCH_R * STEP_Y * EXACT_RW + SEARCH_R * STEP_X;
        int tv[EXACT_TARGET_IN_REGS ? EXACT_PATCH : 1];
        if constexpr (EXACT_TARGET_IN_REGS) {
            if (staged) {
#pragma unroll
                for (int g = 0; g < N_GUIDES; ++g)
#pragma unroll
                    for (int ky = 0; ky < PATCH_D; ++ky)
#pragma unroll
                        for (int kx = 0; kx < PATCH_D; ++kx) tv[(g * PATCH_D + ky) * PATCH_D + kx] = tw[g * EXACT_RHW + ky * EXACT_RW + kx];
            }
        }
        double acc = 0.0, wmax = 0.0;
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
                            val[o] = st[f * EXACT_REGION + o * EXACT_RHW + (dy + SEARCH_R + PATCH_R) * EXACT_RW + dx + SEARCH_R + PATCH_R];
                    } else {
                        for (int o = 0; o < N_OUTPUTS; ++o) val[o] = exact_sample(frame, grp.output[o], args.out_w, args.out_h, px + dx, py + dy);
                    }
                    ssd_t ssd = 0;
                    if (staged) {
                        const unsigned short* rw = st + f * EXACT_REGION + (dy + SEARCH_R) * STEP_Y * EXACT_RW + (dx + SEARCH_R) * STEP_X;
#pragma unroll
                        for (int g = 0; g < N_GUIDES; ++g)
#pragma unroll
                            for (int ky = 0; ky < PATCH_D; ++ky)
#pragma unroll
                                for (int kx = 0; kx < PATCH_D; ++kx) {
                                    const int o = g * EXACT_RHW + ky * EXACT_RW + kx;
                                    int t;
                                    if constexpr (EXACT_TARGET_IN_REGS) t = tv[(g * PATCH_D + ky) * PATCH_D + kx];
                                    else t = tw[o];
                                    ssd += sq_diff(t, rw[o]);
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
            wmax = fmax(wmax, wt);   // order-free: each lane's own, the warp's at the end
            terms[0][lane] = wt;
            for (int o = 0; o < N_OUTPUTS; ++o) terms[1 + o][lane] = __dmul_rn(wt, val[o]);
            __syncwarp();
            // A skipped pair (the target's centre, or past the last pair) has weight and value 0
            // and adds an exact 0: no branch.
#pragma unroll
            for (int j = 0; j < 32; j += 2) {
                const double2 t = *reinterpret_cast<const double2*>(chain + j);
                acc = __dadd_rn(__dadd_rn(acc, t.x), t.y);
            }
            __syncwarp();
        }
        for (int off = 16; off > 0; off /= 2) wmax = fmax(wmax, __shfl_xor_sync(0xffffffffu, wmax, off));
        double sums[N_OUTPUTS];
        for (int o = 0; o < N_OUTPUTS; ++o) sums[o] = __shfl_sync(0xffffffffu, acc, 1 + o);
        if (lane == 0) {
            const double wc = __dmul_rn((double)args.wref, wmax);
            const double total = __dadd_rn(acc, wc);   // lane 0's chain: the weights
            for (int o = 0; o < N_OUTPUTS; ++o) {
                const double centre = exact_sample(target, grp.output[o], args.out_w, args.out_h, px, py);
                const double value = total > 0.0 ? __ddiv_rn(__dadd_rn(sums[o], __dmul_rn(wc, centre)), total) : centre;
                const double q = fmin(fmax(floor(__dadd_rn(value, 0.5)), 0.0), (double)MAX_VALUE);
                reinterpret_cast<sample_t*>(dst + grp.output[o])[at] = (sample_t)q;
            }
        }
    }
}
