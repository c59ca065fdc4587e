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
pub mod stored;
mod timing;

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use crate::device::{Backend, DeviceMemory, HostIo};
use crate::error::{BackendError, Error, Result};
use crate::frame::VideoInfo;
use crate::params::Algorithm;
use crate::plan::Plan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

use hostio::{frame_ranges, HostRange, HostRegistry};
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
}

impl DeviceInfo {
    fn open(device_id: usize) -> Result<Self> {
        // In the order a user fixes things: the driver and a device first, then the compiler.
        let ctx = open_context(device_id).map_err(unavailable)?;
        loader::ensure_nvrtc().map_err(unavailable)?;
        loader::guarded("CUDA driver", || {
            let name = ctx.name().map_err(|e| e.to_string())?;
            let compute_capability = ctx.compute_capability().map_err(|e| e.to_string())?;
            let max_shared = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).map_err(|e| e.to_string())? as usize;
            let shared_per_sm = module::shared_per_sm(&ctx)?;
            Ok(DeviceInfo { ctx: ctx.clone(), name, compute_capability, max_shared, shared_per_sm })
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
    /// Output frames launched and not finished, oldest first, with the planes each job writes.
    in_flight: VecDeque<(usize, Vec<usize>)>,
    /// Per ring slot: the page-locked host frame its content was copied from by direct DMA (until
    /// the job whose target the slot is has been launched: that job's output planes are copied
    /// back into this frame right after its kernels).
    slot_host: Vec<Option<Vec<HostRange>>>,
    /// The slot of the newest upload: every launch waits for it (the upload stream is in order),
    /// so a finished job implies every upload before its launch is complete (Backend::upload).
    last_upload: Option<usize>,
    /// Frames cross in their format's own layout (`Backend::take_stored_frames`).
    stored: Option<StoredIo>,
}

impl Configured {
    /// Planes of the host frames `upload` takes.
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
    registry: HostRegistry,
    /// Host frames (plane ranges) that `finish` has written into: the caller finishes into its
    /// uploaded frames (the engine does), so the copy back may go there at launch.
    finish_targets: HashSet<Vec<HostRange>>,
    /// Formats (input, output) whose frames cross in their own layout, from the next configure.
    stored_formats: Option<(VideoInfo, VideoInfo)>,
    // Dropped (after `Drop` synchronised every stream) before the streams.
    state: Option<Configured>,
    algorithm: Option<(Algorithm, Box<dyn CudaAlgorithm>)>,
    upload: Stream,
    compute: Stream,
    download: Stream,
}

impl CudaBackend {
    /// Opens device `device_id` for jobs with up to `pipeline_depth` in flight beyond the one
    /// being finished, computing what `factory` makes for each plan; fails with
    /// `Error::BackendUnavailable` when CUDA or NVRTC cannot be used here.
    pub fn new(device_id: usize, pipeline_depth: usize, host_io: HostIo, factory: CudaFactory) -> Result<Self> {
        let device = DeviceInfo::open(device_id)?;
        let ctx = device.ctx.clone();
        Ok(CudaBackend {
            upload: Stream::new(&ctx).map_err(backend_err)?,
            compute: Stream::new(&ctx).map_err(backend_err)?,
            download: Stream::new(&ctx).map_err(backend_err)?,
            registry: HostRegistry::new(&ctx, 64),
            device,
            factory,
            depth: pipeline_depth,
            host_io,
            poison_outputs: false,
            finish_targets: HashSet::new(),
            stored_formats: None,
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
        let mut s = vec![&self.upload, &self.compute, &self.download];
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

    /// Page-locks `ranges` (the registry's rules); releasing an old registration first waits for
    /// every copy in flight.
    fn ensure_registered(&mut self, ranges: &[HostRange]) -> bool {
        let mut streams = vec![&self.upload, &self.compute, &self.download];
        if let Some((_, a)) = &self.algorithm {
            streams.extend(a.streams());
        }
        let mut quiesce = || streams.iter().all(|s| s.synchronize().is_ok());
        self.registry.ensure(ranges, &mut quiesce)
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

    /// Launches `jobs` and queues what each needs after. `to_target_frame`: the caller gave
    /// `launch`'s promise that the host frame uploaded into a job's target slot may receive the
    /// job's output planes before `finish` (not `launch_batch`).
    fn launch_jobs(&mut self, jobs: &[Job], plan: &Plan, to_target_frame: bool) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.bind()?;
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
        let r = self.launch_into(jobs, plan, &outs, to_target_frame);
        if r.is_err() {
            // Nothing of these jobs counts as in flight.
            self.state.as_mut().expect("configured").free.extend(outs);
        }
        r
    }

    fn launch_into(&mut self, jobs: &[Job], plan: &Plan, outs: &[usize], to_target_frame: bool) -> Result<()> {
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
        let layout = state.copy_back().1.clone();
        for (job, &o) in jobs.iter().zip(outs) {
            for s in job.slots() {
                state.ring.last_reader[s] = Some(o);
            }
            // Direct and asynchronous: the output planes go straight back into the host frame
            // the target was uploaded from, when the caller finishes into that frame (the
            // engine); `finish` then only waits. The download stream waits for `computed`.
            let host = state.slot_host[job.slot].take().filter(|r| to_target_frame && !state.resizes && self.host_io.asynchronous && self.finish_targets.contains(r));
            let out = &mut state.outputs[o];
            if let Some(ranges) = host {
                out.start_download_to(&layout, planes.clone(), Some(ranges), &self.download).map_err(backend_err)?;
            } else if !self.host_io.direct {
                out.start_download(&layout, planes.clone(), &self.download).map_err(backend_err)?;
            }
            state.in_flight.push_back((o, planes.clone()));
        }
        Ok(())
    }

    fn upload_frame(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        self.bind()?;
        let state = self.state.as_ref().ok_or_else(|| Error::State("upload before configure".into()))?;
        if slot >= state.ring.slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", state.ring.slots)));
        }
        if !frame.matches(state.host_geometry()) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        self.state.as_mut().expect("configured").slot_host[slot] = None;
        if self.state.as_ref().is_some_and(|s| s.stored.is_some()) {
            return self.upload_stored(slot, frame);
        }
        if self.host_io.direct {
            let ranges = frame_ranges(frame);
            if self.ensure_registered(&ranges) {
                let state = self.state.as_mut().expect("configured");
                let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
                state.ring.upload_direct(slot, &ranges, &self.upload, reader).map_err(backend_err)?;
                state.last_upload = Some(slot);
                if !self.host_io.asynchronous {
                    // The caller may change the frame once we return: wait for the copy.
                    return state.ring.arrived(slot).synchronize().map_err(backend_err);
                }
                // Backend::upload's promise: `frame` stays unchanged until a job launched after
                // this call has been finished (every launch waits for the newest upload).
                state.slot_host[slot] = Some(ranges);
                return Ok(());
            }
        }
        let state = self.state.as_mut().expect("configured");
        let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
        state.ring.upload(slot, frame, &self.upload, reader).map_err(backend_err)?;
        state.last_upload = Some(slot);
        Ok(())
    }

    /// [`Self::upload_frame`] of a stored frame: copied as it is (by DMA once page-locked) and
    /// unpacked into the slot on the device (super::stored).
    fn upload_stored(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        let ranges = frame_ranges(frame);
        let direct = self.host_io.direct && self.ensure_registered(&ranges);
        let state = self.state.as_mut().expect("configured");
        let stored = state.stored.as_ref().expect("checked by the caller");
        if let Some(o) = state.ring.last_reader[slot] {
            self.upload.wait(&state.outputs[o].computed).map_err(backend_err)?;
        }
        stored.upload(&ranges, state.ring.slot_ptr(slot), &state.ring.layout, &self.upload).map_err(backend_err)?;
        state.ring.arrived(slot).record(&self.upload).map_err(backend_err)?;
        state.last_upload = Some(slot);
        if direct && self.host_io.asynchronous {
            // As in upload_frame: the frame stays unchanged until a later job is finished.
            state.slot_host[slot] = Some(ranges);
        } else if direct {
            state.ring.arrived(slot).synchronize().map_err(backend_err)?;
        }
        Ok(())
    }

    fn finish_job(&mut self, out: &mut PlanarFrame) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("finish before configure".into()))?;
        let (o, planes) = state.in_flight.pop_front().ok_or_else(|| Error::State("finish without a launched job".into()))?;
        state.free.push(o);
        let (out_geometry, layout) = state.copy_back();
        let layout = layout.clone();
        if !out.matches(out_geometry) {
            // The output frame is free again: its queued copy back must be done first.
            state.outputs[o].abandon_download().map_err(backend_err)?;
            return Err(Error::InvalidFrame("output frame does not match the configured geometry".into()));
        }
        let ranges = if self.host_io.direct { Some(frame_ranges(out)) } else { None };
        if let Some(r) = &ranges {
            if self.finish_targets.len() >= 1024 {
                self.finish_targets.clear();
            }
            self.finish_targets.insert(r.clone());
        }
        if state.outputs[o].download_queued() {
            // Staged, or direct into the target's host frame: waits, and copies only when `out`
            // is not the frame the planes went to.
            return state.outputs[o].complete(&layout, out).map_err(backend_err);
        }
        if let Some(ranges) = ranges {
            if self.ensure_registered(&ranges) {
                let state = self.state.as_mut().expect("configured");
                return state.outputs[o].complete_direct(&layout, &planes, &ranges, &self.download).map_err(backend_err);
            }
        }
        // Not page-locked (yet): wait for the kernels, then a plain copy.
        let of = &self.state.as_ref().expect("configured").outputs[o];
        of.computed.synchronize().map_err(backend_err)?;
        of.copy_planes_sync(&layout, &planes, out).map_err(backend_err)
    }
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

    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize) -> Result<()> {
        self.bind()?;
        self.synchronize()?;
        self.state = None;
        self.ensure_algorithm(plan)?;
        let layout = FrameLayout::new(geometry);
        let ring = DeviceRing::new(&self.device.ctx, layout.clone(), ring_slots.max(1)).map_err(backend_err)?;
        let scratch_bytes = self.algorithm.as_ref().map_or(0, |(_, a)| a.output_scratch_bytes(geometry));
        let out_geometry = plan.output_geometry(geometry);
        let out_layout = FrameLayout::new(&out_geometry);
        let stored = match self.stored_formats {
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
        // Frames the engine cycles through: the ring's, those in flight and a few ready ones.
        self.registry.capacity = geometry.planes.len() * (2 * ring_slots + self.depth + 8);
        self.finish_targets.clear();
        let (_, a) = self.algorithm.as_mut().expect("just made");
        // Compiles now rather than on the first frame.
        a.configure(&self.device, geometry, &layout, plan, ring_slots.max(1))?;
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
            slot_host: vec![None; ring_slots.max(1)],
            last_upload: None,
            stored,
        });
        Ok(())
    }

    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.upload_frame(slot, frame);
        count_ns(0, t);
        HOST_NS[3].fetch_add(1, Ordering::Relaxed);
        r
    }

    fn launch(&mut self, job: &Job, plan: &Plan) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.launch_jobs(std::slice::from_ref(job), plan, true);
        count_ns(1, t);
        r
    }

    fn launch_batch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        // Batches come from chunked execution (device/chunked.rs), whose host frames come from
        // fixed pools that are reused and never freed while this backend lives (the `Backend`
        // trait's promise): page-locked ranges stay valid, so direct host I/O stays on.
        // One launch covers at most u16::MAX jobs x groups in z.
        for chunk in jobs.chunks(16384) {
            self.launch_jobs(chunk, plan, false)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.finish_job(out);
        count_ns(2, t);
        r
    }

    fn take_stored_frames(&mut self, formats: Option<(VideoInfo, VideoInfo)>) -> bool {
        self.stored_formats = formats.filter(|_| self.host_io.device_layout);
        self.stored_formats.is_some()
    }

    fn device_memory(&self) -> Option<DeviceMemory> {
        // cudarc reports an error recorded earlier by an asynchronous release (and clears it) on
        // the next bind: one retry separates such a stale error from a failing query.
        let query = || self.device.ctx.mem_get_info();
        match query().or_else(|e| {
            tracing::debug!("cuMemGetInfo on {}: {e}; retrying once", self.device.name);
            query()
        }) {
            Ok((free, total)) => Some(DeviceMemory { free: free as u64, total: total as u64 }),
            Err(e) => {
                tracing::warn!("cannot read the free memory of {}: {e}", self.device.name);
                None
            }
        }
    }

    fn device_bytes_per_frame(&mut self, geometry: &Geometry, plan: &Plan) -> u64 {
        let layout = FrameLayout::new(geometry);
        let out_layout = FrameLayout::new(&plan.output_geometry(geometry));
        // Without the algorithm (it failed to start) configure fails anyway; its scratch counts 0.
        let scratch = self.ensure_algorithm(plan).ok().and(self.algorithm.as_ref()).map_or(0, |(_, a)| a.output_scratch_bytes(geometry));
        (layout.frame_bytes + OutputFrame::device_bytes(&out_layout, scratch)) as u64
    }

    fn pipeline_depth(&self) -> usize {
        self.depth
    }
}
