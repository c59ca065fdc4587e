//! NLM super-resolution on the host: the CPU implementation against the f64 reference (fresh
//! random and realistic clips, every format kind, factors 2-4, one and two iterations, spatial and
//! temporal windows, output frames poisoned), the output size and order, what the definition
//! promises (constant in, constant out; the temporal window recovers detail that one frame lacks),
//! and the errors. Seed printed; rerun with NLM_TEST_SEED.

mod common;

use common::clips::{noisy, psnr};
use common::sr::{differences, moving_clip, sr, upscale};
use common::{samples, seed};
use nlmdenoise::device::ChunkFrames;
use nlmdenoise::params::SrParams;
use nlmdenoise::BackendOptions;
use nlmdenoise::{BackendKind, Denoiser, Error, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn run(kind: BackendKind, params: Params, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &BackendOptions { kind, threads: 2, ..Default::default() }).unwrap();
    upscale(d, inputs, 0xA7)
}

fn random_frames(info: VideoInfo, n: usize, rng: &mut SmallRng) -> Vec<OwnedFrame> {
    (0..n)
        .map(|_| {
            let mut f = OwnedFrame::new(info);
            for p in &mut f.planes {
                rng.fill(&mut p[..]);
            }
            f
        })
        .collect()
}

#[test]
fn cpu_matches_the_reference() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, scale, iterations, past, future) in [
        (PixelFormat::GRAY8, 13, 11, 2, 2, 1, 0, 0),
        (PixelFormat::I420, 17, 13, 4, 2, 1, 1, 1),
        (PixelFormat::I420, 16, 12, 3, 3, 2, 1, 0),
        (PixelFormat::NV12, 14, 10, 3, 4, 1, 0, 1),
        (PixelFormat::GRAY16_LE, 12, 9, 2, 2, 2, 1, 0),
        (PixelFormat::P010_10LE, 12, 10, 3, 2, 1, 1, 1),
        (PixelFormat::RGB, 11, 9, 2, 3, 1, 1, 0),
        (PixelFormat::BGRA, 10, 8, 2, 2, 1, 0, 0),
        (PixelFormat::GRAY8, 3, 2, 3, 2, 1, 1, 1),
    ] {
        let (_, lr) = moving_clip(format, w, h, scale as usize, frames, rng.random_range(0.0..6.0));
        let lr: Vec<OwnedFrame> = lr.iter().map(|f| noisy(f, 4.0, &mut rng)).collect();
        let info = lr[0].info;
        let denoising = Params { sigma: Some(4.0), ..sr(scale, iterations, past, future) };
        for (what, inputs, params) in [
            ("realistic", lr.clone(), sr(scale, iterations, past, future)),
            ("random", random_frames(info, frames, &mut rng), sr(scale, iterations, past, future)),
            ("realistic, sigma 4", lr.clone(), denoising),
            ("realistic, no novelty gate", lr.clone(), Params { sr: SrParams { novelty_gate: false, ..sr(scale, iterations, past, future).sr }, ..sr(scale, iterations, past, future) }),
        ] {
            let r = run(BackendKind::Reference, params, &inputs);
            let c = run(BackendKind::Cpu, params, &inputs);
            assert_eq!(r[0].info, VideoInfo::new(format, info.width * scale as usize, info.height * scale as usize).unwrap());
            let (total, beyond, max) = differences(&r, &c);
            eprintln!("{format:?} {w}x{h} x{scale} it {iterations} past {past} future {future} {what}: {beyond} of {total} beyond one code value, max {max}");
            // f32 against f64: weights of near-equal candidates round differently.
            assert!(beyond <= total / 1000, "{format:?} x{scale} {what}: {beyond} of {total} samples beyond one code value");
        }
    }
}

#[test]
fn constant_frames_stay_constant() {
    for format in [PixelFormat::I420, PixelFormat::GRAY16_LE] {
        let info = VideoInfo::new(format, 9, 7).unwrap();
        let mut f = OwnedFrame::new(info);
        for p in &mut f.planes {
            p.fill(0x5A);
        }
        let inputs = vec![f.clone(), f.clone(), f];
        for kind in [BackendKind::Reference, BackendKind::Cpu] {
            let out = run(kind, sr(3, 2, 1, 1), &inputs);
            let want = samples(&inputs[0])[0][0];
            for o in &out {
                for plane in samples(o) {
                    assert!(plane.iter().all(|&v| v == want), "{format:?} {kind:?}: constant input gave {plane:?}");
                }
            }
        }
    }
}

/// Gray frames of smooth detail (periods of 5 to 9 samples at the high resolution) moving by
/// `t` high-resolution samples, area-downscaled by 2: the window's frames hold the detail between
/// the target's samples.
fn smooth_clip(w: usize, h: usize, frames: usize) -> (Vec<OwnedFrame>, Vec<OwnedFrame>) {
    let info = VideoInfo::new(PixelFormat::GRAY8, 2 * w, 2 * h).unwrap();
    let hr: Vec<OwnedFrame> = (0..frames)
        .map(|t| {
            let mut f = OwnedFrame::new(info);
            for y in 0..2 * h {
                for x in 0..2 * w {
                    let (xs, ys) = (x as f64 + t as f64, y as f64 + 0.5 * t as f64);
                    let v = 128.0 + 50.0 * (xs * 0.9).sin() * (ys * 0.7).cos() + 30.0 * (xs * 0.45 + ys * 1.1).sin();
                    f.planes[0][y * f.strides[0] + x] = v.round().clamp(0.0, 255.0) as u8;
                }
            }
            f
        })
        .collect();
    let lr = hr.iter().map(|f| common::sr::downscale(f, 2)).collect();
    (hr, lr)
}

/// Deblurring undoes the area filter where the target frame alone can; the temporal window then
/// adds detail from the other frames' samples.
#[test]
fn deblur_and_the_temporal_window_recover_detail() {
    let (hr, lr) = smooth_clip(40, 32, 7);
    let cpu = |p: Params| run(BackendKind::Cpu, p, &lr);
    let score = |out: &[OwnedFrame]| psnr(&hr[2..5], &out[2..5]);
    let plain = SrParams { deblur: 0, fusion: 0.0, ..SrParams::default() };
    let base = Params { search_radius: 3, patch_radius: 2, strength: 2.0, ..sr(2, 1, 0, 0) };
    let cubic = score(&cpu(Params { sr: plain, ..base }));
    let deblurred = score(&cpu(Params { sr: SrParams { fusion: 0.0, ..SrParams::default() }, ..base }));
    // A moderate share of the fused correction (this content's aliasing penalises more).
    let fused = SrParams { fusion: 0.3, ..SrParams::default() };
    let spatial = score(&cpu(Params { sr: fused, ..base }));
    let temporal = score(&cpu(Params { sr: fused, temporal_past: 2, temporal_future: 2, ..base }));
    eprintln!("PSNR against the original: cubic {cubic:.2} dB, deblurred {deblurred:.2} dB, fused spatial {spatial:.2} dB, fused 2+2 frames {temporal:.2} dB");
    assert!(deblurred > cubic + 1.0, "deblur added {:.2} dB", deblurred - cubic);
    assert!(temporal > deblurred, "the window's fusion moved {:.2} dB", temporal - deblurred);
    assert!(temporal > spatial, "the temporal window added {:.2} dB", temporal - spatial);
    // The novelty gate: without other frames, or with frames that repeat the target (static
    // content), the fusion brings nothing new and the deblurred target comes out unchanged.
    assert_eq!(spatial, deblurred, "no other frame: the deblurred target");
    let still: Vec<OwnedFrame> = vec![lr[3].clone(); 5];
    let deblur_only = Params { sr: SrParams { fusion: 0.0, ..SrParams::default() }, temporal_past: 2, temporal_future: 2, ..base };
    let fused = Params { sr: SrParams::default(), temporal_past: 2, temporal_future: 2, ..base };
    assert_eq!(run(BackendKind::Cpu, fused, &still), run(BackendKind::Cpu, deblur_only, &still), "static content: the deblurred target");
}

#[test]
fn bad_settings_are_refused() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 16).unwrap();
    let cpu = BackendOptions { kind: BackendKind::Cpu, ..Default::default() };
    for scale in [0, 1, 5] {
        let e = Denoiser::<()>::new(info, Params { sr: SrParams { scale, ..SrParams::default() }, ..sr(2, 1, 0, 0) }, &cpu).err().expect("refused");
        assert!(matches!(e, Error::InvalidParameter(_)) && e.to_string().contains("scale"), "{e}");
    }
    assert!(Denoiser::<()>::new(info, Params { sr: SrParams { iterations: 3, ..SrParams::default() }, ..sr(2, 1, 0, 0) }, &cpu).is_err());
    assert!(Denoiser::<()>::new(info, Params { sr: SrParams { fusion: -0.5, ..SrParams::default() }, ..sr(2, 1, 0, 0) }, &cpu).is_err());
    // Output frames of the input's size are refused with a clear error, nothing lost.
    let mut d = Denoiser::<usize>::new(info, sr(2, 1, 0, 0), &cpu).unwrap();
    let f = OwnedFrame::new(info);
    d.push(&f.as_ref(), 0).unwrap();
    let mut small = OwnedFrame::new(info);
    assert!(d.pop(&mut small.as_mut()).is_err());
    let mut right = OwnedFrame::new(d.output_info());
    assert_eq!(d.pop(&mut right.as_mut()).unwrap(), Some(0));
}

/// Upscaling in chunks along time and on several workers (the shared chunked plumbing) gives the
/// same bytes as a frame at a time, whatever the chunk size, also across a change of the factor
/// mid-stream (output frames of a new size: the chunked pools are replaced).
#[test]
fn chunked_and_multi_worker_upscaling_match_a_frame_at_a_time() {
    use nlmdenoise::device::Devices;
    let mut rng = SmallRng::seed_from_u64(seed());
    for format in [PixelFormat::I420, PixelFormat::NV12] {
        let info = VideoInfo::new(format, 27, 17).unwrap();
        let inputs = random_frames(info, 9, &mut rng);
        let params = sr(2, 1, 1, 1);
        let tripled = Params { sr: SrParams { scale: 3, ..params.sr }, ..params };
        let go = |opts: BackendOptions| -> Vec<Vec<u8>> {
            let mut d: Denoiser<usize> = Denoiser::new(info, params, &opts).unwrap();
            let mut outs = Vec::new();
            let pop = |d: &mut Denoiser<usize>, outs: &mut Vec<Vec<u8>>| {
                let mut o = OwnedFrame::new(d.output_info());
                while let Some(tag) = d.pop(&mut o.as_mut()).unwrap() {
                    assert_eq!(tag, outs.len(), "frames out of order");
                    outs.push(o.planes.concat());
                }
            };
            for (i, f) in inputs.iter().enumerate() {
                if i == 5 {
                    // A new output size needs the held frames out first.
                    assert!(matches!(d.set_params(tripled), Err(nlmdenoise::Error::State(_))), "changing the size with frames held");
                    d.finish_stream().unwrap();
                    pop(&mut d, &mut outs);
                    d.set_params(tripled).unwrap();
                }
                d.push(&f.as_ref(), i).unwrap();
                pop(&mut d, &mut outs);
            }
            d.finish_stream().unwrap();
            pop(&mut d, &mut outs);
            assert_eq!(outs.len(), inputs.len(), "frames lost");
            outs
        };
        let cpu = BackendOptions { kind: BackendKind::Cpu, threads: 2, ..Default::default() };
        let single = go(cpu.clone());
        let bytes = |w: usize, h: usize| OwnedFrame::new(VideoInfo::new(format, w, h).unwrap()).planes.concat().len();
        assert_eq!((single[4].len(), single[5].len()), (bytes(54, 34), bytes(81, 51)), "{format}: x2 then x3");
        for (what, opts) in [
            ("chunks of 1", BackendOptions { chunk_frames: ChunkFrames::Frames(1), ..cpu.clone() }),
            ("chunks of 3", BackendOptions { chunk_frames: ChunkFrames::Frames(3), ..cpu.clone() }),
            ("automatic chunks", BackendOptions { chunk_frames: ChunkFrames::Auto, ..cpu.clone() }),
            ("two workers", BackendOptions { devices: Devices::List(vec![0, 1]), chunk_frames: ChunkFrames::Frames(2), ..cpu.clone() }),
        ] {
            let got = go(opts);
            assert!(got == single, "{format} {what}: differs from a frame at a time");
        }
    }
}
