//! Kernel-only timings for the benchmarks (`bench_cuda`, `bench_bm3d`, ...): launches on frames
//! already in the ring, timed with device events, outside the engine's protocol. Kept apart from
//! the backend's frame path, which never calls them.

use cudarc::driver::{result, sys};

use super::raw::{Context as _, Event};
use super::{backend_err, CudaBackend};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::window::Job;

impl CudaBackend {
    /// Times the kernels alone: `iterations` launches cycling through `jobs` (frames already
    /// uploaded), with device events around them. Consecutive jobs rotate over three output
    /// frames, so that their kernels overlap as they do in the engine (pipeline depth 2).
    /// Returns milliseconds per job.
    pub fn time_kernels(&mut self, jobs: &[Job], plan: &Plan, iterations: usize) -> Result<f64> {
        let (start, stop) = self.start_timing(jobs)?;
        let outs = (0..3).map(|_| self.take_output()).collect::<Result<Vec<_>>>()?;
        let warm = jobs.len().max(3);
        for i in 0..warm {
            self.enqueue_into(std::slice::from_ref(&jobs[i % jobs.len()]), plan, &[outs[i % 3]])?;
        }
        let computed = |b: &Self, i: usize| b.state.as_ref().expect("configured").outputs[outs[i % 3]].computed.raw;
        self.wait_raw(computed(self, warm - 1))?;
        start.record(&self.compute).map_err(backend_err)?;
        for i in 0..iterations {
            self.enqueue_into(std::slice::from_ref(&jobs[i % jobs.len()]), plan, &[outs[i % 3]])?;
        }
        self.wait_raw(computed(self, iterations.max(1) - 1))?;
        self.stop_timing(&start, &stop, outs, iterations.max(1))
    }

    /// Times batched launches: `iterations` / `jobs.len()` launches of all of `jobs` at once.
    /// Returns milliseconds per job.
    pub fn time_batched(&mut self, jobs: &[Job], plan: &Plan, iterations: usize) -> Result<f64> {
        let (start, stop) = self.start_timing(jobs)?;
        let outs = (0..jobs.len()).map(|_| self.take_output()).collect::<Result<Vec<_>>>()?;
        self.enqueue_into(jobs, plan, &outs)?;
        let rounds = iterations.div_ceil(jobs.len()).max(1);
        let all_done = |b: &Self| -> Result<()> {
            for &o in &outs {
                b.wait_raw(b.state.as_ref().expect("configured").outputs[o].computed.raw)?;
            }
            Ok(())
        };
        all_done(self)?;
        start.record(&self.compute).map_err(backend_err)?;
        for _ in 0..rounds {
            self.enqueue_into(jobs, plan, &outs)?;
        }
        all_done(self)?;
        self.stop_timing(&start, &stop, outs, rounds * jobs.len())
    }

    /// Before a timing: the jobs' frames have arrived; two timing events.
    fn start_timing(&mut self, jobs: &[Job]) -> Result<(Event, Event)> {
        self.bind()?;
        if jobs.is_empty() {
            return Err(Error::State("timing without jobs".into()));
        }
        self.wait_for_frames(jobs)?;
        let ctx = &self.device.ctx;
        Ok((Event::new(ctx, true).map_err(backend_err)?, Event::new(ctx, true).map_err(backend_err)?))
    }

    /// After a timing: records `stop`, frees the output frames and returns milliseconds per job.
    fn stop_timing(&mut self, start: &Event, stop: &Event, outs: Vec<usize>, jobs: usize) -> Result<f64> {
        stop.record(&self.compute).map_err(backend_err)?;
        stop.synchronize().map_err(backend_err)?;
        self.state.as_mut().expect("configured").free.extend(outs);
        Ok(start.elapsed_ms(stop).map_err(backend_err)? as f64 / jobs as f64)
    }

    /// Makes the compute stream wait for an event given by its handle.
    fn wait_raw(&self, event: sys::CUevent) -> Result<()> {
        // SAFETY: both handles are alive (the event belongs to a live output frame).
        unsafe { result::stream::wait_event(self.compute.raw, event, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }.map_err(|e| Error::Backend(e.ctx("cuStreamWaitEvent")))
    }
}
