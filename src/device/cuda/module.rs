//! Run-time compilation of kernels with NVRTC, cached per process: every algorithm's CUDA
//! implementation builds its program here.
//!
//! A program is the concatenation of `.cu`/`.cuh` files from `kernels/` (embedded with
//! `include_str!`, see [`program_source`]), specialised with `-D` constants (radii, plane counts,
//! sample size, tile shape...). PTX is cached per (program, definitions, virtual architecture) and
//! loaded modules per (device, program, definitions), so a stream that restarts or a second
//! element on the same GPU compiles nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::{CompileOptions, Ptx};

use super::loader;
use super::raw::Context as _;
use crate::error::BackendError;

/// `(file name, text)` of files under `kernels/`, embedded at compile time, for
/// [`program_source`]: `kernel_sources!["nlm/args.cuh", "nlm/fused.cu"]`.
#[macro_export]
macro_rules! kernel_sources {
    ($($file:literal),+ $(,)?) => {
        &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $file)))),+]
    };
}

/// The program text of `sources` ((file name under kernels/, text) in order), each file marked
/// with its name.
pub fn program_source(sources: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (name, text) in sources {
        s.push_str(&format!("// ---- kernels/{name}\n"));
        s.push_str(&text.replace("#pragma once", ""));
        s.push('\n');
    }
    s
}

/// `-D` options from (name, value) pairs.
pub fn defines<V: std::fmt::Display>(pairs: &[(&str, V)]) -> Vec<String> {
    pairs.iter().map(|(k, v)| format!("-D{k}={v}")).collect()
}

/// Shared memory per SM of the context's device, in bytes.
pub fn shared_per_sm(ctx: &CudaContext) -> Result<usize, String> {
    ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR).map(|v| v as usize).map_err(|e| e.to_string())
}

type ProgramKey = (String, Vec<String>, String);
/// (device ordinal, program name, definitions).
type ModuleKey = (usize, String, Vec<String>);

fn program_ptx_cache() -> &'static Mutex<HashMap<ProgramKey, Arc<String>>> {
    static C: OnceLock<Mutex<HashMap<ProgramKey, Arc<String>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn program_module_cache() -> &'static Mutex<HashMap<ModuleKey, Arc<CudaModule>>> {
    static C: OnceLock<Mutex<HashMap<ModuleKey, Arc<CudaModule>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// NVRTC's fast-math option (approximate division, square root and exponentials, flush to zero):
/// programs whose results do not depend on those ask for it among their options (the NLM
/// kernels); BM3D does without, to stay close to its f64 reference.
pub const FAST_MATH: &str = "--use_fast_math";

/// Compiles `source` (named `name` in logs) with `defines` (the program's `-D` definitions and
/// options such as [`FAST_MATH`]) for the virtual architecture `arch` (e.g. "compute_90"); cached
/// per process. Needs no GPU. Errors carry NVRTC's log.
pub fn program_ptx(name: &str, source: &str, defines: &[String], arch: &str) -> Result<Arc<String>, BackendError> {
    let key = (name.to_string(), defines.to_vec(), arch.to_string());
    if let Some(p) = program_ptx_cache().lock().map_err(|_| BackendError::Host("PTX cache poisoned".into()))?.get(&key) {
        return Ok(p.clone());
    }
    loader::ensure_nvrtc().map_err(BackendError::Compile)?;
    let ptx = loader::guarded("NVRTC", || {
        let mut options = defines.to_vec();
        options.push(format!("--gpu-architecture={arch}"));
        options.push("--std=c++17".into());
        let opts = CompileOptions { options, name: Some(name.into()), ..Default::default() };
        match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
            Ok(ptx) => Ok(ptx.to_src()),
            Err(cudarc::nvrtc::CompileError::CompileError { log, options, .. }) => Err(format!("NVRTC failed for {name} with {options:?}:\n{}", log.to_string_lossy())),
            Err(e) => Err(format!("NVRTC failed: {e}")),
        }
    })
    .map_err(BackendError::Compile)?;
    let ptx = Arc::new(ptx);
    program_ptx_cache().lock().map_err(|_| BackendError::Host("PTX cache poisoned".into()))?.insert(key, ptx.clone());
    Ok(ptx)
}

/// The loaded module of `source` with `defines` on `ctx`'s device, once per (device, program).
pub fn program_module(ctx: &Arc<CudaContext>, name: &str, source: &str, defines: &[String]) -> Result<Arc<CudaModule>, BackendError> {
    let key = (ctx.ordinal(), name.to_string(), defines.to_vec());
    if let Some(m) = program_module_cache().lock().map_err(|_| BackendError::Host("module cache poisoned".into()))?.get(&key) {
        return Ok(m.clone());
    }
    let (major, minor) = ctx.compute_capability().map_err(|e| e.ctx("compute capability"))?;
    let arch = format!("compute_{major}{minor}");
    let ptx = program_ptx(name, source, defines, &arch)?;
    let module = ctx.load_module(Ptx::from_src(ptx.as_str())).map_err(|e| match e.ctx(format!("loading the {arch} module of {name}")) {
        BackendError::Driver(m) => BackendError::Compile(m),
        other => other,
    })?;
    program_module_cache().lock().map_err(|_| BackendError::Host("module cache poisoned".into()))?.insert(key, module.clone());
    Ok(module)
}
