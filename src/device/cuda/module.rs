//! Run-time compilation of kernels with NVRTC, cached per process: every algorithm's CUDA
//! implementation builds its program here.
//!
//! A program is the concatenation of `.cu`/`.cuh` files from `kernels/` (embedded with
//! `include_str!`, see [`program_source`]), specialised with `-D` constants (radii, plane counts,
//! sample size, tile shape...). PTX is cached per (program, definitions, virtual architecture) and
//! loaded modules per (device, program, definitions), so a stream that restarts or a second
//! element on the same GPU compiles nothing. PTX is also kept on disk, under
//! `$XDG_CACHE_HOME/nlmdenoise/ptx` (else `~/.cache/nlmdenoise/ptx`; none when neither is set),
//! named by a 128-bit digest of the program text, definitions, architecture and NVRTC version, so
//! that a new process (each segment of a segment-parallel run, every CLI start) skips NVRTC. The
//! folder can be deleted at any time; an unreadable or unwritable one only costs the compile.

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
/// (context handle, program name, definitions).
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
    let ptx = Arc::new(compile_or_load(disk_cache_dir().as_deref(), name, source, defines, arch)?);
    program_ptx_cache().lock().map_err(|_| BackendError::Host("PTX cache poisoned".into()))?.insert(key, ptx.clone());
    Ok(ptx)
}

/// The PTX of a program from the disk cache under `cache` (if given and holding it), else from
/// NVRTC (then stored there).
fn compile_or_load(cache: Option<&std::path::Path>, name: &str, source: &str, defines: &[String], arch: &str) -> Result<String, BackendError> {
    loader::ensure_nvrtc().map_err(BackendError::Compile)?;
    let on_disk = cache.map(|dir| dir.join(cache_file_name(source, defines, arch)));
    // A file cut short (a full disk, a crash before the rename) holds no complete entry point.
    if let Some(ptx) = on_disk.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).filter(|t| t.contains(".entry") && t.trim_end().ends_with('}')) {
        return Ok(ptx);
    }
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
    if let Some(path) = on_disk {
        store(&path, &ptx);
    }
    Ok(ptx)
}

/// The folder of the PTX kept on disk (see the module's doc), or None.
fn disk_cache_dir() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| std::path::Path::new(&h).join(".cache")))?;
    Some(base.join("nlmdenoise").join("ptx"))
}

/// The file name of the PTX of `source` with `defines` for `arch` (NVRTC must be loaded).
fn cache_file_name(source: &str, defines: &[String], arch: &str) -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (ensure_nvrtc); the call writes two integers.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    let mut key = Vec::with_capacity(source.len() + 256);
    for part in [source, &defines.join("\u{1f}"), arch, &format!("nvrtc {major}.{minor} {}", env!("CARGO_PKG_VERSION"))] {
        key.extend_from_slice(part.as_bytes());
        key.push(0);
    }
    format!("{:016x}{:016x}.ptx", fnv1a(&key, 0xcbf2_9ce4_8422_2325), fnv1a(&key, 0x6c62_272e_07bb_0142))
}

/// FNV-1a, 64 bits, from `offset` (two offsets give the cache's 128-bit names).
fn fnv1a(bytes: &[u8], offset: u64) -> u64 {
    bytes.iter().fold(offset, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Writes `ptx` to `path` whole or not at all (a temporary name, then a rename); failures are
/// only logged: the cache is an optimisation.
fn store(path: &std::path::Path, ptx: &str) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|_| std::fs::write(&tmp, ptx)).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!("PTX cache: cannot write {}: {e}", path.display());
    }
}

/// The loaded module of `source` with `defines` on `ctx`'s device, once per (device, program).
pub fn program_module(ctx: &Arc<CudaContext>, name: &str, source: &str, defines: &[String]) -> Result<Arc<CudaModule>, BackendError> {
    let key = (ctx.cu_ctx() as usize, name.to_string(), defines.to_vec());
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

/// Unloads the cached modules of a context about to be destroyed by its owner (a shared
/// context, super::shared): a later context at the same address must not find them.
pub fn forget_context(handle: usize) {
    if let Ok(mut cache) = program_module_cache().lock() {
        cache.retain(|k, _| k.0 != handle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAM: &str = "extern \"C\" __global__ void add_one(float* x) { x[threadIdx.x] += ONE; }";

    /// The disk cache: a second compile of the same program reads the file; a damaged file is
    /// compiled again and replaced; another definition is another file.
    #[test]
    fn ptx_is_kept_on_disk_and_a_damaged_file_is_compiled_again() {
        if loader::ensure_nvrtc().is_err() {
            eprintln!("SKIPPED ptx_is_kept_on_disk_and_a_damaged_file_is_compiled_again: no NVRTC");
            return;
        }
        let dir = std::env::temp_dir().join(format!("nlmdenoise-ptx-test-{}", std::process::id()));
        let defs = defines(&[("ONE", "1.0f")]);
        let first = compile_or_load(Some(&dir), "add_one", PROGRAM, &defs, "compute_75").unwrap();
        let file = dir.join(cache_file_name(PROGRAM, &defs, "compute_75"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
        // Read from the file: a marker put into it comes back.
        std::fs::write(&file, format!("// cached\n{first}")).unwrap();
        assert!(compile_or_load(Some(&dir), "add_one", PROGRAM, &defs, "compute_75").unwrap().starts_with("// cached"));
        // Cut short: compiled again, and the file made whole.
        std::fs::write(&file, &first[..first.len() / 2]).unwrap();
        assert_eq!(compile_or_load(Some(&dir), "add_one", PROGRAM, &defs, "compute_75").unwrap(), first);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
        let other = defines(&[("ONE", "2.0f")]);
        assert_ne!(cache_file_name(PROGRAM, &other, "compute_75"), cache_file_name(PROGRAM, &defs, "compute_75"));
        assert_ne!(cache_file_name(PROGRAM, &defs, "compute_90"), cache_file_name(PROGRAM, &defs, "compute_75"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
