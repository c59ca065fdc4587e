//! The multi-pass CUDA path (gpu-kernel=multipass): NLM as a sequence of simple passes per pack
//! of search offsets, with intermediates in device memory (f32, f16 or three 10-bit normalized
//! values per 32-bit word). Design, scale factors and error bounds: docs/multipass.md; kernels:
//! kernels/nlm/multipass_*.cu.
//!
//! It is a [`CudaAlgorithm`]: the device layer (ring, upload, output frames, download, streams)
//! is the fused path's. Shared with the fused path: the batching of weight groups and the weight
//! constants ([`super::launch`]), and the exact f64 path (kernels/nlm/exact.cu, loaded from the
//! fused program's module, [`super::variant::kernels`]): `mp_finalize` queues the samples the
//! intermediates cannot decide like the reference (rounding ties, weights in f64's subnormal
//! range, the edge of the bisquare support, weights too small for f16/unorm10; see
//! [`exact_below`]) and the exact kernel recomputes them.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::CudaFunction;

use super::launch::{self, Batch, NlmArgs, MAX_BATCH, MAX_PLANES};
use super::variant::{self, KernelVariant};
use super::{exact_capacity, window_slots};
use crate::device::cuda::raw::Context as _;
use crate::device::cuda::raw::{self, DeviceBuffer, Stream};
use crate::device::cuda::{backend_err, module, CudaAlgorithm, DeviceInfo, FrameLayout, Launch, OutputTarget};
use crate::error::{Error, Result};
use crate::nlm::{Intermediate, NlmOptions};
use crate::nlm::{NlmPlan, WeightGroup};
use crate::params::Weighting;
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

/// Kernel sources, concatenated into one program (one module per variant, four entry points).
pub const SOURCES: &[(&str, &str)] =
    crate::kernel_sources!["nlm/multipass_common.cuh", "nlm/multipass_vertical.cu", "nlm/multipass_weight.cu", "nlm/multipass_accumulate.cu", "nlm/multipass_finalize.cu",];

/// Name of the program in NVRTC's logs and the caches.
pub const PROGRAM_NAME: &str = "multipass.cu";

pub const KERNEL_NAMES: [&str; 4] = ["mp_vertical", "mp_weight", "mp_accumulate", "mp_finalize"];

pub const MAX_OFFSETS_PER_PASS: u32 = 4;
/// Threads per block of every pass (1-D blocks).
pub const BLOCK: u32 = 128;
/// Output rows per thread of the vertical pass (kernels/nlm/multipass_common.cuh, MP_ROWS).
pub const MP_ROWS: u32 = 8;
/// Welsch distance cut of the normalized intermediates, in log2 units of the weight: distances
/// whose weight is below 2^-cut are stored as "past the cut" (weight 0). For unorm10 a weight
/// below 2^-11 rounds to 0 anyway; f16 keeps weights down to 2^-24.
pub const WELSCH_CUT_UNORM10: f64 = 11.0;
pub const WELSCH_CUT_F16: f64 = 24.0;

/// Blocks of the exact-path kernel (grid-stride over its list; launch::EXACT_THREADS threads each).
const EXACT_BLOCKS: u32 = 2112;

/// f32 bisquare: a largest weight below this is at the edge of the support, where float's
/// rounding of the distance is large relative to `1 - x` (as kernels/nlm/weight.cuh `needs_exact`).
pub const EXACT_BELOW_F32_BISQUARE: f32 = 1.0e-6;
/// unorm10: a largest weight below 16 steps of the stored weight (1/1023) goes exact. Below it the
/// stored weights carry a relative error of more than 1/32 from their own rounding (and, for
/// bisquare, more than the distance error `P_d / 2046` relative to `sqrt(w)`), and a weight of the
/// reference below half a step is stored as 0: with every weight that small the sample was kept
/// (or averaged with one quantized weight) where the reference averages — 10 code values off on
/// smooth content with steep gradients and bisquare h = 16 (tests/cuda_multipass.rs).
pub const EXACT_BELOW_UNORM10: f32 = 16.0 / 1023.0;
/// f16: the same rule at f16's resolution (weights relative 2^-11, distances relative 2^-11).
pub const EXACT_BELOW_F16: f32 = 1.0 / 1024.0;

/// The largest weight below which `mp_finalize` sends a sample to the exact f64 path (not used
/// by f32 welsch, which stores exponents and tests the subnormal range instead).
pub fn exact_below(weighting: Weighting, inter: Intermediate) -> f32 {
    match (inter, weighting) {
        (Intermediate::F32, Weighting::Welsch) => 0.0,
        (Intermediate::F32, Weighting::Bisquare) => EXACT_BELOW_F32_BISQUARE,
        (Intermediate::F16, _) => EXACT_BELOW_F16,
        (Intermediate::Unorm10, _) => EXACT_BELOW_UNORM10,
    }
}

/// Half-width of the rounding-tie window of `mp_finalize` in stored units: the fused path's rule
/// (8- and 10-bit samples, f32 only: f16/unorm10 are off by more than the window anyway).
pub fn tie_window(inter: Intermediate, scale_to_8bit: f32, exact_ties: bool) -> f32 {
    if inter == Intermediate::F32 && exact_ties && scale_to_8bit <= 4.0 {
        (variant::TIE_WINDOW * scale_to_8bit as f64) as f32
    } else {
        0.0
    }
}

/// Checks `offsets_per_pass` (1..=4).
pub fn validate_offsets_per_pass(p: u32) -> Result<()> {
    if (1..=MAX_OFFSETS_PER_PASS).contains(&p) {
        Ok(())
    } else {
        Err(Error::InvalidParameter(format!("offsets-per-pass {p} out of range 1..={MAX_OFFSETS_PER_PASS}")))
    }
}

/// Values per 32-bit intermediate word.
pub fn lanes(inter: Intermediate) -> u32 {
    match inter {
        Intermediate::F32 => 1,
        Intermediate::F16 => 2,
        Intermediate::Unorm10 => 3,
    }
}

/// Compile-time constants of one multipass build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MpVariant {
    pub offsets_per_pass: u32,
    pub patch_radius: u32,
    pub guides: u32,
    pub outputs: u32,
    pub step_x: u32,
    pub step_y: u32,
    pub sample_bytes: u32,
    pub weighting: Weighting,
    pub intermediate: Intermediate,
}

impl MpVariant {
    pub fn new(plan: &NlmPlan, batch: &Batch, sample_bytes: usize, offsets_per_pass: u32, intermediate: Intermediate) -> Self {
        MpVariant {
            offsets_per_pass,
            patch_radius: plan.patch_radius,
            guides: batch.guides,
            outputs: batch.outputs,
            step_x: batch.step_x,
            step_y: batch.step_y,
            sample_bytes: sample_bytes as u32,
            weighting: plan.weighting,
            intermediate,
        }
    }

    pub fn defines(&self) -> Vec<String> {
        let inter = match self.intermediate {
            Intermediate::F32 => 0,
            Intermediate::F16 => 1,
            Intermediate::Unorm10 => 2,
        };
        let mut d = module::defines(&[
            ("MP_P", self.offsets_per_pass),
            ("PATCH_R", self.patch_radius),
            ("N_GUIDES", self.guides),
            ("N_OUTPUTS", self.outputs),
            ("STEP_X", self.step_x),
            ("STEP_Y", self.step_y),
            ("SAMPLE_BYTES", self.sample_bytes),
            ("WEIGHTING", launch::weighting_define(self.weighting)),
            ("INTER", inter),
            ("MP_ROWS", MP_ROWS),
            ("MP_ARGS_BYTES", MP_ARGS_BYTES as u32),
        ]);
        d.push(module::FAST_MATH.into());
        d
    }

    pub fn words(&self) -> u32 {
        self.offsets_per_pass.div_ceil(lanes(self.intermediate))
    }
}

/// The program text: the sources concatenated.
pub fn program_source() -> String {
    module::program_source(SOURCES)
}

/// Compiles `v` to PTX for `arch` (e.g. "compute_90"); no GPU needed (tests/nvrtc_compile.rs).
pub fn compile_ptx(v: &MpVariant, arch: &str) -> std::result::Result<Arc<String>, crate::error::BackendError> {
    module::program_ptx(PROGRAM_NAME, &program_source(), &v.defines(), arch)
}

/// One weight group of a launch (kernels/nlm/multipass_common.cuh, MpGroup).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MpGroup {
    pub guide: [u64; MAX_PLANES],
    pub output: [u64; MAX_PLANES],
    pub k_dist: f32,
    pub k_bias: f32,
    pub v_scale: f32,
    pub v_cut: f32,
}

pub const MAX_P: usize = MAX_OFFSETS_PER_PASS as usize;

/// The by-value argument of every pass (kernels/nlm/multipass_common.cuh, MpArgs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MpArgs {
    pub ring: u64,
    pub dst: u64,
    pub vbuf: u64,
    pub wbuf: u64,
    pub accum: u64,
    pub frame_bytes: u64,
    pub group_words: u64,
    pub image_words: u64,
    pub accum_floats: u64,
    pub exact: u64,
    pub exact_capacity: u64,
    pub group: [MpGroup; MAX_BATCH],
    pub slot: [i32; MAX_P],
    pub dx: [i32; MAX_P],
    pub dy: [i32; MAX_P],
    pub target_slot: i32,
    pub n_off: i32,
    pub symmetric: i32,
    pub first: i32,
    pub out_w: i32,
    pub out_h: i32,
    pub guide_w: i32,
    pub guide_h: i32,
    pub ex0: i32,
    pub ey0: i32,
    pub ew: i32,
    pub eh: i32,
    pub vw: i32,
    pub wref: f32,
    pub tie_window: f32,
    pub exact_below: f32,
}

pub const MP_ARGS_BYTES: usize = std::mem::size_of::<MpArgs>();

/// One search offset: `dt` frames from the target (0: the target itself), (dx, dy) samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Offset {
    pub dt: i32,
    pub dx: i32,
    pub dy: i32,
}

/// Offsets computed by one round of passes. A symmetric pack holds offsets of the target frame
/// from one half plane (dy > 0, or dy = 0 and dx > 0); each also stands for its negation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pack {
    pub offsets: Vec<Offset>,
    pub symmetric: bool,
}

/// The packs of one frame: the target's spatial offsets by symmetry (half of them), then every
/// offset of every reference frame (`dts`, no symmetry across frames), `per_pass` at a time.
/// Packs never mix spatial and temporal offsets (their weight grids differ).
pub fn plan_packs(search_radius: u32, dts: &[i32], per_pass: u32) -> Vec<Pack> {
    let a = search_radius as i32;
    let p = per_pass.max(1) as usize;
    let mut spatial = Vec::new();
    for dy in 0..=a {
        for dx in -a..=a {
            if dy > 0 || dx > 0 {
                spatial.push(Offset { dt: 0, dx, dy });
            }
        }
    }
    let mut temporal = Vec::new();
    for &dt in dts.iter().filter(|&&dt| dt != 0) {
        for dy in -a..=a {
            for dx in -a..=a {
                temporal.push(Offset { dt, dx, dy });
            }
        }
    }
    let mut packs: Vec<Pack> = spatial.chunks(p).map(|c| Pack { offsets: c.to_vec(), symmetric: true }).collect();
    packs.extend(temporal.chunks(p).map(|c| Pack { offsets: c.to_vec(), symmetric: false }));
    packs
}

/// The weight grid of a pack, relative to the output plane: origin and size. Symmetric packs
/// need weights at p - q too (q in the upper half plane): columns -a..w+a, rows -a..h.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightGrid {
    pub ex0: i32,
    pub ey0: i32,
    pub ew: usize,
    pub eh: usize,
    /// Columns of the vertical-sum images: step_x * (ew - 1) + patch diameter.
    pub vw: usize,
}

pub fn weight_grid(symmetric: bool, search_radius: u32, patch_radius: u32, step_x: u32, out_w: usize, out_h: usize) -> WeightGrid {
    let a = search_radius as usize;
    let (ex0, ey0, ew, eh) = if symmetric { (-(a as i32), -(a as i32), out_w + 2 * a, out_h + a) } else { (0, 0, out_w, out_h) };
    let vw = step_x as usize * (ew - 1) + 2 * patch_radius as usize + 1;
    WeightGrid { ex0, ey0, ew, eh, vw }
}

/// Words of one intermediate image: large enough for the vertical sums and the weights of the
/// largest (symmetric) grid.
pub fn image_words(search_radius: u32, patch_radius: u32, step_x: u32, out_w: usize, out_h: usize) -> usize {
    let g = weight_grid(true, search_radius, patch_radius, step_x, out_w, out_h);
    (g.vw.max(g.ew) * g.eh).div_ceil(32) * 32
}

/// Launch grid of each pass, for `groups` groups: (vertical, weight, accumulate/finalize).
pub fn pass_grids(g: &WeightGrid, out_w: usize, out_h: usize, groups: usize) -> [(u32, u32, u32); 3] {
    let z = groups as u32;
    [((g.vw as u32).div_ceil(BLOCK), (g.eh as u32).div_ceil(MP_ROWS), z), ((g.ew as u32).div_ceil(BLOCK), g.eh as u32, z), ((out_w as u32).div_ceil(BLOCK), out_h as u32, z)]
}

/// Normalisation of the vertical sums for f16/unorm10: the distance sum at which the weight is
/// taken as 0 ("cut"), in the kernel's units (plain sums of squared stored-sample differences).
/// Returns (v_scale = 1 / cut, cut); (1, 1) for f32 (unused).
pub fn distance_cut(weighting: Weighting, inter: Intermediate, k_dist: f32, k_bias: f32) -> (f32, f32) {
    let (k, b) = (k_dist as f64, k_bias as f64);
    let cut = match (inter, weighting) {
        (Intermediate::F32, _) => return (1.0, 1.0),
        (_, Weighting::Bisquare) => (1.0 + b) / k,
        (Intermediate::F16, Weighting::Welsch) => (WELSCH_CUT_F16 + b) / k,
        (Intermediate::Unorm10, Weighting::Welsch) => (WELSCH_CUT_UNORM10 + b) / k,
    };
    ((1.0 / cut) as f32, cut as f32)
}

/// Bytes one frame moves through device memory according to the pass plan (each intermediate
/// word written once and read once, each sample a pass needs read once per offset that shifts
/// it; caches merge nothing else). Used by the benchmark's bandwidth column.
pub fn bytes_per_frame(geometry: &Geometry, plan: &NlmPlan, dts: &[i32], per_pass: u32, inter: Intermediate) -> u64 {
    let bps = geometry.bytes_per_sample as u64;
    let mut total = 0u64;
    for b in launch::batches(geometry, plan) {
        let groups = b.groups.len() as u64;
        let v = MpVariant {
            offsets_per_pass: per_pass,
            patch_radius: plan.patch_radius,
            guides: b.guides,
            outputs: b.outputs,
            step_x: b.step_x,
            step_y: b.step_y,
            sample_bytes: bps as u32,
            weighting: plan.weighting,
            intermediate: inter,
        };
        let words = v.words() as u64;
        let packs = plan_packs(plan.search_radius, dts, per_pass);
        let (ow, oh) = (b.out_w as u64, b.out_h as u64);
        let accum = (2 + b.outputs as u64) * ow * oh * 4;
        for (i, pk) in packs.iter().enumerate() {
            let g = weight_grid(pk.symmetric, plan.search_radius, plan.patch_radius, b.step_x, b.out_w, b.out_h);
            let (vw, ew, eh) = (g.vw as u64, g.ew as u64, g.eh as u64);
            let n = pk.offsets.len() as u64;
            let guide_rows = b.step_y as u64 * eh;
            let pass1 = (1 + n) * b.guides as u64 * vw * guide_rows * bps + words * vw * eh * 4;
            let pass2 = words * vw * eh * 4 + words * ew * eh * 4;
            let mirrored = if pk.symmetric { 2 } else { 1 };
            let pass3 = words * ew * eh * 4 * mirrored + n * mirrored * b.outputs as u64 * ow * oh * bps + if i == 0 { accum } else { 2 * accum };
            total += groups * (pass1 + pass2 + pass3);
        }
        let finalize = if packs.is_empty() { 0 } else { accum } + 2 * b.outputs as u64 * ow * oh * bps;
        total += groups * finalize;
    }
    total
}

#[derive(Clone)]
struct MpKernels {
    f: [CudaFunction; 4],
}

/// Working memory of one batch (weight groups of one shape), shared by every frame: the passes of
/// all frames run in order on the compute stream.
struct MpBatch {
    batch: Batch,
    vbuf: DeviceBuffer,
    wbuf: DeviceBuffer,
    accum: DeviceBuffer,
    image_words: usize,
    group_words: usize,
    accum_floats: usize,
}

/// The multi-pass NLM path as a CUDA algorithm (selected by gpu-kernel=multipass).
pub struct MultipassNlm {
    device: DeviceInfo,
    per_pass: u32,
    inter: Intermediate,
    exact_ties: bool,
    sample_bytes: usize,
    exact_capacity: usize,
    batches: Vec<MpBatch>,
    kernels: HashMap<MpVariant, MpKernels>,
}

impl MultipassNlm {
    pub fn new(device: &DeviceInfo, options: &NlmOptions) -> Result<Self> {
        validate_offsets_per_pass(options.offsets_per_pass)?;
        Ok(MultipassNlm {
            device: device.clone(),
            per_pass: options.offsets_per_pass,
            inter: options.intermediate,
            exact_ties: options.tuning.exact_ties,
            sample_bytes: 1,
            exact_capacity: 0,
            batches: Vec::new(),
            kernels: HashMap::new(),
        })
    }

    fn kernels(&mut self, v: &MpVariant) -> Result<MpKernels> {
        if let Some(k) = self.kernels.get(v) {
            return Ok(k.clone());
        }
        let m = module::program_module(&self.device.ctx, PROGRAM_NAME, &program_source(), &v.defines()).map_err(backend_err)?;
        let load = |n: &str| m.load_function(n).map_err(|e| Error::Backend(e.ctx(format!("kernel {n}"))));
        let k = MpKernels { f: [load(KERNEL_NAMES[0])?, load(KERNEL_NAMES[1])?, load(KERNEL_NAMES[2])?, load(KERNEL_NAMES[3])?] };
        self.kernels.insert(*v, k.clone());
        Ok(k)
    }

    /// The fused program's `nlm_exact` for batch `b` (the variant the fused path would build, so
    /// both share the NVRTC and module caches).
    fn exact_kernel(&self, plan: &NlmPlan, b: &Batch) -> Result<CudaFunction> {
        let v = KernelVariant::for_batch(plan, b, self.sample_bytes, self.exact_ties, None, self.device.shared_per_sm);
        Ok(variant::kernels(&self.device.ctx, &v).map_err(backend_err)?.exact)
    }

    fn launch_one(f: &CudaFunction, grid: (u32, u32, u32), args: &mut MpArgs, stream: &Stream, what: &str) -> Result<()> {
        if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
            return Ok(());
        }
        // SAFETY: the argument block matches the kernel's MpArgs (size checked at compile time
        // through MP_ARGS_BYTES); every pointer in it lies in the device's allocations, and the
        // kernels bound every access by the sizes in the block.
        unsafe { raw::launch(f, grid, BLOCK, 0, stream, args) }.map_err(|e| Error::Backend(e.ctx(what)))
    }

    /// Enqueues every pass of `job` on `stream`, writing into `out`.
    fn enqueue_passes(&mut self, launch: &Launch<'_>, job: &Job, plan: &NlmPlan, out: &OutputTarget) -> Result<()> {
        let (window, target, n_frames) = window_slots(job, launch.ring.slots)?;
        let stream = launch.compute;
        let dts: Vec<i32> = job.references.iter().map(|r| r.dt).collect();
        let slot_of = |dt: i32| if dt == 0 { Some(job.slot) } else { job.references.iter().find(|r| r.dt == dt).map(|r| r.slot) };
        let packs = plan_packs(plan.search_radius, &dts, self.per_pass);
        let variants: Vec<MpVariant> = self.batches.iter().map(|b| MpVariant::new(plan, &b.batch, self.sample_bytes, self.per_pass, self.inter)).collect();
        let layout = &launch.ring.layout;
        for (bi, v) in variants.iter().enumerate() {
            let k = self.kernels(v)?;
            let exact_fn = self.exact_kernel(plan, &self.batches[bi].batch)?;
            let mb = &self.batches[bi];
            let b = &mb.batch;
            let mut args = MpArgs {
                ring: launch.ring.frames.ptr,
                dst: out.frame,
                vbuf: mb.vbuf.ptr,
                wbuf: mb.wbuf.ptr,
                accum: mb.accum.ptr,
                frame_bytes: layout.frame_bytes as u64,
                group_words: mb.group_words as u64,
                image_words: mb.image_words as u64,
                accum_floats: mb.accum_floats as u64,
                exact: out.scratch,
                exact_capacity: self.exact_capacity as u64,
                target_slot: job.slot as i32,
                out_w: b.out_w as i32,
                out_h: b.out_h as i32,
                guide_w: b.guide_w as i32,
                guide_h: b.guide_h as i32,
                wref: plan.wref,
                tie_window: tie_window(self.inter, plan.scale_to_8bit, self.exact_ties),
                exact_below: exact_below(plan.weighting, self.inter),
                ..Default::default()
            };
            for (z, &gi) in b.groups.iter().enumerate() {
                let g: &WeightGroup = plan.groups.get(gi).ok_or_else(|| Error::State("plan changed structure without configure".into()))?;
                let (k_dist, k_bias) = launch::weight_constants(plan, g);
                let (v_scale, v_cut) = distance_cut(plan.weighting, self.inter, k_dist, k_bias);
                let mg = &mut args.group[z];
                mg.guide = layout.plane_offsets(&g.guides);
                mg.output = layout.plane_offsets(&g.outputs);
                mg.k_dist = k_dist;
                mg.k_bias = k_bias;
                mg.v_scale = v_scale;
                mg.v_cut = v_cut;
            }
            for (i, pk) in packs.iter().enumerate() {
                let g = weight_grid(pk.symmetric, plan.search_radius, plan.patch_radius, b.step_x, b.out_w, b.out_h);
                debug_assert!(g.vw.max(g.ew) * g.eh <= mb.image_words);
                args.ex0 = g.ex0;
                args.ey0 = g.ey0;
                args.ew = g.ew as i32;
                args.eh = g.eh as i32;
                args.vw = g.vw as i32;
                args.n_off = pk.offsets.len() as i32;
                args.symmetric = pk.symmetric as i32;
                args.first = (i == 0) as i32;
                for j in 0..MAX_P {
                    // Unused lanes repeat the first offset (never read: lanes >= n_off are skipped).
                    let o = pk.offsets.get(j).copied().unwrap_or(pk.offsets[0]);
                    args.slot[j] = slot_of(o.dt).ok_or_else(|| Error::State(format!("no frame at dt {}", o.dt)))? as i32;
                    args.dx[j] = o.dx;
                    args.dy[j] = o.dy;
                }
                let grids = pass_grids(&g, b.out_w, b.out_h, b.groups.len());
                Self::launch_one(&k.f[0], grids[0], &mut args, stream, "mp_vertical")?;
                Self::launch_one(&k.f[1], grids[1], &mut args, stream, "mp_weight")?;
                Self::launch_one(&k.f[2], grids[2], &mut args, stream, "mp_accumulate")?;
            }
            args.n_off = if packs.is_empty() { 0 } else { 1 };
            // SAFETY: the count word lies in the list's allocation; stream-ordered before finalize.
            unsafe { raw::memset(out.scratch, 0, 8, stream) }.map_err(|e| Error::Backend(e.ctx("clearing the exact list")))?;
            let grids = pass_grids(&weight_grid(false, 0, 0, 1, b.out_w, b.out_h), b.out_w, b.out_h, b.groups.len());
            Self::launch_one(&k.f[3], grids[2], &mut args, stream, "mp_finalize")?;
            // The exact f64 path for the samples finalize queued (kernels/nlm/exact.cu).
            let mut nargs = NlmArgs {
                ring: args.ring,
                dst: args.dst,
                frame_bytes: args.frame_bytes,
                out_w: args.out_w,
                out_h: args.out_h,
                guide_w: args.guide_w,
                guide_h: args.guide_h,
                wref: plan.wref,
                distance_offset: plan.distance_offset,
                scale_to_8bit: plan.scale_to_8bit,
                exact: args.exact,
                exact_capacity: args.exact_capacity,
                // Frames in time order, the target among them (the reference's summation order).
                slot: window,
                target,
                n_frames,
                ..Default::default()
            };
            for (z, &gi) in b.groups.iter().enumerate() {
                let g = &plan.groups[gi];
                let ng = &mut nargs.group[z];
                ng.guide = args.group[z].guide;
                ng.output = args.group[z].output;
                ng.k_dist = args.group[z].k_dist;
                ng.k_bias = args.group[z].k_bias;
                ng.h = g.h;
            }
            // SAFETY: the argument block matches nlm_exact's NlmArgs (size checked at compile time);
            // its pointers lie in the device's allocations; the kernel reads the count finalize
            // wrote before it (same stream) and bounds it by exact_capacity.
            unsafe { raw::launch(&exact_fn, (EXACT_BLOCKS, 1, 1), launch::EXACT_THREADS, 0, stream, &mut nargs) }.map_err(|e| Error::Backend(e.ctx("the exact path")))?;
        }
        Ok(())
    }
}

impl CudaAlgorithm for MultipassNlm {
    fn output_scratch_bytes(&self, geometry: &Geometry) -> usize {
        super::output_scratch_bytes(geometry)
    }

    fn describe(&self) -> String {
        format!("multi-pass NLM kernel, {} offsets per pass, {:?} intermediates", self.per_pass, self.inter)
    }

    fn configure(&mut self, _device: &DeviceInfo, geometry: &Geometry, _layout: &FrameLayout, plan: &Plan, _ring_slots: usize) -> Result<()> {
        let plan = plan.nlm("the multi-pass NLM kernel")?;
        super::check_multipass_supported(plan)?;
        self.sample_bytes = geometry.bytes_per_sample;
        self.exact_capacity = exact_capacity(geometry);
        self.batches.clear();
        let ctx = self.device.ctx.clone();
        for b in launch::batches(geometry, plan) {
            let v = MpVariant::new(plan, &b, geometry.bytes_per_sample, self.per_pass, self.inter);
            let image_words = image_words(plan.search_radius, plan.patch_radius, b.step_x, b.out_w, b.out_h);
            let group_words = image_words * v.words() as usize;
            let groups = b.groups.len();
            let accum_floats = (2 + b.outputs as usize) * b.out_w * b.out_h;
            let vbuf = DeviceBuffer::new(&ctx, 4 * group_words * groups).map_err(backend_err)?;
            let wbuf = DeviceBuffer::new(&ctx, 4 * group_words * groups).map_err(backend_err)?;
            let accum = DeviceBuffer::new(&ctx, 4 * accum_floats * groups).map_err(backend_err)?;
            // Compile now rather than on the first frame.
            self.kernels(&v)?;
            self.exact_kernel(plan, &b)?;
            self.batches.push(MpBatch { batch: b, vbuf, wbuf, accum, image_words, group_words, accum_floats });
        }
        Ok(())
    }

    /// Every pass of every job on the compute stream, in order: the jobs share the intermediates.
    fn enqueue<'a>(&'a mut self, launch: &Launch<'a>, jobs: &[Job], plan: &Plan) -> Result<&'a Stream> {
        let plan = plan.nlm("the multi-pass NLM kernel")?;
        for (job, out) in jobs.iter().zip(launch.outputs) {
            self.enqueue_passes(launch, job, plan, out)?;
        }
        Ok(launch.compute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::VideoInfo;
    use crate::params::Params;

    #[test]
    fn args_block_size_is_stable() {
        assert_eq!(std::mem::size_of::<MpGroup>(), 64);
        assert_eq!(MP_ARGS_BYTES, 392);
    }

    #[test]
    fn offsets_per_pass_is_validated() {
        for p in 1..=4 {
            validate_offsets_per_pass(p).unwrap();
        }
        for p in [0, 5, 100] {
            let e = validate_offsets_per_pass(p).unwrap_err().to_string();
            assert!(e.contains("offsets-per-pass") && e.contains("1..=4"), "{e}");
        }
    }

    /// Every offset of the full search (minus the target's centre) is covered exactly once,
    /// either directly or as the mirror of a symmetric offset.
    #[test]
    fn packs_cover_every_offset_once() {
        for a in 0..=4u32 {
            for p in 1..=4u32 {
                let dts = [-2, -1, 1];
                let packs = plan_packs(a, &dts, p);
                let mut seen = std::collections::HashMap::new();
                for pk in &packs {
                    assert!(!pk.offsets.is_empty() && pk.offsets.len() <= p as usize);
                    assert!(pk.offsets.iter().all(|o| (o.dt == 0) == pk.symmetric));
                    for o in &pk.offsets {
                        *seen.entry(*o).or_insert(0) += 1;
                        if pk.symmetric {
                            assert!(o.dy > 0 || (o.dy == 0 && o.dx > 0));
                            *seen.entry(Offset { dt: 0, dx: -o.dx, dy: -o.dy }).or_insert(0) += 1;
                        }
                    }
                }
                let ai = a as i32;
                let mut expected = 0;
                for dt in [-2, -1, 0, 1] {
                    for dy in -ai..=ai {
                        for dx in -ai..=ai {
                            if dt == 0 && dx == 0 && dy == 0 {
                                continue;
                            }
                            expected += 1;
                            assert_eq!(seen.get(&Offset { dt, dx, dy }), Some(&1), "a={a} p={p} {dt} {dx} {dy}");
                        }
                    }
                }
                assert_eq!(seen.len(), expected);
                let side = (2 * a + 1) as usize;
                let want = ((side * side - 1) / 2).div_ceil(p as usize) + (3 * side * side).div_ceil(p as usize);
                assert_eq!(packs.len(), want);
            }
        }
    }

    #[test]
    fn weight_grid_holds_every_mirrored_read() {
        // Accumulate reads W at p (forward) and p - q (symmetric): both inside the grid.
        for a in 0..=3u32 {
            let (w, h) = (7usize, 5usize);
            let g = weight_grid(true, a, 2, 2, w, h);
            for pk in plan_packs(a, &[], 3) {
                for o in pk.offsets {
                    for py in 0..h as i32 {
                        for px in 0..w as i32 {
                            for (x, y) in [(px, py), (px - o.dx, py - o.dy)] {
                                let (gx, gy) = (x - g.ex0, y - g.ey0);
                                assert!(gx >= 0 && (gx as usize) < g.ew && gy >= 0 && (gy as usize) < g.eh);
                            }
                        }
                    }
                }
            }
            assert_eq!(g.vw, 2 * (g.ew - 1) + 5);
            assert!(g.vw.max(g.ew) * g.eh <= image_words(a, 2, 2, w, h));
        }
    }

    #[test]
    fn distance_cut_matches_the_weight_formula() {
        let g = Geometry::from_video_info(&VideoInfo::new(PixelFormat::GRAY8, 16, 16).unwrap());
        for weighting in [Weighting::Welsch, Weighting::Bisquare] {
            let plan = NlmPlan::new(&g, &Params { weighting, sigma: Some(3.0), ..Params::default() }).unwrap();
            let (k, b) = launch::weight_constants(&plan, &plan.groups[0]);
            let (scale, cut) = distance_cut(weighting, Intermediate::Unorm10, k, b);
            assert!((scale * cut - 1.0).abs() < 1e-6);
            // The distance sum at the cut, as a mean squared distance in 8-bit units.
            let patch = 25.0;
            let w = plan.weight(cut as f64 / patch, plan.groups[0].h as f64);
            match weighting {
                Weighting::Welsch => assert!((w - 2f64.powf(-WELSCH_CUT_UNORM10)).abs() < 1e-6, "{w}"),
                Weighting::Bisquare => assert!(w < 1e-9, "{w}"),
            }
            assert_eq!(distance_cut(weighting, Intermediate::F32, k, b), (1.0, 1.0));
        }
    }
}
