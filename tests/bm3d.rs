//! BM3D through the public `Denoiser` API on the host backends: the f64 reference's basic
//! properties, the CPU implementation against the reference on fresh random and realistic inputs
//! (seed printed; rerun with `NLM_TEST_SEED=<seed>`), chunked and batched runs, and errors.
//!
//! Agreement rule with the reference (docs/design.md, BM3D): block-matching ties and float order
//! may differ, so outputs may differ slightly; at most 0.1% of samples (and no fewer than one)
//! may differ by more than one 8-bit code value, and the PSNR against the clean frames within
//! 0.02 dB.

mod common;

use common::{samples, seed};
use nlmdenoise::device::{BackendOptions, ChunkFrames};
use nlmdenoise::{Algorithm, BackendKind, Bm3dParams, Bm3dProfile, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Clean content with edges, gradients and texture, moving by one sample per frame.
fn clean_frame(info: VideoInfo, t: usize, rng_phase: f64) -> OwnedFrame {
    let fi = info.format.info();
    let maxv = (1u32 << fi.bits) - 1;
    let shift = if info.format == PixelFormat::P010_10LE { 6 } else { 0 };
    let scale = (maxv + 1) as f64 / 256.0;
    let mut f = OwnedFrame::new(info);
    for (ci, c) in fi.components.iter().enumerate() {
        let (w, h) = (info.width.div_ceil(c.sub_x), info.height.div_ceil(c.sub_y));
        for y in 0..h {
            for x in 0..w {
                let xs = (x + t) as f64;
                let edge = if (xs as usize / 11 + y / 9) % 2 == 0 { 60.0 } else { 0.0 };
                let v = 70.0 + edge + 40.0 * (xs * 0.21 + rng_phase + ci as f64).sin() * (y as f64 * 0.17).cos() + 20.0 * ((xs * 1.3).sin() * (y as f64 * 1.1).sin());
                let s = ((v * scale).round().clamp(0.0, maxv as f64) as u32) << shift;
                write(&mut f, c, x, y, s);
            }
        }
    }
    f
}

fn write(f: &mut OwnedFrame, c: &nlmdenoise::format::Component, x: usize, y: usize, s: u32) {
    let two = f.info.format.info().bytes_per_sample == 2;
    let i = y * f.strides[c.memory_plane] + c.offset + x * c.step;
    let p = &mut f.planes[c.memory_plane];
    if two {
        p[i..i + 2].copy_from_slice(&(s as u16).to_le_bytes());
    } else {
        p[i] = s as u8;
    }
}

/// `clean` plus Gaussian noise of `sigma` 8-bit code values (Box-Muller).
fn noisy(clean: &OwnedFrame, sigma: f64, rng: &mut SmallRng) -> OwnedFrame {
    let info = clean.info;
    let fi = info.format.info();
    let maxv = (1u32 << fi.bits) - 1;
    let shift = if info.format == PixelFormat::P010_10LE { 6 } else { 0 };
    let scale = (maxv + 1) as f64 / 256.0;
    let mut f = clean.clone();
    let s = samples(clean);
    for (ci, c) in fi.components.iter().enumerate() {
        let w = info.width.div_ceil(c.sub_x);
        for (i, &v) in s[ci].iter().enumerate() {
            let (u1, u2): (f64, f64) = (rng.random_range(1e-12..1.0), rng.random());
            let g = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let n = (((v >> shift) as f64 + g * sigma * scale).round().clamp(0.0, maxv as f64) as u32) << shift;
            write(&mut f, c, i % w, i / w, n);
        }
    }
    f
}

fn run(kind: BackendKind, options: BackendOptions, params: Params, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &BackendOptions { kind, ..options }).unwrap();
    common::denoise(d, inputs, 3, 0xA7, None)
}

/// PSNR of `frames` against `clean` over every sample, in stored units' peak.
fn psnr(clean: &[OwnedFrame], frames: &[OwnedFrame]) -> f64 {
    let peak = ((1u64 << clean[0].info.format.info().bits) - 1) as f64;
    let shift = if clean[0].info.format == PixelFormat::P010_10LE { 6 } else { 0 };
    let (mut se, mut n) = (0.0, 0usize);
    for (c, f) in clean.iter().zip(frames) {
        for (a, b) in samples(c).iter().zip(samples(f)) {
            for (&x, &y) in a.iter().zip(&b) {
                let d = (x >> shift) as f64 - (y >> shift) as f64;
                se += d * d;
                n += 1;
            }
        }
    }
    10.0 * (peak * peak / (se / n as f64).max(1e-12)).log10()
}

fn bm3d(sigma: f32, bm3d: Bm3dParams, past: u32, future: u32) -> Params {
    Params { algorithm: Algorithm::Bm3d, sigma: Some(sigma), temporal_past: past, temporal_future: future, bm3d, ..Params::default() }
}

/// Small settings so that the f64 reference stays quick.
fn small(steps: u32) -> Bm3dParams {
    Bm3dParams { profile: Bm3dProfile::Fast, steps: Some(steps), search_radius: Some(4), block_step: Some(3), seed_radius: Some(2), ..Default::default() }
}

struct Clip {
    clean: Vec<OwnedFrame>,
    noisy: Vec<OwnedFrame>,
}

fn clip(format: PixelFormat, w: usize, h: usize, frames: usize, sigma: f64, rng: &mut SmallRng) -> Clip {
    let info = VideoInfo::new(format, w, h).unwrap();
    let phase: f64 = rng.random_range(0.0..6.0);
    let clean: Vec<OwnedFrame> = (0..frames).map(|t| clean_frame(info, t, phase)).collect();
    let noisy = clean.iter().map(|c| noisy(c, sigma, rng)).collect();
    Clip { clean, noisy }
}

/// The agreement rule of this file's doc.
fn agree(what: &str, clip: &Clip, reference: &[OwnedFrame], other: &[OwnedFrame]) {
    let tol = {
        let fi = clip.clean[0].info.format.info();
        let shift = if clip.clean[0].info.format == PixelFormat::P010_10LE { 6 } else { 0 };
        ((1u32 << fi.bits) / 256).max(1) << shift
    };
    let (mut total, mut beyond, mut max) = (0usize, 0usize, 0u32);
    for (r, o) in reference.iter().zip(other) {
        for (a, b) in samples(r).iter().zip(samples(o)) {
            for (&x, &y) in a.iter().zip(&b) {
                total += 1;
                max = max.max(x.abs_diff(y));
                if x.abs_diff(y) > tol {
                    beyond += 1;
                }
            }
        }
    }
    let (pr, po) = (psnr(&clip.clean, reference), psnr(&clip.clean, other));
    eprintln!("{what}: {beyond} of {total} samples beyond one code value (max {max} stored units); PSNR reference {pr:.3} dB, {po:.3} dB");
    assert!(beyond <= (total / 1000).max(1), "{what}: {beyond} of {total} samples differ by more than one code value");
    assert!((pr - po).abs() <= 0.02, "{what}: PSNR {po:.3} against the reference's {pr:.3} dB");
}

#[test]
fn reference_keeps_constants_and_removes_noise() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 40, 32).unwrap();
    let mut flat = OwnedFrame::new(info);
    for p in &mut flat.planes {
        p.fill(117);
    }
    let out = run(BackendKind::Reference, BackendOptions::default(), bm3d(10.0, small(2), 0, 0), &[flat.clone()]);
    assert_eq!(samples(&out[0]), samples(&flat), "a constant frame stays constant");

    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::GRAY8, 48, 40, 1, 20.0, &mut rng);
    let (before, one, two) = (
        psnr(&c.clean, &c.noisy),
        psnr(&c.clean, &run(BackendKind::Reference, BackendOptions::default(), bm3d(20.0, small(1), 0, 0), &c.noisy)),
        psnr(&c.clean, &run(BackendKind::Reference, BackendOptions::default(), bm3d(20.0, small(2), 0, 0), &c.noisy)),
    );
    eprintln!("PSNR noisy {before:.2} dB, one step {one:.2} dB, two steps {two:.2} dB");
    assert!(one > before + 4.0, "hard thresholding gains {:.2} dB", one - before);
    assert!(two > one, "the Wiener step adds nothing: {one:.2} -> {two:.2} dB");
}

#[test]
fn temporal_window_helps_on_moving_content() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::GRAY8, 40, 32, 4, 20.0, &mut rng);
    let spatial = psnr(&c.clean, &run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, small(2), 0, 0), &c.noisy));
    let temporal = psnr(&c.clean, &run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, small(2), 1, 1), &c.noisy));
    eprintln!("spatial {spatial:.2} dB, 1 past + 1 future {temporal:.2} dB");
    assert!(temporal > spatial + 0.3, "V-BM3D {temporal:.2} dB against spatial {spatial:.2} dB");
}

#[test]
fn cpu_matches_reference_gray_and_i420() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, past, future, steps) in [
        (PixelFormat::GRAY8, 37, 29, 1, 0, 0, 1),
        (PixelFormat::GRAY8, 37, 29, 1, 0, 0, 2),
        (PixelFormat::I420, 34, 26, 3, 1, 0, 2),
        (PixelFormat::I420, 30, 22, 4, 1, 1, 2),
        (PixelFormat::NV12, 26, 20, 3, 0, 1, 1),
    ] {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let p = bm3d(15.0, small(steps), past, future);
        let r = run(BackendKind::Reference, BackendOptions::default(), p, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, p, &c.noisy);
        agree(&format!("{format:?} {w}x{h} past {past} future {future} steps {steps}"), &c, &r, &o);
    }
}

#[test]
fn cpu_matches_reference_deep_rgb_and_tiny() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, k) in [
        (PixelFormat::I420_10LE, 30, 24, 8),
        (PixelFormat::P010_10LE, 24, 18, 8),
        (PixelFormat::GRAY16_LE, 21, 19, 4),
        (PixelFormat::RGB, 22, 20, 8),
        (PixelFormat::Y444, 20, 18, 4),
        (PixelFormat::I420, 7, 5, 8),
        (PixelFormat::GRAY8, 1, 1, 4),
        (PixelFormat::GRAY8, 3, 11, 8),
    ] {
        let c = clip(format, w, h, 2, 12.0, &mut rng);
        let p = bm3d(12.0, Bm3dParams { patch_size: Some(k), ..small(2) }, 1, 0);
        let r = run(BackendKind::Reference, BackendOptions::default(), p, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions::default(), p, &c.noisy);
        agree(&format!("{format:?} {w}x{h} k={k}"), &c, &r, &o);
    }
}

#[test]
fn chunks_give_the_same_bits() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::I420, 32, 24, 9, 20.0, &mut rng);
    let p = bm3d(20.0, small(2), 1, 1);
    let one = run(BackendKind::Cpu, BackendOptions::default(), p, &c.noisy);
    for chunk in [1usize, 2, 4] {
        let chunked = run(BackendKind::Cpu, BackendOptions { chunk_frames: ChunkFrames::Frames(chunk), ..Default::default() }, p, &c.noisy);
        for (i, (a, b)) in one.iter().zip(&chunked).enumerate() {
            assert_eq!(samples(a), samples(b), "chunk {chunk}: frame {i} differs");
        }
    }
}

#[test]
fn two_steps_read_twice_the_window_and_report_it() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 16, 16).unwrap();
    let d: Denoiser<usize> = Denoiser::new(info, bm3d(10.0, small(2), 2, 1), &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap();
    assert_eq!(d.latency_frames(), 2);
    let d: Denoiser<usize> = Denoiser::new(info, bm3d(10.0, small(1), 2, 1), &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap();
    assert_eq!(d.latency_frames(), 1);
    assert_eq!(bm3d(10.0, small(2), 2, 1).frames_needed(), (4, 2));
}

#[test]
fn bad_settings_are_clear_errors() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 16).unwrap();
    let opts = BackendOptions { kind: BackendKind::Cpu, ..Default::default() };
    let no_sigma = Params { algorithm: Algorithm::Bm3d, ..Params::default() };
    let e = Denoiser::<usize>::new(info, no_sigma, &opts).err().unwrap().to_string();
    assert!(e.contains("sigma"), "{e}");
    for (b, needle) in [
        (Bm3dParams { patch_size: Some(5), ..Default::default() }, "patch size"),
        (Bm3dParams { group_size: Some(12), ..Default::default() }, "power of two"),
        (Bm3dParams { steps: Some(3), ..Default::default() }, "steps"),
        (Bm3dParams { block_step: Some(9), ..Default::default() }, "block step"),
    ] {
        let e = Denoiser::<usize>::new(info, bm3d(10.0, b, 0, 0), &opts).err().unwrap().to_string();
        assert!(e.contains(needle), "{needle}: {e}");
    }
}
