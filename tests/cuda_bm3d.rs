//! BM3D on CUDA against the f64 reference (needs a GPU; skips visibly without one): fresh
//! random and realistic clips, device output frames poisoned before every launch, every format
//! kind, spatial and temporal, one and two steps; batched (chunked) and repeated runs give the
//! same bits; per-frame groups too. Agreement rule as in tests/bm3d.rs: at most 0.5% of samples (16 on frames of fewer than 3200 samples)
//! beyond one 8-bit code value, PSNR within 0.02 dB. Seed printed; rerun with NLM_TEST_SEED.

mod common;

use common::clips::{agree, clip, moving_clip, psnr, Clip};
use common::{gpu_or_skip, samples, seed};
use nlmdenoise::bm3d::Bm3dOptions;
use nlmdenoise::device::ChunkFrames;
use nlmdenoise::BackendOptions;
use nlmdenoise::{Algorithm, BackendKind, Bm3dParams, Bm3dProfile, Denoiser, OwnedFrame, Params, PixelFormat};
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn bm3d(sigma: f32, bm3d: Bm3dParams, past: u32, future: u32) -> Params {
    Params { algorithm: Algorithm::Bm3d, sigma: Some(sigma), temporal_past: past, temporal_future: future, bm3d, ..Params::default() }
}

fn small(steps: u32) -> Bm3dParams {
    Bm3dParams { profile: Bm3dProfile::Fast, steps: Some(steps), search_radius: Some(4), block_step: Some(3), seed_radius: Some(2), ..Default::default() }
}

fn reference(params: Params, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &BackendOptions { kind: BackendKind::Reference, ..Default::default() }).unwrap();
    common::denoise(d, inputs, 3, 0xA7, None)
}

fn cuda(params: Params, inputs: &[OwnedFrame], depth: usize) -> Vec<OwnedFrame> {
    let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, ..Default::default() }).unwrap();
    b.set_poison_outputs(true);
    let d: Denoiser<usize> = Denoiser::with_backend(inputs[0].info, params, Box::new(b)).unwrap();
    common::denoise(d, inputs, 3, 0xA7, None)
}

/// The CUDA backend in chunks of `chunk` frames (batched launches).
fn chunked(params: Params, inputs: &[OwnedFrame], chunk: usize) -> Vec<OwnedFrame> {
    let opts = BackendOptions { kind: BackendKind::Cuda, chunk_frames: ChunkFrames::Frames(chunk), ..Default::default() };
    let d: Denoiser<usize> = Denoiser::new(inputs[0].info, params, &opts).unwrap();
    common::denoise(d, inputs, 0, 0xA7, None)
}

fn same_frames(a: &[OwnedFrame], b: &[OwnedFrame], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: frame counts");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(samples(x), samples(y), "{what}: frame {i} differs");
    }
}

fn check(what: &str, c: &Clip, params: Params, depth: usize) {
    let r = reference(params, &c.noisy);
    let g = cuda(params, &c.noisy, depth);
    agree(&format!("cuda {what}"), c, &r, &g);
}

#[test]
fn spatial_and_temporal_gray_i420() {
    if !gpu_or_skip("spatial_and_temporal_gray_i420") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, frames, past, future, steps, depth) in [
        (PixelFormat::GRAY8, 37, 29, 1, 0, 0, 1, 0),
        (PixelFormat::GRAY8, 37, 29, 2, 0, 0, 2, 1),
        (PixelFormat::I420, 34, 26, 4, 1, 0, 2, 2),
        (PixelFormat::I420, 30, 22, 5, 1, 1, 2, 0),
        (PixelFormat::NV12, 26, 20, 3, 0, 1, 1, 1),
        (PixelFormat::I420, 64, 48, 4, 2, 1, 2, 2),
    ] {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        // Each output's own groups (per-frame groups: frame_groups_match_the_reference).
        let p = bm3d(15.0, Bm3dParams { frame_groups: Some(false), ..small(steps) }, past, future);
        check(&format!("{format:?} {w}x{h} past {past} future {future} steps {steps} depth {depth}"), &c, p, depth);
    }
    // Reference patches in every frame of the window (one launch per frame).
    for (format, w, h, frames, past, future, steps, depth) in [(PixelFormat::I420, 30, 22, 5, 1, 1, 2, 1), (PixelFormat::GRAY8, 33, 25, 3, 2, 0, 1, 0), (PixelFormat::P010_10LE, 24, 18, 4, 0, 2, 2, 2)]
    {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let p = bm3d(15.0, Bm3dParams { window_references: Some(true), frame_groups: Some(false), ..small(steps) }, past, future);
        check(&format!("window references {format:?} {w}x{h} past {past} future {future} steps {steps} depth {depth}"), &c, p, depth);
    }
    // A sparser hard-thresholding step (`hard_block_step`): each output's own groups, window
    // references (the search cache sized per step) and per-frame groups; one step alone.
    for (format, w, h, frames, past, future, steps, depth, refs, frame_groups) in [
        (PixelFormat::I420, 34, 26, 4, 1, 1, 2, 1, false, false),
        (PixelFormat::I420, 30, 22, 5, 1, 1, 2, 0, true, false),
        (PixelFormat::I420, 30, 22, 5, 1, 1, 2, 2, false, true),
        (PixelFormat::GRAY8, 37, 29, 2, 0, 0, 1, 0, false, false),
    ] {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        let b = Bm3dParams { hard_block_step: Some(5), window_references: Some(refs), frame_groups: Some(frame_groups), ..small(steps) };
        check(&format!("hard block step 5 {format:?} {w}x{h} past {past} future {future} steps {steps} depth {depth} refs {refs} fg {frame_groups}"), &c, bm3d(15.0, b, past, future), depth);
    }
    // The Wiener step's own seeds, fewer and more than the hard step's (the kernels' seed lists
    // and the search cache sized for the larger).
    for (past, future, depth, refs, frame_groups, seeds, wiener_seeds) in [(1, 1, 1, false, false, 3, 1), (2, 0, 0, true, false, 2, 4), (1, 1, 2, false, true, 3, 2)] {
        let c = clip(PixelFormat::I420, 30, 22, 5, 15.0, &mut rng);
        let b = Bm3dParams { window_references: Some(refs), frame_groups: Some(frame_groups), seeds: Some(seeds), wiener_seeds: Some(wiener_seeds), ..small(2) };
        check(&format!("wiener seeds {wiener_seeds} (seeds {seeds}) past {past} future {future} depth {depth} refs {refs} fg {frame_groups}"), &c, bm3d(15.0, b, past, future), depth);
    }
}

#[test]
fn formats_patch_sizes_and_tiny_frames() {
    if !gpu_or_skip("formats_patch_sizes_and_tiny_frames") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, k) in [
        (PixelFormat::I420_10LE, 30, 24, 8),
        (PixelFormat::P010_10LE, 24, 18, 8),
        (PixelFormat::GRAY16_LE, 21, 19, 4),
        (PixelFormat::RGB, 22, 20, 8),
        (PixelFormat::BGRA, 20, 16, 4),
        (PixelFormat::Y444, 20, 18, 4),
        (PixelFormat::Y42B, 22, 14, 8),
        (PixelFormat::I420, 7, 5, 8),
        (PixelFormat::GRAY8, 1, 1, 4),
        (PixelFormat::GRAY8, 3, 11, 8),
    ] {
        let c = clip(format, w, h, 2, 12.0, &mut rng);
        check(&format!("{format:?} {w}x{h} k={k}"), &c, bm3d(12.0, Bm3dParams { patch_size: Some(k), ..small(2) }, 1, 0), 1);
    }
}

/// A larger frame with each profile's group sizes (32 for the high profile's Wiener groups), at
/// low and high noise.
#[test]
fn profiles_on_a_larger_frame() {
    if !gpu_or_skip("profiles_on_a_larger_frame") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    // Sigma 35 too: from BM3D_HIGH_NOISE_SIGMA fast groups more (another kernel build); the
    // group threshold follows sigma in every profile.
    for sigma in [20.0, 35.0] {
        let c = clip(PixelFormat::I420, 96, 64, 3, sigma as f64, &mut rng);
        for profile in [Bm3dProfile::Fast, Bm3dProfile::Normal, Bm3dProfile::High] {
            // Radii cut so that the f64 reference stays quick; group sizes and steps are the profile's.
            let p = Bm3dParams { profile, search_radius: Some(5), seed_radius: Some(2), ..Default::default() };
            check(&format!("{profile:?} sigma {sigma}"), &c, bm3d(sigma, p, 1, 1), 2);
        }
    }
}

/// The high profile as users run it (search radius 20, the widest a profile uses), spatial and
/// over a window, on a frame wider than the search window.
#[test]
fn high_profile_at_its_own_radius() {
    if !gpu_or_skip("high_profile_at_its_own_radius") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::I420, 72, 48, 3, 20.0, &mut rng);
    let p = Bm3dParams { profile: Bm3dProfile::High, ..Default::default() };
    check("high spatial", &c, bm3d(20.0, p, 0, 0), 2);
    check("high 1 + 1", &c, bm3d(20.0, p, 1, 1), 2);
}

/// The CUDA backend with the own-frame search on tensor cores (`tensor`, the default where the
/// device has them) or on the CUDA cores.
fn cuda_search(params: Params, inputs: &[OwnedFrame], tensor: bool) -> Vec<OwnedFrame> {
    cuda_options(params, inputs, Bm3dOptions { tensor_search: tensor, ..Default::default() })
}

/// The CUDA backend with these BM3D options, output frames poisoned.
fn cuda_options(params: Params, inputs: &[OwnedFrame], bm3d: Bm3dOptions) -> Vec<OwnedFrame> {
    let opts = BackendOptions { kind: BackendKind::Cuda, pipeline_depth: 1, bm3d, ..Default::default() };
    let mut b = nlmdenoise::backends::cuda(&opts).unwrap();
    b.set_poison_outputs(true);
    let d: Denoiser<usize> = Denoiser::with_backend(inputs[0].info, params, Box::new(b)).unwrap();
    common::denoise(d, inputs, 3, 0xA7, None)
}

/// The own-frame search on tensor cores (kernels/bm3d/search_tc.cu): with 8-bit samples its
/// hard-thresholding distances are exact, so one step gives the f32 search's bits on every tile
/// shape (reference grids that are not a multiple of the block's 4 x 4 patches, block steps 3-5,
/// radii 4-20, planes of two groups); with two steps and with 10-bit samples (f16 pairs split in
/// two) the output agrees with the f64 reference. Needs compute capability 8.0 (skips visibly
/// below: the f32 search alone would be compared with itself).
#[test]
fn tensor_search_matches_the_f32_search() {
    if !gpu_or_skip("tensor_search_matches_the_f32_search") {
        return;
    }
    let cc = cudarc::driver::CudaContext::new(0).unwrap().compute_capability().unwrap();
    if cc.0 < 8 {
        common::skip("tensor_search_matches_the_f32_search", "the device has no f16 mma (compute capability below 8.0)");
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let high = |radius, step, frame_groups| Bm3dParams {
        profile: Bm3dProfile::High,
        search_radius: Some(radius),
        block_step: Some(step),
        seed_radius: Some(2),
        frame_groups: Some(frame_groups),
        ..Default::default()
    };
    for (format, w, h, radius, step, frame_groups) in [
        (PixelFormat::I420, 150, 70, 8, 4, true),
        (PixelFormat::GRAY8, 97, 61, 12, 3, false),
        (PixelFormat::NV12, 66, 42, 4, 5, true),
        (PixelFormat::RGB, 53, 37, 6, 4, false),
        (PixelFormat::GRAY8, 64, 64, 20, 3, true),
    ] {
        let c = clip(format, w, h, 3, 20.0, &mut rng);
        let one = bm3d(20.0, Bm3dParams { steps: Some(1), ..high(radius, step, frame_groups) }, 1, 1);
        let what = format!("{format:?} {w}x{h} radius {radius} step {step} frame groups {frame_groups}");
        same_frames(&cuda_search(one, &c.noisy, true), &cuda_search(one, &c.noisy, false), &format!("{what}, one step"));
        let two = bm3d(20.0, high(radius, step, frame_groups), 1, 1);
        let tensor = cuda_search(two, &c.noisy, true);
        agree(&format!("tensor search {what}, two steps"), &c, &reference(two, &c.noisy), &tensor);
    }
    // Fresh random frames (no structure: many near ties), and 10-bit samples.
    let c = clip(PixelFormat::GRAY8, 70, 45, 3, 80.0, &mut rng);
    let one = bm3d(80.0, Bm3dParams { steps: Some(1), ..high(7, 3, false) }, 1, 1);
    same_frames(&cuda_search(one, &c.noisy, true), &cuda_search(one, &c.noisy, false), "noise, one step");
    let c = clip(PixelFormat::P010_10LE, 90, 50, 3, 20.0, &mut rng);
    let p = bm3d(20.0, high(8, 4, true), 1, 1);
    agree("tensor search P010", &c, &reference(p, &c.noisy), &cuda_search(p, &c.noisy, true));
}

/// The Wiener step's block matching in a launch of its own (kernels/bm3d/group.cu PHASE 1 and 2,
/// the default for Wiener groups of 32) gives the bits of the one launch that does both: each
/// output's own groups, window references, per-frame groups, a spatial window, the Bayesian
/// estimate (which reads the same groups), 10-bit samples, gray and the U+V group of I420, the
/// tensor search on and off (and groups of 8, which never run apart).
#[test]
fn wiener_matching_apart_gives_the_same_bits() {
    if !gpu_or_skip("wiener_matching_apart_gives_the_same_bits") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let high = Bm3dParams { profile: Bm3dProfile::High, search_radius: Some(6), block_step: Some(4), seed_radius: Some(2), ..Default::default() };
    for (format, w, h, p, past, future) in [
        (PixelFormat::I420, 72, 48, Bm3dParams { frame_groups: Some(false), ..small(2) }, 1, 1),
        (PixelFormat::I420, 72, 48, Bm3dParams { frame_groups: Some(false), ..high }, 1, 1),
        (PixelFormat::I420, 72, 48, Bm3dParams { frame_groups: Some(true), ..high }, 1, 1),
        (PixelFormat::GRAY8, 61, 37, high, 0, 0),
        (PixelFormat::I420, 64, 40, Bm3dParams { bayes: Some(true), frame_groups: Some(true), ..high }, 1, 1),
        (PixelFormat::P010_10LE, 48, 32, Bm3dParams { frame_groups: Some(true), ..high }, 2, 0),
    ] {
        let c = clip(format, w, h, 4, 20.0, &mut rng);
        let params = bm3d(20.0, p, past, future);
        for tensor in [true, false] {
            let apart = cuda_options(params, &c.noisy, Bm3dOptions { tensor_search: tensor, wiener_match_apart: true });
            let together = cuda_options(params, &c.noisy, Bm3dOptions { tensor_search: tensor, wiener_match_apart: false });
            same_frames(&apart, &together, &format!("{format:?} {w}x{h} {p:?} past {past} future {future} tensor {tensor}"));
        }
    }
}

/// Chunks (batched launches) and a second run give the same bits as one run a frame at a time.
#[test]
fn batched_and_repeated_runs_are_identical() {
    if !gpu_or_skip("batched_and_repeated_runs_are_identical") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::I420, 80, 48, 9, 20.0, &mut rng);
    let p = bm3d(20.0, Bm3dParams::default(), 1, 1);
    let one = cuda(p, &c.noisy, 2);
    let again = cuda(p, &c.noisy, 0);
    for chunk in [2usize, 4] {
        same_frames(&one, &chunked(p, &c.noisy, chunk), &format!("chunk {chunk}"));
    }
    same_frames(&one, &again, "second run");
    eprintln!("PSNR {:.2} dB (noisy {:.2} dB)", psnr(&c.clean, &one), psnr(&c.clean, &c.noisy));
}

/// Window references keep each frame's own-frame search while the frame stays in the ring
/// (kernels/bm3d/search.cu): a stream, a chunked run (other jobs per launch, so other frames
/// found in the cache) and a shallow pipeline give the bits of frames denoised each in a fresh
/// engine from its own window (nothing kept from other frames), and agree with the f64 reference.
#[test]
fn window_references_reuse_searches_exactly() {
    if !gpu_or_skip("window_references_reuse_searches_exactly") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::I420, 72, 40, 8, 20.0, &mut rng);
    let p = bm3d(20.0, Bm3dParams { profile: Bm3dProfile::High, search_radius: Some(6), seed_radius: Some(2), frame_groups: Some(false), ..Default::default() }, 1, 1);
    let stream = cuda(p, &c.noisy, 2);
    agree("cuda high 1 + 1 (searches kept)", &c, &reference(p, &c.noisy), &stream);
    let shallow = cuda(p, &c.noisy, 0);
    for chunk in [3usize, 5] {
        same_frames(&stream, &chunked(p, &c.noisy, chunk), &format!("chunk {chunk}"));
    }
    same_frames(&stream, &shallow, "depth 0");
    // Each frame from a fresh engine given only its window (nothing kept from other frames).
    for t in 0..c.noisy.len() {
        let lo = t.saturating_sub(2);
        let hi = (t + 3).min(c.noisy.len());
        let alone = cuda(p, &c.noisy[lo..hi], 1);
        assert_eq!(samples(&alone[t - lo]), samples(&stream[t]), "frame {t} differs from a fresh engine's");
    }
}

/// Engines share compiled kernels (the module cache keeps one build per variant, and the search
/// radius is not part of it): an engine configured after another with a smaller search radius
/// must not lower the shared-memory limit the first one's search launches need. It did (run 136:
/// CUDA_ERROR_INVALID_VALUE on the wider engine's next launch); the limit is now the device's.
#[test]
fn engines_with_other_radii_share_the_search_kernels() {
    if !gpu_or_skip("engines_with_other_radii_share_the_search_kernels") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::I420, 72, 40, 5, 20.0, &mut rng);
    let params = |radius| bm3d(20.0, Bm3dParams { profile: Bm3dProfile::High, search_radius: Some(radius), seed_radius: Some(2), ..Default::default() }, 1, 1);
    let alone = cuda(params(12), &c.noisy, 0);
    let opts = BackendOptions { kind: BackendKind::Cuda, pipeline_depth: 0, ..Default::default() };
    let info = c.noisy[0].info;
    let mut wide: Denoiser<usize> = Denoiser::new(info, params(12), &opts).unwrap();
    let mut narrow: Denoiser<usize> = Denoiser::new(info, params(4), &opts).unwrap();
    let mut outs: Vec<Option<OwnedFrame>> = vec![None; c.noisy.len()];
    let pop_all = |d: &mut Denoiser<usize>, outs: &mut Vec<Option<OwnedFrame>>| loop {
        let mut o = OwnedFrame::new(info);
        match d.pop(&mut o.as_mut()).unwrap() {
            Some(tag) => outs[tag] = Some(o),
            None => break,
        }
    };
    let mut narrow_outs = vec![None; c.noisy.len()];
    // The wide engine launches first, then the narrow one is configured and launches, then the
    // wide one goes on.
    for (i, f) in c.noisy.iter().enumerate() {
        wide.push(&f.as_ref(), i).unwrap();
        pop_all(&mut wide, &mut outs);
        if i == 1 {
            for (k, g) in c.noisy[..2].iter().enumerate() {
                narrow.push(&g.as_ref(), k).unwrap();
            }
            narrow.finish_stream().unwrap();
            pop_all(&mut narrow, &mut narrow_outs);
        }
    }
    wide.finish_stream().unwrap();
    pop_all(&mut wide, &mut outs);
    assert!(narrow_outs.iter().take(2).all(|o| o.is_some()), "the narrow engine's frames");
    for (t, (o, a)) in outs.iter().zip(&alone).enumerate() {
        let o = o.as_ref().unwrap_or_else(|| panic!("frame {t} never came out"));
        assert_eq!(samples(o), samples(a), "frame {t} differs from the engine's run alone");
    }
}

/// Per-frame groups on the device (src/bm3d/cuda.rs `frame_groups`: each frame's groups made
/// once per step, members added to their own frames' sums) against the f64 reference on every
/// window shape; a stream, a shallow pipeline and chunks give the same bits; the `high` profile
/// at the candidate default's search (block step 4, radius 8) over 1 + 1 and 2 past.
#[test]
fn frame_groups_match_the_reference() {
    if !gpu_or_skip("frame_groups_match_the_reference") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let fg = |steps| Bm3dParams { frame_groups: Some(true), ..small(steps) };
    for (format, w, h, frames, past, future, steps, depth) in
        [(PixelFormat::I420, 30, 22, 5, 1, 1, 2, 2), (PixelFormat::GRAY8, 33, 25, 4, 2, 0, 1, 1), (PixelFormat::RGB, 20, 18, 4, 0, 2, 2, 0), (PixelFormat::P010_10LE, 24, 18, 5, 1, 1, 2, 1)]
    {
        let c = clip(format, w, h, frames, 15.0, &mut rng);
        check(&format!("frame groups {format:?} {w}x{h} past {past} future {future} steps {steps}"), &c, bm3d(15.0, fg(steps), past, future), depth);
    }
    let c = clip(PixelFormat::I420, 64, 40, 8, 20.0, &mut rng);
    let p = bm3d(20.0, fg(2), 1, 1);
    let stream = cuda(p, &c.noisy, 2);
    agree("cuda frame groups 1 + 1 (8 frames)", &c, &reference(p, &c.noisy), &stream);
    same_frames(&stream, &cuda(p, &c.noisy, 0), "depth 0");
    for chunk in [2usize, 3] {
        same_frames(&stream, &chunked(p, &c.noisy, chunk), &format!("chunk {chunk}"));
    }
    let c = clip(PixelFormat::I420, 72, 48, 4, 20.0, &mut rng);
    let high = Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), search_radius: Some(8), frame_groups: Some(true), ..Default::default() };
    check("high step 4 radius 8 frame groups 1 + 1", &c, bm3d(20.0, high, 1, 1), 2);
    check("high step 4 radius 8 frame groups 2 past", &c, bm3d(20.0, high, 2, 0), 1);
}

/// Motion seeds (the coarse motion of kernels/bm3d/motion.cu, the first seed's companion in the
/// group kernels' predictive search) on content moving 6 samples a frame, three times the seed
/// radius: the device agrees with the f64 reference on 8-bit, 10-bit (the fields are of the
/// stored integers) and I420 with its chroma group, for each output's own groups, window
/// references and per-frame groups; the output depends on them; a stream reusing the fields kept
/// for the ring's frames gives the bits of a shallow pipeline and of chunks; and the groups that
/// follow the motion clean more than the predictive search alone.
#[test]
fn motion_seeds_match_the_reference_and_follow_fast_motion() {
    if !gpu_or_skip("motion_seeds_match_the_reference_and_follow_fast_motion") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let high = Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), search_radius: Some(8), ..Default::default() };
    for (format, w, h, frames, b, past, future) in [
        (PixelFormat::GRAY8, 64, 40, 4, Bm3dParams { frame_groups: Some(false), ..small(2) }, 1, 1),
        (PixelFormat::I420, 64, 48, 4, Bm3dParams { frame_groups: Some(true), ..small(2) }, 1, 1),
        (PixelFormat::I420_10LE, 64, 48, 4, Bm3dParams { frame_groups: Some(true), ..small(2) }, 1, 1),
        (PixelFormat::I420, 72, 48, 4, Bm3dParams { frame_groups: Some(false), window_references: Some(true), ..high }, 2, 0),
        (PixelFormat::GRAY8, 72, 48, 5, Bm3dParams { frame_groups: Some(true), ..high }, 2, 2),
    ] {
        let c = moving_clip(format, w, h, frames, 15.0, 6, &mut rng);
        let with = bm3d(15.0, Bm3dParams { motion: Some(true), ..b }, past, future);
        let b = Bm3dParams { motion: Some(false), ..b };
        let what = format!("motion seeds {format:?} {w}x{h} {past} + {future} fg {:?} wr {:?}", b.frame_groups, b.window_references);
        let g = cuda(with, &c.noisy, 2);
        agree(&format!("cuda {what}"), &c, &reference(with, &c.noisy), &g);
        let without = cuda(bm3d(15.0, b, past, future), &c.noisy, 2);
        assert!(without.iter().zip(&g).any(|(a, b)| samples(a) != samples(b)), "{what}: the output does not depend on the motion seeds");
    }
    let c = moving_clip(PixelFormat::I420, 96, 64, 8, 20.0, 5, &mut rng);
    let p = bm3d(20.0, Bm3dParams { motion: Some(true), frame_groups: Some(true), ..small(2) }, 1, 1);
    let stream = cuda(p, &c.noisy, 2);
    same_frames(&stream, &cuda(p, &c.noisy, 0), "motion seeds, depth 0");
    same_frames(&stream, &chunked(p, &c.noisy, 3), "motion seeds, chunk 3");
    let c = moving_clip(PixelFormat::GRAY8, 128, 96, 6, 20.0, 7, &mut rng);
    let psnr_of = |motion: bool| psnr(&c.clean, &cuda(bm3d(20.0, Bm3dParams { motion: Some(motion), ..small(2) }, 2, 2), &c.noisy, 2));
    let (off, on) = (psnr_of(false), psnr_of(true));
    eprintln!("cuda, 7 samples a frame, 2 + 2: motion seeds off {off:.2} dB, on {on:.2} dB");
    assert!(on > off + 0.3, "motion seeds {on:.2} dB against {off:.2} dB without");
}

/// A reset mid-stream (a flush) with per-frame groups on the device, after the old stream left
/// sums and grouped frames behind: the new stream's output is a fresh stream's.
#[test]
fn frame_groups_keep_nothing_across_a_reset() {
    if !gpu_or_skip("frame_groups_keep_nothing_across_a_reset") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let old = clip(PixelFormat::I420, 32, 24, 7, 20.0, &mut rng);
    let new = clip(PixelFormat::I420, 32, 24, 6, 20.0, &mut rng);
    let p = bm3d(20.0, Bm3dParams { frame_groups: Some(true), ..small(2) }, 1, 1);
    let info = old.noisy[0].info;
    let b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, pipeline_depth: 1, ..Default::default() }).unwrap();
    let mut d: Denoiser<usize> = Denoiser::with_backend(info, p, Box::new(b)).unwrap();
    let (before, got) = common::stream_reset_stream(&mut d, &old.noisy, &new.noisy);
    assert!(before > 0, "some frames of the old stream were computed before the reset");
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), (100..106).collect::<Vec<_>>());
    let fresh = cuda(p, &new.noisy, 1);
    for (i, ((_, o), f)) in got.iter().zip(&fresh).enumerate() {
        assert_eq!(samples(o), samples(f), "frame {i} after the reset differs from a fresh stream");
    }
}

/// A short case for compute-sanitizer (memcheck, racecheck): both steps, a temporal window,
/// chroma planes matched together; with and without window references; the Bayesian estimate.
#[test]
fn sanitizer_smoke_bm3d() {
    if !gpu_or_skip("sanitizer_smoke_bm3d") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let c = clip(PixelFormat::I420, 40, 24, 3, 15.0, &mut rng);
    let g = cuda(bm3d(15.0, Bm3dParams { frame_groups: Some(false), ..small(2) }, 1, 1), &c.noisy, 1);
    assert!(psnr(&c.clean, &g) > psnr(&c.clean, &c.noisy) + 2.0);
    // Window references: the search kernels and Wiener groups of 32.
    let high = Bm3dParams { profile: Bm3dProfile::High, search_radius: Some(4), seed_radius: Some(1), frame_groups: Some(false), ..Default::default() };
    let h = cuda(bm3d(15.0, high, 1, 1), &c.noisy, 1);
    assert!(psnr(&c.clean, &h) > psnr(&c.clean, &c.noisy) + 2.0);
    // Per-frame groups: members added to the sums of several frames.
    let f = cuda(bm3d(15.0, Bm3dParams { frame_groups: Some(true), ..high }, 1, 1), &c.noisy, 1);
    assert!(psnr(&c.clean, &f) > psnr(&c.clean, &c.noisy) + 2.0);
    // Motion seeds: the motion kernels and the companion seeds (a plane of two blocks of 32 x 32
    // across and one down: 64 x 32).
    let m = moving_clip(PixelFormat::I420, 64, 32, 3, 15.0, 6, &mut rng);
    let g = cuda(bm3d(15.0, Bm3dParams { motion: Some(true), frame_groups: Some(true), ..small(2) }, 1, 1), &m.noisy, 1);
    assert!(psnr(&m.clean, &g) > psnr(&m.clean, &m.noisy) + 2.0);
    // The Bayesian estimate: groups of 32 (window references) and per-frame groups.
    for frame_groups in [false, true] {
        let b = cuda(bm3d(15.0, Bm3dParams { bayes: Some(true), frame_groups: Some(frame_groups), ..high }, 1, 1), &c.noisy, 1);
        assert!(psnr(&c.clean, &b) > psnr(&c.clean, &c.noisy) + 2.0);
    }
}

/// The Bayesian estimate (kernels/bm3d/bayes.cu, through the group's Gram matrix in f32) against
/// the reference (the d x d covariance in f64): gray, I420 with its chroma group, 10-bit samples,
/// groups of 16 and 32, patches of 4 and 8, each output's own groups and per-frame groups, window
/// references; the output depends on it; streamed, unpipelined and chunked runs give the same bits.
#[test]
fn bayes_estimate_matches_the_reference() {
    if !gpu_or_skip("bayes_estimate_matches_the_reference") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let high = Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), search_radius: Some(8), ..Default::default() };
    for (format, w, h, frames, b, past, future) in [
        (PixelFormat::GRAY8, 64, 40, 3, Bm3dParams { frame_groups: Some(false), wiener_group_size: Some(16), ..small(2) }, 1, 1),
        (PixelFormat::I420, 64, 48, 3, Bm3dParams { frame_groups: Some(true), wiener_group_size: Some(32), ..small(2) }, 1, 1),
        (PixelFormat::I420_10LE, 48, 40, 3, Bm3dParams { frame_groups: Some(false), patch_size: Some(4), ..small(2) }, 1, 0),
        (PixelFormat::GRAY8, 72, 48, 3, Bm3dParams { frame_groups: Some(false), window_references: Some(true), ..high }, 1, 1),
        (PixelFormat::I420, 72, 48, 3, Bm3dParams { frame_groups: Some(true), ..high }, 1, 1),
    ] {
        let c = moving_clip(format, w, h, frames, 15.0, 2, &mut rng);
        let with = bm3d(15.0, Bm3dParams { bayes: Some(true), ..b }, past, future);
        let what = format!("bayes {format:?} {w}x{h} {past} + {future} fg {:?} wr {:?} patch {:?}", b.frame_groups, b.window_references, b.patch_size);
        let g = cuda(with, &c.noisy, 2);
        agree(&format!("cuda {what}"), &c, &reference(with, &c.noisy), &g);
        let without = cuda(bm3d(15.0, b, past, future), &c.noisy, 2);
        assert!(without.iter().zip(&g).any(|(a, b)| samples(a) != samples(b)), "{what}: the output does not depend on the Bayesian estimate");
    }
    let c = moving_clip(PixelFormat::I420, 96, 64, 6, 20.0, 3, &mut rng);
    let p = bm3d(20.0, Bm3dParams { bayes: Some(true), frame_groups: Some(true), ..small(2) }, 1, 1);
    let stream = cuda(p, &c.noisy, 2);
    same_frames(&stream, &cuda(p, &c.noisy, 0), "bayes, depth 0");
    same_frames(&stream, &chunked(p, &c.noisy, 3), "bayes, chunk 3");
}
