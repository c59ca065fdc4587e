//! Host threads: the backends that compute on the CPU (`reference` and `cpu`).
//!
//! [`HostBackend`] is the host half of the device layer, written once for every algorithm: it
//! owns the worker threads, checks ring slots and frames, queues launched jobs and computes each
//! in `finish`, in order. What a ring slot holds and how a job is computed belong to the
//! algorithm's [`HostAlgorithm`], made for the plan's algorithm at `configure` by the factory the
//! composition root ([`crate::backends`]) gave the backend.

use std::collections::VecDeque;

use std::sync::Arc;

use crate::device::frames::{Frame, FramePool};
use crate::device::{Backend, Configured, DeviceMemory, StreamSetup};
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
    workers: rayon::ThreadPool,
    threads: usize,
    factory: HostFactory,
    algorithm: Option<(Algorithm, Box<dyn HostAlgorithm>)>,
    frames: FramePool,
    geometry: Option<Geometry>,
    /// The planes of output frames (the input's, or scaled: super-resolution).
    out_geometry: Option<Geometry>,
    /// Per ring slot: the frame submitted there until its job is launched (the algorithm keeps
    /// its own copy of the samples), and whether a frame has been stored since the last
    /// configure.
    slots: Vec<(Option<Arc<Frame>>, bool)>,
    /// Launched jobs, oldest first, each with its target's frame.
    queue: VecDeque<(Job, Plan, Option<Arc<Frame>>)>,
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
        let workers = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("nlm-cpu-{i}"))
            .build()
            .map_err(|e| Error::Backend(BackendError::Host(format!("cannot start {threads} CPU worker threads: {e}"))))?;
        Ok(HostBackend { which, workers, threads, factory, algorithm: None, frames: FramePool::host(), geometry: None, out_geometry: None, slots: Vec::new(), queue: VecDeque::new() })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The configured geometry, the algorithm and the worker pool; `what` names the call made
    /// before `configure`.
    fn configured(&mut self, what: &str) -> Result<(&Geometry, &mut dyn HostAlgorithm, &rayon::ThreadPool)> {
        match (&self.geometry, &mut self.algorithm) {
            (Some(g), Some((_, a))) => Ok((g, a.as_mut(), &self.workers)),
            _ => Err(Error::State(format!("{what} before configure"))),
        }
    }

    /// The frame `job`'s output goes into: its target's frame itself when this backend holds
    /// the only reference and the output has its planes, else a frame of the pool with the
    /// target's samples in the planes the job does not compute.
    fn output_frame(&mut self, target: Arc<Frame>, out_geometry: &Geometry, plan: &Plan) -> Frame {
        let target = match Arc::try_unwrap(target) {
            Ok(f) if f.matches(out_geometry) => return f,
            Ok(f) => {
                self.frames.give(f);
                None
            }
            Err(shared) => Some(shared),
        };
        let mut out = self.frames.take(out_geometry);
        if let Some(input) = target.filter(|t| t.matches(out_geometry)) {
            let computed = plan.output_planes();
            for (p, (to, from)) in out.planes.iter_mut().zip(&input.planes).enumerate() {
                if !computed.contains(&p) {
                    crate::convert::copy_bytes(to.samples.as_bytes_mut(), from.samples.as_bytes());
                }
            }
        }
        out
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

    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Configured> {
        let algorithm = setup.plan.algorithm();
        if self.algorithm.as_ref().map(|a| a.0) != Some(algorithm) {
            self.algorithm = Some((algorithm, (self.factory)(setup.plan)));
        }
        self.geometry = None;
        self.queue.clear();
        let ring_slots = setup.ring_slots.unwrap_or((setup.past + 1 + setup.future) as usize).max(1);
        self.slots = vec![(None, false); ring_slots];
        let (_, a) = self.algorithm.as_mut().expect("just set");
        a.configure(setup.geometry, setup.plan, ring_slots, &self.workers)?;
        self.geometry = Some(setup.geometry.clone());
        let out_geometry = setup.plan.output_geometry(setup.geometry);
        self.frames.keep_only(&[setup.geometry, &out_geometry]);
        self.out_geometry = Some(out_geometry);
        Ok(Configured { pipeline_depth: 0, ring_slots, stored: false, on_device: false })
    }

    fn pool(&mut self) -> &mut FramePool {
        &mut self.frames
    }

    fn submit(&mut self, slot: usize, frame: Arc<Frame>) -> Result<()> {
        let slots = self.slots.len();
        if slot >= slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {slots})")));
        }
        self.slots[slot] = (None, false);
        let (geometry, a, workers) = self.configured("submit")?;
        if !frame.matches(geometry) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        a.store(slot, &frame, workers)?;
        self.slots[slot] = (Some(frame), true);
        Ok(())
    }

    fn launch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        self.configured("launch")?;
        for job in jobs {
            let target = self.slots.get_mut(job.slot).and_then(|s| s.0.take());
            self.queue.push_back((job.clone(), plan.clone(), target));
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Frame> {
        let (job, plan, target) = self.queue.pop_front().ok_or_else(|| Error::State("finish without a launched job".into()))?;
        let window = job.frames_in_time_order();
        for &(_, s) in &window {
            if !self.slots.get(s).is_some_and(|slot| slot.1) {
                return Err(Error::State(format!("ring slot {s} is empty")));
            }
        }
        let target = target.ok_or_else(|| Error::State(format!("no frame was submitted into the target slot {}", job.slot)))?;
        let out_geometry = self.out_geometry.clone().ok_or_else(|| Error::State("finish before configure".into()))?;
        let mut out = self.output_frame(target, &out_geometry, &plan);
        let (_, a, workers) = self.configured("finish")?;
        a.compute(&job, &window, &plan, &mut out, workers)?;
        Ok(out)
    }

    fn memory(&mut self, _: &Geometry, _: &Plan) -> Option<DeviceMemory> {
        None
    }
}
