//! The fast CPU backend against the f64 reference, through the public `Denoiser` API, on fresh
//! random inputs. The seed is printed; rerun a failure with `NLM_TEST_SEED=<seed>`.
//!
//! Tolerance (see the `cpu` backend's module doc): 8-bit outputs differ by at most 1 code value;
//! deeper formats by at most one 8-bit code value in stored units (2^(bits-8)). Differences must
//! also be rare.

use std::time::{SystemTime, UNIX_EPOCH};

use nlmdenoise::{BackendKind, BackendOptions, ChromaMode, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo, Weighting};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const POISON: u8 = 0xA7;

fn seed() -> u64 {
    let s = std::env::var("NLM_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    eprintln!("NLM_TEST_SEED={s}");
    s
}

#[derive(Clone, Copy, Debug)]
enum Content {
    /// Uniform random samples over the whole range (mostly the exact fallback path).
    Uniform,
    /// A smooth gradient plus noise of +-`amp` 8-bit code values (mostly the fast path).
    Smooth { amp: i32 },
}

/// Significant-bit range of stored samples: (max 8-bit-scaled value, left shift).
fn depth(format: PixelFormat) -> (u32, u32) {
    match format {
        PixelFormat::I420_10LE => (1023, 0),
        PixelFormat::P010_10LE => (1023, 6),
        PixelFormat::GRAY16_LE | PixelFormat::Y444_16LE => (65535, 0),
        _ => (255, 0),
    }
}

/// A frame with `extra` bytes of row padding per memory plane; every byte random first (so padding
/// holds garbage), then every component sample drawn from `content`.
fn make_frame(info: VideoInfo, extra: usize, content: Content, frame_no: usize, rng: &mut SmallRng) -> OwnedFrame {
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
                        let base = 40.0 + 150.0 * ((x as f64 * 0.31 + ci as f64).sin() * 0.5 + 0.5) * ((y as f64 * 0.23 + frame_no as f64 * 0.2).cos() * 0.5 + 0.5);
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
fn samples(f: &OwnedFrame) -> Vec<Vec<u32>> {
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

fn run(kind: BackendKind, threads: usize, params: Params, inputs: &[OwnedFrame], extra_out: usize) -> Vec<OwnedFrame> {
    let info = inputs[0].info;
    let opts = BackendOptions { kind, threads, ..Default::default() };
    let mut d: Denoiser<usize> = Denoiser::new(info, params, &opts).unwrap();
    if kind == BackendKind::Cpu {
        assert!(d.backend_description().starts_with("cpu ("), "{}", d.backend_description());
    }
    let strides: Vec<usize> = info.packed_strides().iter().map(|s| s + extra_out).collect();
    let mut outs: Vec<Option<OwnedFrame>> = vec![None; inputs.len()];
    let pop_all = |d: &mut Denoiser<usize>, outs: &mut Vec<Option<OwnedFrame>>| loop {
        let mut o = OwnedFrame::with_strides(info, &strides).unwrap();
        for p in &mut o.planes {
            p.fill(POISON);
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
        d.push(&f.as_ref(), i).unwrap();
        pop_all(&mut d, &mut outs);
    }
    d.finish_stream().unwrap();
    pop_all(&mut d, &mut outs);
    outs.into_iter().enumerate().map(|(i, o)| o.unwrap_or_else(|| panic!("frame {i} never came out"))).collect()
}

#[derive(Debug, Clone)]
struct Case {
    format: PixelFormat,
    width: usize,
    height: usize,
    params: Params,
    frames: usize,
    content: Content,
    extra_in: usize,
    extra_out: usize,
}

fn case(format: PixelFormat, width: usize, height: usize, params: Params) -> Case {
    Case { format, width, height, params, frames: 3, content: Content::Smooth { amp: 12 }, extra_in: 0, extra_out: 0 }
}

/// Runs both backends and checks the tolerance; returns (samples, differing samples).
fn check(c: &Case, rng: &mut SmallRng) -> (usize, usize) {
    let info = VideoInfo::new(c.format, c.width, c.height).unwrap();
    let inputs: Vec<OwnedFrame> = (0..c.frames).map(|i| make_frame(info, c.extra_in, c.content, i, rng)).collect();
    let reference = run(BackendKind::Reference, 0, c.params, &inputs, c.extra_out);
    let cpu = run(BackendKind::Cpu, 3, c.params, &inputs, c.extra_out);
    let fi = c.format.info();
    let (maxv, shift) = depth(c.format);
    let tol = (((maxv + 1) / 256) << shift).max(1);
    // Samples counted as differing: any difference for 8- and 10-bit formats; for 16-bit formats
    // (f32 carries about 1e-6 relative error, about 0.1 stored units) more than 1/32 of the tolerance.
    let notable = if tol <= 4 { 0 } else { tol / 32 };
    let (mut total, mut differing, mut max_diff) = (0usize, 0usize, 0u32);
    for (i, ((r, g), input)) in reference.iter().zip(&cpu).zip(&inputs).enumerate() {
        let (rs, gs, is) = (samples(r), samples(g), samples(input));
        for (ci, comp) in fi.components.iter().enumerate() {
            if comp.kind == nlmdenoise::format::ComponentKind::PassThrough {
                assert_eq!(gs[ci], is[ci], "{c:?}: frame {i} component {ci} (pass-through) changed");
            }
            for (k, (&a, &b)) in rs[ci].iter().zip(&gs[ci]).enumerate() {
                total += 1;
                max_diff = max_diff.max(a.abs_diff(b));
                if a.abs_diff(b) > notable {
                    differing += 1;
                    if std::env::var_os("NLM_TEST_VERBOSE").is_some() {
                        eprintln!("frame {i} component {ci} sample {k}: reference {a}, cpu {b}");
                    }
                    assert!(a.abs_diff(b) <= tol, "{c:?}: frame {i} component {ci} sample {k}: reference {a}, cpu {b} (tolerance {tol})");
                }
            }
        }
        // Bytes outside the samples (row padding) keep the poison pattern in both.
        for (p, (rp, gp)) in r.planes.iter().zip(&g.planes).enumerate() {
            let row = fi.memory_plane_row_bytes(p, c.width);
            for (y, (ra, ga)) in rp.chunks(r.strides[p]).zip(gp.chunks(g.strides[p])).enumerate() {
                assert_eq!(&ra[row.min(ra.len())..], &ga[row.min(ga.len())..], "{c:?}: frame {i} plane {p} row {y} padding");
                assert!(ga[row.min(ga.len())..].iter().all(|&b| b == POISON));
            }
        }
    }
    if std::env::var_os("NLM_TEST_VERBOSE").is_some() {
        eprintln!("{:?} {}x{}: {differing} of {total} differ by more than {notable}, max {max_diff}", c.format, c.width, c.height);
    }
    assert!(differing * 100 <= total.max(100), "{c:?}: {differing} of {total} samples differ by more than {notable} (more than 1%)");
    (total, differing)
}

fn base() -> Params {
    Params { search_radius: 2, patch_radius: 1, temporal_past: 0, temporal_future: 0, strength: 10.0, chroma_strength: 14.0, ..Params::default() }
}

#[test]
fn tiny_and_odd_sizes_i420() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (w, h) in [(1, 1), (2, 2), (3, 5), (17, 9), (33, 20)] {
        for content in [Content::Uniform, Content::Smooth { amp: 12 }] {
            let c = Case { content, ..case(PixelFormat::I420, w, h, base()) };
            check(&c, &mut rng);
        }
    }
}

#[test]
fn search_and_patch_larger_than_the_frame() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (w, h) in [(1, 1), (3, 5), (2, 2)] {
        let p = Params { search_radius: 6, patch_radius: 3, strength: 30.0, chroma_strength: 30.0, ..base() };
        check(&case(PixelFormat::I420, w, h, p), &mut rng);
    }
    let p = Params { search_radius: 12, patch_radius: 7, strength: 20.0, ..base() };
    check(&Case { frames: 2, ..case(PixelFormat::GRAY8, 9, 7, p) }, &mut rng);
}

#[test]
fn strided_padded_frames() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for fmt in [PixelFormat::I420, PixelFormat::NV12, PixelFormat::RGBA, PixelFormat::P010_10LE] {
        let c = Case { extra_in: 13, extra_out: 7, ..case(fmt, 17, 9, base()) };
        check(&c, &mut rng);
    }
}

#[test]
fn luma_guided_chroma() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (fmt, w, h) in [(PixelFormat::I420, 33, 20), (PixelFormat::I420, 17, 9), (PixelFormat::Y42B, 17, 9), (PixelFormat::NV12, 3, 5)] {
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let p = Params { chroma_mode: ChromaMode::LumaGuided, weighting, strength: if weighting == Weighting::Bisquare { 16.0 } else { 10.0 }, ..base() };
            check(&case(fmt, w, h, p), &mut rng);
        }
    }
    // No overlap between the guide rows of neighbouring chroma rows (patch 1x1, step 2).
    let p = Params { chroma_mode: ChromaMode::LumaGuided, patch_radius: 0, ..base() };
    check(&case(PixelFormat::I420, 17, 9, p), &mut rng);
}

#[test]
fn joint_y444_and_rgba() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let p = Params { chroma_mode: ChromaMode::Joint, sigma: Some(4.0), ..base() };
    check(&case(PixelFormat::Y444, 33, 20, p), &mut rng);
    check(&case(PixelFormat::Y444, 3, 5, p), &mut rng);
    for weighting in [Weighting::Welsch, Weighting::Bisquare] {
        let p = Params { weighting, strength: 15.0, ..base() };
        check(&case(PixelFormat::RGBA, 33, 20, p), &mut rng);
        check(&Case { content: Content::Uniform, ..case(PixelFormat::RGBA, 17, 9, Params { strength: 60.0, ..p }) }, &mut rng);
    }
}

#[test]
fn deep_formats() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for fmt in [PixelFormat::GRAY16_LE, PixelFormat::P010_10LE, PixelFormat::I420_10LE] {
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let p = Params { weighting, strength: 14.0, chroma_strength: 14.0, ..base() };
            check(&case(fmt, 33, 20, p), &mut rng);
            check(&case(fmt, 3, 5, p), &mut rng);
        }
    }
}

#[test]
fn weightings_sigma_and_wref() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for weighting in [Weighting::Welsch, Weighting::Bisquare] {
        for wref in [0.0, 1.0, 2.0] {
            for sigma in [None, Some(5.0)] {
                let p = Params { weighting, wref, sigma, strength: 12.0, chroma_strength: 20.0, ..base() };
                check(&case(PixelFormat::I420, 17, 9, p), &mut rng);
            }
        }
    }
    // Strengths far below the differences: every sample takes the exact path, or keeps its input.
    for weighting in [Weighting::Welsch, Weighting::Bisquare] {
        let p = Params { weighting, wref: 0.0, strength: 0.5, chroma_strength: 0.5, ..base() };
        check(&Case { content: Content::Uniform, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
    }
}

#[test]
fn temporal_window() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let p = Params { temporal_past: 2, temporal_future: 1, ..base() };
    check(&Case { frames: 6, ..case(PixelFormat::I420, 33, 20, p) }, &mut rng);
    let p = Params { temporal_past: 2, temporal_future: 1, chroma_mode: ChromaMode::LumaGuided, weighting: Weighting::Bisquare, strength: 18.0, ..base() };
    check(&Case { frames: 5, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
    let p = Params { temporal_past: 2, temporal_future: 1, wref: 2.0, ..base() };
    check(&Case { frames: 5, ..case(PixelFormat::RGBA, 17, 9, p) }, &mut rng);
    check(&Case { frames: 4, ..case(PixelFormat::P010_10LE, 17, 9, p) }, &mut rng);
    let p = Params { temporal_past: 1, temporal_future: 0, search_radius: 0, ..base() };
    check(&Case { frames: 4, ..case(PixelFormat::I420, 3, 5, p) }, &mut rng);
}

#[test]
fn default_params_larger_frame() {
    let mut rng = SmallRng::seed_from_u64(seed());
    // Several bands and column tiles of the CPU backend (bands are 32 rows, tiles 256 columns).
    let p = Params { search_radius: 3, patch_radius: 2, temporal_past: 1, ..Params::default() };
    check(&Case { frames: 2, ..case(PixelFormat::GRAY8, 300, 70, p) }, &mut rng);
}
