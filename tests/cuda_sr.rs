//! NLM super-resolution on CUDA against the f64 reference (needs a GPU; skips visibly without
//! one): fresh random and realistic clips, device output frames poisoned before every launch,
//! every format kind, factors 2-4, one and two iterations, spatial and temporal windows, pipeline
//! depths 0-2. Agreement: at most 0.1% of samples beyond one 8-bit code value (f32 against f64),
//! PSNR within 0.02 dB. Seed printed; rerun with NLM_TEST_SEED.

mod common;

use common::clips::{noisy, psnr};
use common::sr::{differences, moving_clip, sr, upscale};
use common::{gpu_or_skip, seed};
use nlmdenoise::params::SrParams;
use nlmdenoise::BackendOptions;
use nlmdenoise::{BackendKind, Denoiser, OwnedFrame, Params, PixelFormat};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn reference(params: Params, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &BackendOptions { kind: BackendKind::Reference, ..Default::default() }).unwrap();
    upscale(d, inputs, 0xA7)
}

fn cuda(params: Params, inputs: &[OwnedFrame], depth: usize) -> Vec<OwnedFrame> {
    let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, ..Default::default() }).unwrap();
    b.set_poison_outputs(true);
    let d: Denoiser<usize> = Denoiser::with_backend(inputs[0].info, params, Box::new(b)).unwrap();
    upscale(d, inputs, 0x5C)
}

fn agree(what: &str, hr: &[OwnedFrame], r: &[OwnedFrame], g: &[OwnedFrame]) {
    let (total, beyond, max) = differences(r, g);
    let (pr, pg) = (psnr(hr, r), psnr(hr, g));
    eprintln!("cuda {what}: {beyond} of {total} samples beyond one code value (max {max}); PSNR reference {pr:.3} dB, cuda {pg:.3} dB");
    assert!(beyond <= total / 1000, "cuda {what}: {beyond} of {total} samples beyond one code value");
    assert!((pr - pg).abs() <= 0.02, "cuda {what}: PSNR {pg:.3} against the reference's {pr:.3}");
}

#[test]
fn cuda_matches_the_reference() {
    if !gpu_or_skip("cuda_matches_the_reference") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, scale, iterations, past, future, depth) in [
        (PixelFormat::GRAY8, 13, 11, 2, 2, 1, 0, 0, 0),
        (PixelFormat::I420, 37, 23, 5, 2, 1, 2, 2, 2),
        (PixelFormat::I420, 16, 12, 3, 3, 2, 1, 0, 1),
        (PixelFormat::NV12, 22, 14, 3, 4, 1, 0, 1, 2),
        (PixelFormat::GRAY16_LE, 12, 9, 2, 2, 2, 1, 0, 0),
        (PixelFormat::P010_10LE, 20, 10, 3, 2, 1, 1, 1, 2),
        (PixelFormat::RGB, 11, 9, 2, 3, 1, 1, 0, 1),
        (PixelFormat::BGRA, 10, 8, 2, 2, 1, 0, 0, 0),
        (PixelFormat::GRAY8, 3, 2, 3, 2, 1, 1, 1, 1),
        (PixelFormat::I420, 70, 44, 4, 2, 1, 2, 1, 2),
    ] {
        let (hr, lr) = moving_clip(format, w, h, scale as usize, frames, rng.random_range(0.0..6.0));
        let lr: Vec<OwnedFrame> = lr.iter().map(|f| noisy(f, 3.0, &mut rng)).collect();
        let random: Vec<OwnedFrame> = lr
            .iter()
            .map(|f| {
                let mut f = f.clone();
                for p in &mut f.planes {
                    rng.fill(&mut p[..]);
                }
                f
            })
            .collect();
        let plain = sr(scale, iterations, past, future);
        let denoising = Params { sigma: Some(4.0), ..plain };
        let ungated = Params { sr: SrParams { novelty_gate: false, ..plain.sr }, ..plain };
        for (what, inputs, params) in [("realistic", &lr, plain), ("random", &random, plain), ("realistic, sigma 4", &lr, denoising), ("realistic, no novelty gate", &lr, ungated)] {
            let r = reference(params, inputs);
            let g = cuda(params, inputs, depth);
            agree(&format!("{format:?} {w}x{h} x{scale} it {iterations} past {past} future {future} depth {depth} {what}"), &hr, &r, &g);
        }
    }
    // The upscaler's default radii (patch 3, search 2) and patch 3 with search 3 (measured as
    // good, docs/quality.md), 2 + 2 frames.
    for (patch_radius, search_radius) in [(3, 2), (3, 3)] {
        let (hr, lr) = moving_clip(PixelFormat::I420, 34, 26, 2, 5, rng.random_range(0.0..6.0));
        let lr: Vec<OwnedFrame> = lr.iter().map(|f| noisy(f, 3.0, &mut rng)).collect();
        let params = Params { patch_radius, search_radius, ..sr(2, 1, 2, 2) };
        agree(&format!("I420 34x26 x2 patch radius {patch_radius} search radius {search_radius} past 2 future 2"), &hr, &reference(params, &lr), &cuda(params, &lr, 2));
    }
}

/// A short case for compute-sanitizer (memcheck, racecheck): every kernel, a temporal window,
/// chroma planes of odd size, 16-bit samples.
#[test]
fn sanitizer_smoke_sr() {
    if !gpu_or_skip("sanitizer_smoke_sr") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, scale) in [(PixelFormat::I420, 2), (PixelFormat::GRAY16_LE, 3)] {
        let (hr, lr) = moving_clip(format, 19, 13, scale, 3, rng.random_range(0.0..6.0));
        // sigma: step 0 (the fusion at factor 1) runs too.
        let g = cuda(Params { sigma: Some(3.0), sr: SrParams { scale: scale as u32, iterations: 2, ..SrParams::default() }, ..sr(scale as u32, 2, 1, 1) }, &lr, 1);
        assert!(psnr(&hr, &g) > 15.0);
    }
}
