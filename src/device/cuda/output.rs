//! Output frames: each launch writes into a device output frame (grown on demand, so any number
//! of jobs may be in flight), with working memory of the algorithm's beside it, whose denoised
//! planes are copied back on the download stream into the job's host frame (the submitted frame
//! itself, or a frame of the pool): straight into it when it is page-locked (direct host I/O,
//! [`super::hostio`]: queued at launch, so that `finish` only waits), else into a pinned buffer
//! that `finish` copies from, or synchronously at `finish`; or, for a caller's frame in device
//! memory, copied into it on the device.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use super::layout::FrameLayout;
use super::raw::{self, CuResult, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::convert::copy_bytes;
use crate::device::cuda::raw::Context as _;
use crate::device::frames::{plane_ranges as frame_ranges, DeviceFrame, HostRange};
use crate::planar::{Geometry, PlanarFrame};

pub struct OutputFrame {
    pub device: DeviceBuffer,
    /// The algorithm's working memory for the job in this frame (`CudaAlgorithm`'s
    /// `output_scratch_bytes`; none when 0).
    pub scratch: Option<DeviceBuffer>,
    /// Stored frames (super::stored): the output packed into the format's own layout, which is
    /// what is copied back (planes at the stored layout the caller passes); none otherwise.
    pub stored: Option<DeviceBuffer>,
    /// Stored frames: the device address each stored plane is copied back from (the stored
    /// buffer, or an output plane that already has the stored layout), set at each launch.
    pub stored_sources: Vec<u64>,
    /// Pinned copy-back buffer, allocated on the first staged download.
    host: Option<PinnedBuffer>,
    /// Recorded after the frame's kernels (on the stream the algorithm's work ends on).
    pub computed: Event,
    /// Recorded on the download stream after the copy back.
    downloaded: Event,
    /// Planes the launch wrote (the plan's output planes).
    planes: Vec<usize>,
    /// Direct download: the host ranges (per plane of the frame) the planes were copied into.
    direct: Option<Vec<HostRange>>,
    /// A copy back was queued at launch and `complete` has not consumed it yet.
    queued: bool,
}

impl OutputFrame {
    pub fn new(ctx: &Arc<CudaContext>, layout: &FrameLayout, scratch_bytes: usize, stored_bytes: usize) -> CuResult<Self> {
        Ok(OutputFrame {
            device: DeviceBuffer::new(ctx, layout.frame_bytes)?,
            scratch: if scratch_bytes > 0 { Some(DeviceBuffer::new(ctx, scratch_bytes)?) } else { None },
            stored: if stored_bytes > 0 { Some(DeviceBuffer::new(ctx, stored_bytes)?) } else { None },
            stored_sources: Vec::new(),
            host: None,
            computed: Event::new(ctx, false)?,
            downloaded: Event::new(ctx, false)?,
            planes: Vec::new(),
            direct: None,
            queued: false,
        })
    }

    /// Device bytes of one output frame (frame + working memory).
    pub fn device_bytes(layout: &FrameLayout, scratch_bytes: usize) -> usize {
        layout.frame_bytes + scratch_bytes
    }

    /// Device address plane `p` of what is copied back starts at (`layout`: where the planes
    /// lie): in the frame, or for stored frames where [`Self::stored_sources`] says.
    fn source(&self, layout: &FrameLayout, p: usize) -> u64 {
        match self.stored_sources.get(p) {
            Some(&at) if self.stored.is_some() => at,
            _ => self.device.ptr + layout.offsets[p] as u64,
        }
    }

    /// Device address of the working memory (0 when there is none).
    pub fn scratch_ptr(&self) -> u64 {
        self.scratch.as_ref().map(|b| b.ptr).unwrap_or(0)
    }

    /// Queues the copy back of `planes` once the kernels are done: into `direct` (page-locked
    /// host ranges, one per plane of the frame) when given, else into the pinned buffer.
    pub fn start_download(&mut self, layout: &FrameLayout, planes: Vec<usize>, stream: &Stream) -> CuResult<()> {
        self.start_download_to(layout, planes, None, stream)
    }

    /// [`Self::start_download`] into `direct` (page-locked host ranges, one per plane of the
    /// frame) when given.
    pub fn start_download_to(&mut self, layout: &FrameLayout, planes: Vec<usize>, direct: Option<Vec<HostRange>>, stream: &Stream) -> CuResult<()> {
        let ctx = self.device.ctx.clone();
        stream.wait(&self.computed)?;
        match &direct {
            Some(ranges) => {
                for &p in &planes {
                    let n = layout.plane_bytes[p];
                    if ranges[p].1 != n {
                        return Err(crate::error::BackendError::Host(format!("download: plane {p} has {} bytes on the host, {n} on the device", ranges[p].1)));
                    }
                    // SAFETY: the host range is a live, page-locked plane that the engine keeps
                    // untouched until this job's finish (hostio contract); the source lies in
                    // the output frame's allocation.
                    unsafe { sys::cuMemcpyDtoHAsync_v2(ranges[p].0 as *mut std::ffi::c_void, self.source(layout, p), n, stream.raw) }.result().map_err(|e| e.ctx("download"))?;
                }
            }
            None => {
                if self.host.is_none() {
                    self.host = Some(PinnedBuffer::new(&ctx, layout.frame_bytes)?);
                }
                let sources: Vec<u64> = planes.iter().map(|&p| self.source(layout, p)).collect();
                let host = self.host.as_mut().expect("allocated");
                for (&p, &from) in planes.iter().zip(&sources) {
                    let (o, n) = (layout.offsets[p], layout.plane_bytes[p]);
                    let h = &mut host.as_mut_slice()[o..o + n];
                    // SAFETY: source and destination lie in their allocations; the host range is
                    // not read until `downloaded` completes.
                    unsafe { result::memcpy_dtoh_async(h, from, stream.raw) }.map_err(|e| e.ctx("download"))?;
                }
            }
        }
        self.planes = planes;
        self.direct = direct;
        self.queued = true;
        self.downloaded.record(stream)
    }

    /// Queues the copy of every plane at `layout` (`geometry`'s planes: rows packed) into the
    /// caller's device frame `to` once the kernels are done, on `stream`; [`Self::wait_copied`]
    /// waits for it.
    pub fn start_copy_to_device(&mut self, layout: &FrameLayout, geometry: &Geometry, to: &DeviceFrame, stream: &Stream) -> CuResult<()> {
        stream.wait(&self.computed)?;
        for (p, (plane, dst)) in geometry.planes.iter().zip(to.planes()).enumerate() {
            let row = plane.width * geometry.bytes_per_sample;
            // SAFETY: the source is plane `p` of this output frame (or its stored buffer), `row`
            // bytes x `plane.height` rows packed; the destination is the caller's device frame,
            // checked at submit to hold those rows at its pitch and untouched by others while
            // the backend holds it (DeviceFrame's contract).
            unsafe { raw::copy_rows_async(dst.ptr, dst.pitch, self.source(layout, p), row, row, plane.height, stream) }.map_err(|e| e.ctx("copy into the output frame"))?;
        }
        self.downloaded.record(stream)
    }

    /// Waits for the copy [`Self::start_copy_to_device`] queued.
    pub fn wait_copied(&self) -> CuResult<()> {
        self.downloaded.synchronize()
    }

    /// Whether a copy back was queued for the job in this frame (at launch).
    pub fn download_queued(&self) -> bool {
        self.queued
    }

    /// Direct mode: copies the planes straight into `out` (its planes page-locked: `ranges`)
    /// once the kernels are done, and waits. Nothing is written into memory we do not hold.
    pub fn complete_direct(&mut self, layout: &FrameLayout, planes: &[usize], ranges: &[HostRange], stream: &Stream) -> CuResult<()> {
        self.planes = planes.to_vec();
        self.start_download_to(layout, planes.to_vec(), Some(ranges.to_vec()), stream)?;
        self.downloaded.synchronize()?;
        self.direct = None;
        self.queued = false;
        Ok(())
    }

    /// Waits for a queued copy back whose job is dropped (the frame is about to be reused).
    pub fn abandon_download(&mut self) -> CuResult<()> {
        if self.queued {
            self.downloaded.synchronize()?;
            self.queued = false;
            self.direct = None;
        }
        Ok(())
    }

    /// Waits for the copy back and makes sure the planes are in `out`.
    pub fn complete(&mut self, layout: &FrameLayout, out: &mut PlanarFrame) -> CuResult<()> {
        self.downloaded.synchronize()?;
        self.queued = false;
        match self.direct.take() {
            Some(ranges) if ranges == frame_ranges(out) => Ok(()),
            Some(_) => {
                // Not the frame the job was uploaded from: copy from the device (synchronous).
                let planes = std::mem::take(&mut self.planes);
                let r = self.copy_planes_sync(layout, &planes, out);
                self.planes = planes;
                r
            }
            None => {
                let host = self.host.as_ref().ok_or_else(|| crate::error::BackendError::Host("download: no staged copy".into()))?.as_slice();
                for &p in &self.planes {
                    let (o, n) = (layout.offsets[p], layout.plane_bytes[p]);
                    copy_bytes(out.planes[p].samples.as_bytes_mut(), &host[o..o + n]);
                }
                Ok(())
            }
        }
    }

    /// Copies `planes` from the device frame into `out` and waits (the kernels must be done).
    pub fn copy_planes_sync(&self, layout: &FrameLayout, planes: &[usize], out: &mut PlanarFrame) -> CuResult<()> {
        for &p in planes {
            let n = layout.plane_bytes[p];
            let dst = out.planes[p].samples.as_bytes_mut();
            // SAFETY: dst is `n` bytes of host memory we hold mutably; the device frame is not
            // reused before this job is finished.
            unsafe { result::memcpy_dtoh_sync(&mut dst[..n], self.source(layout, p)) }.map_err(|e| e.ctx("download"))?;
        }
        Ok(())
    }
}
