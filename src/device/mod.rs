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
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::frame::VideoInfo;
use crate::plan::Plan;
use crate::planar::Geometry;

use crate::window::Job;
pub use frames::{DeviceFrame, DevicePlane, Frame, FramePool};

pub mod chunked;
pub mod cuda;
pub mod frames;
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
    /// The backend's pool makes page-locked frames and copies between them and the device by DMA
    /// (default on; `device::cuda::hostio`); off: ordinary frames, copied through pinned staging
    /// buffers.
    pub direct: bool,
    /// Direct I/O without waiting: `submit` returns before its DMA completes and the copy back
    /// is queued at launch (default on); off: `submit` waits for its copy and the copy back is
    /// issued and waited for in `finish`.
    pub asynchronous: bool,
    /// Frames of formats that interleave components (NV12, NV21, P010, packed RGB) cross as
    /// they are stored and are (de)interleaved on the device (default on); off: unpacked and
    /// packed on the host like the copying path (`StreamSetup::stored` declined).
    pub device_layout: bool,
}

impl Default for HostIo {
    fn default() -> Self {
        HostIo { direct: true, asynchronous: true, device_layout: true }
    }
}

/// What a backend is configured for: one stream's frames and jobs.
#[derive(Debug, Clone, Copy)]
pub struct StreamSetup<'a> {
    /// Planes of the input frames (planar; see `stored` for the frames that cross).
    pub geometry: &'a Geometry,
    pub plan: &'a Plan,
    /// Temporal extent of the jobs: frames before and after the target they read.
    pub past: u32,
    pub future: u32,
    /// Formats (input, output) whose frames the engine can hand over in their own memory
    /// layout (`Geometry::stored`: NV12's luma and interleaved chroma planes, packed RGB's single
    /// plane), for a backend that converts between that layout and planes by itself; `None` for
    /// formats that are planar as stored.
    pub stored: Option<(VideoInfo, VideoInfo)>,
    /// Exactly this many ring slots instead of `past + 1 + future + pipeline_depth`: for a
    /// caller that places frames in slots itself (chunked workers; at least pipeline depth + 1).
    pub ring_slots: Option<usize>,
}

/// What a backend answers to [`Backend::configure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Configured {
    /// Jobs that may be launched ahead of the one being finished (0 = synchronous).
    pub pipeline_depth: usize,
    /// Ring slots: `past + 1 + future + pipeline_depth`, so that a frame is not overwritten
    /// while a job that reads it may still be in flight.
    pub ring_slots: usize,
    /// The backend takes and gives stored frames (of `StreamSetup::stored`'s formats).
    pub stored: bool,
    /// Frames are computed on a device of their own (a GPU), not on host threads.
    pub on_device: bool,
}

/// A denoising backend: where frames are computed.
///
/// Protocol: `configure` once per stream (and again when the geometry or the plan's structure
/// changes); per frame, take a frame from [`Self::pool`], fill it and [`Self::submit`] it into
/// the ring slot the temporal window assigned; [`Self::launch`] jobs in order and
/// [`Self::finish`] them in the same order, at most `pipeline_depth + 1` in flight.
///
/// Frames move by value: a submitted frame belongs to the backend until `finish` hands back the
/// output of the job whose target it is. The output has every plane written (the plan's output
/// planes computed, the others as they came in); whether it is the submitted frame written in
/// place or another frame of the pool is the backend's call (in place needs the only reference
/// to the frame: chunked execution shares input frames between neighbouring chunks). A backend
/// keeps a frame as long as a copy may read or write it, and no longer.
pub trait Backend: Send {
    /// Human-readable description (backend, device, kernel).
    fn describe(&self) -> String;

    /// Allocates a ring for `setup`'s stream; forgets every frame and job of the previous one.
    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Configured>;

    /// The backend's frames: callers take the frames they submit from here and give spent
    /// frames back.
    fn pool(&mut self) -> &mut FramePool;

    /// Moves `frame` (planes of the configured input, or stored, geometry) into ring slot `slot`.
    fn submit(&mut self, slot: usize, frame: Arc<Frame>) -> Result<()>;

    /// Starts computing `jobs`, in order, with `plan` (strengths may change between launches).
    /// Every frame a job reads must have been submitted.
    fn launch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()>;

    /// Completes the oldest launched job and moves out its output frame (output geometry, every
    /// plane written).
    fn finish(&mut self) -> Result<Frame>;

    /// True when the backend takes frames in device memory ([`Self::submit_device`]): a single
    /// CUDA device, not chunked.
    fn takes_device_frames(&self) -> bool {
        false
    }

    /// Moves a frame in device memory (the input's stored layout, see [`DeviceFrame`]) into ring
    /// slot `slot`, copying it on the device; its owner is let go once the copy is done. With
    /// `output`, the output of the job whose target this frame is goes into that device frame
    /// (the output format's stored layout) and comes back by [`Self::finish_device`]; without,
    /// by [`Self::finish`] in a host frame of the pool.
    fn submit_device(&mut self, slot: usize, input: DeviceFrame, output: Option<DeviceFrame>) -> Result<()> {
        let _ = (slot, input, output);
        Err(Error::Unsupported(format!("{} does not take frames in device memory", self.describe())))
    }

    /// [`Self::finish`] of a job whose target came with an output device frame: completes it
    /// and hands that frame back written (the copy into it complete).
    fn finish_device(&mut self) -> Result<DeviceFrame> {
        Err(Error::Unsupported(format!("{} does not give frames in device memory", self.describe())))
    }

    /// Copies a device frame of the input's stored layout into `into` (a host frame of the
    /// stored planes), waiting for the copy: every row with `every` 1 (the noise estimate of
    /// device inputs), or rows 0, `every`, 2 `every`, ... of each plane, the others left as they
    /// are (the scene-cut test reads no others).
    fn read_device(&mut self, frame: &DeviceFrame, into: &mut Frame, every: usize) -> Result<()> {
        let _ = (frame, into, every);
        Err(Error::Unsupported(format!("{} does not read frames in device memory", self.describe())))
    }

    /// The device's memory and what one more frame of `geometry` under `plan` costs there (one
    /// ring slot and one in-flight output, with per-frame working memory); `None` on host
    /// backends (no limit known). Chunked execution sizes its chunks from it.
    fn memory(&mut self, geometry: &Geometry, plan: &Plan) -> Option<DeviceMemory>;
}

/// Memory of a compute device, in bytes ([`Backend::memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    pub free: u64,
    pub total: u64,
    /// Device bytes one more frame of the queried geometry and plan costs.
    pub per_frame: u64,
}
