//! A chunk worker: one thread per device with its own backend. It receives chunks (frames and
//! jobs) from the caller's thread, uploads the frames its device does not hold yet, launches each
//! chunk as one batch, finishes its jobs (into frames of its backend's pool) and answers with
//! the output frames when a chunk is complete.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use super::stats::{add, ChunkStats, WorkerStats};
use crate::device::frames::{Frame, FrameMaker};
use crate::device::{Backend, DeviceMemory, StreamSetup};
use crate::error::{BackendError, Error, Result};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::{Job, Reference};

pub(super) type FrameId = u64;

/// Makes a worker's backend: `(worker index, pipeline depth)`.
pub type BackendFactory = Arc<dyn Fn(usize, usize) -> Result<Box<dyn Backend>> + Send + Sync>;

pub(super) struct ChunkJob {
    pub(super) epoch: u64,
    pub(super) seq: u64,
    pub(super) target: FrameId,
    pub(super) refs: Vec<(FrameId, i32)>,
    pub(super) plan: Arc<Plan>,
}

pub(super) struct ChunkMsg {
    /// Every frame the chunk's jobs read, shared with the caller's thread (and neighbouring
    /// chunks) read-only.
    pub(super) frames: Vec<(FrameId, Arc<Frame>)>,
    pub(super) jobs: Vec<ChunkJob>,
    /// Frames of the output planes for the worker's backend to finish the jobs into (its pool
    /// would otherwise make new ones for every chunk: the outputs leave with the answer).
    pub(super) spares: Vec<Frame>,
}

pub(super) enum ToWorker {
    /// The device's memory (with what one more frame costs) and bytes this worker holds now.
    Query {
        geometry: Geometry,
        plan: Plan,
    },
    Configure {
        geometry: Geometry,
        plan: Plan,
        slots: usize,
        depth: usize,
    },
    Chunk(ChunkMsg),
    /// Finish every chunk in flight (the caller is about to wait for them).
    Flush,
}

pub(super) type MemoryInfo = Option<(DeviceMemory, u64)>;

pub(super) enum FromWorker {
    /// The backend's description and what makes its frames (page-locked for its device).
    Init(Result<(String, Arc<dyn FrameMaker>)>),
    Memory(Result<MemoryInfo>),
    Configured(Result<()>),
    /// A chunk is finished: its output frames in job order. The worker holds none of its input
    /// frames any more.
    Chunk(Result<Vec<Frame>>),
}

pub(super) struct WorkerHandle {
    pub(super) ordinal: usize,
    pub(super) tx: Option<Sender<ToWorker>>,
    pub(super) rx: Receiver<FromWorker>,
    pub(super) join: Option<JoinHandle<()>>,
    pub(super) description: String,
}

impl WorkerHandle {
    pub(super) fn send(&self, m: ToWorker) -> Result<()> {
        self.tx.as_ref().and_then(|t| t.send(m).ok()).ok_or_else(|| self.stopped())
    }

    pub(super) fn recv(&self) -> Result<FromWorker> {
        self.rx.recv().map_err(|_| self.stopped())
    }

    pub(super) fn stopped(&self) -> Error {
        Error::Backend(BackendError::Host(format!("chunk worker for device {} stopped", self.ordinal)))
    }
}

pub(super) struct InFlight {
    /// Every input frame of the chunk, held until the chunk is finished, so that the worker's
    /// backend never holds the only reference (it writes the outputs into frames of its pool
    /// instead of the shared inputs). Dropped before the chunk is answered, so that the caller
    /// finds them free.
    frames: Vec<Arc<Frame>>,
    /// Jobs of the chunk.
    jobs: usize,
    outputs: Vec<Frame>,
    slots: Vec<usize>,
    /// Jobs launched on the backend (finish is called exactly that many times).
    launched: usize,
}

impl InFlight {
    fn empty() -> Self {
        InFlight { frames: Vec::new(), jobs: 0, outputs: Vec::new(), slots: Vec::new(), launched: 0 }
    }
}

pub(super) struct Worker {
    index: usize,
    factory: BackendFactory,
    backend: Box<dyn Backend>,
    /// `pipeline_depth` the backend was created with.
    created_depth: usize,
    tx: Sender<FromWorker>,
    stats: Arc<ChunkStats>,
    /// Per device slot: the frame it holds and how many in-flight chunks read it.
    slots: Vec<(Option<FrameId>, u32)>,
    resident: HashMap<FrameId, usize>,
    bytes_per_frame: u64,
    inflight: VecDeque<InFlight>,
    /// Failed since the last configure: chunks are refused until the next one.
    dirty: bool,
}

pub(super) fn worker_main(index: usize, factory: BackendFactory, rx: Receiver<ToWorker>, tx: Sender<FromWorker>, stats: Arc<ChunkStats>) {
    let mut backend = match catch_unwind(AssertUnwindSafe(|| factory(index, 0))) {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            let _ = tx.send(FromWorker::Init(Err(e)));
            return;
        }
        Err(_) => {
            let _ = tx.send(FromWorker::Init(Err(Error::Backend(BackendError::Host("creating the backend panicked".into())))));
            return;
        }
    };
    let _ = tx.send(FromWorker::Init(Ok((backend.describe(), backend.pool().maker()))));
    let mut w = Worker { index, created_depth: 0, factory, backend, tx, stats, slots: Vec::new(), resident: HashMap::new(), bytes_per_frame: 0, inflight: VecDeque::new(), dirty: true };
    // Finish jobs whenever there is nothing else to do, one at a time, so that a chunk that
    // arrives meanwhile is uploaded and launched (the device computes it) while the older one is
    // still being copied out. At most two chunks are in flight (the ring holds two).
    loop {
        let msg = if w.inflight.is_empty() {
            let t = Instant::now();
            let m = rx.recv();
            add(&w.stats().idle_ns, t);
            match m {
                Ok(m) => Some(m),
                Err(_) => break,
            }
        } else if w.inflight.len() < 2 {
            match rx.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => break,
            }
        } else {
            None
        };
        match msg {
            Some(m) => w.handle(m),
            None => w.finish_next(),
        }
    }
}

impl Worker {
    fn stats(&self) -> &WorkerStats {
        &self.stats.workers[self.index]
    }

    /// Answers every message exactly once (chunks: once each, in order), panics included.
    fn handle(&mut self, msg: ToWorker) {
        let index = self.index;
        let panicked = move || Error::Backend(BackendError::Host(format!("chunk worker {index} panicked")));
        match msg {
            ToWorker::Query { geometry, plan } => {
                let own = self.slots.len() as u64 * self.bytes_per_frame;
                let r = catch_unwind(AssertUnwindSafe(|| self.backend.memory(&geometry, &plan).map(|m| (m, own)))).map_err(|_| panicked());
                let _ = self.tx.send(FromWorker::Memory(r));
            }
            ToWorker::Configure { geometry, plan, slots, depth } => {
                let r = catch_unwind(AssertUnwindSafe(|| self.configure(&geometry, &plan, slots, depth))).unwrap_or_else(|_| Err(panicked()));
                self.dirty = r.is_err();
                let _ = self.tx.send(FromWorker::Configured(r));
            }
            ToWorker::Chunk(c) => {
                if self.dirty {
                    drop(c);
                    let _ = self.tx.send(FromWorker::Chunk(Err(Error::Backend(BackendError::Host("chunk worker needs reconfiguring after an earlier error".into())))));
                    return;
                }
                let before = self.inflight.len();
                let e = match catch_unwind(AssertUnwindSafe(|| self.start(c))) {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e,
                    Err(_) => panicked(),
                };
                if self.inflight.len() == before {
                    self.inflight.push_back(InFlight::empty());
                }
                self.fail(e);
            }
            ToWorker::Flush => {
                while !self.inflight.is_empty() {
                    self.finish_oldest();
                }
            }
        }
    }

    fn configure(&mut self, geometry: &Geometry, plan: &Plan, slots: usize, depth: usize) -> Result<()> {
        self.inflight.clear();
        self.resident.clear();
        self.slots.clear();
        if depth > self.created_depth {
            // A backend that sizes its in-flight outputs from `pipeline_depth` (CUDA) gets room
            // for two chunks up front.
            self.backend = (self.factory)(self.index, depth)?;
            self.created_depth = depth;
        }
        self.backend.configure(&StreamSetup { geometry, plan, past: 0, future: 0, stored: None, ring_slots: Some(slots) })?;
        self.bytes_per_frame = self.backend.memory(geometry, plan).map_or(0, |m| m.per_frame);
        self.slots = vec![(None, 0); slots];
        Ok(())
    }

    /// A slot for a new frame: a free one, preferring one that holds nothing.
    fn free_slot(&mut self) -> Result<usize> {
        let mut best: Option<(usize, FrameId)> = None;
        for (i, &(id, users)) in self.slots.iter().enumerate() {
            if users > 0 {
                continue;
            }
            match id {
                None => return Ok(i),
                Some(id) => {
                    if best.map(|b| id < b.1).unwrap_or(true) {
                        best = Some((i, id));
                    }
                }
            }
        }
        let (i, id) = best.ok_or_else(|| Error::State("chunk worker ring full".into()))?;
        self.resident.remove(&id);
        Ok(i)
    }

    /// Uploads what the device lacks and launches the chunk's jobs.
    fn start(&mut self, c: ChunkMsg) -> Result<()> {
        let stats = self.stats.clone();
        let st = &stats.workers[self.index];
        let mut used = Vec::with_capacity(c.frames.len());
        let mut slot_of = HashMap::with_capacity(c.frames.len());
        let mut inflight = InFlight { jobs: c.jobs.len(), ..InFlight::empty() };
        for f in c.spares {
            self.backend.pool().give(f);
        }
        let r = (|| {
            for (id, frame) in &c.frames {
                let slot = match self.resident.get(id) {
                    Some(&s) => s,
                    None => {
                        let s = self.free_slot()?;
                        self.slots[s].0 = None;
                        let t = Instant::now();
                        self.backend.submit(s, frame.clone())?;
                        add(&st.upload_ns, t);
                        st.uploads.fetch_add(1, Ordering::Relaxed);
                        self.slots[s].0 = Some(*id);
                        self.resident.insert(*id, s);
                        s
                    }
                };
                self.slots[slot].1 += 1;
                used.push(slot);
                slot_of.insert(*id, slot);
            }
            let jobs: Vec<Job> = c
                .jobs
                .iter()
                .map(|j| Job { epoch: j.epoch, seq: j.seq, slot: slot_of[&j.target], references: j.refs.iter().map(|(id, dt)| Reference { slot: slot_of[id], dt: *dt }).collect() })
                .collect();
            let t = Instant::now();
            let mut a = 0;
            while a < jobs.len() {
                let plan = &c.jobs[a].plan;
                let b = (a..jobs.len()).find(|&k| !Arc::ptr_eq(&c.jobs[k].plan, plan)).unwrap_or(jobs.len());
                let r = self.backend.launch(&jobs[a..b], plan);
                // A failed batch may have launched part of its jobs; the worker is reconfigured.
                r?;
                inflight.launched = b;
                a = b;
            }
            add(&st.launch_ns, t);
            Ok(())
        })();
        inflight.slots = used;
        inflight.frames = c.frames.into_iter().map(|(_, f)| f).collect();
        let failed = r.is_err();
        self.inflight.push_back(inflight);
        if failed {
            // Older chunks are answered first (with the error), then this one.
            return r;
        }
        st.chunks.fetch_add(1, Ordering::Relaxed);
        st.frames.fetch_add(c.jobs.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn finish_oldest(&mut self) {
        let n = self.inflight.len();
        while self.inflight.len() == n && n > 0 {
            self.finish_next();
        }
    }

    /// Finishes the next job of the oldest chunk; answers the chunk when it was its last.
    fn finish_next(&mut self) {
        let Some(mut f) = self.inflight.pop_front() else { return };
        let stats = self.stats.clone();
        let st = &stats.workers[self.index];
        let r = catch_unwind(AssertUnwindSafe(|| self.finish_job(&mut f, st))).unwrap_or_else(|_| Err(Error::Backend(BackendError::Host(format!("chunk worker {} panicked", self.index)))));
        if r.is_ok() && f.outputs.len() < f.jobs {
            self.inflight.push_front(f);
            return;
        }
        for &s in &f.slots {
            if let Some(slot) = self.slots.get_mut(s) {
                slot.1 = slot.1.saturating_sub(1);
            }
        }
        // The chunk's input frames go back to the caller before it hears of the chunk.
        let outputs = std::mem::take(&mut f.outputs);
        drop(f);
        match r {
            Ok(()) => {
                let _ = self.tx.send(FromWorker::Chunk(Ok(outputs)));
            }
            Err(e) => {
                let _ = self.tx.send(FromWorker::Chunk(Err(e)));
                self.fail_rest();
            }
        }
    }

    fn finish_job(&mut self, f: &mut InFlight, st: &WorkerStats) -> Result<()> {
        if f.launched < f.jobs {
            return Err(Error::State("chunk launched only in part".into()));
        }
        let t = Instant::now();
        let out = self.backend.finish();
        add(&st.finish_ns, t);
        f.outputs.push(out?);
        Ok(())
    }

    /// Answers every chunk in flight with an error and refuses work until reconfigured.
    fn fail(&mut self, e: Error) {
        // The failing chunk is the newest; older ones are answered first.
        let newest = self.inflight.pop_back().is_some();
        self.fail_rest();
        if newest {
            let _ = self.tx.send(FromWorker::Chunk(Err(e)));
        }
    }

    fn fail_rest(&mut self) {
        while self.inflight.pop_front().is_some() {
            let _ = self.tx.send(FromWorker::Chunk(Err(Error::Backend(BackendError::Host("chunk dropped after an earlier error on its device".into())))));
        }
        self.resident.clear();
        self.slots.iter_mut().for_each(|s| *s = (None, 0));
        self.dirty = true;
    }
}
