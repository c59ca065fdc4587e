//! A CUDA device: the device half of the device layer, written once for every algorithm.
//!
//! [`CudaBackend`] owns the context, the upload / compute / download streams, the device-resident
//! frame ring ([`ring`]), the output frames and their copy back ([`output`]), page-locked host
//! I/O ([`hostio`]) and the bookkeeping of jobs in flight. It does not know the arithmetic: the
//! plan's algorithm has a [`CudaAlgorithm`] (e.g. [`crate::nlm::cuda::fused::FusedNlm`]) that
//! compiles its kernels through the shared NVRTC caches ([`module`]) and queues them for a list of
//! jobs over ring slots. The upload of frame n+1, the kernels of frames n and n+1 and the download
//! of frame n-1 overlap; docs/design.md describes the data flow.
//!
//! Submodules: [`loader`] (finding libcuda/libnvrtc without letting cudarc panic), [`module`]
//! (NVRTC + caches), [`layout`] (planes in device frames), [`ring`] (device ring + upload),
//! [`output`] (output frames + copy back), [`hostio`] (page-locked host frames), [`stored`]
//! (frames in their format's own layout, (de)interleaved on the device), [`raw`] (owned driver
//! objects, launches), `timing` (kernel-only timings for the benchmarks).

pub mod hostio;
pub mod layout;
pub mod loader;
pub mod module;
pub mod output;
pub mod raw;
pub mod ring;
pub mod shared;
pub mod stored;
mod timing;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use crate::device::frames::{plane_ranges, DeviceFrame, Frame, FramePool, HostRange};
use crate::device::{Backend, Configured as Ready, DeviceMemory, HostIo, StreamSetup};
use crate::error::{BackendError, Error, Result};
use crate::params::Algorithm;
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

use hostio::PinnedFrames;
pub use layout::FrameLayout;
use output::OutputFrame;
use raw::{Context as _, Stream};
use ring::DeviceRing;
use stored::StoredIo;

/// Caller-thread time spent in the CUDA backends' calls, summed over the process (nanoseconds:
/// upload, launch, finish; and uploads counted): `bench_cuda` prints it per frame.
pub static HOST_NS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn count_ns(i: usize, t: std::time::Instant) {
    HOST_NS[i].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

pub(crate) fn unavailable(e: String) -> Error {
    Error::BackendUnavailable(e)
}

pub(crate) fn backend_err(e: BackendError) -> Error {
    Error::Backend(e)
}

/// Device memory in use on `device_id` (total minus free, every process), bytes; None without a
/// usable device. For soak runs and reports.
pub fn device_memory_in_use(device_id: usize) -> Option<u64> {
    let ctx = open_context(device_id).ok()?;
    loader::guarded("CUDA driver", || ctx.mem_get_info().map_err(|e| e.to_string())).ok().map(|(free, total)| (total - free) as u64)
}

/// True when a CUDA device and NVRTC can be used (probes only; never panics).
pub fn available() -> bool {
    loader::ensure_driver().is_ok() && loader::ensure_nvrtc().is_ok() && open_context(0).is_ok()
}

fn open_context(device_id: usize) -> std::result::Result<Arc<CudaContext>, String> {
    loader::ensure_driver()?;
    loader::guarded("CUDA driver", || {
        let n = CudaContext::device_count().map_err(|e| format!("no usable CUDA driver: {e}"))?;
        if n <= 0 {
            return Err("the NVIDIA driver found no CUDA device".into());
        }
        if device_id >= n as usize {
            return Err(format!("CUDA device {device_id} requested but only {n} present"));
        }
        CudaContext::new(device_id).map_err(|e| format!("opening CUDA device {device_id}: {e}"))
    })
}

/// What an algorithm's CUDA implementation may know about the device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub ctx: Arc<CudaContext>,
    pub name: String,
    pub compute_capability: (i32, i32),
    /// Opt-in shared memory per block, bytes.
    pub max_shared: usize,
    /// Shared memory per SM, bytes.
    pub shared_per_sm: usize,
    /// The context is someone else's ([`shared`]): kept alive by this.
    pub shared: Option<shared::SharedContext>,
}

impl DeviceInfo {
    fn open(device_id: usize, shared: Option<&shared::SharedContext>) -> Result<Self> {
        // In the order a user fixes things: the driver and a device first, then the compiler.
        let ctx = match shared {
            None => open_context(device_id).map_err(unavailable)?,
            Some(s) => {
                loader::ensure_driver().map_err(unavailable)?;
                loader::guarded("CUDA driver", || s.open()).map_err(unavailable)?
            }
        };
        loader::ensure_nvrtc().map_err(unavailable)?;
        loader::guarded("CUDA driver", || {
            let name = ctx.name().map_err(|e| e.to_string())?;
            let compute_capability = ctx.compute_capability().map_err(|e| e.to_string())?;
            let max_shared = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).map_err(|e| e.to_string())? as usize;
            let shared_per_sm = module::shared_per_sm(&ctx)?;
            Ok(DeviceInfo { ctx: ctx.clone(), name, compute_capability, max_shared, shared_per_sm, shared: shared.cloned() })
        })
        .map_err(unavailable)
    }
}

/// One job's output frame, as an algorithm's kernels see it.
#[derive(Debug, Clone, Copy)]
pub struct OutputTarget {
    /// Device address of the output frame (planes at the ring's [`FrameLayout`]).
    pub frame: u64,
    /// Device address of the frame's working memory (`output_scratch_bytes`).
    pub scratch: u64,
}

/// The device side of one [`CudaAlgorithm::enqueue`] call.
pub struct Launch<'a> {
    pub device: &'a DeviceInfo,
    /// Everything the jobs depend on (their frames' uploads, the previous use of their output
    /// frames) is ordered before anything queued on this stream from now on.
    pub compute: &'a Stream,
    pub ring: &'a DeviceRing,
    /// Job i of the call writes `outputs[i]`.
    pub outputs: &'a [OutputTarget],
}

/// One algorithm's computation on a CUDA device.
pub trait CudaAlgorithm: Send {
    /// Short description (kernel path and its settings).
    fn describe(&self) -> String;

    /// Compiles the kernels and allocates working memory for frames of `geometry` (planes at
    /// `layout`) under `plan`, for a ring of `ring_slots` frames. Called at every configure of the
    /// backend, nothing in flight.
    fn configure(&mut self, device: &DeviceInfo, geometry: &Geometry, layout: &FrameLayout, plan: &Plan, ring_slots: usize) -> Result<()>;

    /// Queues the kernels of `jobs` (job i writing `launch.outputs[i]`: `plan`'s output planes)
    /// and returns the stream after whose queued work all of them are done.
    fn enqueue<'a>(&'a mut self, launch: &Launch<'a>, jobs: &[Job], plan: &Plan) -> Result<&'a Stream>;

    /// Device bytes of working memory each output frame carries for this algorithm with
    /// `geometry` (0: none).
    fn output_scratch_bytes(&self, geometry: &Geometry) -> usize {
        let _ = geometry;
        0
    }

    /// Streams of the algorithm's own, for the backend to wait on (before releasing memory).
    fn streams(&self) -> Vec<&Stream> {
        Vec::new()
    }
}

/// Makes the CUDA implementation of a plan's algorithm on a device (the composition root's
/// choice).
pub type CudaFactory = Arc<dyn Fn(&Plan, &DeviceInfo) -> Result<Box<dyn CudaAlgorithm>> + Send + Sync>;

/// What was submitted into a ring slot, kept until the job whose target it is has been launched.
enum SlotInput {
    /// A host frame (the output goes back into it, or next to it).
    Host(Arc<Frame>),
    /// A frame from device memory (the frame itself is in `Configured::held_inputs`), with the
    /// caller's device frame its output goes into, if any (else a host frame of the pool).
    Device(Option<DeviceFrame>),
}

/// Where a launched job's output goes.
enum Destination {
    /// A host frame: the submitted one (`input`, written in place) or `separate`, a frame of the
    /// pool (super-resolution's larger frames; an input frame shared with another holder; a
    /// device input).
    Host { input: Option<Arc<Frame>>, separate: Option<Frame> },
    /// The caller's device frame (the copy into it queued at launch).
    Device(DeviceFrame),
}

/// A job launched and not finished.
struct InFlight {
    /// Its device output frame.
    output: usize,
    /// The planes copied back (the plan's output planes; every plane of a stored frame).
    planes: Vec<usize>,
    to: Destination,
}

/// A finished job's output.
enum Finished {
    Host(Frame),
    Device(DeviceFrame),
}

struct Configured {
    geometry: Geometry,
    /// Planes of output frames: the input's, or scaled (super-resolution).
    out_geometry: Geometry,
    out_layout: FrameLayout,
    /// Output frames differ from input frames (`Plan::resizes`): none goes back into its input.
    resizes: bool,
    plan_key: String,
    ring: DeviceRing,
    scratch_bytes: usize,
    /// Device output frames; grown on demand (any number of jobs may be in flight).
    outputs: Vec<OutputFrame>,
    /// Output frames not in flight.
    free: Vec<usize>,
    /// Jobs launched and not finished, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Per ring slot: what was submitted there, until the job whose target it is has been
    /// launched.
    slot_frames: Vec<Option<SlotInput>>,
    /// Frames from device memory whose copy into their slot (oldest first) may still run; let go
    /// as soon as the slot's `arrived` event says the copy is done.
    held_inputs: VecDeque<(usize, DeviceFrame)>,
    /// The slot of the newest upload: every launch waits for it (the upload stream is in order),
    /// so a finished job implies every upload before its launch is complete.
    last_upload: Option<usize>,
    /// Frames cross in their format's own layout (`StreamSetup::stored`).
    stored: Option<StoredIo>,
}

impl Configured {
    /// Planes of the host frames `submit` takes.
    fn host_geometry(&self) -> &Geometry {
        self.stored.as_ref().map_or(&self.geometry, |s| &s.in_geometry)
    }

    /// Planes of the host frames `finish` writes, and where they lie in what is copied back.
    fn copy_back(&self) -> (&Geometry, &FrameLayout) {
        match &self.stored {
            Some(s) => (&s.out_geometry, &s.out_layout),
            None => (&self.out_geometry, &self.out_layout),
        }
    }

    /// Which of those planes a job writes (`computed`: the plan's output planes): all of a
    /// stored frame (its pass-through components are packed in on the device).
    fn copied_planes(&self, computed: Vec<usize>) -> Vec<usize> {
        match &self.stored {
            Some(s) => (0..s.out_geometry.planes.len()).collect(),
            None => computed,
        }
    }

    /// Device bytes of the stored buffer of each output frame (0 without stored frames).
    fn stored_bytes(&self) -> usize {
        self.stored.as_ref().map_or(0, |s| s.output_bytes())
    }
}

/// A backend on one CUDA device.
pub struct CudaBackend {
    device: DeviceInfo,
    factory: CudaFactory,
    depth: usize,
    host_io: HostIo,
    /// Fill each output frame with a byte pattern before its kernels (tests: unwritten samples
    /// then show).
    poison_outputs: bool,
    /// Host frames: page-locked (direct host I/O) or ordinary.
    frames: FramePool,
    // Dropped (after `Drop` synchronised every stream) before the streams.
    state: Option<Configured>,
    algorithm: Option<(Algorithm, Box<dyn CudaAlgorithm>)>,
    upload: Stream,
    compute: Stream,
    download: Stream,
    /// Copies of device frames to the host for the noise estimate (`read_device`): a stream of
    /// their own, so that waiting for one waits for nothing else (the synchronous copy functions
    /// run on the context's default stream).
    read: Stream,
    /// Last, so dropped after everything made in the context ([`shared`]).
    _shared: Option<shared::SharedContext>,
}

impl CudaBackend {
    /// Opens device `device_id` for jobs with up to `pipeline_depth` in flight beyond the one
    /// being finished, computing what `factory` makes for each plan; fails with
    /// `Error::BackendUnavailable` when CUDA or NVRTC cannot be used here.
    pub fn new(device_id: usize, pipeline_depth: usize, host_io: HostIo, factory: CudaFactory) -> Result<Self> {
        Self::new_in(device_id, None, pipeline_depth, host_io, factory)
    }

    /// [`Self::new`] in a context of someone else's (`shared`: the pipeline's CUDA context) on
    /// that context's device, or on `device_id`'s primary context without one.
    pub fn new_in(device_id: usize, shared: Option<&shared::SharedContext>, pipeline_depth: usize, host_io: HostIo, factory: CudaFactory) -> Result<Self> {
        let device_id = shared.map_or(device_id, |s| s.ordinal());
        let device = DeviceInfo::open(device_id, shared)?;
        let ctx = device.ctx.clone();
        Ok(CudaBackend {
            upload: Stream::new(&ctx).map_err(backend_err)?,
            compute: Stream::new(&ctx).map_err(backend_err)?,
            download: Stream::new(&ctx).map_err(backend_err)?,
            read: Stream::new(&ctx).map_err(backend_err)?,
            frames: if host_io.direct { FramePool::new(Arc::new(PinnedFrames::new(&ctx, shared.cloned()))) } else { FramePool::host() },
            _shared: shared.cloned(),
            device,
            factory,
            depth: pipeline_depth,
            host_io,
            poison_outputs: false,
            state: None,
            algorithm: None,
        })
    }

    /// Tests: fill output frames with 0xA7 before every launch, so unwritten samples show.
    pub fn set_poison_outputs(&mut self, on: bool) {
        self.poison_outputs = on;
    }

    pub fn device_name(&self) -> &str {
        &self.device.name
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    /// The implementation of `plan`'s algorithm, made when the algorithm changes.
    fn ensure_algorithm(&mut self, plan: &Plan) -> Result<()> {
        let algorithm = plan.algorithm();
        if self.algorithm.as_ref().map(|a| a.0) != Some(algorithm) {
            self.algorithm = None;
            self.algorithm = Some((algorithm, (self.factory)(plan, &self.device)?));
        }
        Ok(())
    }

    fn bind(&self) -> Result<()> {
        self.device.ctx.bind_to_thread().map_err(|e| Error::Backend(e.ctx("binding the CUDA context")))
    }

    /// Every stream work is queued on: the backend's and the algorithm's.
    fn streams(&self) -> Vec<&Stream> {
        let mut s = vec![&self.upload, &self.compute, &self.download, &self.read];
        if let Some((_, a)) = &self.algorithm {
            s.extend(a.streams());
        }
        s
    }

    fn synchronize(&self) -> Result<()> {
        for s in self.streams() {
            s.synchronize().map_err(backend_err)?;
        }
        Ok(())
    }

    /// An output frame that is not in flight (a new one when all are).
    fn take_output(&mut self) -> Result<usize> {
        let state = self.state.as_mut().ok_or_else(|| Error::State("launch before configure".into()))?;
        if let Some(o) = state.free.pop() {
            return Ok(o);
        }
        let o = OutputFrame::new(&self.device.ctx, &state.out_layout, state.scratch_bytes, state.stored_bytes()).map_err(backend_err)?;
        state.outputs.push(o);
        Ok(state.outputs.len() - 1)
    }

    /// Queues the kernels of `jobs` into output frames `outs` after the previous use of those
    /// frames, and records each frame's `computed` event after them.
    fn enqueue_into(&mut self, jobs: &[Job], plan: &Plan, outs: &[usize]) -> Result<()> {
        let state = self.state.as_ref().ok_or_else(|| Error::State("launch before configure".into()))?;
        let (_, algorithm) = self.algorithm.as_mut().ok_or_else(|| Error::State("launch before configure".into()))?;
        for &o in outs {
            // Work of the output frame's previous job (its working memory included) is done.
            self.compute.wait(&state.outputs[o].computed).map_err(backend_err)?;
        }
        let targets: Vec<OutputTarget> = outs.iter().map(|&o| OutputTarget { frame: state.outputs[o].device.ptr, scratch: state.outputs[o].scratch_ptr() }).collect();
        let launch = Launch { device: &self.device, compute: &self.compute, ring: &state.ring, outputs: &targets };
        let done = algorithm.enqueue(&launch, jobs, plan)?;
        if state.stored.is_none() && !state.resizes {
            // A planar job of a device input (no host frame holds its input): the planes it does
            // not compute come from its ring slot into the output frame, copied before `computed`
            // (the slot may be refilled after that); every plane is then copied out.
            let computed = plan.output_planes();
            for (job, &o) in jobs.iter().zip(outs) {
                if !matches!(state.slot_frames.get(job.slot), Some(Some(SlotInput::Device(_)))) {
                    continue;
                }
                for (p, g) in state.geometry.planes.iter().enumerate().filter(|(p, _)| !computed.contains(p)) {
                    let row = g.width * state.geometry.bytes_per_sample;
                    let to = state.outputs[o].device.ptr + state.out_layout.offsets[p] as u64;
                    let from = state.ring.slot_ptr(job.slot) + state.ring.layout.offsets[p] as u64;
                    // SAFETY: both planes lie in their allocations (same geometry: no resize); the
                    // slot is not refilled before `computed`, recorded after this on `done`.
                    unsafe { raw::copy_rows_async(to, row, from, row, row, g.height, done) }.map_err(|e| Error::Backend(e.ctx("copying an uncomputed plane")))?;
                }
            }
        }
        let mut sources = Vec::new();
        if let Some(stored) = &state.stored {
            // Before `computed`: the ring slot it reads is refilled only after that.
            let computed = plan.output_planes();
            for (job, &o) in jobs.iter().zip(outs) {
                let out = &state.outputs[o];
                let into = out.stored.as_ref().map(|b| b.ptr).ok_or_else(|| Error::State("output frame without a stored buffer".into()))?;
                sources.push(stored.pack(into, out.device.ptr, &state.out_layout, &computed, state.ring.slot_ptr(job.slot), &state.ring.layout, done).map_err(backend_err)?);
            }
        }
        for &o in outs {
            state.outputs[o].computed.record(done).map_err(backend_err)?;
        }
        let state = self.state.as_mut().expect("configured");
        for (&o, s) in outs.iter().zip(sources) {
            state.outputs[o].stored_sources = s;
        }
        Ok(())
    }

    /// Waits (on the compute stream) for the frames `jobs` read to have arrived.
    fn wait_for_frames(&self, jobs: &[Job]) -> Result<()> {
        let state = self.state.as_ref().ok_or_else(|| Error::State("launch before configure".into()))?;
        let mut slots: Vec<usize> = Vec::new();
        for job in jobs {
            for s in job.slots() {
                if s >= state.ring.slots {
                    return Err(Error::State(format!("ring slot {s} out of range")));
                }
                if !slots.contains(&s) {
                    slots.push(s);
                }
            }
        }
        if let Some(s) = state.last_upload.filter(|s| !slots.contains(s)) {
            slots.push(s);
        }
        for &s in &slots {
            self.compute.wait(state.ring.arrived(s)).map_err(backend_err)?;
        }
        Ok(())
    }

    /// Launches `jobs` and queues what each needs after.
    fn launch_jobs(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let state = self.state.as_ref().ok_or_else(|| Error::State("launch before configure".into()))?;
        for job in jobs {
            if state.slot_frames.get(job.slot).is_none_or(|f| f.is_none()) {
                return Err(Error::State(format!("no frame was submitted into the target slot {}", job.slot)));
            }
        }
        let mut outs = Vec::with_capacity(jobs.len());
        for _ in jobs {
            match self.take_output() {
                Ok(o) => outs.push(o),
                Err(e) => {
                    self.state.as_mut().expect("configured").free.extend(outs);
                    return Err(e);
                }
            }
        }
        let r = self.launch_into(jobs, plan, &outs);
        if r.is_err() {
            // Nothing of these jobs counts as in flight.
            self.state.as_mut().expect("configured").free.extend(outs);
        }
        r
    }

    fn launch_into(&mut self, jobs: &[Job], plan: &Plan, outs: &[usize]) -> Result<()> {
        let key = plan.structure_key();
        if self.state.as_ref().map(|s| s.plan_key != key).unwrap_or(false) {
            return Err(Error::State("plan changed structure without configure".into()));
        }
        self.wait_for_frames(jobs)?;
        if self.poison_outputs {
            let state = self.state.as_ref().expect("configured");
            for &o in outs {
                let out = &state.outputs[o];
                for d in std::iter::once(&out.device).chain(&out.stored) {
                    // SAFETY: the range is the output frame's allocation; it is not in flight.
                    unsafe { raw::memset(d.ptr, 0xA7, d.bytes, &self.compute) }.map_err(|e| Error::Backend(e.ctx("poisoning")))?;
                }
            }
        }
        self.enqueue_into(jobs, plan, outs)?;
        let state = self.state.as_mut().expect("configured");
        let planes = state.copied_planes(plan.output_planes());
        let (copy_geometry, layout) = state.copy_back();
        let (copy_geometry, layout) = (copy_geometry.clone(), layout.clone());
        for (job, &o) in jobs.iter().zip(outs) {
            for s in job.slots() {
                state.ring.last_reader[s] = Some(o);
            }
            let mut input = match state.slot_frames[job.slot].take().expect("checked at launch") {
                SlotInput::Host(f) => f,
                SlotInput::Device(Some(to)) => {
                    let out = &mut state.outputs[o];
                    if let Err(e) = out.start_copy_to_device(&layout, &copy_geometry, &to, &self.download) {
                        state.slot_frames[job.slot] = Some(SlotInput::Device(Some(to)));
                        return Err(backend_err(e));
                    }
                    state.in_flight.push_back(InFlight { output: o, planes: planes.clone(), to: Destination::Device(to) });
                    continue;
                }
                SlotInput::Device(None) => {
                    let separate = self.frames.take(&copy_geometry);
                    let planes: Vec<usize> = (0..copy_geometry.planes.len()).collect();
                    let out = &mut state.outputs[o];
                    let direct = separate.pinned_ranges().filter(|_| self.host_io.direct && self.host_io.asynchronous).map(|r| r.to_vec());
                    let queued = match direct {
                        Some(ranges) => out.start_download_to(&layout, planes.clone(), Some(ranges), &self.download),
                        None if !self.host_io.direct => out.start_download(&layout, planes.clone(), &self.download),
                        None => Ok(()),
                    };
                    if let Err(e) = queued {
                        self.frames.give(separate);
                        state.slot_frames[job.slot] = Some(SlotInput::Device(None));
                        return Err(backend_err(e));
                    }
                    state.in_flight.push_back(InFlight { output: o, planes: planes.clone(), to: Destination::Host { input: None, separate: Some(separate) } });
                    continue;
                }
            };
            // The output goes back into the submitted frame when this backend holds the only
            // reference to it (the engine's frames) and it has the output's planes; else into a
            // frame of the pool.
            let in_place = !state.resizes && Arc::get_mut(&mut input).is_some() && input.matches(&copy_geometry);
            let mut separate = (!in_place).then(|| self.frames.take(&copy_geometry));
            let out = &mut state.outputs[o];
            let host: Option<&Frame> = match &separate {
                Some(f) => Some(f),
                None => Some(&*input),
            };
            // Direct and asynchronous: the planes go straight into the host frame on the download
            // stream once the kernels are done; `finish` then only waits.
            let direct = host.and_then(|f| f.pinned_ranges()).filter(|_| self.host_io.direct && self.host_io.asynchronous).map(|r| r.to_vec());
            let queued = match direct {
                Some(ranges) => out.start_download_to(&layout, planes.clone(), Some(ranges), &self.download),
                None if !self.host_io.direct => out.start_download(&layout, planes.clone(), &self.download),
                None => Ok(()),
            };
            if let Err(e) = queued {
                if let Some(f) = separate.take() {
                    self.frames.give(f);
                }
                state.slot_frames[job.slot] = Some(SlotInput::Host(input));
                return Err(backend_err(e));
            }
            state.in_flight.push_back(InFlight { output: o, planes: planes.clone(), to: Destination::Host { input: Some(input), separate } });
        }
        Ok(())
    }

    fn submit_frame(&mut self, slot: usize, frame: Arc<Frame>) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("submit before configure".into()))?;
        if slot >= state.ring.slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", state.ring.slots)));
        }
        if !frame.matches(state.host_geometry()) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        if state.slot_frames[slot].take().is_some() {
            // A frame never launched as a target (chunked workers' context frames): its copy
            // into the slot is complete before it is let go.
            state.ring.arrived(slot).synchronize().map_err(backend_err)?;
        }
        let ranges = frame.pinned_ranges().filter(|_| self.host_io.direct).map(|r| r.to_vec());
        if state.stored.is_some() {
            self.upload_stored(slot, &frame, ranges)?;
        } else if let Some(ranges) = ranges {
            let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
            state.ring.upload_direct(slot, &ranges, &self.upload, reader).map_err(backend_err)?;
            state.last_upload = Some(slot);
            if !self.host_io.asynchronous {
                // Measurement switch: the copy completes before the call returns.
                state.ring.arrived(slot).synchronize().map_err(backend_err)?;
            }
        } else {
            let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
            state.ring.upload(slot, &frame, &self.upload, reader).map_err(backend_err)?;
            state.last_upload = Some(slot);
        }
        // Kept until its job is launched, and by that job until it is finished: the copy may
        // still read it.
        self.state.as_mut().expect("configured").slot_frames[slot] = Some(SlotInput::Host(frame));
        Ok(())
    }

    /// [`Backend::submit_device`]: the frame's planes copied into the slot on the device (through
    /// the stored-frame path where the format interleaves components).
    fn submit_device_frame(&mut self, slot: usize, input: DeviceFrame, output: Option<DeviceFrame>) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("submit before configure".into()))?;
        if slot >= state.ring.slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", state.ring.slots)));
        }
        check_device_frame("input", &input, state.host_geometry())?;
        if let Some(out) = &output {
            check_device_frame("output", out, state.copy_back().0)?;
        }
        if state.slot_frames[slot].take().is_some() {
            // As in `submit_frame`: a frame never launched as a target.
            state.ring.arrived(slot).synchronize().map_err(backend_err)?;
        }
        if let Some(o) = state.ring.last_reader[slot] {
            self.upload.wait(&state.outputs[o].computed).map_err(backend_err)?;
        }
        let to = state.ring.slot_ptr(slot);
        let queued = match &state.stored {
            Some(stored) => stored.upload_device(input.planes(), to, &state.ring.layout, &self.upload).map_err(backend_err),
            None => state.geometry.planes.iter().zip(input.planes()).enumerate().try_for_each(|(p, (g, from))| {
                let row = g.width * state.geometry.bytes_per_sample;
                // SAFETY: the destination is plane `p` of the slot (rows packed); the source is
                // the caller's frame, checked above to hold these rows at its pitch.
                unsafe { raw::copy_rows_async(to + state.ring.layout.offsets[p] as u64, row, from.ptr, from.pitch, row, g.height, &self.upload) }
                    .map_err(|e| Error::Backend(e.ctx("upload from device memory")))
            }),
        };
        if let Err(e) = queued {
            // Copies queued before the failure may still read the frame: done before it goes.
            let _ = self.upload.synchronize();
            return Err(e);
        }
        state.ring.arrived(slot).record(&self.upload).map_err(backend_err)?;
        state.last_upload = Some(slot);
        state.held_inputs.push_back((slot, input));
        state.slot_frames[slot] = Some(SlotInput::Device(output));
        self.release_copied_inputs()
    }

    /// Lets go of the device inputs whose copy into the ring is done (their owners: the caller's
    /// buffers, back to their pools at once rather than a window later).
    fn release_copied_inputs(&mut self) -> Result<()> {
        let Some(state) = self.state.as_mut() else { return Ok(()) };
        while let Some((slot, _)) = state.held_inputs.front() {
            // A slot's event recorded again (a later upload) completes later: waiting for it is
            // only later, never early.
            if !state.ring.arrived(*slot).is_done().map_err(backend_err)? {
                break;
            }
            state.held_inputs.pop_front();
        }
        Ok(())
    }

    /// [`Self::submit_frame`] of a stored frame: copied as it is (by DMA when page-locked:
    /// `ranges`) and unpacked into the slot on the device (super::stored).
    fn upload_stored(&mut self, slot: usize, frame: &Frame, ranges: Option<Vec<HostRange>>) -> Result<()> {
        let direct = ranges.is_some();
        let ranges = ranges.unwrap_or_else(|| plane_ranges(frame));
        let state = self.state.as_mut().expect("configured");
        let stored = state.stored.as_ref().expect("checked by the caller");
        if let Some(o) = state.ring.last_reader[slot] {
            self.upload.wait(&state.outputs[o].computed).map_err(backend_err)?;
        }
        stored.upload(&ranges, state.ring.slot_ptr(slot), &state.ring.layout, &self.upload).map_err(backend_err)?;
        state.ring.arrived(slot).record(&self.upload).map_err(backend_err)?;
        state.last_upload = Some(slot);
        if direct && !self.host_io.asynchronous {
            state.ring.arrived(slot).synchronize().map_err(backend_err)?;
        }
        Ok(())
    }

    fn finish_job(&mut self) -> Result<Finished> {
        self.bind()?;
        let r = self.finish_oldest();
        self.release_copied_inputs()?;
        r
    }

    fn finish_oldest(&mut self) -> Result<Finished> {
        let state = self.state.as_mut().ok_or_else(|| Error::State("finish before configure".into()))?;
        let job = state.in_flight.pop_front().ok_or_else(|| Error::State("finish without a launched job".into()))?;
        state.free.push(job.output);
        let layout = state.copy_back().1.clone();
        let InFlight { output: o, planes, to } = job;
        let (input, separate) = match to {
            Destination::Device(frame) => {
                state.outputs[o].wait_copied().map_err(backend_err)?;
                return Ok(Finished::Device(frame));
            }
            Destination::Host { input, separate } => (input, separate),
        };
        // The separate frame of a device input has no host input: every plane was copied back
        // (uncomputed ones put into the output frame on the device, `enqueue_into`).
        let separate_from_input = input.is_some();
        let (mut out, input) = match separate {
            Some(f) => (f, input),
            None => match Arc::try_unwrap(input.ok_or_else(|| Error::State("a job without a host frame for its output".into()))?) {
                Ok(f) => (f, None),
                Err(_) => {
                    state.outputs[o].abandon_download().map_err(backend_err)?;
                    return Err(Error::State("an input frame written in place was shared meanwhile".into()));
                }
            },
        };
        let of = &mut state.outputs[o];
        let copied = if of.download_queued() {
            // Waits; copies only from staging memory (`host_io.direct` off).
            of.complete(&layout, &mut out)
        } else if let Some(ranges) = out.pinned_ranges().filter(|_| self.host_io.direct).map(|r| r.to_vec()) {
            of.complete_direct(&layout, &planes, &ranges, &self.download)
        } else {
            // Not page-locked: wait for the kernels, then a plain copy.
            of.computed.synchronize().and_then(|_| of.copy_planes_sync(&layout, &planes, &mut out))
        };
        copied.map_err(backend_err)?;
        if let Some(input) = input.filter(|_| separate_from_input) {
            if !state.resizes && state.stored.is_none() {
                // A separate frame of the input's planes: the planes the job did not compute
                // are the input's.
                for (p, (to, from)) in out.planes.iter_mut().zip(&input.planes).enumerate() {
                    if !planes.contains(&p) {
                        crate::convert::copy_bytes(to.samples.as_bytes_mut(), from.samples.as_bytes());
                    }
                }
            }
            if let Ok(f) = Arc::try_unwrap(input) {
                // Its upload is complete (the job waited for it).
                self.frames.give(f);
            }
        }
        Ok(Finished::Host(out))
    }
}

/// Checks that `frame` has one plane per plane of `geometry` (the stored or planar planes of the
/// stream), each with a pitch that holds a row.
fn check_device_frame(what: &str, frame: &DeviceFrame, geometry: &Geometry) -> Result<()> {
    if frame.planes().len() != geometry.planes.len() {
        return Err(Error::InvalidFrame(format!("{what} device frame has {} planes; the stream's format has {}", frame.planes().len(), geometry.planes.len())));
    }
    for (p, (plane, g)) in frame.planes().iter().zip(&geometry.planes).enumerate() {
        let row = g.width * geometry.bytes_per_sample;
        if plane.pitch < row || plane.ptr == 0 {
            return Err(Error::InvalidFrame(format!("{what} device frame: plane {p} at {:#x} with a pitch of {} bytes cannot hold rows of {row}", plane.ptr, plane.pitch)));
        }
    }
    Ok(())
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.bind();
        let _ = self.synchronize();
        self.state = None;
    }
}

impl Backend for CudaBackend {
    fn describe(&self) -> String {
        let what = match &self.algorithm {
            Some((_, a)) => a.describe(),
            None => "not configured".into(),
        };
        format!("cuda ({}, sm_{}{}, {what}, pipeline depth {})", self.device.name, self.device.compute_capability.0, self.device.compute_capability.1, self.depth)
    }

    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Ready> {
        let StreamSetup { geometry, plan, past, future, stored, ring_slots } = *setup;
        self.bind()?;
        // Every copy that may read or write a host frame held now is done before they go.
        self.synchronize()?;
        self.state = None;
        self.ensure_algorithm(plan)?;
        let ring_slots = ring_slots.unwrap_or((past + 1 + future) as usize + self.depth).max(1);
        let layout = FrameLayout::new(geometry);
        let ring = DeviceRing::new(&self.device.ctx, layout.clone(), ring_slots).map_err(backend_err)?;
        let scratch_bytes = self.algorithm.as_ref().map_or(0, |(_, a)| a.output_scratch_bytes(geometry));
        let out_geometry = plan.output_geometry(geometry);
        let out_layout = FrameLayout::new(&out_geometry);
        let stored = match stored.filter(|_| self.host_io.device_layout) {
            Some((input, output)) => {
                if Geometry::from_video_info(&input) != *geometry || Geometry::from_video_info(&output) != out_geometry {
                    return Err(Error::State(format!("stored frames of {input:?} -> {output:?} do not match the configured planes")));
                }
                Some(StoredIo::new(&self.device, input, output)?)
            }
            None => None,
        };
        let stored_bytes = stored.as_ref().map_or(0, |s| s.output_bytes());
        let outputs = (0..self.depth + 1).map(|_| OutputFrame::new(&self.device.ctx, &out_layout, scratch_bytes, stored_bytes)).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?;
        let free = (0..outputs.len()).rev().collect();
        let (_, a) = self.algorithm.as_mut().expect("just made");
        // Compiles now rather than on the first frame.
        a.configure(&self.device, geometry, &layout, plan, ring_slots)?;
        let takes_stored = stored.is_some();
        self.state = Some(Configured {
            geometry: geometry.clone(),
            out_geometry,
            out_layout,
            resizes: plan.resizes(),
            plan_key: plan.structure_key(),
            ring,
            scratch_bytes,
            outputs,
            free,
            in_flight: VecDeque::new(),
            slot_frames: (0..ring_slots).map(|_| None).collect(),
            held_inputs: VecDeque::new(),
            last_upload: None,
            stored,
        });
        let state = self.state.as_ref().expect("just set");
        self.frames.keep_only(&[state.host_geometry(), state.copy_back().0]);
        Ok(Ready { pipeline_depth: self.depth, ring_slots, stored: takes_stored, on_device: true })
    }

    fn pool(&mut self) -> &mut FramePool {
        &mut self.frames
    }

    fn submit(&mut self, slot: usize, frame: Arc<Frame>) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.submit_frame(slot, frame);
        count_ns(0, t);
        HOST_NS[3].fetch_add(1, Ordering::Relaxed);
        r
    }

    fn launch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        let t = std::time::Instant::now();
        // One launch covers at most u16::MAX jobs x groups in z.
        let r = jobs.chunks(16384).try_for_each(|chunk| self.launch_jobs(chunk, plan));
        count_ns(1, t);
        r
    }

    fn finish(&mut self) -> Result<Frame> {
        let t = std::time::Instant::now();
        let r = self.finish_job();
        count_ns(2, t);
        match r? {
            Finished::Host(f) => Ok(f),
            Finished::Device(_) => Err(Error::State("finish of a job whose output goes into a device frame (finish_device)".into())),
        }
    }

    fn takes_device_frames(&self) -> bool {
        true
    }

    fn submit_device(&mut self, slot: usize, input: DeviceFrame, output: Option<DeviceFrame>) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.submit_device_frame(slot, input, output);
        count_ns(0, t);
        HOST_NS[3].fetch_add(1, Ordering::Relaxed);
        r
    }

    fn finish_device(&mut self) -> Result<DeviceFrame> {
        let t = std::time::Instant::now();
        let r = self.finish_job();
        count_ns(2, t);
        match r? {
            Finished::Device(f) => Ok(f),
            Finished::Host(f) => {
                self.frames.give(f);
                Err(Error::State("finish_device of a job whose output goes into a host frame (finish)".into()))
            }
        }
    }

    fn read_device(&mut self, frame: &DeviceFrame, into: &mut Frame, every: usize) -> Result<()> {
        self.bind()?;
        let state = self.state.as_ref().ok_or_else(|| Error::State("read before configure".into()))?;
        let geometry = state.host_geometry();
        check_device_frame("input", frame, geometry)?;
        if !into.matches(geometry) {
            return Err(Error::InvalidFrame("host frame does not match the device frame's planes".into()));
        }
        let mut queued = Ok(());
        for ((g, from), to) in geometry.planes.iter().zip(frame.planes()).zip(into.planes.iter_mut()) {
            let row = g.width * geometry.bytes_per_sample;
            // SAFETY: the source is the caller's device frame, checked to hold these rows; `into`
            // is borrowed until the stream is synchronised below.
            queued = unsafe { raw::copy_rows_to_host(to.samples.as_bytes_mut(), from.ptr, from.pitch, row, g.height, every, &self.read) };
            if queued.is_err() {
                break;
            }
        }
        // Also after a failure: nothing may still write `into` when it goes back.
        let waited = self.read.synchronize();
        queued.and(waited).map_err(|e| Error::Backend(e.ctx("reading a device frame")))
    }

    fn memory(&mut self, geometry: &Geometry, plan: &Plan) -> Option<DeviceMemory> {
        // cudarc reports an error recorded earlier by an asynchronous release (and clears it) on
        // the next bind: one retry separates such a stale error from a failing query.
        let query = || self.device.ctx.mem_get_info();
        let (free, total) = match query().or_else(|e| {
            tracing::debug!("cuMemGetInfo on {}: {e}; retrying once", self.device.name);
            query()
        }) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("cannot read the free memory of {}: {e}", self.device.name);
                return None;
            }
        };
        let layout = FrameLayout::new(geometry);
        let out_layout = FrameLayout::new(&plan.output_geometry(geometry));
        // Without the algorithm (it failed to start) configure fails anyway; its scratch counts 0.
        let scratch = self.ensure_algorithm(plan).ok().and(self.algorithm.as_ref()).map_or(0, |(_, a)| a.output_scratch_bytes(geometry));
        let per_frame = (layout.frame_bytes + OutputFrame::device_bytes(&out_layout, scratch)) as u64;
        Some(DeviceMemory { free: free as u64, total: total as u64, per_frame })
    }
}
