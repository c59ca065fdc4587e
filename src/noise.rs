//! Noise estimation: the standard deviation of white noise in a stream, per plane class (luma,
//! chroma), in 8-bit code values, so that `sigma = auto` can drive NLM's strengths and BM3D's
//! thresholds without the user knowing the noise level.
//!
//! **One frame.** On each plane the residual of the 3x3 mask `[1 -2 1; -2 4 -2; 1 -2 1]` (the
//! outer product of two second differences: it removes constant, linear and bilinear content, so
//! smooth shading leaves almost nothing) is taken in blocks of [`BLOCK`] x [`BLOCK`] samples. For
//! white noise of deviation s every residual has deviation 6 s, and a block's estimate is
//! `sqrt(pi / 2) * mean |residual| / 6` (the mean absolute value is less disturbed by a stray
//! edge than the variance). Texture and edges only add to a block's residual, so the frame's
//! estimate is a low quantile ([`QUANTILE`]) of the block estimates, divided by the quantile's
//! own bias on pure noise ([`QUANTILE_BIAS`]). Blocks touching the lowest or highest sample value
//! are left out (clipping hides noise). Large planes are sampled on a grid of blocks (at most
//! [`MAX_BLOCKS`]), which bounds the cost per frame; where clipping leaves fewer than
//! [`MIN_USABLE_BLOCKS`] of them, the grid gets denser (at most [`MAX_DENSE_BLOCKS`] blocks).
//!
//! **Over time.** A frame is estimated every [`INTERVAL`] frames; the estimates are smoothed
//! (exponentially in the variance, weight [`SMOOTHING`] for the newest), and when two consecutive
//! estimates differ from the smoothed value by more than [`JUMP`] (a scene cut, a change of
//! camera gain) the smoothed value starts afresh from the newest. A reset of the stream (flush,
//! seek, end of stream) forgets everything. So after a step the estimate follows within
//! 2 x INTERVAL frames, and steadily to within a few percent within a second of 25 frames/s video.

use rayon::prelude::*;

use crate::format::ComponentKind;
use crate::frame::VideoInfo;
use crate::planar::{Geometry, PlanarFrame, PlaneGeometry};

/// Side of the analysis blocks (residual samples).
pub const BLOCK: usize = 16;
/// Most blocks analysed per plane and frame (a grid over the plane beyond that).
pub const MAX_BLOCKS: usize = 128;
/// Fewer usable blocks than this on the grid (clipped ones are left out) make it denser...
pub const MIN_USABLE_BLOCKS: usize = 48;
/// ... up to this many blocks (`bench_noise`: at most 0.56 ms per estimate, against 0.15-0.18).
pub const MAX_DENSE_BLOCKS: usize = 1024;
/// The frame estimate is this quantile of the block estimates...
pub const QUANTILE: f64 = 0.2;
/// ... divided by this: the 20th percentile of the block estimates of pure white noise relative
/// to the true deviation (measured by `pure_noise_is_estimated_without_bias` below).
pub const QUANTILE_BIAS: f64 = 0.924;
/// The share of the flattest blocks' residual that texture contributes on clean content, in
/// 8-bit code values (the harness's clean clips read 0.2-0.7 without it; docs/quality.md),
/// subtracted in quadrature: at sigma 2 it removes the 3-6% that textured clips added, above
/// sigma 10 it changes the estimate by less than 0.2%.
pub const TEXTURE_FLOOR: f64 = 0.6;
/// Frames between two estimates.
pub const INTERVAL: u64 = 8;
/// Weight of the newest estimate in the smoothed variance.
pub const SMOOTHING: f64 = 0.35;
/// Relative change of the deviation that counts as a jump (two estimates in a row).
pub const JUMP: f64 = 0.4;
/// Used while no estimate can be made (planes smaller than a block plus its border).
pub const FALLBACK_SIGMA: f32 = 5.0;

/// Estimated noise deviation, 8-bit code values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseEstimate {
    pub luma: f32,
    /// Chroma planes (mean of U and V); None for formats without chroma (RGB: `luma` covers
    /// every colour plane).
    pub chroma: Option<f32>,
}

/// Where a component's samples lie in a buffer of samples: (x, y) at `offset + y * stride + x *
/// step` (a plane: 0, its width, 1; NV12's U in the stored chroma plane: 0, the row, 2).
#[derive(Debug, Clone, Copy)]
struct Layout {
    offset: usize,
    stride: usize,
    step: usize,
}

/// The noise deviation of one plane (8-bit code values), or None when it holds no usable block.
pub fn estimate_plane(plane: &PlaneGeometry, samples: &crate::planar::Samples, scale: f64, max_value: u32) -> Option<f64> {
    estimate_component(plane, samples, Layout { offset: 0, stride: plane.width, step: 1 }, scale, max_value)
}

fn estimate_component(plane: &PlaneGeometry, samples: &crate::planar::Samples, layout: Layout, scale: f64, max_value: u32) -> Option<f64> {
    match samples {
        crate::planar::Samples::U8(v) => estimate_samples(plane, v, layout, scale, max_value),
        crate::planar::Samples::U16(v) => estimate_samples(plane, v, layout, scale, max_value),
    }
}

fn estimate_samples<T: Copy + Into<u32> + Sync>(plane: &PlaneGeometry, samples: &[T], layout: Layout, scale: f64, max_value: u32) -> Option<f64> {
    let (w, h) = (plane.width, plane.height);
    if w < BLOCK + 2 || h < BLOCK + 2 {
        return None;
    }
    let (bx, by) = ((w - 2) / BLOCK, (h - 2) / BLOCK);
    let mut step = grid_step(bx, by);
    let mut estimates = grid_estimates(samples, layout, bx, by, step, max_value, scale);
    // Blocks that touch the lowest or highest value are left out; where that leaves few (a
    // bright or dark scene under strong noise, small frames) the quantile of the rest is noisy,
    // so denser grids are tried, within MAX_DENSE_BLOCKS (a black frame has none to find).
    while estimates.len() < MIN_USABLE_BLOCKS && step > 1 {
        let denser = step.div_ceil(2);
        if bx.div_ceil(denser) * by.div_ceil(denser) > MAX_DENSE_BLOCKS {
            break;
        }
        step = denser;
        estimates = grid_estimates(samples, layout, bx, by, step, max_value, scale);
    }
    if estimates.is_empty() {
        return None;
    }
    estimates.sort_by(f64::total_cmp);
    let q = estimates[((estimates.len() - 1) as f64 * QUANTILE).round() as usize];
    let e = q / QUANTILE_BIAS;
    // Texture leaks into even the flattest blocks and adds to the noise in quadrature; take off
    // its typical share (sharp content reads as noise of about TEXTURE_FLOOR otherwise).
    Some((e * e - TEXTURE_FLOOR * TEXTURE_FLOOR).max(0.0).sqrt())
}

/// Every how many blocks, across and down, a plane of `bx` x `by` blocks is sampled: a grid of at
/// most MAX_BLOCKS blocks, spread over the plane.
fn grid_step(bx: usize, by: usize) -> usize {
    ((bx * by) as f64 / MAX_BLOCKS as f64).sqrt().ceil().max(1.0) as usize
}

/// The estimates of the usable blocks on a grid of every `step`-th block in both directions.
fn grid_estimates<T: Copy + Into<u32> + Sync>(samples: &[T], layout: Layout, bx: usize, by: usize, step: usize, max_value: u32, scale: f64) -> Vec<f64> {
    // Rows of blocks in parallel: the estimate runs on the caller's thread between frames, and
    // reading scattered blocks of a frame that left the cache is latency-bound, so spreading it
    // over the pool's threads shortens the caller's wait (the result does not depend on it: the
    // estimates are sorted).
    let block_rows: Vec<usize> = (0..by).step_by(step).collect();
    block_rows
        .par_iter()
        .flat_map_iter(|&j| {
            // The block's rows plus one above and one below, widened once so the inner loop is
            // plain integer arithmetic over slices.
            let mut rows = [0i32; (BLOCK + 2) * (BLOCK + 2)];
            (0..bx).step_by(step).filter_map(move |i| block_estimate(samples, layout, i * BLOCK, j * BLOCK, &mut rows, max_value, scale)).collect::<Vec<_>>()
        })
        .collect()
}

/// The noise deviation of the block at (x0, y0) (its residual's top-left sample is x0 + 1,
/// y0 + 1), or None when it touches the lowest or highest code value.
fn block_estimate<T: Copy + Into<u32>>(samples: &[T], layout: Layout, x0: usize, y0: usize, rows: &mut [i32; (BLOCK + 2) * (BLOCK + 2)], max_value: u32, scale: f64) -> Option<f64> {
    let (mut lo, mut hi) = (u32::MAX, 0u32);
    for (r, row) in rows.chunks_exact_mut(BLOCK + 2).enumerate() {
        let start = layout.offset + (y0 + r) * layout.stride + x0 * layout.step;
        let mut put = |d: &mut i32, s: T| {
            let s: u32 = s.into();
            lo = lo.min(s);
            hi = hi.max(s);
            *d = s as i32;
        };
        if layout.step == 1 {
            // A plane's row: a slice (the common case, kept as fast as before).
            row.iter_mut().zip(&samples[start..][..BLOCK + 2]).for_each(|(d, &s)| put(d, s));
        } else {
            // The range a component's row spans: checked like the slice above.
            let span = &samples[start..][..(BLOCK + 1) * layout.step + 1];
            row.iter_mut().zip(span.iter().step_by(layout.step)).for_each(|(d, &s)| put(d, s));
        }
    }
    // Clipping hides noise; the border samples count too (they enter the residual).
    if lo == 0 || hi >= max_value {
        return None;
    }
    let mut sum = 0i64;
    for y in 1..=BLOCK {
        let (a, b, c) = (&rows[(y - 1) * (BLOCK + 2)..][..BLOCK + 2], &rows[y * (BLOCK + 2)..][..BLOCK + 2], &rows[(y + 1) * (BLOCK + 2)..][..BLOCK + 2]);
        // The mask is the outer product of [1 -2 1] with itself: second difference down the
        // column first, then along the row.
        let mut col = [0i32; BLOCK + 2];
        for x in 0..BLOCK + 2 {
            col[x] = a[x] - 2 * b[x] + c[x];
        }
        let mut row_sum = 0i32;
        for x in 1..=BLOCK {
            row_sum += (col[x - 1] - 2 * col[x] + col[x + 1]).abs();
        }
        sum += row_sum as i64;
    }
    let mean_abs = sum as f64 / (BLOCK * BLOCK) as f64 / scale;
    Some((std::f64::consts::PI / 2.0).sqrt() * mean_abs / 6.0)
}

/// The noise deviation of one frame per plane class.
pub fn estimate_frame(frame: &PlanarFrame, geometry: &Geometry) -> Option<NoiseEstimate> {
    let scale = geometry.scale_to_8bit();
    let max = geometry.max_value();
    // Every plane at once (in parallel), then grouped by kind in plane order.
    let per_plane: Vec<(ComponentKind, Option<f64>)> = geometry.planes.par_iter().zip(frame.planes.par_iter()).map(|(g, p)| (g.kind, estimate_plane(g, &p.samples, scale, max))).collect();
    combine(&per_plane)
}

/// [`estimate_frame`] of a frame of `info` held as it is stored (`Geometry::stored`: NV12's luma
/// and interleaved chroma planes, packed RGB's one plane): each component read where it lies, with
/// the same blocks and the same result as on the frame unpacked into planes, without unpacking it.
pub fn estimate_stored(frame: &PlanarFrame, info: &VideoInfo) -> Option<NoiseEstimate> {
    let fi = info.format.info();
    let (planes, stored) = (Geometry::from_video_info(info), Geometry::stored(info));
    if frame.planes.len() != stored.planes.len() {
        return None;
    }
    let (scale, max, bps) = (planes.scale_to_8bit(), planes.max_value(), fi.bytes_per_sample);
    let per_plane: Vec<(ComponentKind, Option<f64>)> = fi
        .components
        .par_iter()
        .zip(planes.planes.par_iter())
        .map(|(c, g)| {
            let layout = Layout { offset: c.offset / bps, stride: stored.planes[c.memory_plane].width, step: c.step / bps };
            (g.kind, estimate_component(g, &frame.planes[c.memory_plane].samples, layout, scale, max))
        })
        .collect();
    combine(&per_plane)
}

/// The frame's estimate from its planes' (kind, deviation), in plane order.
fn combine(per_plane: &[(ComponentKind, Option<f64>)]) -> Option<NoiseEstimate> {
    let of = |kind: ComponentKind| -> Vec<f64> { per_plane.iter().filter(|(k, _)| *k == kind).filter_map(|(_, e)| *e).collect() };
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| (v.iter().map(|s| s * s).sum::<f64>() / v.len() as f64).sqrt() as f32);
    let luma = mean(of(ComponentKind::Luma)).or_else(|| mean(of(ComponentKind::Color)))?;
    Some(NoiseEstimate { luma, chroma: mean(of(ComponentKind::Chroma)) })
}

/// Smoothed estimates over a stream (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct NoiseEstimator {
    frames: u64,
    /// Smoothed variances (luma, chroma).
    smoothed: Option<(f64, Option<f64>)>,
    /// Estimates in a row that jumped away from the smoothed value.
    jumps: u32,
}

impl NoiseEstimator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the stream (a flush, a seek, the end of the stream).
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Whether the next frame is one that [`Self::observe`] estimates (one in [`INTERVAL`]): a
    /// caller holding frames in another layout converts only those.
    pub fn due(&self) -> bool {
        self.frames % INTERVAL == 0
    }

    /// Counts the next frame without looking at it (it is not [`Self::due`]).
    pub fn skip(&mut self) {
        self.frames += 1;
    }

    /// Takes the next frame of the stream; true when the estimate changed.
    pub fn observe(&mut self, frame: &PlanarFrame, geometry: &Geometry) -> bool {
        self.observe_with(|| estimate_frame(frame, geometry))
    }

    /// [`Self::observe`] of a frame of `info` held as it is stored ([`estimate_stored`]).
    pub fn observe_stored(&mut self, frame: &PlanarFrame, info: &VideoInfo) -> bool {
        self.observe_with(|| estimate_stored(frame, info))
    }

    fn observe_with(&mut self, estimate: impl FnOnce() -> Option<NoiseEstimate>) -> bool {
        let n = self.frames;
        self.frames += 1;
        if n % INTERVAL != 0 {
            return false;
        }
        let Some(e) = estimate() else { return false };
        let (l, c) = ((e.luma as f64).powi(2), e.chroma.map(|c| (c as f64).powi(2)));
        self.smoothed = Some(match self.smoothed {
            None => (l, c),
            Some((sl, sc)) => {
                let far = |new: f64, old: f64| (new.sqrt() - old.sqrt()).abs() > JUMP * old.sqrt().max(0.5);
                if far(l, sl) {
                    self.jumps += 1;
                } else {
                    self.jumps = 0;
                }
                if self.jumps >= 2 {
                    self.jumps = 0;
                    (l, c)
                } else {
                    let mix = |new: f64, old: f64| SMOOTHING * new + (1.0 - SMOOTHING) * old;
                    (
                        mix(l, sl),
                        match (c, sc) {
                            (Some(c), Some(sc)) => Some(mix(c, sc)),
                            (c, _) => c,
                        },
                    )
                }
            }
        });
        true
    }

    /// The smoothed estimate; None before the first frame that could be estimated.
    pub fn current(&self) -> Option<NoiseEstimate> {
        self.smoothed.map(|(l, c)| NoiseEstimate { luma: l.sqrt() as f32, chroma: c.map(|c| c.sqrt() as f32) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::VideoInfo;
    use crate::planar::Samples;

    fn gaussian(n: usize, sigma: f64, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n).map(|_| (-2.0 * next().ln()).sqrt() * (std::f64::consts::TAU * next()).cos() * sigma).collect()
    }

    /// The quantile's bias on pure noise, which QUANTILE_BIAS corrects: the corrected estimate is
    /// within 2% of the true deviation (unquantized noise around mid-grey, 16-bit samples).
    #[test]
    fn pure_noise_is_estimated_without_bias() {
        let g = Geometry::from_video_info(&VideoInfo::new(PixelFormat::GRAY16_LE, 640, 480).unwrap());
        for sigma in [3.0, 10.0, 30.0] {
            let n = gaussian(640 * 480, sigma * 256.0, 7);
            let mut f = PlanarFrame::zeroed(&g);
            f.planes[0].samples = Samples::U16(n.iter().map(|v| (32768.0 + v).round().clamp(1.0, 65534.0) as u16).collect());
            let e = estimate_frame(&f, &g).unwrap();
            // Undo the texture floor, which pure noise does not have.
            let raw = ((e.luma as f64).powi(2) + TEXTURE_FLOOR * TEXTURE_FLOOR).sqrt();
            assert!((raw / sigma - 1.0).abs() < 0.02, "sigma {sigma}: {e:?}");
        }
    }

    /// A stored frame (NV12's interleaved chroma, packed RGB, P010's 16-bit samples, planar I420)
    /// is estimated in place exactly as the same frame unpacked into planes: same blocks, same
    /// values, same result, bit for bit (the engine no longer unpacks it for the estimate).
    #[test]
    fn stored_frames_estimate_as_their_planes() {
        use PixelFormat::*;
        for (i, format) in [NV12, NV21, P010_10LE, I420, RGBA, BGRx, RGB, BGR, Y444_16LE, GRAY8].into_iter().enumerate() {
            for (w, h) in [(1280, 720), (97, 61), (33, 19)] {
                let info = VideoInfo::new(format, w, h).unwrap();
                let mut stored = PlanarFrame::zeroed(&Geometry::stored(&info));
                let seed = 0x5EED + i as u64 * 977 + w as u64;
                for (p, plane) in stored.planes.iter_mut().enumerate() {
                    let n = match &plane.samples {
                        Samples::U8(v) => v.len(),
                        Samples::U16(v) => v.len(),
                    };
                    let noise = gaussian(n, 6.0 + p as f64, seed + p as u64);
                    // A ramp with noise, a few samples clipped (left out by the estimator).
                    let v = |k: usize| 60.0 + (k % 131) as f64 * 0.8 + noise[k];
                    plane.samples = match &plane.samples {
                        Samples::U8(_) => Samples::U8((0..n).map(|k| v(k).round().clamp(0.0, 255.0) as u8).collect()),
                        Samples::U16(_) => Samples::U16((0..n).map(|k| (v(k) * 256.0).round().clamp(0.0, 65535.0) as u16).collect()),
                    };
                }
                let g = Geometry::from_video_info(&info);
                let mut planar = PlanarFrame::zeroed(&g);
                crate::convert::unpack(&crate::convert::stored_ref(info, &stored).unwrap(), &mut planar).unwrap();
                let a = estimate_frame(&planar, &g);
                let b = estimate_stored(&stored, &info);
                assert_eq!(a, b, "{format} {w}x{h}");
                if w >= 97 {
                    assert!(a.is_some(), "{format} {w}x{h}: no estimate");
                }
            }
        }
    }

    /// Where every block of the sparse grid touches 255 (a bright scene), a denser grid finds the
    /// unclipped blocks between them: an estimate within 5%, not none.
    #[test]
    fn clipped_grid_blocks_make_the_grid_denser() {
        let (w, h) = (1280, 720);
        let g = Geometry::from_video_info(&VideoInfo::new(PixelFormat::GRAY8, w, h).unwrap());
        let n = gaussian(w * h, 10.0, 11);
        let mut v: Vec<u8> = n.iter().map(|d| (128.0 + d).round().clamp(1.0, 254.0) as u8).collect();
        let step = grid_step((w - 2) / BLOCK, (h - 2) / BLOCK);
        assert!(step > 1);
        for by in (0..(h - 2) / BLOCK).step_by(step) {
            for bx in (0..(w - 2) / BLOCK).step_by(step) {
                v[(by * BLOCK + 5) * w + bx * BLOCK + 5] = 255;
            }
        }
        let mut f = PlanarFrame::zeroed(&g);
        f.planes[0].samples = Samples::U8(v);
        let e = estimate_frame(&f, &g).expect("an estimate from the denser grid");
        let raw = ((e.luma as f64).powi(2) + TEXTURE_FLOOR * TEXTURE_FLOOR).sqrt();
        assert!((raw / 10.0 - 1.0).abs() < 0.05, "{e:?}");
    }
}
