//! The multithreaded CPU implementation of BM3D (run by [`crate::device::host::HostBackend`]).
//!
//! Computes the definition of [`crate::bm3d`] in f32, organised like the CUDA kernels
//! (kernels/bm3d/): per reference patch, distances as sums of squares, candidates ranked by one
//! 64-bit key (distance bits, frame code, row, column) kept in short sorted lists, the group's
//! transforms with precomputed DCT matrices, and aggregation into 64-bit fixed-point sums
//! ([`super::FIXED_ONE`]) shared by all threads (atomic adds: the result does not depend on the
//! order). Reference patch rows run in parallel on the host backend's pool. Each ring slot holds
//! its frame's planes in f32 (8-bit units, extended to the BM3D extent) and, with two steps, the
//! basic estimates computed from it; with per-frame groups (`compute_frame_groups`) also the sums
//! of its estimate in each step while groups are still added to them.

use std::sync::atomic::{AtomicI64, Ordering};

use rayon::prelude::*;

use super::{
    basics_to_compute, bayes_estimate, extent, frame_group_order, frame_id, haar, job_dts, kaiser_window, motion_fields, pow2_floor, reference_corners, reference_dts, step_frames, to_stored,
    BayesScratch, Bm3dGroup, Bm3dPlan, FrameGroupOp, FrameId, MotionFields, PatchTransform, FIXED_ONE, FRAME_CODE_BIAS, KAISER_BETA,
};
use crate::bm3d::reference::slot_of;
use crate::device::host::HostAlgorithm;
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::{mirror, Geometry, PlanarFrame};
use crate::window::Job;

/// A plane in f32 8-bit units over its BM3D extent.
#[derive(Debug, Clone, Default)]
pub struct FImage {
    pub w: usize,
    pub h: usize,
    pub data: Vec<f32>,
}

impl FImage {
    #[inline(always)]
    fn row(&self, x: usize, y: usize, n: usize) -> &[f32] {
        &self.data[y * self.w + x..y * self.w + x + n]
    }
}

/// Key of a candidate: distance (f32 bits; non-negative floats order like their bits), then
/// frame code, row, column (the group order of the definition).
#[inline(always)]
pub fn key(ssd: f32, dt: i32, y: usize, x: usize) -> u64 {
    ((ssd.to_bits() as u64) << 32) | (((dt + FRAME_CODE_BIAS) as u64) << 28) | ((y as u64) << 14) | x as u64
}

#[inline(always)]
pub fn key_pos(k: u64) -> (i32, usize, usize) {
    ((((k >> 28) & 0xF) as i32) - FRAME_CODE_BIAS, ((k >> 14) & 0x3FFF) as usize, (k & 0x3FFF) as usize)
}

/// The `cap` smallest keys seen, ascending.
struct TopList {
    keys: Vec<u64>,
    cap: usize,
}

impl TopList {
    fn new(cap: usize) -> Self {
        TopList { keys: Vec::with_capacity(cap + 1), cap }
    }

    #[inline(always)]
    fn insert(&mut self, k: u64) {
        if self.keys.len() == self.cap {
            if self.cap == 0 || k >= self.keys[self.cap - 1] {
                return;
            }
            self.keys.pop();
        }
        let at = self.keys.partition_point(|&x| x < k);
        self.keys.insert(at, k);
    }
}

/// Sum of squared differences between the patch at (`ax`, `ay`) of `a` and (`bx`, `by`) of `b`,
/// over the group's planes.
#[inline(always)]
fn ssd(a: &[&FImage], b: &[&FImage], k: usize, ax: usize, ay: usize, bx: usize, by: usize) -> f32 {
    let mut s = 0.0f32;
    for (pa, pb) in a.iter().zip(b) {
        for i in 0..k {
            for (u, v) in pa.row(ax, ay + i, k).iter().zip(pb.row(bx, by + i, k)) {
                let d = u - v;
                s += d * d;
            }
        }
    }
    s
}

/// Candidates whose distances [`ssd_run`] computes side by side.
const RUN_LANES: usize = 8;

/// The distances of the patch at `(ax, ay)` of `a` to the patches at `(bx, by)`, `(bx + 1, by)`, ...
/// of `b`, `out.len()` of them: each summed as [`ssd`] sums it (plane, row, column in
/// the same order, so the same bits), [`RUN_LANES`] candidates at a time so that the compiler keeps
/// them in vector lanes (one candidate's sum is a chain of dependent adds; eight chains run
/// together).
fn ssd_run(a: &[&FImage], b: &[&FImage], k: usize, (ax, ay): (usize, usize), (bx, by): (usize, usize), out: &mut [f32]) {
    let n = out.len();
    if n < RUN_LANES {
        for (c, d) in out.iter_mut().enumerate() {
            *d = ssd(a, b, k, ax, ay, bx + c, by);
        }
        return;
    }
    // Blocks of RUN_LANES, the last one ending at the run's end (it may repeat candidates of the
    // one before, with the same bits): a scalar tail would cost as much as a block.
    let mut c0 = 0;
    loop {
        let mut acc = [0.0f32; RUN_LANES];
        for (pa, pb) in a.iter().zip(b) {
            for i in 0..k {
                let r = pa.row(ax, ay + i, k);
                let q = pb.row(bx + c0, by + i, k + RUN_LANES - 1);
                for (col, &u) in r.iter().enumerate() {
                    let v: &[f32; RUN_LANES] = q[col..col + RUN_LANES].try_into().expect("a run of RUN_LANES");
                    for (s, &w) in acc.iter_mut().zip(v) {
                        let d = u - w;
                        *s += d * d;
                    }
                }
            }
        }
        out[c0..c0 + RUN_LANES].copy_from_slice(&acc);
        if c0 + RUN_LANES == n {
            return;
        }
        c0 = (c0 + RUN_LANES).min(n - RUN_LANES);
    }
}

/// The group of the reference patch at (`x0`, `y0`) of frame 0 (keys, R's first): `matching`
/// holds the matching planes of the step's frames, dt ascending.
fn select_group(plan: &Bm3dPlan, matching: &[(i32, Vec<&FImage>)], wiener: bool, x0: usize, y0: usize, rdt: i32, motion: &MotionFields) -> Vec<u64> {
    let s = &plan.settings;
    let k = s.patch_size as usize;
    let m = matching[0].1.len();
    let (max_x, max_y) = (matching[0].1[0].w - k, matching[0].1[0].h - k);
    let norm = (m * k * k) as f32;
    let (tau, cap) = if wiener { (s.wiener_threshold, s.wiener_group_size as usize) } else { (s.threshold, s.group_size as usize) };
    let tau_ssd = tau * norm;
    let frame0 = &matching.iter().find(|f| f.0 == rdt).expect("target frame").1;
    let mut group = TopList::new(cap - 1);
    let seeds_n = s.seeds_of(wiener) as usize;
    // The reference's frame: exhaustive; seeds: R, then the best others.
    let (r, sr) = (s.search_radius as usize, s.seed_radius as usize);
    let mut seeds0 = TopList::new(seeds_n.saturating_sub(1));
    // One row of candidates' distances at a time (ssd_run).
    let mut run = vec![0.0f32; 2 * r.max(sr) + 1];
    for y in y0.saturating_sub(r)..=(y0 + r).min(max_y) {
        let xa = x0.saturating_sub(r);
        let dists = &mut run[..(x0 + r).min(max_x) + 1 - xa];
        ssd_run(frame0, frame0, k, (x0, y0), (xa, y), dists);
        for (x, &d) in (xa..).zip(dists.iter()) {
            if (x, y) == (x0, y0) {
                continue;
            }
            let key0 = key(d, rdt, y, x);
            if d <= tau_ssd {
                group.insert(key0);
            }
            seeds0.insert(key0);
        }
    }
    let mut first: Vec<(usize, usize)> = vec![(y0, x0)];
    first.extend(seeds0.keys.iter().map(|&q| {
        let (_, y, x) = key_pos(q);
        (y, x)
    }));
    for dir in [-1i32, 1] {
        let mut seeds = first.clone();
        let mut dt = rdt + dir;
        while let Some(f) = matching.iter().find(|f| f.0 == dt) {
            if let (Some(&(sy, sx)), Some(field)) = (seeds.first(), motion.get(&(dt - dir, dt))) {
                if let Some(c) = field.companion(sy, sx, max_y, max_x) {
                    seeds.insert(0, c);
                }
            }
            let mut next = TopList::new(seeds_n);
            for (si, &(sy, sx)) in seeds.iter().enumerate() {
                for y in sy.saturating_sub(sr)..=(sy + sr).min(max_y) {
                    let xa = sx.saturating_sub(sr);
                    let dists = &mut run[..(sx + sr).min(max_x) + 1 - xa];
                    // Positions of an earlier seed's square are that seed's (skipped below); the
                    // run computes them too, which costs less than breaking it up.
                    ssd_run(frame0, &f.1, k, (x0, y0), (xa, y), dists);
                    for (x, &d) in (xa..).zip(dists.iter()) {
                        if seeds[..si].iter().any(|&(py, px)| py.abs_diff(y) <= sr && px.abs_diff(x) <= sr) {
                            continue;
                        }
                        let kk = key(d, dt, y, x);
                        if d <= tau_ssd {
                            group.insert(kk);
                        }
                        // Seeds rank by (distance, row, column): the frame code is the same for all.
                        next.insert(kk);
                    }
                }
            }
            seeds = next
                .keys
                .iter()
                .map(|&q| {
                    let (_, y, x) = key_pos(q);
                    (y, x)
                })
                .collect();
            dt += dir;
        }
    }
    let mut keys = vec![key(0.0, rdt, y0, x0)];
    keys.extend(group.keys);
    keys.truncate(pow2_floor(keys.len()));
    keys
}

/// Frames of a step (dt, then the planes of a group), dt ascending.
type FrameSet<'a> = Vec<(i32, Vec<&'a FImage>)>;

/// The Kaiser window of a k x k patch in f32 (aggregation weights).
fn kaiser_f32(k: usize) -> Vec<f32> {
    kaiser_window(k, KAISER_BETA).iter().map(|&v| v as f32).collect()
}

/// Precomputed transforms of one patch size and step.
struct Transforms {
    k: usize,
    fwd: Vec<f32>,
    inv: Vec<f32>,
    /// The matrices transposed (8x8 patches: `apply8`).
    fwd_t: Vec<f32>,
    inv_t: Vec<f32>,
    kaiser: Vec<f32>,
}

impl Transforms {
    fn new(k: usize, wiener: bool) -> Self {
        let (f, i) = PatchTransform::of_step(wiener).matrices(k);
        let f32s = |v: Vec<f64>| v.iter().map(|&x| x as f32).collect();
        let transposed = |m: &Vec<f32>| (0..k * k).map(|e| m[(e % k) * k + e / k]).collect();
        let (fwd, inv): (Vec<f32>, Vec<f32>) = (f32s(f), f32s(i));
        Transforms { k, fwd_t: transposed(&fwd), inv_t: transposed(&inv), fwd, inv, kaiser: kaiser_f32(k) }
    }

    /// The separable 2D transform (forward or inverse) of a k x k patch, in place; `tmp` holds
    /// k*k values.
    fn apply(&self, p: &mut [f32], tmp: &mut [f32], inverse: bool) {
        let (k, m) = (self.k, if inverse { &self.inv } else { &self.fwd });
        if k == 8 {
            let mt = if inverse { &self.inv_t } else { &self.fwd_t };
            return apply8(m.as_slice().try_into().expect("8x8 matrix"), mt.as_slice().try_into().expect("8x8 matrix"), p, tmp);
        }
        apply_one_at_a_time(k, m, p, tmp);
    }
}

/// The separable 2D transform with the k x k matrix `m`, one output at a time (each the sum over
/// b ascending of m[a][b] x input[b], from 0.0), in place; `tmp` holds k*k values.
fn apply_one_at_a_time(k: usize, m: &[f32], p: &mut [f32], tmp: &mut [f32]) {
    for i in 0..k {
        for a in 0..k {
            let mut s = 0.0;
            for b in 0..k {
                s += m[a * k + b] * p[i * k + b];
            }
            tmp[i * k + a] = s;
        }
    }
    for j in 0..k {
        for a in 0..k {
            let mut s = 0.0;
            for b in 0..k {
                s += m[a * k + b] * tmp[b * k + j];
            }
            p[a * k + j] = s;
        }
    }
}

/// [`Transforms::apply`] for 8x8 patches with a whole row of outputs per step (eight lanes the
/// compiler keeps in vector registers; `mt` is `m` transposed): each output is still the sum over
/// b ascending of m[a][b] x input[b], from 0.0, a multiply then an add, so the bits are those of
/// one output at a time.
#[inline(always)]
fn apply8(m: &[f32; 64], mt: &[f32; 64], p: &mut [f32], tmp: &mut [f32]) {
    let (p, tmp): (&mut [f32; 64], &mut [f32; 64]) = (p.try_into().expect("8x8 patch"), tmp.try_into().expect("8x8 scratch"));
    // Rows: tmp[i][a] = sum_b m[a][b] p[i][b], the eight a at once.
    for i in 0..8 {
        let mut acc = [0.0f32; 8];
        for b in 0..8 {
            let x = p[i * 8 + b];
            // mt[b][a] = m[a][b]: a row of mt is contiguous.
            for a in 0..8 {
                acc[a] += mt[b * 8 + a] * x;
            }
        }
        tmp[i * 8..i * 8 + 8].copy_from_slice(&acc);
    }
    // Columns: p[a][j] = sum_b m[a][b] tmp[b][j], the eight j at once.
    for a in 0..8 {
        let mut acc = [0.0f32; 8];
        for b in 0..8 {
            let w = m[a * 8 + b];
            for j in 0..8 {
                acc[j] += w * tmp[b * 8 + j];
            }
        }
        p[a * 8..a * 8 + 8].copy_from_slice(&acc);
    }
}

/// Plane `j` of the frame at `dt`.
fn plane_of<'a>(set: &[(i32, Vec<&'a FImage>)], dt: i32, j: usize) -> &'a FImage {
    set.iter().find(|f| f.0 == dt).expect("window frame").1[j]
}

/// Fixed-point sums of one plane: numerators per sample, weights per patch corner.
struct Sums {
    num: Vec<AtomicI64>,
    wimg: Vec<AtomicI64>,
    w: usize,
    h: usize,
}

#[inline(always)]
fn fixed(v: f32) -> i64 {
    round_to_i64(v * FIXED_ONE as f32)
}

/// `x.round() as i64` (halves away from zero) without the library call that `round` becomes on
/// x86-64's baseline (no SSE4.1; 4-5% of a CPU BM3D frame): the truncation is one instruction, and
/// `x` less it is exact.
#[inline(always)]
fn round_to_i64(x: f32) -> i64 {
    let i = x as i64;
    let frac = x - i as f32;
    if frac >= 0.5 {
        i.saturating_add(1)
    } else if frac <= -0.5 {
        i.saturating_sub(1)
    } else {
        i
    }
}

/// Zeroed sums of one plane group over an `ew x eh` extent.
fn new_sums(g: &Bm3dGroup, ew: usize, eh: usize) -> Vec<Sums> {
    g.planes.iter().map(|_| Sums { num: (0..ew * eh).map(|_| AtomicI64::new(0)).collect(), wimg: (0..ew * eh).map(|_| AtomicI64::new(0)).collect(), w: ew, h: eh }).collect()
}

/// Where the members of a group go: the sums (one per plane of the group) of the member's frame
/// (dt as in the frame sets), or None for a frame whose estimate is not being made.
type Sink<'s> = dyn Fn(i32) -> Option<&'s [Sums]> + Sync + 's;

/// One step's estimate of the group's planes in frame 0, over the extent (f32, 8-bit units).
fn run_step(plan: &Bm3dPlan, g: &Bm3dGroup, wiener: bool, noisy: &[(i32, Vec<&FImage>)], basic: Option<&[(i32, Vec<&FImage>)]>, pool: &rayon::ThreadPool) -> Vec<FImage> {
    let k = plan.settings.patch_size as usize;
    let (ew, eh) = (noisy[0].1[0].w, noisy[0].1[0].h);
    let matching = basic.unwrap_or(noisy);
    let sums = new_sums(g, ew, eh);
    let dts: Vec<i32> = matching.iter().map(|f| f.0).collect();
    // Every reference frame with the frames it is grouped over (reference_dts).
    let refs: Vec<(i32, FrameSet)> = reference_dts(&dts, plan).into_iter().map(|(r, frames)| (r, matching.iter().filter(|f| frames.contains(&f.0)).cloned().collect())).collect();
    group_and_aggregate(plan, g, wiener, noisy, basic, &refs, &|dt| (dt == 0).then_some(&sums[..]), pool);
    estimates(&sums, k, pool)
}

/// Groups the reference patches of every frame of `refs` (each with the frames it is grouped
/// over), filters the groups and adds each member to the sums `sink` gives for its frame.
#[allow(clippy::too_many_arguments)]
fn group_and_aggregate(
    plan: &Bm3dPlan,
    g: &Bm3dGroup,
    wiener: bool,
    noisy: &[(i32, Vec<&FImage>)],
    basic: Option<&[(i32, Vec<&FImage>)]>,
    refs: &[(i32, FrameSet)],
    sink: &Sink<'_>,
    pool: &rayon::ThreadPool,
) {
    let s = &plan.settings;
    let k = s.patch_size as usize;
    let (ew, eh) = (noisy[0].1[0].w, noisy[0].1[0].h);
    let tr = Transforms::new(k, wiener);
    let step = s.block_step_of(wiener) as usize;
    let xs = reference_corners(ew, k, step);
    let ys = reference_corners(eh, k, step);
    let lambda = if wiener { 0.0 } else { s.lambda };
    let motion = if s.motion { motion_fields(&noisy.iter().map(|f| (f.0, &f.1[0].data[..])).collect::<Vec<_>>(), ew, eh, plan.scale_to_8bit as f64) } else { MotionFields::new() };
    let motion = &motion;
    pool.install(|| {
        ys.par_iter().for_each(|&y0| {
            let cap = if wiener { s.wiener_group_size } else { s.group_size } as usize;
            let mut y = vec![0.0f32; cap * k * k];
            let mut b = vec![0.0f32; cap * k * k];
            let mut tmp = vec![0.0f32; k * k];
            let mut col = vec![0.0f32; cap];
            let mut bcol = vec![0.0f32; cap];
            let (mut bayes, mut bayes_work) = (vec![0.0f32; if s.bayes { cap * k * k } else { 0 }], BayesScratch::default());
            // Every reference frame's patches of this row (the target's alone by default).
            for ((rdt, over), &x0) in refs.iter().flat_map(|r| xs.iter().map(move |x| (r, x))) {
                let members = select_group(plan, over, wiener, x0, y0, *rdt, motion);
                let n = members.len();
                for j in 0..g.planes.len() {
                    let sigma = g.sigmas[j];
                    let load = |set: &[(i32, Vec<&FImage>)], dst: &mut [f32], tmp: &mut [f32]| {
                        for (mi, &q) in members.iter().enumerate() {
                            let (dt, py, px) = key_pos(q);
                            let img = plane_of(set, dt, j);
                            let p = &mut dst[mi * k * k..(mi + 1) * k * k];
                            for i in 0..k {
                                p[i * k..(i + 1) * k].copy_from_slice(img.row(px, py + i, k));
                            }
                            tr.apply(p, tmp, false);
                        }
                    };
                    load(noisy, &mut y, &mut tmp);
                    if wiener {
                        load(basic.expect("basic estimates in step 2"), &mut b, &mut tmp);
                    }
                    let mut weight_sum = 0.0f32;
                    let bayes_on = wiener && s.bayes;
                    if bayes_on {
                        bayes[..n * k * k].copy_from_slice(&y[..n * k * k]);
                        bayes_estimate(&mut bayes[..n * k * k], &b[..n * k * k], n, k * k, sigma, &mut bayes_work);
                    }
                    for t in 0..k * k {
                        for m in 0..n {
                            col[m] = y[m * k * k + t];
                        }
                        haar(&mut col[..n], false);
                        if wiener {
                            for m in 0..n {
                                bcol[m] = b[m * k * k + t];
                            }
                            haar(&mut bcol[..n], false);
                            for m in 0..n {
                                let bv = bcol[m];
                                let omega = if sigma == 0.0 { 1.0 } else { bv * bv / (bv * bv + sigma * sigma) };
                                col[m] *= omega;
                                weight_sum += omega * omega;
                            }
                        } else {
                            for v in col[..n].iter_mut() {
                                if v.abs() <= lambda * sigma {
                                    *v = 0.0;
                                } else {
                                    weight_sum += 1.0;
                                }
                            }
                        }
                        haar(&mut col[..n], true);
                        for m in 0..n {
                            y[m * k * k + t] = col[m];
                        }
                    }
                    if bayes_on {
                        for (v, e) in y[..n * k * k].iter_mut().zip(&bayes) {
                            *v = 0.5 * (*v + e);
                        }
                    }
                    let wj = 1.0 / weight_sum.max(1.0);
                    let wfix = fixed(wj);
                    for (mi, &q) in members.iter().enumerate() {
                        let (dt, py, px) = key_pos(q);
                        let Some(frame_sums) = sink(dt) else { continue };
                        let sj = &frame_sums[j];
                        let p = &mut y[mi * k * k..(mi + 1) * k * k];
                        tr.apply(p, &mut tmp, true);
                        sj.wimg[py * ew + px].fetch_add(wfix, Ordering::Relaxed);
                        for i in 0..k {
                            for c in 0..k {
                                sj.num[(py + i) * ew + px + c].fetch_add(fixed(wj * tr.kaiser[i * k + c] * p[i * k + c]), Ordering::Relaxed);
                            }
                        }
                    }
                }
            }
        });
    });
}

/// Estimates from sums (one per plane of a group): numerator / sum over the patches covering the
/// sample of weight x window. The corner weights go to an f64 image padded with k - 1 zero rows
/// above and zero columns to the left, so that every sample takes the same k x k corners and a
/// row's denominators are k^2 passes of multiply-adds over contiguous arrays (vectorized), each
/// sample's sum still in the order (window row, window column): the bits of adding only the
/// corners inside the extent with a nonzero weight (adding +0.0 changes no sum).
fn estimates(sums: &[Sums], k: usize, pool: &rayon::ThreadPool) -> Vec<FImage> {
    let kaiser: Vec<f64> = kaiser_f32(k).iter().map(|&v| v as f64).collect();
    sums.iter()
        .map(|sj| {
            let (ew, eh) = (sj.w, sj.h);
            let pw = ew + k - 1;
            let mut weights = vec![0.0f64; pw * (eh + k - 1)];
            let mut out = FImage { w: ew, h: eh, data: vec![0.0; ew * eh] };
            pool.install(|| {
                weights.par_chunks_mut(pw).skip(k - 1).enumerate().for_each(|(cy, row)| {
                    for (cx, w) in row[k - 1..].iter_mut().enumerate() {
                        *w = sj.wimg[cy * ew + cx].load(Ordering::Relaxed) as f64;
                    }
                });
                out.data.par_chunks_mut(ew).enumerate().for_each(|(yy, row)| {
                    let mut den = vec![0.0f64; ew];
                    for i in 0..k {
                        // Corner row yy - i (padded row yy - i + k - 1).
                        let corners = &weights[(yy + k - 1 - i) * pw..][..pw];
                        for c in 0..k {
                            let kv = kaiser[i * k + c];
                            // Corner column xx - c (padded column xx - c + k - 1). In blocks of
                            // four samples, which the compiler keeps in vector registers (the plain
                            // loop stayed scalar); each sample's sum is the same.
                            let src = &corners[k - 1 - c..k - 1 - c + ew];
                            let mut den4 = den.chunks_exact_mut(4);
                            let mut src4 = src.chunks_exact(4);
                            for (d, w) in (&mut den4).zip(&mut src4) {
                                // Through local arrays: the compiler cannot otherwise tell that
                                // `den` and `weights` do not overlap, and keeps to one sample at
                                // a time.
                                let w: [f64; 4] = w.try_into().expect("a block of 4");
                                let mut v: [f64; 4] = (&*d).try_into().expect("a block of 4");
                                for (v, w) in v.iter_mut().zip(w) {
                                    *v += w * kv;
                                }
                                d.copy_from_slice(&v);
                            }
                            for (d, &w) in den4.into_remainder().iter_mut().zip(src4.remainder()) {
                                *d += w * kv;
                            }
                        }
                    }
                    for (xx, o) in row.iter_mut().enumerate() {
                        let num = sj.num[yy * ew + xx].load(Ordering::Relaxed) as f64;
                        *o = if den[xx] > 0.0 { (num / den[xx]) as f32 } else { 0.0 };
                    }
                });
            });
            out
        })
        .collect()
}

/// A ring slot: the frame's planes (f32, extended; None for planes not denoised) and, with two
/// steps, their basic estimates with the (epoch, seq) they belong to.
#[derive(Default)]
struct Slot {
    noisy: Vec<Option<FImage>>,
    basic: Option<(FrameId, Vec<Option<FImage>>)>,
    /// Per-frame groups, per step (0: hard thresholding, 1: Wiener): the sums of this frame's
    /// estimate while groups are still added to them (per plane group, per plane), and the frame
    /// whose own reference patches have been grouped (each frame's once per step).
    sums: [Option<(FrameId, Vec<Vec<Sums>>)>; 2],
    grouped: [Option<FrameId>; 2],
}

/// BM3D on host threads.
#[derive(Default)]
pub struct CpuBm3d {
    ring: Vec<Slot>,
    /// Per plane: denoised (so stored in f32) or not.
    used: Vec<bool>,
    k: usize,
    scale: f32,
}

/// A `w x h` plane extended to `ew x eh` by the border rule.
fn extend(v: &[f32], w: usize, h: usize, ew: usize, eh: usize) -> FImage {
    let mut data = vec![0.0; ew * eh];
    for y in 0..eh {
        for x in 0..ew {
            data[y * ew + x] = v[mirror(y as isize, h) * w + mirror(x as isize, w)];
        }
    }
    FImage { w: ew, h: eh, data }
}

/// A plane group's estimates (over the extent) rounded into the output frame's planes.
fn store_output(g: &Bm3dGroup, est: &[FImage], plan: &Bm3dPlan, out: &mut PlanarFrame) {
    for (j, &p) in g.planes.iter().enumerate() {
        let plane = &mut out.planes[p];
        let w = plane.width;
        for i in 0..w * plane.height {
            let v = est[j].data[(i / w) * est[j].w + i % w];
            plane.samples.set(i, to_stored(v as f64, plan.scale_to_8bit as f64, plan.max_value));
        }
    }
}

/// A plane group's basic estimates into `planes` (indexed like the frame's planes; `out` gives
/// their sizes): defined on the plane, beyond it the border rule.
fn store_basic(g: &Bm3dGroup, est: &[FImage], out: &PlanarFrame, planes: &mut [Option<FImage>]) {
    for (j, &p) in g.planes.iter().enumerate() {
        let plane = &out.planes[p];
        let (w, h) = (plane.width, plane.height);
        let own: Vec<f32> = (0..h).flat_map(|y| est[j].data[y * est[j].w..y * est[j].w + w].iter().copied()).collect();
        planes[p] = Some(extend(&own, w, h, est[j].w, est[j].h));
    }
}

impl CpuBm3d {
    /// Per-frame groups, each frame's groups made once per step and added to the sums of every
    /// frame they touch (the definition computes the same per output frame: src/bm3d/mod.rs), in
    /// the order of [`frame_group_order`]: the basic estimates the job needs are finished once
    /// the frames within `future` before and `past` after them are grouped, then the target's
    /// output likewise from the Wiener step.
    fn compute_frame_groups(&mut self, job: &Job, dts: &[i32], plan: &Bm3dPlan, out: &mut PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let id = |dt: i32| frame_id(job, dt);
        let ops = frame_group_order(dts, plan, |u| self.ring[slot_of(job, u)].basic.as_ref().map(|b| b.0) == Some(id(u)));
        for op in ops {
            match op {
                FrameGroupOp::Group { r, step, first } => self.group_frame(job, dts, r, step, first, plan, pool)?,
                FrameGroupOp::Finish { u, step } => {
                    let est = self.finish_sums(job, u, step, plan, pool)?;
                    if step == 0 && plan.two_step() {
                        let mut planes: Vec<Option<FImage>> = vec![None; self.used.len()];
                        for (g, est) in plan.groups.iter().zip(est) {
                            store_basic(g, &est, out, &mut planes);
                        }
                        self.ring[slot_of(job, u)].basic = Some((id(u), planes));
                    } else {
                        for (g, est) in plan.groups.iter().zip(est) {
                            store_output(g, &est, plan, out);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Groups the reference patches of the job's frame `r` in `step` over its window
    /// (`r - past ..= r + future`), once per frame and step, adding every member to its frame's
    /// sums; not to frames before `first` or, in the first of two steps, whose basic estimate is made
    /// already (nothing reads those sums: [`FrameGroupOp::Group`]).
    #[allow(clippy::too_many_arguments)]
    fn group_frame(&mut self, job: &Job, dts: &[i32], r: i32, step: usize, first: i32, plan: &Bm3dPlan, pool: &rayon::ThreadPool) -> Result<()> {
        let id = |dt: i32| frame_id(job, dt);
        if self.ring[slot_of(job, r)].grouped[step] == Some(id(r)) {
            return Ok(());
        }
        let (past, future) = (plan.past as i32, plan.future as i32);
        let window: Vec<i32> = dts.iter().copied().filter(|&d| d >= r - past && d <= r + future).collect();
        let basic_step = step == 0 && plan.two_step();
        // Sums for every frame of the window still to be finished (a frame's first group starts them).
        for &d in &window {
            let slot = slot_of(job, d);
            let done = basic_step && self.ring[slot].basic.as_ref().map(|b| b.0) == Some(id(d));
            if d < first || done || self.ring[slot].sums[step].as_ref().map(|s| s.0) == Some(id(d)) {
                continue;
            }
            let sums = plan
                .groups
                .iter()
                .map(|g| {
                    let f = self.ring[slot].noisy[g.planes[0]].as_ref().ok_or_else(|| Error::State(format!("ring slot holds no plane {}", g.planes[0])))?;
                    Ok(new_sums(g, f.w, f.h))
                })
                .collect::<Result<Vec<_>>>()?;
            self.ring[slot].sums[step] = Some((id(d), sums));
        }
        for (gi, g) in plan.groups.iter().enumerate() {
            // Frames relative to r (frame codes stay within the key's range).
            let noisy: FrameSet = self.images(job, &window, g, false)?.into_iter().map(|(d, v)| (d - r, v)).collect();
            let basic: Option<FrameSet> = if step == 1 { Some(self.images(job, &window, g, true)?.into_iter().map(|(d, v)| (d - r, v)).collect()) } else { None };
            let matching = basic.as_deref().unwrap_or(&noisy);
            let refs = vec![(0, matching.to_vec())];
            let ring = &self.ring;
            // Only sums that belong to the member's frame (a slot may still hold an older frame's).
            let sink = |dt: i32| -> Option<&[Sums]> { ring[slot_of(job, r + dt)].sums[step].as_ref().filter(|s| s.0 == id(r + dt)).map(|s| &s.1[gi][..]) };
            group_and_aggregate(plan, g, step == 1, &noisy, basic.as_deref(), &refs, &sink, pool);
        }
        self.ring[slot_of(job, r)].grouped[step] = Some(id(r));
        Ok(())
    }

    /// The estimate of the job's frame `u` in `step` from its sums (every group that touches it
    /// added), per plane group; the sums are released.
    fn finish_sums(&mut self, job: &Job, u: i32, step: usize, plan: &Bm3dPlan, pool: &rayon::ThreadPool) -> Result<Vec<Vec<FImage>>> {
        let id = frame_id(job, u);
        let slot = slot_of(job, u);
        let (owner, sums) = self.ring[slot].sums[step].take().ok_or_else(|| Error::State("bm3d frame groups: no sums for a frame to finish".into()))?;
        if owner != id {
            return Err(Error::State("bm3d frame groups: the sums belong to another frame".into()));
        }
        let k = plan.settings.patch_size as usize;
        Ok(sums.iter().map(|s| estimates(s, k, pool)).collect())
    }

    fn images<'a>(&'a self, job: &Job, dts: &[i32], g: &Bm3dGroup, basic: bool) -> Result<Vec<(i32, Vec<&'a FImage>)>> {
        dts.iter()
            .map(|&dt| {
                let slot = &self.ring[slot_of(job, dt)];
                let planes = if basic { &slot.basic.as_ref().ok_or_else(|| Error::State("basic estimate missing".into()))?.1 } else { &slot.noisy };
                let imgs = g.planes.iter().map(|&p| planes[p].as_ref().ok_or_else(|| Error::State(format!("ring slot holds no plane {p}")))).collect::<Result<Vec<_>>>()?;
                Ok((dt, imgs))
            })
            .collect()
    }
}

impl HostAlgorithm for CpuBm3d {
    fn describe(&self, threads: usize) -> String {
        format!("cpu ({threads} threads)")
    }

    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize, _pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.bm3d("the CPU BM3D implementation")?;
        self.used = vec![false; geometry.planes.len()];
        for p in plan.output_planes() {
            self.used[p] = true;
        }
        self.k = plan.settings.patch_size as usize;
        self.scale = plan.scale_to_8bit;
        self.ring = (0..ring_slots).map(|_| Slot::default()).collect();
        Ok(())
    }

    fn store(&mut self, slot: usize, frame: &PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let (k, scale, used) = (self.k, self.scale, &self.used);
        let dst = self.ring.get_mut(slot).ok_or_else(|| Error::State(format!("ring slot {slot} out of range")))?;
        let noisy: Vec<Option<FImage>> = pool.install(|| {
            frame
                .planes
                .par_iter()
                .enumerate()
                .map(|(p, plane)| {
                    used.get(p).copied().unwrap_or(false).then(|| {
                        let v: Vec<f32> = (0..plane.width * plane.height).map(|i| plane.samples.get(i) as f32 / scale).collect();
                        let (ew, eh) = extent(plane.width, plane.height, k);
                        extend(&v, plane.width, plane.height, ew, eh)
                    })
                })
                .collect()
        });
        *dst = Slot { noisy, ..Default::default() };
        Ok(())
    }

    fn compute(&mut self, job: &Job, _window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.bm3d("the CPU BM3D implementation")?;
        let dts = job_dts(job);
        if plan.settings.frame_groups {
            return self.compute_frame_groups(job, &dts, plan, out, pool);
        }
        if plan.two_step() {
            for dt in basics_to_compute(&dts, plan) {
                let slot = slot_of(job, dt);
                let key = frame_id(job, dt);
                if self.ring[slot].basic.as_ref().map(|b| b.0) == Some(key) {
                    continue;
                }
                let window = step_frames(&dts, dt, plan);
                let mut planes: Vec<Option<FImage>> = vec![None; self.used.len()];
                for g in &plan.groups {
                    let noisy: Vec<(i32, Vec<&FImage>)> = self.images(job, &window, g, false)?.into_iter().map(|(d, v)| (d - dt, v)).collect();
                    let est = run_step(plan, g, false, &noisy, None, pool);
                    store_basic(g, &est, out, &mut planes);
                }
                self.ring[slot].basic = Some((key, planes));
            }
        }
        let window = step_frames(&dts, 0, plan);
        for g in &plan.groups {
            let noisy = self.images(job, &window, g, false)?;
            let est = if plan.two_step() {
                let basic = self.images(job, &window, g, true)?;
                run_step(plan, g, true, &noisy, Some(&basic), pool)
            } else {
                run_step(plan, g, false, &noisy, None, pool)
            };
            store_output(g, &est, plan, out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// The denominators as the definition reads (each sample: the corners inside the extent whose
    /// patch covers it, window row then window column, nonzero weights only), written plainly.
    fn estimates_plainly(sj: &Sums, k: usize) -> Vec<f32> {
        let kaiser = kaiser_f32(k);
        let (ew, eh) = (sj.w, sj.h);
        let mut out = vec![0.0f32; ew * eh];
        for yy in 0..eh {
            for xx in 0..ew {
                let mut den = 0.0f64;
                for i in 0..k.min(yy + 1) {
                    let cy = yy - i;
                    if cy > eh - k {
                        continue;
                    }
                    for c in 0..k.min(xx + 1) {
                        let cx = xx - c;
                        if cx > ew - k {
                            continue;
                        }
                        let wv = sj.wimg[cy * ew + cx].load(Ordering::Relaxed);
                        if wv != 0 {
                            den += wv as f64 * kaiser[i * k + c] as f64;
                        }
                    }
                }
                let num = sj.num[yy * ew + xx].load(Ordering::Relaxed) as f64;
                out[yy * ew + xx] = if den > 0.0 { (num / den) as f32 } else { 0.0 };
            }
        }
        out
    }

    /// The 8x8 transforms a row of outputs at a time give the bits of one output at a time (the
    /// loop of the other patch sizes), forward and inverse, both steps' transforms, random patches.
    /// The fixed-point rounding equals `round() as i64` on halves, both signs, large and tiny
    /// values, infinities and NaN.
    #[test]
    fn rounding_to_i64_equals_round() {
        let mut rng = SmallRng::seed_from_u64(32);
        let mut values = vec![f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MIN_POSITIVE];
        for v in [0.0f32, 0.5, 1.5, 2.5, 0.49999997, 8388607.5, 8388608.0, 1e12, 3e19] {
            values.extend([v, -v]);
        }
        values.extend((0..100_000).map(|_| rng.random_range(-1e7f32..1e7)));
        values.extend((0..100_000).map(|_| rng.random_range(-4i32..4) as f32 * 0.25 + rng.random_range(-1000i32..1000) as f32));
        for v in values {
            assert_eq!(round_to_i64(v), v.round() as i64, "{v:e}");
        }
    }

    /// A run of candidates' distances is each candidate's distance bit for bit, for runs shorter
    /// than, equal to and longer than a block of lanes, patch sizes 4 and 8, one to three planes.
    #[test]
    fn distance_runs_equal_single_distances_bit_for_bit() {
        let mut rng = SmallRng::seed_from_u64(31);
        let (w, h) = (64, 40);
        let image = |rng: &mut SmallRng| FImage { w, h, data: (0..w * h).map(|_| rng.random_range(-40.0..300.0)).collect() };
        let a: Vec<FImage> = (0..3).map(|_| image(&mut rng)).collect();
        let b: Vec<FImage> = (0..3).map(|_| image(&mut rng)).collect();
        for planes in 1..=3 {
            let (a, b): (Vec<&FImage>, Vec<&FImage>) = (a[..planes].iter().collect(), b[..planes].iter().collect());
            for k in [4, 8] {
                for n in [1, 5, RUN_LANES, RUN_LANES + 1, 17, 41] {
                    for _ in 0..20 {
                        let (ax, ay, by) = (rng.random_range(0..=w - k), rng.random_range(0..=h - k), rng.random_range(0..=h - k));
                        let bx = rng.random_range(0..=w - k - (n - 1));
                        let mut run = vec![f32::NAN; n];
                        ssd_run(&a, &b, k, (ax, ay), (bx, by), &mut run);
                        for (c, d) in run.iter().enumerate() {
                            assert_eq!(d.to_bits(), ssd(&a, &b, k, ax, ay, bx + c, by).to_bits(), "planes {planes}, k {k}, run of {n}, candidate {c}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn transforms_of_8x8_patches_equal_the_generic_loop_bit_for_bit() {
        let mut rng = SmallRng::seed_from_u64(30);
        for wiener in [false, true] {
            let tr = Transforms::new(8, wiener);
            for inverse in [false, true] {
                let m = if inverse { &tr.inv } else { &tr.fwd };
                for _ in 0..50 {
                    let patch: Vec<f32> = (0..64).map(|_| rng.random_range(-300.0..300.0)).collect();
                    let (mut fast, mut tmp) = (patch.clone(), vec![0.0f32; 64]);
                    tr.apply(&mut fast, &mut tmp, inverse);
                    let mut plain = patch.clone();
                    apply_one_at_a_time(8, m, &mut plain, &mut tmp);
                    assert_eq!(fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), plain.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "wiener {wiener}, inverse {inverse}");
                }
            }
        }
    }

    /// The padded, vectorized denominators give the plain loop's bits: weights at a third of the
    /// corners (the rest 0, as where no patch was grouped), patches of 8 and 4, an extent that is
    /// not a multiple of anything, samples with no covering weight.
    #[test]
    fn estimates_equal_the_plain_loop_bit_for_bit() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut rng = SmallRng::seed_from_u64(29);
        for (k, ew, eh) in [(8, 37, 23), (4, 19, 11), (8, 8, 8)] {
            let sj = Sums { num: (0..ew * eh).map(|_| AtomicI64::new(0)).collect(), wimg: (0..ew * eh).map(|_| AtomicI64::new(0)).collect(), w: ew, h: eh };
            for cy in 0..=eh - k {
                for cx in 0..=ew - k {
                    if rng.random_range(0..3) == 0 {
                        sj.wimg[cy * ew + cx].store(rng.random_range(1..1i64 << 34), Ordering::Relaxed);
                    }
                }
            }
            for v in &sj.num {
                v.store(rng.random_range(0..1i64 << 44), Ordering::Relaxed);
            }
            let fast = estimates(std::slice::from_ref(&sj), k, &pool);
            let plain = estimates_plainly(&sj, k);
            assert_eq!(fast[0].data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), plain.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "k {k}, {ew}x{eh}");
        }
    }
}
