//! The fused kernel's build variants: everything that is a compile-time constant of one build of
//! kernels/nlm/fused.cu and kernels/nlm/exact.cu, and their compilation through the shared NVRTC
//! caches ([`crate::device::cuda::module`]).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction};

use super::launch::{self, Batch, TileConfig, NLM_ARGS_BYTES};
use crate::device::cuda::module;
use crate::device::cuda::raw::Context as _;
use crate::nlm::NlmPlan;
use crate::params::Weighting;

/// The kernel sources, in the order they are concatenated into one program.
pub const SOURCES: &[(&str, &str)] = crate::kernel_sources!["nlm/args.cuh", "common/border.cuh", "nlm/weight.cuh", "nlm/fused.cu", "nlm/exact.cu"];

/// Name of the program in NVRTC's logs and the caches.
pub const PROGRAM_NAME: &str = "nlm_fused.cu";

pub const KERNEL_NAME: &str = "nlm_fused";
pub const EXACT_KERNEL_NAME: &str = "nlm_exact";

/// Half-width of the rounding-tie window (8-bit code values) below which the fused kernel sends a
/// sample to the exact f64 path; as the CPU backend, only for 8- and 10-bit samples.
pub const TIE_WINDOW: f64 = 5.0e-4;

/// The fused kernel and its exact f64 companion, from one module.
#[derive(Debug, Clone)]
pub struct Kernels {
    pub fused: CudaFunction,
    pub exact: CudaFunction,
}

/// Everything that is a compile-time constant of one kernel build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelVariant {
    pub search_radius: u32,
    pub patch_radius: u32,
    /// Patch-wise aggregation radius (kernels/nlm/fused.cu, AGG_R; 0: pixel-wise).
    pub aggregation_radius: u32,
    pub guides: u32,
    pub outputs: u32,
    pub step_x: u32,
    pub step_y: u32,
    pub sample_bytes: u32,
    /// Stored units per 8-bit code value (1, 4, 64 or 256).
    pub scale_to_8bit: u32,
    /// Send samples near a rounding tie to the exact f64 path (bit-exact rounding like the
    /// reference; costs throughput). Samples whose weights float cannot represent always go.
    pub exact_ties: bool,
    pub weighting: Weighting,
    /// The plan subtracts a distance offset (`sigma` set): welsch exponents need their clamp
    /// (kernels/nlm/weight.cuh, DIST_OFFSET); without one the clamp is left out of the build.
    pub distance_offset: bool,
    /// The output planes are the guide planes (`Batch::outputs_are_guides`).
    pub outputs_are_guides: bool,
    /// Phase 1 reads with 16-byte loads (kernels/nlm/fused.cu, VEC_LOADS): where possible and
    /// where their wider pitches do not cost a resident block per SM.
    pub vec_loads: bool,
    pub tile: TileConfig,
}

impl KernelVariant {
    /// The variant that computes `batch` of `plan` for samples of `sample_bytes`; `tile` None =
    /// the default tile for the shape (`TileConfig::choose`); an automatic register cap
    /// (`min_blocks` 0) is resolved for a device with `shared_per_sm` bytes of shared memory per
    /// SM. The fused backend, the multi-pass backend (for its exact companion) and the compile test
    /// build variants only through here, so that equal shapes share the NVRTC and module caches.
    pub fn for_batch(plan: &NlmPlan, batch: &Batch, sample_bytes: usize, exact_ties: bool, tile: Option<TileConfig>, shared_per_sm: usize) -> Self {
        let mut v = KernelVariant {
            search_radius: plan.search_radius,
            patch_radius: plan.patch_radius,
            aggregation_radius: plan.aggregation_radius,
            guides: batch.guides,
            outputs: batch.outputs,
            step_x: batch.step_x,
            step_y: batch.step_y,
            sample_bytes: sample_bytes as u32,
            scale_to_8bit: plan.scale_to_8bit as u32,
            exact_ties,
            weighting: plan.weighting,
            distance_offset: plan.distance_offset != 0.0,
            outputs_are_guides: batch.outputs_are_guides,
            vec_loads: false,
            tile: tile.unwrap_or_else(|| TileConfig::choose(plan.search_radius, plan.patch_radius, plan.aggregation_radius, batch.guides, batch.step_x, batch.step_y)),
        };
        // 16-byte loads save phase-1 instructions, but their pitches (and rounded reads) take
        // more shared memory: not where that leaves fewer blocks per SM (a search radius 3 /
        // patch radius 4 tile went from 5 to 4 blocks and ran 41% slower, H100 run 46).
        if v.tile.vec_loads_possible(v.search_radius, v.step_x) {
            let blocks = |vec: bool| launch::auto_min_blocks(KernelVariant { vec_loads: vec, ..v }.shared_bytes(), shared_per_sm);
            v.vec_loads = blocks(true) >= blocks(false);
        }
        if v.tile.min_blocks == 0 {
            v.tile.min_blocks = launch::auto_min_blocks(v.shared_bytes(), shared_per_sm);
        }
        v
    }

    /// Dynamic shared memory of one fused block of this variant, in bytes.
    pub fn shared_bytes(&self) -> usize {
        let staged_outputs = if self.outputs_are_guides { 0 } else { self.outputs };
        self.tile.shared_bytes(self.search_radius, self.patch_radius, self.guides, staged_outputs, self.step_x, self.step_y, self.vec_loads)
    }

    /// The `-D` definitions of this variant.
    pub fn defines(&self) -> Vec<String> {
        let mut d = module::defines(&[
            ("SEARCH_R", self.search_radius),
            ("PATCH_R", self.patch_radius),
            ("AGG_R", self.aggregation_radius),
            ("N_GUIDES", self.guides),
            ("N_OUTPUTS", self.outputs),
            ("STEP_X", self.step_x),
            ("STEP_Y", self.step_y),
            ("SAMPLE_BYTES", self.sample_bytes),
            ("WEIGHTING", launch::weighting_define(self.weighting)),
            ("DIST_OFFSET", self.distance_offset as u32),
            ("OUTPUTS_ARE_GUIDES", self.outputs_are_guides as u32),
            ("VEC_LOADS_WANTED", self.vec_loads as u32),
            ("TILE_H", self.tile.tile_h),
            ("RUN_W", self.tile.run_w),
            ("DX_GROUP", self.tile.dx_group),
            ("THREADS", self.tile.threads),
            ("MIN_BLOCKS", self.tile.min_blocks),
            ("NLM_ARGS_BYTES", NLM_ARGS_BYTES as u32),
            // The kernel checks at compile time that its layout needs exactly this much.
            ("SMEM_BYTES", self.shared_bytes() as u32),
        ]);
        // Aggregated builds have no exact path (kernels/nlm/fused.cu, AGG_R).
        let ties = self.exact_ties && self.scale_to_8bit <= 4 && self.aggregation_radius == 0;
        d.push(format!("-DTIE_WINDOW={:e}f", if ties { TIE_WINDOW * self.scale_to_8bit as f64 } else { 0.0 }));
        d.push(module::FAST_MATH.into());
        d
    }
}

/// The whole program text: the sources concatenated, each marked with its file name.
pub fn program_source() -> String {
    module::program_source(SOURCES)
}

/// Compiles `variant` to PTX for the virtual architecture `arch` (e.g. "compute_90") with NVRTC,
/// through the process-wide cache. Needs no GPU. Errors carry NVRTC's log.
pub fn compile_ptx(variant: &KernelVariant, arch: &str) -> std::result::Result<Arc<String>, crate::error::BackendError> {
    module::program_ptx(PROGRAM_NAME, &program_source(), &variant.defines(), arch).map_err(|e| e.ctx(format!("{variant:?}")))
}

/// The fused kernel and its exact companion of `variant` on `ctx`'s device, loaded once per
/// (device, variant).
pub fn kernels(ctx: &Arc<CudaContext>, variant: &KernelVariant) -> std::result::Result<Kernels, crate::error::BackendError> {
    let m = module::program_module(ctx, PROGRAM_NAME, &program_source(), &variant.defines()).map_err(|e| e.ctx(format!("{variant:?}")))?;
    let load = |n: &str| m.load_function(n).map_err(|e| e.ctx(format!("kernel {n}")));
    Ok(Kernels { fused: load(KERNEL_NAME)?, exact: load(EXACT_KERNEL_NAME)? })
}
