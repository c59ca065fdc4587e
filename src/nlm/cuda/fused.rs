//! The fused NLM path: per launch group of planes one fused kernel (kernels/nlm/fused.cu: patch
//! distances, weights and the weighted mean in one pass over a tile in shared memory) and one
//! launch of the exact f64 pass (kernels/nlm/exact.cu) for the samples the fused kernel queued in
//! the output frame's exact list (rounding ties, weights float cannot represent); builds with
//! patch-wise aggregation queue nothing and launch no exact pass.
//!
//! Streams of its own beside the device's: two fused streams that consecutive calls alternate
//! between (each waits for an event recorded on the compute stream after the call's preparations),
//! so that the next frame's grid fills the SMs the previous frame's last blocks leave idle; and the
//! exact stream, after each fused launch (an event apart), so that the next fused launch need not
//! wait for it. The exact stream has the context's greatest priority beside two fused streams:
//! its few blocks are dispatched as soon as fused blocks leave room (H100 run 50: R-live 0.333 ->
//! 0.327 ms, R-knlm 0.246 -> 0.238 ms); with one fused stream that cost 3% (run 51), so it then
//! has default priority.

use std::collections::HashMap;

use cudarc::driver::result;

use super::launch::{self, Batch, NlmArgs, NlmJob, MAX_FRAMES};
use super::variant::{self, KernelVariant, Kernels};
use super::{window_slots, EXACT_PARTS};
use crate::device::cuda::raw::Context as _;
use crate::device::cuda::raw::{self, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::device::cuda::{backend_err, CudaAlgorithm, DeviceInfo, FrameLayout, Launch};
use crate::error::{Error, Result};
use crate::nlm::{NlmPlan, NlmTuning};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

/// The fused NLM kernel and its exact pass, as a CUDA algorithm.
pub struct FusedNlm {
    device: DeviceInfo,
    tuning: NlmTuning,
    functions: HashMap<KernelVariant, Kernels>,
    sample_bytes: usize,
    batches: Vec<Batch>,
    /// Job table of batched launches (device copy, pinned source, its copy's event).
    job_table: Option<(DeviceBuffer, PinnedBuffer, Event)>,
    /// Recorded on the exact stream after the exact launches of a batched launch: they read the
    /// device job table too, so the next table's copy (compute stream) waits for it.
    table_read: Event,
    exact: Stream,
    /// Per launch group: "fused kernel done" (its fused stream) for the exact stream to wait on.
    fused_done: Vec<Event>,
    /// Empty: the fused kernels run on the compute stream itself (`fused_streams` 1).
    fused_streams: Vec<Stream>,
    fused_turn: usize,
    fused_ready: Event,
}

impl FusedNlm {
    pub fn new(device: &DeviceInfo, tuning: &NlmTuning) -> Result<Self> {
        if let Some(t) = tuning.cuda_tile {
            if !t.is_valid() {
                return Err(Error::InvalidParameter(format!("invalid fused-kernel tile {t:?}")));
            }
        }
        let ctx = &device.ctx;
        let fused_streams = if tuning.fused_streams >= 2 { 2 } else { 0 };
        Ok(FusedNlm {
            device: device.clone(),
            tuning: *tuning,
            functions: HashMap::new(),
            sample_bytes: 1,
            batches: Vec::new(),
            job_table: None,
            table_read: Event::new(ctx, false).map_err(backend_err)?,
            exact: if fused_streams > 1 { Stream::new_high_priority(ctx) } else { Stream::new(ctx) }.map_err(backend_err)?,
            fused_done: (0..EXACT_PARTS).map(|_| Event::new(ctx, false)).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?,
            fused_streams: (0..fused_streams).map(|_| Stream::new(ctx)).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?,
            fused_turn: 0,
            fused_ready: Event::new(ctx, false).map_err(backend_err)?,
        })
    }

    fn variant(&self, plan: &NlmPlan, batch: &Batch) -> KernelVariant {
        KernelVariant::for_batch(plan, batch, self.sample_bytes, self.tuning.exact_ties, self.tuning.cuda_tile, self.device.shared_per_sm)
    }

    /// The kernels of `v`, compiled and given their shared-memory attributes once.
    fn function(&mut self, v: &KernelVariant) -> Result<Kernels> {
        if let Some(f) = self.functions.get(v) {
            return Ok(f.clone());
        }
        let (out_w, out_h) = v.tile.output_tile(v.aggregation_radius);
        if out_w == 0 || out_h == 0 {
            return Err(Error::InvalidParameter(format!("fused-kernel tile {:?} has no room for aggregation radius {}", v.tile, v.aggregation_radius)));
        }
        let smem = v.shared_bytes();
        if smem > self.device.max_shared {
            return Err(Error::Unsupported(format!(
                "search radius {} / patch radius {} / aggregation radius {} need {smem} bytes of shared memory per block; {} has {}",
                v.search_radius, v.patch_radius, v.aggregation_radius, self.device.name, self.device.max_shared
            )));
        }
        let f = variant::kernels(&self.device.ctx, v).map_err(backend_err)?;
        raw::set_max_dynamic_shared(&f.fused, smem).map_err(backend_err)?;
        // Both kernels ask for the largest shared-memory carveout, so that exact-path blocks
        // never need an SM configured differently from the fused blocks'. (Every build measured
        // since run 37 sets it; its own effect was not measured apart.)
        for func in [&f.fused, &f.exact] {
            raw::set_shared_carveout(func, 100).map_err(backend_err)?;
        }
        self.functions.insert(*v, f.clone());
        Ok(f)
    }

    /// Writes the job table of a batched launch and queues its copy to the device (compute
    /// stream, before the kernels that read it). Returns its device address.
    fn upload_job_table(&mut self, compute: &Stream, windows: &[([i32; MAX_FRAMES], i32, i32)], launch: &Launch<'_>) -> Result<u64> {
        let bytes = std::mem::size_of::<NlmJob>() * windows.len();
        let fits = self.job_table.as_ref().map(|t| t.0.bytes >= bytes).unwrap_or(false);
        if !fits {
            if let Some(t) = &self.job_table {
                t.2.synchronize().map_err(backend_err)?;
                compute.synchronize().map_err(backend_err)?;
                self.table_read.synchronize().map_err(backend_err)?;
            }
            let n = bytes.next_power_of_two().max(4096);
            let ctx = &self.device.ctx;
            self.job_table = Some((DeviceBuffer::new(ctx, n).map_err(backend_err)?, PinnedBuffer::new(ctx, n).map_err(backend_err)?, Event::new(ctx, false).map_err(backend_err)?));
        }
        // The previous batch's exact launches (exact stream) have read the device table.
        compute.wait(&self.table_read).map_err(backend_err)?;
        let (dev, host, copied) = self.job_table.as_mut().expect("allocated");
        copied.synchronize().map_err(backend_err)?; // the previous table's copy has read the pinned buffer
        let table: Vec<NlmJob> = windows.iter().zip(launch.outputs).map(|(w, o)| NlmJob { dst: o.frame, exact: o.scratch, slot: w.0, n_frames: w.2, target: w.1 }).collect();
        // SAFETY: NlmJob is plain old data (repr(C)); the pinned buffer holds `bytes`.
        let src = unsafe { std::slice::from_raw_parts(table.as_ptr() as *const u8, bytes) };
        host.as_mut_slice()[..bytes].copy_from_slice(src);
        // SAFETY: the device table holds `bytes`; the pinned source is not rewritten before
        // `copied` completes (checked above).
        unsafe { result::memcpy_htod_async(dev.ptr, &host.as_slice()[..bytes], compute.raw) }.map_err(|e| Error::Backend(e.ctx("job table")))?;
        copied.record(compute).map_err(backend_err)?;
        Ok(dev.ptr)
    }
}

impl CudaAlgorithm for FusedNlm {
    fn output_scratch_bytes(&self, geometry: &Geometry) -> usize {
        super::output_scratch_bytes(geometry)
    }

    fn describe(&self) -> String {
        "fused NLM kernel".into()
    }

    fn configure(&mut self, _device: &DeviceInfo, geometry: &Geometry, _layout: &FrameLayout, plan: &Plan, _ring_slots: usize) -> Result<()> {
        let plan = plan.nlm("the fused NLM kernel")?;
        self.sample_bytes = geometry.bytes_per_sample;
        self.batches = launch::batches(geometry, plan);
        if self.batches.len() > EXACT_PARTS {
            return Err(Error::Unsupported(format!("{} launch groups per frame; at most {EXACT_PARTS}", self.batches.len())));
        }
        // Compile now rather than on the first frame.
        for b in self.batches.clone() {
            let v = self.variant(plan, &b);
            self.function(&v)?;
        }
        Ok(())
    }

    /// Per launch group of planes ONE fused launch whose grid's z runs over (job, weight group),
    /// then one exact-pass launch per batch whose z runs over the jobs. A single job is described
    /// inline in the kernel arguments; several go through a device job table.
    fn enqueue<'a>(&'a mut self, launch: &Launch<'a>, jobs: &[Job], plan: &Plan) -> Result<&'a Stream> {
        let plan = plan.nlm("the fused NLM kernel")?;
        let compute = launch.compute;
        let ring_slots = launch.ring.slots;
        let windows = jobs.iter().map(|j| window_slots(j, ring_slots)).collect::<Result<Vec<_>>>()?;
        let batches = self.batches.clone();
        let table_ptr = if jobs.len() > 1 { self.upload_job_table(compute, &windows, launch)? } else { 0 };
        // Each batch (groups of one plane size) has its part of each exact list: a count word and
        // room for every output sample of its groups. Cleared before any kernel of this call.
        let mut exact_parts = Vec::with_capacity(batches.len());
        let mut exact_offset = 0usize;
        for batch in &batches {
            let capacity = batch.out_w * batch.out_h * batch.groups.len();
            for o in launch.outputs {
                // SAFETY: the count word lies in the list's allocation (exact_offset + 1 + capacity
                // <= samples + EXACT_PARTS words); stream-ordered before the kernels.
                unsafe { raw::memset(o.scratch + 8 * exact_offset as u64, 0, 8, compute) }.map_err(|e| Error::Backend(e.ctx("clearing the exact list")))?;
            }
            exact_parts.push((exact_offset, capacity));
            exact_offset += 1 + capacity;
        }
        // This call's fused stream: it starts after everything queued on the compute stream so far.
        let turn = self.fused_turn;
        if !self.fused_streams.is_empty() {
            self.fused_turn = (turn + 1) % self.fused_streams.len();
            self.fused_ready.record(compute).map_err(backend_err)?;
            self.fused_streams[turn].wait(&self.fused_ready).map_err(backend_err)?;
        }
        let layout = &launch.ring.layout;
        for (li, launch_batches) in launch::fused_launches(&batches, self.tuning.merge_planes).iter().enumerate() {
            let v = self.variant(plan, &batches[launch_batches[0]]);
            let f = self.function(&v)?;
            let o0 = &launch.outputs[0];
            let mut args = NlmArgs {
                ring: launch.ring.frames.ptr,
                dst: o0.frame,
                frame_bytes: layout.frame_bytes as u64,
                wref: plan.wref,
                smem_bytes: v.shared_bytes() as u32,
                slot: windows[0].0,
                target: windows[0].1,
                n_frames: windows[0].2,
                jobs: table_ptr,
                distance_offset: plan.distance_offset,
                scale_to_8bit: plan.scale_to_8bit,
                exact: o0.scratch,
                ..Default::default()
            };
            // The launch's groups, batch after batch; blockIdx.x runs over their tiles in turn.
            let mut blocks = 0u32;
            let mut z = 0usize;
            for &bi in launch_batches {
                let batch = &batches[bi];
                let (tiles_x, tiles_y) = batch.tiles(&v.tile, v.aggregation_radius);
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
            let fused_stream = self.fused_streams.get(turn).unwrap_or(compute);
            // SAFETY: the argument block matches the kernel's NlmArgs (size checked at compile
            // time); every pointer in it (and in the job table) lies in the device's allocations.
            unsafe { raw::launch(&f.fused, grid, v.tile.threads, args.smem_bytes, fused_stream, &mut args) }
                .map_err(|e| Error::Backend(e.ctx(format!("NLM kernel (search radius {}, patch radius {})", v.search_radius, v.patch_radius))))?;
            // The exact path for the samples the fused kernel queued, one launch per batch (a
            // grid-stride loop over a count only the device knows; a few microseconds when it is
            // zero), on its own stream.
            self.fused_done[li].record(fused_stream).map_err(backend_err)?;
            self.exact.wait(&self.fused_done[li]).map_err(backend_err)?;
            if v.aggregation_radius > 0 {
                continue; // aggregated builds queue nothing for the exact path
            }
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
                // SAFETY: as above; the kernel reads the counts the fused kernel wrote before it.
                unsafe { raw::launch(&f.exact, launch::exact_grid(jobs.len()), launch::EXACT_THREADS, 0, &self.exact, &mut eargs) }
                    .map_err(|e| Error::Backend(e.ctx(format!("NLM exact-ties kernel (search radius {}, patch radius {})", v.search_radius, v.patch_radius))))?;
            }
        }
        if table_ptr != 0 {
            self.table_read.record(&self.exact).map_err(backend_err)?;
        }
        Ok(&self.exact)
    }

    fn streams(&self) -> Vec<&Stream> {
        std::iter::once(&self.exact).chain(&self.fused_streams).collect()
    }
}
