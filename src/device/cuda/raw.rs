//! Owned CUDA driver objects (device memory, pinned host memory, streams, events) that release
//! themselves with their context bound. The backend uses raw driver calls for these so that the
//! ordering between its three streams is exactly the events it records, nothing implicit.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::error::BackendError;

pub type CuResult<T> = std::result::Result<T, BackendError>;

/// The [`BackendError`] variant of a driver result code: what a caller can do about it differs
/// (out of memory: a smaller configuration; a sticky fault: the context is gone).
pub fn classify(e: result::DriverError, text: String) -> BackendError {
    use sys::cudaError_enum as C;
    match e.0 {
        C::CUDA_ERROR_OUT_OF_MEMORY => BackendError::OutOfMemory(text),
        C::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES | C::CUDA_ERROR_INVALID_IMAGE | C::CUDA_ERROR_NOT_FOUND | C::CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING | C::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE => {
            BackendError::Launch(text)
        }
        C::CUDA_ERROR_ILLEGAL_ADDRESS
        | C::CUDA_ERROR_LAUNCH_FAILED
        | C::CUDA_ERROR_LAUNCH_TIMEOUT
        | C::CUDA_ERROR_ECC_UNCORRECTABLE
        | C::CUDA_ERROR_HARDWARE_STACK_ERROR
        | C::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | C::CUDA_ERROR_MISALIGNED_ADDRESS
        | C::CUDA_ERROR_INVALID_ADDRESS_SPACE
        | C::CUDA_ERROR_INVALID_PC
        | C::CUDA_ERROR_CONTEXT_IS_DESTROYED
        | C::CUDA_ERROR_DEVICE_UNAVAILABLE
        | C::CUDA_ERROR_DEVICE_NOT_LICENSED
        | C::CUDA_ERROR_NO_DEVICE
        | C::CUDA_ERROR_DEINITIALIZED
        | C::CUDA_ERROR_SYSTEM_NOT_READY
        | C::CUDA_ERROR_UNKNOWN => BackendError::DeviceLost(text),
        _ => BackendError::Driver(text),
    }
}

/// A failure given the operation it interrupted, as a [`BackendError`] of its class.
pub trait Context {
    fn ctx(self, what: impl std::fmt::Display) -> BackendError;
}

impl Context for result::DriverError {
    fn ctx(self, what: impl std::fmt::Display) -> BackendError {
        classify(self, format!("{what}: {self}"))
    }
}

impl Context for BackendError {
    fn ctx(self, what: impl std::fmt::Display) -> BackendError {
        self.context(what)
    }
}

/// Maps a driver error to a [`BackendError`] of its class, with `what` (the operation) in front.
pub fn err(what: &str) -> impl FnOnce(result::DriverError) -> BackendError + '_ {
    move |e| classify(e, format!("{what}: {e}"))
}

pub struct DeviceBuffer {
    pub ctx: Arc<CudaContext>,
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
}

impl DeviceBuffer {
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> CuResult<Self> {
        ctx.bind_to_thread().map_err(err("binding the context"))?;
        // SAFETY: plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| classify(e, format!("allocating {bytes} bytes of device memory: {e}")))?;
        Ok(DeviceBuffer { ctx: ctx.clone(), ptr, bytes })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by malloc_sync in this context; no work uses it any more (the owner
            // synchronises its streams before dropping).
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Page-locked host memory, so that copies run asynchronously at full bus speed.
pub struct PinnedBuffer {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    pub bytes: usize,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for PinnedBuffer {}

impl PinnedBuffer {
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> CuResult<Self> {
        ctx.bind_to_thread().map_err(err("binding the context"))?;
        // SAFETY: plain allocation; flags 0 = portable defaults.
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }.map_err(|e| classify(e, format!("allocating {bytes} bytes of pinned memory: {e}")))? as *mut u8;
        Ok(PinnedBuffer { ctx: ctx.clone(), ptr, bytes })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for `bytes` bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by malloc_host; the owner synchronised its streams.
            let _ = unsafe { result::free_host(self.ptr as *mut _) };
        }
    }
}

pub struct Stream {
    ctx: Arc<CudaContext>,
    pub raw: sys::CUstream,
}

// SAFETY: CUDA streams may be used from any thread with the context bound.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new(ctx: &Arc<CudaContext>) -> CuResult<Self> {
        ctx.bind_to_thread().map_err(err("binding the context"))?;
        let raw = result::stream::create(result::stream::StreamKind::NonBlocking).map_err(err("creating a stream"))?;
        Ok(Stream { ctx: ctx.clone(), raw })
    }

    /// A stream whose blocks the hardware dispatches before those of default-priority streams
    /// (the context's greatest priority).
    pub fn new_high_priority(ctx: &Arc<CudaContext>) -> CuResult<Self> {
        ctx.bind_to_thread().map_err(err("binding the context"))?;
        let (_, greatest) = result::stream::get_priority_range().map_err(err("cuCtxGetStreamPriorityRange"))?;
        let raw = result::stream::create_with_priority(result::stream::StreamKind::NonBlocking, greatest).map_err(err("creating a stream"))?;
        Ok(Stream { ctx: ctx.clone(), raw })
    }

    pub fn wait(&self, event: &Event) -> CuResult<()> {
        // SAFETY: both handles are alive.
        unsafe { result::stream::wait_event(self.raw, event.raw, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }.map_err(err("cuStreamWaitEvent"))
    }

    pub fn synchronize(&self) -> CuResult<()> {
        // SAFETY: the stream is alive.
        unsafe { result::stream::synchronize(self.raw) }.map_err(err("cuStreamSynchronize"))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: created by stream::create; synchronise first so no work is cut off.
            unsafe {
                let _ = result::stream::synchronize(self.raw);
                let _ = result::stream::destroy(self.raw);
            }
        }
    }
}

pub struct Event {
    ctx: Arc<CudaContext>,
    pub raw: sys::CUevent,
}

// SAFETY: CUDA events may be used from any thread with the context bound.
unsafe impl Send for Event {}

impl Event {
    /// An event without timing (cheaper), or with timing for benchmarks.
    pub fn new(ctx: &Arc<CudaContext>, timing: bool) -> CuResult<Self> {
        ctx.bind_to_thread().map_err(err("binding the context"))?;
        let flags = if timing { sys::CUevent_flags::CU_EVENT_DEFAULT } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING };
        let raw = result::event::create(flags).map_err(err("creating an event"))?;
        Ok(Event { ctx: ctx.clone(), raw })
    }

    pub fn record(&self, stream: &Stream) -> CuResult<()> {
        // SAFETY: both handles are alive.
        unsafe { result::event::record(self.raw, stream.raw) }.map_err(err("cuEventRecord"))
    }

    /// Blocks until the work before the last record is done (at once if never recorded).
    pub fn synchronize(&self) -> CuResult<()> {
        // SAFETY: the event is alive.
        unsafe { result::event::synchronize(self.raw) }.map_err(err("cuEventSynchronize"))
    }

    /// True when the work before the last record is done (never recorded: true); does not wait.
    pub fn is_done(&self) -> CuResult<bool> {
        // SAFETY: the event is alive.
        match unsafe { sys::cuEventQuery(self.raw) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(err("cuEventQuery")(result::DriverError(e))),
        }
    }

    pub fn elapsed_ms(&self, end: &Event) -> CuResult<f32> {
        // SAFETY: both events are alive and were recorded with timing.
        unsafe { result::event::elapsed(self.raw, end.raw) }.map_err(err("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: created by event::create.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

/// Lets `f` use up to `bytes` of dynamic shared memory per block (beyond the 48 KiB default).
pub fn set_max_dynamic_shared(f: &cudarc::driver::CudaFunction, bytes: usize) -> CuResult<()> {
    // SAFETY: `f` is a live function of a loaded module (the borrow keeps it so); an attribute
    // changes how later launches are configured, nothing in flight.
    unsafe { result::function::set_function_attribute(f.cu_function(), sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32) }
        .map_err(err("raising the shared memory limit"))
}

/// Lets `f` use as much dynamic shared memory per block as the device allows (`device_max`,
/// its opt-in limit), for functions whose blocks' needs depend on more than the compiled
/// variant (a search radius, a scale): engines share a compiled function (the module cache), so
/// a limit fitted to one engine's needs would fail another's larger launches.
pub fn allow_device_max_dynamic_shared(f: &cudarc::driver::CudaFunction, device_max: usize) -> CuResult<()> {
    set_max_dynamic_shared(f, device_max)
}

/// Asks for `percent` of each SM's unified L1/shared memory as shared memory when `f` runs.
pub fn set_shared_carveout(f: &cudarc::driver::CudaFunction, percent: i32) -> CuResult<()> {
    // SAFETY: as in `set_max_dynamic_shared`.
    unsafe { result::function::set_function_attribute(f.cu_function(), sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent) }
        .map_err(err("setting the shared memory carveout"))
}

/// Launches `f` on `stream` with one by-value argument block `args` (a `#[repr(C)]` struct the
/// kernel declares as its only parameter).
///
/// # Safety
/// `A` has the layout of the kernel's parameter, every device address in it lies in a live
/// allocation the kernel may access as it does, and the kernel bounds its accesses by the sizes
/// in the block.
pub unsafe fn launch<A>(f: &cudarc::driver::CudaFunction, grid: (u32, u32, u32), block: u32, shared_bytes: u32, stream: &Stream, args: &mut A) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe { launch_blocks(f, grid, (block, 1, 1), shared_bytes, stream, args) }
}

/// [`launch`] with blocks of two or three dimensions.
///
/// # Safety
/// As for [`launch`].
pub unsafe fn launch_blocks<A>(f: &cudarc::driver::CudaFunction, grid: (u32, u32, u32), block: (u32, u32, u32), shared_bytes: u32, stream: &Stream, args: &mut A) -> CuResult<()> {
    let mut params = [args as *mut A as *mut std::ffi::c_void];
    // SAFETY: the caller's contract.
    unsafe { result::launch_kernel(f.cu_function(), grid, block, shared_bytes, stream.raw, &mut params) }.map_err(|e| match classify(e, format!("launching on grid {grid:?}: {e}")) {
        BackendError::Driver(m) => BackendError::Launch(m),
        other => other,
    })
}

/// Queues `bytes` bytes of `value` at device address `ptr` on `stream`.
///
/// # Safety
/// The range lies in a live device allocation that no queued work still reads or writes
/// unordered with `stream`.
pub unsafe fn memset(ptr: sys::CUdeviceptr, value: u8, bytes: usize, stream: &Stream) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe { result::memset_d8_async(ptr, value, bytes, stream.raw) }.map_err(err("cuMemsetD8Async"))
}

/// Where a copy of rows goes.
enum RowsTo {
    Device(sys::CUdeviceptr),
    Host(*mut std::ffi::c_void),
}

/// The descriptor of a copy of `rows` rows of `row_bytes` bytes from device memory at `src`
/// (`src_pitch` apart) to `dst`, `dst_pitch` apart.
fn rows_from_device(src: sys::CUdeviceptr, src_pitch: usize, dst: RowsTo, dst_pitch: usize, row_bytes: usize, rows: usize) -> sys::CUDA_MEMCPY2D {
    let (dst_type, dst_device, dst_host) = match dst {
        RowsTo::Device(d) => (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, d, std::ptr::null_mut()),
        RowsTo::Host(h) => (sys::CUmemorytype::CU_MEMORYTYPE_HOST, 0, h),
    };
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: row_bytes,
        Height: rows,
    }
}

/// Queues on `stream` a copy of `rows` rows of `row_bytes` bytes between device addresses (any
/// context of the device), each side at its own pitch.
///
/// # Safety
/// Both ranges lie in live device allocations; nothing unordered with `stream` writes the source
/// or touches the destination until the copy completes.
pub unsafe fn copy_rows_async(dst: sys::CUdeviceptr, dst_pitch: usize, src: sys::CUdeviceptr, src_pitch: usize, row_bytes: usize, rows: usize, stream: &Stream) -> CuResult<()> {
    if rows == 0 || row_bytes == 0 {
        return Ok(());
    }
    let copy = rows_from_device(src, src_pitch, RowsTo::Device(dst), dst_pitch, row_bytes, rows);
    // SAFETY: the caller's contract; the descriptor lives across the call (the driver copies it).
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.raw) }.result().map_err(err("cuMemcpy2DAsync (device to device)"))
}

/// Queues on `stream` a copy of rows 0, `every`, 2 `every`, ... of `rows` rows of `row_bytes`
/// bytes from device memory at `src` (`src_pitch` apart) into the same rows of `dst` (rows
/// packed; the rows between are left as they are); the caller waits for `stream` before it reads
/// or lets go of `dst`.
///
/// # Safety
/// The source lies in a live device allocation nothing writes until the copy completes; `dst`
/// stays alive and untouched until then.
pub unsafe fn copy_rows_to_host(dst: &mut [u8], src: sys::CUdeviceptr, src_pitch: usize, row_bytes: usize, rows: usize, every: usize, stream: &Stream) -> CuResult<()> {
    if dst.len() < row_bytes * rows {
        return Err(BackendError::Host(format!("copy to host: {} bytes for {rows} rows of {row_bytes}", dst.len())));
    }
    if rows == 0 || row_bytes == 0 {
        return Ok(());
    }
    let every = every.max(1);
    let copy = rows_from_device(src, every * src_pitch, RowsTo::Host(dst.as_mut_ptr() as *mut std::ffi::c_void), every * row_bytes, row_bytes, rows.div_ceil(every));
    // SAFETY: the caller's contract; `dst` holds `rows * row_bytes` bytes.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.raw) }.result().map_err(err("cuMemcpy2DAsync (device to host)"))
}
