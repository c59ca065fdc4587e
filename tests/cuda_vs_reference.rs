//! The CUDA backend against the f64 reference, through `Denoiser`, on fresh random inputs, with
//! the device output frames poisoned before every launch (unwritten samples would show) and the
//! host output frames poisoned before every pop. The seed is printed; rerun a failure with
//! `NLM_TEST_SEED=<seed>`. Without a CUDA device (and NVRTC) every test prints a visible
//! "SKIPPED" line and passes.
//!
//! Tolerance as for the CPU backend: 8-bit outputs differ by at most 1 code value, deeper formats
//! by at most one 8-bit code value in stored units. On smooth content differences (for 16-bit
//! formats: of more than 1/32 of an 8-bit code value) must also be rare (<= 1%). On uniform random content they need not be: there the best offset and the centre
//! often dominate with equal weights, the average lands on an exact .5, and the f64 reference
//! rounds it by weights below 1e-7 of the total, which float accumulation (the kernel's) cannot
//! resolve. The count is printed; the tolerance still holds for every sample.

mod common;

use common::{assert_padding_kept, base, case, compare, denoise, gpu_or_skip, inputs, seed, tolerance, Case, Content, Waves};
use nlmdenoise::device::Backend;
use nlmdenoise::BackendOptions;
use nlmdenoise::{BackendKind, ChromaMode, Denoiser, OwnedFrame, Params, PixelFormat, PlaneSelection, Weighting};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const POISON: u8 = 0x5C;

/// Frequencies of this file's smooth test content.
const WAVES: Waves = Waves { x: 0.27, y: 0.19, t: 0.3 };

fn cuda_backend(depth: usize) -> Box<dyn Backend> {
    let opts = BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, ..Default::default() };
    let mut b = nlmdenoise::backends::cuda(&opts).unwrap();
    b.set_poison_outputs(true);
    Box::new(b)
}

fn run(backend: Box<dyn Backend>, c: &Case, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::with_backend(inputs[0].info, c.params, backend).unwrap();
    denoise(d, inputs, c.extra_out, POISON, c.retune)
}

/// Runs both backends; returns the largest difference seen (stored units).
fn check(c: &Case, rng: &mut SmallRng) -> u32 {
    let inputs = inputs(c, WAVES, rng);
    let reference = run(Box::new(nlmdenoise::backends::reference()), c, &inputs);
    let gpu = run(cuda_backend(c.depth), c, &inputs);
    // Counted as differing, as in tests/cpu_vs_reference.rs: any difference for 8- and 10-bit
    // formats; for 16-bit formats more than 1/32 of an 8-bit code value (float accumulation carries
    // about 1e-7 relative error, so a result within that of an exact .5 may round either way: on a
    // 17x9 GRAY16 frame 5 of 459 samples once differed by one 16-bit unit). The tolerance still
    // holds for every sample.
    let tol = tolerance(c.format);
    let notable = if tol <= 4 { 0 } else { tol / 32 };
    let diff = compare(c, "cuda", &reference, &gpu, &inputs, tol, notable);
    assert_padding_kept(c, &reference, &gpu, POISON);
    let (total, differing) = (diff.total, diff.differing);
    if matches!(c.content, Content::Smooth { .. }) {
        assert!(differing * 100 <= total.max(100), "{c:?}: {differing} of {total} samples differ by more than {notable} (more than 1%)");
    }
    eprintln!("{:?} {}x{} {:?}: {differing}/{total} differ, max {}", c.format, c.width, c.height, c.content, diff.max);
    diff.max
}

#[test]
fn sizes_and_formats() {
    if !gpu_or_skip("sizes_and_formats") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let formats = [PixelFormat::I420, PixelFormat::NV12, PixelFormat::Y444, PixelFormat::RGBA, PixelFormat::P010_10LE, PixelFormat::GRAY16_LE, PixelFormat::GRAY8];
    for (w, h) in [(1, 1), (3, 5), (17, 9), (64, 48)] {
        for f in formats {
            for content in [Content::Uniform, Content::Smooth { amp: 12 }] {
                check(&Case { content, ..case(f, w, h, base()) }, &mut rng);
            }
        }
    }
}

#[test]
fn chroma_modes() {
    if !gpu_or_skip("chroma_modes") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (fmt, w, h) in [(PixelFormat::I420, 64, 48), (PixelFormat::I420, 17, 9), (PixelFormat::Y42B, 17, 9), (PixelFormat::NV12, 3, 5), (PixelFormat::I420, 1, 1)] {
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let p = Params { chroma_mode: ChromaMode::LumaGuided, weighting, strength: if weighting == Weighting::Bisquare { 16.0 } else { 10.0 }, ..base() };
            check(&case(fmt, w, h, p), &mut rng);
        }
    }
    let p = Params { chroma_mode: ChromaMode::LumaGuided, patch_radius: 0, ..base() };
    check(&case(PixelFormat::I420, 17, 9, p), &mut rng);
    let p = Params { chroma_mode: ChromaMode::Joint, sigma: Some(4.0), ..base() };
    for (w, h) in [(64, 48), (3, 5), (1, 1)] {
        check(&case(PixelFormat::Y444, w, h, p), &mut rng);
    }
    for weighting in [Weighting::Welsch, Weighting::Bisquare] {
        let p = Params { weighting, strength: 15.0, ..base() };
        check(&case(PixelFormat::RGBA, 64, 48, p), &mut rng);
        check(&Case { content: Content::Uniform, ..case(PixelFormat::RGBA, 17, 9, Params { strength: 60.0, ..p }) }, &mut rng);
    }
    for planes in [PlaneSelection::Luma, PlaneSelection::Chroma] {
        check(&case(PixelFormat::NV12, 17, 9, Params { planes, ..base() }), &mut rng);
    }
}

#[test]
fn deep_formats() {
    if !gpu_or_skip("deep_formats") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for fmt in [PixelFormat::GRAY16_LE, PixelFormat::P010_10LE, PixelFormat::I420_10LE, PixelFormat::I422_10LE] {
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let p = Params { weighting, strength: 14.0, chroma_strength: 14.0, ..base() };
            check(&case(fmt, 64, 48, p), &mut rng);
            check(&case(fmt, 3, 5, p), &mut rng);
            check(&Case { content: Content::Uniform, ..case(fmt, 17, 9, p) }, &mut rng);
        }
    }
}

#[test]
fn weightings_sigma_and_wref() {
    if !gpu_or_skip("weightings_sigma_and_wref") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for weighting in [Weighting::Welsch, Weighting::Bisquare] {
        for wref in [0.0, 1.0, 2.0] {
            for sigma in [None, Some(5.0)] {
                let p = Params { weighting, wref, sigma, strength: 12.0, chroma_strength: 20.0, ..base() };
                check(&case(PixelFormat::I420, 17, 9, p), &mut rng);
            }
        }
        // Weights far below float's range: the relative (online) weights still match f64.
        let p = Params { weighting, wref: 0.0, strength: 0.5, chroma_strength: 0.5, ..base() };
        check(&Case { content: Content::Uniform, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
        let p = Params { weighting, strength: 3.0, chroma_strength: 3.0, ..base() };
        check(&Case { content: Content::Uniform, ..case(PixelFormat::I420, 64, 48, p) }, &mut rng);
    }
}

#[test]
fn temporal_windows_and_pipeline_depths() {
    if !gpu_or_skip("temporal_windows_and_pipeline_depths") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for depth in [0, 1, 3] {
        let p = Params { temporal_past: 2, temporal_future: 1, ..base() };
        check(&Case { frames: 7, depth, ..case(PixelFormat::I420, 64, 48, p) }, &mut rng);
        let p = Params { temporal_past: 2, temporal_future: 1, chroma_mode: ChromaMode::LumaGuided, weighting: Weighting::Bisquare, strength: 18.0, ..base() };
        check(&Case { frames: 5, depth, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
    }
    let p = Params { temporal_past: 2, temporal_future: 1, wref: 2.0, ..base() };
    check(&Case { frames: 5, depth: 2, ..case(PixelFormat::RGBA, 17, 9, p) }, &mut rng);
    check(&Case { frames: 4, depth: 2, ..case(PixelFormat::P010_10LE, 17, 9, p) }, &mut rng);
    let p = Params { temporal_past: 0, temporal_future: 3, ..base() };
    check(&Case { frames: 6, depth: 1, ..case(PixelFormat::GRAY8, 33, 20, p) }, &mut rng);
    // Search radius 0, one past frame, wref 1: every sample is (previous + centre) / 2 with equal
    // weights, an exact tie half the time, which the f64 reference rounds by the last bit of its
    // glibc exp(); the GPU's exp may differ by one ulp, so only the tolerance is checked here
    // (uniform content skips the rarity rule), and wref 2 (no ties) checks the rest.
    let p = Params { temporal_past: 1, temporal_future: 0, search_radius: 0, ..base() };
    check(&Case { frames: 4, content: Content::Uniform, ..case(PixelFormat::I420, 3, 5, p) }, &mut rng);
    check(&Case { frames: 4, ..case(PixelFormat::I420, 3, 5, Params { wref: 2.0, ..p }) }, &mut rng);
    // Strength, weighting and sigma changed mid-stream (no reconfigure, same compiled structure).
    let p = Params { temporal_past: 2, ..base() };
    let q = Params { strength: 25.0, weighting: Weighting::Bisquare, sigma: Some(3.0), ..p };
    check(&Case { frames: 6, depth: 2, retune: Some((3, q)), ..case(PixelFormat::I420, 64, 48, p) }, &mut rng);
}

#[test]
fn benchmark_parameters_and_large_radii() {
    if !gpu_or_skip("benchmark_parameters_and_large_radii") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    // R-live and R-knlm on frames of several tiles (partial tiles at the right and bottom).
    let live = Params { search_radius: 3, patch_radius: 2, temporal_past: 2, ..Params::default() };
    check(&Case { frames: 4, depth: 2, ..case(PixelFormat::I420, 150, 70, live) }, &mut rng);
    let knlm = Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..Params::default() };
    check(&Case { frames: 4, depth: 2, ..case(PixelFormat::I420, 150, 70, knlm) }, &mut rng);
    for (w, h) in [(1, 1), (3, 5), (9, 7)] {
        let p = Params { search_radius: 12, patch_radius: 7, strength: 20.0, ..base() };
        check(&Case { frames: 2, ..case(PixelFormat::GRAY8, w, h, p) }, &mut rng);
    }
    let p = Params { search_radius: 6, patch_radius: 3, strength: 30.0, chroma_strength: 30.0, chroma_mode: ChromaMode::Joint, ..base() };
    check(&Case { frames: 2, ..case(PixelFormat::Y444, 40, 37, p) }, &mut rng);
}

/// Patch-wise aggregation in the fused kernel (kernels/nlm/fused.cu, AGG_R) against the
/// reference: the CPU backend's cases, frames of several tiles (each tile computes the weights of
/// its neighbours' edge again: partial tiles at the right and bottom), the fitted setting (patch
/// radius 3, aggregation radius 2, wref 2) with a distance offset, and the largest radii.
#[test]
fn patch_wise_aggregation() {
    if !gpu_or_skip("patch_wise_aggregation") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for c in common::aggregation_cases() {
        check(&c, &mut rng);
    }
    // Frames of several tiles in each chroma mode.
    for (fmt, chroma_mode) in [(PixelFormat::I420, ChromaMode::LumaGuided), (PixelFormat::Y444, ChromaMode::Joint), (PixelFormat::RGBA, ChromaMode::Independent)] {
        check(&case(fmt, 64, 48, Params { chroma_mode, aggregation_radius: 1, strength: 15.0, ..base() }), &mut rng);
    }
    // The fitted setting, live window, on frames of several tiles; NV12 (deinterleaved chroma).
    let fitted = Params { search_radius: 3, patch_radius: 3, aggregation_radius: 2, wref: 2.0, temporal_past: 2, sigma: Some(10.0), ..base() };
    check(&Case { frames: 4, depth: 2, ..case(PixelFormat::I420, 150, 70, fitted) }, &mut rng);
    check(&Case { frames: 3, depth: 1, ..case(PixelFormat::NV12, 97, 61, Params { sigma: None, strength: 12.0, ..fitted }) }, &mut rng);
    let p = Params { search_radius: 12, patch_radius: 7, aggregation_radius: 7, strength: 20.0, ..base() };
    check(&Case { frames: 2, ..case(PixelFormat::GRAY8, 40, 37, p) }, &mut rng);
    // Every other aggregation radius: the row box's shuffles follow the binary digits of 2r + 1.
    for r in 3..=6 {
        let p = Params { search_radius: 2, patch_radius: 6, aggregation_radius: r, strength: 20.0, ..base() };
        check(&Case { frames: 2, ..case(PixelFormat::GRAY8, 45, 31, p) }, &mut rng);
    }
}

/// Patch-wise aggregation where weights of very different sizes meet (the CPU test of that name):
/// a flat half beside a half of random samples; box sums must not lose the tiny weights.
#[test]
fn patch_wise_aggregation_keeps_tiny_weights() {
    if !gpu_or_skip("patch_wise_aggregation_keeps_tiny_weights") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let inputs = common::tiny_weight_frames(&mut rng);
    for c in common::tiny_weight_cases() {
        let reference = run(Box::new(nlmdenoise::backends::reference()), &c, &inputs);
        let gpu = run(cuda_backend(c.depth), &c, &inputs);
        let diff = compare(&c, "cuda", &reference, &gpu, &inputs, 1, 0);
        assert!(diff.differing * 100 <= diff.total, "{c:?}: {} of {} samples differ", diff.differing, diff.total);
    }
}

/// Runs `jobs` on a fresh backend either one launch per job or as one launch of all, and returns
/// the finished frames (device outputs poisoned). Single launches get frames only the backend
/// holds (the output is written into them, as for the engine); batched ones get frames the test
/// keeps a reference to (the output goes into frames of the pool, filled with `fill` first, as
/// for chunked execution).
fn run_jobs(c: &Case, frames: &[nlmdenoise::planar::PlanarFrame], jobs: &[nlmdenoise::window::Job], slots: usize, batched: bool, fill: u8) -> Vec<nlmdenoise::planar::PlanarFrame> {
    use nlmdenoise::device::{Frame, StreamSetup};
    use nlmdenoise::plan::Plan;
    use nlmdenoise::planar::Geometry;
    use std::sync::Arc;
    let info = nlmdenoise::VideoInfo::new(c.format, c.width, c.height).unwrap();
    let geometry = Geometry::from_video_info(&info);
    let plan = Plan::new(&geometry, &c.params).unwrap();
    let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, pipeline_depth: 1, ..Default::default() }).unwrap();
    b.set_poison_outputs(true);
    b.configure(&StreamSetup { geometry: &geometry, plan: &plan, past: 0, future: 0, stored: None, ring_slots: Some(slots) }).unwrap();
    let spares: Vec<Frame> = (0..jobs.len())
        .map(|_| {
            let mut f = b.pool().take(&geometry);
            f.planes.iter_mut().for_each(|p| p.samples.as_bytes_mut().fill(fill));
            f
        })
        .collect();
    spares.into_iter().for_each(|f| b.pool().give(f));
    let mut kept = Vec::new();
    for (slot, f) in frames.iter().enumerate() {
        let mut frame = b.pool().take(&geometry);
        frame.planes.iter_mut().zip(&f.planes).for_each(|(to, from)| to.samples.as_bytes_mut().copy_from_slice(from.samples.as_bytes()));
        let frame = Arc::new(frame);
        if batched {
            kept.push(frame.clone());
        }
        b.submit(slot, frame).unwrap();
    }
    let mut outs = Vec::new();
    if batched {
        b.launch(jobs, &plan).unwrap();
        for _ in jobs {
            outs.push(b.finish().unwrap().into_planar());
        }
    } else {
        for j in jobs {
            b.launch(std::slice::from_ref(j), &plan).unwrap();
            outs.push(b.finish().unwrap().into_planar());
        }
    }
    outs
}

/// A batched launch (one launch per plane group, grid over jobs) gives the same bits as launching
/// the jobs one by one, for several group kinds, window shapes and batch sizes.
#[test]
fn batched_launch_equals_single_launches() {
    if !gpu_or_skip("batched_launch_equals_single_launches") {
        return;
    }
    use nlmdenoise::convert;
    use nlmdenoise::planar::{Geometry, PlanarFrame};
    use nlmdenoise::window::TemporalWindow;
    let mut rng = SmallRng::seed_from_u64(seed());
    let live = Params { search_radius: 3, patch_radius: 2, temporal_past: 2, ..Params::default() };
    let cases = [
        case(PixelFormat::I420, 150, 70, live),
        case(PixelFormat::I420, 33, 20, Params { temporal_past: 1, temporal_future: 1, chroma_mode: ChromaMode::LumaGuided, ..base() }),
        case(PixelFormat::RGBA, 40, 23, Params { temporal_past: 2, weighting: Weighting::Bisquare, strength: 15.0, ..base() }),
        case(PixelFormat::P010_10LE, 17, 9, Params { temporal_past: 1, ..base() }),
        case(PixelFormat::I420, 70, 40, Params { patch_radius: 3, aggregation_radius: 2, wref: 2.0, temporal_past: 2, ..base() }),
        Case { content: Content::Uniform, ..case(PixelFormat::GRAY8, 64, 48, Params { temporal_past: 3, strength: 3.0, ..base() }) },
    ];
    for c in cases {
        let slots = 8;
        let c = Case { frames: slots, ..c };
        let owned = inputs(&c, WAVES, &mut rng);
        let geometry = Geometry::from_video_info(&owned[0].info);
        let frames: Vec<PlanarFrame> = owned
            .iter()
            .map(|f| {
                let mut p = PlanarFrame::zeroed(&geometry);
                convert::unpack(&f.as_ref(), &mut p).unwrap();
                p
            })
            .collect();
        // Jobs of a window sliding over the 8 slots (their targets and references as the engine
        // would assign them), then the drain's jobs with fewer future frames.
        let mut window = TemporalWindow::new(c.params.temporal_past, c.params.temporal_future, slots - c.params.window_frames() as usize);
        let mut jobs = Vec::new();
        for _ in 0..slots {
            window.push(false);
            while let Some(j) = window.next_job() {
                jobs.push(j);
            }
        }
        window.drain();
        while let Some(j) = window.next_job() {
            jobs.push(j);
        }
        let single = run_jobs(&c, &frames, &jobs, slots, false, 0x11);
        for n in [jobs.len(), 3, 1] {
            let mut batched = Vec::new();
            for part in jobs.chunks(n) {
                batched.extend(run_jobs(&c, &frames, part, slots, true, 0x22));
            }
            let info = nlmdenoise::VideoInfo::new(c.format, c.width, c.height).unwrap();
            let plan = nlmdenoise::plan::Plan::new(&Geometry::from_video_info(&info), &c.params).unwrap();
            let written: Vec<usize> = plan.output_planes();
            assert_eq!(batched.len(), single.len());
            for (i, (a, b)) in single.iter().zip(&batched).enumerate() {
                // Planes the plan does not denoise are the input's in both.
                for (p, (pa, pb)) in a.planes.iter().zip(&b.planes).enumerate().filter(|(p, _)| written.contains(p)) {
                    assert!(pa.samples.as_bytes() == pb.samples.as_bytes(), "{:?} {}x{}: job {i} plane {p} differs between single and batched launches ({n} per batch)", c.format, c.width, c.height);
                }
            }
        }
        eprintln!("{:?} {}x{}: {} jobs, batched == single", c.format, c.width, c.height, jobs.len());
    }
}

/// Small and quick: the two benchmark configurations and a batched launch on a frame of a few
/// tiles, for compute-sanitizer's racecheck (which is too slow for the whole file).
#[test]
fn sanitizer_smoke() {
    if !gpu_or_skip("sanitizer_smoke") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let live = Params { search_radius: 3, patch_radius: 2, temporal_past: 2, ..Params::default() };
    check(&Case { frames: 3, depth: 2, ..case(PixelFormat::I420, 70, 40, live) }, &mut rng);
    let knlm = Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..Params::default() };
    check(&Case { frames: 3, depth: 1, content: Content::Uniform, ..case(PixelFormat::I420, 70, 40, knlm) }, &mut rng);
    let aggregated = Params { patch_radius: 3, aggregation_radius: 2, wref: 2.0, sigma: Some(10.0), ..live };
    check(&Case { frames: 3, depth: 2, ..case(PixelFormat::I420, 70, 40, aggregated) }, &mut rng);
}
