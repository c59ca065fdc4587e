//! The multi-pass CUDA path (gpu-kernel=multipass) against the f64 reference, through `Denoiser`,
//! with device output frames poisoned before every launch and host output frames poisoned before
//! every pop. Every group kind (independent planes, joint planes, luma-guided chroma with guide
//! step 2), 8/16-bit samples, welsch/bisquare, sigma, wref, temporal windows, pipeline depths,
//! offsets per pass 1..=4.
//!
//! * f32 intermediates: the CPU tolerance (8-bit: max abs diff <= 1; deeper formats: one 8-bit
//!   code value in stored units), and on smooth content at most 1% of samples differ.
//! * f16 / unorm10 intermediates: the bounds of docs/multipass.md on smooth noisy content
//!   (F16_BOUND / UNORM10_BOUND below: max and mean abs diff in 8-bit code values).
//!
//! Each check prints a "PASS ..." line with its numbers (run with --nocapture). The seed is
//! printed; rerun a failure with `NLM_TEST_SEED=<seed>`. Without a CUDA device every GPU test
//! prints a visible "SKIPPED" line and passes.

mod common;

use common::{base, depth, gpu_or_skip, make_frame, samples, seed, Content, Waves};
use nlmdenoise::device::Backend;
use nlmdenoise::format::ComponentKind;
use nlmdenoise::nlm::{GpuKernel, Intermediate, NlmOptions};
use nlmdenoise::BackendOptions;
use nlmdenoise::{BackendKind, ChromaMode, Denoiser, OwnedFrame, Params, PixelFormat, PlaneSelection, VideoInfo, Weighting};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const POISON: u8 = 0x5C;

/// (max abs diff, mean abs diff) vs the reference, in 8-bit code values, smooth noisy content.
const F16_BOUND: (f64, f64) = (2.0, 0.05);
const UNORM10_BOUND: (f64, f64) = (3.0, 0.25);

/// This file's gradient frequencies (kept, so that a seed reproduces the same inputs as before).
const WAVES: Waves = Waves { x: 0.27, y: 0.19, t: 0.3 };

fn run(backend: Box<dyn Backend>, params: Params, inputs: &[OwnedFrame], retune: Option<(usize, Params)>) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::with_backend(inputs[0].info, params, backend).unwrap();
    common::denoise(d, inputs, 0, POISON, retune)
}

fn multipass(depth: usize, per_pass: u32, intermediate: Intermediate) -> Box<dyn Backend> {
    let opts = BackendOptions {
        kind: BackendKind::Cuda,
        pipeline_depth: depth,
        nlm: NlmOptions { gpu_kernel: GpuKernel::Multipass, offsets_per_pass: per_pass, intermediate, ..Default::default() },
        ..Default::default()
    };
    let mut b = nlmdenoise::backends::cuda(&opts).unwrap();
    b.set_poison_outputs(true);
    Box::new(b)
}

#[derive(Debug, Clone)]
struct Case {
    format: PixelFormat,
    width: usize,
    height: usize,
    params: Params,
    frames: usize,
    content: Content,
    depth: usize,
    per_pass: u32,
    retune: Option<(usize, Params)>,
}

fn case(format: PixelFormat, width: usize, height: usize, params: Params) -> Case {
    Case { format, width, height, params, frames: 3, content: Content::Smooth { amp: 12 }, depth: 0, per_pass: 3, retune: None }
}

/// Differences of the multipass output vs the reference: (max, mean) in 8-bit code values,
/// (differing, total) samples. Pass-through planes must be unchanged.
fn compare(c: &Case, inter: Intermediate, rng: &mut SmallRng) -> (f64, f64, usize, usize) {
    let info = VideoInfo::new(c.format, c.width, c.height).unwrap();
    let inputs: Vec<OwnedFrame> = (0..c.frames).map(|i| make_frame(info, 0, c.content, WAVES, i, rng)).collect();
    let reference = run(Box::new(nlmdenoise::backends::reference()), c.params, &inputs, c.retune);
    let gpu = run(multipass(c.depth, c.per_pass, inter), c.params, &inputs, c.retune);
    let fi = c.format.info();
    let (maxv, shift) = depth(c.format);
    let unit = (((maxv + 1) / 256) << shift).max(1) as f64; // stored units per 8-bit code value
                                                            // Counted as differing: any difference for 8- and 10-bit formats; for 16-bit formats (f32 carries
                                                            // about 1e-6 relative error, about 0.1 stored units) more than 1/32 of a code value, as in
                                                            // tests/cpu_vs_reference.rs. `worst` and `mean` still include every difference.
    let notable = if unit <= 4.0 { 0 } else { (unit / 32.0) as u32 };
    let (mut total, mut differing, mut worst, mut sum) = (0usize, 0usize, 0f64, 0f64);
    for (i, ((r, g), input)) in reference.iter().zip(&gpu).zip(&inputs).enumerate() {
        let (rs, gs, is) = (samples(r), samples(g), samples(input));
        for (ci, comp) in fi.components.iter().enumerate() {
            if comp.kind == ComponentKind::PassThrough {
                assert_eq!(gs[ci], is[ci], "{c:?}: frame {i} component {ci} (pass-through) changed");
                continue;
            }
            for (&a, &b) in rs[ci].iter().zip(&gs[ci]) {
                total += 1;
                if a != b {
                    if a.abs_diff(b) > notable {
                        differing += 1;
                    }
                    let d = a.abs_diff(b) as f64 / unit;
                    worst = worst.max(d);
                    sum += d;
                }
            }
        }
    }
    (worst, sum / total.max(1) as f64, differing, total)
}

/// f32 intermediates: the CPU tolerance.
fn check_f32(c: &Case, rng: &mut SmallRng) {
    let (worst, mean, differing, total) = compare(c, Intermediate::F32, rng);
    let (maxv, _) = depth(c.format);
    // One 8-bit code value; for 8-bit samples exactly 1 stored unit.
    let tol = if maxv == 255 { 1.0 } else { 1.0 + 1e-9 };
    let line = format!("{:?} {}x{} {:?} p={} {:?}: {differing}/{total} differ, max {worst:.3}, mean {mean:.5} (8-bit units)", c.format, c.width, c.height, c.content, c.per_pass, c.params);
    assert!(worst <= tol, "FAIL f32 {line}: tolerance {tol}");
    if matches!(c.content, Content::Smooth { .. }) {
        // At most 1% of the samples, and four on frames of fewer than 400 samples: with search
        // radius 0 a sample averages exactly two candidates, often to an exact .5 that f32
        // rounds either way (run 89: 3 of 108 samples of a 3x5 frame; the tolerance held).
        assert!(differing <= (total / 100).max(4), "FAIL f32 {line}: more than 1% differ");
    }
    println!("PASS f32 {line}");
}

#[test]
fn offsets_per_pass_out_of_range_is_a_clear_error() {
    // Validated before any device probing: runs everywhere.
    for p in [0, 5] {
        let opts = BackendOptions { kind: BackendKind::Cuda, nlm: NlmOptions { gpu_kernel: GpuKernel::Multipass, offsets_per_pass: p, ..Default::default() }, ..Default::default() };
        let e = nlmdenoise::backends::create(&opts).err().unwrap_or_else(|| panic!("offsets_per_pass {p} accepted")).to_string();
        assert!(e.contains("offsets-per-pass") && e.contains("1..=4"), "{e}");
        println!("PASS offsets_per_pass={p} rejected: {e}");
    }
}

#[test]
fn f32_sizes_formats_and_offsets_per_pass() {
    if !gpu_or_skip("f32_sizes_formats_and_offsets_per_pass") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let formats = [PixelFormat::I420, PixelFormat::NV12, PixelFormat::Y444, PixelFormat::RGBA, PixelFormat::P010_10LE, PixelFormat::GRAY16_LE, PixelFormat::GRAY8];
    let mut n = 0u32;
    for (w, h) in [(1, 1), (3, 5), (17, 9), (64, 48)] {
        for f in formats {
            for content in [Content::Uniform, Content::Smooth { amp: 12 }] {
                n += 1;
                check_f32(&Case { content, per_pass: 1 + n % 4, ..case(f, w, h, base()) }, &mut rng);
            }
        }
    }
}

#[test]
fn f32_group_kinds() {
    if !gpu_or_skip("f32_group_kinds") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for per_pass in 1..=4 {
        // Luma-guided chroma (guide step 2 in x and y; Y42B: step 2 in x only).
        for (fmt, w, h) in [(PixelFormat::I420, 64, 48), (PixelFormat::I420, 17, 9), (PixelFormat::Y42B, 17, 9), (PixelFormat::NV12, 3, 5), (PixelFormat::I420, 1, 1)] {
            for weighting in [Weighting::Welsch, Weighting::Bisquare] {
                let p = Params { chroma_mode: ChromaMode::LumaGuided, weighting, strength: if weighting == Weighting::Bisquare { 16.0 } else { 10.0 }, ..base() };
                check_f32(&Case { per_pass, ..case(fmt, w, h, p) }, &mut rng);
            }
        }
        // Joint planes (3 guides, 3 outputs).
        let p = Params { chroma_mode: ChromaMode::Joint, sigma: Some(4.0), ..base() };
        for (w, h) in [(64, 48), (3, 5), (1, 1)] {
            check_f32(&Case { per_pass, ..case(PixelFormat::Y444, w, h, p) }, &mut rng);
        }
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            check_f32(&Case { per_pass, ..case(PixelFormat::RGBA, 64, 48, Params { weighting, strength: 15.0, ..base() }) }, &mut rng);
        }
        for planes in [PlaneSelection::Luma, PlaneSelection::Chroma] {
            check_f32(&Case { per_pass, ..case(PixelFormat::NV12, 17, 9, Params { planes, ..base() }) }, &mut rng);
        }
    }
}

#[test]
fn f32_deep_formats_weightings_sigma_wref() {
    if !gpu_or_skip("f32_deep_formats_weightings_sigma_wref") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for fmt in [PixelFormat::GRAY16_LE, PixelFormat::P010_10LE, PixelFormat::I420_10LE] {
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let p = Params { weighting, strength: 14.0, chroma_strength: 14.0, ..base() };
            check_f32(&case(fmt, 64, 48, p), &mut rng);
            check_f32(&Case { per_pass: 4, ..case(fmt, 3, 5, p) }, &mut rng);
            check_f32(&Case { content: Content::Uniform, per_pass: 2, ..case(fmt, 17, 9, p) }, &mut rng);
        }
    }
    for weighting in [Weighting::Welsch, Weighting::Bisquare] {
        for wref in [0.0, 1.0, 2.0] {
            for sigma in [None, Some(5.0)] {
                let p = Params { weighting, wref, sigma, strength: 12.0, chroma_strength: 20.0, ..base() };
                check_f32(&case(PixelFormat::I420, 17, 9, p), &mut rng);
            }
        }
        // Welsch weights far below float's range: stored as exponents, accumulated relative.
        let p = Params { weighting, wref: 0.0, strength: 0.5, chroma_strength: 0.5, ..base() };
        check_f32(&Case { content: Content::Uniform, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
        let p = Params { weighting, strength: 3.0, chroma_strength: 3.0, ..base() };
        check_f32(&Case { content: Content::Uniform, ..case(PixelFormat::I420, 64, 48, p) }, &mut rng);
    }
}

#[test]
fn f32_temporal_windows_pipeline_depths_retune() {
    if !gpu_or_skip("f32_temporal_windows_pipeline_depths_retune") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for depth in [0, 1, 3] {
        let p = Params { temporal_past: 2, temporal_future: 1, ..base() };
        check_f32(&Case { frames: 7, depth, per_pass: 1 + depth as u32, ..case(PixelFormat::I420, 64, 48, p) }, &mut rng);
        let p = Params { temporal_past: 2, temporal_future: 1, chroma_mode: ChromaMode::LumaGuided, weighting: Weighting::Bisquare, strength: 18.0, ..base() };
        check_f32(&Case { frames: 5, depth, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
    }
    let p = Params { temporal_past: 2, temporal_future: 1, wref: 2.0, ..base() };
    check_f32(&Case { frames: 5, depth: 2, ..case(PixelFormat::RGBA, 17, 9, p) }, &mut rng);
    check_f32(&Case { frames: 4, depth: 2, per_pass: 4, ..case(PixelFormat::P010_10LE, 17, 9, p) }, &mut rng);
    let p = Params { temporal_past: 0, temporal_future: 3, ..base() };
    check_f32(&Case { frames: 6, depth: 1, per_pass: 2, ..case(PixelFormat::GRAY8, 33, 20, p) }, &mut rng);
    // Search radius 0: temporal offsets only (no symmetric pack); and no offset at all.
    let p = Params { temporal_past: 1, temporal_future: 0, search_radius: 0, ..base() };
    check_f32(&Case { frames: 4, ..case(PixelFormat::I420, 3, 5, p) }, &mut rng);
    let p = Params { temporal_past: 0, search_radius: 0, ..base() };
    check_f32(&Case { frames: 2, ..case(PixelFormat::I420, 17, 9, p) }, &mut rng);
    // Strength, weighting and sigma changed mid-stream (new kernels, no reconfigure).
    let p = Params { temporal_past: 2, ..base() };
    let q = Params { strength: 25.0, weighting: Weighting::Bisquare, sigma: Some(3.0), ..p };
    check_f32(&Case { frames: 6, depth: 2, retune: Some((3, q)), ..case(PixelFormat::I420, 64, 48, p) }, &mut rng);
}

#[test]
fn f32_benchmark_parameters_and_large_radii() {
    if !gpu_or_skip("f32_benchmark_parameters_and_large_radii") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let live = Params { search_radius: 3, patch_radius: 2, temporal_past: 2, ..Params::default() };
    let knlm = Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..Params::default() };
    for per_pass in 1..=4 {
        check_f32(&Case { frames: 4, depth: 2, per_pass, ..case(PixelFormat::I420, 150, 70, live) }, &mut rng);
        check_f32(&Case { frames: 4, depth: 2, per_pass, ..case(PixelFormat::I420, 150, 70, knlm) }, &mut rng);
    }
    for (w, h) in [(1, 1), (3, 5), (9, 7)] {
        let p = Params { search_radius: 12, patch_radius: 7, strength: 20.0, ..base() };
        check_f32(&Case { frames: 2, ..case(PixelFormat::GRAY8, w, h, p) }, &mut rng);
    }
    let p = Params { search_radius: 6, patch_radius: 3, strength: 30.0, chroma_strength: 30.0, chroma_mode: ChromaMode::Joint, ..base() };
    check_f32(&Case { frames: 2, ..case(PixelFormat::Y444, 40, 37, p) }, &mut rng);
    let p = Params { search_radius: 4, patch_radius: 3, chroma_mode: ChromaMode::LumaGuided, temporal_past: 1, ..base() };
    check_f32(&Case { frames: 3, ..case(PixelFormat::I420_10LE, 41, 23, p) }, &mut rng);
}

/// f16 and unorm10 intermediates on smooth noisy content stay within the documented bounds.
#[test]
fn reduced_precision_intermediates_are_bounded() {
    if !gpu_or_skip("reduced_precision_intermediates_are_bounded") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    let live = Params { search_radius: 3, patch_radius: 2, temporal_past: 2, ..Params::default() };
    let knlm = Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..Params::default() };
    let cases = [
        Case { frames: 4, ..case(PixelFormat::I420, 96, 64, live) },
        Case { frames: 4, ..case(PixelFormat::I420, 96, 64, knlm) },
        Case { frames: 3, ..case(PixelFormat::I420, 64, 48, Params { chroma_mode: ChromaMode::LumaGuided, weighting: Weighting::Bisquare, strength: 16.0, ..base() }) },
        Case { frames: 3, ..case(PixelFormat::Y444, 64, 48, Params { chroma_mode: ChromaMode::Joint, sigma: Some(4.0), ..base() }) },
        Case { frames: 3, ..case(PixelFormat::P010_10LE, 64, 48, Params { temporal_past: 1, ..base() }) },
        Case { frames: 3, content: Content::Smooth { amp: 25 }, ..case(PixelFormat::GRAY8, 64, 48, Params { strength: 20.0, wref: 2.0, ..base() }) },
    ];
    for (inter, (max_b, mean_b)) in [(Intermediate::F16, F16_BOUND), (Intermediate::Unorm10, UNORM10_BOUND)] {
        for c in &cases {
            for per_pass in [1, 3, 4] {
                let c = Case { per_pass, ..c.clone() };
                let (worst, mean, differing, total) = compare(&c, inter, &mut rng);
                let line = format!(
                    "{inter:?} {:?} {}x{} p={per_pass} a={} s={}: {differing}/{total} differ, max {worst:.3}, mean {mean:.5} (bound max {max_b}, mean {mean_b})",
                    c.format, c.width, c.height, c.params.search_radius, c.params.patch_radius
                );
                assert!(worst <= max_b && mean <= mean_b, "FAIL {line}");
                println!("PASS {line}");
            }
        }
    }
}
