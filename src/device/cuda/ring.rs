//! The device-resident frame ring and its upload path: planar host frames are copied into one of
//! two pinned staging buffers and sent on the upload stream; each ring slot has an event that
//! says when its frame has arrived, and the upload of a slot waits (on the device) until the
//! kernels that read the slot's previous frame are done.

use std::sync::Arc;

use cudarc::driver::{result, CudaContext};

use super::layout::FrameLayout;
use super::raw::{CuResult, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::convert::copy_bytes;
use crate::device::cuda::raw::Context as _;
use crate::planar::PlanarFrame;

struct Staging {
    host: PinnedBuffer,
    /// Recorded after the copy out of `host`: it may be refilled once this completed.
    sent: Event,
}

pub struct DeviceRing {
    pub frames: DeviceBuffer,
    pub slots: usize,
    pub layout: FrameLayout,
    /// Per slot: the frame has arrived.
    arrived: Vec<Event>,
    /// Per slot: the last launch that reads the slot (index into the caller's launch events).
    pub last_reader: Vec<Option<usize>>,
    staging: Vec<Staging>,
    next_staging: usize,
}

impl DeviceRing {
    pub fn new(ctx: &Arc<CudaContext>, layout: FrameLayout, slots: usize) -> CuResult<Self> {
        let frames = DeviceBuffer::new(ctx, layout.frame_bytes * slots)?;
        let arrived = (0..slots).map(|_| Event::new(ctx, false)).collect::<CuResult<_>>()?;
        let staging = (0..2).map(|_| Ok(Staging { host: PinnedBuffer::new(ctx, layout.frame_bytes)?, sent: Event::new(ctx, false)? })).collect::<CuResult<_>>()?;
        Ok(DeviceRing { frames, slots, layout, arrived, last_reader: vec![None; slots], staging, next_staging: 0 })
    }

    pub fn slot_ptr(&self, slot: usize) -> u64 {
        self.frames.ptr + (slot * self.layout.frame_bytes) as u64
    }

    /// Device-side "frame in `slot` is complete" event.
    pub fn arrived(&self, slot: usize) -> &Event {
        &self.arrived[slot]
    }

    /// Sends `frame`'s planes into `slot` straight from host memory that is page-locked
    /// (`ranges`, one per plane; see super::hostio): no staging copy. The frame must stay
    /// untouched until `arrived(slot)` completes (the engine keeps it until its job is finished).
    pub fn upload_direct(&mut self, slot: usize, ranges: &[crate::device::frames::HostRange], stream: &Stream, reader_done: Option<&Event>) -> CuResult<()> {
        if let Some(e) = reader_done {
            stream.wait(e)?;
        }
        let base = self.frames.ptr + (slot * self.layout.frame_bytes) as u64;
        for (p, &(ptr, n)) in ranges.iter().enumerate() {
            if n != self.layout.plane_bytes[p] {
                return Err(crate::error::BackendError::Host(format!("upload: plane {p} has {n} bytes, the ring expects {}", self.layout.plane_bytes[p])));
            }
            // SAFETY: the destination lies in the ring allocation; the source is a live
            // page-locked plane that is not modified before the copy completes (see above).
            unsafe { cudarc::driver::sys::cuMemcpyHtoDAsync_v2(base + self.layout.offsets[p] as u64, ptr as *const std::ffi::c_void, n, stream.raw) }.result().map_err(|e| e.ctx("upload"))?;
        }
        self.arrived[slot].record(stream)
    }

    /// Copies `frame` into `slot` through pinned staging memory. `reader_done` is the event of
    /// the launch that last read the slot, if any; the copy waits for it on the device.
    pub fn upload(&mut self, slot: usize, frame: &PlanarFrame, stream: &Stream, reader_done: Option<&Event>) -> CuResult<()> {
        let s = &mut self.staging[self.next_staging];
        self.next_staging = (self.next_staging + 1) % 2;
        s.sent.synchronize()?;
        let host = s.host.as_mut_slice();
        for (p, plane) in frame.planes.iter().enumerate() {
            let (o, n) = (self.layout.offsets[p], self.layout.plane_bytes[p]);
            copy_bytes(&mut host[o..o + n], plane.samples.as_bytes());
        }
        if let Some(e) = reader_done {
            stream.wait(e)?;
        }
        let dst = self.frames.ptr + (slot * self.layout.frame_bytes) as u64;
        // SAFETY: dst lies in the ring allocation; the pinned source stays untouched until `sent`
        // completes (checked before the next refill).
        unsafe { result::memcpy_htod_async(dst, s.host.as_slice(), stream.raw) }.map_err(|e| e.ctx("upload"))?;
        s.sent.record(stream)?;
        self.arrived[slot].record(stream)
    }
}
