// Patch distance -> weight, the formulas of DenoisePlan::weight (src/plan.rs), and the per-pixel
// accumulator. Strength h and the distance offset arrive at run time folded into two constants
// (k_dist, k_bias, see src/backend/cuda/launch.rs), so a strength change needs no recompile.
//
// Welsch: exp(-max(d - offset, 0) / h^2). Weights are kept relative to a reference level `ref`
// (log2 units) that follows the smallest distance seen so far lazily, as in an online softmax:
// ref stays between the level of the smallest distance and NLM_REF_LAG above it, so the largest
// relative weight lies in [1, 2^NLM_REF_LAG], nothing under- or overflows in float, and the result
// equals the f64 definition even where every absolute weight would be below float's range. The
// sums are rescaled only when a round's closest patch is more than NLM_REF_LAG below ref (rare:
// one compare per round instead of a rescale). Below f64's range (level > 1075, i.e. exp(-745))
// the definition's weight sum is zero and the input sample is kept.
//
// Bisquare: (max(1 - max(d - offset, 0) / h^2, 0))^2, with the largest weight tracked directly.
#pragma once

#define WEIGHTING_WELSCH 0
#define WEIGHTING_BISQUARE 1
#ifndef WEIGHTING
#define WEIGHTING WEIGHTING_WELSCH
#endif

// Offsets that must not count arrive with distances >= 1e30 (nlm_fused.cu, SKIP_H): their weight
// is 0 in both formulas, and as a welsch level they are above NLM_LEVEL_UNDERFLOW, so a pixel
// that saw nothing else keeps its input.
// Initial welsch level: finite, so that level - level stays 0.
#define NLM_LEVEL_NONE 3.0e38f
// f64's smallest positive number is 2^-1074: a level above this means every weight is zero.
#define NLM_LEVEL_UNDERFLOW (745.5f * 1.4426950f)

// Largest log2 distance between the reference level and the level of the closest patch. Small,
// so that the exponents' float rounding stays far below the rounding-tie window (nlm_fused.cu).
#define NLM_REF_LAG 8.f

// 1: the plan subtracts a distance offset (sigma set, k_bias > 0) and welsch exponents are
// clamped at the largest weight; 0: k_bias is 0, the clamp can never act and is left out (one
// instruction less per pair; nlm_fused traps if the host passes a nonzero k_bias to such a build).
#ifndef DIST_OFFSET
#define DIST_OFFSET 1
#endif

template <int N_OUT>
struct PixelAcc {
    float wsum;
    // welsch: smallest patch-distance sum seen so far (the level is derived from it, see
    // welsch_level()); bisquare: largest weight.
    float level;
    float acc[N_OUT];
#if WEIGHTING == WEIGHTING_WELSCH
    float ref;      // reference level of wsum and acc (log2 units)
#endif

    __device__ __forceinline__ void init()
    {
        wsum = 0.f;
        level = (WEIGHTING == WEIGHTING_WELSCH) ? NLM_LEVEL_NONE : 0.f;
#pragma unroll
        for (int o = 0; o < N_OUT; ++o) acc[o] = 0.f;
#if WEIGHTING == WEIGHTING_WELSCH
        ref = NLM_LEVEL_NONE;
#endif
    }

    // welsch: the log2 reference level, -log2 of the largest absolute weight so far.
    __device__ __forceinline__ float welsch_level(float k_dist, float k_bias) const
    {
        return fmaxf(fmaf(level, k_dist, -k_bias), 0.f);
    }

    // welsch: the level is more than NLM_REF_LAG below the reference (the first round: always).
    __device__ __forceinline__ bool below_ref(float k_dist, float k_bias) const
    {
        return fmaxf(fmaf(level, k_dist, NLM_REF_LAG - k_bias), NLM_REF_LAG) < ref;
    }

    // Before add(): takes a round's G patch-distance sums into the level. True where the
    // reference must move first (follow()); a caller with several pixels calls follow() on all
    // of them when any needs it, so that the common path has no branch per pixel.
    template <int G>
    __device__ __forceinline__ bool track(const float (&dist)[G], float k_dist, float k_bias)
    {
#if WEIGHTING == WEIGHTING_WELSCH
        // x = max(d k - b, 0) is monotone in d: the minimum is taken on the raw sums.
        float lo = dist[0];
#pragma unroll
        for (int j = 1; j < G; ++j) lo = fminf(lo, dist[j]);
        level = fminf(level, lo);
        return below_ref(k_dist, k_bias);
#else
        return false;
#endif
    }

    // Moves the reference to the current level where a patch much closer than it appeared (the
    // sums scale by a power of two, exactly); the next move comes when a level below
    // ref - NLM_REF_LAG appears.
    __device__ __forceinline__ void follow(float k_dist, float k_bias)
    {
#if WEIGHTING == WEIGHTING_WELSCH
        if (below_ref(k_dist, k_bias)) {
            const float lv = welsch_level(k_dist, k_bias);
            const float rescale = exp2f(lv - ref);
            wsum *= rescale;
#pragma unroll
            for (int o = 0; o < N_OUT; ++o) acc[o] *= rescale;
            ref = lv;
        }
#endif
    }

    // Adds G offsets at once (after track() and, where it asked, follow()): dist[j] are
    // patch-distance sums, val[o][j] the samples they point at.
    template <int G>
    __device__ __forceinline__ void add(const float (&dist)[G], const float (&val)[N_OUT][G], float k_dist, float k_bias)
    {
#if WEIGHTING == WEIGHTING_WELSCH
        // Each exponent is one FMA and (with a distance offset) one min:
        // ref - max(d k - b, 0) = min(ref + b - d k, ref); without an offset, ref - d k <= ref.
        const float ref_b = ref + k_bias;
#pragma unroll
        for (int j = 0; j < G; ++j) {
            const float x = fmaf(-dist[j], k_dist, ref_b);
            const float w = exp2f(DIST_OFFSET ? fminf(x, ref) : x);
            wsum += w;
#pragma unroll
            for (int o = 0; o < N_OUT; ++o) acc[o] = fmaf(w, val[o][j], acc[o]);
        }
#else
#pragma unroll
        for (int j = 0; j < G; ++j) {
            const float t = __saturatef(fmaf(-dist[j], k_dist, 1.f + k_bias));
            const float w = t * t;
            wsum += w;
            level = fmaxf(level, w);
#pragma unroll
            for (int o = 0; o < N_OUT; ++o) acc[o] = fmaf(w, val[o][j], acc[o]);
        }
#endif
    }

    // True where float cannot reproduce the f64 definition's arithmetic: welsch weights whose
    // f64 values are denormal (largest weight between exp(-700) and exp(-745.5)), bisquare
    // weights at the edge of their support (largest weight below 1e-6).
    __device__ __forceinline__ bool needs_exact(float k_dist, float k_bias) const
    {
#if WEIGHTING == WEIGHTING_WELSCH
        const float lv = welsch_level(k_dist, k_bias);
        return lv > 700.f * 1.4426950f && lv <= 745.5f * 1.4426950f;
#else
        return level < 1.0e-6f;
#endif
    }

    // Final value of output o; `centre` is the target's own sample.
    __device__ __forceinline__ float value(int o, float centre, float wref, float k_dist, float k_bias) const
    {
#if WEIGHTING == WEIGHTING_WELSCH
        // No offset at all, or all weights 0 in f64.
        const float lv = welsch_level(k_dist, k_bias);
        if (lv > NLM_LEVEL_UNDERFLOW) return centre;
        const float wc = wref * exp2f(ref - lv);          // largest relative weight: 2^(ref - lv)
#else
        const float wc = wref * level;
#endif
        const float total = wsum + wc;
        return total > 0.f ? (acc[o] + wc * centre) / total : centre;
    }
};
