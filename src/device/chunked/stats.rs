//! Where the time of chunked execution goes, in counters shared by the caller's thread and the
//! workers (the benchmarks print them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Where the time goes, in nanoseconds summed over the run (benchmarks read it).
#[derive(Debug, Default)]
pub struct ChunkStats {
    /// Caller's thread: copying uploaded frames into pooled input frames.
    pub main_copy_ns: AtomicU64,
    /// Caller's thread: copying the output planes of pooled output frames into the engine's.
    pub main_copy_out_ns: AtomicU64,
    /// Caller's thread: waiting for a worker's outputs.
    pub main_wait_ns: AtomicU64,
    /// Host frames the pools allocated (input + output), ever: stops growing once the pipeline
    /// is full, since pooled frames are reused and never freed while the backend lives.
    pub pool_frames: AtomicU64,
    pub workers: Vec<WorkerStats>,
}

#[derive(Debug, Default)]
pub struct WorkerStats {
    /// `Backend::upload` calls (host staging + enqueueing the copy on CUDA).
    pub upload_ns: AtomicU64,
    /// `Backend::launch_batch` calls (enqueueing the kernels on CUDA).
    pub launch_ns: AtomicU64,
    /// `Backend::finish` calls: waiting for kernels + download into a pooled output frame.
    pub finish_ns: AtomicU64,
    /// Writing each job's output planes into the caller's frame.
    pub copy_ns: AtomicU64,
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
