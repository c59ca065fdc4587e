//! Page-locked host frames: the CUDA backend's pool makes frames whose planes are registered
//! with the driver (`cuMemHostRegister`), so that uploads read them and downloads write them by
//! DMA, without a copy through staging memory on the caller's thread.
//!
//! A frame is registered once, when the pool makes it, and unregistered when it is dropped
//! (`frames::Frame`'s page-lock), whoever drops it: nothing is cached by address. Registrations
//! are `CU_MEMHOSTREGISTER_PORTABLE`, page-locked for every context of the process, so that the
//! chunked workers of several GPUs DMA the same frames. A plane the driver refuses (e.g. one that
//! shares a page with another registration) leaves the frame unregistered: it then goes through
//! staging memory, slower but the same.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use crate::device::frames::{plane_ranges, Frame, FrameMaker, HostRange, PageLock};
use crate::planar::{Geometry, PlanarFrame};

/// Unregisters page-locked planes of the frames [`PinnedFrames`] made.
struct Unregister {
    ctx: Arc<CudaContext>,
    /// A shared context stays alive while a frame registered in it lives.
    _shared: Option<super::shared::SharedContext>,
}

impl PageLock for Unregister {
    fn release(&self, ranges: &[HostRange]) {
        // The driver wants a context on the thread; a lost device leaves nothing to release.
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        for &(ptr, len) in ranges {
            if len > 0 {
                // SAFETY: registered by `PinnedFrames::make` and not released since (a frame
                // releases its page-lock once, when it is dropped); no copy uses it any more: a
                // backend gives a frame back only once its copies are complete.
                let _ = unsafe { sys::cuMemHostUnregister(ptr as *mut std::ffi::c_void) };
            }
        }
    }
}

/// Makes page-locked frames on a device's context (the CUDA backend's frame pool).
pub struct PinnedFrames {
    lock: Arc<Unregister>,
}

impl PinnedFrames {
    pub fn new(ctx: &Arc<CudaContext>, shared: Option<super::shared::SharedContext>) -> Self {
        PinnedFrames { lock: Arc::new(Unregister { ctx: ctx.clone(), _shared: shared }) }
    }
}

impl FrameMaker for PinnedFrames {
    fn make(&self, geometry: &Geometry) -> Frame {
        let planar = PlanarFrame::zeroed(geometry);
        if self.lock.ctx.bind_to_thread().is_err() {
            return Frame::new(planar);
        }
        let ranges = plane_ranges(&planar);
        let mut done: Vec<HostRange> = Vec::with_capacity(ranges.len());
        for &r in &ranges {
            if r.1 == 0 {
                done.push(r);
                continue;
            }
            // SAFETY: `r` is the live allocation of one plane of `planar`, which the frame made
            // below owns (and releases before freeing it).
            let rc = unsafe { sys::cuMemHostRegister_v2(r.0 as *mut std::ffi::c_void, r.1, sys::CU_MEMHOSTREGISTER_PORTABLE) };
            if rc != sys::CUresult::CUDA_SUCCESS {
                tracing::debug!("cuMemHostRegister({:#x}, {}) refused: {rc:?}; this frame goes through staging", r.0, r.1);
                self.lock.release(&done);
                return Frame::new(planar);
            }
            done.push(r);
        }
        Frame::pinned(planar, ranges, self.lock.clone())
    }
}
