//! The f64 reference of NLM super-resolution: the definition in [`crate::sr`], written plainly,
//! one sample at a time (the oracle of the CPU and CUDA implementations).

use super::{box_start, cubic_position, cubic_taps, log_weight, novelty_gate, SrPlan};
use crate::bm3d::to_stored;
use crate::device::host::{FrameCopies, HostAlgorithm};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::{mirror, Geometry, PlanarFrame};
use crate::window::Job;

/// A plane of f64 values, 8-bit units.
#[derive(Debug, Clone)]
pub struct Image {
    pub w: usize,
    pub h: usize,
    pub data: Vec<f64>,
}

impl Image {
    pub fn of_plane(frame: &PlanarFrame, p: usize, scale: f64) -> Self {
        let pl = &frame.planes[p];
        Image { w: pl.width, h: pl.height, data: (0..pl.width * pl.height).map(|i| pl.samples.get(i) as f64 / scale).collect() }
    }

    /// The value at (x, y), border rule outside.
    pub fn at(&self, x: isize, y: isize) -> f64 {
        self.data[mirror(y, self.h) * self.w + mirror(x, self.w)]
    }
}

/// Step 1: the target plane `lr` interpolated to `w x h` at factor `s`.
pub fn initial_estimate(lr: &Image, w: usize, h: usize, s: usize) -> Image {
    let mut data = vec![0.0; w * h];
    for y in 0..h {
        let (iy, fy) = cubic_position(y, s);
        let ty = cubic_taps(fy);
        for x in 0..w {
            let (ix, fx) = cubic_position(x, s);
            let tx = cubic_taps(fx);
            let mut v = 0.0;
            for (b, wy) in ty.iter().enumerate() {
                for (a, wx) in tx.iter().enumerate() {
                    v += wy * wx * lr.at(ix + a as isize - 1, iy + b as isize - 1);
                }
            }
            data[y * w + x] = v;
        }
    }
    Image { w, h, data }
}

/// Step 2, one back-projection step: `e` plus the interpolated residual of `lr` against the cell
/// means of `e`.
pub fn back_project(e: &mut Image, lr: &Image, s: usize) {
    let mut residual = lr.clone();
    for j in 0..lr.h {
        for i in 0..lr.w {
            let (mut sum, mut n) = (0.0, 0usize);
            for y in j * s..((j + 1) * s).min(e.h) {
                for x in i * s..((i + 1) * s).min(e.w) {
                    sum += e.data[y * e.w + x];
                    n += 1;
                }
            }
            // A cell wholly outside the plane (the last of an odd chroma plane) has no residual.
            residual.data[j * lr.w + i] = if n > 0 { lr.data[j * lr.w + i] - sum / n as f64 } else { 0.0 };
        }
    }
    let up = initial_estimate(&residual, e.w, e.h, s);
    for (a, b) in e.data.iter_mut().zip(&up.data) {
        *a += b;
    }
}

/// Step 3: `e` through the degradation box of factor `s`.
pub fn degrade(e: &Image, s: usize) -> Image {
    let o = box_start(s);
    let n = (s * s) as f64;
    let mut data = vec![0.0; e.w * e.h];
    for y in 0..e.h as isize {
        for x in 0..e.w as isize {
            let mut v = 0.0;
            for b in 0..s as isize {
                for a in 0..s as isize {
                    v += e.at(x + o + a, y + o + b);
                }
            }
            data[y as usize * e.w + x as usize] = v / n;
        }
    }
    Image { w: e.w, h: e.h, data }
}

/// Step 4 and the gate of step 5 for one plane: `R = g (F - B)` from the degraded estimate `b`
/// and the window's low-resolution planes; `target`: the index of the target among them (the
/// novelty gate), or None for no gate (step 0).
pub fn fuse(plan: &SrPlan, b: &Image, frames: &[&Image], h: f64, target: Option<usize>) -> Image {
    let (s, r, p) = (plan.scale as isize, plan.search_radius as isize, plan.patch_radius as isize);
    let n = ((2 * p + 1) * (2 * p + 1)) as f64;
    let mut data = vec![0.0; b.w * b.h];
    for y in 0..b.h as isize {
        for x in 0..b.w as isize {
            let (cx, cy) = (x / s, y / s);
            // (log weight, value) of every candidate; the weights are taken relative to the
            // largest, which leaves F unchanged and keeps it defined where all would underflow.
            let mut candidates = Vec::new();
            let (mut best_target, mut best_other) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
            for (f, lr) in frames.iter().enumerate() {
                for j in cy - r..=cy + r {
                    for i in cx - r..=cx + r {
                        let mut d = 0.0;
                        for bb in -p..=p {
                            for aa in -p..=p {
                                let diff = b.at(x + s * aa, y + s * bb) - lr.at(i + aa, j + bb);
                                d += diff * diff;
                            }
                        }
                        let lw = log_weight(d / n, plan.sigma as f64, h);
                        if Some(f) == target {
                            best_target = best_target.max(lw);
                        } else {
                            best_other = best_other.max(lw);
                        }
                        candidates.push((lw, lr.at(i, j)));
                    }
                }
            }
            let m = candidates.iter().map(|c| c.0).fold(f64::NEG_INFINITY, f64::max);
            let (num, den) = candidates.iter().fold((0.0, 0.0), |(n, d), &(lw, v)| {
                let w = (lw - m).exp();
                (n + w * v, d + w)
            });
            let i = (y as usize) * b.w + x as usize;
            let g = if target.is_some() && plan.novelty_gate { novelty_gate(best_target, best_other) } else { 1.0 };
            data[i] = g * (num / den - b.data[i]);
        }
    }
    Image { w: b.w, h: b.h, data }
}

/// Step 5: `e + fusion * D^T(r)`, the gated residual spread back over the samples each box read.
pub fn correct(e: &Image, r: &Image, s: usize, fusion: f64) -> Image {
    let o = box_start(s);
    let n = (s * s) as f64;
    let mut data = e.data.clone();
    for y in 0..e.h as isize {
        for x in 0..e.w as isize {
            let mut v = 0.0;
            for b in 0..s as isize {
                for a in 0..s as isize {
                    v += r.at(x - o - a, y - o - b);
                }
            }
            data[y as usize * e.w + x as usize] += fusion * v / n;
        }
    }
    Image { w: e.w, h: e.h, data }
}

/// The output planes of one job: `frames` = (dt, frame) in time order, the target at dt 0.
pub fn upscale(plan: &SrPlan, frames: &[(i32, &PlanarFrame)], out: &mut PlanarFrame) -> Result<()> {
    let scale = plan.scale_to_8bit as f64;
    let target = frames.iter().find(|f| f.0 == 0).ok_or_else(|| Error::State("job without its target frame".into()))?.1;
    for (p, og) in plan.output.planes.iter().enumerate() {
        let mut lr = Image::of_plane(target, p, scale);
        let window: Vec<Image> = frames.iter().map(|(_, f)| Image::of_plane(f, p, scale)).collect();
        let refs: Vec<&Image> = window.iter().collect();
        if plan.fused[p] && plan.denoises() {
            // At factor 1 with all of the correction: E' = F.
            let r = fuse(&plan.denoise_plan(), &lr, &refs, plan.strength[p] as f64, None);
            lr = correct(&lr, &r, 1, 1.0);
        }
        let mut e = initial_estimate(&lr, og.width, og.height, plan.scale);
        for _ in 0..plan.deblur {
            back_project(&mut e, &lr, plan.scale);
        }
        // Without other frames the gate of step 5 is 0: nothing to fuse.
        if plan.fused[p] && plan.fuses(frames.len()) {
            for _ in 0..plan.iterations {
                let b = degrade(&e, plan.scale);
                let r = fuse(plan, &b, &refs, plan.strength[p] as f64, frames.iter().position(|f| f.0 == 0));
                e = correct(&e, &r, plan.scale, plan.fusion as f64);
            }
        }
        let dst = &mut out.planes[p];
        for (i, v) in e.data.iter().enumerate() {
            dst.samples.set(i, to_stored(*v, scale, plan.max_value));
        }
    }
    Ok(())
}

/// The reference as a host algorithm: the ring holds copies of the frames.
#[derive(Default)]
pub struct ReferenceSr {
    ring: FrameCopies,
}

impl HostAlgorithm for ReferenceSr {
    fn describe(&self, _threads: usize) -> String {
        "reference (f64, single thread, nlm-sr)".into()
    }

    fn configure(&mut self, _geometry: &Geometry, plan: &Plan, ring_slots: usize, _pool: &rayon::ThreadPool) -> Result<()> {
        plan.sr("the super-resolution reference")?;
        self.ring.reset(ring_slots);
        Ok(())
    }

    fn store(&mut self, slot: usize, frame: &PlanarFrame, _pool: &rayon::ThreadPool) -> Result<()> {
        self.ring.store(slot, frame)
    }

    fn compute(&mut self, _job: &Job, window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, _pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.sr("the super-resolution reference")?;
        let frames = self.ring.window(window)?;
        upscale(plan, &frames, out)
    }
}
