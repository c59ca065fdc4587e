// Patch distance -> weight, the formulas of NlmPlan::weight (src/nlm/plan.rs), and the
// accumulators of one phase-2 thread's column of pixels. Strength h and the distance offset
// arrive at run time folded into two constants (k_dist, k_bias, see src/nlm/cuda/launch.rs),
// so a strength change needs no recompile.
//
// Both formulas are functions of one exponent per (pixel, offset),
//
//   x = base - d k_dist        (d: patch-distance sum; base below),
//
// which phase 2 (nlm_fused.cu) builds for a column of pixels as it slides down the column:
// x(i) = x(i-1) - k_dist (H(i+s) - H(i-s-1)), one FMA per pixel on the exact integer change of the
// distance sum, instead of a sum and then an FMA.
//
// Welsch: weight exp(-max(d - offset, 0) / h^2) = 2^-max(d k_dist - k_bias, 0). Weights are kept
// relative to a reference level `ref` (log2 units), one per thread's column, that follows the
// smallest distance seen lazily, as in an online softmax: base = ref + k_bias, so
// x = ref - (d k_dist - k_bias) and the relative weight is 2^min(x, ref) (2^x without an offset,
// where x <= ref always). ref stays between the level of the column's closest patch and
// NLM_REF_LAG above it, so the largest relative weight lies in [1, 2^NLM_REF_LAG], nothing
// under- or overflows in float, and the result equals the f64 definition even where every
// absolute weight would be below float's range. The sums are rescaled only when a round's
// closest patch is more than NLM_REF_LAG below ref (rare: one compare per round and thread).
// A pixel whose own closest patch lies more than NLM_REF_SPAN below the column's (its weights
// would approach float's underflow) goes to the exact path, as do pixels whose level is beyond
// f64's weights (level > 1075, i.e. exp(-745): the definition's weight sum is zero and the input
// sample is kept; float keeps it too).
//
// Bisquare: (max(1 - max(d - offset, 0) / h^2, 0))^2 with base = 1 + k_bias: t = clamp(x, 0, 1),
// weight t^2, with the largest weight tracked directly.
#pragma once

#define WEIGHTING_WELSCH 0
#define WEIGHTING_BISQUARE 1
#ifndef WEIGHTING
#define WEIGHTING WEIGHTING_WELSCH
#endif

// Offsets that must not count arrive with distances >= 1e30 (nlm_fused.cu, SKIP_H): their
// exponent is hugely negative, their weight 0 in both formulas.
// Largest exponent before any offset was seen: finite, so that differences stay finite.
#define NLM_TOP_NONE -3.0e38f
// f64's smallest positive number is 2^-1074: a level above this means every weight is zero.
#define NLM_LEVEL_UNDERFLOW (745.5f * 1.4426950f)

// Largest log2 distance between the reference level and the level of the closest patch. Small,
// so that the exponents' float rounding stays far below the rounding-tie window (nlm_fused.cu).
#define NLM_REF_LAG 8.f
// Largest log2 distance between the column's closest patch and a pixel's own closest patch: the
// pixel's relative weights stay above 2^-NLM_REF_SPAN, the weights float flushes to zero
// (below 2^-126) are then below 2^-36 of its largest, far below float's accumulation error.
#define NLM_REF_SPAN 90.f
// Reference level before the first round with a countable offset (exponents are then negative:
// levels are >= 0); that round moves it (the sums are still zero).
#define NLM_REF_UNSET -1.f

// 1: the plan subtracts a distance offset (sigma set, k_bias > 0) and welsch exponents are
// clamped at the largest weight; 0: k_bias is 0, the clamp can never act and is left out (one
// instruction less per pair; nlm_fused traps if the host passes a nonzero k_bias to such a build).
#ifndef DIST_OFFSET
#define DIST_OFFSET 1
#endif

// One pixel's sums.
template <int N_OUT>
struct PixelSums {
    float wsum;
    // welsch: largest exponent x seen (relative to the column's ref); bisquare: largest weight.
    float top;
    float acc[N_OUT];
};

// The accumulators of a column of ROWS_ pixels (one phase-2 thread) for N_OUT output planes.
template <int ROWS_, int N_OUT>
struct ColumnAcc {
    PixelSums<N_OUT> px[ROWS_];
#if WEIGHTING == WEIGHTING_WELSCH
    float ref;      // reference level of every pixel's sums (log2 units)
    bool ref_set;   // false until a round with a countable offset (ref is then NLM_REF_UNSET)
#endif

    __device__ __forceinline__ void init()
    {
#pragma unroll
        for (int i = 0; i < ROWS_; ++i) {
            px[i].wsum = 0.f;
            px[i].top = (WEIGHTING == WEIGHTING_WELSCH) ? NLM_TOP_NONE : 0.f;
#pragma unroll
            for (int o = 0; o < N_OUT; ++o) px[i].acc[o] = 0.f;
        }
#if WEIGHTING == WEIGHTING_WELSCH
        ref = NLM_REF_UNSET;
        ref_set = false;
#endif
    }

    // The exponent of distance sum 0: x = base - d k_dist.
    __device__ __forceinline__ float base(float k_bias) const
    {
#if WEIGHTING == WEIGHTING_WELSCH
        return ref + k_bias;
#else
        return 1.f + k_bias;
#endif
    }

    // Before add(): takes a round's exponents (x[i][j]: pixel i, offset j) into the pixels'
    // largest ones and moves the reference level where the round needs it (welsch; the current
    // round's exponents move with it).
    template <int G>
    __device__ __forceinline__ void track(float (&x)[ROWS_][G])
    {
#if WEIGHTING == WEIGHTING_WELSCH && !DIST_OFFSET
        // Without a distance offset the reference is kept below every level seen (ref <= level -
        // NLM_REF_LAG after each move), so every exponent is negative. The largest of negative
        // floats is the smallest of their bit patterns as unsigned integers: three-input integer
        // minimums take 8 values in 4 instructions (FMNMX: 7 for 7). An exponent >= +0 (a patch
        // closer than the reference: rare), whose bits order below every negative one, shows in
        // the column's minimum as a clear sign bit; that round (and the first) takes the float path.
        unsigned t[ROWS_];
        unsigned m = 0xffffffffu;
#pragma unroll
        for (int i = 0; i < ROWS_; ++i) {
            unsigned v = __float_as_uint(px[i].top);
            int j = 0;
#pragma unroll
            for (; j + 1 < G; j += 2) v = umin3(v, __float_as_uint(x[i][j]), __float_as_uint(x[i][j + 1]));
            if (j < G) v = min(v, __float_as_uint(x[i][j]));
            t[i] = v;
        }
#pragma unroll
        for (int i = 0; i < ROWS_; i += 2) m = (i + 1 < ROWS_) ? umin3(m, t[i], t[i + 1]) : min(m, t[i]);
        if (ref_set && m >= 0x80000000u) {
#pragma unroll
            for (int i = 0; i < ROWS_; ++i) px[i].top = __uint_as_float(t[i]);
            return;
        }
        const float mf = take_tops(x);
        // Move to NLM_REF_LAG below the column's closest patch; never to a level beyond f64's
        // weights (rounds whose offsets all must not count, SKIP_H, leave an unset reference unset).
        if (ref - mf > NLM_LEVEL_UNDERFLOW) return;
        const float moved = (ref - mf) - NLM_REF_LAG;
        follow(x, moved - ref);
        ref_set = true;
#elif WEIGHTING == WEIGHTING_WELSCH
        const float m = take_tops(x);
        // The column's closest patch is more than NLM_REF_LAG above the reference (ref > LAG: ref
        // can move down), or the reference is not set yet; never to a level beyond f64's weights
        // (rounds whose offsets all must not count, SKIP_H, leave it unset: every exponent stays
        // representable, and their weights, 2^(< -1076), are 0).
        if ((!ref_set || (m > NLM_REF_LAG && ref > NLM_REF_LAG)) && ref - m <= NLM_LEVEL_UNDERFLOW) {
            follow(x, fmaxf(ref - m, 0.f) - ref);   // to the level of the closest patch
            ref_set = true;
        }
#endif
    }

#if WEIGHTING == WEIGHTING_WELSCH
    // Takes a round's exponents into the pixels' largest ones (float compares); returns the
    // column's largest.
    template <int G>
    __device__ __forceinline__ float take_tops(const float (&x)[ROWS_][G])
    {
        float m = NLM_TOP_NONE;
#pragma unroll
        for (int i = 0; i < ROWS_; ++i) {
#pragma unroll
            for (int j = 0; j < G; ++j) px[i].top = fmaxf(px[i].top, x[i][j]);
            m = fmaxf(m, px[i].top);
        }
        return m;
    }

    // Moves the reference level by `shift` (log2 units): the sums scale by 2^shift (an exact power
    // of two where shift is an integer; the first move has nothing to scale), the largest
    // exponents and this round's exponents move by shift.
    template <int G>
    __device__ __forceinline__ void follow(float (&x)[ROWS_][G], float shift)
    {
        const float rescale = exp2f(fminf(shift, 0.f));
#pragma unroll
        for (int i = 0; i < ROWS_; ++i) {
            px[i].wsum *= rescale;
#pragma unroll
            for (int o = 0; o < N_OUT; ++o) px[i].acc[o] *= rescale;
            px[i].top += shift;
#pragma unroll
            for (int j = 0; j < G; ++j) x[i][j] += shift;
        }
        ref += shift;
    }

    __device__ __forceinline__ static unsigned umin3(unsigned a, unsigned b, unsigned c) { return __vimin3_u32(a, b, c); }
#endif

    // Adds pixel i's G offsets (after track()): x[j] are exponents, val[o][j] the samples they
    // point at.
    template <int G>
    __device__ __forceinline__ void add(int i, const float (&x)[G], const float (&val)[N_OUT][G])
    {
        PixelSums<N_OUT>& p = px[i];
#pragma unroll
        for (int j = 0; j < G; ++j) {
#if WEIGHTING == WEIGHTING_WELSCH
            const float w = exp2f(DIST_OFFSET ? fminf(x[j], ref) : x[j]);
#else
            const float t = __saturatef(x[j]);
            const float w = t * t;
            p.top = fmaxf(p.top, w);
#endif
            p.wsum += w;
#pragma unroll
            for (int o = 0; o < N_OUT; ++o) p.acc[o] = fmaf(w, val[o][j], p.acc[o]);
        }
    }

#if WEIGHTING == WEIGHTING_WELSCH
    // welsch: pixel i's level, -log2 of its largest absolute weight.
    __device__ __forceinline__ float level(int i) const { return fmaxf(ref - px[i].top, 0.f); }
#endif

    // True where float cannot reproduce the f64 definition's arithmetic: welsch weights whose
    // f64 values are denormal (largest weight between exp(-700) and exp(-745.5)) or a pixel too
    // far below its column's reference, bisquare weights at the edge of their support (largest
    // weight below 1e-6).
    __device__ __forceinline__ bool needs_exact(int i) const
    {
#if WEIGHTING == WEIGHTING_WELSCH
        const float lv = level(i);
        return (lv > 700.f * 1.4426950f && lv <= NLM_LEVEL_UNDERFLOW) || (lv <= NLM_LEVEL_UNDERFLOW && px[i].top < -NLM_REF_SPAN);
#else
        return px[i].top < 1.0e-6f;
#endif
    }

    // Final value of pixel i's output o; `centre` is the target's own sample.
    __device__ __forceinline__ float value(int i, int o, float centre, float wref) const
    {
        const PixelSums<N_OUT>& p = px[i];
#if WEIGHTING == WEIGHTING_WELSCH
        // No offset at all, or all weights 0 in f64.
        if (level(i) > NLM_LEVEL_UNDERFLOW) return centre;
        const float wc = wref * exp2f(DIST_OFFSET ? fminf(p.top, ref) : p.top);   // largest relative weight
#else
        const float wc = wref * p.top;
#endif
        const float total = p.wsum + wc;
        return total > 0.f ? (p.acc[o] + wc * centre) / total : centre;
    }
};
