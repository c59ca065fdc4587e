//! The NLM reference: temporal NLM written straight from its definition, in f64, one sample at a
//! time. Slow on purpose; every other implementation is tested against it.
//!
//! For a target sample p of output plane o in frame t, with search offsets d in [-a, a]^2 and
//! frames u in the window:
//!
//! ```text
//! d2(p, u, d) = mean over guide planes g and patch offsets k in [-s, s]^2 of
//!               ((G_t(S p + k) - G_u(S (p + d) + k)) / scale)^2
//! w           = weight(d2)                       (see NlmPlan::weight)
//! out_o(p)    = sum w * O_u(p + d) / sum w      (centre sample weighted wref * max w)
//! ```
//!
//! where S is the guide step (1, or the chroma subsampling for luma-guided chroma), coordinates
//! outside a plane are mirrored ([`crate::planar::mirror`]), and `scale` maps samples to 8-bit code
//! values. The result is rounded to the nearest integer and clamped; a zero weight sum keeps the
//! input sample.
//!
//! With patch-wise aggregation (aggregation radius r > 0) the weights of an offset are first
//! summed over the patches centred within r of p, inside the plane:
//!
//! ```text
//! W(p, u, d)  = sum over k in [-r, r]^2 with p + k in the plane of w(p + k, u, d)
//! out_o(p)    = (sum W * O_u(p + d) + wref * C(p) * O_t(p)) / (sum W + wref * C(p))
//! C(p)        = sum over the same k of max over (u, d) of w(p + k, u, d)
//! ```
//!
//! i.e. every patch gives the samples it covers within r the values its matches hold there (their
//! sample at the same place in the patch is O_u(p + d)), each patch's own centre weight included.

use crate::device::host::{FrameCopies, HostAlgorithm};
use crate::error::Result;
use crate::nlm::{NlmPlan, WeightGroup};
use crate::plan::Plan;
use crate::planar::{mirror, Geometry, PlanarFrame, Plane};
use crate::window::Job;

/// The f64 reference as a host algorithm: its ring holds copies of the frames.
#[derive(Default)]
pub struct ReferenceNlm {
    ring: FrameCopies,
}

#[inline]
fn sample(plane: &Plane, x: isize, y: isize) -> f64 {
    plane.get(mirror(x, plane.width), mirror(y, plane.height)) as f64
}

/// The weight of the patch of output position `p` in `target` against that of `p + d` in `frame`:
/// the mean over guide planes and patch offsets of the squared differences in 8-bit units, through
/// [`NlmPlan::weight`] (the order of operations the CPU backend's exact path repeats).
fn patch_weight(plan: &NlmPlan, group: &WeightGroup, target: &PlanarFrame, frame: &PlanarFrame, (px, py): (isize, isize), (dx, dy): (isize, isize)) -> f64 {
    let s = plan.patch_radius as isize;
    let (sx, sy) = (group.guide_step_x as isize, group.guide_step_y as isize);
    let norm = 1.0 / ((group.guides.len() as f64) * ((2 * s + 1) * (2 * s + 1)) as f64);
    let inv_scale2 = 1.0 / (plan.scale_to_8bit as f64 * plan.scale_to_8bit as f64);
    let mut ssd = 0.0;
    for &g in &group.guides {
        let (gt, gu) = (&target.planes[g], &frame.planes[g]);
        for ky in -s..=s {
            for kx in -s..=s {
                let d = sample(gt, px * sx + kx, py * sy + ky) - sample(gu, (px + dx) * sx + kx, (py + dy) * sy + ky);
                ssd += d * d;
            }
        }
    }
    plan.weight(ssd * norm * inv_scale2, group.h as f64)
}

/// The weighted mean `(sum + wc * centre) / total` rounded half up and clamped as the output
/// sample; a zero weight sum keeps `centre`.
fn rounded_mean(plan: &NlmPlan, sum: f64, total: f64, wc: f64, centre: f64) -> u32 {
    let value = if total > 0.0 { (sum + wc * centre) / total } else { centre };
    (value + 0.5).floor().clamp(0.0, plan.max_value as f64) as u32
}

/// Denoises `group` of the target frame (dt 0 in `frames`, which are in time order) into `out`.
pub fn denoise_group(plan: &NlmPlan, group: &WeightGroup, frames: &[(i32, &PlanarFrame)], out: &mut PlanarFrame) {
    if plan.aggregation_radius > 0 {
        return denoise_group_aggregated(plan, group, frames, out);
    }
    let target = frames.iter().find(|(dt, _)| *dt == 0).expect("target frame").1;
    let a = plan.search_radius as isize;
    let w = target.planes[group.outputs[0]].width;
    let ht = target.planes[group.outputs[0]].height;
    let mut sums = vec![0f64; group.outputs.len()];
    for py in 0..ht as isize {
        for px in 0..w as isize {
            sums.iter_mut().for_each(|v| *v = 0.0);
            let mut total = 0.0;
            let mut wmax = 0.0f64;
            for (dt, frame) in frames {
                for dy in -a..=a {
                    for dx in -a..=a {
                        if *dt == 0 && dx == 0 && dy == 0 {
                            continue;
                        }
                        let wt = patch_weight(plan, group, target, frame, (px, py), (dx, dy));
                        wmax = wmax.max(wt);
                        total += wt;
                        for (v, &o) in sums.iter_mut().zip(&group.outputs) {
                            *v += wt * sample(&frame.planes[o], px + dx, py + dy);
                        }
                    }
                }
            }
            let wc = plan.wref as f64 * wmax;
            total += wc;
            for (v, &o) in sums.iter().zip(&group.outputs) {
                let q = rounded_mean(plan, *v, total, wc, sample(&target.planes[o], px, py));
                out.planes[o].samples.set(py as usize * w + px as usize, q);
            }
        }
    }
}

/// [`denoise_group`] with patch-wise aggregation: one offset of one frame at a time, its weight
/// image summed over (2r+1)^2 positions.
fn denoise_group_aggregated(plan: &NlmPlan, group: &WeightGroup, frames: &[(i32, &PlanarFrame)], out: &mut PlanarFrame) {
    let target = frames.iter().find(|(dt, _)| *dt == 0).expect("target frame").1;
    let a = plan.search_radius as isize;
    let r = plan.aggregation_radius as isize;
    let w = target.planes[group.outputs[0]].width;
    let ht = target.planes[group.outputs[0]].height;
    let n = w * ht;
    let mut sums = vec![vec![0f64; n]; group.outputs.len()];
    let mut total = vec![0f64; n];
    let mut wmax = vec![0f64; n];
    let mut weights = vec![0f64; n];
    // Sum of `img` over the positions within r of (x, y) inside the plane.
    let spread = |img: &[f64], x: isize, y: isize| -> f64 {
        let mut v = 0.0;
        for qy in (y - r).max(0)..=(y + r).min(ht as isize - 1) {
            for qx in (x - r).max(0)..=(x + r).min(w as isize - 1) {
                v += img[qy as usize * w + qx as usize];
            }
        }
        v
    };
    for (dt, frame) in frames {
        for dy in -a..=a {
            for dx in -a..=a {
                if *dt == 0 && dx == 0 && dy == 0 {
                    continue;
                }
                for py in 0..ht as isize {
                    for px in 0..w as isize {
                        let i = py as usize * w + px as usize;
                        weights[i] = patch_weight(plan, group, target, frame, (px, py), (dx, dy));
                        wmax[i] = wmax[i].max(weights[i]);
                    }
                }
                for py in 0..ht as isize {
                    for px in 0..w as isize {
                        let i = py as usize * w + px as usize;
                        let wt = spread(&weights, px, py);
                        total[i] += wt;
                        for (v, &o) in sums.iter_mut().zip(&group.outputs) {
                            v[i] += wt * sample(&frame.planes[o], px + dx, py + dy);
                        }
                    }
                }
            }
        }
    }
    for py in 0..ht as isize {
        for px in 0..w as isize {
            let i = py as usize * w + px as usize;
            let wc = plan.wref as f64 * spread(&wmax, px, py);
            let t = total[i] + wc;
            for (v, &o) in sums.iter().zip(&group.outputs) {
                out.planes[o].samples.set(i, rounded_mean(plan, v[i], t, wc, sample(&target.planes[o], px, py)));
            }
        }
    }
}

impl HostAlgorithm for ReferenceNlm {
    fn describe(&self, _threads: usize) -> String {
        "reference (f64, single thread)".into()
    }

    fn configure(&mut self, _geometry: &Geometry, plan: &Plan, ring_slots: usize, _pool: &rayon::ThreadPool) -> Result<()> {
        plan.nlm("the NLM reference")?;
        self.ring.reset(ring_slots);
        Ok(())
    }

    fn store(&mut self, slot: usize, frame: &PlanarFrame, _pool: &rayon::ThreadPool) -> Result<()> {
        self.ring.store(slot, frame)
    }

    fn compute(&mut self, _job: &Job, window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, _pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.nlm("the NLM reference")?;
        let frames = self.ring.window(window)?;
        for group in &plan.groups {
            denoise_group(plan, group, &frames, out);
        }
        Ok(())
    }
}
