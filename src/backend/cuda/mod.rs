//! CUDA backend: a device-resident frame ring, the fused temporal NLM kernel
//! (kernels/nlm_fused.cu, compiled at run time with NVRTC for the device's own architecture), the
//! exact f64 pass (kernels/nlm_exact.cu) and streams for upload, compute (a launch's
//! preparations), fused kernels (two, alternating between consecutive launches), exact pass and
//! download, so that the upload of frame n+1, the kernels of frames n and n+1 and the download of
//! frame n-1 overlap.
//! Host frames are copied by asynchronous DMA straight from and into the engine's page-locked
//! planar frames (see [`hostio`] and the `Backend` trait's promises); docs/design.md describes
//! the data flow.
//!
//! Submodules: [`loader`] (finding libcuda/libnvrtc without letting cudarc panic), [`module`]
//! (NVRTC + caches), [`launch`] (geometry and arguments), [`ring`] (device ring + upload),
//! [`download`] (output frames + copy back), [`raw`] (owned driver objects).

pub mod download;
pub mod hostio;
pub mod launch;
pub mod loader;
pub mod module;
pub mod multipass;
pub mod raw;
pub mod ring;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::backend::{Backend, BackendOptions, DeviceMemory, GpuKernel};
use crate::error::{Error, Result};
use crate::plan::DenoisePlan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

use download::OutputFrame;
use hostio::{frame_ranges, HostRange, HostRegistry};
use launch::{Batch, FrameLayout, NlmArgs, NlmJob, TileConfig, MAX_FRAMES};
use module::{KernelVariant, Kernels};
use raw::{DeviceBuffer, Event, PinnedBuffer, Stream};
use ring::DeviceRing;

/// Overrides the tile shape of every launch: "tile_h,run_w,dx_group" (benchmark sweeps).
pub const TILE_ENV: &str = "NLMDENOISE_CUDA_TILE";
/// `0`: one fused launch per plane size instead of one per kernel shape (measurements).
pub const MERGE_ENV: &str = "NLMDENOISE_CUDA_MERGE_PLANES";

/// "0" turns off the exact f64 recomputation of rounding ties (faster; results then differ from
/// the reference by at most 1 code value at ties instead of matching it).
pub const EXACT_TIES_ENV: &str = "NLMDENOISE_CUDA_EXACT_TIES";

/// "0" turns off direct host I/O (page-locking the engine's planar frames in place and copying
/// between them and the device by DMA); frames then go through pinned staging memory.
pub const DIRECT_IO_ENV: &str = "NLMDENOISE_CUDA_DIRECT_IO";

/// "0" makes direct host I/O synchronous again (benchmarks): `upload` waits for its DMA and the
/// copy back is issued and waited for in `finish`, instead of being queued at launch.
pub const ASYNC_IO_ENV: &str = "NLMDENOISE_CUDA_ASYNC_IO";

/// "1": every fused launch on the one compute stream (comparisons). Default: consecutive calls'
/// fused launches alternate between two streams, so that a frame's launch can fill the SMs that
/// the previous frame's last blocks leave idle.
pub const FUSED_STREAMS_ENV: &str = "NLMDENOISE_CUDA_FUSED_STREAMS";

/// Caller-thread time spent in the backend's calls, summed over all CUDA backends of the process
/// (nanoseconds: upload, launch, finish; and calls of each): `bench_cuda` prints it per frame.
pub static HOST_NS: [std::sync::atomic::AtomicU64; 4] = [const { std::sync::atomic::AtomicU64::new(0) }; 4];

fn count_ns(i: usize, t: std::time::Instant) {
    HOST_NS[i].fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
}

/// The backend's four fixed streams and its fused streams, as one list.
fn stream_set<'a>(fixed: [&'a Stream; 4], fused: &'a [Stream]) -> Vec<&'a Stream> {
    fixed.into_iter().chain(fused).collect()
}

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
    /// Device output frames; grown on demand (any number of jobs may be in flight).
    outputs: Vec<OutputFrame>,
    /// Output frames not in flight.
    free: Vec<usize>,
    /// Output frames launched and not finished, oldest first.
    in_flight: VecDeque<usize>,
    batches: Vec<Batch>,
    /// Job table of batched launches (device copy, pinned source, its copy's event).
    job_table: Option<(DeviceBuffer, PinnedBuffer, Event)>,
    /// Recorded on the exact stream after the exact launches of a batched launch: they read the
    /// device job table too, so the next table's copy (compute stream) waits for it.
    table_read: Event,
    /// Output planes of the plan's groups (what a launch writes), per launch.
    planes_written: VecDeque<Vec<usize>>,
    /// Per ring slot: the page-locked host frame its content was copied from by direct DMA (until
    /// the job whose target the slot is has been launched: that job's output planes are copied
    /// back into this frame right after its kernels).
    slot_host: Vec<Option<Vec<HostRange>>>,
    /// The slot of the newest upload: every launch waits for it (the upload stream is in order),
    /// so a finished job implies every upload before its launch is complete (Backend::upload).
    last_upload: Option<usize>,
}

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    device_name: String,
    compute_capability: (i32, i32),
    max_shared: usize,
    /// Shared memory per SM: sets the fused kernel's automatic register cap (launch::auto_min_blocks).
    shared_per_sm: usize,
    depth: usize,
    tile_override: Option<TileConfig>,
    /// One fused launch for the batches of one kernel shape (launch::fused_launches); off with
    /// NLMDENOISE_CUDA_MERGE_PLANES=0.
    merge_planes: bool,
    /// Fill each output frame with a byte pattern before its kernels (tests: unwritten samples
    /// then show).
    poison_outputs: bool,
    exact_ties: bool,
    direct_io: bool,
    /// Direct host I/O without waiting: uploads return before their DMA completes and the copy
    /// back is queued at launch (ASYNC_IO_ENV).
    async_io: bool,
    registry: HostRegistry,
    /// Host frames (plane ranges) that `finish` has written into: the caller finishes into its
    /// uploaded frames (the engine does), so the copy back may go there at launch.
    finish_targets: HashSet<Vec<HostRange>>,
    // Declared before the streams and buffers are dropped: fields drop in order, and `Drop`
    // synchronises the streams first.
    state: Option<Configured>,
    functions: HashMap<KernelVariant, Kernels>,
    upload: Stream,
    compute: Stream,
    /// The exact f64 pass runs here, after each fused launch (an event apart), so that the next
    /// fused launch need not wait for it. High priority: its few blocks are dispatched as soon as
    /// the next frame's fused blocks leave room, instead of trickling in among them while each
    /// holds registers a fused block could use (H100 run 50: R-live 0.333 -> 0.327 ms, R-knlm
    /// 0.246 -> 0.238 ms). Default priority when the fused kernels share the compute stream.
    exact: Stream,
    /// Per launch group: "fused kernel done" (its fused stream) for the exact stream to wait on.
    fused_done: Vec<Event>,
    /// The fused kernels run here, one call's launches on one stream and the next call's on the
    /// other (each waits for `fused_ready`, recorded on the compute stream after the call's
    /// preparations): consecutive frames' grids overlap where one's last blocks leave SMs idle.
    /// Empty: on the compute stream itself (FUSED_STREAMS_ENV=1).
    fused_streams: Vec<Stream>,
    fused_turn: usize,
    fused_ready: Event,
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
            let per_sm = module::shared_per_sm(&ctx)?;
            Ok((name, cc, max_shared as usize, per_sm))
        })
        .map_err(unavailable)?;
        let tile_override = match std::env::var(TILE_ENV) {
            Ok(s) => Some(TileConfig::parse(&s).filter(|t| t.is_valid()).ok_or_else(|| Error::InvalidParameter(format!("{TILE_ENV}='{s}' is not a valid tile_h,run_w,dx_group[,min_blocks]")))?),
            Err(_) => None,
        };
        let merge_planes = std::env::var(MERGE_ENV).map(|v| v != "0").unwrap_or(true);
        let fused_streams = if std::env::var(FUSED_STREAMS_ENV).map(|v| v == "1").unwrap_or(false) { 0 } else { 2 };
        let registry = HostRegistry::new(&ctx, 64);
        Ok(CudaBackend {
            merge_planes,
            upload: Stream::new(&ctx).map_err(backend_err)?,
            compute: Stream::new(&ctx).map_err(backend_err)?,
            // High priority pays only beside two fused streams (run 51: with one, 0.341 -> 0.352 ms).
            exact: if fused_streams > 1 { Stream::new_high_priority(&ctx) } else { Stream::new(&ctx) }.map_err(backend_err)?,
            fused_done: (0..download::EXACT_PARTS).map(|_| Event::new(&ctx, false)).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?,
            fused_streams: (0..fused_streams).map(|_| Stream::new(&ctx)).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?,
            fused_turn: 0,
            fused_ready: Event::new(&ctx, false).map_err(backend_err)?,
            download: Stream::new(&ctx).map_err(backend_err)?,
            ctx,
            device_name: info.0,
            compute_capability: info.1,
            max_shared: info.2,
            shared_per_sm: info.3,
            depth: options.pipeline_depth,
            tile_override,
            poison_outputs: false,
            exact_ties: std::env::var(EXACT_TIES_ENV).map(|v| v != "0").unwrap_or(true),
            direct_io: std::env::var(DIRECT_IO_ENV).map(|v| v != "0").unwrap_or(true),
            async_io: std::env::var(ASYNC_IO_ENV).map(|v| v != "0").unwrap_or(true),
            registry,
            finish_targets: HashSet::new(),
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

    /// Direct host I/O (default on, see DIRECT_IO_ENV): frames the caller keeps reusing are
    /// page-locked in place and copied by DMA, without staging copies on the caller's thread.
    pub fn set_direct_host_io(&mut self, on: bool) {
        self.direct_io = on;
    }

    /// Asynchronous direct host I/O (default on, see ASYNC_IO_ENV).
    pub fn set_async_host_io(&mut self, on: bool) {
        self.async_io = on;
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
        KernelVariant::for_batch(plan, batch, sample_bytes, self.exact_ties, self.tile_override, self.shared_per_sm)
    }

    fn shared_bytes(v: &KernelVariant) -> usize {
        v.shared_bytes()
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
        // Both kernels ask for the largest shared-memory carveout, so that exact-path blocks
        // never need an SM configured differently from the fused blocks'. (Every build measured
        // since run 37 sets it; its own effect was not measured apart.)
        for func in [&f.fused, &f.exact] {
            // SAFETY: as above.
            unsafe { result::function::set_function_attribute(func.cu_function(), sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100) }
                .map_err(|e| Error::Backend(format!("setting the shared memory carveout: {e}")))?;
        }
        self.functions.insert(*v, f.clone());
        Ok(f)
    }

    /// Slots of the job's window in time order, and the index of the target among them.
    fn window_slots(job: &Job, ring_slots: usize) -> Result<([i32; MAX_FRAMES], i32, i32)> {
        let frames = 1 + job.references.len();
        if frames > MAX_FRAMES {
            return Err(Error::InvalidParameter(format!("{frames} frames in the temporal window; at most {MAX_FRAMES}")));
        }
        let mut window: Vec<(i32, usize)> = job.references.iter().map(|r| (r.dt, r.slot)).collect();
        window.push((0, job.slot));
        window.sort_by_key(|w| w.0);
        let mut slot = [0i32; MAX_FRAMES];
        let mut target = 0;
        for (i, (dt, s)) in window.iter().enumerate() {
            if *s >= ring_slots {
                return Err(Error::State(format!("ring slot {s} out of range")));
            }
            slot[i] = *s as i32;
            if *dt == 0 {
                target = i as i32;
            }
        }
        Ok((slot, target, window.len() as i32))
    }

    /// Enqueues the kernels of `jobs` on the compute stream, job i writing into output frame
    /// `outs[i]`: per launch group of planes ONE fused launch whose grid's z runs over
    /// (job, weight group), then one exact-path launch whose z runs over the jobs. A single job
    /// is described inline in the kernel arguments; several go through a device job table.
    fn enqueue_kernels(&mut self, jobs: &[Job], plan: &DenoisePlan, outs: &[usize]) -> Result<()> {
        let state = self.state.as_ref().ok_or_else(|| Error::State("launch before configure".into()))?;
        let ring_slots = state.ring.slots;
        let windows = jobs.iter().map(|j| Self::window_slots(j, ring_slots)).collect::<Result<Vec<_>>>()?;
        let sample_bytes = state.geometry.bytes_per_sample;
        let batches = state.batches.clone();
        if batches.len() > download::EXACT_PARTS {
            return Err(Error::Unsupported(format!("{} launch groups per frame; at most {}", batches.len(), download::EXACT_PARTS)));
        }
        // An output's exact lists are cleared below: its previous job's exact pass must be done.
        for &o in outs {
            self.compute.wait(&state.outputs[o].computed).map_err(backend_err)?;
        }
        let table_ptr = if jobs.len() > 1 { self.upload_job_table(&windows, outs)? } else { 0 };
        // Each batch (groups of one plane size) has its part of each exact list: a count word and
        // room for every output sample of its groups. Cleared before any kernel of this call.
        let mut exact_parts = Vec::with_capacity(batches.len());
        let mut exact_offset = 0usize;
        for batch in &batches {
            let capacity = batch.out_w * batch.out_h * batch.groups.len();
            let state = self.state.as_ref().expect("configured");
            for &o in outs {
                let list = state.outputs[o].exact.ptr + 8 * exact_offset as u64;
                // SAFETY: the count word lies in the list's allocation (exact_offset + 1 + capacity
                // <= samples + EXACT_PARTS words); stream-ordered before the kernels.
                unsafe { result::memset_d8_async(list, 0, 8, self.compute.raw) }.map_err(|e| Error::Backend(format!("clearing the exact list: {e}")))?;
            }
            exact_parts.push((exact_offset, capacity));
            exact_offset += 1 + capacity;
        }
        // This call's fused stream: it starts after everything queued on the compute stream so far.
        let turn = self.fused_turn;
        if !self.fused_streams.is_empty() {
            self.fused_turn = (turn + 1) % self.fused_streams.len();
            self.fused_ready.record(&self.compute).map_err(backend_err)?;
            self.fused_streams[turn].wait(&self.fused_ready).map_err(backend_err)?;
        }
        for (li, launch_batches) in launch::fused_launches(&batches, self.merge_planes).iter().enumerate() {
            let v = self.variant(plan, &batches[launch_batches[0]], sample_bytes);
            let f = self.function(&v)?;
            let state = self.state.as_ref().expect("configured");
            let layout = &state.ring.layout;
            let o0 = &state.outputs[outs[0]];
            let mut args = NlmArgs {
                ring: state.ring.frames.ptr,
                dst: o0.device.ptr,
                frame_bytes: layout.frame_bytes as u64,
                wref: plan.wref,
                smem_bytes: Self::shared_bytes(&v) as u32,
                slot: windows[0].0,
                target: windows[0].1,
                n_frames: windows[0].2,
                jobs: table_ptr,
                distance_offset: plan.distance_offset,
                scale_to_8bit: plan.scale_to_8bit,
                exact: o0.exact.ptr,
                ..Default::default()
            };
            // The launch's groups, batch after batch; blockIdx.x runs over their tiles in turn.
            let mut blocks = 0u32;
            let mut z = 0usize;
            for &bi in launch_batches {
                let batch = &batches[bi];
                let (tiles_x, tiles_y) = batch.tiles(&v.tile);
                for (k, &gi) in batch.groups.iter().enumerate() {
                    let g = plan.groups.get(gi).ok_or_else(|| Error::State("plan changed structure without configure".into()))?;
                    let (k_dist, k_bias) = launch::weight_constants(plan, g);
                    let ng = &mut args.group[z];
                    ng.guide = layout.plane_offsets(&g.guides);
                    ng.output = layout.plane_offsets(&g.outputs);
                    ng.k_dist = k_dist;
                    ng.k_bias = k_bias;
                    ng.h = g.h;
                    ng.out_w = batch.out_w as i32;
                    ng.out_h = batch.out_h as i32;
                    ng.guide_w = batch.guide_w as i32;
                    ng.guide_h = batch.guide_h as i32;
                    ng.tiles_x = tiles_x as i32;
                    ng.first_block = blocks as i32;
                    ng.exact_offset = exact_parts[bi].0 as u32;
                    ng.exact_group = k as i32;
                    ng.exact_capacity = exact_parts[bi].1 as u32;
                    blocks += tiles_x * tiles_y;
                    z += 1;
                }
            }
            args.n_groups = z as i32;
            let grid = (blocks, 1, jobs.len() as u32);
            let mut params = [&mut args as *mut NlmArgs as *mut std::ffi::c_void];
            // SAFETY: the argument block matches the kernel's NlmArgs (size checked at compile
            // time); every pointer in it (and in the job table) lies in this backend's allocations.
            let fused_stream = self.fused_streams.get(turn).unwrap_or(&self.compute);
            unsafe { result::launch_kernel(f.fused.cu_function(), grid, (v.tile.threads, 1, 1), args.smem_bytes, fused_stream.raw, &mut params) }
                .map_err(|e| Error::Backend(format!("launching {v:?} on grid {grid:?}: {e}")))?;
            // The exact path for the samples the fused kernel queued, one launch per batch (a
            // grid-stride loop over a count only the device knows; a few microseconds when it is
            // zero), on its own stream.
            self.fused_done[li].record(fused_stream).map_err(backend_err)?;
            self.exact.wait(&self.fused_done[li]).map_err(backend_err)?;
            let mut z0 = 0usize;
            for &bi in launch_batches {
                let batch = &batches[bi];
                let n = batch.groups.len();
                let mut eargs = args;
                eargs.group = [launch::NlmGroup::default(); launch::MAX_BATCH];
                eargs.group[..n].copy_from_slice(&args.group[z0..z0 + n]);
                eargs.n_groups = n as i32;
                eargs.out_w = batch.out_w as i32;
                eargs.out_h = batch.out_h as i32;
                eargs.guide_w = batch.guide_w as i32;
                eargs.guide_h = batch.guide_h as i32;
                eargs.exact_offset = exact_parts[bi].0 as u32;
                eargs.exact_capacity = exact_parts[bi].1 as u64;
                z0 += n;
                let mut params = [&mut eargs as *mut NlmArgs as *mut std::ffi::c_void];
                let exact_grid = launch::exact_grid(jobs.len());
                // SAFETY: as above; the kernel reads the counts the fused kernel wrote before it.
                unsafe { result::launch_kernel(f.exact.cu_function(), exact_grid, (launch::EXACT_THREADS, 1, 1), 0, self.exact.raw, &mut params) }
                    .map_err(|e| Error::Backend(format!("launching the exact path of {v:?}: {e}")))?;
            }
        }
        if table_ptr != 0 {
            self.state.as_ref().expect("configured").table_read.record(&self.exact).map_err(backend_err)?;
        }
        Ok(())
    }

    /// Writes the job table of a batched launch and queues its copy to the device (compute
    /// stream, before the kernels that read it). Returns its device address.
    fn upload_job_table(&mut self, windows: &[([i32; MAX_FRAMES], i32, i32)], outs: &[usize]) -> Result<u64> {
        let state = self.state.as_mut().expect("configured");
        let bytes = std::mem::size_of::<NlmJob>() * windows.len();
        let fits = state.job_table.as_ref().map(|t| t.0.bytes >= bytes).unwrap_or(false);
        if !fits {
            if let Some(t) = &state.job_table {
                t.2.synchronize().map_err(backend_err)?;
                self.compute.synchronize().map_err(backend_err)?;
                state.table_read.synchronize().map_err(backend_err)?;
            }
            let n = bytes.next_power_of_two().max(4096);
            state.job_table = Some((
                DeviceBuffer::new(&self.ctx, n).map_err(backend_err)?,
                PinnedBuffer::new(&self.ctx, n).map_err(backend_err)?,
                Event::new(&self.ctx, false).map_err(backend_err)?,
            ));
        }
        // The previous batch's exact launches (exact stream) have read the device table.
        self.compute.wait(&state.table_read).map_err(backend_err)?;
        let (dev, host, copied) = state.job_table.as_mut().expect("allocated");
        copied.synchronize().map_err(backend_err)?; // the previous table's copy has read the pinned buffer
        let table: Vec<NlmJob> = windows
            .iter()
            .zip(outs)
            .map(|(w, &o)| NlmJob { dst: state.outputs[o].device.ptr, exact: state.outputs[o].exact.ptr, slot: w.0, n_frames: w.2, target: w.1 })
            .collect();
        // SAFETY: NlmJob is plain old data (repr(C)); the pinned buffer holds `bytes`.
        let src = unsafe { std::slice::from_raw_parts(table.as_ptr() as *const u8, bytes) };
        host.as_mut_slice()[..bytes].copy_from_slice(src);
        // SAFETY: the device table holds `bytes`; the pinned source is not rewritten before
        // `copied` completes (checked above).
        unsafe { result::memcpy_htod_async(dev.ptr, &host.as_slice()[..bytes], self.compute.raw) }.map_err(|e| Error::Backend(format!("job table: {e}")))?;
        copied.record(&self.compute).map_err(backend_err)?;
        Ok(dev.ptr)
    }

    /// An output frame that is not in flight (a new one when all are).
    fn take_output(&mut self) -> Result<usize> {
        let state = self.state.as_mut().ok_or_else(|| Error::State("launch before configure".into()))?;
        if let Some(o) = state.free.pop() {
            return Ok(o);
        }
        let layout = state.ring.layout.clone();
        let o = OutputFrame::new(&self.ctx, &layout, state.geometry.total_samples()).map_err(backend_err)?;
        state.outputs.push(o);
        Ok(state.outputs.len() - 1)
    }

    /// Launches `jobs` (one batched launch per plane group) and queues what each needs after.
    /// `to_target_frame`: the caller gave `launch`'s promise that the host frame uploaded into a
    /// job's target slot may receive the job's output planes before `finish` (not `launch_batch`).
    fn launch_jobs(&mut self, jobs: &[Job], plan: &DenoisePlan, to_target_frame: bool) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let mut outs = Vec::with_capacity(jobs.len());
        for _ in jobs {
            outs.push(self.take_output()?);
        }
        let r = self.launch_into(jobs, plan, &outs, to_target_frame);
        if r.is_err() {
            // Nothing of these jobs counts as in flight.
            let state = self.state.as_mut().expect("configured");
            state.free.extend(outs);
        }
        r
    }

    fn launch_into(&mut self, jobs: &[Job], plan: &DenoisePlan, outs: &[usize], to_target_frame: bool) -> Result<()> {
        let state = self.state.as_ref().expect("configured");
        let mut slots: Vec<usize> = Vec::new();
        for job in jobs {
            for s in std::iter::once(job.slot).chain(job.references.iter().map(|r| r.slot)) {
                if s >= state.ring.slots {
                    return Err(Error::State(format!("ring slot {s} out of range")));
                }
                if !slots.contains(&s) {
                    slots.push(s);
                }
            }
        }
        if let Some(s) = state.last_upload.filter(|s| !slots.contains(s)) {
            slots.push(s);
        }
        for &s in &slots {
            self.compute.wait(state.ring.arrived(s)).map_err(backend_err)?;
        }
        if self.poison_outputs {
            for &o in outs {
                let d = &state.outputs[o].device;
                // SAFETY: the range is the output frame's allocation; it is not in flight.
                unsafe { result::memset_d8_async(d.ptr, 0xA7, d.bytes, self.compute.raw) }.map_err(|e| Error::Backend(format!("poisoning: {e}")))?;
            }
        }
        self.enqueue_kernels(jobs, plan, outs)?;
        let planes: Vec<usize> = plan.groups.iter().flat_map(|g| g.outputs.iter().copied()).collect();
        let direct = self.direct_io;
        let state = self.state.as_mut().expect("configured");
        for (job, &o) in jobs.iter().zip(outs) {
            let out = &mut state.outputs[o];
            out.computed.record(&self.exact).map_err(backend_err)?;
            for s in std::iter::once(job.slot).chain(job.references.iter().map(|r| r.slot)) {
                state.ring.last_reader[s] = Some(o);
            }
            // Direct and asynchronous: the output planes go straight back into the host frame
            // the target was uploaded from, when the caller finishes into that frame (the
            // engine); `finish` then only waits. The download stream waits for `computed`
            // (recorded on the exact stream, after every group's fused and exact launches).
            let host = state.slot_host[job.slot].take().filter(|r| to_target_frame && self.async_io && self.finish_targets.contains(r));
            if let Some(ranges) = host {
                out.start_download_to(&state.ring.layout, planes.clone(), Some(ranges), &self.download).map_err(backend_err)?;
            } else if !direct {
                out.start_download(&state.ring.layout, planes.clone(), &self.download).map_err(backend_err)?;
            }
            state.in_flight.push_back(o);
            state.planes_written.push_back(planes.clone());
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
        // Outputs rotate like the engine's (pipeline depth 2): consecutive jobs' fused kernels
        // (two fused streams) and a job's exact pass overlap as they do there.
        let outs = (0..3).map(|_| self.take_output()).collect::<Result<Vec<_>>>()?;
        let run = |b: &mut Self, i: usize| -> Result<()> {
            let o = outs[i % outs.len()];
            b.enqueue_kernels(std::slice::from_ref(&jobs[i % jobs.len()]), plan, &[o])?;
            b.state.as_ref().expect("configured").outputs[o].computed.record(&b.exact).map_err(backend_err)
        };
        for i in 0..jobs.len().max(3) {
            run(self, i)?;
        }
        self.compute.wait(&self.state.as_ref().expect("configured").outputs[outs[(jobs.len().max(3) - 1) % 3]].computed).map_err(backend_err)?;
        start.record(&self.compute).map_err(backend_err)?;
        for i in 0..iterations {
            run(self, i)?;
        }
        let last = self.state.as_ref().expect("configured").outputs[outs[(iterations.max(1) - 1) % 3]].computed.raw;
        // SAFETY: both handles are alive.
        unsafe { result::stream::wait_event(self.compute.raw, last, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }.map_err(|e| Error::Backend(e.to_string()))?;
        stop.record(&self.compute).map_err(backend_err)?;
        stop.synchronize().map_err(backend_err)?;
        self.state.as_mut().expect("configured").free.extend(outs);
        Ok(start.elapsed_ms(&stop).map_err(backend_err)? as f64 / iterations as f64)
    }

    /// Times batched launches: `iterations` / `jobs.len()` launches of all of `jobs` at once.
    /// Returns milliseconds per job.
    pub fn time_batched(&mut self, jobs: &[Job], plan: &DenoisePlan, iterations: usize) -> Result<f64> {
        self.bind()?;
        let state = self.state.as_ref().ok_or_else(|| Error::State("time_batched before configure".into()))?;
        for j in jobs {
            for s in std::iter::once(j.slot).chain(j.references.iter().map(|r| r.slot)) {
                self.compute.wait(state.ring.arrived(s)).map_err(backend_err)?;
            }
        }
        let outs = (0..jobs.len()).map(|_| self.take_output()).collect::<Result<Vec<_>>>()?;
        let start = Event::new(&self.ctx, true).map_err(backend_err)?;
        let stop = Event::new(&self.ctx, true).map_err(backend_err)?;
        let done = Event::new(&self.ctx, false).map_err(backend_err)?;
        self.enqueue_kernels(jobs, plan, &outs)?;
        let rounds = iterations.div_ceil(jobs.len()).max(1);
        done.record(&self.exact).map_err(backend_err)?;
        self.compute.wait(&done).map_err(backend_err)?;
        start.record(&self.compute).map_err(backend_err)?;
        for _ in 0..rounds {
            self.enqueue_kernels(jobs, plan, &outs)?;
            for &o in &outs {
                self.state.as_ref().expect("configured").outputs[o].computed.record(&self.exact).map_err(backend_err)?;
            }
        }
        done.record(&self.exact).map_err(backend_err)?;
        self.compute.wait(&done).map_err(backend_err)?;
        stop.record(&self.compute).map_err(backend_err)?;
        stop.synchronize().map_err(backend_err)?;
        self.state.as_mut().expect("configured").free.extend(outs);
        Ok(start.elapsed_ms(&stop).map_err(backend_err)? as f64 / (rounds * jobs.len()) as f64)
    }

    /// Every stream this backend queues work on.
    fn streams(&self) -> Vec<&Stream> {
        stream_set([&self.upload, &self.compute, &self.exact, &self.download], &self.fused_streams)
    }

    fn synchronize(&self) -> Result<()> {
        for s in self.streams() {
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
        let free = (0..outputs.len()).rev().collect();
        let batches = launch::batches(geometry, plan);
        // Frames the engine cycles through: the ring's, those in flight and a few ready ones.
        self.registry.capacity = geometry.planes.len() * (2 * ring_slots + self.depth + 8);
        self.state = Some(Configured {
            geometry: geometry.clone(),
            ring,
            outputs,
            free,
            in_flight: VecDeque::new(),
            batches: batches.clone(),
            job_table: None,
            table_read: Event::new(&self.ctx, false).map_err(backend_err)?,
            planes_written: VecDeque::new(),
            slot_host: vec![None; ring_slots.max(1)],
            last_upload: None,
        });
        self.finish_targets.clear();
        // Compile now rather than on the first frame.
        for b in &batches {
            let v = self.variant(plan, b, geometry.bytes_per_sample);
            self.function(&v)?;
        }
        Ok(())
    }

    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.upload_frame(slot, frame);
        count_ns(0, t);
        HOST_NS[3].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        r
    }

    fn launch(&mut self, job: &Job, plan: &DenoisePlan) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.launch_jobs(std::slice::from_ref(job), plan, true);
        count_ns(1, t);
        r
    }

    fn launch_batch(&mut self, jobs: &[Job], plan: &DenoisePlan) -> Result<()> {
        // Batches come from chunked execution (src/backend/chunked.rs), whose host frames come from
        // fixed pools that are reused and never freed while this backend lives (the `Backend`
        // trait's promise): page-locked ranges stay valid, so direct host I/O stays on.
        // One launch per plane group covers at most u16::MAX jobs x groups in z.
        for chunk in jobs.chunks(16384) {
            self.launch_jobs(chunk, plan, false)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.finish_job(out);
        count_ns(2, t);
        r
    }

    fn device_memory(&self) -> Option<DeviceMemory> {
        // cudarc reports an error recorded earlier by an asynchronous release (and clears it) on
        // the next bind: one retry separates such a stale error from a failing query.
        let query = || self.ctx.mem_get_info();
        match query().or_else(|e| {
            tracing::debug!("cuMemGetInfo on {}: {e}; retrying once", self.device_name);
            query()
        }) {
            Ok((free, total)) => Some(DeviceMemory { free: free as u64, total: total as u64 }),
            Err(e) => {
                tracing::warn!("cannot read the free memory of {}: {e}", self.device_name);
                None
            }
        }
    }

    fn device_bytes_per_frame(&self, geometry: &Geometry, _plan: &DenoisePlan) -> u64 {
        let layout = FrameLayout::new(geometry);
        (layout.frame_bytes + OutputFrame::device_bytes(&layout, geometry.total_samples())) as u64
    }

    fn pipeline_depth(&self) -> usize {
        self.depth
    }
}

impl CudaBackend {
    fn upload_frame(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("upload before configure".into()))?;
        if slot >= state.ring.slots {
            return Err(Error::State(format!("ring slot {slot} out of range (ring of {})", state.ring.slots)));
        }
        if !frame.matches(&state.geometry) {
            return Err(Error::InvalidFrame("frame does not match the configured geometry".into()));
        }
        state.slot_host[slot] = None;
        if self.direct_io {
            let ranges = frame_ranges(frame);
            let streams = stream_set([&self.upload, &self.compute, &self.exact, &self.download], &self.fused_streams);
            // Releasing a registration needs every copy in flight done.
            let mut quiesce = || streams.iter().all(|s| s.synchronize().is_ok());
            if self.registry.ensure(&ranges, &mut quiesce) {
                let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
                state.ring.upload_direct(slot, &ranges, &self.upload, reader).map_err(backend_err)?;
                state.last_upload = Some(slot);
                if !self.async_io {
                    // The caller may change the frame once we return: wait for the copy.
                    return state.ring.arrived(slot).synchronize().map_err(backend_err);
                }
                // Backend::upload's promise: `frame` stays unchanged until a job launched after
                // this call has been finished (every launch waits for the newest upload).
                state.slot_host[slot] = Some(ranges);
                return Ok(());
            }
        }
        let reader = state.ring.last_reader[slot].map(|o| &state.outputs[o].computed);
        state.ring.upload(slot, frame, &self.upload, reader).map_err(backend_err)?;
        state.last_upload = Some(slot);
        Ok(())
    }

    fn finish_job(&mut self, out: &mut PlanarFrame) -> Result<()> {
        self.bind()?;
        let state = self.state.as_mut().ok_or_else(|| Error::State("finish before configure".into()))?;
        let o = state.in_flight.pop_front().ok_or_else(|| Error::State("finish without a launched job".into()))?;
        let planes = state.planes_written.pop_front().unwrap_or_default();
        state.free.push(o);
        let layout = state.ring.layout.clone();
        if !out.matches(&state.geometry) {
            // The output frame is free again: its queued copy back must be done first.
            state.outputs[o].abandon_download().map_err(backend_err)?;
            return Err(Error::InvalidFrame("output frame does not match the configured geometry".into()));
        }
        let ranges = if self.direct_io { Some(frame_ranges(out)) } else { None };
        if let Some(r) = &ranges {
            if self.finish_targets.len() >= 1024 {
                self.finish_targets.clear();
            }
            self.finish_targets.insert(r.clone());
        }
        if state.outputs[o].download_queued() {
            // Staged, or direct into the target's host frame: waits, and copies only when `out`
            // is not the frame the planes went to.
            return state.outputs[o].complete(&layout, out).map_err(backend_err);
        }
        if let Some(ranges) = ranges {
            let streams = stream_set([&self.upload, &self.compute, &self.exact, &self.download], &self.fused_streams);
            let mut quiesce = || streams.iter().all(|s| s.synchronize().is_ok());
            if self.registry.ensure(&ranges, &mut quiesce) {
                return state.outputs[o].complete_direct(&layout, &planes, &ranges, &self.download).map_err(backend_err);
            }
        }
        // Not page-locked (yet): wait for the kernels, then a plain copy.
        let of = &state.outputs[o];
        of.computed.synchronize().map_err(backend_err)?;
        for &p in &planes {
            let (off, n) = (layout.offsets[p], layout.plane_bytes[p]);
            let dst = out.planes[p].samples.as_bytes_mut();
            // SAFETY: dst is `n` bytes we hold mutably; the device frame is not reused before
            // this job is finished.
            unsafe { result::memcpy_dtoh_sync(&mut dst[..n], of.device.ptr + off as u64) }.map_err(|e| Error::Backend(format!("download: {e}")))?;
        }
        Ok(())
    }
}
