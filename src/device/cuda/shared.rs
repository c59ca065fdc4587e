//! A CUDA context made by someone else that the backend computes in: GStreamer's
//! `GstCudaContext` of a pipeline (a decoder's context, or one an application set), so that frames
//! in the pipeline's CUDA memory and the engine's kernels live in one context. Kernels of different
//! contexts on one device time-slice instead of overlapping, and the nvcodec elements take a
//! buffer's device memory as it is only when it belongs to their own context.
//!
//! The context is never destroyed from here: its owner (kept in [`SharedContext`]) destroys it
//! once everything made in it is gone. The backend holds a [`SharedContext`] in its last field (so
//! that its streams, events and buffers go first), and so does every page-locked frame it made;
//! the modules loaded into the context are unloaded when the last holder lets go.

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use super::module;

struct Foreign {
    handle: usize,
    ordinal: usize,
    /// Keeps the context alive (a reference to the GstCudaContext). Dropped after `Drop::drop`.
    _owner: Box<dyn Any + Send + Sync>,
}

impl Drop for Foreign {
    fn drop(&mut self) {
        // Before the owner goes: the modules are unloaded while the context exists.
        module::forget_context(self.handle);
    }
}

/// A CUDA context of someone else's and what keeps it alive; cloned by everything that uses it.
#[derive(Clone)]
pub struct SharedContext(Arc<Foreign>);

impl SharedContext {
    /// # Safety
    /// `handle` is a live `CUcontext` of CUDA device `ordinal`, not destroyed while `owner` lives.
    pub unsafe fn new(handle: usize, ordinal: usize, owner: Box<dyn Any + Send + Sync>) -> Self {
        SharedContext(Arc::new(Foreign { handle, ordinal, _owner: owner }))
    }

    /// The `CUcontext`, as an address.
    pub fn handle(&self) -> usize {
        self.0.handle
    }

    pub fn ordinal(&self) -> usize {
        self.0.ordinal
    }

    /// The context as cudarc sees it: the device's primary context when that is what it is (the
    /// element and the CLI offer the primary context to pipelines), else the foreign context
    /// wrapped without ownership (one clone of the wrapper is leaked, so that cudarc never
    /// destroys it).
    pub(super) fn open(&self) -> Result<Arc<CudaContext>, String> {
        let ordinal = self.0.ordinal;
        let device = cudarc::driver::result::device::get(ordinal as i32).map_err(|e| format!("CUDA device {ordinal}: {e}"))?;
        let (mut flags, mut active) = (0u32, 0i32);
        // SAFETY: plain query of a valid device into two integers.
        unsafe { sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active) }.result().map_err(|e| format!("primary context state of device {ordinal}: {e}"))?;
        if active != 0 {
            // Active already: retaining it creates nothing.
            let primary = CudaContext::new(ordinal).map_err(|e| format!("opening CUDA device {ordinal}: {e}"))?;
            if primary.cu_ctx() as usize == self.0.handle {
                return Ok(primary);
            }
        }
        // SAFETY: the handle is a live context of this device (`new`'s contract), alive while
        // `self` is; cudarc's wrapper would destroy it on drop, which the leaked clone prevents.
        let ctx = unsafe { CudaContext::from_raw_context(ordinal, device, self.0.handle as sys::CUcontext) }.map_err(|e| format!("using the shared CUDA context on device {ordinal}: {e}"))?;
        std::mem::forget(ctx.clone());
        Ok(ctx)
    }
}

impl PartialEq for SharedContext {
    fn eq(&self, other: &Self) -> bool {
        self.0.handle == other.0.handle && self.0.ordinal == other.0.ordinal
    }
}

impl Eq for SharedContext {}

impl std::fmt::Debug for SharedContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedContext({:#x} on device {})", self.0.handle, self.0.ordinal)
    }
}

/// The primary context of device `ordinal` as (`CUcontext`, `CUdevice`), retained for the rest of
/// the process: for a caller that offers it to others who do not retain it (a `GstCudaContext`
/// wrapping it, which the element and the CLI publish to their pipelines).
pub fn primary_context(ordinal: usize) -> Result<(usize, i32), String> {
    use std::sync::{Mutex, OnceLock};
    static KEPT: OnceLock<Mutex<Vec<Arc<CudaContext>>>> = OnceLock::new();
    let ctx = super::open_context(ordinal)?;
    let pair = (ctx.cu_ctx() as usize, ctx.cu_device());
    let mut kept = KEPT.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !kept.iter().any(|c| c.cu_ctx() == ctx.cu_ctx()) {
        kept.push(ctx);
    }
    Ok(pair)
}
