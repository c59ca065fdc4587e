//! Where the time of chunked execution goes, in counters shared by the caller's thread and the
//! workers (the benchmarks print them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Where the time goes, in nanoseconds summed over the run (benchmarks read it).
#[derive(Debug, Default)]
pub struct ChunkStats {
    /// Caller's thread: waiting for a worker's outputs.
    pub main_wait_ns: AtomicU64,
    /// Host frames the backend's pool made, ever: stops growing once the pipeline is full, since
    /// frames come back to the pool.
    pub pool_frames: AtomicU64,
    pub workers: Vec<WorkerStats>,
}

#[derive(Debug, Default)]
pub struct WorkerStats {
    /// `Backend::submit` calls (host staging or enqueueing the copy on CUDA).
    pub upload_ns: AtomicU64,
    /// `Backend::launch` calls (enqueueing the kernels on CUDA).
    pub launch_ns: AtomicU64,
    /// `Backend::finish` calls: waiting for kernels + download into an output frame.
    pub finish_ns: AtomicU64,
    /// Waiting for work.
    pub idle_ns: AtomicU64,
    pub chunks: AtomicU64,
    pub frames: AtomicU64,
    /// Frames uploaded (a frame shared by two chunks on one worker is uploaded once).
    pub uploads: AtomicU64,
}

pub(super) fn add(c: &AtomicU64, since: Instant) {
    c.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}
