//! Helpers shared by the backend-vs-reference integration tests (`cpu_vs_reference`,
//! `cuda_vs_reference`): printed random seeds, random test frames, running a `Denoiser` over a
//! stream with poisoned output frames, and comparing two backends' outputs sample by sample.
//!
//! Each test file includes this with `mod common;`; not every file uses every helper.
#![allow(dead_code)]

pub mod clips;
pub mod sr;

use std::fmt::Debug;
use std::time::{SystemTime, UNIX_EPOCH};

use nlmdenoise::device::cuda;
use nlmdenoise::format::ComponentKind;
use nlmdenoise::{Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::Rng;

/// The seed of this test: `NLM_TEST_SEED` when set, else the clock. Printed (stderr) so that a
/// failure can be rerun with `NLM_TEST_SEED=<seed>`.
pub fn seed() -> u64 {
    let s = std::env::var("NLM_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1));
    eprintln!("NLM_TEST_SEED={s}");
    s
}

/// Reports `test` as skipped: a visible "SKIPPED" line (stdout and stderr) and, when
/// scripts/test.sh set `NLMDENOISE_TEST_SKIP_LOG`, a line in that file, so that its closing count
/// shows the test as skipped rather than passed (libtest has no runtime skip).
pub fn skip(test: &str, why: &str) {
    println!("SKIPPED: {test}: {why}");
    eprintln!("SKIPPED: {test}: {why}");
    if let Some(path) = std::env::var_os("NLMDENOISE_TEST_SKIP_LOG") {
        append_skip_line(std::path::Path::new(&path), test, why);
    }
}

/// Appends "test: why" to the skip log in one write: tests skip from several threads at once, and
/// `writeln!` on a file writes each piece of its format apart, so their lines interleaved.
pub fn append_skip_line(path: &std::path::Path, test: &str, why: &str) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(format!("{test}: {why}\n").as_bytes());
    }
}

/// True when a CUDA device and NVRTC can be used; otherwise reports `test` as skipped and
/// returns false.
pub fn gpu_or_skip(test: &str) -> bool {
    if cuda::available() {
        return true;
    }
    skip(test, "no usable CUDA device/driver/NVRTC");
    false
}

/// The parameters most cases start from.
pub fn base() -> Params {
    Params { search_radius: 2, patch_radius: 1, temporal_past: 0, temporal_future: 0, strength: 10.0, chroma_strength: 14.0, ..Params::default() }
}

#[derive(Clone, Copy, Debug)]
pub enum Content {
    /// Uniform random samples over the whole range (mostly the exact fallback path).
    Uniform,
    /// A smooth gradient plus noise of +-`amp` 8-bit code values (mostly the fast path).
    Smooth { amp: i32 },
}

/// Frequencies of the `Content::Smooth` gradient: radians per column (`x`), per row (`y`) and per
/// frame (`t`). Each test file keeps its own, so that its inputs for a given seed stay the same.
#[derive(Clone, Copy, Debug)]
pub struct Waves {
    pub x: f64,
    pub y: f64,
    pub t: f64,
}

/// One backend-vs-reference case: a stream of `frames` random frames of `content`.
#[derive(Debug, Clone)]
pub struct Case {
    pub format: PixelFormat,
    pub width: usize,
    pub height: usize,
    pub params: Params,
    pub frames: usize,
    pub content: Content,
    /// Bytes of row padding of the input frames (random garbage).
    pub extra_in: usize,
    /// Bytes of row padding of the output frames (poisoned; must stay so).
    pub extra_out: usize,
    /// `BackendOptions::pipeline_depth` of the backend under test (0: its default).
    pub depth: usize,
    /// After that many frames, switch to those parameters (`Denoiser::set_params`).
    pub retune: Option<(usize, Params)>,
}

/// Three frames of smooth content (noise +-12), packed, default pipeline depth, no retune. No
/// scene-cut test: the comparisons want every window full whatever the content (random frames
/// are all cuts to it); tests/engine.rs covers the cuts.
pub fn case(format: PixelFormat, width: usize, height: usize, params: Params) -> Case {
    let params = Params { scene_cut: 0.0, ..params };
    Case { format, width, height, params, frames: 3, content: Content::Smooth { amp: 12 }, extra_in: 0, extra_out: 0, depth: 0, retune: None }
}

/// Patch-wise aggregation cases every backend is checked on against the reference: odd and tiny
/// sizes, a frame of several bands or tiles, each chroma mode, deep formats and both weightings,
/// a temporal window with future frames, centre weights 0-3.
pub fn aggregation_cases() -> Vec<Case> {
    use nlmdenoise::{ChromaMode, Weighting};
    let mut cases = Vec::new();
    for (w, h) in [(1, 1), (3, 5), (17, 9), (33, 20)] {
        for (patch_radius, r) in [(1, 1), (2, 2)] {
            cases.push(case(PixelFormat::I420, w, h, Params { patch_radius, aggregation_radius: r, wref: 2.0, ..base() }));
        }
    }
    let p = Params { patch_radius: 3, aggregation_radius: 2, sigma: Some(5.0), strength: 12.0, chroma_strength: 16.0, ..base() };
    cases.push(Case { frames: 2, ..case(PixelFormat::GRAY8, 90, 70, p) });
    for (fmt, chroma_mode) in [(PixelFormat::I420, ChromaMode::LumaGuided), (PixelFormat::Y444, ChromaMode::Joint), (PixelFormat::RGBA, ChromaMode::Independent)] {
        cases.push(case(fmt, 17, 9, Params { chroma_mode, aggregation_radius: 1, strength: 15.0, ..base() }));
    }
    for fmt in [PixelFormat::I420_10LE, PixelFormat::GRAY16_LE] {
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let p = Params { weighting, patch_radius: 2, aggregation_radius: 2, wref: 0.0, strength: 14.0, chroma_strength: 14.0, ..base() };
            cases.push(case(fmt, 33, 20, p));
        }
    }
    let p = Params { temporal_past: 2, temporal_future: 1, patch_radius: 2, aggregation_radius: 2, wref: 3.0, ..base() };
    cases.push(Case { frames: 5, ..case(PixelFormat::I420, 33, 20, p) });
    cases
}

/// Two GRAY8 48 x 24 frames whose patch weights differ by many orders of magnitude side by side:
/// a flat left half (weights near 1) beside random samples (weights near 1e-12 at strength 20).
pub fn tiny_weight_frames(rng: &mut SmallRng) -> Vec<OwnedFrame> {
    let info = VideoInfo::new(PixelFormat::GRAY8, 48, 24).unwrap();
    (0..2)
        .map(|_| {
            let noise: Vec<u32> = (0..48 * 24).map(|_| rng.random_range(0..256)).collect();
            frame_from(info, |_, x, y| if x < 24 { 100 + (x + y) as u32 % 3 } else { noise[y * 48 + x] })
        })
        .collect()
}

/// The patch-wise aggregation settings `tiny_weight_frames` is checked with.
pub fn tiny_weight_cases() -> Vec<Case> {
    [(1, 1.0), (2, 0.0), (2, 2.0)]
        .into_iter()
        .map(|(aggregation_radius, wref)| {
            let p = Params { patch_radius: 2, aggregation_radius, wref, strength: 20.0, temporal_past: 1, ..base() };
            Case { frames: 2, ..case(PixelFormat::GRAY8, 48, 24, p) }
        })
        .collect()
}

/// The input frames of a case, drawn from `rng`.
pub fn inputs(c: &Case, waves: Waves, rng: &mut SmallRng) -> Vec<OwnedFrame> {
    let info = VideoInfo::new(c.format, c.width, c.height).unwrap();
    (0..c.frames).map(|i| make_frame(info, c.extra_in, c.content, waves, i, rng)).collect()
}

/// Significant-bit range of stored samples: (largest value in significant bits, left shift of
/// the stored sample).
pub fn depth(format: PixelFormat) -> (u32, u32) {
    match format {
        PixelFormat::I420_10LE | PixelFormat::I422_10LE => (1023, 0),
        PixelFormat::P010_10LE => (1023, 6),
        PixelFormat::GRAY16_LE | PixelFormat::Y444_16LE => (65535, 0),
        _ => (255, 0),
    }
}

/// One 8-bit code value in stored units (2^(bits-8), shifted like the samples; 1 for 8-bit).
pub fn tolerance(format: PixelFormat) -> u32 {
    let (maxv, shift) = depth(format);
    (((maxv + 1) / 256) << shift).max(1)
}

/// A frame with `extra` bytes of row padding per memory plane; every byte random first (so padding
/// holds garbage), then every component sample drawn from `content`.
pub fn make_frame(info: VideoInfo, extra: usize, content: Content, waves: Waves, frame_no: usize, rng: &mut SmallRng) -> OwnedFrame {
    let fi = info.format.info();
    let strides: Vec<usize> = info.packed_strides().iter().map(|s| s + extra).collect();
    let mut f = OwnedFrame::with_strides(info, &strides).unwrap();
    for p in &mut f.planes {
        rng.fill(&mut p[..]);
    }
    let (maxv, shift) = depth(info.format);
    let scale = (maxv + 1) as f64 / 256.0;
    for (ci, c) in fi.components.iter().enumerate() {
        let (w, h) = (info.width.div_ceil(c.sub_x), info.height.div_ceil(c.sub_y));
        for y in 0..h {
            for x in 0..w {
                let v = match content {
                    Content::Uniform => rng.random_range(0..=maxv),
                    Content::Smooth { amp } => {
                        let base = 40.0 + 150.0 * ((x as f64 * waves.x + ci as f64).sin() * 0.5 + 0.5) * ((y as f64 * waves.y + frame_no as f64 * waves.t).cos() * 0.5 + 0.5);
                        let n = rng.random_range(-amp..=amp) as f64;
                        (((base + n) * scale).round().clamp(0.0, maxv as f64)) as u32
                    }
                };
                let v = v << shift;
                let i = y * strides[c.memory_plane] + c.offset + x * c.step;
                let plane = &mut f.planes[c.memory_plane];
                if fi.bytes_per_sample == 1 {
                    plane[i] = v as u8;
                } else {
                    plane[i..i + 2].copy_from_slice(&(v as u16).to_le_bytes());
                }
            }
        }
    }
    f
}

/// Every component sample of a frame, per component.
pub fn samples(f: &OwnedFrame) -> Vec<Vec<u32>> {
    let fi = f.info.format.info();
    fi.components
        .iter()
        .map(|c| {
            let (w, h) = (f.info.width.div_ceil(c.sub_x), f.info.height.div_ceil(c.sub_y));
            let mut out = Vec::with_capacity(w * h);
            for y in 0..h {
                for x in 0..w {
                    let i = y * f.strides[c.memory_plane] + c.offset + x * c.step;
                    let p = &f.planes[c.memory_plane];
                    out.push(if fi.bytes_per_sample == 1 { p[i] as u32 } else { u16::from_le_bytes([p[i], p[i + 1]]) as u32 });
                }
            }
            out
        })
        .collect()
}

/// Pushes every input (tagged with its index) through `d`, popping after each push and after
/// `finish_stream`, into output frames with `extra_out` bytes of row padding whose every byte is
/// `poison` before the pop. `retune`: after that many frames, switch to those parameters.
/// Checks that each frame comes out exactly once; returns the outputs in input order.
pub fn denoise(mut d: Denoiser<usize>, inputs: &[OwnedFrame], extra_out: usize, poison: u8, retune: Option<(usize, Params)>) -> Vec<OwnedFrame> {
    let info = inputs[0].info;
    let strides: Vec<usize> = info.packed_strides().iter().map(|s| s + extra_out).collect();
    let mut outs: Vec<Option<OwnedFrame>> = vec![None; inputs.len()];
    let pop_all = |d: &mut Denoiser<usize>, outs: &mut Vec<Option<OwnedFrame>>| loop {
        let mut o = OwnedFrame::with_strides(info, &strides).unwrap();
        for p in &mut o.planes {
            p.fill(poison);
        }
        match d.pop(&mut o.as_mut()).unwrap() {
            Some(tag) => {
                assert!(outs[tag].is_none(), "frame {tag} popped twice");
                outs[tag] = Some(o);
            }
            None => break,
        }
    };
    for (i, f) in inputs.iter().enumerate() {
        if let Some((at, p)) = retune {
            if i == at {
                d.set_params(p).unwrap();
            }
        }
        d.push(&f.as_ref(), i).unwrap();
        pop_all(&mut d, &mut outs);
    }
    d.finish_stream().unwrap();
    pop_all(&mut d, &mut outs);
    outs.into_iter().enumerate().map(|(i, o)| o.unwrap_or_else(|| panic!("frame {i} never came out"))).collect()
}

/// Sample statistics of one backend's outputs against the reference's.
#[derive(Clone, Copy, Debug, Default)]
pub struct Diff {
    /// Samples compared (every component, pass-through ones included).
    pub total: usize,
    /// Samples whose difference exceeds the `notable` threshold given to `compare`.
    pub differing: usize,
    /// Largest difference of any sample, in stored units.
    pub max: u32,
}

/// Compares `outputs` (of the backend called `name`) with `reference` sample by sample: asserts
/// that pass-through components equal the `inputs`, and that every sample differing by more than
/// `notable` stored units differs by at most `tol`. `case` labels the failure messages. With
/// `NLM_TEST_VERBOSE` set, every differing sample is printed.
pub fn compare(case: &dyn Debug, name: &str, reference: &[OwnedFrame], outputs: &[OwnedFrame], inputs: &[OwnedFrame], tol: u32, notable: u32) -> Diff {
    let verbose = std::env::var_os("NLM_TEST_VERBOSE").is_some();
    let mut diff = Diff::default();
    for (i, ((r, g), input)) in reference.iter().zip(outputs).zip(inputs).enumerate() {
        let fi = input.info.format.info();
        let (rs, gs, is) = (samples(r), samples(g), samples(input));
        for (ci, comp) in fi.components.iter().enumerate() {
            if comp.kind == ComponentKind::PassThrough {
                assert_eq!(gs[ci], is[ci], "{case:?}: frame {i} component {ci} (pass-through) changed");
            }
            for (k, (&a, &b)) in rs[ci].iter().zip(&gs[ci]).enumerate() {
                diff.total += 1;
                diff.max = diff.max.max(a.abs_diff(b));
                if a.abs_diff(b) > notable {
                    diff.differing += 1;
                    if verbose {
                        eprintln!("frame {i} component {ci} sample {k}: reference {a}, {name} {b}");
                    }
                    assert!(a.abs_diff(b) <= tol, "{case:?}: frame {i} component {ci} sample {k}: reference {a}, {name} {b} (tolerance {tol})");
                }
            }
        }
    }
    diff
}

/// Bytes outside the samples (row padding) of the outputs keep the `poison` pattern, in the
/// reference's outputs and the tested backend's alike.
pub fn assert_padding_kept(case: &dyn Debug, reference: &[OwnedFrame], outputs: &[OwnedFrame], poison: u8) {
    for (i, (r, g)) in reference.iter().zip(outputs).enumerate() {
        let fi = g.info.format.info();
        for (p, (rp, gp)) in r.planes.iter().zip(&g.planes).enumerate() {
            let row = fi.memory_plane_row_bytes(p, g.info.width);
            for (y, (ra, ga)) in rp.chunks(r.strides[p]).zip(gp.chunks(g.strides[p])).enumerate() {
                assert_eq!(&ra[row.min(ra.len())..], &ga[row.min(ga.len())..], "{case:?}: frame {i} plane {p} row {y} padding");
                assert!(ga[row.min(ga.len())..].iter().all(|&b| b == poison), "{case:?}: frame {i} plane {p} row {y} padding not poisoned");
            }
        }
    }
}

/// `n` frames of `info` with every byte random (tests that compare two paths byte for byte).
pub fn random_frames(info: VideoInfo, n: usize, rng: &mut SmallRng) -> Vec<OwnedFrame> {
    (0..n)
        .map(|_| {
            let mut f = OwnedFrame::new(info);
            for p in &mut f.planes {
                rng.fill(p.as_mut_slice());
            }
            f
        })
        .collect()
}

/// One small parameter set per kind of job the CUDA backend's frame paths must carry (tests that
/// compare two ways of moving frames: cuda_stored, cuda_device_frames): NLM on every plane, on
/// luma only (chroma passed through), with the noise estimated; BM3D; super-resolution x2.
pub fn frame_path_cases() -> Vec<(&'static str, Params)> {
    use nlmdenoise::{Algorithm, Bm3dParams, Bm3dProfile, PlaneSelection, SrParams};
    // No scene-cut test: random frames are all cuts to it (tests/cuda_device_frames.rs has its own
    // scene-cut case).
    let nlm = Params { search_radius: 2, patch_radius: 1, temporal_past: 1, temporal_future: 1, strength: 12.0, chroma_strength: 14.0, scene_cut: 0.0, ..Params::default() };
    let bm3d = Bm3dParams { profile: Bm3dProfile::Fast, steps: Some(2), search_radius: Some(4), block_step: Some(3), seed_radius: Some(2), ..Default::default() };
    vec![
        ("nlm", nlm),
        ("nlm luma only", Params { planes: PlaneSelection::Luma, ..nlm }),
        ("nlm auto sigma", Params { sigma_auto: true, ..nlm }),
        ("bm3d", Params { algorithm: Algorithm::Bm3d, sigma: Some(20.0), temporal_past: 1, bm3d, scene_cut: 0.0, ..Params::default() }),
        (
            "sr x2",
            Params {
                algorithm: Algorithm::NlmSr,
                search_radius: 2,
                patch_radius: 1,
                temporal_past: 1,
                temporal_future: 1,
                strength: 3.0,
                chroma_strength: 4.0,
                sr: SrParams { scale: 2, ..SrParams::default() },
                scene_cut: 0.0,
                ..Params::default()
            },
        ),
    ]
}

/// Pushes `old` through `d` (popping what is ready), resets it (a flush), then pushes `new` tagged
/// 100, 101, ... and finishes the stream: the old stream's frames popped before the reset, and
/// the new stream's outputs with their tags.
pub fn stream_reset_stream(d: &mut Denoiser<usize>, old: &[OwnedFrame], new: &[OwnedFrame]) -> (usize, Vec<(usize, OwnedFrame)>) {
    let info = old[0].info;
    let mut out = OwnedFrame::new(info);
    let mut before = 0;
    for (i, f) in old.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
        while d.pop(&mut out.as_mut()).unwrap().is_some() {
            before += 1;
        }
    }
    d.reset();
    let mut got: Vec<(usize, OwnedFrame)> = Vec::new();
    let drain = |d: &mut Denoiser<usize>, got: &mut Vec<(usize, OwnedFrame)>| loop {
        let mut o = OwnedFrame::new(info);
        match d.pop(&mut o.as_mut()).unwrap() {
            Some(tag) => got.push((tag, o)),
            None => break,
        }
    };
    for (i, f) in new.iter().enumerate() {
        d.push(&f.as_ref(), 100 + i).unwrap();
        drain(d, &mut got);
    }
    d.finish_stream().unwrap();
    drain(d, &mut got);
    (before, got)
}

/// A frame whose plane `p` holds `f(p, x, y)` (in the plane's own coordinates).
pub fn frame_from(info: VideoInfo, mut f: impl FnMut(usize, usize, usize) -> u32) -> OwnedFrame {
    let geometry = nlmdenoise::planar::Geometry::from_video_info(&info);
    let mut planar = nlmdenoise::planar::PlanarFrame::zeroed(&geometry);
    for (p, plane) in planar.planes.iter_mut().enumerate() {
        for y in 0..plane.height {
            for x in 0..plane.width {
                plane.samples.set(y * plane.width + x, f(p, x, y));
            }
        }
    }
    let mut frame = OwnedFrame::new(info);
    nlmdenoise::convert::pack(&planar, &mut frame.as_mut()).unwrap();
    frame
}

/// A standard normal sample (Box-Muller).
pub fn gaussian(rng: &mut SmallRng) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>();
    let v: f64 = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `frames` noisy 8-bit frames of scene 0 or 1 (a scene-cut test's two shots): different content
/// and brightness below a flat grey band both share (where patches match across the cut), each
/// moving a sample per frame, noise of sigma 10.
pub fn shot(info: VideoInfo, scene: usize, frames: usize, rng: &mut SmallRng) -> Vec<OwnedFrame> {
    (0..frames)
        .map(|t| {
            frame_from(info, |p, x, y| {
                let band = if p == 0 { 16 } else { 8 };
                let (x, y) = ((x + t) as f64, y as f64);
                let clean = match (y < band as f64, scene) {
                    (true, _) => 128.0,
                    (false, 0) => 150.0 + 70.0 * (0.21 * x + p as f64).sin() * (0.13 * y).cos(),
                    (false, _) => 60.0 + 40.0 * (0.5 * x + 0.3 * y).sin() + 0.4 * y,
                };
                (clean + 10.0 * gaussian(rng)).round().clamp(0.0, 255.0) as u32
            })
        })
        .collect()
}
