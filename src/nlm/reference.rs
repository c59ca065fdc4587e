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

/// Denoises `group` of the target frame (dt 0 in `frames`, which are in time order) into `out`.
pub fn denoise_group(plan: &NlmPlan, group: &WeightGroup, frames: &[(i32, &PlanarFrame)], out: &mut PlanarFrame) {
    let target = frames.iter().find(|(dt, _)| *dt == 0).expect("target frame").1;
    let a = plan.search_radius as isize;
    let s = plan.patch_radius as isize;
    let (sx, sy) = (group.guide_step_x as isize, group.guide_step_y as isize);
    let norm = 1.0 / ((group.guides.len() as f64) * ((2 * s + 1) * (2 * s + 1)) as f64);
    let inv_scale2 = 1.0 / (plan.scale_to_8bit as f64 * plan.scale_to_8bit as f64);
    let h = group.h as f64;
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
                        let wt = plan.weight(ssd * norm * inv_scale2, h);
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
            for (v, &o) in sums.iter_mut().zip(&group.outputs) {
                let centre = sample(&target.planes[o], px, py);
                let value = if total > 0.0 { (*v + wc * centre) / total } else { centre };
                let q = (value + 0.5).floor().clamp(0.0, plan.max_value as f64) as u32;
                out.planes[o].samples.set(py as usize * w + px as usize, q);
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
