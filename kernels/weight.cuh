// Patch distance -> weight, the formulas of DenoisePlan::weight (src/plan.rs), and the per-pixel
// accumulator. Strength h and the distance offset arrive at run time folded into two constants
// (k_dist, k_bias, see src/backend/cuda/launch.rs), so a strength change needs no recompile.
//
// Welsch: exp(-max(d - offset, 0) / h^2). Weights are kept relative to the smallest distance
// seen so far (a running "level", in log2 units), as in an online softmax: the largest weight is
// then exactly 1, nothing underflows in float, and the result equals the f64 definition even
// where every absolute weight would be below float's range. Below f64's range (level > 1075,
// i.e. exp(-745)) the definition's weight sum is zero and the input sample is kept.
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

template <int N_OUT>
struct PixelAcc {
    float wsum;
    // welsch: smallest patch-distance sum seen so far (the level is derived from it, see
    // level()); bisquare: largest weight.
    float level;
    float acc[N_OUT];

    __device__ __forceinline__ void init()
    {
        wsum = 0.f;
        level = (WEIGHTING == WEIGHTING_WELSCH) ? NLM_LEVEL_NONE : 0.f;
#pragma unroll
        for (int o = 0; o < N_OUT; ++o) acc[o] = 0.f;
    }

    // welsch: the log2 reference level, -log2 of the largest absolute weight so far.
    __device__ __forceinline__ float welsch_level(float k_dist, float k_bias) const
    {
        return fmaxf(fmaf(level, k_dist, -k_bias), 0.f);
    }

    // Adds G offsets at once: dist[j] are patch-distance sums, val[o][j] the
    // samples they point at.
    template <int G>
    __device__ __forceinline__ void add(const float (&dist)[G], const float (&val)[N_OUT][G], float k_dist, float k_bias)
    {
#if WEIGHTING == WEIGHTING_WELSCH
        // The level follows the smallest distance (x = max(d k - b, 0) is monotone in d), so the
        // minimum is taken on the raw sums; each exponent is then one FMA and one min:
        // level - max(d k - b, 0) = min(level + b - d k, level).
        float lo = level;
#pragma unroll
        for (int j = 0; j < G; ++j) lo = fminf(lo, dist[j]);
        const float old_level = welsch_level(k_dist, k_bias);
        level = lo;
        const float lv = welsch_level(k_dist, k_bias);
        const float rescale = exp2f(lv - old_level);   // 1 unless a closer patch appeared
        wsum *= rescale;
#pragma unroll
        for (int o = 0; o < N_OUT; ++o) acc[o] *= rescale;
        const float lb = lv + k_bias;
#pragma unroll
        for (int j = 0; j < G; ++j) {
            const float w = exp2f(fminf(fmaf(-dist[j], k_dist, lb), lv));
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
        if (welsch_level(k_dist, k_bias) > NLM_LEVEL_UNDERFLOW) return centre;
        const float wc = wref;                            // largest relative weight is 1
#else
        const float wc = wref * level;
#endif
        const float total = wsum + wc;
        return total > 0.f ? (acc[o] + wc * centre) / total : centre;
    }
};
