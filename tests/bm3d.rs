//! BM3D through the public `Denoiser` API on the host backends: the f64 reference's basic
//! properties, the CPU implementation against the reference on fresh random and realistic inputs
//! (seed printed; rerun with `NLM_TEST_SEED=<seed>`), chunked and batched runs, and errors.
//!
//! Agreement rule with the reference (docs/design.md, BM3D): block-matching ties and float order
//! may differ, so outputs may differ slightly; at most 0.5% of samples (16 on frames of fewer than 3200 samples)
//! may differ by more than one 8-bit code value, and the PSNR against the clean frames within
//! 0.02 dB.

mod common;

use common::clips::{agree, clip, moving_clip, psnr};
use common::{samples, seed};
use nlmdenoise::device::ChunkFrames;
use nlmdenoise::BackendOptions;
use nlmdenoise::{Algorithm, BackendKind, Bm3dParams, Bm3dProfile, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn run(kind: BackendKind, options: BackendOptions, params: Params, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &BackendOptions { kind, ..options }).unwrap();
    common::denoise(d, inputs, 3, 0xA7, None)
}

fn bm3d(sigma: f32, bm3d: Bm3dParams, past: u32, future: u32) -> Params {
    Params { algorithm: Algorithm::Bm3d, sigma: Some(sigma), temporal_past: past, temporal_future: future, bm3d, ..Params::default() }
}

/// Small settings so that the f64 reference stays quick.
fn small(steps: u32) -> Bm3dParams {
    Bm3dParams { profile: Bm3dProfile::Fast, steps: Some(steps), search_radius: Some(4), block_step: Some(3), seed_radius: Some(2), ..Default::default() }
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
    assert!(one > before + 3.5, "hard thresholding gains {:.2} dB", one - before);
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
        // Each output's own groups (per-frame groups, the default with future frames, have
        // their own test below).
        let p = bm3d(15.0, Bm3dParams { frame_groups: Some(false), ..small(steps) }, past, future);
        let r = run(BackendKind::Reference, BackendOptions::default(), p, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, p, &c.noisy);
        agree(&format!("{format:?} {w}x{h} past {past} future {future} steps {steps}"), &c, &r, &o);
    }
}

/// A sparser hard-thresholding step (`hard_block_step`, here 5 against the Wiener step's 3): the
/// CPU implementation agrees with the reference (each output's own groups, window references,
/// per-frame groups, one step alone), and the setting reaches the step it names: the output
/// changes with it, and with one step it is the block step.
#[test]
fn hard_block_step_matches_the_reference_and_sets_the_first_step() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let cases = [
        (PixelFormat::I420, 34, 26, 3, 1, 1, 2, false, false),
        (PixelFormat::I420, 30, 22, 4, 1, 1, 2, true, false),
        (PixelFormat::I420, 30, 22, 4, 1, 1, 2, false, true),
        (PixelFormat::GRAY8, 37, 29, 1, 0, 0, 1, false, false),
    ];
    for (format, w, h, frames, past, future, steps, refs, frame_groups) in cases {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let b = Bm3dParams { window_references: Some(refs), frame_groups: Some(frame_groups), ..small(steps) };
        let sparse = bm3d(15.0, Bm3dParams { hard_block_step: Some(5), ..b }, past, future);
        let r = run(BackendKind::Reference, BackendOptions::default(), sparse, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, sparse, &c.noisy);
        let what = format!("hard block step 5 {format:?} {w}x{h} past {past} future {future} steps {steps} refs {refs} fg {frame_groups}");
        agree(&what, &c, &r, &o);
        let dense = run(BackendKind::Cpu, BackendOptions::default(), bm3d(15.0, b, past, future), &c.noisy);
        assert!(dense.iter().zip(&o).any(|(a, b)| a.planes != b.planes), "{what}: the output does not depend on the hard block step");
        if steps == 1 {
            let as_block_step = run(BackendKind::Cpu, BackendOptions::default(), bm3d(15.0, Bm3dParams { block_step: Some(5), ..b }, past, future), &c.noisy);
            assert!(as_block_step.iter().zip(&o).all(|(a, b)| a.planes == b.planes), "{what}: one step, the hard block step is the block step");
        }
    }
}

/// The Wiener step's own number of seeds (`wiener_seeds`, fewer and more than the hard step's):
/// the CPU implementation agrees with the reference (own groups, window references, per-frame
/// groups), and the output depends on it.
#[test]
fn wiener_seeds_match_the_reference() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, past, future, refs, frame_groups, seeds, wiener_seeds) in
        [(PixelFormat::I420, 34, 26, 3, 1, 1, false, false, 3, 1), (PixelFormat::I420, 30, 22, 4, 2, 0, true, false, 2, 4), (PixelFormat::GRAY8, 30, 22, 4, 1, 1, false, true, 3, 2)]
    {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let b = Bm3dParams { window_references: Some(refs), frame_groups: Some(frame_groups), seeds: Some(seeds), ..small(2) };
        let p = bm3d(15.0, Bm3dParams { wiener_seeds: Some(wiener_seeds), ..b }, past, future);
        let r = run(BackendKind::Reference, BackendOptions::default(), p, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, p, &c.noisy);
        let what = format!("wiener seeds {wiener_seeds} (seeds {seeds}) {format:?} {w}x{h} past {past} future {future} refs {refs} fg {frame_groups}");
        agree(&what, &c, &r, &o);
    }
    // On a frame large enough for the seeds to reach different places, the output depends on
    // them (on the tiny frames above the groups often fill from the same candidates).
    let c = clip(PixelFormat::I420, 64, 48, 4, 20.0, &mut rng);
    let b = Bm3dParams { seeds: Some(3), ..small(2) };
    let with = |wiener_seeds| run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, Bm3dParams { wiener_seeds, ..b }, 1, 1), &c.noisy);
    let (three, one) = (with(None), with(Some(1)));
    assert!(three.iter().zip(&one).any(|(a, b)| a.planes != b.planes), "the output does not depend on the Wiener step's seeds");
}

/// Reference patches in every frame of the window (`window_references`, the high profile's):
/// the CPU implementation agrees with the reference, and on moving content the estimates of the
/// neighbours' groups make the target cleaner than its own groups alone.
#[test]
fn window_references_match_the_reference_and_help() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, past, future, steps) in [(PixelFormat::I420, 30, 22, 4, 1, 1, 2), (PixelFormat::GRAY8, 33, 25, 3, 2, 0, 1), (PixelFormat::RGB, 20, 18, 3, 0, 2, 2)] {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let p = bm3d(15.0, Bm3dParams { window_references: Some(true), frame_groups: Some(false), ..small(steps) }, past, future);
        let r = run(BackendKind::Reference, BackendOptions::default(), p, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, p, &c.noisy);
        agree(&format!("window references {format:?} {w}x{h} past {past} future {future} steps {steps}"), &c, &r, &o);
    }
    let c = clip(PixelFormat::I420, 64, 48, 6, 20.0, &mut rng);
    let target_only = psnr(&c.clean, &run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, Bm3dParams { frame_groups: Some(false), ..small(2) }, 1, 1), &c.noisy));
    let window = psnr(&c.clean, &run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, Bm3dParams { window_references: Some(true), frame_groups: Some(false), ..small(2) }, 1, 1), &c.noisy));
    eprintln!("references in the target: {target_only:.2} dB, in every frame of the window: {window:.2} dB");
    assert!(window > target_only, "window references {window:.2} dB, target only {target_only:.2} dB");
}

/// Per-frame groups (`frame_groups`): every frame's groups over the window centred on that frame,
/// members aggregated into their own frames. The CPU implementation agrees with the reference;
/// the output differs from window references (another definition) but is as clean, and cleaner
/// than the target's groups alone; chunks give the same bits (a chunk reads the frames the
/// definition needs); the window read and the latency are past + future on each side per step.
#[test]
fn frame_groups_match_the_reference_and_keep_the_picture() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let fg = |steps| Bm3dParams { frame_groups: Some(true), ..small(steps) };
    for (format, w, h, frames, past, future, steps) in [(PixelFormat::I420, 30, 22, 5, 1, 1, 2), (PixelFormat::GRAY8, 33, 25, 4, 2, 0, 1), (PixelFormat::RGB, 20, 18, 4, 0, 2, 2)] {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let p = bm3d(15.0, fg(steps), past, future);
        let r = run(BackendKind::Reference, BackendOptions::default(), p, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, p, &c.noisy);
        agree(&format!("frame groups {format:?} {w}x{h} past {past} future {future} steps {steps}"), &c, &r, &o);
    }
    let c = clip(PixelFormat::I420, 64, 48, 6, 20.0, &mut rng);
    let cpu = |b: Bm3dParams| run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, b, 1, 1), &c.noisy);
    let target_only = psnr(&c.clean, &cpu(Bm3dParams { frame_groups: Some(false), ..small(2) }));
    let window_out = cpu(Bm3dParams { window_references: Some(true), frame_groups: Some(false), ..small(2) });
    let window = psnr(&c.clean, &window_out);
    let groups_out = cpu(fg(2));
    let groups = psnr(&c.clean, &groups_out);
    eprintln!("target only {target_only:.2} dB, window references {window:.2} dB, per-frame groups {groups:.2} dB");
    assert!(window_out.iter().zip(&groups_out).any(|(a, b)| samples(a) != samples(b)), "per-frame groups gave the output of window references");
    assert!(groups > target_only, "per-frame groups {groups:.2} dB, target only {target_only:.2} dB");
    assert!(groups > window - 0.3, "per-frame groups {groups:.2} dB, window references {window:.2} dB");
    for chunk in [2usize, 3] {
        let chunked = run(BackendKind::Cpu, BackendOptions { chunk_frames: ChunkFrames::Frames(chunk), ..Default::default() }, bm3d(20.0, fg(2), 1, 1), &c.noisy);
        for (i, (a, b)) in groups_out.iter().zip(&chunked).enumerate() {
            assert_eq!(samples(a), samples(b), "frame groups, chunk {chunk}: frame {i} differs");
        }
    }
    assert_eq!(bm3d(10.0, fg(2), 2, 1).frames_needed(), (6, 6));
    assert_eq!(bm3d(10.0, fg(1), 2, 0).frames_needed(), (2, 2));
    let info = VideoInfo::new(PixelFormat::GRAY8, 16, 16).unwrap();
    let d: Denoiser<usize> = Denoiser::new(info, bm3d(10.0, fg(2), 1, 1), &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap();
    assert_eq!(d.latency_frames(), 4);
    let e = Denoiser::<usize>::new(info, bm3d(10.0, fg(2), 4, 4), &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).err().unwrap().to_string();
    assert!(e.contains("frame groups") && e.contains("8"), "{e}");
}

/// A reset mid-stream (a flush) with per-frame groups, after the old stream's jobs left sums and
/// grouped frames behind: the new stream's output is a fresh stream's.
#[test]
fn frame_groups_keep_nothing_across_a_reset() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let old = clip(PixelFormat::I420, 32, 24, 7, 20.0, &mut rng);
    let new = clip(PixelFormat::I420, 32, 24, 6, 20.0, &mut rng);
    let p = bm3d(20.0, Bm3dParams { frame_groups: Some(true), ..small(2) }, 1, 1);
    let opts = BackendOptions { kind: BackendKind::Cpu, ..Default::default() };
    let info = old.noisy[0].info;
    let mut d: Denoiser<usize> = Denoiser::new(info, p, &opts).unwrap();
    let (before, got) = common::stream_reset_stream(&mut d, &old.noisy, &new.noisy);
    assert!(before > 0, "some frames of the old stream were computed before the reset");
    let fresh = run(BackendKind::Cpu, BackendOptions::default(), p, &new.noisy);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), (100..106).collect::<Vec<_>>());
    for (i, ((_, o), f)) in got.iter().zip(&fresh).enumerate() {
        assert_eq!(samples(o), samples(f), "frame {i} after the reset differs from a fresh stream");
    }
}

/// Motion seeds (`motion`) on content moving 6 samples a frame, three times the seed radius: the
/// CPU implementation agrees with the reference (each output's own groups, per-frame groups, I420
/// with its chroma group, 10-bit samples), the output depends on them, and groups that follow the motion clean
/// more than the predictive search alone (which loses the content between frames).
#[test]
fn motion_seeds_match_the_reference_and_follow_fast_motion() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, frame_groups) in [(PixelFormat::GRAY8, 64, 40, 4, false), (PixelFormat::I420, 64, 48, 4, true), (PixelFormat::I420_10LE, 64, 48, 4, true)] {
        let c = moving_clip(format, w, h, frames, 15.0, 6, &mut rng);
        let b = Bm3dParams { frame_groups: Some(frame_groups), motion: Some(false), ..small(2) };
        let with = bm3d(15.0, Bm3dParams { motion: Some(true), ..b }, 1, 1);
        let r = run(BackendKind::Reference, BackendOptions::default(), with, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, with, &c.noisy);
        let what = format!("motion seeds {format:?} {w}x{h} fg {frame_groups}");
        agree(&what, &c, &r, &o);
        let without = run(BackendKind::Cpu, BackendOptions::default(), bm3d(15.0, b, 1, 1), &c.noisy);
        assert!(without.iter().zip(&o).any(|(a, b)| a.planes != b.planes), "{what}: the output does not depend on the motion seeds");
    }
    let c = moving_clip(PixelFormat::GRAY8, 128, 96, 6, 20.0, 7, &mut rng);
    let psnr_of = |motion: bool| psnr(&c.clean, &run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, Bm3dParams { motion: Some(motion), ..small(2) }, 2, 2), &c.noisy));
    let (off, on) = (psnr_of(false), psnr_of(true));
    eprintln!("7 samples a frame, 2 + 2: motion seeds off {off:.2} dB, on {on:.2} dB");
    assert!(on > off + 0.3, "motion seeds {on:.2} dB against {off:.2} dB without");
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
    let off = |steps| Bm3dParams { frame_groups: Some(false), ..small(steps) };
    let latency = |b: Bm3dParams, past, future| Denoiser::<usize>::new(info, bm3d(10.0, b, past, future), &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap().latency_frames();
    assert_eq!(latency(off(2), 2, 1), 2);
    assert_eq!(latency(off(1), 2, 1), 1);
    assert_eq!(bm3d(10.0, off(2), 2, 1).frames_needed(), (4, 2));
    // By default per-frame groups with future frames (each step reads past + future frames on
    // each side), not in a live window.
    assert_eq!(latency(small(2), 2, 1), 6);
    assert_eq!(bm3d(10.0, small(2), 2, 1).frames_needed(), (6, 6));
    assert_eq!(latency(small(2), 2, 0), 0);
    assert_eq!(bm3d(10.0, small(2), 2, 0).frames_needed(), (4, 0));
    // Not where past + future is beyond what they allow: the window's own reach then.
    assert_eq!(bm3d(10.0, small(2), 5, 3).frames_needed(), (10, 6));
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
        (Bm3dParams { hard_block_step: Some(0), ..Default::default() }, "hard block step"),
        (Bm3dParams { wiener_seeds: Some(9), ..Default::default() }, "wiener seeds"),
    ] {
        let e = Denoiser::<usize>::new(info, bm3d(10.0, b, 0, 0), &opts).err().unwrap().to_string();
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

/// Issue 33 item 22 (blotches and streaks in flat areas at high noise): on a smooth frame with
/// noise of sigma 40, the profiles' high-noise values (src/params.rs `BM3D_HIGH_NOISE_SIGMA`)
/// leave far less error, and far less of it in patch-sized blotches (the spread of the error's
/// 8x8 block means), than the low-noise values did there.
#[test]
fn high_noise_leaves_no_blotches_on_flat_areas() {
    // 320 x 240 (1200 blocks): the blotch ratio below was 0.69-0.84 over 16 noise draws; on
    // 160 x 120 (300 blocks) it was 0.66-0.91 over 17 and failed CI's 0.9 once (2026-11-29).
    const W: usize = 320;
    const H: usize = 240;
    let info = VideoInfo::new(PixelFormat::GRAY8, W, H).unwrap();
    let mut clean = OwnedFrame::new(info);
    for y in 0..H {
        for x in 0..W {
            clean.planes[0][y * W + x] = (90.0 + 0.075 * x as f64 + 0.05 * y as f64).round() as u8;
        }
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let noisy = common::clips::noisy(&clean, 40.0, &mut rng);
    let truth = &samples(&clean)[0];
    let blotches = |out: &OwnedFrame| {
        let got = &samples(out)[0];
        let means: Vec<f64> = (0..(H / 8) * (W / 8))
            .map(|b| {
                let (bx, by) = (b % (W / 8) * 8, b / (W / 8) * 8);
                (0..64).map(|i| (by + i / 8) * W + bx + i % 8).map(|k| got[k] as f64 - truth[k] as f64).sum::<f64>() / 64.0
            })
            .collect();
        let m = means.iter().sum::<f64>() / means.len() as f64;
        (means.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / means.len() as f64).sqrt()
    };
    for profile in [Bm3dProfile::Fast, Bm3dProfile::Normal] {
        let low = profile.settings();
        let before = Bm3dParams { profile, search_radius: Some(low.search_radius), group_size: Some(low.group_size), wiener_group_size: Some(low.wiener_group_size), ..Default::default() };
        let old = run(BackendKind::Cpu, BackendOptions::default(), bm3d(40.0, before, 0, 0), std::slice::from_ref(&noisy));
        let new = run(BackendKind::Cpu, BackendOptions::default(), bm3d(40.0, Bm3dParams { profile, ..Default::default() }, 0, 0), std::slice::from_ref(&noisy));
        let (p_old, p_new) = (psnr(std::slice::from_ref(&clean), &old), psnr(std::slice::from_ref(&clean), &new));
        let (b_old, b_new) = (blotches(&old[0]), blotches(&new[0]));
        eprintln!("{profile:?}: PSNR {p_old:.2} -> {p_new:.2} dB, spread of 8x8 error means {b_old:.2} -> {b_new:.2}");
        assert!(p_new > p_old + 1.0, "{profile:?}: PSNR {p_old:.2} -> {p_new:.2} dB");
        assert!(b_new < 0.9 * b_old, "{profile:?}: blotches {b_old:.2} -> {b_new:.2}");
    }
}

/// The Bayesian estimate (`bayes`): the CPU implementation (through the group's Gram matrix)
/// agrees with the reference (the d x d covariance, as the definition writes it) on gray, I420
/// with its chroma group and 10-bit samples, with each output's own groups and per-frame groups;
/// the output depends on it, and on sharp-edged content (where it gains most on the harness:
/// testsrc2, docs/tuning.md) it cleans more than the Wiener step alone.
#[test]
fn bayes_estimate_matches_the_reference_and_cleans_more() {
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, frame_groups) in [(PixelFormat::GRAY8, 48, 40, 3, false), (PixelFormat::I420, 48, 40, 3, true), (PixelFormat::I420_10LE, 40, 32, 3, false)] {
        let c = moving_clip(format, w, h, frames, 15.0, 2, &mut rng);
        let b = Bm3dParams { frame_groups: Some(frame_groups), wiener_group_size: Some(16), ..small(2) };
        let with = bm3d(15.0, Bm3dParams { bayes: Some(true), ..b }, 1, 1);
        let r = run(BackendKind::Reference, BackendOptions::default(), with, &c.noisy);
        let o = run(BackendKind::Cpu, BackendOptions { threads: 3, ..Default::default() }, with, &c.noisy);
        let what = format!("bayes {format:?} {w}x{h} fg {frame_groups}");
        agree(&what, &c, &r, &o);
        let without = run(BackendKind::Cpu, BackendOptions::default(), bm3d(15.0, b, 1, 1), &c.noisy);
        assert!(without.iter().zip(&o).any(|(a, b)| a.planes != b.planes), "{what}: the output does not depend on the Bayesian estimate");
    }
    // 192 x 128: on 96 x 64 the gain varied with the seed from 0.00 to 0.21 dB (CI failed at
    // +0.02); here 20 seeds gave +0.22..+0.43 dB.
    let c = blocks_clip(192, 128, 3, 20.0, &mut rng);
    // The candidate default's settings (docs/tuning.md): `high` with block step 4, search radius 8.
    let candidate = Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), search_radius: Some(8), ..Default::default() };
    let psnr_of = |bayes: bool| psnr(&c.clean, &run(BackendKind::Cpu, BackendOptions::default(), bm3d(20.0, Bm3dParams { bayes: Some(bayes), ..candidate }, 1, 1), &c.noisy));
    let (off, on) = (psnr_of(false), psnr_of(true));
    eprintln!("sigma 20, 1 + 1: Wiener step {off:.2} dB, with the Bayesian estimate {on:.2} dB");
    assert!(on > off + 0.1, "the Bayesian estimate {on:.2} dB against {off:.2} dB without");
}

/// A gray clip of sharp-edged shapes (40 random rectangles of random levels over a gradient, as a
/// test card's blocks and text are), panning one sample a frame, with white Gaussian noise of
/// `sigma`.
fn blocks_clip(w: usize, h: usize, frames: usize, sigma: f64, rng: &mut SmallRng) -> common::clips::Clip {
    use rand::Rng;
    let cw = w + frames;
    let mut field: Vec<f64> = (0..cw * h).map(|e| 60.0 + 100.0 * (e % cw) as f64 / cw as f64).collect();
    for _ in 0..40 {
        let (x0, y0) = (rng.random_range(0..cw), rng.random_range(0..h));
        let (rw, rh) = (rng.random_range(2..24), rng.random_range(2..16));
        let level = rng.random_range(20.0..235.0);
        for y in y0..(y0 + rh).min(h) {
            for x in x0..(x0 + rw).min(cw) {
                field[y * cw + x] = level;
            }
        }
    }
    let info = VideoInfo::new(PixelFormat::GRAY8, w, h).unwrap();
    let clean: Vec<OwnedFrame> = (0..frames).map(|t| common::frame_from(info, |_, x, y| field[y * cw + x + t].round() as u32)).collect();
    let noisy = clean.iter().map(|c| common::clips::noisy(c, sigma, rng)).collect();
    common::clips::Clip { clean, noisy }
}
