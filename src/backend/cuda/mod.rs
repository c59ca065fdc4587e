//! CUDA backend: a device-resident frame ring, the fused temporal NLM kernel
//! (kernels/nlm_fused.cu, compiled at run time with NVRTC for the device's own architecture) and
//! three streams so that the upload of frame n+1, the kernels of frame n and the download of
//! frame n-1 overlap.
//!
//! Submodules: [`loader`] (finding libcuda/libnvrtc without letting cudarc panic), [`module`]
//! (NVRTC + caches), [`launch`] (geometry and arguments), [`ring`] (device ring + upload),
//! [`download`] (output frames + copy back), [`raw`] (owned driver objects).

pub mod download;
pub mod launch;
pub mod loader;
pub mod module;
pub mod multipass;
pub mod raw;
pub mod ring;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::backend::{Backend, BackendOptions, GpuKernel};
use crate::error::{Error, Result};
use crate::plan::DenoisePlan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

use download::OutputFrame;
use launch::{Batch, FrameLayout, NlmArgs, TileConfig, MAX_FRAMES};
use module::{KernelVariant, Kernels};
use raw::{Event, Stream};
use ring::DeviceRing;

/// Overrides the tile shape of every launch: "tile_h,run_w,dx_group" (benchmark sweeps).
pub const TILE_ENV: &str = "NLMDENOISE_CUDA_TILE";

/// "0" turns off the exact f64 recomputation of rounding ties (faster; results then differ from
/// the reference by at most 1 code value at ties instead of matching it).
pub const EXACT_TIES_ENV: &str = "NLMDENOISE_CUDA_EXACT_TIES";

/// Blocks of the exact-path kernel (grid-stride over its list).
const EXACT_BLOCKS: u32 = 2112;

fn unavailable(e: String) -> Error {
    Error::BackendUnavailable(e)
}

fn backend_err(e: String) -> Error {
    Error::Backend(e)
}

/// Creates the CUDA backend, or says why it cannot run here.
pub fn create(options: &BackendOptions) -> Result<Box<dyn Backend>> {
    if options.gpu_kernel == GpuKernel::Multipass {
        return Ok(Box::new(multipass::MultipassBackend::new(options)?));
    }
    Ok(Box::new(CudaBackend::new(options)?))
}

/// True when a CUDA device and NVRTC can be used (probes only; never panics).
pub fn available() -> bool {
    loader::ensure_driver().is_ok() && loader::ensure_nvrtc().is_ok() && open_context(0).is_ok()
}

fn open_context(device_id: usize) -> std::result::Result<Arc<CudaContext>, String> {
    loader::ensure_driver()?;
    loader::guarded("CUDA driver", || {
        let n = CudaContext::device_count().map_err(|e| format!("no usable CUDA driver: {e}"))?;
        if n <= 0 {
            return Err("no CUDA device found".into());
        }
        if device_id >= n as usize {
            return Err(format!("CUDA device {device_id} requested but only {n} present"));
        }
        CudaContext::new(device_id).map_err(|e| format!("opening CUDA device {device_id}: {e}"))
    })
}

struct Configured {
    geometry: Geometry,
    ring: DeviceRing,
    outputs: Vec<OutputFrame>,
    next_output: usize,
    /// Output frames launched and not finished, oldest first.
    in_flight: VecDeque<usize>,
    batches: Vec<Batch>,
}

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    device_name: String,
    compute_capability: (i32, i32),
    max_shared: usize,
    depth: usize,
    tile_override: Option<TileConfig>,
    /// Fill each output frame with a byte pattern before its kernels (tests: unwritten samples
    /// then show).
    poison_outputs: bool,
    exact_ties: bool,
    // Declared before the streams and buffers are dropped: fields drop in order, and `Drop`
    // synchronises the streams first.
    state: Option<Configured>,
    functions: HashMap<KernelVariant, Kernels>,
    upload: Stream,
    compute: Stream,
    download: Stream,
}

impl CudaBackend {
    pub fn new(options: &BackendOptions) -> Result<Self> {
        if options.gpu_kernel == GpuKernel::Multipass {
            return Err(Error::Unsupported("the multi-pass CUDA kernel is not implemented; use gpu-kernel=fused or auto".into()));
        }
        loader::ensure_nvrtc().map_err(unavailable)?;
        let ctx = open_context(options.device_id).map_err(unavailable)?;
        let info = loader::guarded("CUDA driver", || {
            let name = ctx.name().map_err(|e| e.to_string())?;
            let cc = ctx.compute_capability().map_err(|e| e.to_string())?;
            let max_shared = ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
                .map_err(|e| e.to_string())?;
            Ok((name, cc, max_shared as usize))
        })
        .map_err(unavailable)?;
        let tile_override = match std::env::var(TILE_ENV) {
            Ok(s) => Some(TileConfig::parse(&s).filter(|t| t.is_valid()).ok_or_else(|| Error::InvalidParameter(format!("{TILE_ENV}='{s}' is not a valid tile_h,run_w,dx_group")))?),
            Err(_) => None,
        };
        Ok(CudaBackend {
            upload: Stream::new(&ctx).map_err(backend_err)?,
            compute: Stream::new(&ctx).map_err(backend_err)?,
            download: Stream::new(&ctx).map_err(backend_err)?,
            ctx,
            device_name: info.0,
            compute_capability: info.1,
            max_shared: info.2,
            depth: options.pipeline_depth,
            tile_override,
            poison_outputs: false,
            exact_ties: std::env::var(EXACT_TIES_ENV).map(|v| v != "0").unwrap_or(true),
            state: None,
            functions: HashMap::new(),
        })
    }

    /// Forces a tile shape for every later launch (benchmarks); `None` restores the default.
    pub fn set_tile_override(&mut self, tile: Option<TileConfig>) -> Result<()> {
        if let Some(t) = tile {
            if !t.is_valid() {
                return Err(Error::InvalidParameter(format!("invalid tile {t:?}")));
            }
        }
        self.tile_override = tile;
        Ok(())
    }

    /// Whether samples at rounding ties are recomputed in f64 (default on; see EXACT_TIES_ENV).
    pub fn set_exact_ties(&mut self, on: bool) {
        self.exact_ties = on;
    }

    /// Tests: fill output frames with 0xA7 before every launch, so unwritten samples show.
    pub fn set_poison_outputs(&mut self, on: bool) {
        self.poison_outputs = on;
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| Error::Backend(format!("binding the CUDA context: {e}")))
    }

    fn variant(&self, plan: &DenoisePlan, batch: &Batch, sample_bytes: usize) -> KernelVariant {
        let tile = self.tile_override.unwrap_or_else(|| TileConfig::choose(plan.search_radius, plan.patch_radius, batch.guides, batch.step_x, batch.step_y));
        KernelVariant {
            search_radius: plan.search_radius,
            patch_radius: plan.patch_radius,
            guides: batch.guides,
            outputs: batch.outputs,
            step_x: batch.step_x,
            step_y: batch.step_y,
            sample_bytes: sample_bytes as u32,
            scale_to_8bit: plan.scale_to_8bit as u32,
            exact_ties: self.exact_ties,
            weighting: plan.weighting,
            tile,
        }
    }

    fn shared_bytes(v: &KernelVariant) -> usize {
        v.tile.shared_bytes(v.search_radius, v.patch_radius, v.guides, v.outputs, v.step_x, v.step_y)
    }

    fn function(&mut self, v: &KernelVariant) -> Result<Kernels> {
        if let Some(f) = self.functions.get(v) {
            return Ok(f.clone());
        }
        let smem = Self::shared_bytes(v);
        if smem > self.max_shared {
            return Err(Error::Unsupported(format!(
                "search radius {} / patch radius {} need {smem} bytes of shared memory per block; {} has {}",
                v.search_radius, v.patch_radius, self.device_name, self.max_shared
            )));
        }
        let f = module::kernel(&self.ctx, v).map_err(backend_err)?;
        // SAFETY: f is a live function of a loaded module.
        unsafe {
            result::function::set_function_attribute(
                f.fused.cu_function(),
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
        }
        .map_err(|e| Error::Backend(format!("raising the shared memory limit: {e}")))?;
        self.functions.insert(*v, f.clone());
        Ok(f)
    }

    /// Enqueues the kernels of `job` on the compute stream, writing into output frame `out`.
    fn enqueue_kernels(&mut self, job: &Job, plan: &DenoisePlan, out: usize) -> Result<()> {
        let frames = 1 + job.references.len();
        if frames > MAX_FRAMES {
            return Err(Error::InvalidParameter(format!("{frames} frames in the temporal window; at most {MAX_FRAMES}")));
        }
        let state = self.state.as_ref().ok_or_else(|| Error::State("launch before configure".into()))?;
        let sample_bytes = state.geometry.bytes_per_sample;
        let batches = state.batches.clone();
        for batch in &batches {
            let v = self.variant(plan, batch, sample_bytes);
            let f = self.function(&v)?;
            let state = self.state.as_ref().expect("configured");
            let layout = &state.ring.layout;
            let mut args = NlmArgs {
                ring: state.ring.frames.ptr,
                dst: state.outputs[out].device.ptr,
                frame_bytes: layout.frame_bytes as u64,
                out_w: batch.out_w as i32,
                out_h: batch.out_h as i32,
                guide_w: batch.guide_w as i32,
                guide_h: batch.guide_h as i32,
                wref: plan.wref,
                smem_bytes: Self::shared_bytes(&v) as u32,
                ..Default::default()
            };
            // Frames in time order; the target among them.
            let mut window: Vec<(i32, usize)> = job.references.iter().map(|r| (r.dt, r.slot)).collect();
            window.push((0, job.slot));
            window.sort_by_key(|w| w.0);
            for (i, (dt, slot)) in window.iter().enumerate() {
                if *slot >= state.ring.slots {
                    return Err(Error::State(format!("ring slot {slot} out of range")));
                }
                args.slot[i] = *slot as i32;
                if *dt == 0 {
                    args.target = i as i32;
                }
            }
            args.n_frames = window.len() as i32;
            for (z, &gi) in batch.groups.iter().enumerate() {
                let g = plan.groups.get(gi).ok_or_else(|| Error::State("plan changed structure without configure".into()))?;
                let (k_dist, k_bias) = launch::weight_constants(plan, g);
                let ng = &mut args.group[z];
                for (i, &p) in g.guides.iter().enumerate() {
                    ng.guide[i] = layout.offsets[p] as u64;
                }
                for (i, &p) in g.outputs.iter().enumerate() {
                    ng.output[i] = layout.offsets[p] as u64;
                }
                ng.k_dist = k_dist;
                ng.k_bias = k_bias;
                ng.h = g.h;
            }
            let exact = &state.outputs[out].exact;
            args.distance_offset = plan.distance_offset;
            args.scale_to_8bit = plan.scale_to_8bit;
            args.exact = exact.ptr;
            args.exact_capacity = state.outputs[out].exact_capacity as u64;
            // SAFETY: the count word lies in the list's allocation; stream-ordered before the kernels.
            unsafe { result::memset_d8_async(exact.ptr, 0, 8, self.compute.raw) }.map_err(|e| Error::Backend(format!("clearing the exact list: {e}")))?;
            let grid = batch.grid(&v.tile);
            let mut params = [&mut args as *mut NlmArgs as *mut std::ffi::c_void];
            // SAFETY: the argument block matches the kernel's NlmArgs (size checked at compile
            // time); every pointer in it lies in this backend's allocations.
            unsafe { result::launch_kernel(f.fused.cu_function(), grid, (v.tile.threads, 1, 1), args.smem_bytes, self.compute.raw, &mut params) }
                .map_err(|e| Error::Backend(format!("launching {v:?} on grid {grid:?}: {e}")))?;
            // The exact path for the samples the fused kernel queued (a grid-stride loop over a
            // count only the device knows; a few microseconds when it is zero).
            // SAFETY: as above; the kernel reads the count the fused kernel wrote before it.
            unsafe { result::launch_kernel(f.exact.cu_function(), (EXACT_BLOCKS, 1, 1), (128, 1, 1), 0, self.compute.raw, &mut params) }
                .map_err(|e| Error::Backend(format!("launching the exact path of {v:?}: {e}")))?;
        }
        Ok(())
    }

    /// Times the kernels alone: `iterations` launches cycling through `jobs` (frames already
    /// uploaded), with device events around them. Returns milliseconds per job.
    pub fn time_kernels(&mut self, jobs: &[Job], plan: &DenoisePlan, iterations: usize) -> Result<f64> {
        self.bind()?;
        let state = self.state.as_ref().ok_or_else(|| Error::State("time_kernels before configure".into()))?;
        for j in jobs {
            for s in std::iter::once(j.slot).chain(j.references.iter().map(|r| r.slot)) {
                self.compute.wait(state.ring.arrived(s)).map_err(backend_err)?;
            }
        }
        let start = Event::new(&self.ctx, true).map_err(backend_err)?;
        let stop = Event::new(&self.ctx, true).map_err(backend_err)?;
        for i in 0..jobs.len().max(3) {
            self.enqueue_kernels(&jobs[i % jobs.len()], plan, 0)?;
        }
        start.record(&self.compute).map_err(backend_err)?;
        for i in 0..iterations {
            self.enqueue_kernels(&jobs[i % jobs.len()], plan, 0)?;
        }
        stop.record(&self.compute).map_err(backend_err)?;
        stop.synchronize().map_err(backend_err)?;
        Ok(start.elapsed_ms(&stop).map_err(backend_err)? as f64 / iterations as f64)
    }

    fn synchronize(&self) -> Result<()> {
        for s in [&self.upload, &self.compute, &self.download] {
            s.synchronize().map_err(backend_err)?;
        }
        Ok(())
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.synchronize();
        self.state = None;
    }
}

impl Backend for CudaBackend {
    fn describe(&self) -> String {
        format!(
            "cuda ({}, sm_{}{}, fused kernel, pipeline depth {})",
            self.device_name, self.compute_capability.0, self.compute_capability.1, self.depth
        )
    }

    fn configure(&mut self, geometry: &Geometry, plan: &DenoisePlan, ring_slots: usize) -> Result<()> {
        self.bind()?;
        self.synchronize()?;
        self.state = None;
        let layout = FrameLayout::new(geometry);
        let ring = DeviceRing::new(&self.ctx, layout.clone(), ring_slots.max(1)).map_err(backend_err)?;
        let outputs = (0..self.depth + 1).map(|_| OutputFrame::new(&self.ctx, &layout, geometry.total_samples())).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?;
        let batches = launch::batches(geometry, plan);
        self.state = Some(Configured { geometry: geometry.clone(), ring, outputs, next_output: 0, in_flight: VecDeque::new(), batches: batches.clone() });
        // Compile now rather than on the first frame.
        for b in &batches {
            let v = self.variant(plan, b, geometry.bytes_per_sample);
            self.function(&v)?;
        }
        Ok(())
    }

    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("upload before configure".into()))?;
        if slot >= state.ring.slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", state.ring.slots)));
        }
        if !frame.matches(&state.geometry) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
        state.ring.upload(slot, frame, &self.upload, reader).map_err(backend_err)
    }

    fn launch(&mut self, job: &Job, plan: &DenoisePlan) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("launch before configure".into()))?;
        if state.in_flight.len() > self.depth {
            return Err(Error::State(format!("more than pipeline depth + 1 = {} jobs in flight", self.depth + 1)));
        }
        let out = state.next_output;
        state.next_output = (out + 1) % state.outputs.len();
        let slots: Vec<usize> = std::iter::once(job.slot).chain(job.references.iter().map(|r| r.slot)).collect();
        for &s in &slots {
            if s >= state.ring.slots {
                return Err(Error::State(format!("ring slot {s} out of range")));
            }
            self.compute.wait(state.ring.arrived(s)).map_err(backend_err)?;
        }
        if self.poison_outputs {
            let o = &state.outputs[out].device;
            // SAFETY: the range is the output frame's allocation; it is not in flight.
            unsafe { result::memset_d8_async(o.ptr, 0xA7, o.bytes, self.compute.raw) }.map_err(|e| Error::Backend(format!("poisoning: {e}")))?;
        }
        self.enqueue_kernels(job, plan, out)?;
        let state = self.state.as_mut().expect("configured");
        let o = &mut state.outputs[out];
        o.computed.record(&self.compute).map_err(backend_err)?;
        for &s in &slots {
            state.ring.last_reader[s] = Some(out);
        }
        let planes: Vec<usize> = plan.groups.iter().flat_map(|g| g.outputs.iter().copied()).collect();
        o.start_download(&state.ring.layout, planes, &self.download).map_err(backend_err)?;
        state.in_flight.push_back(out);
        Ok(())
    }

    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("finish before configure".into()))?;
        let o = state.in_flight.pop_front().ok_or_else(|| Error::State("finish without a launched job".into()))?;
        if !out.matches(&state.geometry) {
            return Err(Error::InvalidFrame("output frame does not match the configured geometry".into()));
        }
        state.outputs[o].complete(&state.ring.layout, out).map_err(backend_err)
    }

    fn pipeline_depth(&self) -> usize {
        self.depth
    }
}
