//! The composition root: the one place that pairs *where* (a backend of [`crate::device`]) with
//! *what* (an algorithm's implementation for that kind of device). The device layer receives
//! factories and names no algorithm; the algorithms know no backend; callers ask for a backend
//! with [`BackendOptions`] and get a `Box<dyn Backend>`.

use std::sync::Arc;

use crate::bm3d::Bm3dOptions;
use crate::device::chunked::{self, ChunkedBackend};
use crate::device::cuda::{self, CudaAlgorithm, CudaBackend, CudaFactory, DeviceInfo};
use crate::device::host::{HostAlgorithm, HostBackend, HostFactory, HostImpl};
use crate::device::{Backend, BackendKind, ChunkFrames, Devices, HostIo};
use crate::error::{Error, Result};
use crate::nlm::NlmOptions;
use crate::params::Algorithm;
use crate::plan::Plan;

/// Most frames a caller may ask to have in flight beyond the one being finished.
pub const MAX_PIPELINE_DEPTH: usize = 4;
/// Most CPU worker threads a caller may ask for.
pub const MAX_THREADS: usize = 1024;

/// Options that pick and tune a backend (not the algorithm's parameters: see
/// [`crate::params::Params`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendOptions {
    pub kind: BackendKind,
    /// CUDA device ordinal.
    pub device_id: usize,
    /// Worker threads of the CPU backend; 0 = all cores.
    pub threads: usize,
    /// Frames in flight on an asynchronous backend; 0 = synchronous.
    pub pipeline_depth: usize,
    /// Chunked processing along time (default off: a frame at a time).
    pub chunk_frames: ChunkFrames,
    /// Devices to spread chunks over (default: `device_id` alone).
    pub devices: Devices,
    /// CUDA host I/O (measurement switches).
    pub host_io: HostIo,
    /// How NLM is computed (GPU kernel, multi-pass settings, measurement switches).
    pub nlm: NlmOptions,
    /// How BM3D is computed on the GPU (measurement switches).
    pub bm3d: Bm3dOptions,
    /// Compute in this CUDA context (the pipeline's, `device::cuda::shared`) on its device instead
    /// of `device_id`'s primary context (one device, no chunks).
    pub cuda_context: Option<cuda::shared::SharedContext>,
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions {
            kind: BackendKind::Auto,
            device_id: 0,
            threads: 0,
            pipeline_depth: 0,
            chunk_frames: ChunkFrames::Off,
            devices: Devices::Default,
            host_io: HostIo::default(),
            nlm: NlmOptions::default(),
            bm3d: Bm3dOptions::default(),
            cuda_context: None,
        }
    }
}

impl BackendOptions {
    /// True when these options ask for chunked execution ([`ChunkedBackend`]): a chunk size is
    /// set, or more than one device (or `all`) is named.
    pub fn chunked(&self) -> bool {
        self.chunk_frames != ChunkFrames::Off
            || match &self.devices {
                Devices::Default => false,
                Devices::List(v) => v.len() > 1,
                Devices::All => device_ordinals(self).map(|v| v.len() > 1).unwrap_or(false),
            }
    }

    /// Checks the ranges callers can get wrong, before any device is opened.
    pub fn validate(&self) -> Result<()> {
        if self.pipeline_depth > MAX_PIPELINE_DEPTH {
            return Err(Error::InvalidParameter(format!("pipeline depth {}: expected 0..={MAX_PIPELINE_DEPTH}", self.pipeline_depth)));
        }
        if self.threads > MAX_THREADS {
            return Err(Error::InvalidParameter(format!("{} threads: expected 0..={MAX_THREADS} (0 = every core)", self.threads)));
        }
        self.nlm.validate()
    }
}

/// The CUDA ordinals (or, on host backends, worker indices) `options` select.
pub fn device_ordinals(options: &BackendOptions) -> Result<Vec<usize>> {
    match &options.devices {
        Devices::Default => Ok(vec![options.device_id]),
        Devices::List(v) if v.is_empty() => Err(Error::InvalidParameter("empty device list".into())),
        Devices::List(v) => Ok(v.clone()),
        Devices::All => match options.kind {
            BackendKind::Cpu | BackendKind::Reference => Ok(vec![0]),
            BackendKind::Cuda => {
                let n = chunked::cuda_device_count().map_err(Error::BackendUnavailable)?;
                if n == 0 {
                    return Err(Error::BackendUnavailable("no CUDA device found".into()));
                }
                Ok((0..n).collect())
            }
            BackendKind::Auto => Ok(match chunked::cuda_device_count() {
                Ok(n) if n > 0 && cuda::available() => (0..n).collect(),
                _ => vec![0],
            }),
        },
    }
}

/// The host implementations (`which`) of every algorithm.
pub fn host_factory(which: HostImpl, nlm: &NlmOptions) -> HostFactory {
    let tuning = nlm.tuning;
    Arc::new(move |plan: &Plan| -> Box<dyn HostAlgorithm> {
        match (plan.algorithm(), which) {
            (Algorithm::Nlm, HostImpl::Reference) => Box::new(crate::nlm::reference::ReferenceNlm::default()),
            (Algorithm::Nlm, HostImpl::Cpu) => Box::new(crate::nlm::cpu::CpuNlm::new(&tuning)),
            (Algorithm::Bm3d, HostImpl::Reference) => Box::new(crate::bm3d::reference::ReferenceBm3d::default()),
            (Algorithm::Bm3d, HostImpl::Cpu) => Box::new(crate::bm3d::cpu::CpuBm3d::default()),
            (Algorithm::NlmSr, HostImpl::Reference) => Box::new(crate::sr::reference::ReferenceSr::default()),
            (Algorithm::NlmSr, HostImpl::Cpu) => Box::new(crate::sr::cpu::CpuSr::default()),
        }
    })
}

/// The CUDA implementations of every algorithm.
pub fn cuda_factory(nlm: &NlmOptions, bm3d: &Bm3dOptions) -> CudaFactory {
    let (nlm, bm3d) = (*nlm, *bm3d);
    Arc::new(move |plan: &Plan, device: &DeviceInfo| -> Result<Box<dyn CudaAlgorithm>> {
        match plan.algorithm() {
            Algorithm::Nlm => crate::nlm::cuda::make(&nlm, device),
            Algorithm::Bm3d => Ok(Box::new(crate::bm3d::cuda::CudaBm3d::new(device, &bm3d)?)),
            Algorithm::NlmSr => Ok(Box::new(crate::sr::cuda::CudaSr::new(device)?)),
        }
    })
}

/// The f64 reference implementations on one thread: the oracle of the others.
pub fn reference() -> HostBackend {
    HostBackend::new(HostImpl::Reference, 1, host_factory(HostImpl::Reference, &NlmOptions::default())).expect("a one-thread pool")
}

/// The fast CPU implementations on `threads` workers (0 = one per available core).
pub fn cpu(threads: usize) -> Result<HostBackend> {
    HostBackend::new(HostImpl::Cpu, threads, host_factory(HostImpl::Cpu, &NlmOptions::default()))
}

/// The CUDA backend on `options.device_id` (no chunks), with every algorithm's CUDA path.
pub fn cuda(options: &BackendOptions) -> Result<CudaBackend> {
    // Options first: a bad option is reported as such, with or without a device.
    options.nlm.validate()?;
    CudaBackend::new_in(options.device_id, options.cuda_context.as_ref(), options.pipeline_depth, options.host_io, cuda_factory(&options.nlm, &options.bm3d))
}

/// Creates the backend `options` ask for. `Auto` falls back to the CPU backend, with a log line
/// saying why, when CUDA cannot be used.
///
/// Options asking for chunks or several devices ([`BackendOptions::chunked`]) give a
/// [`ChunkedBackend`] whose workers each hold a backend of `kind` made by [`create_single`].
pub fn create(options: &BackendOptions) -> Result<Box<dyn Backend>> {
    options.validate()?;
    if options.chunked() {
        return Ok(Box::new(chunked_backend(options)?));
    }
    let mut single = options.clone();
    if let Devices::List(v) = &options.devices {
        // One device named: that device, without chunks.
        single.device_id = *v.first().ok_or_else(|| Error::InvalidParameter("empty device list".into()))?;
    }
    create_single(&single)
}

/// The backend of `options.kind` on `options.device_id`, ignoring the chunk and device-list
/// options (chunked workers: their pipeline depth may exceed what callers may ask for).
pub fn create_single(options: &BackendOptions) -> Result<Box<dyn Backend>> {
    let host = |which| HostBackend::new(which, options.threads, host_factory(which, &options.nlm));
    match options.kind {
        BackendKind::Reference => Ok(Box::new(host(HostImpl::Reference)?)),
        BackendKind::Cpu => Ok(Box::new(host(HostImpl::Cpu)?)),
        BackendKind::Cuda => Ok(Box::new(cuda(options)?)),
        BackendKind::Auto => match cuda(options) {
            Ok(b) => {
                tracing::info!("backend auto: using {}", b.describe());
                Ok(Box::new(b))
            }
            Err(e) => {
                let cpu = host(HostImpl::Cpu)?;
                tracing::info!("backend auto: CUDA unavailable ({e}); using {}", cpu.describe());
                Ok(Box::new(cpu))
            }
        },
    }
}

/// Chunked execution with one worker per device `options` select, each creating its backend
/// ([`create_single`]) in its own thread.
pub fn chunked_backend(options: &BackendOptions) -> Result<ChunkedBackend> {
    let ordinals = device_ordinals(options)?;
    let mut base = BackendOptions { chunk_frames: ChunkFrames::Off, devices: Devices::Default, ..options.clone() };
    if base.kind == BackendKind::Auto && ordinals.len() > 1 {
        // Decide once for every worker: left to each worker, `auto` would quietly put a listed
        // device that cannot be opened on the CPU next to the GPUs (slower, and not bit-identical
        // to them). With CUDA usable, a bad ordinal is now a clear error.
        base.kind = if cuda::available() { BackendKind::Cuda } else { BackendKind::Cpu };
        tracing::info!("backend auto on devices {ordinals:?}: {} for every worker", base.kind);
    }
    if base.kind == BackendKind::Cpu && base.threads == 0 && ordinals.len() > 1 {
        // Host workers share the cores instead of each starting a pool of all of them.
        base.threads = chunked::host_threads_per_worker(ordinals.len());
    }
    let ords = ordinals.clone();
    let factory: chunked::BackendFactory = Arc::new(move |worker, depth| create_single(&BackendOptions { device_id: ords[worker], pipeline_depth: base.pipeline_depth.max(depth), ..base.clone() }));
    ChunkedBackend::with_factory(options.chunk_frames, &ordinals, factory)
}
