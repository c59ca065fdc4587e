//! Every kernel variant the CUDA backend can ask for compiles with NVRTC, without a GPU.
//!
//! Needs libnvrtc: scripts/test.sh installs pip's nvidia-cuda-nvrtc-cu12 and points
//! NLMDENOISE_NVRTC_DIR (or LD_LIBRARY_PATH) at it. Without it the test prints a visible
//! "SKIPPED" line and passes (scripts/test.sh counts it as skipped).

mod common;

use nlmdenoise::device::cuda::loader;
use nlmdenoise::format::PixelFormat;
use nlmdenoise::frame::VideoInfo;
use nlmdenoise::nlm::cuda::launch;
use nlmdenoise::nlm::cuda::variant::{compile_ptx, KernelVariant};
use nlmdenoise::nlm::NlmPlan;
use nlmdenoise::params::{ChromaMode, Params, PlaneSelection, Weighting};
use nlmdenoise::planar::Geometry;

fn nvrtc_or_skip(test: &str) -> bool {
    match loader::ensure_nvrtc() {
        Ok(what) => {
            eprintln!("NVRTC: {what}");
            true
        }
        Err(e) => {
            common::skip(test, &format!("NVRTC not available ({e})"));
            false
        }
    }
}

/// The variants the backend builds for a format and parameters (same path as configure).
fn variants(format: PixelFormat, params: &Params) -> Vec<KernelVariant> {
    let g = Geometry::from_video_info(&VideoInfo::new(format, 64, 48).unwrap());
    let plan = NlmPlan::new(&g, params).unwrap();
    launch::batches(&g, &plan).iter().map(|b| KernelVariant::for_batch(&plan, b, g.bytes_per_sample, true, None, launch::SHARED_PER_SM_H100)).collect()
}

/// Formats and parameters whose kernel variants both GPU paths must compile: every weight-group
/// kind, both sample sizes, both weightings, R-knlm and the radius extremes.
fn variant_cases() -> Vec<(PixelFormat, Params)> {
    let base = Params::default();
    vec![
        (PixelFormat::I420, base),
        (PixelFormat::NV12, Params { weighting: Weighting::Bisquare, ..base }),
        (PixelFormat::I420, Params { chroma_mode: ChromaMode::LumaGuided, ..base }),
        (PixelFormat::Y42B, Params { chroma_mode: ChromaMode::LumaGuided, ..base }),
        (PixelFormat::Y444, Params { chroma_mode: ChromaMode::Joint, ..base }),
        (PixelFormat::RGBA, Params { weighting: Weighting::Bisquare, ..base }),
        (PixelFormat::P010_10LE, base),
        // A distance offset (sigma set): the welsch clamp is built in (DIST_OFFSET).
        (PixelFormat::I420, Params { sigma: Some(10.0), ..base }),
        (PixelFormat::GRAY16_LE, Params { planes: PlaneSelection::Luma, ..base }),
        // R-knlm and the radius extremes.
        (PixelFormat::I420, Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..base }),
        (PixelFormat::I420, Params { search_radius: 0, patch_radius: 0, ..base }),
        (PixelFormat::Y444, Params { search_radius: 12, patch_radius: 7, chroma_mode: ChromaMode::Joint, ..base }),
        (PixelFormat::I420_10LE, Params { search_radius: 12, patch_radius: 7, chroma_mode: ChromaMode::LumaGuided, ..base }),
        // Patch-wise aggregation (AGG_R): the fitted setting with and without a distance offset,
        // luma-guided chroma, 16-bit bisquare, and the largest radii.
        (PixelFormat::I420, Params { patch_radius: 3, aggregation_radius: 2, wref: 2.0, sigma: Some(10.0), ..base }),
        (PixelFormat::I420, Params { patch_radius: 3, aggregation_radius: 2, wref: 2.0, ..base }),
        (PixelFormat::I420, Params { aggregation_radius: 1, chroma_mode: ChromaMode::LumaGuided, ..base }),
        (PixelFormat::GRAY16_LE, Params { aggregation_radius: 2, weighting: Weighting::Bisquare, planes: PlaneSelection::Luma, ..base }),
        (PixelFormat::Y444, Params { search_radius: 12, patch_radius: 7, aggregation_radius: 7, chroma_mode: ChromaMode::Joint, ..base }),
        // Every other aggregation radius (the row box's shuffle pattern follows 2r + 1's digits).
        (PixelFormat::GRAY8, Params { patch_radius: 6, aggregation_radius: 3, ..base }),
        (PixelFormat::GRAY8, Params { patch_radius: 6, aggregation_radius: 4, ..base }),
        (PixelFormat::GRAY8, Params { patch_radius: 6, aggregation_radius: 5, ..base }),
        (PixelFormat::GRAY8, Params { patch_radius: 6, aggregation_radius: 6, ..base }),
    ]
}

#[test]
fn every_variant_compiles_for_hopper_and_turing() {
    if !nvrtc_or_skip("every_variant_compiles_for_hopper_and_turing") {
        return;
    }
    let mut all = Vec::new();
    let cases = variant_cases();
    for (f, p) in cases {
        for v in variants(f, &p) {
            if !all.contains(&v) {
                all.push(v);
            }
        }
    }
    // NLMDENOISE_PTX_DUMP=<dir>: keep the compute_90 PTX (scripts/gpu.sh ptxas reads ptxas -v of it).
    let dump = std::env::var_os("NLMDENOISE_PTX_DUMP").map(std::path::PathBuf::from);
    for arch in ["compute_90", "compute_75"] {
        for (i, v) in all.iter().enumerate() {
            let ptx = compile_ptx(v, arch).unwrap_or_else(|e| panic!("{e}"));
            if let (Some(dir), "compute_90") = (&dump, arch) {
                std::fs::create_dir_all(dir).unwrap();
                let name = format!("v{i:02}_a{}_s{}_g{}_o{}_st{}{}_b{}_{:?}.ptx", v.search_radius, v.patch_radius, v.guides, v.outputs, v.step_x, v.step_y, v.sample_bytes, v.weighting);
                std::fs::write(dir.join(name), ptx.as_bytes()).unwrap();
            }
            assert!(ptx.contains(".entry nlm_fused") && ptx.contains(".entry nlm_exact"), "kernel entries missing in the PTX of {v:?}");
            let target = format!(".target sm_{}", &arch[8..]);
            assert!(ptx.contains(&target), "PTX of {v:?} is not for {arch}");
        }
    }
    eprintln!("compiled {} variants for compute_90 and compute_75", all.len());
}

/// The shipped R-live luma variant: output tile read from the guide window (no separate output
/// staging), the welsch clamp left out without `sigma`, and a register cap of 5 blocks per H100 SM.
#[test]
fn r_live_variant_shape() {
    let v = variants(PixelFormat::I420, &Params::default())[0];
    assert!(v.outputs_are_guides && !v.distance_offset, "{v:?}");
    assert_eq!((v.tile.tile_h, v.tile.run_w, v.tile.dx_group, v.tile.min_blocks), (28, 8, 7, 5));
    assert_eq!(v.shared_bytes(), 44_576);
    let with_sigma = variants(PixelFormat::I420, &Params { sigma: Some(10.0), ..Params::default() })[0];
    assert!(with_sigma.distance_offset);
    assert!(v.defines().contains(&"-DMIN_BLOCKS=5".to_string()) && v.defines().contains(&"-DOUTPUTS_ARE_GUIDES=1".to_string()));
}

/// Phase 1's 16-byte loads are used only where their wider pitches keep the blocks per SM: R-live
/// uses them; at search radius 3 / patch radius 4 they would leave 4 blocks instead of 5.
#[test]
fn vector_loads_never_cost_a_block_per_sm() {
    let live = variants(PixelFormat::I420, &Params::default())[0];
    assert!(live.vec_loads && live.tile.min_blocks == 5, "{live:?}");
    let wide = variants(PixelFormat::I420, &Params { patch_radius: 4, ..Params::default() })[0];
    assert!(!wide.vec_loads && wide.tile.min_blocks == 5, "{wide:?}");
    assert!(wide.tile.vec_loads_possible(wide.search_radius, wide.step_x));
}

#[test]
fn a_broken_variant_reports_nvrtc_log() {
    if !nvrtc_or_skip("a_broken_variant_reports_nvrtc_log") {
        return;
    }
    // A run width that does not tile the 32-wide block trips the kernel's static_assert.
    let mut v = variants(PixelFormat::GRAY8, &Params::default())[0];
    v.tile.run_w = 5;
    let e = compile_ptx(&v, "compute_90").unwrap_err();
    assert!(matches!(e, nlmdenoise::BackendError::Compile(_)), "a compile error by its variant: {e:?}");
    assert!(e.to_string().contains("runs must tile a row"), "{e}");
}

// ---- Multi-pass path (src/nlm/cuda/multipass.rs, kernels/nlm/multipass_*.cu) --------------------

/// Every multipass variant the backend builds for these formats/parameters compiles, for every
/// offsets-per-pass (1..=4) and intermediate (f32, f16, unorm10), with all four entry points.
#[test]
fn every_multipass_variant_compiles() {
    use nlmdenoise::nlm::cuda::multipass::{self, MpVariant};
    use nlmdenoise::nlm::Intermediate;
    if !nvrtc_or_skip("every_multipass_variant_compiles") {
        return;
    }
    let cases = variant_cases();
    let mut all: Vec<MpVariant> = Vec::new();
    for (f, p) in cases {
        let g = Geometry::from_video_info(&VideoInfo::new(f, 64, 48).unwrap());
        let plan = NlmPlan::new(&g, &p).unwrap();
        for b in launch::batches(&g, &plan) {
            for per_pass in 1..=4 {
                for inter in [Intermediate::F32, Intermediate::F16, Intermediate::Unorm10] {
                    let v = MpVariant::new(&plan, &b, g.bytes_per_sample, per_pass, inter);
                    if !all.contains(&v) {
                        all.push(v);
                    }
                }
            }
        }
    }
    // Every variant for Hopper; the three-offset variants also for Turing (older NVRTC targets
    // differ only in code generation). Compiled on all cores (NVRTC is thread-safe).
    let dump = std::env::var_os("NLMDENOISE_PTX_DUMP").map(std::path::PathBuf::from);
    let mut work: Vec<(usize, &MpVariant, &str)> = all.iter().enumerate().map(|(i, v)| (i, v, "compute_90")).collect();
    work.extend(all.iter().enumerate().filter(|(_, v)| v.offsets_per_pass == 3).map(|(i, v)| (i, v, "compute_75")));
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).min(8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(i, v, arch)) = work.get(k) else { break };
                let ptx = multipass::compile_ptx(v, arch).unwrap_or_else(|e| panic!("{e}"));
                for name in multipass::KERNEL_NAMES {
                    assert!(ptx.contains(&format!(".entry {name}")), "no {name} in the PTX of {v:?}");
                }
                assert!(ptx.contains(&format!(".target sm_{}", &arch[8..])), "PTX of {v:?} is not for {arch}");
                if let (Some(dir), "compute_90", true) = (&dump, arch, i % 8 == 0) {
                    std::fs::create_dir_all(dir).unwrap();
                    let name = format!(
                        "mp{i:03}_p{}_{:?}_s{}_g{}_o{}_st{}{}_b{}_{:?}.ptx",
                        v.offsets_per_pass, v.intermediate, v.patch_radius, v.guides, v.outputs, v.step_x, v.step_y, v.sample_bytes, v.weighting
                    );
                    std::fs::write(dir.join(name), ptx.as_str()).unwrap();
                }
            });
        }
    });
    eprintln!("compiled {} multipass variants for compute_90 ({} also for compute_75)", all.len(), work.len() - all.len());
}

// ---- BM3D (src/bm3d/cuda.rs, kernels/bm3d/) ------------------------------------------------------

/// Every BM3D variant the profiles (and the extreme settings) ask for compiles, both entry points
/// of each step and the finish kernel present, for 8- and 16-bit samples.
#[test]
fn every_bm3d_variant_compiles() {
    use nlmdenoise::bm3d::cuda::{compile_ptx as bm3d_ptx, Bm3dVariant};
    use nlmdenoise::bm3d::Bm3dPlan;
    use nlmdenoise::params::{Algorithm, Bm3dParams, Bm3dProfile};
    if !nvrtc_or_skip("every_bm3d_variant_compiles") {
        return;
    }
    let mut all = Vec::new();
    // Low and high noise: the profiles' group sizes differ (src/params.rs BM3D_HIGH_NOISE_SIGMA).
    for (profile, sigma) in [Bm3dProfile::Fast, Bm3dProfile::Normal, Bm3dProfile::High].into_iter().flat_map(|p| [(p, 10.0), (p, 35.0)]) {
        for (format, patch, group) in [(PixelFormat::I420, None, None), (PixelFormat::GRAY16_LE, Some(4), Some(32)), (PixelFormat::RGB, None, Some(1))] {
            let g = Geometry::from_video_info(&VideoInfo::new(format, 64, 48).unwrap());
            let p = Params { algorithm: Algorithm::Bm3d, sigma: Some(sigma), bm3d: Bm3dParams { profile, patch_size: patch, group_size: group, ..Default::default() }, ..Params::default() };
            let plan = Bm3dPlan::new(&g, &p).unwrap();
            let v = Bm3dVariant::for_plan(&plan, g.bytes_per_sample);
            if !all.contains(&v) {
                all.push(v);
            }
        }
    }
    // NLMDENOISE_PTX_DUMP=<dir>: keep the PTX (scripts/gpu.sh ptxas reads ptxas -v of it).
    let dump = std::env::var_os("NLMDENOISE_PTX_DUMP").map(std::path::PathBuf::from);
    for v in &all {
        let ptx = bm3d_ptx(v, "compute_90").unwrap_or_else(|e| panic!("{e}"));
        if let Some(dir) = &dump {
            let name = format!("bm3d_p{}_h{}_w{}_s{}_b{}.ptx", v.patch, v.nmax_hard, v.nmax_wiener, v.seeds, v.sample_bytes);
            std::fs::write(dir.join(name), ptx.as_bytes()).expect("PTX dump");
        }
        for entry in [
            "bm3d_hard",
            "bm3d_wiener",
            "bm3d_finish",
            "bm3d_bayes",
            "bm3d_bayes_frames",
            "bm3d_search_hard",
            "bm3d_search_wiener",
            "bm3d_search_tc_hard",
            "bm3d_search_tc_wiener",
            "bm3d_wiener_match",
            "bm3d_wiener_filter",
            "bm3d_wiener_frames_match",
            "bm3d_wiener_frames_filter",
        ] {
            assert!(ptx.contains(&format!(".entry {entry}")), "{entry} missing in the PTX of {v:?}");
        }
        // Shared memory of the largest group and seed square stays within an H100 block's opt-in limit.
        assert!(v.smem_bytes(true, 3, nlmdenoise::params::BM3D_MAX_SEED_RADIUS) <= 227 * 1024, "{v:?}");
        assert!(4 * nlmdenoise::bm3d::cuda::WARPS as usize * v.bayes_floats() <= 227 * 1024, "{v:?}");
    }
    eprintln!("compiled {} BM3D variants", all.len());
}

// ---- Super-resolution (src/sr/cuda.rs, kernels/sr/) -----------------------------------------------

/// The super-resolution program compiles for 8- and 16-bit samples with its three entry points,
/// and the fuse kernel's tiles fit an H100 block at the largest radii and factor.
#[test]
fn super_resolution_kernels_compile() {
    use nlmdenoise::params::{MAX_PATCH_RADIUS, MAX_SEARCH_RADIUS, SR_MAX_SCALE};
    use nlmdenoise::sr::cuda::{compile_ptx as sr_ptx, fuse_shared_bytes, SrVariant};
    if !nvrtc_or_skip("super_resolution_kernels_compile") {
        return;
    }
    // Both sample sizes, the defaults, the smallest and the largest radii.
    for (sample_bytes, patch_radius, search_radius) in [(1, 2, 3), (2, 2, 3), (1, 0, 0), (1, 1, 2), (2, MAX_PATCH_RADIUS as usize, MAX_SEARCH_RADIUS as usize)] {
        let v = SrVariant { sample_bytes, patch_radius, search_radius };
        let ptx = sr_ptx(&v, "compute_90").unwrap_or_else(|e| panic!("{e}"));
        for entry in ["sr_initial", "sr_residual", "sr_degrade", "sr_fuse"] {
            assert!(ptx.contains(&format!(".entry {entry}")), "{entry} missing in the PTX of {v:?}");
        }
    }
    let most = fuse_shared_bytes(SR_MAX_SCALE as usize, MAX_SEARCH_RADIUS as usize, MAX_PATCH_RADIUS as usize);
    assert!(most <= 227 * 1024, "{most} bytes");
}

/// The stored-frame conversion kernels (src/device/cuda/stored.rs) compile for both sample
/// sizes, with both entry points.
#[test]
fn stored_frame_kernels_compile() {
    if !nvrtc_or_skip("stored_frame_kernels_compile") {
        return;
    }
    for sample_bytes in [1, 2] {
        let ptx = nlmdenoise::device::cuda::stored::compile_ptx(sample_bytes, "compute_90").unwrap_or_else(|e| panic!("{e}"));
        for entry in ["stored_unpack", "stored_pack"] {
            assert!(ptx.contains(&format!(".entry {entry}")), "{entry} missing for {sample_bytes}-byte samples");
        }
    }
}
