//! Output frames: each launch writes into one of `pipeline_depth + 1` device output frames, whose
//! denoised planes are copied back on the download stream into a pinned buffer; `finish` waits
//! for that copy and moves the planes into the caller's frame.

use std::sync::Arc;

use cudarc::driver::{result, CudaContext};

use super::launch::FrameLayout;
use super::raw::{CuResult, DeviceBuffer, Event, PinnedBuffer, Stream};
use super::ring::copy_bytes;
use crate::planar::PlanarFrame;

pub struct OutputFrame {
    pub device: DeviceBuffer,
    /// Samples queued for the exact f64 path: a u64 count, then u64 entries.
    pub exact: DeviceBuffer,
    pub exact_capacity: usize,
    host: PinnedBuffer,
    /// Recorded on the compute stream after the frame's kernels.
    pub computed: Event,
    /// Recorded on the download stream after the copy back.
    downloaded: Event,
    /// Planes the launch wrote (the plan's output planes).
    planes: Vec<usize>,
}

impl OutputFrame {
    pub fn new(ctx: &Arc<CudaContext>, layout: &FrameLayout, samples: usize) -> CuResult<Self> {
        Ok(OutputFrame {
            device: DeviceBuffer::new(ctx, layout.frame_bytes)?,
            exact: DeviceBuffer::new(ctx, 8 * (samples + 1))?,
            exact_capacity: samples,
            host: PinnedBuffer::new(ctx, layout.frame_bytes)?,
            computed: Event::new(ctx, false)?,
            downloaded: Event::new(ctx, false)?,
            planes: Vec::new(),
        })
    }

    /// Queues the copy back of `planes` once the kernels are done.
    pub fn start_download(&mut self, layout: &FrameLayout, planes: Vec<usize>, stream: &Stream) -> CuResult<()> {
        stream.wait(&self.computed)?;
        for &p in &planes {
            let (o, n) = (layout.offsets[p], layout.plane_bytes[p]);
            let host = &mut self.host.as_mut_slice()[o..o + n];
            // SAFETY: source and destination lie in their allocations; the host range is not read
            // until `downloaded` completes.
            unsafe { result::memcpy_dtoh_async(host, self.device.ptr + o as u64, stream.raw) }.map_err(|e| format!("download: {e}"))?;
        }
        self.planes = planes;
        self.downloaded.record(stream)
    }

    /// Waits for the copy back and writes the planes into `out`.
    pub fn complete(&mut self, layout: &FrameLayout, out: &mut PlanarFrame) -> CuResult<()> {
        self.downloaded.synchronize()?;
        let host = self.host.as_slice();
        for &p in &self.planes {
            let (o, n) = (layout.offsets[p], layout.plane_bytes[p]);
            copy_bytes(out.planes[p].samples.as_bytes_mut(), &host[o..o + n]);
        }
        Ok(())
    }
}
