//! Chunked processing along time (z) and several devices.
//!
//! [`ChunkedBackend`] is a [`Backend`] for the engine like any other, so `Denoiser`'s push / pop /
//! finish_stream / reset / set_params work unchanged. It collects the jobs the engine's temporal
//! window hands out into chunks of `n` consecutive frames and sends each chunk, with the frames
//! its jobs read (the chunk's own frames plus up to `temporal_past` / `temporal_future` overlap
//! frames, shared with the neighbouring chunks through `Arc`), to one worker thread per device,
//! round-robin. A worker owns its own backend (made by the factory it is given; the composition
//! root's `backends::create_single`), uploads the frames its
//! device does not hold yet, computes the chunk with one [`Backend::launch_batch`] (a grid over z
//! on CUDA) and sends the output frames back; they come out in order.
//!
//! Host frames come from two fixed pools the backend owns, reused and never freed while the
//! backend lives (nor dropped by a worker: every frame a worker holds is still referenced by its
//! pool): input frames, into which `upload` copies the engine's frame and from which the workers
//! upload (shared between chunks through `Arc`; free again once no host slot and no chunk in
//! flight holds it, which `Arc::get_mut` checks), and output frames, into which a worker's
//! backend finishes a job and from which `finish` copies the plan's output planes into the
//! engine's frame (the other planes of that frame are already the input). So a backend that
//! page-locks host frames in place, cached by address (CUDA direct host I/O), sees only addresses
//! that stay valid: a pool grows while more frames are in flight than ever before and otherwise
//! keeps its frames; on a geometry change every worker gets a new backend (releasing what the old
//! one locked) before the old frames are freed.
//!
//! Overlap: the caller's thread fills chunk k+1 (unpack, copy into a pooled input frame) and
//! empties chunk k-1 (copy out of a pooled output frame, pack) while a worker computes chunk k; it
//! waits only when a worker is behind. A worker uploads and launches a chunk as soon as it
//! arrives and finishes jobs whenever no message waits, at most two chunks in flight per worker.
//!
//! Output frames larger than the input (super-resolution, `Plan::resizes`) come back in pooled
//! frames of the output geometry and are always copied out at `finish` (they cannot go into the
//! caller's input frame).
//!
//! Output is bit-identical to unchunked processing whatever the chunk size or the number of
//! workers: every job is the engine's own (its references come from the same `TemporalWindow`,
//! start and end of the sequence included) and carries the plan it was launched with.
//!
//! Latency: the backend reports `pipeline_depth = C * n - 1` with `C = workers + 1` chunks in
//! flight, so the engine's `latency_frames()` is `temporal_future + C * n - 1`.
//!
//! Chunk size: explicit, or automatic. The rule (per device, the smallest result wins):
//! a worker's ring holds two chunks with their overlap, `2 * (n + past + future)` frames, each
//! costing `device_bytes_per_frame` (ring slot + in-flight output); that must fit in
//! [`FREE_FRACTION`] of the device's free memory (plus what this backend already holds there);
//! the rest of the fraction's complement covers working buffers and other users. Auto takes the
//! largest `n` that fits, at most [`AUTO_MAX_FRAMES`]; an explicit `n` that does not fit is an
//! `Error::InvalidParameter` at configure time. Host backends (no device memory reported) use
//! [`HOST_CHUNK_FRAMES`] for auto.

//!
//! Files: this one (the backend: dispatch, pools, the caller's side), `worker` (the worker
//! thread, its messages and its backend), `stats` (where the time goes).

mod stats;
mod worker;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::unbounded;

use crate::convert::copy_bytes;
use crate::device::{cuda, Backend, ChunkFrames};
use crate::error::{BackendError, Error, Result};
use crate::plan::Plan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

use stats::add;
pub use stats::{ChunkStats, WorkerStats};
pub use worker::BackendFactory;
use worker::{worker_main, ChunkJob, ChunkMsg, FrameId, FromWorker, OutFrame, ToWorker, WorkerHandle};

/// Fraction of a device's free memory a worker's ring (two chunks with their overlap) may take.
/// Half: the rest is left to working buffers, other streams and the decoder / encoder of the same
/// pipeline that share the device.
pub const FREE_FRACTION: f64 = 0.5;
/// Largest automatic chunk on a device: once the caller's thread and the workers overlap, larger
/// chunks only save kernel launches (a few microseconds each) while latency (`(workers + 1) x n`
/// frames) and the host pools grow linearly.
pub const AUTO_MAX_FRAMES: usize = 16;
/// Automatic chunk size on host backends (no device memory to size from).
pub const HOST_CHUNK_FRAMES: usize = 8;
/// Largest explicit chunk size on any backend.
pub const MAX_CHUNK_FRAMES: usize = 1024;

/// Threads of each of `workers` CPU workers when the caller asked for all cores: the cores split
/// evenly (at least one each).
pub fn host_threads_per_worker(workers: usize) -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    (cores / workers.max(1)).max(1)
}

/// Number of CUDA devices (never panics: the driver is probed first).
pub fn cuda_device_count() -> std::result::Result<usize, String> {
    cuda::loader::ensure_driver()?;
    cuda::loader::guarded("CUDA driver", || cudarc::driver::CudaContext::device_count().map(|n| n.max(0) as usize).map_err(|e| format!("no usable CUDA driver: {e}")))
}

/// Copies every plane of `src` into `dst` (same geometry), large planes on rayon's pool.
pub fn copy_planar(dst: &mut PlanarFrame, src: &PlanarFrame) {
    for (d, s) in dst.planes.iter_mut().zip(&src.planes) {
        copy_bytes(d.samples.as_bytes_mut(), s.samples.as_bytes());
    }
}

/// Copies the planes `plan`'s jobs write from `src` into `dst` (same geometry).
pub fn copy_planes(dst: &mut PlanarFrame, src: &PlanarFrame, plan: &Plan) {
    for p in plan.output_planes() {
        if let (Some(d), Some(s)) = (dst.planes.get_mut(p), src.planes.get(p)) {
            copy_bytes(d.samples.as_bytes_mut(), s.samples.as_bytes());
        }
    }
}

struct HostSlot {
    id: FrameId,
    frame: Arc<PlanarFrame>,
    /// Sequence number, once a dispatched job named the frame.
    seq: Option<u64>,
    /// The caller's frame uploaded into the slot (where the job of this target may write).
    target: HostTarget,
    /// `target` holds nothing of the input (`upload_filled`): every plane is written into it.
    whole: bool,
}

/// Address and length of each plane of a caller's frame given to `upload`. Under
/// [`Backend::launch`]'s promise (from the launch of the job whose target slot the frame was
/// uploaded into until that job is finished, the backend may write the job's output planes into
/// that frame and the caller reads nothing of it), the worker writes a job's output planes
/// straight into it, so that `finish` into that same frame only waits. `finish` into another
/// frame copies from the pooled output frame instead.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct HostTarget(Vec<(usize, usize)>);

impl HostTarget {
    pub(super) fn of(f: &PlanarFrame) -> Self {
        HostTarget(f.planes.iter().map(|p| (p.samples.as_bytes().as_ptr() as usize, p.samples.as_bytes().len())).collect())
    }

    /// Writes the planes `plan`'s groups write from `src` into the frame, and the other planes
    /// from `input` when given.
    ///
    /// # Safety
    /// The frame is alive and nobody else reads or writes it (Backend::launch's and
    /// Backend::upload_filled's promise, for a job launched on it and not yet finished), and has
    /// the geometry of `src`.
    pub(super) unsafe fn write_planes(&self, src: &PlanarFrame, plan: &Plan, input: Option<&PlanarFrame>) {
        let outputs = plan.output_planes();
        for (p, &(addr, len)) in self.0.iter().enumerate() {
            let from = if outputs.contains(&p) { Some(src) } else { input };
            if let Some(s) = from.and_then(|f| f.planes.get(p)) {
                let s = s.samples.as_bytes();
                if len == s.len() {
                    // SAFETY: see the function's contract.
                    copy_bytes(unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }, s);
                }
            }
        }
    }
}

struct Ticket {
    worker: usize,
    /// The chunk's output frames with the plan of their job and the caller's frame the worker
    /// wrote the output planes into, in order; the first one's input frame when that caller's
    /// frame holds nothing of the input (`upload_filled`), so that a failed chunk's frame comes
    /// out as its input.
    outputs: VecDeque<(OutFrame, Arc<Plan>, HostTarget)>,
    first_input: Option<Arc<PlanarFrame>>,
    /// The worker answered: the outputs are complete.
    received: bool,
    /// Whether a later chunk or a flush was sent to this ticket's worker (so it will finish).
    flushed: bool,
}

/// Chunked, possibly multi-device execution behind the [`Backend`] trait (see the module doc).
pub struct ChunkedBackend {
    workers: Vec<WorkerHandle>,
    spec: ChunkFrames,
    past: u32,
    future: u32,
    /// Resolved chunk size (0 until the first configure of an automatic size).
    n: usize,
    /// What `n` and the workers' rings were resolved for.
    key: Option<String>,
    /// A worker failed since its last configure.
    dirty: bool,
    geometry: Option<Geometry>,
    /// Planes of output frames: `geometry`, or larger (super-resolution, `Plan::resizes`).
    out_geometry: Option<Geometry>,
    host: Vec<Option<HostSlot>>,
    next_id: FrameId,
    /// Launched jobs not yet sent to a worker, with the frame uploaded into the target's slot.
    pending: Vec<(Job, Arc<Plan>, HostTarget, bool)>,
    /// The pooled input frame lent through `input_frame`, until `upload_filled`.
    filling: Option<usize>,
    outstanding: VecDeque<Ticket>,
    next_worker: usize,
    last_plan: Option<Arc<Plan>>,
    /// Pooled input frames (see the module doc); free when only the pool holds one.
    pool_in: Vec<Arc<PlanarFrame>>,
    /// Pooled output frames; free when only the pool holds one.
    pool_out: Vec<OutFrame>,
    /// Frames of an earlier geometry, kept until every worker has a new backend.
    retired: Vec<(Vec<Arc<PlanarFrame>>, Vec<OutFrame>)>,
    stats: Arc<ChunkStats>,
}

impl ChunkedBackend {
    /// Chunked execution over `ordinals.len()` workers whose backends `factory(worker, depth)`
    /// makes (in the worker's thread; `depth`: jobs the backend will have in flight beyond the
    /// one being finished, 0 at first). `ordinals` only label the workers in messages. Tests use
    /// it to run host backends that report device memory or fail on purpose.
    pub fn with_factory(chunk_frames: ChunkFrames, ordinals: &[usize], factory: BackendFactory) -> Result<Self> {
        if let ChunkFrames::Frames(n) = chunk_frames {
            if n == 0 || n > MAX_CHUNK_FRAMES {
                return Err(Error::InvalidParameter(format!("chunk of {n} frames: expected 1..={MAX_CHUNK_FRAMES}")));
            }
        }
        if ordinals.is_empty() {
            return Err(Error::InvalidParameter("no device to run on".into()));
        }
        let stats = Arc::new(ChunkStats { workers: ordinals.iter().map(|_| WorkerStats::default()).collect(), ..Default::default() });
        let mut workers = Vec::new();
        for (i, &ordinal) in ordinals.iter().enumerate() {
            let (tx, wrx) = unbounded();
            let (wtx, rx) = unbounded();
            let st = stats.clone();
            let f = factory.clone();
            let join = std::thread::Builder::new()
                .name(format!("nlm-chunk-{i}"))
                .spawn(move || worker_main(i, f, wrx, wtx, st))
                .map_err(|e| Error::Backend(BackendError::Host(format!("starting a chunk worker: {e}"))))?;
            let mut w = WorkerHandle { ordinal, tx: Some(tx), rx, join: Some(join), description: String::new() };
            let init = w.recv();
            match init {
                Ok(FromWorker::Init(Ok(d))) => w.description = d,
                Ok(FromWorker::Init(Err(e))) | Err(e) => {
                    workers.push(w);
                    shutdown(&mut workers);
                    return Err(e);
                }
                Ok(_) => unreachable!("a worker answers Init first"),
            }
            workers.push(w);
        }
        let n = match chunk_frames {
            ChunkFrames::Frames(n) => n,
            _ => 0,
        };
        Ok(ChunkedBackend {
            workers,
            spec: chunk_frames,
            past: 0,
            future: 0,
            n,
            key: None,
            dirty: false,
            geometry: None,
            out_geometry: None,
            host: Vec::new(),
            next_id: 0,
            pending: Vec::new(),
            outstanding: VecDeque::new(),
            next_worker: 0,
            last_plan: None,
            filling: None,
            pool_in: Vec::new(),
            pool_out: Vec::new(),
            retired: Vec::new(),
            stats,
        })
    }

    /// Frames per chunk (0 before the first configure when automatic).
    pub fn chunk_frames(&self) -> usize {
        self.n
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Chunks in flight: two per worker would double the latency for little; one more than
    /// the workers keeps every device busy while the caller packs the oldest chunk.
    pub fn chunks_in_flight(&self) -> usize {
        self.workers.len() + 1
    }

    /// Timing counters, shared with the workers.
    pub fn stats(&self) -> Arc<ChunkStats> {
        self.stats.clone()
    }

    /// Waits for every outstanding chunk and throws its outputs away.
    fn drain_outstanding(&mut self) {
        for w in &self.workers {
            let _ = w.send(ToWorker::Flush);
        }
        while let Some(t) = self.outstanding.pop_front() {
            if !t.received {
                match self.workers[t.worker].recv() {
                    Ok(FromWorker::Chunk(Ok(()))) => {}
                    _ => self.dirty = true,
                }
            }
        }
    }

    fn resolve_and_configure(&mut self, geometry: &Geometry, plan: &Plan, fresh: bool) -> Result<()> {
        let overlap = (self.past + self.future) as u64;
        // Largest chunk each worker's device can hold.
        let mut fits: Option<(usize, String)> = None;
        for w in &self.workers {
            w.send(ToWorker::Query { geometry: geometry.clone(), plan: plan.clone() })?;
        }
        let mut answers = Vec::new();
        for w in &self.workers {
            match w.recv()? {
                FromWorker::Memory(r) => answers.push(r),
                _ => return Err(Error::State("unexpected answer from a chunk worker".into())),
            }
        }
        for (w, a) in self.workers.iter().zip(answers) {
            if let Some((mem, bpf, own)) = a? {
                if bpf == 0 {
                    continue;
                }
                let budget = FREE_FRACTION * (mem.free + own) as f64;
                let max_frames = (budget / bpf as f64) as u64 / 2;
                let max_n = max_frames.saturating_sub(overlap) as usize;
                let why = format!(
                    "device {} ({}): {} MiB free, {:.1} MiB per frame, rule 2 x (chunk + {overlap} overlap) frames <= {:.0}% of free memory",
                    w.ordinal,
                    w.description,
                    (mem.free + own) >> 20,
                    bpf as f64 / (1 << 20) as f64,
                    FREE_FRACTION * 100.0
                );
                if fits.as_ref().map(|f| max_n < f.0).unwrap_or(true) {
                    fits = Some((max_n, why));
                }
            }
        }
        let n = match (self.spec, &fits) {
            (ChunkFrames::Frames(n), Some((max_n, why))) if n > *max_n => {
                return Err(Error::InvalidParameter(format!("a chunk of {n} frames does not fit (at most {max_n}): {why}")));
            }
            (ChunkFrames::Frames(n), _) => n,
            (_, Some((0, why))) => {
                return Err(Error::InvalidParameter(format!("not even a chunk of 1 frame fits: {why}")));
            }
            (_, Some((max_n, _))) => (*max_n).min(AUTO_MAX_FRAMES),
            (_, None) => HOST_CHUNK_FRAMES,
        };
        let slots = 2 * (n + overlap as usize);
        for w in &self.workers {
            w.send(ToWorker::Configure { geometry: geometry.clone(), plan: plan.clone(), slots, depth: 2 * n - 1, fresh })?;
        }
        let mut first_err = None;
        for w in &self.workers {
            match w.recv()? {
                FromWorker::Configured(Ok(())) => {}
                FromWorker::Configured(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                _ => return Err(Error::State("unexpected answer from a chunk worker".into())),
            }
        }
        if let Some(e) = first_err {
            self.dirty = true;
            return Err(e);
        }
        tracing::debug!("chunked: {n} frames per chunk on {} worker(s)", self.workers.len());
        self.n = n;
        Ok(())
    }

    /// Index of a free pooled input frame (no host slot, chunk or worker holds it), allocating
    /// one only when every pooled frame is in use. The first free one: the same few frames
    /// cycle while the pipeline is not full (warm in the caches).
    fn free_input(&mut self) -> usize {
        let len = self.pool_in.len();
        for i in 0..len {
            if Arc::get_mut(&mut self.pool_in[i]).is_some() {
                return i;
            }
        }
        let g = self.geometry.as_ref().expect("configured");
        self.pool_in.push(Arc::new(PlanarFrame::zeroed(g)));
        self.stats.pool_frames.fetch_add(1, Ordering::Relaxed);
        len
    }

    /// A free pooled output frame (shared with the chunk that will finish into it).
    fn free_output(&mut self) -> OutFrame {
        let len = self.pool_out.len();
        for i in 0..len {
            if Arc::get_mut(&mut self.pool_out[i]).is_some() {
                return self.pool_out[i].clone();
            }
        }
        let g = self.out_geometry.as_ref().expect("configured");
        let f = Arc::new(Mutex::new(PlanarFrame::zeroed(g)));
        self.pool_out.push(f.clone());
        self.stats.pool_frames.fetch_add(1, Ordering::Relaxed);
        f
    }

    /// Host frames in the pools (input + output).
    pub fn pool_frames(&self) -> usize {
        self.pool_in.len() + self.pool_out.len()
    }

    /// Sends the launched jobs not yet sent as one chunk to the next worker.
    fn dispatch(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let mut frames: BTreeMap<FrameId, Arc<PlanarFrame>> = BTreeMap::new();
        let mut jobs = Vec::with_capacity(pending.len());
        let mut keep_from = 0u64;
        for (job, plan, write_to, whole) in &pending {
            let mut resolve = |slot: usize, dt: i32| -> Result<FrameId> {
                let h = self.host.get_mut(slot).and_then(|h| h.as_mut()).ok_or_else(|| Error::State(format!("ring slot {slot} is empty")))?;
                h.seq = Some((job.seq as i64 + dt as i64) as u64);
                frames.entry(h.id).or_insert_with(|| h.frame.clone());
                Ok(h.id)
            };
            let target = resolve(job.slot, 0)?;
            let refs = job.references.iter().map(|r| Ok((resolve(r.slot, r.dt)?, r.dt))).collect::<Result<Vec<_>>>()?;
            keep_from = (job.seq as i64 + job.references.first().map(|r| r.dt.min(0)).unwrap_or(0) as i64) as u64;
            let output = self.free_output();
            // Output frames of another size (super-resolution) never go into the caller's input
            // frame: `finish` copies them out of the pooled frame.
            let write_to = if plan.resizes() { HostTarget(Vec::new()) } else { write_to.clone() };
            jobs.push(ChunkJob { epoch: job.epoch, seq: job.seq, target, refs, plan: plan.clone(), output, write_to, whole: *whole && !plan.resizes() });
        }
        let outputs: VecDeque<_> = jobs.iter().map(|j| (j.output.clone(), j.plan.clone(), j.write_to.clone())).collect();
        let first_input = jobs.first().filter(|j| j.whole).and_then(|j| frames.get(&j.target).cloned());
        let w = self.next_worker;
        self.next_worker = (w + 1) % self.workers.len();
        for t in self.outstanding.iter_mut().filter(|t| t.worker == w) {
            t.flushed = true;
        }
        self.workers[w].send(ToWorker::Chunk(ChunkMsg { frames: frames.into_iter().collect(), jobs }))?;
        self.outstanding.push_back(Ticket { worker: w, outputs, first_input, received: false, flushed: false });
        // Later jobs read no frame older than the last job's oldest reference: its input frame
        // goes back to the pool once the chunks holding it are finished.
        for h in self.host.iter_mut() {
            if matches!(h, Some(x) if x.seq.map(|s| s < keep_from).unwrap_or(false)) {
                *h = None;
            }
        }
        Ok(())
    }
}

fn shutdown(workers: &mut [WorkerHandle]) {
    for w in workers.iter_mut() {
        w.tx = None;
    }
    for w in workers.iter_mut() {
        if let Some(j) = w.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for ChunkedBackend {
    fn drop(&mut self) {
        shutdown(&mut self.workers);
    }
}

impl Backend for ChunkedBackend {
    fn describe(&self) -> String {
        let size = match self.spec {
            ChunkFrames::Frames(n) => format!("{n} frames"),
            _ => format!("auto: {} frames", self.n),
        };
        let w: Vec<String> = self.workers.iter().map(|w| w.description.clone()).collect();
        format!("chunked ({size}, {} chunks in flight) on {}", self.chunks_in_flight(), w.join(" + "))
    }

    fn set_window(&mut self, past: u32, future: u32) {
        self.past = past;
        self.future = future;
    }

    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize) -> Result<()> {
        self.drain_outstanding();
        self.pending.clear();
        self.host.clear();
        self.filling = None;
        let key = format!("{geometry:?} {} {} {}", self.past, self.future, plan.structure_key());
        let out_geometry = plan.output_geometry(geometry);
        if self.dirty || self.key.as_deref() != Some(key.as_str()) {
            self.key = None;
            let new_geometry = self.geometry.as_ref() != Some(geometry) || self.out_geometry.as_ref() != Some(&out_geometry);
            if new_geometry && self.pool_frames() > 0 {
                // The old frames live on until every worker's backend is a new one (a backend may
                // hold them page-locked by address).
                self.retired.push((std::mem::take(&mut self.pool_in), std::mem::take(&mut self.pool_out)));
            }
            self.geometry = Some(geometry.clone());
            self.out_geometry = Some(out_geometry);
            self.resolve_and_configure(geometry, plan, !self.retired.is_empty())?;
            self.retired.clear();
            self.dirty = false;
            self.key = Some(key);
        }
        self.host = (0..ring_slots).map(|_| None).collect();
        self.next_worker = 0;
        self.last_plan = None;
        Ok(())
    }

    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        let g = self.geometry.as_ref().ok_or_else(|| Error::State("upload before configure".into()))?;
        if slot >= self.host.len() {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", self.host.len())));
        }
        if !frame.matches(g) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        // The slot's previous frame is no longer needed on the host (later jobs read this one).
        self.host[slot] = None;
        let t = Instant::now();
        let i = self.free_input();
        copy_planar(Arc::get_mut(&mut self.pool_in[i]).expect("a free pooled frame"), frame);
        add(&self.stats.main_copy_ns, t);
        let id = self.next_id;
        self.next_id += 1;
        self.host[slot] = Some(HostSlot { id, frame: self.pool_in[i].clone(), seq: None, target: HostTarget::of(frame), whole: false });
        Ok(())
    }

    fn input_frame(&mut self) -> Option<&mut PlanarFrame> {
        self.geometry.as_ref()?;
        let i = match self.filling {
            Some(i) => i,
            None => {
                let i = self.free_input();
                self.filling = Some(i);
                i
            }
        };
        Arc::get_mut(&mut self.pool_in[i])
    }

    fn upload_filled(&mut self, slot: usize, target: &PlanarFrame) -> Result<()> {
        let i = self.filling.take().ok_or_else(|| Error::State("upload_filled without input_frame".into()))?;
        let g = self.geometry.as_ref().ok_or_else(|| Error::State("upload before configure".into()))?;
        if slot >= self.host.len() {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", self.host.len())));
        }
        if !target.matches(g) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.host[slot] = Some(HostSlot { id, frame: self.pool_in[i].clone(), seq: None, target: HostTarget::of(target), whole: true });
        Ok(())
    }

    fn launch(&mut self, job: &Job, plan: &Plan) -> Result<()> {
        if self.n == 0 {
            return Err(Error::State("launch before configure".into()));
        }
        let plan = match &self.last_plan {
            Some(p) if **p == *plan => p.clone(),
            _ => {
                let p = Arc::new(plan.clone());
                self.last_plan = Some(p.clone());
                p
            }
        };
        let (target, whole) = self.host.get(job.slot).and_then(|h| h.as_ref()).map(|h| (h.target.clone(), h.whole)).ok_or_else(|| Error::State(format!("ring slot {} is empty", job.slot)))?;
        self.pending.push((job.clone(), plan, target, whole));
        if self.pending.len() >= self.n {
            self.dispatch()?;
        }
        Ok(())
    }

    fn launch_batch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        for j in jobs {
            self.launch(j, plan)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()> {
        if self.outstanding.is_empty() {
            if self.pending.is_empty() {
                return Err(Error::State("finish without a launched job".into()));
            }
            // End of stream or reset: the partial chunk goes as it is.
            self.dispatch()?;
        }
        let t = self.outstanding.front_mut().expect("dispatched");
        if !t.received {
            let w = &self.workers[t.worker];
            if !t.flushed {
                w.send(ToWorker::Flush)?;
                t.flushed = true;
            }
            let start = Instant::now();
            let r = w.recv();
            add(&self.stats.main_wait_ns, start);
            match r {
                Ok(FromWorker::Chunk(Ok(()))) => t.received = true,
                Ok(FromWorker::Chunk(Err(e))) => {
                    if let Some(input) = self.outstanding.pop_front().and_then(|t| t.first_input) {
                        // As on other backends, the frame whose job failed holds its input
                        // (where it has the input's planes).
                        if self.geometry.as_ref().map(|g| out.matches(g)).unwrap_or(false) {
                            copy_planar(out, &input);
                        }
                    }
                    self.dirty = true;
                    return Err(e);
                }
                Ok(_) => {
                    self.dirty = true;
                    return Err(Error::State("unexpected answer from a chunk worker".into()));
                }
                Err(e) => {
                    self.outstanding.pop_front();
                    self.dirty = true;
                    return Err(e);
                }
            }
        }
        let (o, plan, written) = t.outputs.pop_front().ok_or_else(|| Error::State("chunk without outputs".into()))?;
        t.first_input = None;
        if t.outputs.is_empty() {
            self.outstanding.pop_front();
        }
        if !self.out_geometry.as_ref().map(|g| out.matches(g)).unwrap_or(false) {
            return Err(Error::InvalidFrame("output frame does not match the configured geometry".into()));
        }
        if !written.0.is_empty() && HostTarget::of(out) == written {
            // The engine finishes into the frame it uploaded: the worker wrote the output planes
            // there already, and the others are the input's.
            return Ok(());
        }
        // Another frame: only the planes the plan writes, as `finish` promises.
        let t = Instant::now();
        let o = o.lock().unwrap_or_else(|e| e.into_inner());
        copy_planes(out, &o, &plan);
        drop(o);
        add(&self.stats.main_copy_out_ns, t);
        Ok(())
    }

    fn pipeline_depth(&self) -> usize {
        (self.chunks_in_flight() * self.n).saturating_sub(1)
    }
}
