//! NLM super-resolution on host threads, f32: the definition in [`crate::sr`] with the planes
//! padded by the border rule once (no index folding in the inner loops), the degradation box
//! applied separably and the output rows spread over the worker pool.

use rayon::prelude::*;

use super::{box_start, cubic_position, cubic_taps, novelty_gate, SrPlan};
use crate::device::host::HostAlgorithm;
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::{mirror, Geometry, PlanarFrame, PlaneGeometry};
use crate::window::Job;

/// A plane of f32 values (8-bit units) with a border of `pad` samples on every side, filled by
/// the border rule.
#[derive(Debug, Clone, Default)]
struct Padded {
    pad: usize,
    stride: usize,
    data: Vec<f32>,
}

impl Padded {
    fn new(w: usize, h: usize, pad: usize, value: impl Fn(usize, usize) -> f32) -> Self {
        let stride = w + 2 * pad;
        let mut data = vec![0.0; stride * (h + 2 * pad)];
        for (yy, row) in data.chunks_mut(stride).enumerate() {
            let y = mirror(yy as isize - pad as isize, h);
            for (xx, v) in row.iter_mut().enumerate() {
                *v = value(mirror(xx as isize - pad as isize, w), y);
            }
        }
        Padded { pad, stride, data }
    }

    /// The value at (x, y), for x and y within the padding.
    #[inline]
    fn at(&self, x: isize, y: isize) -> f32 {
        self.data[(y + self.pad as isize) as usize * self.stride + (x + self.pad as isize) as usize]
    }
}

/// A plane of f32 values without padding.
struct Plane32 {
    w: usize,
    h: usize,
    data: Vec<f32>,
}

/// NLM super-resolution as a host algorithm.
#[derive(Default)]
pub struct CpuSr {
    /// Per ring slot, per plane: the low-resolution plane padded by `pad`.
    ring: Vec<Vec<Padded>>,
    pad: usize,
    /// 8-bit units per stored unit.
    inv_scale: f32,
}

impl CpuSr {
    fn initial_estimate(lr: &Padded, w: usize, h: usize, s: usize, pool: &rayon::ThreadPool) -> Plane32 {
        let taps: Vec<(isize, [f32; 4])> = (0..s.max(w).max(h))
            .map(|x| {
                let (i, f) = cubic_position(x, s);
                (i, cubic_taps(f).map(|t| t as f32))
            })
            .collect();
        let mut data = vec![0.0f32; w * h];
        pool.install(|| {
            data.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
                let (iy, ty) = taps[y];
                for (x, v) in row.iter_mut().enumerate() {
                    let (ix, tx) = taps[x];
                    let mut acc = 0.0;
                    for (b, wy) in ty.iter().enumerate() {
                        let mut r = 0.0;
                        for (a, wx) in tx.iter().enumerate() {
                            r += wx * lr.at(ix + a as isize - 1, iy + b as isize - 1);
                        }
                        acc += wy * r;
                    }
                    *v = acc;
                }
            })
        });
        Plane32 { w, h, data }
    }

    /// One back-projection step: `e` plus the interpolated residual of `lr` against the cell means
    /// of `e`.
    fn back_project(e: &mut Plane32, lr: &Padded, ig: &PlaneGeometry, s: usize, pad: usize, pool: &rayon::ThreadPool) {
        let (w, h) = (ig.width, ig.height);
        let mut residual = vec![0.0f32; w * h];
        pool.install(|| {
            residual.par_chunks_mut(w).enumerate().for_each(|(j, row)| {
                for (i, r) in row.iter_mut().enumerate() {
                    let (mut sum, mut n) = (0.0f32, 0usize);
                    for y in j * s..((j + 1) * s).min(e.h) {
                        sum += e.data[y * e.w + i * s..y * e.w + ((i + 1) * s).min(e.w)].iter().sum::<f32>();
                        n += ((i + 1) * s).min(e.w).saturating_sub(i * s);
                    }
                    *r = if n > 0 { lr.at(i as isize, j as isize) - sum / n as f32 } else { 0.0 };
                }
            })
        });
        let residual = Padded::new(w, h, pad, |x, y| residual[y * w + x]);
        let up = Self::initial_estimate(&residual, e.w, e.h, s, pool);
        for (a, b) in e.data.iter_mut().zip(&up.data) {
            *a += b;
        }
    }

    /// The separable `s x s` box mean of a plane whose box at `x` starts at `x + start`, border
    /// rule outside (step 3 with `start = box_start(s)`, its adjoint with the reversed box).
    fn box_mean(src: &[f32], w: usize, h: usize, s: usize, start: isize, pool: &rayon::ThreadPool) -> Vec<f32> {
        let inv = 1.0 / s as f32;
        let mut horizontal = vec![0.0f32; w * h];
        pool.install(|| {
            horizontal.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
                let src = &src[y * w..(y + 1) * w];
                for (x, v) in row.iter_mut().enumerate() {
                    *v = (0..s as isize).map(|a| src[mirror(x as isize + start + a, w)]).sum::<f32>() * inv;
                }
            })
        });
        let mut both = vec![0.0f32; w * h];
        pool.install(|| {
            both.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
                for b in 0..s as isize {
                    let src = &horizontal[mirror(y as isize + start + b, h) * w..][..w];
                    for (v, x) in row.iter_mut().zip(src) {
                        *v += x;
                    }
                }
                for v in row.iter_mut() {
                    *v *= inv;
                }
            })
        });
        both
    }

    /// Step 3: `e` through the degradation box, padded by `pad` for the patch reads.
    fn degrade(e: &Plane32, s: usize, pad: usize, pool: &rayon::ThreadPool) -> Padded {
        let both = Self::box_mean(&e.data, e.w, e.h, s, box_start(s), pool);
        Padded::new(e.w, e.h, pad, |x, y| both[y * e.w + x])
    }

    /// Step 5: `e + fusion * D^T(r)`, the gated residual spread back over the samples each box
    /// read (the adjoint box starts at `-box_start(s) - (s - 1)`).
    fn correct(e: &mut Plane32, r: &Plane32, s: usize, fusion: f32, pool: &rayon::ThreadPool) {
        let spread = Self::box_mean(&r.data, r.w, r.h, s, -box_start(s) - (s as isize - 1), pool);
        for (a, c) in e.data.iter_mut().zip(&spread) {
            *a += fusion * c;
        }
    }

    /// Step 4 and the gate of step 5: `R = g (F - B)`; `target`: the target's index in `frames`
    /// (the novelty gate), None for none.
    fn fuse(plan: &SrPlan, (w, height): (usize, usize), b: &Padded, frames: &[&Padded], h: f32, pool: &rayon::ThreadPool, target: Option<usize>) -> Plane32 {
        let (s, r, p) = (plan.scale as isize, plan.search_radius as isize, plan.patch_radius as isize);
        let side = (2 * p + 1) as usize;
        let inv_n = 1.0 / (side * side) as f32;
        let sigma2 = plan.sigma * plan.sigma;
        let inv_h2 = 1.0 / (h * h);
        let mut data = vec![0.0f32; w * height];
        pool.install(|| {
            data.par_chunks_mut(w).enumerate().for_each(|(y, row)| {
                let y = y as isize;
                let mut patch = vec![0.0f32; side * side];
                for (x, v) in row.iter_mut().enumerate() {
                    let x = x as isize;
                    for bb in -p..=p {
                        for aa in -p..=p {
                            patch[((bb + p) as usize) * side + (aa + p) as usize] = b.at(x + s * aa, y + s * bb);
                        }
                    }
                    let (cx, cy) = (x / s, y / s);
                    let (mut num, mut den, mut m) = (0.0f32, 0.0f32, f32::NEG_INFINITY);
                    let (mut mt, mut mo) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
                    for (fi, lr) in frames.iter().enumerate() {
                        for j in cy - r..=cy + r {
                            for i in cx - r..=cx + r {
                                let mut d = 0.0f32;
                                for bb in -p..=p {
                                    let prow = &patch[((bb + p) as usize) * side..][..side];
                                    let base = (j + bb + lr.pad as isize) as usize * lr.stride + (i - p + lr.pad as isize) as usize;
                                    let lrow = &lr.data[base..base + side];
                                    for (q, l) in prow.iter().zip(lrow) {
                                        let diff = q - l;
                                        d += diff * diff;
                                    }
                                }
                                let lw = -(d * inv_n - sigma2).max(0.0) * inv_h2;
                                if Some(fi) == target {
                                    mt = mt.max(lw);
                                } else {
                                    mo = mo.max(lw);
                                }
                                if lw > m {
                                    // A new largest weight: rescale the sums to it (log_weight).
                                    let k = (m - lw).exp();
                                    num *= k;
                                    den *= k;
                                    m = lw;
                                }
                                let wgt = (lw - m).exp();
                                num += wgt * lr.at(i, j);
                                den += wgt;
                            }
                        }
                    }
                    let g = if target.is_some() && plan.novelty_gate { novelty_gate(mt as f64, mo as f64) as f32 } else { 1.0 };
                    *v = g * (num / den - b.at(x, y));
                }
            })
        });
        Plane32 { w, h: height, data }
    }
}

impl HostAlgorithm for CpuSr {
    fn describe(&self, threads: usize) -> String {
        format!("cpu ({threads} threads, nlm-sr)")
    }

    fn configure(&mut self, _geometry: &Geometry, plan: &Plan, ring_slots: usize, _pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.sr("the CPU super-resolution implementation")?;
        // Reads reach r + p low-resolution samples beyond the cell, 2 for the cubic taps.
        self.pad = (plan.search_radius + plan.patch_radius).max(2) + 1;
        self.ring = vec![Vec::new(); ring_slots];
        self.inv_scale = 1.0 / plan.scale_to_8bit;
        Ok(())
    }

    fn store(&mut self, slot: usize, frame: &PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let pad = self.pad;
        let dst = self.ring.get_mut(slot).ok_or_else(|| Error::State(format!("ring slot {slot} out of range")))?;
        let inv = self.inv_scale;
        *dst = pool.install(|| frame.planes.par_iter().map(|pl| Padded::new(pl.width, pl.height, pad, |x, y| pl.samples.get(y * pl.width + x) as f32 * inv)).collect());
        Ok(())
    }

    fn compute(&mut self, _job: &Job, window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.sr("the CPU super-resolution implementation")?;
        let slot = |dt: i32| window.iter().find(|f| f.0 == dt).map(|f| f.1);
        let target = slot(0).ok_or_else(|| Error::State("job without its target frame".into()))?;
        for &(_, s) in window {
            if self.ring.get(s).map(|f| f.is_empty()).unwrap_or(true) {
                return Err(Error::State(format!("ring slot {s} is empty")));
            }
        }
        for (p, og) in plan.output.planes.iter().enumerate() {
            let refs: Vec<&Padded> = window.iter().map(|&(_, s)| &self.ring[s][p]).collect();
            let ig = &plan.input.planes[p];
            let denoised = (plan.fused[p] && plan.denoises()).then(|| {
                let noisy = &self.ring[target][p];
                let own = Plane32 { w: ig.width, h: ig.height, data: (0..ig.width * ig.height).map(|i| noisy.at((i % ig.width) as isize, (i / ig.width) as isize)).collect() };
                // At factor 1 with all of the correction: E' = F.
                let mut d = Self::fuse(&plan.denoise_plan(), (ig.width, ig.height), noisy, &refs, plan.strength[p], pool, None);
                for (v, o) in d.data.iter_mut().zip(&own.data) {
                    *v += o;
                }
                Padded::new(ig.width, ig.height, self.pad, |x, y| d.data[y * ig.width + x])
            });
            let lr = denoised.as_ref().unwrap_or(&self.ring[target][p]);
            let mut e = Self::initial_estimate(lr, og.width, og.height, plan.scale, pool);
            for _ in 0..plan.deblur {
                Self::back_project(&mut e, lr, ig, plan.scale, self.pad, pool);
            }
            // Without other frames the gate of step 5 is 0: nothing to fuse.
            if plan.fused[p] && plan.fuses(window.len()) {
                for _ in 0..plan.iterations {
                    let b = Self::degrade(&e, plan.scale, plan.scale * plan.patch_radius, pool);
                    let r = Self::fuse(plan, (e.w, e.h), &b, &refs, plan.strength[p], pool, window.iter().position(|f| f.0 == 0));
                    Self::correct(&mut e, &r, plan.scale, plan.fusion, pool);
                }
            }
            let dst = &mut out.planes[p];
            let (scale, max) = (plan.scale_to_8bit, plan.max_value as f32);
            for (i, v) in e.data.iter().enumerate() {
                dst.samples.set(i, (v * scale + 0.5).floor().clamp(0.0, max) as u32);
            }
        }
        Ok(())
    }
}
