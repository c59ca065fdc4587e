//! The fast multithreaded CPU implementation of NLM (run by [`crate::device::host::HostBackend`]).
//!
//! Computes exactly the algorithm of [`crate::nlm::reference`] (read its doc first), in f32,
//! organised for speed:
//!
//! * **Ring of padded f32 planes.** `upload` converts each plane the plan reads to f32 (raw sample
//!   values, exact for every supported depth) with a mirrored border wide enough for every read
//!   (`guide_step * search_radius + patch_radius` for guides, `search_radius` for outputs), so the
//!   hot loops never test coordinates.
//! * **Per-offset distance images with separable running box sums.** For one search offset `d`
//!   the patch distance of a whole row is a vertical running sum of squared differences (one row
//!   enters, one leaves) followed by a horizontal box sum of width `2s+1`.
//! * **Symmetric reuse.** Inside the target frame the weight of `p` for offset `d` equals the
//!   weight of `p + d` for offset `-d`, so each `+d/-d` pair is computed once and accumulated into
//!   both samples. (Mirrored borders keep the identity exact.)
//! * **Tiles and threads.** The output plane is cut into bands of rows (one rayon task each, on the
//!   host backend's pool of `threads` workers) and bands into column tiles (32 rows x 256 columns) whose
//!   accumulators stay in the L2 cache while every offset of every frame of the window passes
//!   over them; two offsets of a search row share each pass over the accumulators. Scratch buffers
//!   live in the backend (one set per worker); nothing is allocated per frame.
//! * **Vectorized f32 loops** (`kernels.rs`): contiguous slices, a polynomial `exp`, compiled for
//!   AVX2+FMA when the CPU has it (runtime detection), for the baseline otherwise.
//!
//! **Accuracy and tolerance.** Each sample keeps, besides its f32 sums, the smallest normalized
//! distance `x = max(d2 - offset, 0) / h^2` it saw, which gives its largest weight. The f32 result
//! is used when that weight is comfortably representable (Welsch `x < 60`, bisquare `x < 0.999`);
//! when every f64 weight of the reference is exactly 0 (Welsch `x > 745.5`, bisquare
//! `x > 1.00001`) the input is kept, as the reference does; in between, and when the f32 mean lies
//! within 5e-4 code values of a rounding tie (x.5; 8- and 10-bit formats), the sample is recomputed
//! in f64 in the reference's order of operations (patch sums of integers are exact in any order),
//! i.e. bit for bit like the reference. Elsewhere the f32 mean carries a relative error of about
//! 1e-6. Tolerance: **8-bit outputs differ from the reference by at most 1 code value** (in
//! practice almost never: the tests see 0 differing samples on most seeds); formats deeper than 8
//! bits by at most one 8-bit code value in stored units, `2^(bits-8)` (4 for 10-bit I420_10LE, 256
//! for 16-bit and MSB-aligned P010), in practice 1 stored unit. With 8-bit input the vertical running
//! sums are integers below 2^24, exact in f32, for every patch size; deeper formats rebuild them on
//! every row instead of sliding them (no rounding error accumulates down a band; that costs them
//! some speed).
//!
//! The exact path is scalar: strengths far below the patch distances of the content (Welsch with
//! most samples at `x >= 60`, i.e. no patch within ~8 h of the best match) make it slow; such
//! settings hardly denoise anyway.
//!
//! Measurement switches ([`crate::nlm::NlmTuning`], not needed in normal use): `cpu_tile` (tile
//! rows x columns), `cpu_pair_offsets` off (one offset per pass), `cpu_simd` off (baseline
//! instruction set), `cpu_stats` (print how many samples took the exact path per frame).

mod aggregate;
mod kernels;

use std::sync::Mutex;

use rayon::prelude::*;

use crate::device::host::HostAlgorithm;
use crate::error::{Error, Result};
use crate::nlm::{NlmPlan, NlmTuning, WeightGroup};
use crate::params::Weighting;
use crate::plan::Plan;
use crate::planar::{mirror, Geometry, PlanarFrame, Samples};
use crate::window::Job;

use kernels::WeightParams;

/// Welsch: samples whose smallest normalized distance is below this (largest weight above about
/// 1e-26) are computed in f32.
const WELSCH_FAST_BELOW: f32 = 60.0;
/// Welsch: above this every f64 weight of the sample is exactly 0 (exp underflows below -745.14).
const WELSCH_ZERO_ABOVE: f32 = 745.5;
/// Bisquare: f32 is used while the largest `1 - x` is at least this (its relative error stays
/// below about 1e-4)...
const BISQUARE_EDGE_BELOW: f32 = 1.0e-3;
/// ... and the input is kept when every x exceeds 1 by this (all f64 weights are 0).
const BISQUARE_EDGE_ABOVE: f32 = 1.0e-5;

/// Half-width (in 8-bit code values) of the window around a rounding tie (x.5) inside which a
/// sample is recomputed exactly: it bounds the f32 error of a normalized weighted mean.
const TIE_WINDOW: f32 = 5.0e-4;

/// One plane stored as f32 with a mirrored border of `pad` samples on every side.
#[derive(Debug, Clone, Default)]
struct PaddedPlane {
    data: Vec<f32>,
    width: usize,
    height: usize,
    pad: usize,
    stride: usize,
}

impl PaddedPlane {
    fn new(width: usize, height: usize, pad: usize) -> Self {
        let stride = width + 2 * pad;
        PaddedPlane { data: vec![0.0; stride * (height + 2 * pad)], width, height, pad, stride }
    }

    /// Index of sample (x, y); valid for x in -pad..width+pad and likewise y.
    #[inline(always)]
    fn index(&self, x: isize, y: isize) -> usize {
        ((y + self.pad as isize) as usize) * self.stride + (x + self.pad as isize) as usize
    }

    /// `n` samples of row `y` starting at column `x`.
    #[inline(always)]
    fn row(&self, x: isize, y: isize, n: usize) -> &[f32] {
        let i = self.index(x, y);
        &self.data[i..i + n]
    }

    #[inline(always)]
    fn at(&self, x: isize, y: isize) -> f32 {
        self.data[self.index(x, y)]
    }

    fn fill_from(&mut self, samples: &Samples) {
        let (w, h, pad, stride) = (self.width, self.height, self.pad, self.stride);
        for y in 0..h {
            let row = &mut self.data[(y + pad) * stride..(y + pad + 1) * stride];
            let inner = &mut row[pad..pad + w];
            match samples {
                Samples::U8(s) => inner.iter_mut().zip(&s[y * w..(y + 1) * w]).for_each(|(o, &v)| *o = v as f32),
                Samples::U16(s) => inner.iter_mut().zip(&s[y * w..(y + 1) * w]).for_each(|(o, &v)| *o = v as f32),
            }
            for x in 0..pad {
                row[x] = row[pad + mirror(x as isize - pad as isize, w)];
                row[pad + w + x] = row[pad + mirror((w + x) as isize, w)];
            }
        }
        for y in 0..pad {
            let src_top = pad + mirror(y as isize - pad as isize, h);
            self.data.copy_within(src_top * stride..(src_top + 1) * stride, y * stride);
            let src_bot = pad + mirror((h + y) as isize, h);
            self.data.copy_within(src_bot * stride..(src_bot + 1) * stride, (pad + h + y) * stride);
        }
    }
}

/// A ring slot: the planes the plan reads (others stay empty).
#[derive(Debug, Clone, Default)]
struct RingFrame {
    planes: Vec<PaddedPlane>,
    filled: bool,
}

/// Per-worker scratch: tile accumulators and row buffers.
#[derive(Default)]
struct Scratch {
    acc: Vec<f32>,
    wsum: Vec<f32>,
    /// Smallest normalized distance (d / h^2) seen by each sample: gives its largest weight.
    xmin: Vec<f32>,
    v: Vec<f32>,
    p: Vec<f32>,
    w: Vec<f32>,
    x: Vec<f32>,
    /// Patch-wise aggregation's buffers.
    agg: aggregate::Buffers,
}

impl Scratch {
    fn ensure(&mut self, acc: usize, tile: usize, row: usize) {
        let grow = |v: &mut Vec<f32>, n: usize| {
            if v.len() < n {
                v.resize(n, 0.0);
            }
        };
        grow(&mut self.acc, acc);
        grow(&mut self.wsum, tile);
        grow(&mut self.xmin, tile);
        // Two rows each: offsets are processed in pairs.
        grow(&mut self.v, 2 * row);
        grow(&mut self.p, 2 * row);
        grow(&mut self.w, 2 * row);
        grow(&mut self.x, 2 * row);
    }
}

/// Which instruction set the hot loops were compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
}

impl Isa {
    /// The widest instruction set the CPU has, unless `simd` is off.
    fn detect(simd: bool) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if simd && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::Avx2Fma;
            }
        }
        Isa::Baseline
    }
}

/// Tile size: output rows per band (one task) and columns per tile inside a band.
#[derive(Debug, Clone, Copy)]
struct TileSize {
    rows: usize,
    cols: usize,
}

/// NLM on host threads, in f32 with an exact f64 fallback.
pub struct CpuNlm {
    isa: Isa,
    tile: TileSize,
    ring: Vec<RingFrame>,
    /// Padding of each plane in the ring (0 for planes the plan does not read).
    pads: Vec<usize>,
    used: Vec<bool>,
    /// One per worker thread.
    scratch: Vec<Mutex<Scratch>>,
    /// Print per-frame counts of exactly computed samples (`NlmTuning::cpu_stats`).
    stats: bool,
    pair_offsets: bool,
}

impl CpuNlm {
    pub fn new(tuning: &NlmTuning) -> Self {
        let (rows, cols) = tuning.cpu_tile;
        CpuNlm {
            isa: Isa::detect(tuning.cpu_simd),
            tile: TileSize { rows: rows.max(1), cols: cols.max(1) },
            ring: Vec::new(),
            pads: Vec::new(),
            used: Vec::new(),
            scratch: Vec::new(),
            stats: tuning.cpu_stats,
            pair_offsets: tuning.cpu_pair_offsets,
        }
    }
}

/// A weight group with everything a tile needs, resolved for one job.
struct GroupCtx<'a> {
    group: &'a WeightGroup,
    plan: &'a NlmPlan,
    wp: WeightParams,
    /// Output plane size.
    width: usize,
    height: usize,
    /// Accumulate two offsets per pass (`NlmTuning::cpu_pair_offsets` off, for measurements).
    pair_offsets: bool,
    /// Every vertical running sum is an integer below 2^24 (8-bit formats), so sliding it is exact.
    running_sums_exact: bool,
}

/// A band of output rows of one group, with its slices of the output planes.
struct Band<'a> {
    group: usize,
    y0: usize,
    y1: usize,
    outs: Vec<OutRows<'a>>,
}

enum OutRows<'a> {
    U8(&'a mut [u8]),
    U16(&'a mut [u16]),
}

impl OutRows<'_> {
    #[inline]
    fn set(&mut self, i: usize, v: u32) {
        match self {
            OutRows::U8(s) => s[i] = v as u8,
            OutRows::U16(s) => s[i] = v as u16,
        }
    }
}

/// Frames of a job ordered by dt (the target has dt 0).
type Frames<'a> = [(i32, &'a RingFrame)];

impl HostAlgorithm for CpuNlm {
    fn describe(&self, threads: usize) -> String {
        format!("cpu ({threads} threads)")
    }

    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize, pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.nlm("the CPU NLM implementation")?;
        let a = plan.search_radius as usize;
        let s = plan.patch_radius as usize;
        let n = geometry.planes.len();
        let mut pads = vec![0usize; n];
        let mut used = vec![false; n];
        for g in &plan.groups {
            for &o in &g.outputs {
                if o >= n {
                    return Err(Error::State(format!("plan names plane {o} of a {n}-plane geometry")));
                }
                pads[o] = pads[o].max(a);
                used[o] = true;
            }
            for &gi in &g.guides {
                if gi >= n {
                    return Err(Error::State(format!("plan names plane {gi} of a {n}-plane geometry")));
                }
                let step = g.guide_step_x.max(g.guide_step_y);
                pads[gi] = pads[gi].max(step * a + s);
                used[gi] = true;
            }
        }
        let template =
            RingFrame { planes: geometry.planes.iter().enumerate().map(|(i, p)| if used[i] { PaddedPlane::new(p.width, p.height, pads[i]) } else { PaddedPlane::default() }).collect(), filled: false };
        self.ring = vec![template; ring_slots];
        self.pads = pads;
        self.used = used;
        let threads = pool.current_num_threads().max(1);
        if self.scratch.len() != threads {
            self.scratch = (0..threads).map(|_| Mutex::new(Scratch::default())).collect();
        }
        // Scratch for the largest group.
        let (tr, tc) = (self.tile.rows, self.tile.cols);
        let mut acc = 0;
        let mut tile = 0;
        let mut row = 0;
        for g in &plan.groups {
            let gp = geometry.planes[g.outputs[0]];
            let rows = tr.min(gp.height);
            let cols = tc.min(gp.width);
            acc = acc.max(g.outputs.len() * rows * cols);
            tile = tile.max(rows * cols);
            let sx = g.guide_step_x;
            row = row.max(sx * (cols + 2 * a) + 2 * s + 1);
        }
        for sc in &self.scratch {
            let mut sc = sc.lock().map_err(|_| Error::State("CPU scratch poisoned".into()))?;
            sc.ensure(acc, tile, row);
        }
        Ok(())
    }

    fn store(&mut self, slot: usize, frame: &PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let used = &self.used;
        let dst = self.ring.get_mut(slot).ok_or_else(|| Error::State(format!("ring slot {slot} out of range")))?;
        if frame.planes.len() != dst.planes.len() {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        for (i, (d, p)) in dst.planes.iter_mut().zip(&frame.planes).enumerate() {
            if !used[i] {
                continue;
            }
            if p.width != d.width || p.height != d.height || p.samples.len() != p.width * p.height {
                return Err(Error::InvalidFrame(format!("plane {i} is {}x{}, configured {}x{}", p.width, p.height, d.width, d.height)));
            }
        }
        dst.filled = false;
        let planes = &mut dst.planes;
        pool.install(|| {
            planes.par_iter_mut().zip(&frame.planes).enumerate().filter(|(i, _)| used[*i]).for_each(|(_, (d, p))| d.fill_from(&p.samples));
        });
        dst.filled = true;
        Ok(())
    }

    fn compute(&mut self, job: &Job, window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, pool: &rayon::ThreadPool) -> Result<()> {
        let plan = plan.nlm("the CPU NLM implementation")?;
        let get = |slot: usize| -> Result<&RingFrame> { self.ring.get(slot).filter(|f| f.filled).ok_or_else(|| Error::State(format!("ring slot {slot} is empty"))) };
        let frames = window.iter().map(|&(dt, slot)| Ok((dt, get(slot)?))).collect::<Result<Vec<(i32, &RingFrame)>>>()?;
        if out.planes.len() != self.used.len() {
            return Err(Error::InvalidFrame("output frame does not match the configured geometry".into()));
        }

        let target = frames.iter().find(|(dt, _)| *dt == 0).map(|f| f.1).ok_or_else(|| Error::State("no target frame".into()))?;
        // The ring's borders were sized for the configured plan; a plan that reads further needs
        // a new `configure`.
        let (a, s) = (plan.search_radius as usize, plan.patch_radius as usize);
        for g in &plan.groups {
            let step = g.guide_step_x.max(g.guide_step_y);
            let fits = g.outputs.len() <= 4
                && g.outputs.iter().all(|&o| o < self.pads.len() && self.used[o] && self.pads[o] >= a)
                && g.guides.iter().all(|&gi| gi < self.pads.len() && self.used[gi] && self.pads[gi] >= step * a + s);
            if !fits {
                return Err(Error::State("CPU NLM: plan differs from the configured one; configure again".into()));
            }
        }
        let mut ctxs = Vec::with_capacity(plan.groups.len());
        for g in &plan.groups {
            let o0 = &target.planes[g.outputs[0]];
            for &o in &g.outputs {
                let p = &out.planes[o];
                if p.width != o0.width || p.height != o0.height || p.samples.len() != p.width * p.height {
                    return Err(Error::InvalidFrame(format!("output plane {o} does not match the configured geometry")));
                }
            }
            let npatch = ((2 * plan.patch_radius + 1) * (2 * plan.patch_radius + 1)) as f64;
            let scale = plan.scale_to_8bit as f64;
            let h = g.h as f64;
            let inv_h2 = (1.0 / (h * h)).min(f32::MAX as f64) as f32;
            ctxs.push(GroupCtx {
                group: g,
                plan,
                wp: WeightParams { to_mean: (1.0 / (g.guides.len() as f64 * npatch * scale * scale)) as f32, offset: plan.distance_offset, inv_h2, weighting: plan.weighting },
                width: o0.width,
                height: o0.height,
                pair_offsets: self.pair_offsets,
                running_sums_exact: (2.0 * s as f64 + 1.0) * g.guides.len() as f64 * (plan.max_value as f64).powi(2) < (1u64 << 24) as f64,
            });
        }

        // Cut every group's output planes into bands of rows.
        let band_rows = self.tile.rows;
        let mut slots: Vec<Option<&mut crate::planar::Plane>> = out.planes.iter_mut().map(Some).collect();
        let mut bands: Vec<Band> = Vec::new();
        for (gi, ctx) in ctxs.iter().enumerate() {
            let first = bands.len();
            let nb = ctx.height.div_ceil(band_rows);
            for b in 0..nb {
                let y0 = b * band_rows;
                bands.push(Band { group: gi, y0, y1: (y0 + band_rows).min(ctx.height), outs: Vec::new() });
            }
            for &o in &ctx.group.outputs {
                let plane = slots[o].take().ok_or_else(|| Error::State(format!("plane {o} is the output of two groups")))?;
                let chunk = band_rows * plane.width;
                match &mut plane.samples {
                    Samples::U8(v) => v.chunks_mut(chunk).zip(&mut bands[first..]).for_each(|(c, b)| b.outs.push(OutRows::U8(c))),
                    Samples::U16(v) => v.chunks_mut(chunk).zip(&mut bands[first..]).for_each(|(c, b)| b.outs.push(OutRows::U16(c))),
                }
            }
        }

        let isa = self.isa;
        let tile_cols = self.tile.cols;
        let scratch = &self.scratch;
        let frames = &frames[..];
        let ctxs = &ctxs[..];
        let exact: usize = pool.install(|| {
            bands
                .par_iter_mut()
                .map(|band| {
                    let idx = rayon::current_thread_index().unwrap_or(0) % scratch.len();
                    let mut guard = scratch[idx].lock().unwrap_or_else(|e| e.into_inner());
                    let sc: &mut Scratch = &mut guard;
                    let ctx = &ctxs[band.group];
                    match isa {
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: Isa::Avx2Fma is only chosen when the CPU reports AVX2 and FMA.
                        Isa::Avx2Fma => unsafe { process_band_avx2(ctx, frames, band, tile_cols, sc) },
                        Isa::Baseline => process_band_baseline(ctx, frames, band, tile_cols, sc),
                    }
                })
                .sum()
        });
        if self.stats {
            let total: usize = ctxs.iter().map(|c| c.width * c.height).sum();
            eprintln!("nlmdenoise cpu: frame {}: {exact} of {total} samples computed exactly (f64)", job.seq);
        }
        Ok(())
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn process_band_avx2(ctx: &GroupCtx, frames: &Frames, band: &mut Band, tile_cols: usize, sc: &mut Scratch) -> usize {
    process_band(ctx, frames, band, tile_cols, sc)
}

fn process_band_baseline(ctx: &GroupCtx, frames: &Frames, band: &mut Band, tile_cols: usize, sc: &mut Scratch) -> usize {
    process_band(ctx, frames, band, tile_cols, sc)
}

/// A rectangle of output samples.
#[derive(Debug, Clone, Copy)]
struct Tile {
    x0: isize,
    x1: isize,
    y0: isize,
    y1: isize,
}

#[inline(always)]
fn process_band(ctx: &GroupCtx, frames: &Frames, band: &mut Band, tile_cols: usize, sc: &mut Scratch) -> usize {
    if ctx.plan.aggregation_radius > 0 {
        return aggregate::band(ctx, frames, band, &mut sc.agg);
    }
    let w = ctx.width;
    let mut exact = 0;
    let mut x0 = 0;
    while x0 < w {
        let x1 = (x0 + tile_cols).min(w);
        let tile = Tile { x0: x0 as isize, x1: x1 as isize, y0: band.y0 as isize, y1: band.y1 as isize };
        exact += process_tile(ctx, frames, tile, band, sc);
        x0 = x1;
    }
    exact
}

#[inline(always)]
fn process_tile(ctx: &GroupCtx, frames: &Frames, tile: Tile, band: &mut Band, sc: &mut Scratch) -> usize {
    let g = ctx.group;
    let a = ctx.plan.search_radius as isize;
    let tw = (tile.x1 - tile.x0) as usize;
    let th = (tile.y1 - tile.y0) as usize;
    let n = tw * th;
    let nout = g.outputs.len();
    sc.acc[..nout * n].fill(0.0);
    sc.wsum[..n].fill(0.0);
    sc.xmin[..n].fill(f32::INFINITY);
    let target = frames.iter().find(|(dt, _)| *dt == 0).expect("target frame").1;
    for &(dt, frame) in frames {
        let sym = dt == 0;
        for dy in -a..=a {
            // Inside the target frame one of each +d/-d pair (dy > 0, or dy == 0 < dx); the pass
            // accumulates both. Offsets of one row go two at a time.
            if sym && dy < 0 {
                continue;
            }
            let mut dx = if sym && dy == 0 { 1 } else { -a };
            let pairs = ctx.pair_offsets;
            while pairs && dx < a {
                offset_pass::<2>(ctx, target, frame, [dx, dx + 1], dy, sym, tile, sc);
                dx += 2;
            }
            while dx <= a {
                offset_pass::<1>(ctx, target, frame, [dx], dy, sym, tile, sc);
                dx += 1;
            }
        }
    }
    finalize_tile(ctx, frames, target, tile, band, sc)
}

/// One row of weights for one search offset, for the samples of output row `y` whose patches in
/// the target start at guide column `gx_t` (`gx_u` in `frame`, `gdy` guide rows below): the
/// vertical sums of squared guide differences over guide rows sy*y - s ..= sy*y + s into `v`
/// (afresh when `fresh`, else slid from row y - 1's sums already in `v`), their horizontal patch
/// sums into `p`, the weights into `w` (exponents in `x`). Shared by the pixel-wise and the
/// patch-wise paths.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn weight_row(ctx: &GroupCtx, target: &RingFrame, frame: &RingFrame, y: isize, (gx_t, gx_u, gdy): (isize, isize, isize), fresh: bool, v: &mut [f32], p: &mut [f32], w: &mut [f32], x: &mut [f32]) {
    let g = ctx.group;
    let s = ctx.plan.patch_radius as isize;
    let (sx, sy) = (g.guide_step_x as isize, g.guide_step_y as isize);
    let nv = v.len();
    if fresh {
        v.fill(0.0);
        for &gi in &g.guides {
            let (gt, gu) = (&target.planes[gi], &frame.planes[gi]);
            for ky in -s..=s {
                let r = sy * y + ky;
                kernels::add_sq_diff(v, gt.row(gx_t, r, nv), gu.row(gx_u, r + gdy, nv));
            }
        }
    } else {
        // The patch rows of row y - 1 less the sy leaving, plus the sy entering.
        for &gi in &g.guides {
            let (gt, gu) = (&target.planes[gi], &frame.planes[gi]);
            for j in 0..sy {
                let ra = sy * (y - 1) + s + 1 + j;
                let rr = sy * (y - 1) - s + j;
                kernels::slide_sq_diff(v, gt.row(gx_t, ra, nv), gu.row(gx_u, ra + gdy, nv), gt.row(gx_t, rr, nv), gu.row(gx_u, rr + gdy, nv));
            }
        }
    }
    if sx == 1 {
        kernels::box_sum_unit(p, v, s as usize);
    } else {
        kernels::box_sum_step(p, v, s as usize, sx as usize);
    }
    kernels::weights(w, x, p, &ctx.wp);
}

/// Accumulates the contributions of the offsets (dxs[k], dy) of `frame` to the tile; with `sym`,
/// also those of (-dxs[k], -dy) (target frame only, dy > 0 or dy == 0 < dx). `K` offsets share
/// one pass over the accumulators.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn offset_pass<const K: usize>(ctx: &GroupCtx, target: &RingFrame, frame: &RingFrame, dxs: [isize; K], dy: isize, sym: bool, tile: Tile, sc: &mut Scratch) {
    let g = ctx.group;
    let s = ctx.plan.patch_radius as isize;
    let (sx, sy) = (g.guide_step_x as isize, g.guide_step_y as isize);
    let Tile { x0, x1, y0, y1 } = tile;
    let tw = (x1 - x0) as usize;
    let th = (y1 - y0) as usize;
    let (dx_min, dx_max) = (dxs[0], dxs[K - 1]);
    // Samples q whose weight for an offset is needed: the tile (forward: q receives q + d) and,
    // with sym, the tile shifted by -d (backward: q + d receives q).
    let (qxa, qxb, qya, qyb) = if sym { (x0.min(x0 - dx_max), x1.max(x1 - dx_min), y0 - dy, y1) } else { (x0, x1, y0, y1) };
    let nq = (qxb - qxa) as usize;
    let nv = (sx as usize) * (nq - 1) + 2 * s as usize + 1;
    let gx_t = sx * qxa - s; // guide column of v[0] in the target
    let gdy = sy * dy;
    let Scratch { acc, wsum, xmin, v, p, w, x, .. } = sc;
    let vs: [&mut [f32]; K] = split_rows(v, nv);
    let ps: [&mut [f32]; K] = split_rows(p, nq);
    let ws: [&mut [f32]; K] = split_rows(w, nq);
    let xs: [&mut [f32]; K] = split_rows(x, nq);
    // Vertical sums restart from scratch on every row when the guide step skips whole patches, or
    // when a running sum could leave the range where f32 holds integers exactly (then its rounding
    // errors would accumulate down the band).
    let full_init = sy > 2 * s + 1 || !ctx.running_sums_exact;
    let n = tw * th;
    for y in qya..qyb {
        for k in 0..K {
            let v = &mut *vs[k];
            let gx_u = gx_t + sx * dxs[k]; // guide column of v[0] in the reference frame
            weight_row(ctx, target, frame, y, (gx_t, gx_u, gdy), y == qya || full_init, v, ps[k], ws[k], xs[k]);
        }

        // Forward: q in the tile gets frame(q + d).
        if y >= y0 && y < y1 {
            let r = (y - y0) as usize * tw;
            let off = |_k: usize| (x0 - qxa) as usize;
            for (oi, &o) in g.outputs.iter().enumerate() {
                let plane = &frame.planes[o];
                let accr = &mut acc[oi * n + r..][..tw];
                if K == 2 {
                    let (w0, w1) = (&ws[0][off(0)..][..tw], &ws[1][off(1)..][..tw]);
                    let (s0, s1) = (plane.row(x0 + dxs[0], y + dy, tw), plane.row(x0 + dxs[K - 1], y + dy, tw));
                    if oi == 0 {
                        let (x0r, x1r) = (&xs[0][off(0)..][..tw], &xs[1][off(1)..][..tw]);
                        kernels::acc_all2(accr, &mut wsum[r..r + tw], &mut xmin[r..r + tw], [w0, w1], [x0r, x1r], [s0, s1]);
                    } else {
                        kernels::acc_values2(accr, [w0, w1], [s0, s1]);
                    }
                } else {
                    let w0 = &ws[0][off(0)..][..tw];
                    let s0 = plane.row(x0 + dxs[0], y + dy, tw);
                    if oi == 0 {
                        kernels::acc_all(accr, &mut wsum[r..r + tw], &mut xmin[r..r + tw], w0, &xs[0][off(0)..][..tw], s0);
                    } else {
                        kernels::acc_values(accr, w0, s0);
                    }
                }
            }
        }
        // Backward: p = q + d in the tile gets target(q) with the same weight.
        if sym && y + dy >= y0 && y + dy < y1 {
            let r = (y + dy - y0) as usize * tw;
            let off = |k: usize| (x0 - dxs[k] - qxa) as usize;
            for (oi, &o) in g.outputs.iter().enumerate() {
                let plane = &target.planes[o];
                let accr = &mut acc[oi * n + r..][..tw];
                if K == 2 {
                    let (w0, w1) = (&ws[0][off(0)..][..tw], &ws[1][off(1)..][..tw]);
                    let (s0, s1) = (plane.row(x0 - dxs[0], y, tw), plane.row(x0 - dxs[K - 1], y, tw));
                    if oi == 0 {
                        let (x0r, x1r) = (&xs[0][off(0)..][..tw], &xs[1][off(1)..][..tw]);
                        kernels::acc_all2(accr, &mut wsum[r..r + tw], &mut xmin[r..r + tw], [w0, w1], [x0r, x1r], [s0, s1]);
                    } else {
                        kernels::acc_values2(accr, [w0, w1], [s0, s1]);
                    }
                } else {
                    let w0 = &ws[0][off(0)..][..tw];
                    let s0 = plane.row(x0 - dxs[0], y, tw);
                    if oi == 0 {
                        kernels::acc_all(accr, &mut wsum[r..r + tw], &mut xmin[r..r + tw], w0, &xs[0][off(0)..][..tw], s0);
                    } else {
                        kernels::acc_values(accr, w0, s0);
                    }
                }
            }
        }
    }
}

/// The first `K` (1 or 2) halves of a scratch buffer, cut to `n` samples.
#[inline(always)]
fn split_rows<const K: usize>(buf: &mut [f32], n: usize) -> [&mut [f32]; K] {
    let half = buf.len() / 2;
    let (a, b) = buf.split_at_mut(half);
    let mut first = Some(&mut a[..n]);
    let mut second = Some(&mut b[..n]);
    std::array::from_fn(|k| if k == 0 { first.take().unwrap() } else { second.take().unwrap() })
}

/// How a sample's result is obtained, from the smallest normalized distance `x` it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// f32 accumulators are accurate: the largest weight is far from underflow and the support edge.
    Fast,
    /// Every weight is exactly 0 in f64 too: the reference keeps the input sample.
    KeepInput,
    /// Weights too small or too close to the support edge for f32: recompute in f64.
    Exact,
}

#[inline(always)]
fn decide(weighting: Weighting, xmin: f32) -> Decision {
    match weighting {
        // exp(-x) underflows f64 (to exactly 0) for x > 745.13; f32 weights stay accurate relative
        // to each other while the largest is above ~1e-26 (x < 60).
        Weighting::Welsch => {
            if xmin < WELSCH_FAST_BELOW {
                Decision::Fast
            } else if xmin > WELSCH_ZERO_ABOVE {
                Decision::KeepInput
            } else {
                Decision::Exact
            }
        }
        // (1 - x)^2 is exactly 0 for x >= 1; near 1 the f32 rounding of x is large relative to 1 - x.
        Weighting::Bisquare => {
            if xmin < 1.0 - BISQUARE_EDGE_BELOW {
                Decision::Fast
            } else if xmin > 1.0 + BISQUARE_EDGE_ABOVE {
                Decision::KeepInput
            } else {
                Decision::Exact
            }
        }
    }
}

#[inline(always)]
fn finalize_tile(ctx: &GroupCtx, frames: &Frames, target: &RingFrame, tile: Tile, band: &mut Band, sc: &mut Scratch) -> usize {
    let g = ctx.group;
    let tw = (tile.x1 - tile.x0) as usize;
    let th = (tile.y1 - tile.y0) as usize;
    let n = tw * th;
    let wref = ctx.plan.wref;
    let weighting = ctx.plan.weighting;
    let maxv = ctx.plan.max_value as f32;
    let width = ctx.width;
    // Window around x.5 in which f32 error may flip the rounding (8- and 10-bit formats only; the
    // tolerance of deeper formats is wider than their f32 error).
    let scale = ctx.plan.scale_to_8bit;
    let tie_eps = if scale <= 4.0 { TIE_WINDOW * scale } else { 0.0 };
    let mut exact = [0u32; 4];
    let mut exact_count = 0;
    for r in 0..th {
        let y = tile.y0 + r as isize;
        let out_row = (y as usize - band.y0) * width;
        for c in 0..tw {
            let x = tile.x0 + c as isize;
            let i = r * tw + c;
            let xm = sc.xmin[i];
            let mut decision = decide(weighting, xm);
            if decision == Decision::Fast {
                let wm = match weighting {
                    Weighting::Welsch => kernels::exp_neg(-xm),
                    Weighting::Bisquare => (1.0 - xm) * (1.0 - xm),
                };
                let wc = wref * wm;
                let total = sc.wsum[i] + wc;
                for (k, &o) in g.outputs.iter().enumerate() {
                    let centre = target.planes[o].at(x, y);
                    let value = (sc.acc[k * n + i] + wc * centre) / total;
                    let fl = value.floor();
                    if (value - fl - 0.5).abs() < tie_eps {
                        // Too close to a rounding tie for f32 to decide like the reference.
                        decision = Decision::Exact;
                        break;
                    }
                    let q = fl + 1.0;
                    let q = if value - fl < 0.5 { fl } else { q };
                    let q = if q < 0.0 {
                        0.0
                    } else if q > maxv {
                        maxv
                    } else {
                        q
                    };
                    band.outs[k].set(out_row + x as usize, q as u32);
                }
            }
            match decision {
                Decision::Fast => {}
                Decision::KeepInput => {
                    for (k, &o) in g.outputs.iter().enumerate() {
                        band.outs[k].set(out_row + x as usize, target.planes[o].at(x, y) as u32);
                    }
                }
                Decision::Exact => {
                    exact_count += 1;
                    exact_sample(ctx, frames, target, x, y, &mut exact[..g.outputs.len()]);
                    for (out, &v) in band.outs.iter_mut().zip(&exact[..g.outputs.len()]) {
                        out.set(out_row + x as usize, v);
                    }
                }
            }
        }
    }
    exact_count
}

/// One output sample computed exactly as the reference does (f64, same order of operations).
#[inline(never)]
fn exact_sample(ctx: &GroupCtx, frames: &Frames, target: &RingFrame, px: isize, py: isize, out: &mut [u32]) {
    let g = ctx.group;
    let plan = ctx.plan;
    let a = plan.search_radius as isize;
    let s = plan.patch_radius as isize;
    let (sx, sy) = (g.guide_step_x as isize, g.guide_step_y as isize);
    let norm = 1.0 / ((g.guides.len() as f64) * ((2 * s + 1) * (2 * s + 1)) as f64);
    let inv_scale2 = 1.0 / (plan.scale_to_8bit as f64 * plan.scale_to_8bit as f64);
    let h = g.h as f64;
    let side = (2 * s + 1) as usize;
    let mut sums = [0f64; 4];
    let sums = &mut sums[..g.outputs.len()];
    let mut total = 0.0;
    let mut wmax = 0.0f64;
    for &(dt, frame) in frames {
        for dy in -a..=a {
            for dx in -a..=a {
                if dt == 0 && dx == 0 && dy == 0 {
                    continue;
                }
                // Squared differences of integers are summed exactly in f64 whatever the order, so
                // this matches the reference's sample-by-sample sum bit for bit.
                let mut ssd = 0.0;
                for &gi in &g.guides {
                    let (gt, gu) = (&target.planes[gi], &frame.planes[gi]);
                    for ky in -s..=s {
                        let rt = gt.row(px * sx - s, py * sy + ky, side);
                        let ru = gu.row((px + dx) * sx - s, (py + dy) * sy + ky, side);
                        ssd += rt
                            .iter()
                            .zip(ru)
                            .map(|(&a, &b)| {
                                let d = a as f64 - b as f64;
                                d * d
                            })
                            .sum::<f64>();
                    }
                }
                let wt = plan.weight(ssd * norm * inv_scale2, h);
                wmax = wmax.max(wt);
                total += wt;
                for (v, &o) in sums.iter_mut().zip(&g.outputs) {
                    *v += wt * frame.planes[o].at(px + dx, py + dy) as f64;
                }
            }
        }
    }
    let wc = plan.wref as f64 * wmax;
    total += wc;
    for ((v, &o), r) in sums.iter().zip(&g.outputs).zip(out.iter_mut()) {
        let centre = target.planes[o].at(px, py) as f64;
        let value = if total > 0.0 { (*v + wc * centre) / total } else { centre };
        *r = (value + 0.5).floor().clamp(0.0, plan.max_value as f64) as u32;
    }
}
