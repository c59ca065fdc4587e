//! NLM super-resolution on a CUDA device: a [`CudaAlgorithm`] whose kernels are kernels/sr/
//! (`sr_initial`: cubic interpolation of the target or of a deblur residual; `sr_residual`: the
//! residual of the target against the estimate's cell means; `sr_degrade`: the degradation box;
//! `sr_fuse`: the weighted fusion over the window with shared-memory tiles, as in the paper, and
//! the gate; `sr_correct`: the gated residual spread back into the estimate).
//!
//! Per job and plane, on the compute stream: `sr_initial` into the estimate, per deblur step
//! `sr_residual` and `sr_initial` (adding), then per iteration `sr_degrade`, `sr_fuse` and
//! `sr_correct`; the last kernel of a plane writes the output frame. Working memory: three f32
//! planes of the largest output plane (estimate; degraded, then the next estimate; the gated
//! residual) and three of the largest input plane (deblur residual, the target as floats, the
//! denoised target), owned by the algorithm: every job runs on the one compute stream, in order.

use std::collections::HashMap;

use cudarc::driver::CudaFunction;

use super::SrPlan;
use crate::device::cuda::raw::Context as _;
use crate::device::cuda::raw::{self, DeviceBuffer, Stream};
use crate::device::cuda::{backend_err, module, CudaAlgorithm, DeviceInfo, FrameLayout, Launch};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

/// The kernel sources, in the order they are concatenated.
pub const SOURCES: &[(&str, &str)] = crate::kernel_sources!["common/border.cuh", "sr/args.cuh", "sr/initial.cu", "sr/degrade.cu", "sr/fuse.cu", "sr/correct.cu"];

pub const PROGRAM_NAME: &str = "sr.cu";

/// High-resolution samples per block side of `sr_fuse`.
pub const TILE: u32 = 16;
/// Block of the per-sample kernels (`sr_initial`, `sr_degrade`, `sr_correct`), across and down.
pub const SAMPLE_BLOCK: (u32, u32) = (32, 8);
/// Frames of a window at most (kernels/sr/args.cuh, SR_MAX_FRAMES).
pub const MAX_FRAMES: usize = 15;

/// The by-value argument of every super-resolution kernel (kernels/sr/args.cuh, SrArgs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SrArgs {
    pub ring: u64,
    pub frame_bytes: u64,
    pub plane_offset: u64,
    pub out: u64,
    pub out_plane_offset: u64,
    pub estimate: u64,
    pub degraded: u64,
    pub next: u64,
    pub gated: u64,
    pub residual: u64,
    pub lr_target: u64,
    pub slot: [i32; MAX_FRAMES],
    pub n_frames: i32,
    pub w: i32,
    pub h: i32,
    pub out_w: i32,
    pub out_h: i32,
    pub scale: i32,
    pub sigma2: f32,
    pub inv_h2: f32,
    pub inv_n: f32,
    pub fusion: f32,
    pub novelty_gain: f32,
    pub accumulate: i32,
    pub inv_scale: f32,
    pub stored_scale: f32,
    pub max_value: u32,
}

pub const SR_ARGS_BYTES: usize = std::mem::size_of::<SrArgs>();

/// What one build of the program fixes at compile time: sample size, patch and search radii
/// (the fusion kernel unrolls its patch and candidate loops over them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrVariant {
    pub sample_bytes: usize,
    pub patch_radius: usize,
    pub search_radius: usize,
}

impl SrVariant {
    pub fn for_plan(plan: &SrPlan) -> Self {
        SrVariant { sample_bytes: plan.input.bytes_per_sample, patch_radius: plan.patch_radius, search_radius: plan.search_radius }
    }

    pub fn defines(&self) -> Vec<String> {
        module::defines(&[
            ("SAMPLE_BYTES", self.sample_bytes as u32),
            ("PATCH", self.patch_radius as u32),
            ("RADIUS", self.search_radius as u32),
            ("TILE", TILE),
            ("SR_ARGS_BYTES", SR_ARGS_BYTES as u32),
        ])
    }
}

pub fn program_source() -> String {
    let mut s = module::program_source(SOURCES);
    s.push_str("\nstatic_assert(sizeof(SrArgs) == SR_ARGS_BYTES, \"SrArgs differs from the host's\");\n");
    s
}

/// Compiles the program to PTX for `arch`; no GPU needed (tests/nvrtc_compile.rs).
pub fn compile_ptx(v: &SrVariant, arch: &str) -> std::result::Result<std::sync::Arc<String>, crate::error::BackendError> {
    module::program_ptx(PROGRAM_NAME, &program_source(), &v.defines(), arch)
}

/// Dynamic shared memory of one `sr_fuse` block, bytes (the layout at the top of
/// kernels/sr/fuse.cu): the degraded tile with its halo, then one low-resolution tile.
pub fn fuse_shared_bytes(scale: usize, radius: usize, patch: usize) -> usize {
    let tile = TILE as usize;
    let bw = tile + 2 * scale * patch;
    let lw = (tile - 1) / scale + 2 + 2 * (radius + patch);
    4 * (bw * bw + lw * lw)
}

#[derive(Clone)]
struct Kernels {
    initial: CudaFunction,
    residual: CudaFunction,
    degrade: CudaFunction,
    fuse: CudaFunction,
    correct: CudaFunction,
}

/// NLM super-resolution as a CUDA algorithm.
pub struct CudaSr {
    device: DeviceInfo,
    kernels: HashMap<SrVariant, Kernels>,
    variant: Option<SrVariant>,
    layout: Option<FrameLayout>,
    out_layout: Option<FrameLayout>,
    /// The estimate; the degraded estimate, then the next estimate; the gated residual: f32
    /// planes of the largest output plane.
    buffers: Vec<DeviceBuffer>,
    /// The deblur residual (in step 0 first the gated residual), a float copy of the target and
    /// the denoised target (step 0): f32 planes of the largest input plane.
    residual: Option<DeviceBuffer>,
    lr_copy: Option<DeviceBuffer>,
    lr_denoised: Option<DeviceBuffer>,
    shared_limit: usize,
}

impl CudaSr {
    pub fn new(device: &DeviceInfo) -> Result<Self> {
        Ok(CudaSr {
            device: device.clone(),
            kernels: HashMap::new(),
            variant: None,
            layout: None,
            out_layout: None,
            buffers: Vec::new(),
            residual: None,
            lr_copy: None,
            lr_denoised: None,
            shared_limit: 0,
        })
    }

    fn kernels(&mut self, v: SrVariant) -> Result<Kernels> {
        if let Some(k) = self.kernels.get(&v) {
            return Ok(k.clone());
        }
        let m = module::program_module(&self.device.ctx, PROGRAM_NAME, &program_source(), &v.defines()).map_err(|e| Error::Backend(e.ctx(format!("super-resolution kernels {v:?}"))))?;
        let load = |n: &str| m.load_function(n).map_err(|e| Error::Backend(e.ctx(format!("kernel {n}"))));
        let k = Kernels { initial: load("sr_initial")?, residual: load("sr_residual")?, degrade: load("sr_degrade")?, fuse: load("sr_fuse")?, correct: load("sr_correct")? };
        self.kernels.insert(v, k.clone());
        Ok(k)
    }
}

impl CudaAlgorithm for CudaSr {
    fn describe(&self) -> String {
        "NLM super-resolution".into()
    }

    fn configure(&mut self, device: &DeviceInfo, geometry: &Geometry, layout: &FrameLayout, plan: &Plan, _ring_slots: usize) -> Result<()> {
        let plan = plan.sr("the CUDA super-resolution implementation")?;
        let _ = geometry;
        let v = SrVariant::for_plan(plan);
        let k = self.kernels(v)?;
        self.variant = Some(v);
        // The fusion at the plan's factor and, for step 0, at factor 1.
        let smem = fuse_shared_bytes(plan.scale, plan.search_radius, plan.patch_radius).max(fuse_shared_bytes(1, plan.search_radius, plan.patch_radius));
        if smem > device.max_shared {
            return Err(Error::Unsupported(format!(
                "super-resolution tiles of scale {} with search radius {} and patch radius {} need {smem} bytes of shared memory per block; {} has {}",
                plan.scale, plan.search_radius, plan.patch_radius, device.name, device.max_shared
            )));
        }
        raw::allow_device_max_dynamic_shared(&k.fuse, device.max_shared).map_err(backend_err)?;
        self.shared_limit = smem;
        let largest = plan.output.planes.iter().map(|p| p.width * p.height).max().unwrap_or(1);
        self.buffers = (0..3).map(|_| DeviceBuffer::new(&device.ctx, 4 * largest)).collect::<raw::CuResult<Vec<_>>>().map_err(backend_err)?;
        let largest_in = plan.input.planes.iter().map(|p| p.width * p.height).max().unwrap_or(1);
        self.residual = Some(DeviceBuffer::new(&device.ctx, 4 * largest_in).map_err(backend_err)?);
        self.lr_copy = Some(DeviceBuffer::new(&device.ctx, 4 * largest_in).map_err(backend_err)?);
        self.lr_denoised = Some(DeviceBuffer::new(&device.ctx, 4 * largest_in).map_err(backend_err)?);
        self.layout = Some(layout.clone());
        self.out_layout = Some(FrameLayout::new(&plan.output));
        Ok(())
    }

    fn enqueue<'a>(&'a mut self, launch: &Launch<'a>, jobs: &[Job], plan: &Plan) -> Result<&'a Stream> {
        let plan: &SrPlan = plan.sr("the CUDA super-resolution implementation")?;
        let k = self.kernels(self.variant.ok_or_else(|| Error::State("super-resolution launch before configure".into()))?)?;
        let (layout, out_layout) = match (&self.layout, &self.out_layout) {
            (Some(l), Some(o)) => (l, o),
            _ => return Err(Error::State("super-resolution launch before configure".into())),
        };
        let stream = launch.compute;
        let n = (2 * plan.patch_radius + 1).pow(2) as f32;
        let (residual, lr_copy, lr_denoised) = match (&self.residual, &self.lr_copy, &self.lr_denoised) {
            (Some(r), Some(c), Some(d)) => (r.ptr, c.ptr, d.ptr),
            _ => return Err(Error::State("super-resolution launch before configure".into())),
        };
        for (job, out) in jobs.iter().zip(launch.outputs) {
            let window = job.frames_in_time_order();
            if window.len() > MAX_FRAMES {
                return Err(Error::Unsupported(format!("a window of {} frames; at most {MAX_FRAMES}", window.len())));
            }
            let mut slot = [0i32; MAX_FRAMES];
            // The target first (sr_initial reads slot[0]); the fusion's order does not matter.
            slot[0] = job.slot as i32;
            for (i, r) in job.references.iter().enumerate() {
                slot[i + 1] = r.slot as i32;
            }
            for (p, (ig, og)) in plan.input.planes.iter().zip(&plan.output.planes).enumerate() {
                let h = plan.strength[p];
                // Without other frames the gate of step 5 is 0: nothing to fuse.
                let fusing = plan.fused[p] && plan.fuses(window.len());
                let mut bufs = [self.buffers[0].ptr, self.buffers[1].ptr, self.buffers[2].ptr];
                let mut args = SrArgs {
                    ring: launch.ring.frames.ptr,
                    frame_bytes: layout.frame_bytes as u64,
                    plane_offset: layout.offsets[p] as u64,
                    // A plane that is not fused ends with its last deblur step.
                    out: if fusing || plan.deblur > 0 { 0 } else { out.frame },
                    out_plane_offset: out_layout.offsets[p] as u64,
                    estimate: bufs[0],
                    degraded: bufs[1],
                    next: bufs[0],
                    gated: 0,
                    residual: 0,
                    lr_target: 0,
                    slot,
                    n_frames: window.len() as i32,
                    w: ig.width as i32,
                    h: ig.height as i32,
                    out_w: og.width as i32,
                    out_h: og.height as i32,
                    scale: plan.scale as i32,
                    sigma2: plan.sigma * plan.sigma,
                    inv_h2: 1.0 / (h * h),
                    inv_n: 1.0 / n,
                    fusion: plan.fusion,
                    novelty_gain: if plan.novelty_gate { super::NOVELTY_GAIN as f32 } else { 0.0 },
                    accumulate: 0,
                    inv_scale: 1.0 / plan.scale_to_8bit,
                    stored_scale: plan.scale_to_8bit,
                    max_value: plan.max_value,
                };
                let per_sample = ((og.width as u32).div_ceil(SAMPLE_BLOCK.0), (og.height as u32).div_ceil(SAMPLE_BLOCK.1), 1);
                let launch_2d = |f: &CudaFunction, grid: (u32, u32, u32), args: &mut SrArgs, what: &str| -> Result<()> {
                    // SAFETY: the argument block matches SrArgs (size checked at compile time);
                    // every address lies in the ring, the output frame or the working planes
                    // (sized for the largest output plane), and the kernels read and write within
                    // the plane sizes they are given.
                    unsafe { raw::launch_blocks(f, grid, (SAMPLE_BLOCK.0, SAMPLE_BLOCK.1, 1), 0, stream, args) }.map_err(|e| Error::Backend(e.ctx(what)))
                };
                let per_input = ((ig.width as u32).div_ceil(SAMPLE_BLOCK.0), (ig.height as u32).div_ceil(SAMPLE_BLOCK.1), 1);
                if plan.fused[p] && plan.denoises() {
                    // Step 0 at factor 1: a float copy of the target (cubic taps at factor 1
                    // are the identity), its gated residual over the window (the deblur
                    // residual's plane is free until step 2) and all of the correction (E' = F).
                    let d = plan.denoise_plan();
                    let mut a0 = SrArgs { scale: 1, out_w: ig.width as i32, out_h: ig.height as i32, out: 0, next: lr_copy, ..args };
                    launch_2d(&k.initial, per_input, &mut a0, "sr_initial (denoise)")?;
                    a0.estimate = lr_copy;
                    a0.degraded = lr_copy;
                    a0.next = residual;
                    a0.sigma2 = d.sigma * d.sigma;
                    a0.fusion = d.fusion;
                    a0.novelty_gain = 0.0;
                    let grid = ((ig.width as u32).div_ceil(TILE), (ig.height as u32).div_ceil(TILE), 1);
                    let smem = fuse_shared_bytes(1, plan.search_radius, plan.patch_radius) as u32;
                    // SAFETY: as below; the shared memory is the size fuse.cu lays out at factor 1.
                    unsafe { raw::launch(&k.fuse, grid, TILE * TILE, smem, stream, &mut a0) }.map_err(|e| Error::Backend(e.ctx("sr_fuse (denoise)")))?;
                    a0.gated = residual;
                    a0.next = lr_denoised;
                    launch_2d(&k.correct, per_input, &mut a0, "sr_correct (denoise)")?;
                    // Steps 1 and 2 start from the denoised target.
                    args.residual = lr_denoised;
                    args.lr_target = lr_denoised;
                }
                launch_2d(&k.initial, per_sample, &mut args, "sr_initial")?;
                for step in 0..plan.deblur {
                    args.residual = residual;
                    args.accumulate = 0;
                    args.out = 0;
                    launch_2d(&k.residual, per_input, &mut args, "sr_residual")?;
                    args.accumulate = 1;
                    args.out = if !fusing && step + 1 == plan.deblur { out.frame } else { 0 };
                    launch_2d(&k.initial, per_sample, &mut args, "sr_initial (deblur)")?;
                }
                args.residual = 0;
                args.lr_target = 0;
                args.accumulate = 0;
                if !fusing {
                    continue;
                }
                for it in 0..plan.iterations {
                    let last = it + 1 == plan.iterations;
                    args.estimate = bufs[0];
                    args.next = bufs[1];
                    args.out = 0;
                    launch_2d(&k.degrade, per_sample, &mut args, "sr_degrade")?;
                    args.degraded = bufs[1];
                    args.next = bufs[2];
                    let grid = ((og.width as u32).div_ceil(TILE), (og.height as u32).div_ceil(TILE), 1);
                    // SAFETY: as above; the shared memory is the size fuse.cu lays out.
                    unsafe { raw::launch(&k.fuse, grid, TILE * TILE, self.shared_limit as u32, stream, &mut args) }.map_err(|e| Error::Backend(e.ctx("sr_fuse")))?;
                    // The degraded plane is read; the next estimate takes its place.
                    args.gated = bufs[2];
                    args.next = bufs[1];
                    args.out = if last { out.frame } else { 0 };
                    launch_2d(&k.correct, per_sample, &mut args, "sr_correct")?;
                    bufs.swap(0, 1);
                }
            }
        }
        Ok(stream)
    }
}
