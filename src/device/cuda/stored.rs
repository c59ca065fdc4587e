//! Stored frames on the device: for formats that interleave components (NV12, NV21, P010, packed
//! RGB), the host copies frames in the format's own memory layout (`Geometry::stored`) and
//! the device (de)interleaves them (kernels/common/stored.cu), so that no host thread unpacks or
//! packs a sample.
//!
//! A memory plane that holds one component sample after sample (NV12's and P010's luma) already
//! is that component's plane: it is copied straight into the ring slot and, once computed,
//! straight back from the output frame. The other memory planes (interleaved chroma, packed RGB):
//!
//! Upload: copied (DMA from page-locked frames, staged by the driver otherwise) into one device
//! buffer, and `stored_unpack` spreads them into the ring slot's planes, both on the upload
//! stream, before the slot's `arrived` event (the stream's order keeps the next upload from
//! overwriting the buffer early). Output: after a job's kernels, `stored_pack` writes the output
//! frame's computed planes, and the input planes the job does not compute (alpha, unselected
//! planes) from the ring slot, into the output frame's stored buffer, which is what is copied
//! back; it runs before the output frame's `computed` event, so the ring slot it reads is not
//! refilled before it is done.

use cudarc::driver::{sys, CudaFunction};

use super::layout::FrameLayout;
use super::raw::{self, CuResult, DeviceBuffer, Stream};
use super::{module, DeviceInfo};
use crate::device::cuda::raw::Context as _;
use crate::device::frames::{DevicePlane, HostRange};
use crate::error::{Error, Result};
use crate::frame::VideoInfo;
use crate::planar::{Geometry, PlaneGeometry};

pub const SOURCES: &[(&str, &str)] = crate::kernel_sources!["common/stored.cu"];
pub const PROGRAM_NAME: &str = "stored.cu";
/// Threads per block, along a row.
const BLOCK: u32 = 256;
/// Largest grid extent in y (rows beyond it are visited grid-stride).
const MAX_GRID_Y: u32 = 65535;
/// Components of a format at most (kernels/common/stored.cu, STORED_MAX_COMPONENTS).
const MAX_COMPONENTS: usize = 4;

/// One component's move (kernels/common/stored.cu, ComponentMove).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct ComponentMove {
    stored: u64,
    plane: u64,
    pitch: u32,
    offset: u32,
    step: u32,
    width: u32,
    height: u32,
    pad: u32,
}

/// The by-value argument of both kernels (kernels/common/stored.cu, StoredArgs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct StoredArgs {
    c: [ComponentMove; MAX_COMPONENTS],
}

pub const STORED_ARGS_BYTES: usize = std::mem::size_of::<StoredArgs>();

pub fn defines(sample_bytes: usize) -> Vec<String> {
    module::defines(&[("SAMPLE_BYTES", sample_bytes), ("STORED_ARGS_BYTES", STORED_ARGS_BYTES)])
}

/// Compiles the program to PTX for `arch`; no GPU needed (tests/nvrtc_compile.rs).
pub fn compile_ptx(sample_bytes: usize, arch: &str) -> std::result::Result<std::sync::Arc<String>, crate::error::BackendError> {
    module::program_ptx(PROGRAM_NAME, &module::program_source(SOURCES), &defines(sample_bytes), arch)
}

/// For each memory plane of `info`'s format, the component it holds alone, sample after sample
/// (NV12's luma): its plane is the memory plane as stored.
fn direct_planes(info: &VideoInfo) -> Vec<Option<usize>> {
    let fi = info.format.info();
    (0..fi.memory_planes)
        .map(|p| {
            let mut held = fi.components.iter().enumerate().filter(|(_, c)| c.memory_plane == p);
            match (held.next(), held.next()) {
                (Some((i, c)), None) if c.offset == 0 && c.step == fi.bytes_per_sample => Some(i),
                _ => None,
            }
        })
        .collect()
}

/// The moves of the components `moved` selects of frames of `info` between a stored frame at
/// `stored` (planes at `stored_layout`) and planes at `plane(c)` for component `c`; with the grid
/// that covers them. None when no component is selected.
/// `planes`: the component planes of `info` (`Geometry::from_video_info`).
fn moves(info: &VideoInfo, planes: &[PlaneGeometry], stored: u64, stored_layout: &FrameLayout, plane: impl Fn(usize) -> u64, moved: impl Fn(usize) -> bool) -> Option<(StoredArgs, (u32, u32, u32))> {
    let fi = info.format.info();
    let mut args = StoredArgs::default();
    let (mut w, mut h, mut n) = (1u32, 1u32, 0usize);
    for (c, (comp, g)) in fi.components.iter().zip(planes).enumerate() {
        if !moved(c) {
            continue;
        }
        args.c[n] = ComponentMove {
            stored: stored + stored_layout.offsets[comp.memory_plane] as u64,
            plane: plane(c),
            pitch: fi.memory_plane_row_bytes(comp.memory_plane, info.width) as u32,
            offset: comp.offset as u32,
            step: comp.step as u32,
            width: g.width as u32,
            height: g.height as u32,
            pad: 0,
        };
        n += 1;
        w = w.max(g.width as u32);
        h = h.max(g.height as u32);
    }
    (n > 0).then_some((args, (w.div_ceil(BLOCK), h.min(MAX_GRID_Y), n as u32)))
}

/// A stream's stored frames on one device: the conversion kernels and the uploaded frame.
pub struct StoredIo {
    unpack: CudaFunction,
    pack: CudaFunction,
    in_info: VideoInfo,
    out_info: VideoInfo,
    /// The component planes of input and output frames.
    in_planes: Vec<PlaneGeometry>,
    out_planes: Vec<PlaneGeometry>,
    /// Planes of the stored frames, input and output, and where they lie in device buffers.
    pub in_geometry: Geometry,
    pub out_geometry: Geometry,
    in_layout: FrameLayout,
    pub out_layout: FrameLayout,
    /// Per memory plane, input and output: the component it holds as its plane (`direct_planes`).
    in_direct: Vec<Option<usize>>,
    out_direct: Vec<Option<usize>>,
    /// The stored input frame, between its upload and its unpacking into a ring slot.
    input: DeviceBuffer,
}

impl StoredIo {
    pub fn new(device: &DeviceInfo, in_info: VideoInfo, out_info: VideoInfo) -> Result<Self> {
        let in_geometry = Geometry::stored(&in_info);
        let out_geometry = Geometry::stored(&out_info);
        let in_layout = FrameLayout::new(&in_geometry);
        let out_layout = FrameLayout::new(&out_geometry);
        let sample_bytes = in_geometry.bytes_per_sample;
        let m = module::program_module(&device.ctx, PROGRAM_NAME, &module::program_source(SOURCES), &defines(sample_bytes)).map_err(|e| Error::Backend(e.ctx("stored-frame kernels")))?;
        let load = |n: &str| m.load_function(n).map_err(|e| Error::Backend(e.ctx(format!("kernel {n}"))));
        let input = DeviceBuffer::new(&device.ctx, in_layout.frame_bytes).map_err(Error::Backend)?;
        let (in_direct, out_direct) = (direct_planes(&in_info), direct_planes(&out_info));
        let (in_planes, out_planes) = (Geometry::from_video_info(&in_info).planes, Geometry::from_video_info(&out_info).planes);
        Ok(StoredIo {
            unpack: load("stored_unpack")?,
            pack: load("stored_pack")?,
            in_info,
            out_info,
            in_planes,
            out_planes,
            in_geometry,
            out_geometry,
            in_layout,
            out_layout,
            in_direct,
            out_direct,
            input,
        })
    }

    /// Device bytes of the stored buffer each output frame carries.
    pub fn output_bytes(&self) -> usize {
        self.out_layout.frame_bytes
    }

    /// Queues on `stream` the copy of a stored host frame (`ranges`, one per plane: page-locked,
    /// or pageable, which the driver stages before returning) and its unpacking into the planes
    /// of the ring frame at `slot` (planes at `ring_layout`).
    pub fn upload(&self, ranges: &[HostRange], slot: u64, ring_layout: &FrameLayout, stream: &Stream) -> CuResult<()> {
        for (p, &(ptr, n)) in ranges.iter().enumerate() {
            if n != self.in_layout.plane_bytes[p] {
                return Err(crate::error::BackendError::Host(format!("upload: stored plane {p} has {n} bytes, {} expected", self.in_layout.plane_bytes[p])));
            }
            let to = match self.in_direct[p] {
                Some(c) => slot + ring_layout.offsets[c] as u64,
                None => self.input.ptr + self.in_layout.offsets[p] as u64,
            };
            // SAFETY: the destination lies in `input` or the ring frame (a direct plane has the
            // bytes of its component's plane); the source is a live host plane that is
            // unchanged until the copy completes (page-locked: the Backend trait's promise on
            // uploaded frames; pageable: the driver has read it when the call returns).
            unsafe { sys::cuMemcpyHtoDAsync_v2(to, ptr as *const std::ffi::c_void, n, stream.raw) }.result().map_err(|e| e.ctx("upload"))?;
        }
        self.unpack_into(slot, ring_layout, stream)
    }

    /// [`Self::upload`] of a frame in device memory (`planes`: the stored memory planes at their
    /// pitches, checked by the caller to hold the frame): copied on the device.
    pub fn upload_device(&self, planes: &[DevicePlane], slot: u64, ring_layout: &FrameLayout, stream: &Stream) -> CuResult<()> {
        for (p, (plane, geometry)) in planes.iter().zip(&self.in_geometry.planes).enumerate() {
            let to = match self.in_direct[p] {
                Some(c) => slot + ring_layout.offsets[c] as u64,
                None => self.input.ptr + self.in_layout.offsets[p] as u64,
            };
            let row = geometry.width * self.in_geometry.bytes_per_sample;
            // SAFETY: the destination lies in `input` or the ring frame (rows packed, as in
            // `upload`); the source is the caller's device frame (DeviceFrame's contract).
            unsafe { raw::copy_rows_async(to, row, plane.ptr, plane.pitch, row, geometry.height, stream) }.map_err(|e| e.ctx("upload from device memory"))?;
        }
        self.unpack_into(slot, ring_layout, stream)
    }

    /// Queues the unpacking of the uploaded stored frame into the ring frame at `slot`.
    fn unpack_into(&self, slot: u64, ring_layout: &FrameLayout, stream: &Stream) -> CuResult<()> {
        let fi = self.in_info.format.info();
        let interleaved = |c: usize| self.in_direct[fi.components[c].memory_plane].is_none();
        let Some((mut args, grid)) = moves(&self.in_info, &self.in_planes, self.input.ptr, &self.in_layout, |c| slot + ring_layout.offsets[c] as u64, interleaved) else { return Ok(()) };
        // SAFETY: every address lies in `input` or the ring frame, within the sizes the block
        // states (the layouts were made from the same formats and sizes).
        unsafe { raw::launch(&self.unpack, grid, BLOCK, 0, stream, &mut args) }.map_err(|e| e.ctx("stored_unpack"))
    }

    /// Queues on `stream` the packing of one job's output into `stored` (a buffer of
    /// `out_layout`): the components in `computed` from the output frame at `output` (planes at
    /// `output_layout`), the others from the input ring frame at `input` (`input_layout`; same
    /// size, as only jobs that keep the frame size leave components uncomputed). Returns where
    /// each stored plane is to be copied back from: `stored`, or for a direct plane whose
    /// component was computed, the output frame's plane itself (not packed).
    #[allow(clippy::too_many_arguments)]
    pub fn pack(&self, stored: u64, output: u64, output_layout: &FrameLayout, computed: &[usize], input: u64, input_layout: &FrameLayout, stream: &Stream) -> CuResult<Vec<u64>> {
        let fi = self.out_info.format.info();
        let plane = |c: usize| if computed.contains(&c) { output + output_layout.offsets[c] as u64 } else { input + input_layout.offsets[c] as u64 };
        let in_place = |c: usize| self.out_direct[fi.components[c].memory_plane] == Some(c) && computed.contains(&c);
        let sources = (0..fi.memory_planes)
            .map(|p| match self.out_direct[p] {
                Some(c) if in_place(c) => output + output_layout.offsets[c] as u64,
                _ => stored + self.out_layout.offsets[p] as u64,
            })
            .collect();
        if let Some((mut args, grid)) = moves(&self.out_info, &self.out_planes, stored, &self.out_layout, plane, |c| !in_place(c)) {
            // SAFETY: as in `upload`; `stored` is an output frame's stored buffer of `out_layout`.
            unsafe { raw::launch(&self.pack, grid, BLOCK, 0, stream, &mut args) }.map_err(|e| e.ctx("stored_pack"))?;
        }
        Ok(sources)
    }
}
