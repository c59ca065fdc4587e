//! Noise estimation (`sigma = auto`) through the public API: accuracy on noisy test clips, clean
//! and textured content, following a step of the noise level, a reset on flush, and denoising
//! with the estimate against the true sigma (NLM live and offline, BM3D). CPU backend.

mod common;

use common::clips::{noisy, psnr, write};
use common::seed;
use nlmdenoise::noise::{estimate_frame, NoiseEstimator};
use nlmdenoise::planar::{Geometry, PlanarFrame};
use nlmdenoise::{convert, Algorithm, BackendKind, BackendOptions, Bm3dParams, Bm3dProfile, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// Clean content like a camera's: smooth shading, flat areas with sharp edges (moving one sample
/// per frame) and moderate texture; no detail near the Nyquist frequency, which no single-frame
/// estimate can tell from noise.
fn clean_frame(info: VideoInfo, t: usize, phase: f64) -> OwnedFrame {
    let fi = info.format.info();
    let maxv = (1u32 << fi.bits) - 1;
    let scale = (maxv + 1) as f64 / 256.0;
    let mut f = OwnedFrame::new(info);
    // The shading spans the same range of values at every frame size (96 across, 48 down).
    let (gx, gy) = (96.0 / info.width as f64, 48.0 / info.height as f64);
    for (ci, c) in fi.components.iter().enumerate() {
        let (w, h) = (info.width.div_ceil(c.sub_x), info.height.div_ceil(c.sub_y));
        for y in 0..h {
            for x in 0..w {
                let (xs, ys) = ((x + t) as f64 * c.sub_x as f64, y as f64 * c.sub_y as f64);
                let rect = if (60.0..180.0).contains(&xs) && (40.0..150.0).contains(&ys) { 50.0 } else { 0.0 };
                let v = 60.0 + gx * xs + gy * ys + rect + 15.0 * ((xs * 0.15 + phase + ci as f64).sin() * (ys * 0.11).cos()) + 8.0 * ((xs + ys) * 0.3).sin();
                write(&mut f, c, x, y, (v * scale).round().clamp(0.0, maxv as f64) as u32);
            }
        }
    }
    f
}

fn planar(f: &OwnedFrame) -> (PlanarFrame, Geometry) {
    let g = Geometry::from_video_info(&f.info);
    let mut p = PlanarFrame::zeroed(&g);
    convert::unpack(&f.as_ref(), &mut p).unwrap();
    (p, g)
}

/// Within 10% of the true sigma (0.5 at sigma <= 5), for luma and chroma, 8-, 10- and 16-bit,
/// subsampled, full-resolution and grey. One frame of 640 x 480: over 300 seeds (2026-11-26) the
/// largest error was 56% of the tolerance (8-bit luma at sigma 40, where blocks touching 0 or 255
/// are left out) and every case's mean lay at least 6 standard deviations inside it; on 320 x 240
/// the I420 chroma planes hold 63 blocks, a few of them unclipped at sigma 40, and the check
/// failed on 10 seeds of 300.
#[test]
fn estimates_follow_the_true_sigma() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for format in [PixelFormat::I420, PixelFormat::I420_10LE, PixelFormat::Y444_16LE, PixelFormat::GRAY8] {
        let info = VideoInfo::new(format, 640, 480).unwrap();
        let clean = clean_frame(info, 0, 0.7);
        for sigma in [2.0, 5.0, 10.0, 20.0, 30.0, 40.0] {
            let (p, g) = planar(&noisy(&clean, sigma, &mut rng));
            let e = estimate_frame(&p, &g).unwrap();
            let tol = if sigma <= 5.0 { 0.5 } else { 0.1 * sigma };
            eprintln!("{format:?} sigma {sigma}: {e:?}");
            assert!((e.luma as f64 - sigma).abs() <= tol, "{format:?} sigma {sigma}: luma {}", e.luma);
            if let Some(c) = e.chroma {
                assert!((c as f64 - sigma).abs() <= tol, "{format:?} sigma {sigma}: chroma {c}");
            }
        }
    }
}

/// Clean content reads as (almost) no noise; so does a frame of dense texture.
#[test]
fn clean_and_textured_content_is_not_noise() {
    let info = VideoInfo::new(PixelFormat::I420, 320, 240).unwrap();
    let (p, g) = planar(&clean_frame(info, 3, 1.9));
    let e = estimate_frame(&p, &g).unwrap();
    assert!(e.luma < 1.5 && e.chroma.unwrap() < 1.5, "clean: {e:?}");
    // Fine texture everywhere: a high-frequency pattern of +-40 code values over every sample.
    let mut t = OwnedFrame::new(VideoInfo::new(PixelFormat::GRAY8, 320, 240).unwrap());
    for y in 0..240usize {
        for x in 0..320usize {
            let v = 128.0 + 40.0 * ((x as f64 * 0.9).sin() * (y as f64 * 0.7).cos()) + 20.0 * ((x + 2 * y) as f64 * 0.37).sin();
            t.planes[0][y * t.strides[0] + x] = v.round() as u8;
        }
    }
    let (p, g) = planar(&t);
    let e = estimate_frame(&p, &g).unwrap();
    assert!(e.luma < 2.0, "texture: {e:?}");
}

/// A step from sigma 5 to 20: within 25 frames (one second at 25 frames/s) the smoothed estimate
/// is within 10% of 20; a reset forgets the old level.
#[test]
fn the_estimate_follows_a_step_within_a_second() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let info = VideoInfo::new(PixelFormat::I420, 320, 240).unwrap();
    let mut est = NoiseEstimator::new();
    for t in 0..25 {
        let (p, g) = planar(&noisy(&clean_frame(info, t, 0.3), 5.0, &mut rng));
        est.observe(&p, &g);
    }
    let before = est.current().unwrap();
    assert!((before.luma - 5.0).abs() < 0.5, "{before:?}");
    let mut reached = None;
    for t in 25..50 {
        let (p, g) = planar(&noisy(&clean_frame(info, t, 0.3), 20.0, &mut rng));
        est.observe(&p, &g);
        if reached.is_none() && (est.current().unwrap().luma - 20.0).abs() <= 2.0 {
            reached = Some(t - 25 + 1);
        }
    }
    let frames = reached.expect("the estimate never reached 20 +- 10%");
    eprintln!("reached 20 +- 10% after {frames} frames");
    assert!(frames <= 25);
    est.reset();
    assert!(est.current().is_none());
}

fn run(params: Params, inputs: &[OwnedFrame]) -> (Vec<OwnedFrame>, Option<nlmdenoise::noise::NoiseEstimate>) {
    let mut d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap();
    let mut outs = Vec::new();
    let mut out = OwnedFrame::new(inputs[0].info);
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
        while d.pop(&mut out.as_mut()).unwrap().is_some() {
            outs.push(out.clone());
        }
    }
    d.finish_stream().unwrap();
    while d.pop(&mut out.as_mut()).unwrap().is_some() {
        outs.push(out.clone());
    }
    (outs, d.noise_estimate())
}

/// Denoising with the estimate is within 0.2 dB of denoising with the true sigma: NLM with the
/// live and the offline window, BM3D. 640 x 480: at 160 x 120 the PSNR of six frames alone moves
/// by +-0.2 dB with the noise drawn, so the check failed on about one seed in twenty (CI run of
/// 2026-11-26: BM3D -0.202 with an estimate of 14.43); at 640 x 480 the largest difference over
/// 15 noise draws (45 comparisons) was 0.094.
#[test]
fn auto_sigma_denoises_like_the_true_sigma() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let info = VideoInfo::new(PixelFormat::I420, 640, 480).unwrap();
    let sigma = 15.0f32;
    let clean: Vec<OwnedFrame> = (0..6).map(|t| clean_frame(info, t, 0.5)).collect();
    let inputs: Vec<OwnedFrame> = clean.iter().map(|c| noisy(c, sigma as f64, &mut rng)).collect();
    let nlm = |past: u32, future: u32| Params { temporal_past: past, temporal_future: future, ..Params::default() };
    let bm3d = Params { algorithm: Algorithm::Bm3d, temporal_past: 0, temporal_future: 0, bm3d: Bm3dParams { profile: Bm3dProfile::Fast, ..Default::default() }, ..Params::default() };
    for (name, p) in [("nlm live", nlm(2, 0)), ("nlm offline", nlm(2, 2)), ("bm3d", bm3d)] {
        let known = if p.algorithm == Algorithm::Bm3d { Params { sigma: Some(sigma), ..p } } else { p.with_noise_sigma(sigma) };
        let (a, _) = run(known, &inputs);
        let (b, e) = run(Params { sigma_auto: true, ..p }, &inputs);
        let (pa, pb) = (psnr(&clean, &a), psnr(&clean, &b));
        eprintln!("{name}: true sigma {pa:.3} dB, auto {pb:.3} dB (estimate {e:?})");
        assert!((pa - pb).abs() <= 0.2, "{name}: true sigma {pa:.3} dB, auto {pb:.3} dB");
    }
}

/// Every output of a chunked run with sigma auto equals the run a frame at a time (the estimate
/// is made on the caller's thread, frame by frame, before the frames go to the workers).
#[test]
fn chunked_auto_gives_the_same_bits() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let info = VideoInfo::new(PixelFormat::I420, 96, 64).unwrap();
    let inputs: Vec<OwnedFrame> = (0..10).map(|t| noisy(&clean_frame(info, t, 0.1), 8.0, &mut rng)).collect();
    let p = Params { sigma_auto: true, temporal_past: 1, temporal_future: 1, ..Params::default() };
    let (one, _) = run(p, &inputs);
    let d: Denoiser<usize> = Denoiser::new(info, p, &BackendOptions { kind: BackendKind::Cpu, chunk_frames: nlmdenoise::device::ChunkFrames::Frames(3), ..Default::default() }).unwrap();
    let chunked = common::denoise(d, &inputs, 0, 0xA7, None);
    for (i, (a, b)) in one.iter().zip(&chunked).enumerate() {
        assert_eq!(common::samples(a), common::samples(b), "frame {i}");
    }
}
