//! Host threads: the backends that compute on the CPU (`reference` and `cpu`).
//!
//! [`HostBackend`] is the host half of the device layer, written once for every algorithm: it
//! owns the worker threads, checks ring slots and frames, queues launched jobs and computes each
//! in `finish`, in order. What a ring slot holds and how a job is computed belong to the
//! algorithm's [`HostAlgorithm`], made for the plan's algorithm at `configure` by the factory the
//! composition root ([`crate::backends`]) gave the backend.

use std::collections::VecDeque;

use std::sync::Arc;

use crate::device::Backend;
use crate::error::{BackendError, Error, Result};
use crate::params::Algorithm;
use crate::plan::Plan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

/// Which implementation of an algorithm a host backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostImpl {
    /// The f64 implementation straight from the definition; the oracle of the others.
    Reference,
    /// The fast multithreaded implementation.
    Cpu,
}

/// One algorithm's computation on host threads.
pub trait HostAlgorithm: Send {
    /// Short description (implementation and what it runs on).
    fn describe(&self, threads: usize) -> String;

    /// Prepares a ring of `ring_slots` frames and working memory for `geometry` and `plan`;
    /// forgets every stored frame.
    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize, pool: &rayon::ThreadPool) -> Result<()>;

    /// Stores `frame` (checked against the configured geometry) in ring slot `slot`.
    fn store(&mut self, slot: usize, frame: &PlanarFrame, pool: &rayon::ThreadPool) -> Result<()>;

    /// Computes `job`, whose frames are `window` = (dt, ring slot) in time order (the target at
    /// dt 0; every slot stored), writing `plan`'s output planes into `out` (checked against the
    /// configured geometry); other planes of `out` stay as they are.
    fn compute(&mut self, job: &Job, window: &[(i32, usize)], plan: &Plan, out: &mut PlanarFrame, pool: &rayon::ThreadPool) -> Result<()>;
}

/// Copies of the frames stored in ring slots: the ring of a host algorithm that keeps frames as
/// they came (the f64 references).
#[derive(Default)]
pub struct FrameCopies {
    ring: Vec<Option<PlanarFrame>>,
}

impl FrameCopies {
    /// `slots` empty slots (configure).
    pub fn reset(&mut self, slots: usize) {
        self.ring = vec![None; slots];
    }

    pub fn store(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        let dst = self.ring.get_mut(slot).ok_or_else(|| Error::State(format!("ring slot {slot} out of range")))?;
        *dst = Some(frame.clone());
        Ok(())
    }

    pub fn frame(&self, slot: usize) -> Result<&PlanarFrame> {
        self.ring.get(slot).and_then(|f| f.as_ref()).ok_or_else(|| Error::State(format!("ring slot {slot} is empty")))
    }

    /// The frames of a job's window ((dt, ring slot) in time order) as (dt, frame).
    pub fn window(&self, window: &[(i32, usize)]) -> Result<Vec<(i32, &PlanarFrame)>> {
        window.iter().map(|&(dt, slot)| Ok((dt, self.frame(slot)?))).collect()
    }
}

/// Makes the host implementation of a plan's algorithm (the composition root's choice).
pub type HostFactory = Arc<dyn Fn(&Plan) -> Box<dyn HostAlgorithm> + Send + Sync>;

/// A backend on host threads.
pub struct HostBackend {
    which: HostImpl,
    pool: rayon::ThreadPool,
    threads: usize,
    factory: HostFactory,
    algorithm: Option<(Algorithm, Box<dyn HostAlgorithm>)>,
    geometry: Option<Geometry>,
    /// The planes of output frames (the input's, or scaled: super-resolution).
    out_geometry: Option<Geometry>,
    /// Per ring slot: a frame has been stored since the last configure.
    stored: Vec<bool>,
    queue: VecDeque<(Job, Plan)>,
}

impl HostBackend {
    /// A host backend of `which` with `threads` workers (0 = one per available core; the
    /// reference implementation always uses one), computing what `factory` makes for each plan.
    pub fn new(which: HostImpl, threads: usize, factory: HostFactory) -> Result<Self> {
        let threads = match which {
            HostImpl::Reference => 1,
            HostImpl::Cpu if threads == 0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            HostImpl::Cpu => threads,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("nlm-cpu-{i}"))
            .build()
            .map_err(|e| Error::Backend(BackendError::Host(format!("cannot start {threads} CPU worker threads: {e}"))))?;
        Ok(HostBackend { which, pool, threads, factory, algorithm: None, geometry: None, out_geometry: None, stored: Vec::new(), queue: VecDeque::new() })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The configured geometry, the algorithm and the worker pool; `what` names the call made
    /// before `configure`.
    fn configured(&mut self, what: &str) -> Result<(&Geometry, &mut dyn HostAlgorithm, &rayon::ThreadPool)> {
        match (&self.geometry, &mut self.algorithm) {
            (Some(g), Some((_, a))) => Ok((g, a.as_mut(), &self.pool)),
            _ => Err(Error::State(format!("{what} before configure"))),
        }
    }
}

impl Backend for HostBackend {
    fn describe(&self) -> String {
        match &self.algorithm {
            Some((_, a)) => a.describe(self.threads),
            None => match self.which {
                HostImpl::Reference => "reference (f64, single thread)".into(),
                HostImpl::Cpu => format!("cpu ({} threads)", self.threads),
            },
        }
    }

    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize) -> Result<()> {
        let algorithm = plan.algorithm();
        if self.algorithm.as_ref().map(|a| a.0) != Some(algorithm) {
            self.algorithm = Some((algorithm, (self.factory)(plan)));
        }
        self.geometry = None;
        self.queue.clear();
        self.stored = vec![false; ring_slots];
        let (_, a) = self.algorithm.as_mut().expect("just set");
        a.configure(geometry, plan, ring_slots, &self.pool)?;
        self.geometry = Some(geometry.clone());
        self.out_geometry = Some(plan.output_geometry(geometry));
        Ok(())
    }

    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        let slots = self.stored.len();
        if slot >= slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {slots})")));
        }
        self.stored[slot] = false;
        let (geometry, a, pool) = self.configured("upload")?;
        if !frame.matches(geometry) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        a.store(slot, frame, pool)?;
        self.stored[slot] = true;
        Ok(())
    }

    fn launch(&mut self, job: &Job, plan: &Plan) -> Result<()> {
        self.configured("launch")?;
        self.queue.push_back((job.clone(), plan.clone()));
        Ok(())
    }

    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()> {
        let (job, plan) = self.queue.pop_front().ok_or_else(|| Error::State("finish without a launched job".into()))?;
        let stored = &self.stored;
        let slot_ok = |s: usize| -> Result<usize> {
            if stored.get(s).copied().unwrap_or(false) {
                Ok(s)
            } else {
                Err(Error::State(format!("ring slot {s} is empty")))
            }
        };
        let window = job.frames_in_time_order();
        for &(_, s) in &window {
            slot_ok(s)?;
        }
        let out_geometry = self.out_geometry.clone();
        let (_, a, pool) = self.configured("finish")?;
        if !out_geometry.map(|g| out.matches(&g)).unwrap_or(false) {
            return Err(Error::InvalidFrame("output frame does not match the configured geometry".into()));
        }
        a.compute(&job, &window, &plan, out, pool)
    }
}
