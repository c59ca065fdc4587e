//! Block matching and 3D filtering (BM3D), spatial or over the temporal window (V-BM3D): *what*
//! the BM3D filter computes, in every implementation.
//!
//! * this module: the plan (which planes are matched together, their sigmas, the resolved
//!   settings), the transforms and windows, the reference-patch grid and the temporal schedule,
//!   shared by every implementation;
//! * [`reference`](mod@reference): the f64 definition below, written plainly (the oracle);
//! * [`cpu`]: the multithreaded f32 implementation (a host algorithm);
//! * [`cuda`]: the CUDA implementation (kernels in `kernels/bm3d/`).
//!
//! # The definition
//!
//! Per plane group G (planes `P_1..P_m` of one size `W x H`, matched together: luma alone, U and V
//! together, or R, G and B together; noise sigma `sigma_j` per plane in 8-bit code values), values
//! in 8-bit units (`sample / scale`), patch side `K`:
//!
//! * **Plane extent.** A plane narrower or shorter than `K` is extended by the border rule
//!   ([`crate::planar::mirror`]) to `max(W, K) x max(H, K)`; estimates are kept for the plane's
//!   own samples only.
//! * **Patches** are the `K x K` squares inside the extent; a patch is named by its frame and
//!   top-left corner. **Reference patches**: corners on the grid `0, p, 2p, ...` plus the last
//!   corner of each axis (`p` = block step), so every sample is covered.
//! * **Distance** of two patches: the mean over the group's planes and the `K^2` samples of the
//!   squared difference (8-bit units squared), on the noisy frames in step 1 and on the basic
//!   estimates in step 2.
//! * **Candidates** of a reference patch R in frame t: in frame t every corner within the search
//!   radius `r` (Chebyshev) of R's; in frames t-1, t-2, ... and t+1, t+2, ... (those of the step's
//!   window that exist; the chain stops at the first missing frame): the corners within the seed
//!   radius of each *seed*, each corner once (claimed by the first seed whose square holds it), where
//!   the seeds of a frame are the `S` best candidates of the frame one step closer to t (for t's
//!   neighbours: R and the best of frame t), best = smallest (distance, row, column), R first.
//! * **Motion seeds** (`motion`): before the corners of a frame u (t's neighbours and on) are
//!   searched, the first of its seeds, `s` (a corner of the frame one step closer to t), gets a
//!   companion placed before it: `s + 8 v` clamped to the corners, where `v` is the coarse motion
//!   of `s`'s 32x32 block from `s`'s frame to u ([`MotionField`], on the noisy frames of the
//!   group's first plane), unless the companion is `s` itself. Groups then follow motion faster
//!   than the seed radius a frame.
//! * **Group**: R first, then the other candidates with distance `<= tau`, ascending by
//!   (distance, frame code = dt + 7, row, column), at most `N`; its size `n` is the largest power
//!   of two not above the count.
//! * **Transform** `T`, per plane: a separable 2D transform of each patch (step 1: the bior1.5
//!   wavelet, step 2: the orthonormal DCT-II; [`PatchTransform`]), then the orthonormal Haar
//!   transform of length `n` along the group ([`haar`]).
//! * **Step 1 (hard thresholding)**: coefficients with `|c| <= lambda * sigma_j` become 0; the
//!   group estimate is `T^-1` of the rest; weight `w_j = 1 / max(retained, 1)`.
//! * **Step 2 (Wiener)**: `omega = B^2 / (B^2 + sigma_j^2)` from the transformed basic-estimate
//!   group `B` (1 where `sigma_j = 0`); the estimate is `T^-1(omega * Y)` of the transformed noisy
//!   group; weight `w_j = 1 / max(sum omega^2, 1)`.
//! * **Step 2 with the Bayesian estimate** (`bayes`): the group's estimate is the mean of the
//!   Wiener estimate above and a Bayesian one (NL-Bayes' second step in BM3D's group): per plane,
//!   with `b_1..b_n` the basic estimate's patches of the group (as vectors of `K^2` samples), `mu`
//!   their mean and `C = (1/n) sum (b_m - mu)(b_m - mu)^T` their covariance, each noisy patch `y_m`
//!   is estimated as `mu + C (C + sigma_j^2 I)^-1 (y_m - mu)` (`y_m` itself where `sigma_j = 0`).
//!   The same in any orthonormal basis of the patch; the weight is the Wiener step's `w_j`.
//! * **Reference frames** ([`reference_dts`]): the reference patches lie in the target frame, or
//!   with `window_references` (the `high` profile) in every frame of the step's window, each
//!   grouped with its own frame searched exhaustively and the others predictively from it (the
//!   candidates above with t = the reference's frame, within the step's window).
//! * **Aggregation**: every patch of a group that lies in the target frame adds
//!   `w_j * kaiser(i, k) * estimate` to the numerator and `w_j * kaiser(i, k)` to the denominator
//!   of each of its samples (Kaiser window, beta [`KAISER_BETA`]); the estimate of a sample is
//!   numerator / denominator. With references in every frame, the target receives the estimates
//!   of the groups of its neighbours' reference patches too, as V-BM3D aggregates every group
//!   into every frame: more estimates per sample, of patches matched from other starting points
//!   (+0.55 dB PSNR-YUV for `normal` offline at sigma 20 in the experiment of 2026-11-26, at one
//!   step per window frame).
//! * **Per-frame groups** (`frame_groups`): the reference patches of every frame r within
//!   `future` before and `past` after the target, each grouped over r's own window
//!   (`r-past ..= r+future`, which holds the target); the members that lie in the target are
//!   aggregated as above. So every frame's groups are the same whichever output they serve (an
//!   implementation may compute them once and add each member to its own frame), and a step of
//!   frame t reads the frames `t-(past+future) ..= t+past+future` ([`step_frames`]).
//! * **Steps and frames.** Step 1 of frame u uses the noisy frames `u-past ..= u+future` that
//!   exist and gives the basic estimate of u. With two steps, step 2 of frame t groups on the basic
//!   estimates of `t-past ..= t+future` (each from its own window) and filters the noisy frames;
//!   a job therefore reads `2 past` and `2 future` frames ([`crate::params::Params::frames_needed`])
//!   and the basic estimate of each frame is computed once, by the first job that needs it
//!   ([`basics_to_compute`]). The output is the last step's estimate, rounded (half up) to
//!   stored units and clamped.
//!
//! Implementations accumulate numerators and denominators in 64-bit fixed point
//! ([`FIXED_ONE`]), so that their sums do not depend on the order of the additions (GPU atomics,
//! threads): one run gives the same bits as another, batched or chunked.

pub mod cpu;
pub mod cuda;
pub mod reference;

use crate::error::{Error, Result};
use crate::format::ComponentKind;
use crate::params::{Bm3dSettings, Params, PlaneSelection};
use crate::planar::Geometry;
use crate::window::Job;

/// How BM3D is computed (not what: that is [`crate::params::Bm3dSettings`]): switches of its GPU
/// implementation, handed to it by the composition root ([`crate::backends`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bm3dOptions {
    /// CUDA: the own-frame search's distances on tensor cores where the device has them (compute
    /// capability 8.0 and later, 8x8 patches; default on; kernels/bm3d/search_tc.cu). The same
    /// keys bit for bit with 8-bit samples in the hard-thresholding step; elsewhere (basic
    /// estimates, samples of more than 8 bits) the distances come from norms less cross terms,
    /// whose rounding scales with the patches' energy about the tile's shift rather than with the
    /// distance, so near ties may rank otherwise than in the f32 search (the output still meets the
    /// agreement rule with the f64 reference; off: the f32 search).
    pub tensor_search: bool,
    /// CUDA: the Wiener step's block matching in a launch of its own before its filtering, for
    /// Wiener groups of 32 (default on): the filtering's group buffer then no longer limits the
    /// warps that match. The same output bit for bit (off, or smaller groups: one launch does
    /// both).
    pub wiener_match_apart: bool,
}

impl Default for Bm3dOptions {
    fn default() -> Self {
        Bm3dOptions { tensor_search: true, wiener_match_apart: true }
    }
}

/// Kaiser window parameter of the aggregation weights (as in the published BM3D for 8x8 patches).
pub const KAISER_BETA: f64 = 2.0;

/// One in the 64-bit fixed point of the aggregation sums (numerators: value x weight; weights
/// are at most 1, values at most a few hundred 8-bit units, so 2^23 contributions fit).
pub const FIXED_ONE: f64 = 4_294_967_296.0;

/// Frame code of a patch in the group order: dt + this (dt in -7..=7).
pub const FRAME_CODE_BIAS: i32 = 7;

/// Planes matched and filtered together, with the noise sigma of each (8-bit code values).
#[derive(Debug, Clone, PartialEq)]
pub struct Bm3dGroup {
    pub planes: Vec<usize>,
    pub sigmas: Vec<f32>,
}

/// The BM3D plan of one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Bm3dPlan {
    pub settings: Bm3dSettings,
    pub groups: Vec<Bm3dGroup>,
    /// Planes copied through unchanged (alpha, padding, planes not selected).
    pub passthrough: Vec<usize>,
    /// The temporal window of each step (a job reads twice as far with two steps).
    pub past: u32,
    pub future: u32,
    pub scale_to_8bit: f32,
    pub max_value: u32,
}

impl Bm3dPlan {
    pub fn new(geometry: &Geometry, params: &Params) -> Result<Self> {
        params.validate()?;
        let sigma = params.sigma.ok_or_else(|| Error::InvalidParameter("bm3d needs the noise level: set sigma".into()))?;
        let settings = params.bm3d_settings()?;
        let chroma_sigma = params.bm3d.chroma_sigma.unwrap_or(sigma);
        let planes = &geometry.planes;
        let by_kind = |k: ComponentKind| -> Vec<usize> { (0..planes.len()).filter(|&i| planes[i].kind == k).collect() };
        let (luma, chroma, color) = (by_kind(ComponentKind::Luma), by_kind(ComponentKind::Chroma), by_kind(ComponentKind::Color));
        let mut groups = Vec::new();
        if !color.is_empty() {
            if params.planes != PlaneSelection::All {
                return Err(Error::InvalidParameter(format!("planes={} needs a YUV format; RGB is denoised as three joint channels", params.planes)));
            }
            groups.push(Bm3dGroup { sigmas: vec![sigma; color.len()], planes: color });
        } else {
            if params.planes == PlaneSelection::Chroma && chroma.is_empty() {
                return Err(Error::InvalidParameter("planes=chroma on a format without chroma".into()));
            }
            if params.planes != PlaneSelection::Chroma {
                groups.extend(luma.iter().map(|&p| Bm3dGroup { planes: vec![p], sigmas: vec![sigma] }));
            }
            if params.planes != PlaneSelection::Luma && !chroma.is_empty() {
                groups.push(Bm3dGroup { sigmas: vec![chroma_sigma; chroma.len()], planes: chroma });
            }
        }
        for g in &groups {
            let first = planes[g.planes[0]];
            if g.planes.iter().any(|&p| planes[p].width != first.width || planes[p].height != first.height) {
                return Err(Error::State("planes matched together differ in size".into()));
            }
        }
        let processed: Vec<usize> = groups.iter().flat_map(|g| g.planes.iter().copied()).collect();
        let passthrough = (0..planes.len()).filter(|i| !processed.contains(i)).collect();
        Ok(Bm3dPlan { settings, groups, passthrough, past: params.temporal_past, future: params.temporal_future, scale_to_8bit: geometry.scale_to_8bit() as f32, max_value: geometry.max_value() })
    }

    pub fn output_planes(&self) -> Vec<usize> {
        self.groups.iter().flat_map(|g| g.planes.iter().copied()).collect()
    }

    /// A text that changes exactly when a configured backend must be configured again.
    pub fn structure_key(&self) -> String {
        let planes: Vec<&Vec<usize>> = self.groups.iter().map(|g| &g.planes).collect();
        format!("bm3d {:?} {planes:?} {:?} {} {}", self.settings, self.passthrough, self.past, self.future)
    }

    pub fn two_step(&self) -> bool {
        self.settings.steps == 2
    }
}

/// Corners of reference patches along an axis of `extent` samples: 0, step, 2 step, ... and the
/// last corner `extent - k` (extent >= k).
pub fn reference_corners(extent: usize, k: usize, step: usize) -> Vec<usize> {
    let last = extent - k;
    let mut v: Vec<usize> = (0..=last).step_by(step.max(1)).collect();
    if *v.last().expect("0 is a corner") != last {
        v.push(last);
    }
    v
}

/// The extent BM3D works on for a plane of `w x h` (see the module doc).
pub fn extent(w: usize, h: usize, k: usize) -> (usize, usize) {
    (w.max(k), h.max(k))
}

/// Orthonormal DCT-II matrix of size k, row-major: `C[f][n] = a_f cos(pi (2n+1) f / 2k)`.
pub fn dct_matrix(k: usize) -> Vec<f64> {
    let mut c = vec![0.0; k * k];
    for f in 0..k {
        let a = if f == 0 { (1.0 / k as f64).sqrt() } else { (2.0 / k as f64).sqrt() };
        for n in 0..k {
            c[f * k + n] = a * (std::f64::consts::PI * (2 * n + 1) as f64 * f as f64 / (2 * k) as f64).cos();
        }
    }
    c
}

/// Modified Bessel function of the first kind, order 0 (series; converges fast for small x).
fn bessel_i0(x: f64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let q = x * x / 4.0;
    for m in 1..64 {
        term *= q / (m as f64 * m as f64);
        sum += term;
        if term < 1e-17 * sum {
            break;
        }
    }
    sum
}

/// The 1D Kaiser window of length k.
pub fn kaiser_1d(k: usize, beta: f64) -> Vec<f64> {
    (0..k)
        .map(|i| {
            let t = if k == 1 { 0.0 } else { 2.0 * i as f64 / (k - 1) as f64 - 1.0 };
            bessel_i0(beta * (1.0 - t * t).max(0.0).sqrt()) / bessel_i0(beta)
        })
        .collect()
}

/// The 2D Kaiser window of side k (row-major), the product of two 1D windows.
pub fn kaiser_window(k: usize, beta: f64) -> Vec<f64> {
    let one = kaiser_1d(k, beta);
    let mut w = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            w[i * k + j] = one[i] * one[j];
        }
    }
    w
}

/// f32 or f64, for the transforms shared by the reference (f64) and the CPU implementation (f32).
pub trait Real: Copy + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self> {
    const FRAC_1_SQRT_2: Self;
}

impl Real for f32 {
    const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
}

impl Real for f64 {
    const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
}

/// In-place orthonormal Haar transform of `v` (length a power of two), full decomposition, its
/// coefficients in place (level by level, each pair's sum at the lower index): the butterflies
/// `(a, b) -> ((a + b) / sqrt 2, (a - b) / sqrt 2)` at strides 1, 2, 4, ... (forward) or in the
/// reverse order (inverse). Shrinkage does not depend on the coefficients' order.
pub fn haar<T: Real>(v: &mut [T], inverse: bool) {
    let n = v.len();
    let r = T::FRAC_1_SQRT_2;
    let mut butterflies = |s: usize| {
        for i in (0..n).step_by(2 * s) {
            let (a, b) = (v[i], v[i + s]);
            v[i] = (a + b) * r;
            v[i + s] = (a - b) * r;
        }
    };
    if inverse {
        let mut s = n / 2;
        while s >= 1 {
            butterflies(s);
            s /= 2;
        }
    } else {
        let mut s = 1;
        while s < n {
            butterflies(s);
            s *= 2;
        }
    }
}

/// The 2D transform of each patch: separable, the same `k x k` matrix on rows and columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchTransform {
    /// Orthonormal DCT-II (the Wiener step).
    Dct,
    /// The biorthogonal 1.5 wavelet, full decomposition with periodic extension (the
    /// hard-thresholding step, as in the published BM3D: it keeps edges and flat areas better
    /// than the DCT before thresholding).
    Bior15,
}

impl PatchTransform {
    /// The step's transform: bior1.5 for hard thresholding, DCT for Wiener.
    pub fn of_step(wiener: bool) -> Self {
        if wiener {
            PatchTransform::Dct
        } else {
            PatchTransform::Bior15
        }
    }

    /// (forward, inverse) `k x k` matrices, row-major: `out[a] = sum_b M[a][b] in[b]`.
    pub fn matrices(self, k: usize) -> (Vec<f64>, Vec<f64>) {
        let f = match self {
            PatchTransform::Dct => dct_matrix(k),
            PatchTransform::Bior15 => bior15_matrix(k),
        };
        let inv = match self {
            PatchTransform::Dct => (0..k * k).map(|i| f[(i % k) * k + i / k]).collect(),
            PatchTransform::Bior15 => invert(&f, k),
        };
        (f, inv)
    }
}

/// Analysis low-pass filter of bior1.5 (times sqrt 2: 3, -3, -22, 22, 128, 128, ... / 128).
const BIOR15_LO: [f64; 10] = [3.0, -3.0, -22.0, 22.0, 128.0, 128.0, 22.0, -22.0, -3.0, 3.0];

/// The forward bior1.5 matrix of length k (a power of two): each level maps the approximation of
/// length n to n/2 approximations `sum_j lo[j] x[(2i + j - 4) mod n]` and n/2 details
/// `(x[2i+1] - x[2i]) / sqrt 2`, until one approximation is left; coefficients ordered
/// approximation, then details from the coarsest level to the finest.
pub fn bior15_matrix(k: usize) -> Vec<f64> {
    let r = std::f64::consts::FRAC_1_SQRT_2;
    let mut m = vec![0.0; k * k];
    for col in 0..k {
        let mut x: Vec<f64> = (0..k).map(|i| if i == col { 1.0 } else { 0.0 }).collect();
        let mut details: Vec<Vec<f64>> = Vec::new();
        let mut n = k;
        while n > 1 {
            let approx: Vec<f64> = (0..n / 2).map(|i| (0..10).map(|j| BIOR15_LO[j] / 128.0 * r * x[(2 * i + j + 4 * n - 4) % n]).sum()).collect();
            details.push((0..n / 2).map(|i| (x[2 * i + 1] - x[2 * i]) * r).collect());
            x = approx;
            n /= 2;
        }
        let mut coefs = x;
        for d in details.iter().rev() {
            coefs.extend(d);
        }
        for (row, v) in coefs.iter().enumerate() {
            m[row * k + col] = *v;
        }
    }
    m
}

/// The inverse of a `k x k` matrix (Gauss-Jordan with partial pivoting; the transforms here are
/// well conditioned).
pub fn invert(m: &[f64], k: usize) -> Vec<f64> {
    let mut a = m.to_vec();
    let mut inv: Vec<f64> = (0..k * k).map(|i| if i / k == i % k { 1.0 } else { 0.0 }).collect();
    for c in 0..k {
        let p = (c..k).max_by(|&x, &y| a[x * k + c].abs().total_cmp(&a[y * k + c].abs())).expect("rows");
        for j in 0..k {
            a.swap(c * k + j, p * k + j);
            inv.swap(c * k + j, p * k + j);
        }
        let d = a[c * k + c];
        for j in 0..k {
            a[c * k + j] /= d;
            inv[c * k + j] /= d;
        }
        for r in 0..k {
            if r != c {
                let f = a[r * k + c];
                for j in 0..k {
                    a[r * k + j] -= f * a[c * k + j];
                    inv[r * k + j] -= f * inv[c * k + j];
                }
            }
        }
    }
    inv
}

/// Side of the cells of a [`MotionField`], in samples.
pub const MOTION_CELL: usize = 8;
/// Side of a [`MotionField`]'s blocks, in cells.
pub const MOTION_BLOCK: usize = 4;
/// How far a [`MotionField`] looks, in cells either way.
pub const MOTION_REACH: usize = 2;

/// The coarse motion from one frame to another ("Motion seeds" in the module doc): the frame's
/// plane (its extent) in cells of [`MOTION_CELL`] x [`MOTION_CELL`] samples, summed; for each
/// block of [`MOTION_BLOCK`] x [`MOTION_BLOCK`] cells (on a grid from the origin, the remainder
/// left out), the shift in cells within [`MOTION_REACH`] of the block of the other frame with the
/// smallest sum of squared cell-sum differences (the unshifted block first, then row by row; a
/// later one only when strictly smaller). The sums are of the stored samples (integers), in
/// integer arithmetic: every implementation (f64 reference, CPU, kernels/bm3d/motion.cu) finds the
/// same shifts at every bit depth.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionField {
    bw: usize,
    bh: usize,
    shifts: Vec<(i32, i32)>,
}

impl MotionField {
    /// The motion from `from` to `to` (`w x h` values each, row-major, in 8-bit units: stored
    /// samples over `scale`, which gives the stored integers back); None when the plane holds
    /// fewer than one block in either direction.
    pub fn between<T: Copy + Into<f64>>(from: &[T], to: &[T], w: usize, h: usize, scale: f64) -> Option<MotionField> {
        let (cw, ch) = (w / MOTION_CELL, h / MOTION_CELL);
        let (bw, bh) = (cw / MOTION_BLOCK, ch / MOTION_BLOCK);
        if bw == 0 || bh == 0 {
            return None;
        }
        // Stored samples are below 2^16: a cell's sum is below 2^22, a block's sum of squared
        // differences below 2^48.
        let cells = |v: &[T]| -> Vec<i64> {
            let mut c = vec![0i64; cw * ch];
            for y in 0..ch * MOTION_CELL {
                for x in 0..cw * MOTION_CELL {
                    c[(y / MOTION_CELL) * cw + x / MOTION_CELL] += (v[y * w + x].into() * scale).round() as i64;
                }
            }
            c
        };
        let (a, b) = (cells(from), cells(to));
        let mut shifts = Vec::with_capacity(bw * bh);
        for by in 0..bh {
            for bx in 0..bw {
                let (y0, x0) = (by * MOTION_BLOCK, bx * MOTION_BLOCK);
                let ssd = |sy: usize, sx: usize| -> i64 {
                    let mut s = 0;
                    for i in 0..MOTION_BLOCK {
                        for j in 0..MOTION_BLOCK {
                            let d = a[(y0 + i) * cw + x0 + j] - b[(sy + i) * cw + sx + j];
                            s += d * d;
                        }
                    }
                    s
                };
                let mut best = (ssd(y0, x0), (0, 0));
                for sy in y0.saturating_sub(MOTION_REACH)..=(y0 + MOTION_REACH).min(ch - MOTION_BLOCK) {
                    for sx in x0.saturating_sub(MOTION_REACH)..=(x0 + MOTION_REACH).min(cw - MOTION_BLOCK) {
                        let d = ssd(sy, sx);
                        if d < best.0 {
                            best = (d, (sy as i32 - y0 as i32, sx as i32 - x0 as i32));
                        }
                    }
                }
                shifts.push(best.1);
            }
        }
        Some(MotionField { bw, bh, shifts })
    }

    /// The companion of the seed at (`y`, `x`) (see the module doc), corners up to (`max_y`,
    /// `max_x`); None where it would be the seed itself.
    pub fn companion(&self, y: usize, x: usize, max_y: usize, max_x: usize) -> Option<(usize, usize)> {
        let span = MOTION_CELL * MOTION_BLOCK;
        let (by, bx) = ((y / span).min(self.bh - 1), (x / span).min(self.bw - 1));
        let (vy, vx) = self.shifts[by * self.bw + bx];
        let my = (y as i64 + (MOTION_CELL as i64) * vy as i64).clamp(0, max_y as i64) as usize;
        let mx = (x as i64 + (MOTION_CELL as i64) * vx as i64).clamp(0, max_x as i64) as usize;
        ((my, mx) != (y, x)).then_some((my, mx))
    }
}

/// The motion fields of a step's frames: from each frame to each neighbour (dt one apart), keyed
/// by (from, to); empty without `motion`.
pub type MotionFields = std::collections::HashMap<(i32, i32), MotionField>;

/// [`MotionFields`] of `frames` ((dt, the group's first plane as `w x h` values in 8-bit units),
/// dt ascending); `scale`: stored units per 8-bit unit.
pub fn motion_fields<T: Copy + Into<f64>>(frames: &[(i32, &[T])], w: usize, h: usize, scale: f64) -> MotionFields {
    let mut fields = MotionFields::new();
    for pair in frames.windows(2) {
        let ((a, va), (b, vb)) = (pair[0], pair[1]);
        if b - a != 1 {
            continue;
        }
        if let (Some(f), Some(g)) = (MotionField::between(va, vb, w, h, scale), MotionField::between(vb, va, w, h, scale)) {
            fields.insert((a, b), f);
            fields.insert((b, a), g);
        }
    }
    fields
}

/// Work space of [`bayes_estimate`], reused from group to group.
#[derive(Default)]
pub struct BayesScratch {
    mean: Vec<f64>,
    centred: Vec<f64>,
    gram: Vec<f64>,
    proj: Vec<f64>,
}

/// The Bayesian estimate of one plane of a group (the module's "Step 2 with the Bayesian
/// estimate"), through the group's `n x n` Gram matrix instead of the `d x d` covariance:
/// `C (C + s^2 I)^-1 = Bc^T (Bc Bc^T + n s^2 I)^-1 Bc` with `Bc` the centred basic patches (rows),
/// so the cost is `O(n^2 d + n^3)` rather than `O(d^3)`. `y`: the noisy patches, `n` rows of `d`
/// values (any orthonormal basis), replaced by their estimates; `b`: the basic estimate's
/// patches, the same layout; f64 inside.
pub fn bayes_estimate(y: &mut [f32], b: &[f32], n: usize, d: usize, sigma: f32, w: &mut BayesScratch) {
    if sigma == 0.0 || n == 0 {
        return;
    }
    w.mean.clear();
    w.mean.resize(d, 0.0);
    for m in 0..n {
        for (acc, &v) in w.mean.iter_mut().zip(&b[m * d..(m + 1) * d]) {
            *acc += v as f64;
        }
    }
    w.mean.iter_mut().for_each(|v| *v /= n as f64);
    w.centred.clear();
    w.centred.extend((0..n * d).map(|e| b[e] as f64 - w.mean[e % d]));
    let bc = &w.centred;
    // G = Bc Bc^T + n sigma^2 I, then its Cholesky factor L (lower, in place).
    let g = &mut w.gram;
    g.clear();
    g.resize(n * n, 0.0);
    let s2n = n as f64 * (sigma as f64) * (sigma as f64);
    for p in 0..n {
        for q in 0..=p {
            let v: f64 = bc[p * d..(p + 1) * d].iter().zip(&bc[q * d..(q + 1) * d]).map(|(a, c)| a * c).sum();
            g[p * n + q] = v + if p == q { s2n } else { 0.0 };
        }
    }
    for j in 0..n {
        let diag = (g[j * n + j] - (0..j).map(|q| g[j * n + q] * g[j * n + q]).sum::<f64>()).sqrt();
        g[j * n + j] = diag;
        for i in j + 1..n {
            let v = g[i * n + j] - (0..j).map(|q| g[i * n + q] * g[j * n + q]).sum::<f64>();
            g[i * n + j] = v / diag;
        }
    }
    // Per patch: z = G^-1 Bc (y - mu), then y = mu + Bc^T z.
    w.proj.clear();
    w.proj.resize(n, 0.0);
    for m in 0..n {
        let ym = &mut y[m * d..(m + 1) * d];
        let z = &mut w.proj;
        for (q, zq) in z.iter_mut().enumerate() {
            *zq = ym.iter().zip(&w.mean).zip(&bc[q * d..(q + 1) * d]).map(|((&v, mu), c)| (v as f64 - mu) * c).sum();
        }
        for i in 0..n {
            z[i] = (z[i] - (0..i).map(|q| g[i * n + q] * z[q]).sum::<f64>()) / g[i * n + i];
        }
        for i in (0..n).rev() {
            z[i] = (z[i] - (i + 1..n).map(|q| g[q * n + i] * z[q]).sum::<f64>()) / g[i * n + i];
        }
        for (t, v) in ym.iter_mut().enumerate() {
            *v = (w.mean[t] + (0..n).map(|q| z[q] * bc[q * d + t]).sum::<f64>()) as f32;
        }
    }
}

/// The largest power of two not above `n` (n >= 1).
pub fn pow2_floor(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

/// (epoch, seq) of a frame of the stream: the key of what an implementation keeps for a frame
/// (basic estimates, searches, sums) while it stays in the ring.
pub type FrameId = (u64, u64);

/// The id of the job's frame at `dt`.
pub fn frame_id(job: &Job, dt: i32) -> FrameId {
    (job.epoch, (job.seq as i64 + dt as i64) as u64)
}

/// The dt of the job's frames (target 0), ascending.
pub fn job_dts(job: &Job) -> Vec<i32> {
    job.frames_in_time_order().iter().map(|f| f.0).collect()
}

/// The frames of step 1 (or of a one-step run) for the frame at `center` (dt): those of
/// `center - past ..= center + future` the job holds, ascending.
pub fn step_window(dts: &[i32], center: i32, past: u32, future: u32) -> Vec<i32> {
    dts.iter().copied().filter(|&d| d >= center - past as i32 && d <= center + future as i32).collect()
}

/// The frames a step of the frame at `center` reads (dt, ascending): the step's window
/// (`center - past ..= center + future`), or with per-frame groups every reference frame's window
/// (`center - (past + future) ..= center + past + future`).
pub fn step_frames(dts: &[i32], center: i32, plan: &Bm3dPlan) -> Vec<i32> {
    if plan.settings.frame_groups {
        let reach = plan.past + plan.future;
        step_window(dts, center, reach, reach)
    } else {
        step_window(dts, center, plan.past, plan.future)
    }
}

/// With two steps: the frames (dt, ascending) whose basic estimates step 2 of the job's target
/// groups on; an implementation computes those it does not hold yet (keyed by the job's epoch and
/// `seq + dt`), in this order, before step 2.
pub fn basics_to_compute(dts: &[i32], plan: &Bm3dPlan) -> Vec<i32> {
    step_frames(dts, 0, plan)
}

/// The frames (dt relative to the step's target, ascending) whose reference patches a step
/// groups, each with the frames it is grouped over: `frames` are the step's frames
/// ([`step_frames`], relative dts). By default the target alone over the step's window; with
/// `window_references` every frame of the window over the same window; with per-frame groups the
/// frames `-future ..= past`, each over its own window (`rdt - past ..= rdt + future`).
pub fn reference_dts(frames: &[i32], plan: &Bm3dPlan) -> Vec<(i32, Vec<i32>)> {
    let s = &plan.settings;
    if s.frame_groups {
        let (p, f) = (plan.past as i32, plan.future as i32);
        frames.iter().filter(|&&r| r >= -f && r <= p).map(|&r| (r, frames.iter().copied().filter(|&d| d >= r - p && d <= r + f).collect())).collect()
    } else if s.window_references {
        frames.iter().map(|&r| (r, frames.to_vec())).collect()
    } else {
        vec![(0, frames.to_vec())]
    }
}

/// One step of a job's work with per-frame groups ([`frame_group_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameGroupOp {
    /// Group the reference patches of frame `r` (dt) in `step` (0: hard thresholding, 1: Wiener)
    /// over its own window, adding every member to its frame's sums, unless `r` is grouped in
    /// that step already. `first`: the first frame this job finishes in that step; the frames
    /// before it are finished already or never will be, so nothing reads their sums.
    Group { r: i32, step: usize, first: i32 },
    /// Finish frame `u` in `step` from its sums: its basic estimate (step 0 of two) or the output.
    Finish { u: i32, step: usize },
}

/// With per-frame groups, what a job does in order (src/bm3d/cpu.rs and src/bm3d/cuda.rs both
/// follow it): with two steps, for every frame whose basic estimate is not held yet
/// (`basic_held(dt)` false; [`basics_to_compute`] order), group the frames within `future`
/// before and `past` after it, then finish it; then group the frames within `future` before and
/// `past` after the target in the last step and finish the output. `dts`: the job's frames.
pub fn frame_group_order(dts: &[i32], plan: &Bm3dPlan, basic_held: impl Fn(i32) -> bool) -> Vec<FrameGroupOp> {
    let (past, future) = (plan.past as i32, plan.future as i32);
    let around = |u: i32| dts.iter().copied().filter(move |&r| r >= u - future && r <= u + past);
    let mut ops = Vec::new();
    if plan.two_step() {
        let basics: Vec<i32> = basics_to_compute(dts, plan).into_iter().filter(|&u| !basic_held(u)).collect();
        let first = basics.first().copied().unwrap_or(0);
        for u in basics {
            ops.extend(around(u).map(|r| FrameGroupOp::Group { r, step: 0, first }));
            ops.push(FrameGroupOp::Finish { u, step: 0 });
        }
    }
    let last = plan.two_step() as usize;
    ops.extend(around(0).map(|r| FrameGroupOp::Group { r, step: last, first: 0 }));
    ops.push(FrameGroupOp::Finish { u: 0, step: last });
    ops
}

/// Rounds an estimate in 8-bit units to stored units (half up) and clamps it.
#[inline]
pub fn to_stored(v: f64, scale: f64, max_value: u32) -> u32 {
    (v * scale + 0.5).floor().clamp(0.0, max_value as f64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transforms_are_orthonormal() {
        for k in [4usize, 8] {
            let c = dct_matrix(k);
            for a in 0..k {
                for b in 0..k {
                    let dot: f64 = (0..k).map(|n| c[a * k + n] * c[b * k + n]).sum();
                    assert!((dot - if a == b { 1.0 } else { 0.0 }).abs() < 1e-12);
                }
            }
        }
        let mut v = vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let orig = v.clone();
        haar(&mut v, false);
        let energy: f64 = v.iter().map(|x| x * x).sum();
        assert!((energy - orig.iter().map(|x| x * x).sum::<f64>()).abs() < 1e-9);
        assert!((v[0] - orig.iter().sum::<f64>() / 8f64.sqrt()).abs() < 1e-12, "the sum lands at index 0");
        haar(&mut v, true);
        assert!(v.iter().zip(&orig).all(|(a, b)| (a - b).abs() < 1e-12));
        for k in [4usize, 8] {
            let (f, g) = PatchTransform::Bior15.matrices(k);
            for a in 0..k {
                for b in 0..k {
                    let dot: f64 = (0..k).map(|n| g[a * k + n] * f[n * k + b]).sum();
                    assert!((dot - if a == b { 1.0 } else { 0.0 }).abs() < 1e-12, "inverse");
                }
            }
            // The first coefficient is the (scaled) mean: a constant patch has only it.
            let c: Vec<f64> = (0..k).map(|a| (0..k).map(|b| f[a * k + b]).sum()).collect();
            assert!(c[1..].iter().all(|v| v.abs() < 1e-12) && c[0] > 0.0, "{c:?}");
        }
    }

    #[test]
    fn grid_covers_every_sample() {
        assert_eq!(reference_corners(20, 8, 6), vec![0, 6, 12]);
        assert_eq!(reference_corners(21, 8, 6), vec![0, 6, 12, 13]);
        assert_eq!(reference_corners(8, 8, 3), vec![0]);
        assert_eq!(pow2_floor(1), 1);
        assert_eq!(pow2_floor(7), 4);
        assert_eq!(pow2_floor(16), 16);
        let w = kaiser_window(8, KAISER_BETA);
        assert!((w[0] - (1.0 / bessel_i0(2.0)).powi(2)).abs() < 1e-12);
        assert!(w.iter().all(|&x| x > 0.0 && x <= 1.0));
    }

    fn frame_group_plan(past: u32, future: u32, steps: u32) -> Bm3dPlan {
        use crate::params::{Algorithm, Bm3dParams};
        use crate::{PixelFormat, VideoInfo};
        let info = VideoInfo::new(PixelFormat::GRAY8, 16, 16).unwrap();
        let params = Params {
            algorithm: Algorithm::Bm3d,
            sigma: Some(20.0),
            temporal_past: past,
            temporal_future: future,
            bm3d: Bm3dParams { steps: Some(steps), frame_groups: Some(true), ..Default::default() },
            ..Params::default()
        };
        Bm3dPlan::new(&Geometry::from_video_info(&info), &params).unwrap()
    }

    /// A stream run through [`frame_group_order`] as the backends do (a job per frame, its
    /// frames cut at the stream's ends): every frame's basic estimate and output is finished
    /// once, after every frame whose groups reach it, and the frames whose sums are being added
    /// to (touched, not finished, not skipped by `first` or a held basic estimate) are always at
    /// most past + future + 1 consecutive ones, which the CUDA path's entries (sequence number
    /// modulo past + future + 1) rely on. Also from a start in the middle (a chunk's first job).
    #[test]
    fn frame_group_order_finishes_everything_once_within_its_sums() {
        use std::collections::{BTreeSet, HashMap, HashSet};
        for (past, future, steps) in [(1, 1, 2), (2, 0, 2), (0, 2, 2), (2, 2, 2), (3, 1, 1), (1, 2, 2), (0, 1, 1)] {
            let plan = frame_group_plan(past, future, steps);
            let reach = (steps * (past + future)) as i32; // Params::frames_needed, each side
            for (len, start) in [(12i32, 0i32), (3, 0), (12, 5)] {
                let what = format!("past {past} future {future} steps {steps}, {len} frames from {start}");
                let mut basic: HashSet<i32> = HashSet::new();
                let mut grouped: [HashSet<i32>; 2] = Default::default();
                let mut live: [BTreeSet<i32>; 2] = Default::default();
                let mut finished: [HashMap<i32, usize>; 2] = Default::default();
                for t in start..len {
                    let dts: Vec<i32> = (-reach..=reach).filter(|d| t + d >= 0 && t + d < len).collect();
                    for op in frame_group_order(&dts, &plan, |u| basic.contains(&(t + u))) {
                        match op {
                            FrameGroupOp::Group { r, step, first } => {
                                let f = t + r;
                                if !grouped[step].insert(f) {
                                    continue;
                                }
                                for d in dts.iter().map(|d| t + d).filter(|&d| d >= f - past as i32 && d <= f + future as i32) {
                                    let held = step == 0 && plan.two_step() && basic.contains(&d);
                                    if d >= t + first && !held {
                                        assert!(!finished[step].contains_key(&d), "{what}: frame {d} touched in step {step} after it was finished");
                                        live[step].insert(d);
                                    }
                                }
                                if let (Some(lo), Some(hi)) = (live[step].first(), live[step].last()) {
                                    assert!(hi - lo <= (past + future) as i32, "{what}: step {step} adds to frames {lo}..={hi} at once");
                                }
                            }
                            FrameGroupOp::Finish { u, step } => {
                                let f = t + u;
                                // Every frame whose window holds f is grouped (those of the stream).
                                for g in (f - future as i32..=f + past as i32).filter(|g| *g >= 0 && *g < len) {
                                    assert!(grouped[step].contains(&g), "{what}: frame {f} finished in step {step} before frame {g} was grouped");
                                }
                                assert!(live[step].remove(&f), "{what}: frame {f} finished in step {step} without sums");
                                *finished[step].entry(f).or_default() += 1;
                                if step == 0 && plan.two_step() {
                                    basic.insert(f);
                                }
                            }
                        }
                    }
                }
                let last = plan.two_step() as usize;
                assert!((start..len).all(|f| finished[last].get(&f) == Some(&1)), "{what}: outputs {:?}", finished[last]);
                if plan.two_step() {
                    assert!(finished[0].values().all(|&n| n == 1), "{what}: a basic estimate made twice");
                }
            }
        }
    }

    #[test]
    fn schedule_of_steps() {
        let dts = [-4, -3, -2, -1, 0, 1, 2];
        assert_eq!(step_window(&dts, 1, 2, 1), vec![-1, 0, 1, 2]);
        assert_eq!(step_window(&dts, -2, 2, 1), vec![-4, -3, -2, -1]);
    }
}
