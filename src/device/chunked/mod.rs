//! Chunked processing along time (z) and several devices.
//!
//! [`ChunkedBackend`] is a [`Backend`] for the engine like any other, so `Denoiser`'s push / pop /
//! finish_stream / reset / set_params work unchanged. It collects the jobs the engine's temporal
//! window hands out into chunks of `n` consecutive frames and sends each chunk, with the frames
//! its jobs read (the chunk's own frames plus up to `temporal_past` / `temporal_future` overlap
//! frames, shared with the neighbouring chunks through `Arc`), to one worker thread per device,
//! round-robin. A worker owns its own backend (made by the factory it is given; the composition
//! root's `backends::create_single`), uploads the frames its
//! device does not hold yet, computes the chunk with one [`Backend::launch`] of all its jobs (a
//! grid over z on CUDA) and sends the output frames back; they come out in order.
//!
//! Frames move by value, as on every backend: the engine takes its input frames from this
//! backend's pool (made by the first worker's backend, so page-locked for the devices on CUDA) and
//! submits them; they are shared read-only (`Arc`) between the chunks that read them, and become
//! spare in the pool once no chunk holds them (`FramePool::give_shared`). Each chunk message carries as many spare frames of the
//! output planes as it has jobs; the worker's backend finishes the jobs into them and the outputs
//! travel back with the answer, by value, to come out of `finish` in order. No thread writes into
//! a frame another holds.
//!
//! Overlap: the caller's thread fills chunk k+1 (unpack into pooled frames) and empties chunk
//! k-1 (pack) while a worker computes chunk k; it waits only when a worker is behind. A worker uploads and launches a chunk as soon as it
//! arrives and finishes jobs whenever no message waits, at most two chunks in flight per worker.
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
//! costing `DeviceMemory::per_frame` (ring slot + in-flight output); that must fit in
//! [`FREE_FRACTION`] of the device's free memory (plus what this backend already holds there);
//! the rest of the fraction's complement covers working buffers and other users. Auto takes the
//! largest `n` that fits, at most [`AUTO_MAX_FRAMES`]; an explicit `n` that does not fit is an
//! `Error::InvalidParameter` at configure time. Host backends (no device memory reported) follow
//! the same rule against the host's available memory (bounded by the process's cgroup limit),
//! at most [`HOST_CHUNK_FRAMES`] for auto.

//!
//! Files: this one (the backend: dispatch, pools, the caller's side), `worker` (the worker
//! thread, its messages and its backend), `stats` (where the time goes).

mod stats;
mod worker;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::unbounded;

use crate::device::frames::{Frame, FramePool};
use crate::device::{cuda, Backend, ChunkFrames, Configured, DeviceMemory, StreamSetup};
use crate::error::{BackendError, Error, Result};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

use stats::add;
pub use stats::{ChunkStats, WorkerStats};
pub use worker::BackendFactory;
use worker::{worker_main, ChunkJob, ChunkMsg, FrameId, FromWorker, ToWorker, WorkerHandle};

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

struct HostSlot {
    id: FrameId,
    frame: Arc<Frame>,
    /// Sequence number, once a dispatched job named the frame.
    seq: Option<u64>,
}

struct Ticket {
    worker: usize,
    /// The chunk's output frames, in job order, once the worker answered.
    outputs: VecDeque<Frame>,
    /// The worker answered.
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
    /// A worker reported device memory: the chunks are computed on GPUs.
    on_device: bool,
    geometry: Option<Geometry>,
    /// Planes of output frames: `geometry`, or larger (super-resolution, `Plan::resizes`).
    out_geometry: Option<Geometry>,
    host: Vec<Option<HostSlot>>,
    next_id: FrameId,
    /// Launched jobs not yet sent to a worker.
    pending: Vec<(Job, Arc<Plan>)>,
    outstanding: VecDeque<Ticket>,
    next_worker: usize,
    last_plan: Option<Arc<Plan>>,
    frames: FramePool,
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
        let mut maker = None;
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
                Ok(FromWorker::Init(Ok((d, m)))) => {
                    w.description = d;
                    // Frames page-locked by the first device's backend are page-locked for every
                    // device (portable registrations).
                    maker.get_or_insert(m);
                }
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
            on_device: false,
            geometry: None,
            out_geometry: None,
            host: Vec::new(),
            next_id: 0,
            pending: Vec::new(),
            outstanding: VecDeque::new(),
            next_worker: 0,
            last_plan: None,
            frames: FramePool::new(maker.expect("at least one worker")),
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

    fn pipeline_depth(&self) -> usize {
        (self.chunks_in_flight() * self.n).saturating_sub(1)
    }

    /// Waits for every outstanding chunk and throws its outputs away.
    fn drain_outstanding(&mut self) {
        for w in &self.workers {
            let _ = w.send(ToWorker::Flush);
        }
        while let Some(t) = self.outstanding.pop_front() {
            if !t.received {
                match self.workers[t.worker].recv() {
                    Ok(FromWorker::Chunk(Ok(outputs))) => outputs.into_iter().for_each(|f| self.frames.give(f)),
                    _ => self.dirty = true,
                }
            }
        }
    }

    fn resolve_and_configure(&mut self, geometry: &Geometry, plan: &Plan) -> Result<()> {
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
        self.on_device = false;
        for (w, a) in self.workers.iter().zip(answers) {
            if let Some((mem, own)) = a? {
                self.on_device = true;
                let bpf = mem.per_frame;
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
        let cap = if self.on_device { AUTO_MAX_FRAMES } else { HOST_CHUNK_FRAMES };
        if !self.on_device {
            // Host workers: their rings, the caller's pools and the outputs all live in host
            // memory; size against what the system (and the process's cgroup) has available,
            // so that a large explicit chunk is an error rather than an allocation abort.
            if let Some(available) = available_host_memory() {
                let bpf = host_bytes_per_frame(geometry, &plan.output_geometry(geometry)) * self.workers.len() as u64;
                let max_frames = (FREE_FRACTION * available as f64 / bpf as f64) as u64 / 2;
                let why = format!(
                    "host memory: {} MiB available, {:.1} MiB per frame over {} worker(s), rule 2 x (chunk + {overlap} overlap) frames <= {:.0}% of available memory",
                    available >> 20,
                    bpf as f64 / (1 << 20) as f64,
                    self.workers.len(),
                    FREE_FRACTION * 100.0
                );
                fits = Some((max_frames.saturating_sub(overlap) as usize, why));
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
            (_, Some((max_n, _))) => (*max_n).min(cap),
            (_, None) => cap,
        };
        let slots = 2 * (n + overlap as usize);
        for w in &self.workers {
            w.send(ToWorker::Configure { geometry: geometry.clone(), plan: plan.clone(), slots, depth: 2 * n - 1 })?;
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

    /// Sends the launched jobs not yet sent as one chunk to the next worker.
    fn dispatch(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let mut frames: BTreeMap<FrameId, Arc<Frame>> = BTreeMap::new();
        let mut jobs = Vec::with_capacity(pending.len());
        let mut keep_from = 0u64;
        for (job, plan) in &pending {
            let mut resolve = |slot: usize, dt: i32| -> Result<FrameId> {
                let h = self.host.get_mut(slot).and_then(|h| h.as_mut()).ok_or_else(|| Error::State(format!("ring slot {slot} is empty")))?;
                h.seq = Some((job.seq as i64 + dt as i64) as u64);
                frames.entry(h.id).or_insert_with(|| h.frame.clone());
                Ok(h.id)
            };
            let target = resolve(job.slot, 0)?;
            let refs = job.references.iter().map(|r| Ok((resolve(r.slot, r.dt)?, r.dt))).collect::<Result<Vec<_>>>()?;
            keep_from = (job.seq as i64 + job.references.first().map(|r| r.dt.min(0)).unwrap_or(0) as i64) as u64;
            jobs.push(ChunkJob { epoch: job.epoch, seq: job.seq, target, refs, plan: plan.clone() });
        }
        let out_geometry = self.out_geometry.clone().ok_or_else(|| Error::State("launch before configure".into()))?;
        let spares = (0..jobs.len()).map(|_| self.frames.take(&out_geometry)).collect();
        self.stats.pool_frames.store(self.frames.made(), Ordering::Relaxed);
        let w = self.next_worker;
        self.next_worker = (w + 1) % self.workers.len();
        for t in self.outstanding.iter_mut().filter(|t| t.worker == w) {
            t.flushed = true;
        }
        self.workers[w].send(ToWorker::Chunk(ChunkMsg { frames: frames.into_iter().collect(), jobs, spares }))?;
        self.outstanding.push_back(Ticket { worker: w, outputs: VecDeque::new(), received: false, flushed: false });
        // Later jobs read no frame older than the last job's oldest reference: its input frame
        // goes back to the pool once the chunks holding it are finished.
        for h in self.host.iter_mut() {
            if matches!(h, Some(x) if x.seq.map(|s| s < keep_from).unwrap_or(false)) {
                if let Some(x) = h.take() {
                    // Back to the pool, spare once the chunks reading it are finished.
                    self.frames.give_shared(x.frame);
                }
            }
        }
        Ok(())
    }
}

/// Host bytes one more frame of a host worker's chunk costs: the input and output frames the
/// caller's pools hold (at the stream's sample size) and the worker's ring slot and working
/// copy (32-bit floats per sample, as the CPU algorithms keep them).
fn host_bytes_per_frame(input: &Geometry, output: &Geometry) -> u64 {
    let samples = |g: &Geometry| g.planes.iter().map(|p| (p.width * p.height) as u64).sum::<u64>();
    let (i, o) = (samples(input), samples(output));
    (i + o) * input.bytes_per_sample as u64 + 2 * 4 * i.max(o)
}

/// Host memory this process may still take, in bytes: the system's available memory, bounded by
/// the process's cgroup limit (v2, or v1) and its address-space limit where set; `None` where
/// none can be read.
pub fn available_host_memory() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let number = |path: &str| read(path).and_then(|t| t.trim().parse::<u64>().ok());
    let system = read("/proc/meminfo").and_then(|t| t.lines().find(|l| l.starts_with("MemAvailable:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).map(|kib| kib * 1024));
    let cgroup = match (number("/sys/fs/cgroup/memory.max"), number("/sys/fs/cgroup/memory.current")) {
        (Some(max), Some(current)) => Some(max.saturating_sub(current)),
        // v1 reports "no limit" as a huge number, which min() below ignores.
        _ => match (number("/sys/fs/cgroup/memory/memory.limit_in_bytes"), number("/sys/fs/cgroup/memory/memory.usage_in_bytes")) {
            (Some(max), Some(used)) => Some(max.saturating_sub(used)),
            _ => None,
        },
    };
    // An address-space limit (`ulimit -v`) counts mapped memory, used or not.
    let address_space = read("/proc/self/limits").and_then(|t| {
        let limit = t.lines().find(|l| l.starts_with("Max address space"))?.split_whitespace().nth(3)?.parse::<u64>().ok()?;
        let mapped_kib = read("/proc/self/status")?.lines().find(|l| l.starts_with("VmSize:"))?.split_whitespace().nth(1)?.parse::<u64>().ok()?;
        Some(limit.saturating_sub(mapped_kib * 1024))
    });
    [system, cgroup, address_space].into_iter().flatten().min()
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

    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Configured> {
        let geometry = setup.geometry;
        let plan = setup.plan;
        self.drain_outstanding();
        self.pending.clear();
        for h in std::mem::take(&mut self.host).into_iter().flatten() {
            self.frames.give_shared(h.frame);
        }
        self.past = setup.past;
        self.future = setup.future;
        let key = format!("{geometry:?} {} {} {}", self.past, self.future, plan.structure_key());
        let out_geometry = plan.output_geometry(geometry);
        if self.dirty || self.key.as_deref() != Some(key.as_str()) {
            self.key = None;
            self.geometry = Some(geometry.clone());
            self.out_geometry = Some(out_geometry.clone());
            self.resolve_and_configure(geometry, plan)?;
            self.dirty = false;
            self.key = Some(key);
        }
        self.frames.keep_only(&[geometry, &out_geometry]);
        let depth = self.pipeline_depth();
        let ring_slots = setup.ring_slots.unwrap_or((self.past + 1 + self.future) as usize + depth);
        self.host = (0..ring_slots).map(|_| None).collect();
        self.next_worker = 0;
        self.last_plan = None;
        Ok(Configured { pipeline_depth: depth, ring_slots, stored: false, on_device: self.on_device })
    }

    fn pool(&mut self) -> &mut FramePool {
        &mut self.frames
    }

    fn submit(&mut self, slot: usize, frame: Arc<Frame>) -> Result<()> {
        let g = self.geometry.as_ref().ok_or_else(|| Error::State("submit before configure".into()))?;
        if slot >= self.host.len() {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", self.host.len())));
        }
        if !frame.matches(g) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        // The slot's previous frame is no longer needed on the host (later jobs read this one).
        if let Some(old) = self.host[slot].take() {
            self.frames.give_shared(old.frame);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.host[slot] = Some(HostSlot { id, frame, seq: None });
        Ok(())
    }

    fn launch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
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
        for job in jobs {
            if self.host.get(job.slot).is_none_or(|h| h.is_none()) {
                return Err(Error::State(format!("ring slot {} is empty", job.slot)));
            }
            self.pending.push((job.clone(), plan.clone()));
            if self.pending.len() >= self.n {
                self.dispatch()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Frame> {
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
                Ok(FromWorker::Chunk(Ok(outputs))) => {
                    t.outputs = outputs.into();
                    t.received = true;
                }
                Ok(FromWorker::Chunk(Err(e))) => {
                    self.outstanding.pop_front();
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
        let out = t.outputs.pop_front().ok_or_else(|| Error::State("chunk without outputs".into()))?;
        if t.outputs.is_empty() {
            self.outstanding.pop_front();
        }
        Ok(out)
    }

    fn memory(&mut self, _: &Geometry, _: &Plan) -> Option<DeviceMemory> {
        // Chunks size themselves from their workers' devices; nothing wraps a chunked backend.
        None
    }
}
