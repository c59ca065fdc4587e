//! *Where* frames are computed: the backends. A backend holds a ring of frames (host memory or a
//! GPU's), runs jobs over ring slots in order and writes their output planes back. It does not
//! know the arithmetic: it drives the implementation of the plan's algorithm for its kind of
//! device ([`host::HostAlgorithm`] on host threads, [`cuda::CudaAlgorithm`] on a CUDA device),
//! handed to the backend by the composition root ([`crate::backends`]), which is the only place
//! that pairs a device with an algorithm. Chunks along time and several devices ([`chunked`]) wrap
//! any backend. The engine ([`crate::engine::Denoiser`]) owns everything else (unpacking, the
//! window, ordering).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::frame::VideoInfo;
use crate::plan::Plan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

pub mod chunked;
pub mod cuda;
pub mod host;

/// The backend a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    /// CUDA when a usable device and NVRTC are present, else the fast CPU backend.
    #[default]
    Auto,
    Cpu,
    Cuda,
    /// The plain f64 implementation; the oracle of the others.
    Reference,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Reference => "reference",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendKind::Auto),
            "cpu" => Ok(BackendKind::Cpu),
            // `gpu` and `ref`: documented spellings (the CLI's --help).
            "cuda" | "gpu" => Ok(BackendKind::Cuda),
            "reference" | "ref" => Ok(BackendKind::Reference),
            _ => Err(Error::InvalidParameter(format!("unknown backend '{s}' (expected auto, cpu, cuda (or gpu) or reference (or ref))"))),
        }
    }
}

/// Chunked processing along time ([`chunked`]): how many consecutive frames one batched launch
/// computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChunkFrames {
    /// A frame at a time, no latency added (the live default). Several devices imply `Auto`.
    #[default]
    Off,
    /// From the device's free memory and the frame size ([`chunked::FREE_FRACTION`],
    /// [`chunked::AUTO_MAX_FRAMES`]); [`chunked::HOST_CHUNK_FRAMES`] on host backends.
    Auto,
    /// Exactly this many frames per chunk (1 ..= [`chunked::MAX_CHUNK_FRAMES`]); an error at
    /// configure time when the chunk does not fit in device memory.
    Frames(usize),
}

impl fmt::Display for ChunkFrames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkFrames::Off => f.write_str("off"),
            ChunkFrames::Auto => f.write_str("auto"),
            ChunkFrames::Frames(n) => write!(f, "{n}"),
        }
    }
}

impl FromStr for ChunkFrames {
    type Err = Error;
    /// `off` (or `0`), `auto`, or a number of frames.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "none" | "0" => Ok(ChunkFrames::Off),
            "auto" => Ok(ChunkFrames::Auto),
            t => match t.parse::<usize>() {
                Ok(n) if n <= chunked::MAX_CHUNK_FRAMES => Ok(ChunkFrames::Frames(n)),
                _ => Err(Error::InvalidParameter(format!("chunk frames '{s}': expected off, auto or 1..={}", chunked::MAX_CHUNK_FRAMES))),
            },
        }
    }
}

/// Which devices compute: one worker thread (with its own backend) per listed device.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Devices {
    /// `BackendOptions::device_id` only.
    #[default]
    Default,
    /// These CUDA ordinals (one worker each). On the host backends (cpu, reference) the ordinals
    /// are ignored and the list only says how many workers to run (tests of the dispatch).
    List(Vec<usize>),
    /// Every CUDA device (one worker on the host backends, and with `auto` when CUDA is absent).
    All,
}

impl fmt::Display for Devices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Devices::Default => f.write_str("default"),
            Devices::All => f.write_str("all"),
            Devices::List(v) => f.write_str(&v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")),
        }
    }
}

impl FromStr for Devices {
    type Err = Error;
    /// `all`, or a comma list of ordinals (`0`, `0,1`).
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        if t == "all" {
            return Ok(Devices::All);
        }
        let list: std::result::Result<Vec<usize>, _> = t.split(',').map(|d| d.trim().parse::<usize>()).collect();
        match list {
            Ok(v) if !v.is_empty() => Ok(Devices::List(v)),
            _ => Err(Error::InvalidParameter(format!("devices '{s}': expected all or a comma list of device ordinals"))),
        }
    }
}

/// How the CUDA backend moves host frames (measurement switches; the defaults are the product's
/// behaviour, docs/tuning.md "Measurement switches").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostIo {
    /// Page-lock the engine's planar frames in place and copy between them and the device by DMA
    /// (default on); off: through pinned staging buffers. Callers that free host frames and get
    /// the same addresses back for other allocations while the backend lives need it off
    /// (`device::cuda::hostio`).
    pub direct: bool,
    /// Direct I/O without waiting: uploads return before their DMA completes and the copy back
    /// is queued at launch (default on); off: `upload` waits for its copy and the copy back is
    /// issued and waited for in `finish`.
    pub asynchronous: bool,
    /// Frames of formats that interleave components (NV12, NV21, P010, packed RGB) cross as
    /// they are stored and are (de)interleaved on the device (default on); off: unpacked and
    /// packed on the host like the copying path (`Backend::take_stored_frames`).
    pub device_layout: bool,
}

impl Default for HostIo {
    fn default() -> Self {
        HostIo { direct: true, asynchronous: true, device_layout: true }
    }
}

/// A denoising backend: where frames are computed.
///
/// Protocol: `configure` once per stream (and again when the geometry or the plan's structure
/// changes), then per frame `upload` into the ring slot the window assigned, `launch` jobs in
/// order and `finish` them in the same order. At most `pipeline_depth() + 1` jobs are in flight.
///
/// Host frames and asynchronous copies: a backend may keep using a host frame after the call
/// that was given it returns (DMA from and to page-locked memory, CUDA), under two promises of
/// the caller, stated at [`Self::upload`] and [`Self::launch`]. The engine keeps both (a pushed
/// frame stays in its pending queue, untouched, until its own job is finished into it; a reset
/// that drops frames no launched job has read configures the backend again); chunked execution
/// keeps the first (a worker holds every frame of a chunk until the chunk is finished) and uses
/// `launch_batch`, which asks nothing more; every host frame its workers' backends see comes from
/// its fixed pools, reused and never freed while it lives, so addresses a backend page-locked stay
/// valid (`chunked` module doc). A backend copies synchronously for a caller that
/// cannot promise them (CUDA: [`HostIo::direct`] off).
pub trait Backend: Send {
    /// Human-readable description (backend, device, kernel).
    fn describe(&self) -> String;

    /// Allocates a ring of `ring_slots` frames of `geometry`; forgets previous frames.
    fn configure(&mut self, geometry: &Geometry, plan: &Plan, ring_slots: usize) -> Result<()>;

    /// Stores `frame` in ring slot `slot`.
    ///
    /// The copy may still be reading `frame` when this returns. The caller keeps `frame` alive
    /// and unchanged until a job launched after this call has been finished, or until the
    /// backend is configured again or dropped; the backend makes every job it launches wait for
    /// the uploads before it.
    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()>;

    /// Starts computing `job` with `plan` (strengths may change between launches).
    ///
    /// From this call until the job is finished, the backend may write the job's output planes
    /// (those of `plan`'s groups) into the host frame that was uploaded into `job.slot`, so that
    /// [`Self::finish`] with that same frame only waits; the caller reads nothing of that frame
    /// meanwhile. With any other frame `finish` copies as usual.
    fn launch(&mut self, job: &Job, plan: &Plan) -> Result<()>;

    /// Completes the oldest launched job, writing the planes of `plan`'s groups into `out`; other
    /// planes of `out` are left as they are.
    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()>;

    /// Jobs that may be launched ahead of the one being finished (0 = synchronous).
    fn pipeline_depth(&self) -> usize {
        0
    }

    /// The temporal extent of the jobs to come, stated by the engine before each `configure`.
    /// Chunked execution sizes its chunks and device rings from it; other backends ignore it.
    fn set_window(&mut self, past: u32, future: u32) {
        let _ = (past, future);
    }

    /// A host frame of the backend's own to unpack the next input into, for a backend that
    /// would otherwise copy the frame given to [`Self::upload`] (chunked execution: a pooled
    /// frame its workers upload from). A caller that gets one fills every sample of it and then
    /// calls [`Self::upload_filled`] instead of `upload`. Default `None`: use `upload`.
    fn input_frame(&mut self) -> Option<&mut PlanarFrame> {
        None
    }

    /// Stores the frame last filled through [`Self::input_frame`] in ring slot `slot`. `target`
    /// is the caller's frame that the job of this slot will be finished into: its content does
    /// not matter, and from the launch of that job until it is finished the backend writes all
    /// of it (output planes computed, the others copied from the input), so that `finish` into
    /// `target` only waits; the caller keeps it alive and reads nothing of it meanwhile (as
    /// [`Self::launch`] states). `finish` into another frame writes the output planes only.
    fn upload_filled(&mut self, slot: usize, target: &PlanarFrame) -> Result<()> {
        let _ = (slot, target);
        Err(Error::State("upload_filled without input_frame".into()))
    }

    /// Starts computing every job of `jobs` (in order) with `plan`: the batched form of
    /// [`Self::launch`] used by chunked processing (one chunk = one batch). The jobs are then
    /// completed one by one, in the same order, with [`Self::finish`]. Every frame a job reads
    /// must have been uploaded before this call. Unlike [`Self::launch`], the uploaded frames
    /// are not written: callers of batches share them between jobs.
    ///
    /// A backend must accept any number of launched-but-unfinished jobs up to the ring size
    /// (growing its output/download buffers on demand). The default launches the jobs one at a
    /// time; a GPU backend runs them as one launch with a grid over z (frames).
    fn launch_batch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        for job in jobs {
            self.launch(job, plan)?;
        }
        Ok(())
    }

    /// Offers frames in the format's own memory layout (`Geometry::stored`: NV12's luma and
    /// interleaved chroma planes, packed RGB's single plane) for streams of `formats` (input,
    /// output), to a backend that converts between that layout and planes by itself (CUDA: on
    /// the device, so the host neither unpacks nor packs). True: from the next `configure` on,
    /// `upload` and `finish` take stored frames of those formats and nothing else. `None`, or
    /// false (the default): planar frames.
    fn take_stored_frames(&mut self, formats: Option<(VideoInfo, VideoInfo)>) -> bool {
        let _ = formats;
        false
    }

    /// Free and total memory of the device this backend computes on; `None` for host backends
    /// (no limit known). Used to choose the chunk size automatically.
    fn device_memory(&self) -> Option<DeviceMemory> {
        None
    }

    /// Device memory that one more frame costs with `geometry` and `plan`: one ring slot plus
    /// one in-flight output frame (and any per-frame working buffers). 0 for host backends.
    fn device_bytes_per_frame(&mut self, geometry: &Geometry, plan: &Plan) -> u64 {
        let _ = (geometry, plan);
        0
    }
}

/// Memory of a compute device, in bytes ([`Backend::device_memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    pub free: u64,
    pub total: u64,
}
