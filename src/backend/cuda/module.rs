//! Run-time compilation of the kernels with NVRTC, cached per process.
//!
//! The kernel sources are embedded (`include_str!`) and specialised with `-D` constants (radii,
//! plane counts, guide step, sample size, weighting, tile shape). PTX is cached per
//! (variant, virtual architecture) and loaded modules per (device, variant), so a stream that
//! restarts or a second element on the same GPU compiles nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{CompileOptions, Ptx};

use super::launch::{self, Batch, TileConfig, NLM_ARGS_BYTES};
use super::loader;
use crate::params::Weighting;
use crate::plan::DenoisePlan;

/// The kernel sources, in the order they are concatenated into one program.
pub const SOURCES: &[(&str, &str)] = &[
    ("nlm_args.cuh", include_str!("../../../kernels/nlm_args.cuh")),
    ("border.cuh", include_str!("../../../kernels/border.cuh")),
    ("weight.cuh", include_str!("../../../kernels/weight.cuh")),
    ("nlm_fused.cu", include_str!("../../../kernels/nlm_fused.cu")),
    ("nlm_exact.cu", include_str!("../../../kernels/nlm_exact.cu")),
];

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
    /// (kernels/weight.cuh, DIST_OFFSET); without one the clamp is left out of the build.
    pub distance_offset: bool,
    /// The output planes are the guide planes (`Batch::outputs_are_guides`).
    pub outputs_are_guides: bool,
    /// Phase 1 reads with 16-byte loads (kernels/nlm_fused.cu, VEC_LOADS): where possible and
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
    pub fn for_batch(plan: &DenoisePlan, batch: &Batch, sample_bytes: usize, exact_ties: bool, tile: Option<TileConfig>, shared_per_sm: usize) -> Self {
        let mut v = KernelVariant {
            search_radius: plan.search_radius,
            patch_radius: plan.patch_radius,
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
            tile: tile.unwrap_or_else(|| TileConfig::choose(plan.search_radius, plan.patch_radius, batch.guides, batch.step_x, batch.step_y)),
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
        let weighting = match self.weighting {
            Weighting::Welsch => 0,
            Weighting::Bisquare => 1,
        };
        [
            ("SEARCH_R", self.search_radius),
            ("PATCH_R", self.patch_radius),
            ("N_GUIDES", self.guides),
            ("N_OUTPUTS", self.outputs),
            ("STEP_X", self.step_x),
            ("STEP_Y", self.step_y),
            ("SAMPLE_BYTES", self.sample_bytes),
            ("WEIGHTING", weighting),
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
        ]
        .iter()
        .map(|(k, v)| format!("-D{k}={v}"))
        .chain(std::iter::once(format!("-DTIE_WINDOW={:e}f", if self.exact_ties && self.scale_to_8bit <= 4 { TIE_WINDOW * self.scale_to_8bit as f64 } else { 0.0 })))
        .collect()
    }
}

/// The whole program text: the sources concatenated, each marked with its file name.
pub fn program_source() -> String {
    let mut s = String::new();
    for (name, text) in SOURCES {
        s.push_str(&format!("// ---- kernels/{name}\n"));
        s.push_str(&text.replace("#pragma once", ""));
        s.push('\n');
    }
    s
}

/// Shared memory per SM of the context's device, in bytes.
pub fn shared_per_sm(ctx: &CudaContext) -> Result<usize, String> {
    ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
        .map(|v| v as usize)
        .map_err(|e| e.to_string())
}

/// Compiles `variant` to PTX for the virtual architecture `arch` (e.g. "compute_90") with NVRTC.
/// Needs no GPU. Errors carry NVRTC's log.
pub fn compile_ptx(variant: &KernelVariant, arch: &str) -> Result<String, String> {
    loader::ensure_nvrtc()?;
    loader::guarded("NVRTC", || {
        let mut options = variant.defines();
        options.push(format!("--gpu-architecture={arch}"));
        options.push("--std=c++17".into());
        options.push("--use_fast_math".into());
        let opts = CompileOptions { options, name: Some("nlm_fused.cu".into()), ..Default::default() };
        match cudarc::nvrtc::compile_ptx_with_opts(program_source(), opts) {
            Ok(ptx) => Ok(ptx.to_src()),
            Err(cudarc::nvrtc::CompileError::CompileError { log, options, .. }) => {
                Err(format!("NVRTC failed for {variant:?} with {options:?}:\n{}", log.to_string_lossy()))
            }
            Err(e) => Err(format!("NVRTC failed: {e}")),
        }
    })
}

type PtxKey = (KernelVariant, String);
type ModuleKey = (usize, KernelVariant);

fn ptx_cache() -> &'static Mutex<HashMap<PtxKey, Arc<String>>> {
    static C: OnceLock<Mutex<HashMap<PtxKey, Arc<String>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn module_cache() -> &'static Mutex<HashMap<ModuleKey, (Arc<CudaModule>, Kernels)>> {
    static C: OnceLock<Mutex<HashMap<ModuleKey, (Arc<CudaModule>, Kernels)>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// PTX of `variant` for `arch`, compiled once per process.
pub fn cached_ptx(variant: &KernelVariant, arch: &str) -> Result<Arc<String>, String> {
    let key = (*variant, arch.to_string());
    if let Some(p) = ptx_cache().lock().map_err(|_| "PTX cache poisoned")?.get(&key) {
        return Ok(p.clone());
    }
    let t = std::time::Instant::now();
    let ptx = Arc::new(compile_ptx(variant, arch)?);
    tracing::debug!("compiled {variant:?} for {arch} in {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    ptx_cache().lock().map_err(|_| "PTX cache poisoned")?.insert(key, ptx.clone());
    Ok(ptx)
}

/// The kernel functions of `variant` on `ctx`'s device, loaded once per (device, variant).
pub fn kernel(ctx: &Arc<CudaContext>, variant: &KernelVariant) -> Result<Kernels, String> {
    let key = (ctx.ordinal(), *variant);
    if let Some((_, f)) = module_cache().lock().map_err(|_| "module cache poisoned")?.get(&key) {
        return Ok(f.clone());
    }
    let (major, minor) = ctx.compute_capability().map_err(|e| format!("compute capability: {e}"))?;
    let arch = format!("compute_{major}{minor}");
    let ptx = cached_ptx(variant, &arch)?;
    let module = ctx.load_module(Ptx::from_src(ptx.as_str())).map_err(|e| format!("loading the {arch} module: {e}"))?;
    let fused = module.load_function(KERNEL_NAME).map_err(|e| format!("kernel {KERNEL_NAME}: {e}"))?;
    let exact = module.load_function(EXACT_KERNEL_NAME).map_err(|e| format!("kernel {EXACT_KERNEL_NAME}: {e}"))?;
    let kernels = Kernels { fused, exact };
    module_cache().lock().map_err(|_| "module cache poisoned")?.insert(key, (module, kernels.clone()));
    Ok(kernels)
}

// ---- Other kernel families (kernels/multipass_*.cu): the same NVRTC options and the same two
// caches, keyed by the program's name and its -D definitions instead of a KernelVariant.

type ProgramKey = (String, Vec<String>, String);

fn program_ptx_cache() -> &'static Mutex<HashMap<ProgramKey, Arc<String>>> {
    static C: OnceLock<Mutex<HashMap<ProgramKey, Arc<String>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn program_module_cache() -> &'static Mutex<HashMap<(usize, String, Vec<String>), Arc<CudaModule>>> {
    static C: OnceLock<Mutex<HashMap<(usize, String, Vec<String>), Arc<CudaModule>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Compiles `source` (named `name` in logs) with `defines` for `arch`, like [`compile_ptx`]; cached
/// per process. Needs no GPU.
pub fn program_ptx(name: &str, source: &str, defines: &[String], arch: &str) -> Result<Arc<String>, String> {
    let key = (name.to_string(), defines.to_vec(), arch.to_string());
    if let Some(p) = program_ptx_cache().lock().map_err(|_| "PTX cache poisoned")?.get(&key) {
        return Ok(p.clone());
    }
    loader::ensure_nvrtc()?;
    let ptx = loader::guarded("NVRTC", || {
        let mut options = defines.to_vec();
        options.push(format!("--gpu-architecture={arch}"));
        options.push("--std=c++17".into());
        options.push("--use_fast_math".into());
        let opts = CompileOptions { options, name: Some(name.into()), ..Default::default() };
        match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
            Ok(ptx) => Ok(ptx.to_src()),
            Err(cudarc::nvrtc::CompileError::CompileError { log, options, .. }) => Err(format!("NVRTC failed for {name} with {options:?}:\n{}", log.to_string_lossy())),
            Err(e) => Err(format!("NVRTC failed: {e}")),
        }
    })?;
    let ptx = Arc::new(ptx);
    program_ptx_cache().lock().map_err(|_| "PTX cache poisoned")?.insert(key, ptx.clone());
    Ok(ptx)
}

/// The loaded module of `source` with `defines` on `ctx`'s device, once per (device, program).
pub fn program_module(ctx: &Arc<CudaContext>, name: &str, source: &str, defines: &[String]) -> Result<Arc<CudaModule>, String> {
    let key = (ctx.ordinal(), name.to_string(), defines.to_vec());
    if let Some(m) = program_module_cache().lock().map_err(|_| "module cache poisoned")?.get(&key) {
        return Ok(m.clone());
    }
    let (major, minor) = ctx.compute_capability().map_err(|e| format!("compute capability: {e}"))?;
    let arch = format!("compute_{major}{minor}");
    let ptx = program_ptx(name, source, defines, &arch)?;
    let module = ctx.load_module(Ptx::from_src(ptx.as_str())).map_err(|e| format!("loading the {arch} module of {name}: {e}"))?;
    program_module_cache().lock().map_err(|_| "module cache poisoned")?.insert(key, module.clone());
    Ok(module)
}
