//! Finding the CUDA driver and NVRTC before cudarc touches them.
//!
//! cudarc (dynamic-loading) panics when it cannot open a library, so every entry point of the
//! CUDA backend first calls [`ensure_driver`] / [`ensure_nvrtc`]. They open the same library names
//! cudarc tries (libcuda.so.1; libnvrtc.so, .so.13, .so.12, ...) and, for NVRTC, also absolute
//! paths in a few known folders. A library opened by path stays loaded (the handle is kept for the
//! life of the process), and the dynamic loader then answers cudarc's later open by name with it,
//! because the name matches the library's soname.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

/// Environment variable naming a folder that holds libnvrtc (e.g. pip's
/// `site-packages/nvidia/cuda_nvrtc/lib`). Used by the CI test script.
pub const NVRTC_DIR_ENV: &str = "NLMDENOISE_NVRTC_DIR";

const DRIVER_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];
/// The names cudarc's `get_lib_name_candidates("nvrtc")` tries that exist on Linux, newest first.
const NVRTC_NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11", "libnvrtc.so"];

fn open_first(names: &[&str], dirs: &[PathBuf]) -> Result<(Library, String), String> {
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: these are the vendor's libraries; their initialisers have no preconditions.
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok((lib, (*name).to_string())),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    for dir in dirs {
        for name in names {
            let path = dir.join(name);
            if !path.exists() {
                continue;
            }
            // SAFETY: as above.
            match unsafe { Library::new(&path) } {
                Ok(lib) => return Ok((lib, path.display().to_string())),
                Err(e) => tried.push(format!("{}: {e}", path.display())),
            }
        }
    }
    Err(tried.join("; "))
}

fn nvrtc_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os(NVRTC_DIR_ENV) {
        dirs.push(PathBuf::from(d));
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(Path::new(&d).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    dirs
}

static DRIVER: OnceLock<Result<String, String>> = OnceLock::new();
static NVRTC: OnceLock<Result<String, String>> = OnceLock::new();

fn keep(result: Result<(Library, String), String>) -> Result<String, String> {
    result.map(|(lib, what)| {
        // The library must stay loaded for cudarc's later open by name; never unload it.
        std::mem::forget(lib);
        what
    })
}

/// Opens the CUDA driver library; `Err` says why it cannot be used.
pub fn ensure_driver() -> Result<&'static str, String> {
    DRIVER
        .get_or_init(|| {
            keep(open_first(DRIVER_NAMES, &[])).map_err(|e| {
                tracing::debug!("CUDA driver: {e}");
                "no NVIDIA driver (libcuda.so.1 not found): install the NVIDIA driver to use the GPU".to_string()
            })
        })
        .as_deref()
        .map_err(|e| e.clone())
}

/// Opens NVRTC (the run-time CUDA compiler); `Err` says why it cannot be used.
pub fn ensure_nvrtc() -> Result<&'static str, String> {
    NVRTC
        .get_or_init(|| {
            keep(open_first(NVRTC_NAMES, &nvrtc_dirs())).map_err(|e| {
                tracing::debug!("NVRTC: {e}");
                format!(
                    "NVRTC, the CUDA run-time compiler, not found (libnvrtc.so.13 or .12): install it (CUDA toolkit, or pip's \
                     nvidia-cuda-nvrtc-cu12 with {NVRTC_DIR_ENV} set to its lib folder)"
                )
            })
        })
        .as_deref()
        .map_err(|e| e.clone())
}

/// Runs `f`, turning a panic inside cudarc into an error (a second guard behind the probes).
pub fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(format!("{what} panicked: {msg}"))
        }
    }
}
