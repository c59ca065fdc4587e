//! Scene cuts. A frame that shares almost nothing with the frame before it starts a new shot, and
//! the temporal window ([`crate::window`]) never reaches across the cut: the frames after a cut
//! take nothing from the frames before it, and the other way round, for every algorithm and
//! backend.
//!
//! The test is cheap and tolerant of noise and motion. Each frame is summarised by a thumbnail: the
//! means of its luma (or, for RGB, colour) in [`CELL`]x[`CELL`] cells, from every column of one row
//! in `SUBSAMPLE`. The thumbnail is cut into patches of [`PATCH`]x[`PATCH`] cells; a patch has
//! changed when no patch of the previous frame's thumbnail within [`REACH`] cells of it (motion up
//! to `REACH * CELL` samples a frame) has a mean squared cell difference below [`MIN_CHANGE`]^2
//! plus the noise of both frames' cell means. That noise is measured on each frame (the rows of a
//! cell read into two halves; the median over the cells of their squared difference), not taken
//! from the stream's sigma, which a set strength leaves at a guess. A cut is a frame on which at
//! least the `scene_cut` fraction of the patches changed.

use rayon::prelude::*;

use crate::format::ComponentKind;
use crate::frame::VideoInfo;
use crate::planar::{Geometry, PlanarFrame, Samples};

/// Side of the thumbnail's cells, in samples of the plane read.
pub const CELL: usize = 8;
/// Rows read: one in `SUBSAMPLE` (every column of them): rows 0, `SUBSAMPLE`, 2 `SUBSAMPLE`, ...
/// of the plane, and no other (a frame in device memory comes to the host with these rows only).
pub const SUBSAMPLE: usize = 4;
const _: () = assert!(CELL % SUBSAMPLE == 0, "each cell starts on a row read");
/// The noise of a frame is measured on one cell in `MEDIAN_STEP`.
const MEDIAN_STEP: usize = 3;
/// Side of the patches compared, in cells.
pub const PATCH: usize = 4;
/// How far the match of a patch is looked for in the previous thumbnail, in cells either way.
pub const REACH: usize = 2;
/// The smallest root-mean-square difference of a patch's cells, 8-bit code values, that counts as
/// a change at any noise level: lighting flicker and coding noise stay below it.
pub const MIN_CHANGE: f64 = 12.0;
/// The default fraction of changed patches that makes a cut (`Params::scene_cut`).
pub const DEFAULT_SCENE_CUT: f32 = 0.5;

/// A frame's thumbnail: its cell means (8-bit units), `bw x bh` cells in row-major order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signature {
    pub bw: usize,
    pub bh: usize,
    pub means: Vec<f64>,
    /// The variance of a cell mean from the frame's noise, measured on the frame.
    pub noise: f64,
}

/// Where one component lies in a plane's samples (as stored, or one plane per component).
#[derive(Clone, Copy)]
struct Layout {
    plane: usize,
    offset: usize,
    stride: usize,
    step: usize,
}

/// The signature of `frame`, a frame of `info` held as planes of `geometry` or, with `stored`, as
/// it is stored (`Geometry::stored`); None for frames smaller than one patch or without a luma
/// or colour component.
pub fn signature(frame: &PlanarFrame, info: &VideoInfo, geometry: &Geometry, stored: bool) -> Option<Signature> {
    let mut out = Signature::default();
    measure(frame, info, geometry, stored, &mut out, &mut Vec::new()).then_some(out)
}

/// [`signature`] into `out`, reusing its memory and `scratch` (a frame's worth of fresh memory
/// costs more in page faults than the test itself); false where [`signature`] gives None.
pub fn measure(frame: &PlanarFrame, info: &VideoInfo, geometry: &Geometry, stored: bool, out: &mut Signature, scratch: &mut Vec<f64>) -> bool {
    let fi = info.format.info();
    let planes = Geometry::from_video_info(info);
    let stored_geometry = Geometry::stored(info);
    let (scale, bps) = (planes.scale_to_8bit(), fi.bytes_per_sample);
    // Luma where there is one; otherwise the colour components together.
    let kind = if fi.components.iter().any(|c| c.kind == ComponentKind::Luma) { ComponentKind::Luma } else { ComponentKind::Color };
    let layouts: Vec<Layout> = fi
        .components
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == kind)
        .map(|(i, c)| {
            if stored {
                Layout { plane: c.memory_plane, offset: c.offset / bps, stride: stored_geometry.planes[c.memory_plane].width, step: c.step / bps }
            } else {
                Layout { plane: i, offset: 0, stride: geometry.planes[i].width, step: 1 }
            }
        })
        .collect();
    let expected = if stored { stored_geometry.planes.len() } else { geometry.planes.len() };
    if layouts.is_empty() || frame.planes.len() != expected {
        return false;
    }
    let (w, h) = (info.width, info.height);
    let (bw, bh) = (w / CELL, h / CELL);
    if bw < PATCH || bh < PATCH {
        return false;
    }
    // Each cell's samples in two halves (alternate rows read): the difference of the halves'
    // means is the noise of a cell mean without the picture's (texture only adds to it).
    let half = CELL * (CELL / SUBSAMPLE) * layouts.len() / 2;
    let to_mean = 1.0 / (half as f64 * scale);
    let (means, squares) = (&mut out.means, scratch);
    means.resize(bw * bh, 0.0);
    squares.resize(bw * bh, 0.0);
    means.par_chunks_mut(bw).zip(squares.par_chunks_mut(bw)).enumerate().for_each(|(by, (means, squares))| {
        // The row of cells at once: sums of the halves per cell.
        let mut sums = vec![[0u64; 2]; bw];
        for l in &layouts {
            match &frame.planes[l.plane].samples {
                Samples::U8(v) if l.step == 1 => add_cell_rows_u8(v, l, by, &mut sums),
                Samples::U8(v) => add_cell_rows(v, l, by, &mut sums),
                Samples::U16(v) => add_cell_rows(v, l, by, &mut sums),
            }
        }
        for ((s, m), q) in sums.iter().zip(means.iter_mut()).zip(squares.iter_mut()) {
            let (a, b) = (s[0] as f64 * to_mean, s[1] as f64 * to_mean);
            *m = (a + b) / 2.0;
            *q = (a - b) * (a - b);
        }
    });
    // Var(cell mean) = Var(a - b) / 4; the median of a squared normal variable is 0.455 of its
    // variance, and the median leaves out the cells whose halves differ by texture. One cell in
    // MEDIAN_STEP is enough for it (and several times cheaper).
    let kept = squares.len().div_ceil(MEDIAN_STEP);
    for i in 0..kept {
        squares[i] = squares[i * MEDIAN_STEP];
    }
    squares.truncate(kept);
    let mid = squares.len() / 2;
    let (_, median, _) = squares.select_nth_unstable_by(mid, f64::total_cmp);
    let noise = *median / 0.455 / 4.0;
    (out.bw, out.bh, out.noise) = (bw, bh, noise);
    true
}

/// Adds the samples of cell row `by` of the component at `l` to each cell's two halves: every
/// column of one row in `SUBSAMPLE`, alternate rows read to alternate halves.
fn add_cell_rows<T: Copy + Into<u64>>(samples: &[T], l: &Layout, by: usize, sums: &mut [[u64; 2]]) {
    for (k, y) in (by * CELL..(by + 1) * CELL).step_by(SUBSAMPLE).enumerate() {
        let row = &samples[l.offset + y * l.stride..];
        for (cx, s) in sums.iter_mut().enumerate() {
            s[k % 2] += (0..CELL).map(|i| row[(cx * CELL + i) * l.step].into()).sum::<u64>();
        }
    }
}

/// [`add_cell_rows`] for 8-bit samples side by side: a cell's row of 8 bytes summed as one word.
fn add_cell_rows_u8(samples: &[u8], l: &Layout, by: usize, sums: &mut [[u64; 2]]) {
    const _: () = assert!(CELL == 8, "one 64-bit word per cell row");
    const EVEN: u64 = 0x00FF_00FF_00FF_00FF;
    for (k, y) in (by * CELL..(by + 1) * CELL).step_by(SUBSAMPLE).enumerate() {
        let start = l.offset + y * l.stride;
        let row = &samples[start..start + sums.len() * CELL];
        for (s, bytes) in sums.iter_mut().zip(row.chunks_exact(CELL)) {
            let v = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            // Four 16-bit lanes of byte pairs, then their sum in the top lane.
            let pairs = (v & EVEN) + ((v >> 8) & EVEN);
            s[k % 2] += pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48;
        }
    }
}

/// The fraction of `next`'s patches that changed since `prev` (see the module doc); 0 when the two
/// are of different sizes.
pub fn changed_fraction(prev: &Signature, next: &Signature) -> f64 {
    if (prev.bw, prev.bh) != (next.bw, next.bh) {
        return 0.0;
    }
    // The mean squared difference of a patch's cells holds the noise of both frames' cell means on
    // top of the picture's change.
    let threshold = MIN_CHANGE * MIN_CHANGE + prev.noise + next.noise;
    let (bw, bh) = (next.bw, next.bh);
    let cells = (PATCH * PATCH) as f64;
    let (px_n, py_n) = (bw / PATCH, bh / PATCH);
    let changed: usize = (0..py_n)
        .into_par_iter()
        .map(|py| {
            let mut changed = 0;
            for px in 0..px_n {
                let (x0, y0) = (px * PATCH, py * PATCH);
                let ssd = |sy: usize, sx: usize| -> f64 {
                    let mut ssd = 0.0;
                    for i in 0..PATCH {
                        for j in 0..PATCH {
                            let d = next.means[(y0 + i) * bw + x0 + j] - prev.means[(sy + i) * bw + sx + j];
                            ssd += d * d;
                        }
                    }
                    ssd
                };
                // Unchanged as soon as one match is close enough: most patches of a shot match
                // in place, so the search runs out only on changed ones.
                let limit = threshold * cells;
                let found = ssd(y0, x0) <= limit
                    || (y0.saturating_sub(REACH)..=(y0 + REACH).min(bh - PATCH)).any(|sy| (x0.saturating_sub(REACH)..=(x0 + REACH).min(bw - PATCH)).any(|sx| ssd(sy, sx) <= limit));
                changed += usize::from(!found);
            }
            changed
        })
        .sum();
    changed as f64 / (px_n * py_n) as f64
}

/// The cuts of a stream, one frame after the other.
#[derive(Debug, Clone, Default)]
pub struct CutDetector {
    previous: Option<Signature>,
    /// Memory reused from frame to frame: the next signature, the test's scratch.
    spare: Signature,
    scratch: Vec<f64>,
}

impl CutDetector {
    /// Takes the next frame (`frame` of `info`, as [`measure`] reads it; not measurable: never a
    /// cut); true when it starts a new shot: at least `fraction` of its patches changed
    /// (`fraction` 0: never).
    pub fn observe_frame(&mut self, frame: &PlanarFrame, info: &VideoInfo, geometry: &Geometry, stored: bool, fraction: f32) -> bool {
        if !measure(frame, info, geometry, stored, &mut self.spare, &mut self.scratch) {
            self.previous = None;
            return false;
        }
        let cut = match &self.previous {
            Some(p) if fraction > 0.0 => changed_fraction(p, &self.spare) >= fraction as f64,
            _ => false,
        };
        // The signature before goes on as the spare.
        let next = std::mem::take(&mut self.spare);
        if let Some(before) = self.previous.replace(next) {
            self.spare = before;
        }
        cut
    }

    /// A new stream: the next frame has nothing before it.
    pub fn reset(&mut self) {
        self.previous = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;

    /// A hashed lattice value in [-1, 1].
    fn lattice(seed: u64, x: i64, y: i64) -> f64 {
        let mut h = seed.wrapping_mul(0x9E3779B97F4A7C15) ^ (x as u64).wrapping_mul(0xC2B2AE3D27D4EB4F) ^ (y as u64).wrapping_mul(0x165667B19E3779F9);
        h ^= h >> 29;
        h = h.wrapping_mul(0xBF58476D1CE4E5B9);
        h ^= h >> 32;
        (h >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// Value noise of `seed`: lattice values every `scale` samples, interpolated bilinearly.
    fn texture(seed: u64, u: f64, v: f64, scale: f64) -> f64 {
        let (fx, fy) = (u / scale, v / scale);
        let (ix, iy) = (fx.floor() as i64, fy.floor() as i64);
        let (tx, ty) = (fx - ix as f64, fy - iy as f64);
        let l = |dx, dy| lattice(seed, ix + dx, iy + dy);
        (l(0, 0) * (1.0 - tx) + l(1, 0) * tx) * (1.0 - ty) + (l(0, 1) * (1.0 - tx) + l(1, 1) * tx) * ty
    }

    /// An I420 frame of scene `seed` (texture at two scales), moved by `shift` samples, brighter
    /// by `brightness`, with noise of deviation about `sigma` (a sum of uniforms).
    fn frame(info: &VideoInfo, seed: u64, shift: usize, brightness: f64, sigma: f64, noise_seed: u64) -> PlanarFrame {
        let g = Geometry::from_video_info(info);
        let mut f = PlanarFrame::zeroed(&g);
        let mut rng = noise_seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
        let mut uniform = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        for (p, plane) in f.planes.iter_mut().enumerate() {
            let sub = if p == 0 { 1.0 } else { 2.0 };
            for y in 0..plane.height {
                for x in 0..plane.width {
                    let (u, v) = (x as f64 * sub + shift as f64, y as f64 * sub);
                    let clean = 120.0 + 70.0 * texture(seed * 3 + p as u64, u, v, 40.0) + 30.0 * texture(seed * 3 + p as u64 + 100, u, v, 7.0) + brightness;
                    let n: f64 = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
                    let value = (clean + sigma * n).round().clamp(0.0, 255.0);
                    plane.samples.set(y * plane.width + x, value as u32);
                }
            }
        }
        f
    }

    fn sig(info: &VideoInfo, f: &PlanarFrame) -> Signature {
        signature(f, info, &Geometry::from_video_info(info), false).expect("measurable")
    }

    #[test]
    fn a_new_scene_is_a_cut_and_motion_noise_and_light_are_not() {
        let info = VideoInfo::new(PixelFormat::I420, 320, 240).unwrap();
        for sigma in [0.0, 10.0, 20.0, 40.0, 60.0] {
            let before = sig(&info, &frame(&info, 1, 0, 0.0, sigma, 1));
            let other = sig(&info, &frame(&info, 4, 0, 0.0, sigma, 2));
            let moved = sig(&info, &frame(&info, 1, 12, 0.0, sigma, 3));
            let brighter = sig(&info, &frame(&info, 1, 0, 8.0, sigma, 4));
            let renoised = sig(&info, &frame(&info, 1, 0, 0.0, sigma, 5));
            let cut = changed_fraction(&before, &other);
            // Measured: 0.86-0.87 up to sigma 10, 0.79 at 20, 0.67 at 40, 0.53 at 60 (the noise
            // hides more).
            assert!(cut > DEFAULT_SCENE_CUT as f64, "sigma {sigma}: another scene changed {cut}");
            for (what, s) in [("moved 12 samples", &moved), ("8 code values brighter", &brighter), ("other noise", &renoised)] {
                let f = changed_fraction(&before, s);
                // Measured: at most 0.06 moved, 0.03 brighter, 0 with other noise.
                assert!(f < 0.1, "sigma {sigma}: {what} changed {f}");
            }
        }
    }

    #[test]
    fn the_detector_reports_the_first_frame_of_each_shot_only() {
        let info = VideoInfo::new(PixelFormat::I420, 160, 96).unwrap();
        let g = Geometry::from_video_info(&info);
        let scenes = [1, 1, 1, 4, 4, 2, 2];
        let frames: Vec<PlanarFrame> = scenes.iter().enumerate().map(|(i, &s)| frame(&info, s, i, 0.0, 10.0, i as u64)).collect();
        let mut d = CutDetector::default();
        let cuts: Vec<bool> = frames.iter().map(|f| d.observe_frame(f, &info, &g, false, DEFAULT_SCENE_CUT)).collect();
        assert_eq!(cuts, [false, false, false, true, false, true, false]);
        // Off: never a cut.
        let mut off = CutDetector::default();
        assert!(frames.iter().all(|f| !off.observe_frame(f, &info, &g, false, 0.0)));
        // After a reset the next frame has nothing before it.
        d.reset();
        assert!(!d.observe_frame(&frame(&info, 3, 0, 0.0, 10.0, 9), &info, &g, false, DEFAULT_SCENE_CUT));
        // A frame too small to measure is never a cut, and the one after it has nothing before it.
        let tiny = VideoInfo::new(PixelFormat::I420, 16, 16).unwrap();
        assert!(!d.observe_frame(&frame(&tiny, 1, 0, 0.0, 0.0, 1), &tiny, &Geometry::from_video_info(&tiny), false, DEFAULT_SCENE_CUT));
        assert!(!d.observe_frame(&frames[5], &info, &g, false, DEFAULT_SCENE_CUT));
    }

    #[test]
    fn stored_and_planar_frames_give_one_signature() {
        let info = VideoInfo::new(PixelFormat::I420, 64, 48).unwrap();
        let f = frame(&info, 2, 0, 0.0, 5.0, 1);
        let planar = sig(&info, &f);
        // I420 is stored as its planes: the same samples read either way.
        let stored = signature(&f, &info, &Geometry::from_video_info(&info), true).unwrap();
        assert_eq!(planar, stored);
        assert_eq!((planar.bw, planar.bh), (8, 6));
        // Smaller than a patch: nothing to compare.
        let tiny = VideoInfo::new(PixelFormat::I420, 16, 64).unwrap();
        assert!(signature(&frame(&tiny, 1, 0, 0.0, 0.0, 1), &tiny, &Geometry::from_video_info(&tiny), false).is_none());
    }
}
