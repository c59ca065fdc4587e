//! GStreamer's CUDA memory (`video/x-raw(memory:CUDAMemory)`, libgstcuda-1.0 of plugins-bad):
//! the few calls of that library the elements use, loaded at run time, so that the plugin loads
//! and works in system memory where plugins-bad, the NVIDIA driver or a GPU is missing.
//!
//! No Rust binding of libgstcuda exists; these are hand-written declarations of calls whose
//! signatures are the same from GStreamer 1.22 to 1.26 (`gst_cuda_load_library`,
//! `gst_cuda_memory_init_once`, `gst_cuda_context_new_wrapped`, `gst_cuda_context_get_handle`,
//! `gst_context_new_cuda_context`, `gst_cuda_buffer_pool_new`), plus the start of
//! `GstCudaMemory` (its `GstMemory` and context pointer, unchanged over those versions). What
//! core GStreamer offers (context messages and queries, memory types, `gst_video_frame_map` with
//! the `GST_MAP_CUDA` flag for device pointers) goes through gstreamer-rs and its `ffi`.
//!
//! [`CudaContext`] is a `GstCudaContext` held by reference; [`DeviceMap`] a buffer mapped for its
//! device pointers, which the engine holds as a `DeviceFrame`'s owner until its copy is done.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::OnceLock;

use gst::glib;
use gst::glib::translate::*;
use gst::prelude::*;

use nlmdenoise::device::cuda::shared::SharedContext;
use nlmdenoise::device::{DeviceFrame, DevicePlane};

/// The caps feature of frames in CUDA memory.
pub const CAPS_FEATURE: &str = "memory:CUDAMemory";
/// The context type the nvcodec elements share their `GstCudaContext` under.
pub const CONTEXT_TYPE: &str = "gst.cuda.context";
/// The memory type name of `GstCudaMemory`.
const MEMORY_TYPE: &str = "gst.cuda.memory";
/// `GST_MAP_CUDA` (gstcudamemory.h): map for the device pointer.
const MAP_CUDA: u32 = gst::ffi::GST_MAP_FLAG_LAST << 1;

type Gboolean = glib::ffi::gboolean;

/// The calls of libgstcuda-1.0 the plugin uses.
struct Api {
    _lib: libloading::Library,
    context_new_wrapped: unsafe extern "C" fn(*mut c_void, i32) -> *mut gst::ffi::GstObject,
    context_get_handle: unsafe extern "C" fn(*mut gst::ffi::GstObject) -> *mut c_void,
    context_new_cuda_context: unsafe extern "C" fn(*mut gst::ffi::GstObject) -> *mut gst::ffi::GstContext,
    buffer_pool_new: unsafe extern "C" fn(*mut gst::ffi::GstObject) -> *mut gst::ffi::GstBufferPool,
    context_get_type: unsafe extern "C" fn() -> glib::ffi::GType,
}

/// The start of `GstCudaMemory` (gstcudamemory.h, 1.22 to 1.26): the memory and its context.
#[repr(C)]
struct GstCudaMemoryHead {
    mem: gst::ffi::GstMemory,
    context: *mut gst::ffi::GstObject,
}

fn load() -> Result<Api, String> {
    /// A symbol of `lib` as the function type `F` (copied out of the library's table).
    ///
    /// # Safety
    /// `F` is the C signature of the symbol in its header; the value is used only while `lib`
    /// is loaded (the `Api` keeps it).
    unsafe fn sym<F: Copy>(lib: &libloading::Library, name: &[u8]) -> Result<F, String> {
        // SAFETY: the caller's contract.
        unsafe { lib.get::<F>(name) }.map(|s| *s).map_err(|e| format!("libgstcuda-1.0 lacks {}: {e}", String::from_utf8_lossy(&name[..name.len() - 1])))
    }
    // SAFETY: loading a shared library runs its initialisers; libgstcuda's only register GTypes
    // lazily. Every symbol below is looked up with the C signature of its header (1.22 to 1.26).
    unsafe {
        let lib = libloading::Library::new("libgstcuda-1.0.so.0").map_err(|e| format!("libgstcuda-1.0.so.0 not found ({e}); install gstreamer1.0-plugins-bad"))?;
        let load_library = sym::<unsafe extern "C" fn() -> Gboolean>(&lib, b"gst_cuda_load_library\0")?;
        let memory_init_once = sym::<unsafe extern "C" fn()>(&lib, b"gst_cuda_memory_init_once\0")?;
        let api = Api {
            context_new_wrapped: sym(&lib, b"gst_cuda_context_new_wrapped\0")?,
            context_get_handle: sym(&lib, b"gst_cuda_context_get_handle\0")?,
            context_new_cuda_context: sym(&lib, b"gst_context_new_cuda_context\0")?,
            buffer_pool_new: sym(&lib, b"gst_cuda_buffer_pool_new\0")?,
            context_get_type: sym(&lib, b"gst_cuda_context_get_type\0")?,
            _lib: lib,
        };
        if load_library() == glib::ffi::GFALSE {
            return Err("libgstcuda-1.0 could not load the CUDA driver (libcuda.so.1)".into());
        }
        memory_init_once();
        Ok(api)
    }
}

/// libgstcuda with the CUDA driver and at least one device; `None` (said once at INFO level) where
/// any of them is missing: the elements then stay in system memory.
fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(|| {
        let loaded = load().and_then(|api| match nlmdenoise::device::chunked::cuda_device_count() {
            Ok(n) if n > 0 => Ok(api),
            Ok(_) => Err("no CUDA device".into()),
            Err(e) => Err(e),
        });
        match loaded {
            Ok(api) => {
                gst::info!(crate::CAT, "CUDA memory (memory:CUDAMemory) available through libgstcuda-1.0");
                Some(api)
            }
            Err(e) => {
                gst::info!(crate::CAT, "CUDA memory (memory:CUDAMemory) unavailable, system memory only: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// True when the elements can take and give frames in CUDA memory here.
pub fn available() -> bool {
    api().is_some()
}

/// True when `features` name CUDA memory.
pub fn is_cuda_features(features: &gst::CapsFeaturesRef) -> bool {
    features.contains(CAPS_FEATURE)
}

/// True when the first structure of `caps` is in CUDA memory.
pub fn caps_in_cuda(caps: &gst::CapsRef) -> bool {
    caps.features(0).is_some_and(is_cuda_features)
}

/// `caps` without its CUDA-memory structures (where CUDA memory is unavailable).
pub fn without_cuda(caps: &gst::Caps) -> gst::Caps {
    let mut out = gst::Caps::new_empty();
    {
        let out = out.get_mut().expect("new caps");
        for (s, f) in caps.iter_with_features() {
            if !is_cuda_features(f) {
                out.append_structure_full(s.to_owned(), Some(f.to_owned()));
            }
        }
    }
    if caps.is_any() {
        return caps.clone();
    }
    out
}

/// A `GstCudaContext`, held by reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaContext(gst::Object);

impl CudaContext {
    /// The context of `context` (a "gst.cuda.context" `GstContext`) when it is on `device` (any
    /// device with `None`).
    pub fn from_gst_context(context: &gst::ContextRef, device: Option<u32>) -> Option<Self> {
        let api = api()?;
        if context.context_type() != CONTEXT_TYPE {
            return None;
        }
        let value = context.structure().value(CONTEXT_TYPE).ok()?;
        // SAFETY: a plain GType lookup.
        let ty: glib::Type = unsafe { from_glib((api.context_get_type)()) };
        if !value.type_().is_a(ty) {
            return None;
        }
        let obj = value.get::<gst::Object>().ok()?;
        let ctx = CudaContext(obj);
        (device.is_none() || device == Some(ctx.device_id())).then_some(ctx)
    }

    /// The device's primary context (the engine's), wrapped: what an element that is the first
    /// CUDA element of a pipeline offers to the others.
    pub fn wrap_primary(device: u32) -> Result<Self, String> {
        let api = api().ok_or("CUDA memory is unavailable")?;
        let (handle, cu_device) = nlmdenoise::device::cuda::shared::primary_context(device as usize)?;
        // SAFETY: a live primary context of this device, retained for the rest of the process
        // (`primary_context`); the wrapper does not destroy it. Returns a new reference.
        let ptr = unsafe { (api.context_new_wrapped)(handle as *mut c_void, cu_device) };
        if ptr.is_null() {
            return Err(format!("gst_cuda_context_new_wrapped failed on device {device}"));
        }
        // SAFETY: a new (full) reference to a GstObject.
        Ok(CudaContext(unsafe { from_glib_full(ptr) }))
    }

    /// The context a CUDA memory belongs to (borrowed pointer compared, then referenced).
    pub fn of_memory(mem: &gst::MemoryRef) -> Option<Self> {
        api()?;
        if !mem.is_type(MEMORY_TYPE) {
            return None;
        }
        // SAFETY: a memory of type "gst.cuda.memory" is a GstCudaMemory, whose layout starts with
        // a GstMemory and the context pointer (GStreamer 1.22 to 1.26); the context is alive while
        // the memory is.
        let ptr = unsafe { (*(mem.as_ptr() as *const GstCudaMemoryHead)).context };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a live GstObject (see above); a new reference is taken.
        Some(CudaContext(unsafe { from_glib_none(ptr) }))
    }

    pub fn device_id(&self) -> u32 {
        self.0.property::<u32>("cuda-device-id")
    }

    /// The `CUcontext`.
    pub fn handle(&self) -> usize {
        let api = api().expect("a CudaContext exists only where the library is loaded");
        // SAFETY: a live GstCudaContext; the handle is borrowed (not destroyed by us).
        unsafe { (api.context_get_handle)(self.0.to_glib_none().0) as usize }
    }

    /// The context for the engine: computed in, kept alive by a reference held with it.
    pub fn shared(&self) -> SharedContext {
        // SAFETY: the handle is a live context of this device, destroyed only when the
        // GstCudaContext goes, which the owner passed keeps alive.
        unsafe { SharedContext::new(self.handle(), self.device_id() as usize, Box::new(self.0.clone())) }
    }

    /// A "gst.cuda.context" `GstContext` holding this context (persistent, as nvcodec's).
    pub fn to_gst_context(&self) -> gst::Context {
        let api = api().expect("loaded");
        // SAFETY: a live GstCudaContext; returns a new GstContext (full reference).
        unsafe { from_glib_full((api.context_new_cuda_context)(self.0.to_glib_none().0)) }
    }

    /// A new buffer pool of this context's CUDA memory (not configured).
    pub fn buffer_pool(&self) -> gst::BufferPool {
        let api = api().expect("loaded");
        // SAFETY: a live GstCudaContext; returns a new (floating) GstBufferPool.
        unsafe { from_glib_none((api.buffer_pool_new)(self.0.to_glib_none().0)) }
    }

    /// The same CUDA context (two wrappers of one `CUcontext` are the same context).
    pub fn same(&self, other: &CudaContext) -> bool {
        self.0 == other.0 || self.handle() == other.handle()
    }
}

/// A buffer of CUDA memory mapped for its device pointers (`GST_MAP_CUDA`): read for an input,
/// written for an output. Unmapped when dropped; the buffer goes with it, or comes back by
/// [`Self::into_buffer`].
pub struct DeviceMap {
    frame: gst_video::ffi::GstVideoFrame,
    buffer: Option<gst::Buffer>,
}

// SAFETY: the mapped frame is plain data pointing into the buffer this struct owns; GStreamer's
// buffers and memories may be unmapped from any thread.
unsafe impl Send for DeviceMap {}

impl DeviceMap {
    /// Maps `buffer` (frames of `info` in CUDA memory) for reading (`write` false) or writing;
    /// gives it back where it cannot be mapped so (not CUDA memory, not writable).
    pub fn map(buffer: gst::Buffer, info: &gst_video::VideoInfo, write: bool) -> Result<Self, gst::Buffer> {
        if api().is_none() || buffer.n_memory() == 0 || !(0..buffer.n_memory()).all(|i| buffer.peek_memory(i).is_type(MEMORY_TYPE)) {
            return Err(buffer);
        }
        if write && !buffer.is_writable() {
            return Err(buffer);
        }
        let access = if write { gst::ffi::GST_MAP_WRITE } else { gst::ffi::GST_MAP_READ };
        let flags = access | MAP_CUDA | gst_video::ffi::GST_VIDEO_FRAME_MAP_FLAG_NO_REF;
        let mut frame = std::mem::MaybeUninit::<gst_video::ffi::GstVideoFrame>::zeroed();
        // SAFETY: maps the buffer we own (kept in `Self` until unmapped, NO_REF: not referenced
        // again, so it stays writable); `info` is a valid GstVideoInfo.
        let ok = unsafe { gst_video::ffi::gst_video_frame_map(frame.as_mut_ptr(), info.to_glib_none().0, buffer.as_mut_ptr(), flags) };
        if ok == glib::ffi::GFALSE {
            return Err(buffer);
        }
        // SAFETY: initialised by the successful map.
        Ok(DeviceMap { frame: unsafe { frame.assume_init() }, buffer: Some(buffer) })
    }

    /// The device pointer and pitch of each plane.
    pub fn planes(&self) -> Vec<DevicePlane> {
        let n = self.frame.info.finfo;
        // SAFETY: `finfo` of a mapped frame points to static format info.
        let n_planes = unsafe { (*n).n_planes } as usize;
        (0..n_planes).map(|p| DevicePlane { ptr: self.frame.data[p] as u64, pitch: self.frame.info.stride[p].max(0) as usize }).collect()
    }

    fn unmap(&mut self) {
        if self.buffer.is_some() {
            // SAFETY: mapped in `map`, unmapped once (the buffer is taken after).
            unsafe { gst_video::ffi::gst_video_frame_unmap(&mut self.frame) };
        }
    }

    /// Unmaps and gives the buffer back.
    pub fn into_buffer(mut self) -> gst::Buffer {
        self.unmap();
        self.buffer.take().expect("mapped until now")
    }
}

impl Drop for DeviceMap {
    fn drop(&mut self) {
        self.unmap();
    }
}

/// The engine's view of a mapped buffer: its planes' device pointers, the map as owner (the
/// buffer is unmapped and let go when the engine lets go of the frame).
pub fn device_frame(map: DeviceMap) -> DeviceFrame {
    let planes = map.planes();
    // SAFETY: the planes are the mapped buffer's device memory (of a context on the device the
    // engine computes on: the element's, or adopted from the buffer), valid while the map lives;
    // an input is mapped for reading and held by nobody who writes it (a pool's buffer is not
    // reused before it is released), an output is a writable buffer of the element's own pool.
    unsafe { DeviceFrame::new(planes, Box::new(map)) }
}

/// True when the buffer's first memory is CUDA memory (and CUDA memory is available).
pub fn buffer_in_cuda(buffer: &gst::BufferRef) -> bool {
    api().is_some() && buffer.n_memory() > 0 && buffer.peek_memory(0).is_type(MEMORY_TYPE)
}
