//! Multi-frame NLM super-resolution (after Protter et al., on the GPU as in
//! `../shared/papers/003`): *what* the upscaler computes, in every implementation.
//!
//! * this module: the plan and the arithmetic every implementation shares (interpolation taps,
//!   the degradation filter, the weight);
//! * [`reference`](mod@reference): the f64 definition below, written plainly (the oracle);
//! * [`cpu`]: the multithreaded f32 implementation (a host algorithm);
//! * [`cuda`]: the CUDA implementation (kernels in `kernels/sr/`).
//!
//! # The definition
//!
//! Per plane (low-resolution size `w x h`, output size `W x H`, integer factor `s`), values in
//! 8-bit units (`sample / scale`); every index outside a plane follows the border rule
//! ([`crate::planar::mirror`]). High-resolution sample `(X, Y)` has its centre at low-resolution
//! coordinates `((X + 0.5) / s - 0.5, (Y + 0.5) / s - 0.5)` and lies in low-resolution cell
//! `(X / s, Y / s)` (integer division).
//!
//! 0. **Denoise** (only with a noise level, `sigma > 0`, on fused planes): the target plane
//!    `y_0` is replaced by its NLM estimate over the window: steps 4 and 5 at factor 1 with `y_0`
//!    as the estimate and its own degraded estimate, `sqrt(2) sigma` (two noisy patches) and all
//!    of the correction (`fusion` 1). Steps 1 and 2 then start from the denoised target; the
//!    fusion (step 4) still reads the frames as they came.
//! 1. **Initial estimate** `E`: the target frame interpolated at every high-resolution sample
//!    with the Catmull-Rom cubic (4 x 4 taps, [`cubic_taps`]).
//! 2. **Deblur** (`deblur` steps of back-projection against the target frame): the residual of
//!    each low-resolution sample, `y_0(i, j) - A(E)(i, j)` with `A` the mean of `E` over the
//!    cell's `s x s` samples (those inside the plane), interpolated as in step 1 and added to
//!    `E`. This undoes the area filter of the downscale where the target frame alone can.
//! 3. **Degraded estimate** `B = D(E)`: the mean of `E` over the `s x s` samples
//!    `X - o .. X - o + s - 1` by `Y - o .. Y - o + s - 1`, `o = (s - 1) / 2` (integer division,
//!    [`box_start`]): what a low-resolution sample whose cell starts at `(X - o, Y - o)` would
//!    read. Where `X % s = Y % s = o` that is exactly the target's cell, whose mean step 2 made
//!    agree with `y_0`; elsewhere it is a cell at an offset of whole high-resolution samples,
//!    which is what the other frames hold where the content moved by such an offset. (A box
//!    centred on each sample, `s + 1` taps with halved ends for even `s`, matches no cell of any
//!    frame at even factors; it measured 0.19 dB lower at x2, docs/quality.md.)
//! 4. **Fusion.** For every frame `t` of the temporal window (those that exist) and every
//!    low-resolution sample `(i, j)` within the search radius `r` (Chebyshev) of the cell of
//!    `(X, Y)`: the distance `d` is the mean over `a, b` in `-p..=p` of
//!    `(B(X + s a, Y + s b) - y_t(i + a, j + b))^2` (the degraded high-resolution patch against
//!    the low-resolution patch, `p` = patch radius); its weight is
//!    `exp(-max(d - sigma^2, 0) / h^2)` (`h` the plane's strength, `sigma` the noise level or 0).
//!    `F(X, Y) = sum(w y_t(i, j)) / sum(w)` (computed with the weights relative to the largest,
//!    [`log_weight`]): the window's estimate of `B(X, Y)` as the frames saw it, denoised by the
//!    averaging.
//! 5. **Correction** (a back-projection step against the fused samples):
//!    `R = g (F - B)`, `E' = E + fusion * D^T(R)`, with `D^T` the adjoint of the box of step 3:
//!    each sample takes the mean of `R` over the `s x s` boxes of step 3 that contain it, those of
//!    `X + o - s + 1 .. X + o` by `Y + o - s + 1 .. Y + o` (read by the border rule like every
//!    other index, so at the plane's edges this is the adjoint only approximately). The gate
//!    `g = 1 - exp(-NOVELTY_GAIN * max(m_o - m_t, 0))` compares the best log weight among the other
//!    frames' candidates (`m_o`) with the best among the target's (`m_t`): only where another frame
//!    holds a sample that matches better than any of the target's (a sample between the target's,
//!    brought by motion) is there detail the deblurred target lacks. Static content and a window
//!    without other frames leave `E` as it is ([`novelty_gate`]). With the gate off
//!    (`SrParams::novelty_gate`), `g` = 1. At factor 1 (step 0) `D` and `D^T` are the identity.
//! 6. With two iterations, steps 3-5 run again with `E'` as the estimate.
//!
//! The output is the last estimate, rounded half up to stored units and clamped. Planes that are
//! not selected (`planes=luma` / `chroma`) and alpha planes stop after step 2.

pub mod cpu;
pub mod cuda;
pub mod reference;

use crate::error::{Error, Result};
use crate::format::ComponentKind;
use crate::params::{Params, PlaneSelection};
use crate::planar::Geometry;

/// The resolved plan of one super-resolution stream.
#[derive(Debug, Clone, PartialEq)]
pub struct SrPlan {
    pub scale: usize,
    pub search_radius: usize,
    pub patch_radius: usize,
    pub past: u32,
    pub future: u32,
    pub iterations: u32,
    pub deblur: u32,
    pub fusion: f32,
    /// The novelty gate of step 5 (off: `g` = 1).
    pub novelty_gate: bool,
    /// Per plane: fused (true) or the initial estimate alone (alpha, planes not selected).
    pub fused: Vec<bool>,
    /// Per plane: the strength `h`, 8-bit units.
    pub strength: Vec<f32>,
    /// Noise deviation subtracted from distances (as `sigma^2`), 8-bit units.
    pub sigma: f32,
    pub scale_to_8bit: f32,
    pub max_value: u32,
    /// The low-resolution input's and the output's planes.
    pub input: Geometry,
    pub output: Geometry,
}

impl SrPlan {
    pub fn new(geometry: &Geometry, params: &Params) -> Result<Self> {
        params.validate()?;
        params.sr.validate()?;
        let planes = &geometry.planes;
        let selected = |k: ComponentKind| match (k, params.planes) {
            (ComponentKind::PassThrough, _) => false,
            (_, PlaneSelection::All) | (ComponentKind::Luma, PlaneSelection::Luma) | (ComponentKind::Color, PlaneSelection::Luma) => true,
            (ComponentKind::Chroma, PlaneSelection::Chroma) => true,
            _ => false,
        };
        if params.planes == PlaneSelection::Chroma && !planes.iter().any(|p| p.kind == ComponentKind::Chroma) {
            return Err(Error::InvalidParameter("planes=chroma on a format without chroma".into()));
        }
        let fused: Vec<bool> = planes.iter().map(|p| selected(p.kind)).collect();
        let strength = planes.iter().map(|p| if p.kind == ComponentKind::Chroma { params.chroma_strength } else { params.strength }).collect();
        Ok(SrPlan {
            scale: params.sr.scale as usize,
            search_radius: params.search_radius as usize,
            patch_radius: params.patch_radius as usize,
            past: params.temporal_past,
            future: params.temporal_future,
            iterations: params.sr.iterations,
            deblur: params.sr.deblur,
            fusion: params.sr.fusion,
            novelty_gate: params.sr.novelty_gate,
            fused,
            strength,
            sigma: params.sigma.unwrap_or(0.0),
            scale_to_8bit: geometry.scale_to_8bit() as f32,
            max_value: geometry.max_value(),
            input: geometry.clone(),
            output: geometry.scaled(params.sr.scale as usize),
        })
    }

    /// True when step 4 runs for a job whose window holds `frames` frames: with the gate on,
    /// only with other frames (without them the gate is 0).
    pub fn fuses(&self, frames: usize) -> bool {
        frames > 1 || !self.novelty_gate
    }

    /// True when step 0 (denoising the target) runs.
    pub fn denoises(&self) -> bool {
        self.sigma > 0.0
    }

    /// The plan of step 0: NLM at factor 1 on the target (`sqrt(2) sigma`, all of the correction).
    pub fn denoise_plan(&self) -> SrPlan {
        SrPlan { scale: 1, sigma: self.sigma * std::f32::consts::SQRT_2, fusion: 1.0, novelty_gate: false, ..self.clone() }
    }

    /// A text that differs exactly when a backend must be configured again.
    pub fn structure_key(&self) -> String {
        format!("nlm-sr x{} r{} p{} it{} deblur{} {:?} {:?}", self.scale, self.search_radius, self.patch_radius, self.iterations, self.deblur, self.fused, self.output)
    }
}

/// Gain of the novelty gate of step 5 (per unit of log weight): 4 measured best of 1 and 4 on two
/// clips (docs/quality.md).
pub const NOVELTY_GAIN: f64 = 4.0;

/// The gate of step 5 from the best log weights of the target's candidates and of the other
/// frames' (negative infinity where there are none).
#[inline]
pub fn novelty_gate(best_target: f64, best_other: f64) -> f64 {
    if best_other == f64::NEG_INFINITY {
        return 0.0;
    }
    1.0 - (-NOVELTY_GAIN * (best_other - best_target).max(0.0)).exp()
}

/// Catmull-Rom weights of the four samples around a point at fraction `f` (0..1) past the
/// second one: taps for offsets -1, 0, 1, 2.
pub fn cubic_taps(f: f64) -> [f64; 4] {
    let (f2, f3) = (f * f, f * f * f);
    [0.5 * (-f3 + 2.0 * f2 - f), 0.5 * (3.0 * f3 - 5.0 * f2 + 2.0), 0.5 * (-3.0 * f3 + 4.0 * f2 + f), 0.5 * (f3 - f2)]
}

/// Where high-resolution sample `x` samples the low-resolution plane: the index of the second of
/// its four cubic taps and the fraction past it. With an integer factor the fraction takes only
/// `s` values, the same for every cell: `x % s` names them.
pub fn cubic_position(x: usize, scale: usize) -> (isize, f64) {
    let u = (x as f64 + 0.5) / scale as f64 - 0.5;
    let i = u.floor();
    (i as isize, u - i)
}

/// Where the degradation box of factor `s` starts relative to the sample it belongs to: the box
/// of `X` covers `X + box_start(s) .. X + box_start(s) + s - 1` (step 3; `-o` of the definition).
#[inline]
pub fn box_start(scale: usize) -> isize {
    -(((scale - 1) / 2) as isize)
}

/// The logarithm of the weight of a distance `d` (8-bit units squared) for strength `h` and
/// noise `sigma`. Implementations sum `exp(log_weight - m)` with `m` the largest log weight of the
/// sample (kept as a running maximum on the CPU and GPU): the same `F`, and no sum that
/// underflows to 0 when every candidate is far.
#[inline]
pub fn log_weight(d: f64, sigma: f64, h: f64) -> f64 {
    -(d - sigma * sigma).max(0.0) / (h * h)
}
