//! Row kernels of the CPU backend: plain loops over equal-length slices that LLVM vectorizes.
//!
//! Every function here is `#[inline(always)]` so that it is compiled inside the caller's
//! `#[target_feature]` context (AVX2+FMA on x86-64 when the CPU has it, the baseline otherwise).
//! Slices are cut to one common length before each loop so that the bounds checks disappear.

use crate::params::Weighting;

/// Weights below this are stored as 0 (keeps the accumulators out of the slow denormal range).
pub const WEIGHT_FLOOR: f32 = 1.0e-35;

/// `v[j] += sum over guides of (t[j] - u[j])^2` for one row pair.
#[inline(always)]
pub fn add_sq_diff(v: &mut [f32], t: &[f32], u: &[f32]) {
    let n = v.len();
    let (t, u) = (&t[..n], &u[..n]);
    for j in 0..n {
        let d = t[j] - u[j];
        v[j] += d * d;
    }
}

/// `v[j] += (ta[j] - ua[j])^2 - (tr[j] - ur[j])^2`: one step of a vertical running box sum.
#[inline(always)]
pub fn slide_sq_diff(v: &mut [f32], ta: &[f32], ua: &[f32], tr: &[f32], ur: &[f32]) {
    let n = v.len();
    let (ta, ua, tr, ur) = (&ta[..n], &ua[..n], &tr[..n], &ur[..n]);
    for j in 0..n {
        let a = ta[j] - ua[j];
        let r = tr[j] - ur[j];
        v[j] += a * a - r * r;
    }
}

/// Horizontal box sum of width `2s+1` with unit step: `p[i] = v[i] + ... + v[i+2s]`.
#[inline(always)]
pub fn box_sum_unit(p: &mut [f32], v: &[f32], s: usize) {
    let n = p.len();
    match s {
        0 => p.copy_from_slice(&v[..n]),
        1 => {
            let (a, b, c) = (&v[..n], &v[1..n + 1], &v[2..n + 2]);
            for i in 0..n {
                p[i] = a[i] + b[i] + c[i];
            }
        }
        2 => {
            let (a, b, c, d, e) = (&v[..n], &v[1..n + 1], &v[2..n + 2], &v[3..n + 3], &v[4..n + 4]);
            for i in 0..n {
                p[i] = (a[i] + b[i]) + (c[i] + d[i]) + e[i];
            }
        }
        3 => {
            let (a, b, c, d) = (&v[..n], &v[1..n + 1], &v[2..n + 2], &v[3..n + 3]);
            let (e, f, g) = (&v[4..n + 4], &v[5..n + 5], &v[6..n + 6]);
            for i in 0..n {
                p[i] = ((a[i] + b[i]) + (c[i] + d[i])) + ((e[i] + f[i]) + g[i]);
            }
        }
        _ => {
            p.copy_from_slice(&v[..n]);
            for k in 1..=2 * s {
                let vk = &v[k..k + n];
                for i in 0..n {
                    p[i] += vk[i];
                }
            }
        }
    }
}

/// Horizontal box sum with a step: `p[i] = v[step*i] + ... + v[step*i + 2s]`.
#[inline(always)]
pub fn box_sum_step(p: &mut [f32], v: &[f32], s: usize, step: usize) {
    for (i, pi) in p.iter_mut().enumerate() {
        let row = &v[step * i..step * i + 2 * s + 1];
        *pi = row.iter().sum();
    }
}

/// Exponential of `x <= 0` with about 2e-7 relative error; 0 below -80.
#[inline(always)]
pub fn exp_neg(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n * LN2_HI is exact for |n| < 2^9 (Cody-Waite reduction).
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let xc = if x > -80.0 { x } else { -80.0 };
    // Round x / ln 2 to the nearest integer n through the 1.5 * 2^23 magic number: the low
    // mantissa bits of `m` hold n, so 2^n is built from bits without a float-to-int conversion.
    let m = xc * LOG2E + 12_582_912.0;
    let n = m - 12_582_912.0;
    let r = (xc - n * LN2_HI) - n * LN2_LO; // |r| <= 0.35
    let pow2n = f32::from_bits(m.to_bits().wrapping_add(127) << 23);
    // Taylor series of e^r to degree 6 (truncation error below 1.4e-7 for |r| <= 0.35).
    const C2: f32 = 1.0 / 2.0;
    const C3: f32 = 1.0 / 6.0;
    const C4: f32 = 1.0 / 24.0;
    const C5: f32 = 1.0 / 120.0;
    const C6: f32 = 1.0 / 720.0;
    let p = 1.0 + r * (1.0 + r * (C2 + r * (C3 + r * (C4 + r * (C5 + r * C6)))));
    if x > -80.0 {
        p * pow2n
    } else {
        0.0
    }
}

/// Constants that turn a patch sum of squared differences (raw sample units) into a weight.
#[derive(Debug, Clone, Copy)]
pub struct WeightParams {
    /// Patch sum -> mean squared distance in 8-bit units.
    pub to_mean: f32,
    pub offset: f32,
    /// 1 / h^2.
    pub inv_h2: f32,
    pub weighting: Weighting,
}

/// `x[i]` = normalized distance `max(mean d2 - offset, 0) / h^2` of patch sum `p[i]`, and
/// `w[i] = weight(x[i])` (see [`crate::nlm::NlmPlan::weight`]), tiny weights flushed to 0.
#[inline(always)]
pub fn weights(w: &mut [f32], x: &mut [f32], p: &[f32], wp: &WeightParams) {
    let n = w.len();
    let (x, p) = (&mut x[..n], &p[..n]);
    let (c, off, ih) = (wp.to_mean, wp.offset, wp.inv_h2);
    match wp.weighting {
        Weighting::Welsch => {
            for i in 0..n {
                let d = p[i] * c - off;
                let d = if d > 0.0 { d } else { 0.0 };
                let xi = d * ih;
                x[i] = xi;
                w[i] = exp_neg(-xi);
            }
        }
        Weighting::Bisquare => {
            for i in 0..n {
                let d = p[i] * c - off;
                let d = if d > 0.0 { d } else { 0.0 };
                let xi = d * ih;
                x[i] = xi;
                let t = 1.0 - xi;
                let t = if t > 0.0 { t } else { 0.0 };
                let wt = t * t;
                w[i] = if wt > WEIGHT_FLOOR { wt } else { 0.0 };
            }
        }
    }
}

/// `acc[i] += w[i] * o[i]`.
#[inline(always)]
pub fn acc_values(acc: &mut [f32], w: &[f32], o: &[f32]) {
    let n = acc.len();
    let (w, o) = (&w[..n], &o[..n]);
    for i in 0..n {
        acc[i] += w[i] * o[i];
    }
}

/// One output plane: weighted values, weight sum and smallest normalized distance in one pass.
#[inline(always)]
pub fn acc_all(acc: &mut [f32], wsum: &mut [f32], xmin: &mut [f32], w: &[f32], x: &[f32], o: &[f32]) {
    let n = acc.len();
    let (wsum, xmin, w, x, o) = (&mut wsum[..n], &mut xmin[..n], &w[..n], &x[..n], &o[..n]);
    for i in 0..n {
        let wi = w[i];
        acc[i] += wi * o[i];
        wsum[i] += wi;
        // `min` (not a compare-and-select, which LLVM turns into a masked store that is
        // microcoded on AMD CPUs).
        xmin[i] = xmin[i].min(x[i]);
    }
}

/// Two offsets at once: `acc[i] += w0[i] * o0[i] + w1[i] * o1[i]`.
#[inline(always)]
pub fn acc_values2(acc: &mut [f32], w: [&[f32]; 2], o: [&[f32]; 2]) {
    let n = acc.len();
    let (w0, w1, o0, o1) = (&w[0][..n], &w[1][..n], &o[0][..n], &o[1][..n]);
    for i in 0..n {
        acc[i] += w0[i] * o0[i] + w1[i] * o1[i];
    }
}

/// [`acc_all`] for two offsets sharing one pass over the accumulators.
#[inline(always)]
pub fn acc_all2(acc: &mut [f32], wsum: &mut [f32], xmin: &mut [f32], w: [&[f32]; 2], x: [&[f32]; 2], o: [&[f32]; 2]) {
    let n = acc.len();
    let (wsum, xmin) = (&mut wsum[..n], &mut xmin[..n]);
    let (w0, w1, x0, x1, o0, o1) = (&w[0][..n], &w[1][..n], &x[0][..n], &x[1][..n], &o[0][..n], &o[1][..n]);
    for i in 0..n {
        acc[i] += w0[i] * o0[i] + w1[i] * o1[i];
        wsum[i] += w0[i] + w1[i];
        xmin[i] = xmin[i].min(x0[i].min(x1[i]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_neg_is_accurate() {
        let mut worst = 0f64;
        let mut x = 0.0f32;
        while x > -79.0 {
            let got = exp_neg(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x -= 0.0137;
        }
        assert!(worst < 5e-7, "relative error {worst}");
        assert_eq!(exp_neg(-80.5), 0.0);
        assert_eq!(exp_neg(-1e30), 0.0);
        assert_eq!(exp_neg(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_neg(0.0), 1.0);
    }

    #[test]
    fn box_sums_match_naive() {
        let v: Vec<f32> = (0..40).map(|i| ((i * 37) % 11) as f32).collect();
        for s in 0..6 {
            let n = 40 - 2 * s;
            let mut p = vec![0.0; n];
            box_sum_unit(&mut p, &v, s);
            for i in 0..n {
                assert_eq!(p[i], v[i..i + 2 * s + 1].iter().sum::<f32>());
            }
            let n2 = (40 - 2 * s - 1) / 2 + 1;
            let mut p2 = vec![0.0; n2];
            box_sum_step(&mut p2, &v, s, 2);
            for i in 0..n2 {
                assert_eq!(p2[i], v[2 * i..2 * i + 2 * s + 1].iter().sum::<f32>());
            }
        }
    }
}
