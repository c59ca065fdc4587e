//! The BM3D reference: the definition of [`crate::bm3d`] written plainly, in f64, one reference
//! patch at a time. Slow on purpose; the CPU and CUDA implementations are tested against it.

use super::{
    basics_to_compute, extent, frame_id, haar, job_dts, kaiser_window, motion_fields, pow2_floor, reference_corners, reference_dts, step_frames, to_stored, Bm3dGroup, Bm3dPlan, FrameId, MotionFields,
    PatchTransform, FRAME_CODE_BIAS, KAISER_BETA,
};
use crate::device::host::HostAlgorithm;
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::{mirror, Geometry, PlanarFrame};
use crate::window::Job;

/// One plane of a frame in 8-bit units over its extent (mirrored beyond the plane).
#[derive(Debug, Clone)]
pub struct Image {
    pub w: usize,
    pub h: usize,
    pub data: Vec<f64>,
}

impl Image {
    /// Plane `p` of `frame` in 8-bit units, extended to `ew x eh`.
    pub fn from_plane(frame: &PlanarFrame, p: usize, scale: f64, ew: usize, eh: usize) -> Self {
        let plane = &frame.planes[p];
        let mut data = vec![0.0; ew * eh];
        for y in 0..eh {
            for x in 0..ew {
                data[y * ew + x] = plane.get(mirror(x as isize, plane.width), mirror(y as isize, plane.height)) as f64 / scale;
            }
        }
        Image { w: ew, h: eh, data }
    }

    #[inline]
    fn at(&self, x: usize, y: usize) -> f64 {
        self.data[y * self.w + x]
    }
}

/// A candidate patch: distance, frame (dt), corner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub d: f64,
    pub dt: i32,
    pub y: usize,
    pub x: usize,
}

/// The patch distance of the group's planes (mean squared difference, 8-bit units squared).
fn distance(images: &[(i32, Vec<&Image>)], k: usize, a: (i32, usize, usize), b: (i32, usize, usize)) -> f64 {
    let fa = &images.iter().find(|f| f.0 == a.0).expect("frame of the window").1;
    let fb = &images.iter().find(|f| f.0 == b.0).expect("frame of the window").1;
    let mut sum = 0.0;
    for (ia, ib) in fa.iter().zip(fb) {
        for i in 0..k {
            for j in 0..k {
                let d = ia.at(a.2 + j, a.1 + i) - ib.at(b.2 + j, b.1 + i);
                sum += d * d;
            }
        }
    }
    sum / (fa.len() * k * k) as f64
}

/// The candidates of the reference patch at (`x0`, `y0`) of frame `rdt` (see the module doc of
/// [`crate::bm3d`]): `matching` holds the matching images of the window's frames (dt ascending).
#[allow(clippy::too_many_arguments)]
pub fn candidates(matching: &[(i32, Vec<&Image>)], k: usize, rdt: i32, x0: usize, y0: usize, radius: usize, seeds: usize, seed_radius: usize, motion: &MotionFields) -> Vec<Candidate> {
    let (ew, eh) = (matching[0].1[0].w, matching[0].1[0].h);
    let (max_x, max_y) = (ew - k, eh - k);
    let mut out = Vec::new();
    // The reference's frame: exhaustive.
    let mut frame0 = Vec::new();
    for y in y0.saturating_sub(radius)..=(y0 + radius).min(max_y) {
        for x in x0.saturating_sub(radius)..=(x0 + radius).min(max_x) {
            if (x, y) != (x0, y0) {
                frame0.push(Candidate { d: distance(matching, k, (rdt, y0, x0), (rdt, y, x)), dt: rdt, y, x });
            }
        }
    }
    out.extend(frame0.iter().copied());
    let by_key = |a: &Candidate, b: &Candidate| a.d.total_cmp(&b.d).then(a.y.cmp(&b.y)).then(a.x.cmp(&b.x));
    // The seeds of t's neighbours: R, then the best of frame 0.
    let mut sorted0 = frame0.clone();
    sorted0.sort_by(by_key);
    let mut first_seeds: Vec<(usize, usize)> = vec![(y0, x0)];
    first_seeds.extend(sorted0.iter().map(|c| (c.y, c.x)));
    first_seeds.truncate(seeds);
    for dir in [-1i32, 1] {
        let mut seed_list = first_seeds.clone();
        let mut dt = rdt + dir;
        while matching.iter().any(|f| f.0 == dt) {
            if let (Some(&(sy, sx)), Some(field)) = (seed_list.first(), motion.get(&(dt - dir, dt))) {
                if let Some(c) = field.companion(sy, sx, max_y, max_x) {
                    seed_list.insert(0, c);
                }
            }
            let mut here = Vec::new();
            for (si, &(sy, sx)) in seed_list.iter().enumerate() {
                for y in sy.saturating_sub(seed_radius)..=(sy + seed_radius).min(max_y) {
                    for x in sx.saturating_sub(seed_radius)..=(sx + seed_radius).min(max_x) {
                        let claimed = seed_list[..si].iter().any(|&(py, px)| py.abs_diff(y) <= seed_radius && px.abs_diff(x) <= seed_radius);
                        if !claimed {
                            here.push(Candidate { d: distance(matching, k, (rdt, y0, x0), (dt, y, x)), dt, y, x });
                        }
                    }
                }
            }
            out.extend(here.iter().copied());
            here.sort_by(by_key);
            seed_list = here.iter().take(seeds).map(|c| (c.y, c.x)).collect();
            dt += dir;
        }
    }
    out
}

/// The group of a reference patch: R first, then the candidates within `tau`, best first, `n` in
/// all (a power of two).
pub fn group(r: Candidate, cands: &[Candidate], tau: f64, max: usize) -> Vec<Candidate> {
    let mut within: Vec<Candidate> = cands.iter().copied().filter(|c| c.d <= tau).collect();
    within.sort_by(|a, b| a.d.total_cmp(&b.d).then((a.dt + FRAME_CODE_BIAS).cmp(&(b.dt + FRAME_CODE_BIAS))).then(a.y.cmp(&b.y)).then(a.x.cmp(&b.x)));
    let mut g = vec![r];
    g.extend(within);
    g.truncate(max);
    let n = pow2_floor(g.len());
    g.truncate(n);
    g
}

/// The separable 2D transform with matrix `m` (`out[a] = sum_b m[a][b] in[b]` on every row,
/// then every column) of a k x k patch, in place.
fn transform2(m: &[f64], k: usize, p: &mut [f64]) {
    let mut tmp = vec![0.0; k * k];
    for i in 0..k {
        for a in 0..k {
            tmp[i * k + a] = (0..k).map(|b| m[a * k + b] * p[i * k + b]).sum();
        }
    }
    for j in 0..k {
        for a in 0..k {
            p[a * k + j] = (0..k).map(|b| m[a * k + b] * tmp[b * k + j]).sum();
        }
    }
}

/// Numerators and denominators of one plane over its extent.
struct Sums {
    num: Vec<f64>,
    den: Vec<f64>,
}

/// One step's estimate of the group's planes in frame 0 (8-bit units, over the plane's own
/// samples, row-major): `noisy` and `matching` (the basic estimates in step 2) hold the step's
/// window, `basic` the basic estimates in step 2.
#[allow(clippy::too_many_arguments)]
pub fn estimate(plan: &Bm3dPlan, g: &Bm3dGroup, wiener: bool, noisy: &[(i32, Vec<&Image>)], basic: Option<&[(i32, Vec<&Image>)]>, w: usize, h: usize) -> Vec<Vec<f64>> {
    let s = &plan.settings;
    let k = s.patch_size as usize;
    let (ew, eh) = (noisy[0].1[0].w, noisy[0].1[0].h);
    let matching = basic.unwrap_or(noisy);
    let (fwd, inv) = PatchTransform::of_step(wiener).matrices(k);
    let kai = kaiser_window(k, KAISER_BETA);
    let (tau, max, lambda) = if wiener { (s.wiener_threshold as f64, s.wiener_group_size as usize, 0.0) } else { (s.threshold as f64, s.group_size as usize, s.lambda as f64) };
    let mut sums: Vec<Sums> = g.planes.iter().map(|_| Sums { num: vec![0.0; ew * eh], den: vec![0.0; ew * eh] }).collect();
    fn frame_of<'a>(set: &[(i32, Vec<&'a Image>)], dt: i32, j: usize) -> &'a Image {
        set.iter().find(|f| f.0 == dt).expect("window frame").1[j]
    }
    let dts: Vec<i32> = matching.iter().map(|f| f.0).collect();
    let step = s.block_step_of(wiener) as usize;
    let (ys, xs) = (reference_corners(eh, k, step), reference_corners(ew, k, step));
    let corners: Vec<(usize, usize)> = ys.iter().flat_map(|&y| xs.iter().map(move |&x| (y, x))).collect();
    let motion = if s.motion { motion_fields(&noisy.iter().map(|f| (f.0, &f.1[0].data[..])).collect::<Vec<_>>(), ew, eh, plan.scale_to_8bit as f64) } else { MotionFields::new() };
    for (rdt, frames) in reference_dts(&dts, plan) {
        let matching: Vec<(i32, Vec<&Image>)> = matching.iter().filter(|f| frames.contains(&f.0)).cloned().collect();
        for &(y0, x0) in &corners {
            let cands = candidates(&matching, k, rdt, x0, y0, s.search_radius as usize, s.seeds_of(wiener) as usize, s.seed_radius as usize, &motion);
            let members = group(Candidate { d: 0.0, dt: rdt, y: y0, x: x0 }, &cands, tau, max);
            let n = members.len();
            for (j, sj) in sums.iter_mut().enumerate() {
                let sigma = g.sigmas[j] as f64;
                let patches = |set: &[(i32, Vec<&Image>)]| -> Vec<Vec<f64>> {
                    members
                        .iter()
                        .map(|m| {
                            let img = frame_of(set, m.dt, j);
                            let mut p = vec![0.0; k * k];
                            for i in 0..k {
                                for q in 0..k {
                                    p[i * k + q] = img.at(m.x + q, m.y + i);
                                }
                            }
                            transform2(&fwd, k, &mut p);
                            p
                        })
                        .collect()
                };
                let mut y = patches(noisy);
                let b = if wiener { Some(patches(basic.expect("basic estimates in step 2"))) } else { None };
                let bayes = b.as_ref().filter(|_| s.bayes).map(|b| bayes_estimates(&y, b, sigma));
                let mut col = vec![0.0; n];
                let mut bcol = vec![0.0; n];
                let mut weight_sum = 0.0;
                for t in 0..k * k {
                    for m in 0..n {
                        col[m] = y[m][t];
                    }
                    haar(&mut col, false);
                    match &b {
                        None => {
                            for v in col.iter_mut() {
                                if v.abs() <= lambda * sigma {
                                    *v = 0.0;
                                } else {
                                    weight_sum += 1.0;
                                }
                            }
                        }
                        Some(b) => {
                            for m in 0..n {
                                bcol[m] = b[m][t];
                            }
                            haar(&mut bcol, false);
                            for (v, bv) in col.iter_mut().zip(&bcol) {
                                let omega = if sigma == 0.0 { 1.0 } else { bv * bv / (bv * bv + sigma * sigma) };
                                *v *= omega;
                                weight_sum += omega * omega;
                            }
                        }
                    }
                    haar(&mut col, true);
                    for m in 0..n {
                        y[m][t] = col[m];
                    }
                }
                if let Some(bayes) = &bayes {
                    for (p, e) in y.iter_mut().zip(bayes) {
                        for (v, ev) in p.iter_mut().zip(e) {
                            *v = 0.5 * (*v + ev);
                        }
                    }
                }
                let wj = 1.0 / weight_sum.max(1.0);
                for (m, p) in members.iter().zip(y.iter_mut()) {
                    if m.dt != 0 {
                        continue;
                    }
                    transform2(&inv, k, p);
                    for i in 0..k {
                        for q in 0..k {
                            let at = (m.y + i) * ew + m.x + q;
                            sj.num[at] += wj * kai[i * k + q] * p[i * k + q];
                            sj.den[at] += wj * kai[i * k + q];
                        }
                    }
                }
            }
        }
    }
    sums.iter()
        .map(|sj| {
            let mut out = vec![0.0; w * h];
            for y in 0..h {
                for x in 0..w {
                    out[y * w + x] = sj.num[y * ew + x] / sj.den[y * ew + x];
                }
            }
            out
        })
        .collect()
}

/// The Bayesian estimates of a group's noisy patches `y` from its basic estimate's patches `b`
/// (vectors in one orthonormal basis), as the module's definition writes them: `mu + C (C +
/// sigma^2 I)^-1 (y_m - mu)`, with the `d x d` covariance solved by its Cholesky factor.
fn bayes_estimates(y: &[Vec<f64>], b: &[Vec<f64>], sigma: f64) -> Vec<Vec<f64>> {
    let (n, d) = (b.len(), b[0].len());
    if sigma == 0.0 {
        return y.to_vec();
    }
    let mu: Vec<f64> = (0..d).map(|t| b.iter().map(|p| p[t]).sum::<f64>() / n as f64).collect();
    let mut c = vec![0.0; d * d];
    for p in b {
        for r in 0..d {
            for q in 0..d {
                c[r * d + q] += (p[r] - mu[r]) * (p[q] - mu[q]) / n as f64;
            }
        }
    }
    // A = C + sigma^2 I = L L^T.
    let mut l = c.clone();
    for r in 0..d {
        l[r * d + r] += sigma * sigma;
    }
    for j in 0..d {
        let diag = (l[j * d + j] - (0..j).map(|q| l[j * d + q] * l[j * d + q]).sum::<f64>()).sqrt();
        l[j * d + j] = diag;
        for i in j + 1..d {
            l[i * d + j] = (l[i * d + j] - (0..j).map(|q| l[i * d + q] * l[j * d + q]).sum::<f64>()) / diag;
        }
    }
    y.iter()
        .map(|ym| {
            let mut u: Vec<f64> = ym.iter().zip(&mu).map(|(v, m)| v - m).collect();
            for i in 0..d {
                u[i] = (u[i] - (0..i).map(|q| l[i * d + q] * u[q]).sum::<f64>()) / l[i * d + i];
            }
            for i in (0..d).rev() {
                u[i] = (u[i] - (i + 1..d).map(|q| l[q * d + i] * u[q]).sum::<f64>()) / l[i * d + i];
            }
            (0..d).map(|r| mu[r] + (0..d).map(|q| c[r * d + q] * u[q]).sum::<f64>()).collect()
        })
        .collect()
}

/// A ring slot: the frame and, with two steps, the basic estimates computed from it.
#[derive(Default)]
struct Slot {
    frame: Option<PlanarFrame>,
    /// (epoch, seq) of the frame the basic estimates belong to, and per plane of the geometry
    /// (None for planes not denoised) the estimate over the plane's extent.
    basic: Option<(FrameId, Vec<Option<Image>>)>,
}

/// The f64 reference as a host algorithm.
#[derive(Default)]
pub struct ReferenceBm3d {
    ring: Vec<Slot>,
}

impl ReferenceBm3d {
    fn frame(&self, slot: usize) -> Result<&PlanarFrame> {
        self.ring.get(slot).and_then(|s| s.frame.as_ref()).ok_or_else(|| Error::State(format!("ring slot {slot} is empty")))
    }

    /// The noisy images (8-bit units, extended) of `g`'s planes for the frames `dts`.
    fn noisy_images(&self, job: &Job, dts: &[i32], g: &Bm3dGroup, plan: &Bm3dPlan) -> Result<Vec<(i32, Vec<Image>)>> {
        let k = plan.settings.patch_size as usize;
        dts.iter()
            .map(|&dt| {
                let f = self.frame(slot_of(job, dt))?;
                let p0 = &f.planes[g.planes[0]];
                let (ew, eh) = extent(p0.width, p0.height, k);
                Ok((dt, g.planes.iter().map(|&p| Image::from_plane(f, p, plan.scale_to_8bit as f64, ew, eh)).collect()))
            })
            .collect()
    }
}

/// The ring slot of the job's frame at `dt`.
pub fn slot_of(job: &Job, dt: i32) -> usize {
    if dt == 0 {
        job.slot
    } else {
        job.references.iter().find(|r| r.dt == dt).map(|r| r.slot).expect("dt of the job")
    }
}

/// A `w x h` plane extended to `ew x eh` by the border rule.
pub fn extend(v: &[f64], w: usize, h: usize, ew: usize, eh: usize) -> Image {
    let mut data = vec![0.0; ew * eh];
    for y in 0..eh {
        for x in 0..ew {
            data[y * ew + x] = v[mirror(y as isize, h) * w + mirror(x as isize, w)];
        }
    }
    Image { w: ew, h: eh, data }
}

fn borrow(v: &[(i32, Vec<Image>)]) -> Vec<(i32, Vec<&Image>)> {
    v.iter().map(|(dt, imgs)| (*dt, imgs.iter().collect())).collect()
}

/// Shifts the dt of every frame by `-center`, so that `center` becomes frame 0.
fn recenter<T: Clone>(v: &[(i32, T)], center: i32) -> Vec<(i32, T)> {
    v.iter().map(|(dt, x)| (dt - center, x.clone())).collect()
}

impl HostAlgorithm for ReferenceBm3d {
    fn describe(&self, _threads: usize) -> String {
        "reference (f64, single thread)".into()
    }

    fn configure(&mut self, _geometry: &Geometry, plan: &Plan, ring_slots: usize, _pool: &rayon::ThreadPool) -> Result<()> {
        plan.bm3d("the BM3D reference")?;
        self.ring = (0..ring_slots).map(|_| Slot::default()).collect();
        Ok(())
    }

    fn store(&mut self, slot: usize, frame: &PlanarFrame, _pool: &rayon::ThreadPool) -> Result<()> {
        let dst = self.ring.get_mut(slot).ok_or_else(|| Error::State(format!("ring slot {slot} out of range")))?;
        *dst = Slot { frame: Some(frame.clone()), basic: None };
        Ok(())
    }

    fn compute(&mut self, job: &Job, _window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, _pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.bm3d("the BM3D reference")?;
        let dts = job_dts(job);
        if plan.two_step() {
            for dt in basics_to_compute(&dts, plan) {
                let slot = slot_of(job, dt);
                let key = frame_id(job, dt);
                if self.ring[slot].basic.as_ref().map(|b| b.0) == Some(key) {
                    continue;
                }
                let window = step_frames(&dts, dt, plan);
                let nplanes = self.frame(slot)?.planes.len();
                let mut planes: Vec<Option<Image>> = vec![None; nplanes];
                for g in &plan.groups {
                    let noisy = self.noisy_images(job, &window, g, plan)?;
                    let centered = recenter(&noisy, dt);
                    let (ew, eh) = (noisy[0].1[0].w, noisy[0].1[0].h);
                    let p0 = &self.frame(slot)?.planes[g.planes[0]];
                    let (w, h) = (p0.width, p0.height);
                    let est = estimate(plan, g, false, &borrow(&centered), None, w, h);
                    for (j, &p) in g.planes.iter().enumerate() {
                        planes[p] = Some(extend(&est[j], w, h, ew, eh));
                    }
                }
                self.ring[slot].basic = Some((key, planes));
            }
        }
        for g in &plan.groups {
            let p0 = &out.planes[g.planes[0]];
            let (w, h) = (p0.width, p0.height);
            let window = step_frames(&dts, 0, plan);
            let noisy = self.noisy_images(job, &window, g, plan)?;
            let est = if plan.two_step() {
                let basic: Vec<(i32, Vec<Image>)> = window
                    .iter()
                    .map(|&dt| {
                        let b = self.ring[slot_of(job, dt)].basic.as_ref().ok_or_else(|| Error::State("basic estimate missing".into()))?;
                        Ok((dt, g.planes.iter().map(|&p| b.1[p].clone().expect("estimated plane")).collect()))
                    })
                    .collect::<Result<_>>()?;
                estimate(plan, g, true, &borrow(&noisy), Some(&borrow(&basic)), w, h)
            } else {
                estimate(plan, g, false, &borrow(&noisy), None, w, h)
            };
            for (j, &p) in g.planes.iter().enumerate() {
                let plane = &mut out.planes[p];
                for (i, &v) in est[j].iter().enumerate() {
                    plane.samples.set(i, to_stored(v, plan.scale_to_8bit as f64, plan.max_value));
                }
            }
        }
        Ok(())
    }
}
