//! BM3D on a CUDA device: a [`CudaAlgorithm`] whose kernels are kernels/bm3d/ (`bm3d_hard`,
//! `bm3d_wiener`: one warp per reference patch for matching, filtering and aggregation;
//! `bm3d_finish`: numerators over denominators into the basic estimate or the output frame).
//!
//! Per job, on the compute stream: with two steps, step 1 of every frame of the window whose basic
//! estimate this algorithm does not hold yet (into its basic-estimate ring, one f32 frame per ring
//! slot, keyed by the job's epoch and the frame's sequence number), then the last step of the
//! target into the output frame. Each step of each plane group: clear the fixed-point sums, one
//! launch over the reference patches, one over the samples. The sums are 64-bit integers, so the
//! result does not depend on the order of the atomic additions.
//!
//! With window references (the `high` profile) every frame of the window is a reference frame of
//! every target it serves, and its exhaustive search in its own frame does not depend on the
//! target: `bm3d_search_hard` / `bm3d_search_wiener` (kernels/bm3d/search.cu) compute it once per
//! frame, step and plane group into a [`SearchCache`] entry of the frame's ring slot, and the group
//! kernels start from it (then search the other frames of the target's window predictively).
//!
//! With per-frame groups (`frame_groups`) every frame's reference patches are grouped once per
//! step, over the window centred on that frame, by `bm3d_hard_frames` / `bm3d_wiener_frames`,
//! which add each member to the sums of its own frame ([`FrameSums`]: an entry per frame still
//! being added to); a frame's basic estimate or output is finished once every frame whose groups
//! reach it is grouped (the order of [`super::frame_group_order`], as on the CPU). The own-frame
//! search of each group launch is made just before it by the search kernel (faster than the
//! group kernels' own, measured in run 146) into one scratch entry.
//!
//! Device memory: the basic-estimate ring (ring slots x samples x 4 bytes, two steps only) and the
//! sums (2 x 8 bytes per sample of the largest plane group's extent); no per-group buffers, so a
//! 3840x2160 I420 stream holds about 270 MB with a ring of 7 slots. Window references add the
//! search cache: per ring slot, 8 bytes x (group size + seeds) per reference patch and step (1080p
//! I420, `high`: about 124 MB a slot). Per-frame groups hold, instead of the sums and the search
//! cache, 2 x 8 bytes per denoised sample for each of steps x (past + future + 1) frames (1080p
//! I420, two steps, 1 + 1: 300 MB) and one search entry: a 3840x2160 I420 stream with `high`,
//! block step 4, radius 8 and 1 + 1 peaked at 3993 MiB used on the device, the context included
//! (run 147, which still allocated the one set of sums too: 133 MB).

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::CudaFunction;

use super::{
    basics_to_compute, extent, frame_group_order, frame_id, job_dts, kaiser_1d, kaiser_window, reference_corners, reference_dts, step_window, Bm3dOptions, Bm3dPlan, FrameGroupOp, FrameId,
    PatchTransform, FIXED_ONE, FRAME_CODE_BIAS, KAISER_BETA, MOTION_BLOCK, MOTION_CELL, MOTION_REACH,
};
use crate::bm3d::reference::slot_of;
use crate::device::cuda::raw::Context as _;
use crate::device::cuda::raw::{self, DeviceBuffer, Stream};
use crate::device::cuda::{backend_err, module, CudaAlgorithm, DeviceInfo, FrameLayout, Launch, OutputTarget};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

/// The kernel sources, in the order they are concatenated (after the generated constants).
pub const SOURCES: &[(&str, &str)] = crate::kernel_sources![
    "common/border.cuh",
    "bm3d/args.cuh",
    "bm3d/select.cuh",
    "bm3d/transform.cuh",
    "bm3d/group.cu",
    "bm3d/search.cu",
    "bm3d/search_tc.cu",
    "bm3d/finish.cu",
    "bm3d/motion.cu",
    "bm3d/bayes.cu"
];

pub const PROGRAM_NAME: &str = "bm3d.cu";

/// Warps (reference patches) per block of the group kernels.
pub const WARPS: u32 = 4;
/// Samples per block of the finish kernel, across and down (kernels/bm3d/finish.cu).
pub const FINISH_W: u32 = 32;
pub const FINISH_H: u32 = 8;
/// Threads per block of the motion kernels (kernels/bm3d/motion.cu: one cell or block each).
pub const MOTION_THREADS: u32 = 256;
/// Planes matched together at most (kernels/bm3d/args.cuh, BM3D_MAX_PLANES).
pub const MAX_PLANES: usize = 3;
/// Frame codes of a step's window (dt -7..=7).
pub const FRAME_CODES: usize = 15;

/// The by-value argument of every BM3D kernel (kernels/bm3d/args.cuh, Bm3dArgs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Bm3dArgs {
    pub ring: u64,
    pub frame_bytes: u64,
    pub basic: u64,
    pub basic_floats: u64,
    pub num: u64,
    pub wimg: u64,
    pub out: u64,
    pub basic_out: u64,
    pub plane_bytes: [u64; MAX_PLANES],
    pub basic_plane: [u64; MAX_PLANES],
    pub sigma: [f32; MAX_PLANES],
    pub slot: [i32; FRAME_CODES],
    pub n_planes: i32,
    pub w: i32,
    pub h: i32,
    pub ew: i32,
    pub eh: i32,
    pub refs_x: i32,
    pub refs_y: i32,
    pub block_step: i32,
    pub radius: i32,
    pub n_seeds: i32,
    pub seed_radius: i32,
    pub tau_ssd: f32,
    pub lambda: f32,
    pub inv_scale: f32,
    pub scale: f32,
    pub max_value: u32,
    pub ref_code: i32,
    pub cache: u64,
    pub search_floats: i32,
    pub group_floats: i32,
    pub sum_slot: [i32; FRAME_CODES],
    pub sum_stride: u64,
    pub motion: u64,
    pub motion_stride: u64,
    pub motion_dir: i32,
    pub motion_bw: i32,
    pub motion_bh: i32,
    pub motion_pad: i32,
    pub bayes_members: u64,
    pub bayes_weight: u64,
    pub group_members: u64,
}

/// The by-value argument of the motion kernels (kernels/bm3d/motion.cu, MotionArgs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MotionArgs {
    pub plane: u64,
    pub cells: u64,
    pub from: u64,
    pub to: u64,
    pub field: u64,
    pub w: i32,
    pub h: i32,
    pub cw: i32,
    pub ch: i32,
    pub bw: i32,
    pub bh: i32,
}

pub const BM3D_ARGS_BYTES: usize = std::mem::size_of::<Bm3dArgs>();

/// Everything that is a compile-time constant of one build of the BM3D program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bm3dVariant {
    pub patch: u32,
    pub nmax_hard: u32,
    pub nmax_wiener: u32,
    pub seeds: u32,
    pub sample_bytes: u32,
}

impl Bm3dVariant {
    pub fn for_plan(plan: &Bm3dPlan, sample_bytes: usize) -> Self {
        let s = &plan.settings;
        Bm3dVariant { patch: s.patch_size, nmax_hard: s.group_size, nmax_wiener: s.wiener_group_size, seeds: s.most_seeds(), sample_bytes: sample_bytes as u32 }
    }

    pub fn defines(&self) -> Vec<String> {
        module::defines(&[
            ("PATCH", self.patch),
            ("NMAX_HARD", self.nmax_hard),
            ("NMAX_WIENER", self.nmax_wiener),
            ("SEEDS", self.seeds),
            ("SAMPLE_BYTES", self.sample_bytes),
            ("WARPS", WARPS),
            ("BM3D_ARGS_BYTES", BM3D_ARGS_BYTES as u32),
            ("MOTION_CELL", MOTION_CELL as u32),
            ("MOTION_BLOCK", MOTION_BLOCK as u32),
            ("MOTION_REACH", MOTION_REACH as u32),
            ("MOTION_ARGS_BYTES", std::mem::size_of::<MotionArgs>() as u32),
            ("MOTION_THREADS", MOTION_THREADS),
            ("BAYES_FLOATS_HOST", self.bayes_floats() as u32),
        ])
    }

    /// Shared floats of one warp of the hard (`wiener` false) or Wiener kernel for a plane group
    /// of `planes` planes and seeds of `seed_radius`: the layout at the top of
    /// kernels/bm3d/group.cu (`Bm3dArgs::group_floats`); a multiple of 4 (16-byte aligned warps).
    pub fn group_floats(&self, wiener: bool, planes: usize, seed_radius: u32) -> usize {
        let pp = (self.patch * self.patch) as usize;
        let n = if wiener { self.nmax_wiener } else { self.nmax_hard } as usize;
        self.warp_floats(n, (n * pp).max(self.square_floats(planes, seed_radius)))
    }

    /// Shared floats of one warp of the Wiener step's block-matching kernel (kernels/bm3d/group.cu
    /// PHASE 1): the layout of [`group_floats`](Self::group_floats) with the group buffer cut to the
    /// staged square.
    pub fn match_floats(&self, planes: usize, seed_radius: u32) -> usize {
        self.warp_floats(self.nmax_wiener as usize, self.square_floats(planes, seed_radius))
    }

    /// A predictive-search square of `planes` planes at `seed_radius`, staged.
    fn square_floats(&self, planes: usize, seed_radius: u32) -> usize {
        planes * ((2 * seed_radius + self.patch) as usize).pow(2)
    }

    /// The layout at the top of kernels/bm3d/group.cu for groups of `n` with a group buffer of
    /// `buffer` floats; a multiple of 4 (16-byte aligned warps).
    fn warp_floats(&self, n: usize, buffer: usize) -> usize {
        let pp = (self.patch * self.patch) as usize;
        // The seeds and the first one's companion (motion seeds).
        let seed_ints = (2 * (self.seeds as usize + 1)).next_multiple_of(4);
        (MAX_PLANES * pp + SELECT_QUEUE_FLOATS + seed_ints + 4 * n + buffer).next_multiple_of(4)
    }

    /// Shared floats of one warp of the Bayesian estimate's kernel (kernels/bm3d/bayes.cu,
    /// BAYES_FLOATS): the centred basic patches, a work area (the noisy patches, the Gram matrix,
    /// the estimates), the projections and a mean patch, rows padded.
    pub fn bayes_floats(&self) -> usize {
        let (pp, n) = ((self.patch * self.patch) as usize, self.nmax_wiener as usize);
        let row = pp + 4;
        let work = (n * row).max(n * (n + 1)).next_multiple_of(4);
        (n * row + work + n * (n + 4) + pp).next_multiple_of(4)
    }

    /// Ints a Wiener launch keeps per reference patch for the Bayesian estimate (args.cuh,
    /// BAYES_MEMBER_INTS).
    pub fn bayes_member_ints(&self) -> usize {
        4 + 4 * self.nmax_wiener as usize
    }

    /// Dynamic shared memory of a block of the hard or Wiener kernel, bytes.
    pub fn smem_bytes(&self, wiener: bool, planes: usize, seed_radius: u32) -> usize {
        WARPS as usize * 4 * self.group_floats(wiener, planes, seed_radius)
    }

    /// The program text: the patch transforms (forward and inverse of each step) and the Kaiser
    /// window of the patch size as constants, then the sources.
    pub fn program_source(&self) -> String {
        let k = self.patch as usize;
        let list = |v: &[f64]| v.iter().map(|x| format!("{:e}f", *x as f32)).collect::<Vec<_>>().join(", ");
        let mut s = format!("// ---- generated by src/bm3d/cuda.rs: transforms of {k}x{k} patches\n");
        // As literals in functions rather than constant memory: once kernels/bm3d/transform.cuh's
        // loops are unrolled, each coefficient is an instruction's immediate operand (from
        // constant memory it took a uniform load for every two FMAs, 13% of a Wiener filtering
        // launch's instructions, run 186).
        s.push_str("template <bool WIENER> struct Bm3dFwd;\ntemplate <bool WIENER> struct Bm3dInv;\n");
        for (name, wiener) in [("HT", false), ("WN", true)] {
            let (f, i) = PatchTransform::of_step(wiener).matrices(k);
            for (kind, m) in [("Fwd", &f), ("Inv", &i)] {
                s.push_str(&format!(
                    "template <> struct Bm3d{kind}<{wiener}> {{ // {name}\n    static __device__ __forceinline__ float at(int e) {{ constexpr float m[{}] = {{{}}}; return m[e]; }}\n}};\n",
                    k * k,
                    list(m)
                ));
            }
        }
        s.push_str(&format!("__constant__ float BM3D_KAISER[{}] = {{{}}};\n", k * k, list(&kaiser_window(k, KAISER_BETA))));
        s.push_str(&format!("__constant__ float BM3D_KAISER1[{k}] = {{{}}};\n", list(&kaiser_1d(k, KAISER_BETA))));
        s.push_str(&format!("#define BM3D_FIXED_ONE {FIXED_ONE:e}f\n"));
        s.push_str(&module::program_source(SOURCES));
        s.push_str("\nstatic_assert(sizeof(Bm3dArgs) == BM3D_ARGS_BYTES, \"Bm3dArgs differs from the host's\");\n");
        s.push_str("static_assert(sizeof(MotionArgs) == MOTION_ARGS_BYTES, \"MotionArgs differs from the host's\");\n");
        s
    }
}

/// Compiles `v` to PTX for `arch` (e.g. "compute_90"); no GPU needed (tests/nvrtc_compile.rs).
pub fn compile_ptx(v: &Bm3dVariant, arch: &str) -> std::result::Result<Arc<String>, crate::error::BackendError> {
    module::program_ptx(PROGRAM_NAME, &v.program_source(), &v.defines(), arch).map_err(|e| e.ctx(format!("{v:?}")))
}

#[derive(Clone)]
struct Kernels {
    hard: CudaFunction,
    wiener: CudaFunction,
    /// Per-frame groups: members added to their own frames' sums (`Bm3dArgs::sum_slot`).
    hard_frames: CudaFunction,
    wiener_frames: CudaFunction,
    /// The Wiener step apart: block matching, then filtering (`Bm3dOptions::wiener_match_apart`).
    wiener_match: CudaFunction,
    wiener_filter: CudaFunction,
    wiener_frames_match: CudaFunction,
    wiener_frames_filter: CudaFunction,
    search_hard: CudaFunction,
    search_wiener: CudaFunction,
    /// The own-frame search on tensor cores (kernels/bm3d/search_tc.cu; compute capability 8.0
    /// and later).
    search_tc_hard: CudaFunction,
    search_tc_wiener: CudaFunction,
    finish: CudaFunction,
    motion_cells: CudaFunction,
    motion_field: CudaFunction,
    /// The Bayesian estimate of the Wiener step's groups (kernels/bm3d/bayes.cu).
    bayes: CudaFunction,
    bayes_frames: CudaFunction,
}

/// Shared floats per warp of the selection queue (kernels/bm3d/select.cuh `WarpBest`: 64 keys).
const SELECT_QUEUE_FLOATS: usize = 128;

/// Shared floats per warp of the search kernels (kernels/bm3d/search.cu): the distances of a
/// search square of `radius`, the selection queue and one plane of the reference patch; even.
pub fn search_floats(radius: u32, patch: u32) -> usize {
    let side = (2 * radius + 1) as usize;
    (side * side + SELECT_QUEUE_FLOATS + (patch * patch) as usize).next_multiple_of(2)
}

/// Reference patches per block of the tensor-core search, across and down (kernels/bm3d/search_tc.cu
/// `TC_SIDE`); one warp each.
pub const SEARCH_TC_SIDE: u32 = 4;

/// Shared bytes of a block of the tensor-core search (kernels/bm3d/search_tc.cu, the layout at its
/// top) for 8x8 patches: `split` for the Wiener step and samples of more than 8 bits.
pub fn search_tc_bytes(radius: u32, block_step: u32, split: bool) -> usize {
    let refs = (SEARCH_TC_SIDE * SEARCH_TC_SIDE) as usize;
    let union = 2 * radius as usize + 1 + (SEARCH_TC_SIDE as usize - 1) * block_step as usize;
    let (us, tw) = (union.next_multiple_of(2), union.next_multiple_of(8) + 8);
    let words = refs * union * us + refs * SELECT_QUEUE_FLOATS + tw * (union + 7) * (1 + split as usize) + union * (union + 7) + union * us;
    4 * words
}

/// The keys of one ring slot's search cache entries and where each (plane group, step) starts,
/// index `2 * group + wiener` (kernels/bm3d/search.cu: `[refs][nmax + seeds]` keys per entry;
/// the Wiener step's entries are empty with one step).
pub fn search_cache_layout(plan: &Bm3dPlan, plane_sizes: &[(usize, usize)]) -> (usize, Vec<usize>) {
    let s = &plan.settings;
    let k = s.patch_size as usize;
    let mut offsets = Vec::new();
    let mut slot_keys = 0;
    for g in &plan.groups {
        let (w, h) = plane_sizes[g.planes[0]];
        let (ew, eh) = extent(w, h, k);
        for (wiener, nmax, used) in [(false, s.group_size, true), (true, s.wiener_group_size, plan.two_step())] {
            let step = s.block_step_of(wiener) as usize;
            let refs = reference_corners(ew, k, step).len() * reference_corners(eh, k, step).len();
            offsets.push(slot_keys);
            slot_keys += if used { refs * (nmax + s.most_seeds()) as usize } else { 0 };
        }
    }
    (slot_keys, offsets)
}

/// Window references' own-frame searches kept on the device (kernels/bm3d/search.cu): per ring
/// slot, plane group and step, the keys of every reference patch of that frame, computed once
/// while the frame stays in the ring. Shape of one entry: [refs][nmax + seeds] u64.
struct SearchCache {
    buffer: DeviceBuffer,
    /// Keys of one ring slot (every group and step).
    slot_keys: usize,
    /// Key offset within a slot of (group, step): index `2 * group + wiener`.
    offsets: Vec<usize>,
    /// Per (slot, group, step): the (epoch, seq) of the frame whose search the entry holds.
    frames: Vec<Option<FrameId>>,
    /// Shared floats per warp of the search kernels ([`search_floats`]).
    smem_floats: usize,
}

/// Per-frame groups' sums on the device (`CudaBm3d::frame_groups`): per step, the fixed-point
/// numerators and corner weights of the frames whose estimates are still being added to. Shape of
/// each buffer: [steps][past + future + 1][frame_elems] i64, a frame's entry (its sequence number
/// modulo past + future + 1) holding every plane group (`group_offsets`, each group's planes one
/// extent apart). A step finishes its frames in order and a frame's groups reach at most
/// past + future frames ahead, so the frames being added to are at most past + future + 1
/// consecutive ones: their entries differ.
struct FrameSums {
    num: DeviceBuffer,
    wimg: DeviceBuffer,
    /// Sums of one frame: the extents of every denoised plane.
    frame_elems: usize,
    group_offsets: Vec<usize>,
    /// Entries per step (past + future + 1).
    per_step: usize,
    /// Per entry: the frame whose sums it holds (its first group clears them); None once finished.
    owners: Vec<Option<FrameId>>,
    /// Per (step, ring slot): the frame whose own reference patches have been grouped.
    grouped: Vec<Option<FrameId>>,
    ring_slots: usize,
}

impl FrameSums {
    fn entry(&self, step: usize, frame: FrameId) -> usize {
        step * self.per_step + (frame.1 % self.per_step as u64) as usize
    }
}

/// Motion seeds' coarse motion on the device (kernels/bm3d/motion.cu), kept while the frames stay
/// in the ring: per ring slot and plane group the cell sums of the frame's first plane, and the
/// fields from that frame to the frames one before and one after it. Shapes: `cells`
/// [slots][groups][cells_per] u32, `fields` [slots][groups][2][blocks_per][2] i32 (backwards,
/// then forwards; `Bm3dArgs::motion`). 1080p I420: 0.2 MB a ring slot.
struct MotionCache {
    cells: DeviceBuffer,
    fields: DeviceBuffer,
    /// Per plane group: its cells (across, down) and blocks (across, down); a group without a
    /// block gets no companions (as the definition: no field).
    dims: Vec<((usize, usize), (usize, usize))>,
    cells_per: usize,
    blocks_per: usize,
    /// Per (slot, group): the frame whose cells the entry holds.
    cell_frames: Vec<Option<FrameId>>,
    /// Per (slot, group, direction): the frames (from, to) whose field the entry holds.
    field_frames: Vec<Option<(FrameId, FrameId)>>,
}

impl MotionCache {
    fn new(ctx: &Arc<cudarc::driver::CudaContext>, plan: &Bm3dPlan, plane_sizes: &[(usize, usize)], slots: usize) -> Result<Self> {
        let k = plan.settings.patch_size as usize;
        let dims: Vec<_> = plan
            .groups
            .iter()
            .map(|g| {
                let (w, h) = plane_sizes[g.planes[0]];
                let (ew, eh) = extent(w, h, k);
                let (cw, ch) = (ew / MOTION_CELL, eh / MOTION_CELL);
                ((cw, ch), (cw / MOTION_BLOCK, ch / MOTION_BLOCK))
            })
            .collect();
        let cells_per = dims.iter().map(|d| d.0 .0 * d.0 .1).max().unwrap_or(0);
        let blocks_per = dims.iter().map(|d| d.1 .0 * d.1 .1).max().unwrap_or(0);
        let groups = dims.len();
        let cells = DeviceBuffer::new(ctx, 4 * slots * groups * cells_per).map_err(backend_err)?;
        let fields = DeviceBuffer::new(ctx, 4 * slots * groups * 2 * blocks_per * 2).map_err(backend_err)?;
        Ok(MotionCache { cells, fields, dims, cells_per, blocks_per, cell_frames: vec![None; slots * groups], field_frames: vec![None; slots * groups * 2] })
    }

    fn cells_at(&self, slot: usize, gi: usize) -> u64 {
        self.cells.ptr + 4 * ((slot * self.dims.len() + gi) * self.cells_per) as u64
    }

    /// Ints from one ring slot's fields to the next's.
    fn slot_ints(&self) -> usize {
        self.dims.len() * 2 * self.blocks_per * 2
    }
}

/// BM3D as a CUDA algorithm.
pub struct CudaBm3d {
    device: DeviceInfo,
    options: Bm3dOptions,
    kernels: HashMap<Bm3dVariant, Kernels>,
    variant: Option<Bm3dVariant>,
    /// Fixed-point numerators and corner weights, one extent per plane of the largest group
    /// (without per-frame groups: those keep theirs in [`FrameSums`]).
    num: Option<DeviceBuffer>,
    wimg: Option<DeviceBuffer>,
    /// Basic estimates, one f32 frame (every plane, `basic_offsets`) per ring slot.
    basic: Option<DeviceBuffer>,
    basic_floats: usize,
    basic_offsets: Vec<u64>,
    /// Per ring slot: (epoch, seq) of the frame whose basic estimate the slot holds.
    basic_keys: Vec<Option<FrameId>>,
    layout: Option<FrameLayout>,
    plane_sizes: Vec<(usize, usize)>,
    /// With window references: the reference frames' own-frame searches.
    search: Option<SearchCache>,
    /// With per-frame groups: every frame's sums while groups are added to them.
    frame_sums: Option<FrameSums>,
    /// With motion seeds: the coarse motion between the ring's frames.
    motion: Option<MotionCache>,
    /// With the Bayesian estimate: the groups and weights of one Wiener launch (the largest plane
    /// group's reference patches), read by the launch after it.
    bayes: Option<BayesBuffers>,
    /// The Wiener step apart (`Bm3dOptions::wiener_match_apart`, two steps): the groups of one
    /// launch's reference patches (`[refs][bayes_member_ints]` ints, the largest plane group's),
    /// written by its block matching, read by its filtering.
    group_members: Option<DeviceBuffer>,
}

/// The Wiener launch's groups (`[refs][bayes_member_ints]` ints) and weights (`[refs][MAX_PLANES]`
/// floats) for the Bayesian estimate's launch.
struct BayesBuffers {
    members: DeviceBuffer,
    weight: DeviceBuffer,
}

impl CudaBm3d {
    pub fn new(device: &DeviceInfo, options: &Bm3dOptions) -> Result<Self> {
        Ok(CudaBm3d {
            device: device.clone(),
            options: *options,
            kernels: HashMap::new(),
            variant: None,
            num: None,
            wimg: None,
            basic: None,
            basic_floats: 0,
            basic_offsets: Vec::new(),
            basic_keys: Vec::new(),
            layout: None,
            plane_sizes: Vec::new(),
            search: None,
            frame_sums: None,
            motion: None,
            bayes: None,
            group_members: None,
        })
    }

    fn kernels(&mut self, v: &Bm3dVariant) -> Result<Kernels> {
        if let Some(k) = self.kernels.get(v) {
            return Ok(k.clone());
        }
        let m = module::program_module(&self.device.ctx, PROGRAM_NAME, &v.program_source(), &v.defines()).map_err(|e| Error::Backend(e.ctx(format!("{v:?}"))))?;
        let load = |n: &str| m.load_function(n).map_err(|e| Error::Backend(e.ctx(format!("kernel {n}"))));
        let k = Kernels {
            hard: load("bm3d_hard")?,
            wiener: load("bm3d_wiener")?,
            hard_frames: load("bm3d_hard_frames")?,
            wiener_frames: load("bm3d_wiener_frames")?,
            wiener_match: load("bm3d_wiener_match")?,
            wiener_filter: load("bm3d_wiener_filter")?,
            wiener_frames_match: load("bm3d_wiener_frames_match")?,
            wiener_frames_filter: load("bm3d_wiener_frames_filter")?,
            search_hard: load("bm3d_search_hard")?,
            search_wiener: load("bm3d_search_wiener")?,
            search_tc_hard: load("bm3d_search_tc_hard")?,
            search_tc_wiener: load("bm3d_search_tc_wiener")?,
            finish: load("bm3d_finish")?,
            motion_cells: load("bm3d_motion_cells")?,
            motion_field: load("bm3d_motion_field")?,
            bayes: load("bm3d_bayes")?,
            bayes_frames: load("bm3d_bayes_frames")?,
        };
        // The group kernels' shared memory depends on the launch (plane group, seed radius), and
        // engines of other settings share these functions: allow the device's limit once.
        for f in [&k.hard, &k.wiener, &k.hard_frames, &k.wiener_frames, &k.wiener_match, &k.wiener_filter, &k.wiener_frames_match, &k.wiener_frames_filter, &k.bayes, &k.bayes_frames] {
            raw::allow_device_max_dynamic_shared(f, self.device.max_shared).map_err(backend_err)?;
        }
        self.kernels.insert(*v, k.clone());
        Ok(k)
    }

    /// The arguments every launch of one step of plane group `gi` shares (geometry, planes,
    /// thresholds, the rings); no frame in the window, no sums, no output yet.
    fn base_args(&self, launch: &Launch<'_>, plan: &Bm3dPlan, gi: usize, wiener: bool) -> Result<(Bm3dArgs, Bm3dVariant)> {
        let g = &plan.groups[gi];
        let v = self.variant.ok_or_else(|| Error::State("bm3d launch before configure".into()))?;
        let layout = self.layout.as_ref().ok_or_else(|| Error::State("bm3d launch before configure".into()))?;
        let s = &plan.settings;
        let patch = s.patch_size as usize;
        let (w, h) = self.plane_sizes[g.planes[0]];
        let (ew, eh) = extent(w, h, patch);
        let m = g.planes.len();
        let mut args = Bm3dArgs {
            ring: launch.ring.frames.ptr,
            frame_bytes: layout.frame_bytes as u64,
            basic: self.basic.as_ref().map(|b| b.ptr).unwrap_or(0),
            basic_floats: self.basic_floats as u64,
            slot: [-1; FRAME_CODES],
            sum_slot: [-1; FRAME_CODES],
            n_planes: m as i32,
            w: w as i32,
            h: h as i32,
            ew: ew as i32,
            eh: eh as i32,
            refs_x: reference_corners(ew, patch, s.block_step_of(wiener) as usize).len() as i32,
            refs_y: reference_corners(eh, patch, s.block_step_of(wiener) as usize).len() as i32,
            block_step: s.block_step_of(wiener) as i32,
            radius: s.search_radius as i32,
            n_seeds: s.seeds_of(wiener) as i32,
            seed_radius: s.seed_radius as i32,
            tau_ssd: (if wiener { s.wiener_threshold } else { s.threshold }) * (m * patch * patch) as f32,
            lambda: s.lambda,
            inv_scale: 1.0 / plan.scale_to_8bit,
            scale: plan.scale_to_8bit,
            max_value: plan.max_value,
            ref_code: FRAME_CODE_BIAS,
            group_floats: v.group_floats(wiener, m, s.seed_radius) as i32,
            ..Default::default()
        };
        for (j, &p) in g.planes.iter().enumerate() {
            args.plane_bytes[j] = layout.offsets[p] as u64;
            args.basic_plane[j] = self.basic_offsets[p];
            args.sigma[j] = g.sigmas[j];
        }
        Ok((args, v))
    }

    /// Queues the group kernel of `args` (one warp per reference patch of the frame at
    /// `args.ref_code`); `frames`: per-frame groups (the members' own frames' sums).
    fn launch_groups(&mut self, launch: &Launch<'_>, v: &Bm3dVariant, wiener: bool, frames: bool, args: &mut Bm3dArgs) -> Result<()> {
        let k = self.kernels(v)?;
        let grid = (((args.refs_x * args.refs_y) as u32).div_ceil(WARPS), 1, 1);
        let apart = self.group_members.as_ref().filter(|_| wiener);
        args.group_members = apart.map_or(0, |b| b.ptr);
        if apart.is_some() {
            // The Wiener step's block matching first, in a launch of its own (shared memory for
            // the staged squares only); the filtering launch below reads its groups.
            let f = if frames { &k.wiener_frames_match } else { &k.wiener_match };
            let floats = args.group_floats;
            args.group_floats = v.match_floats(args.n_planes as usize, args.seed_radius as u32) as i32;
            let smem = WARPS as usize * 4 * args.group_floats as usize;
            // SAFETY: as below; the launch writes the groups of its reference patches into the
            // group buffer (sized for the largest plane group's reference patches at configure).
            let launched = unsafe { raw::launch(f, grid, WARPS * 32, smem as u32, launch.compute, args) };
            args.group_floats = floats;
            launched.map_err(|e| Error::Backend(e.ctx("bm3d wiener block matching")))?;
        }
        let f = match (wiener, frames, apart.is_some()) {
            (false, false, _) => &k.hard,
            (true, false, false) => &k.wiener,
            (true, false, true) => &k.wiener_filter,
            (false, true, _) => &k.hard_frames,
            (true, true, false) => &k.wiener_frames,
            (true, true, true) => &k.wiener_frames_filter,
        };
        let smem = WARPS as usize * 4 * args.group_floats as usize;
        let bayes = self.bayes.as_ref().filter(|_| wiener);
        (args.bayes_members, args.bayes_weight) = bayes.map_or((0, 0), |b| (b.members.ptr, b.weight.ptr));
        // SAFETY: the argument block matches Bm3dArgs (size checked at compile time); every
        // address in it lies in the ring, the basic ring, the sums or the output frame, and
        // the kernels read planes within (w, h) and sums within the extent; `ref_code` names
        // a frame of the window (its slot is set) and every `sum_slot` set names sums of the
        // buffer at `num` / `wimg`; the Bayesian buffers, where set, hold every reference patch
        // of the launch (sized for the largest plane group at configure).
        unsafe { raw::launch(f, grid, WARPS * 32, smem as u32, launch.compute, args) }.map_err(|e| Error::Backend(e.ctx(format!("bm3d {}", if wiener { "wiener" } else { "hard" }))))?;
        if bayes.is_some() {
            let f = if frames { &k.bayes_frames } else { &k.bayes };
            let smem = WARPS as usize * 4 * v.bayes_floats();
            // SAFETY: as above; the launch reads the groups and weights the Wiener launch just
            // queued on this stream wrote, and the same planes and sums.
            unsafe { raw::launch(f, grid, WARPS * 32, smem as u32, launch.compute, args) }.map_err(|e| Error::Backend(e.ctx("bm3d bayes")))?;
        }
        Ok(())
    }

    /// Motion seeds: queues the coarse motion of plane group `gi` between each two neighbouring
    /// frames of `window` (the job's dt, ascending) that the cache does not hold yet (cells once
    /// per frame, fields once per pair and direction), and points `args` at the fields; without
    /// motion seeds, or for a plane smaller than a block, leaves `args.motion` null.
    fn prepare_motion(&mut self, launch: &Launch<'_>, plan: &Bm3dPlan, gi: usize, job: &Job, window: &[i32], args: &mut Bm3dArgs) -> Result<()> {
        let Some(dims) = self.motion.as_ref().map(|m| m.dims[gi]) else { return Ok(()) };
        let ((cw, ch), (bw, bh)) = dims;
        if bw == 0 || bh == 0 {
            return Ok(());
        }
        let v = self.variant.ok_or_else(|| Error::State("bm3d launch before configure".into()))?;
        let k = self.kernels(&v)?;
        let layout = self.layout.as_ref().ok_or_else(|| Error::State("bm3d launch before configure".into()))?;
        let plane = self.plane_sizes[plan.groups[gi].planes[0]];
        let (plane_offset, frame_bytes) = (layout.offsets[plan.groups[gi].planes[0]] as u64, layout.frame_bytes as u64);
        let m = self.motion.as_mut().expect("checked above");
        let groups = m.dims.len();
        let base = MotionArgs { w: plane.0 as i32, h: plane.1 as i32, cw: cw as i32, ch: ch as i32, bw: bw as i32, bh: bh as i32, ..Default::default() };
        for pair in window.windows(2).filter(|p| p[1] - p[0] == 1) {
            for &d in pair {
                let (slot, id) = (slot_of(job, d), frame_id(job, d));
                if m.cell_frames[slot * groups + gi] == Some(id) {
                    continue;
                }
                let mut a = MotionArgs { plane: launch.ring.frames.ptr + slot as u64 * frame_bytes + plane_offset, cells: m.cells_at(slot, gi), ..base };
                // SAFETY: `plane` is the group's first plane of a ring frame (h x w samples of the
                // variant's sample size); `cells` is this slot's entry, cw x ch u32 <= cells_per.
                unsafe { raw::launch(&k.motion_cells, (((cw * ch) as u32).div_ceil(MOTION_THREADS), 1, 1), MOTION_THREADS, 0, launch.compute, &mut a) }
                    .map_err(|e| Error::Backend(e.ctx("bm3d motion cells")))?;
                m.cell_frames[slot * groups + gi] = Some(id);
            }
            for (from, to, forward) in [(pair[0], pair[1], true), (pair[1], pair[0], false)] {
                let (slot, ids) = (slot_of(job, from), (frame_id(job, from), frame_id(job, to)));
                let entry = (slot * groups + gi) * 2 + forward as usize;
                if m.field_frames[entry] == Some(ids) {
                    continue;
                }
                let mut a = MotionArgs { from: m.cells_at(slot, gi), to: m.cells_at(slot_of(job, to), gi), field: m.fields.ptr + 4 * (entry * m.blocks_per * 2) as u64, ..base };
                // SAFETY: both cell entries were written above (same stream, ordered before); the
                // field entry holds bw x bh x 2 ints <= blocks_per x 2.
                unsafe { raw::launch(&k.motion_field, (((bw * bh) as u32).div_ceil(MOTION_THREADS), 1, 1), MOTION_THREADS, 0, launch.compute, &mut a) }
                    .map_err(|e| Error::Backend(e.ctx("bm3d motion field")))?;
                m.field_frames[entry] = Some(ids);
            }
        }
        args.motion = m.fields.ptr + 4 * (gi * 2 * m.blocks_per * 2) as u64;
        args.motion_stride = m.slot_ints() as u64;
        args.motion_dir = (m.blocks_per * 2) as i32;
        (args.motion_bw, args.motion_bh) = (bw as i32, bh as i32);
        Ok(())
    }

    /// Queues the finish kernel of `args`: the sums at `num` / `wimg` into `basic_out` or `out`.
    fn launch_finish(&mut self, launch: &Launch<'_>, v: &Bm3dVariant, args: &mut Bm3dArgs) -> Result<()> {
        let k = self.kernels(v)?;
        let grid = ((args.w as u32).div_ceil(FINISH_W), (args.h as u32).div_ceil(FINISH_H), args.n_planes as u32);
        // SAFETY: as launch_groups; the finish kernel reads the sums of one frame and writes
        // the planes of the group within (w, h).
        unsafe { raw::launch(&k.finish, grid, FINISH_W * FINISH_H, 0, launch.compute, args) }.map_err(|e| Error::Backend(e.ctx("bm3d finish")))
    }

    /// Device memory for own-frame searches of `slots` frames (one slot's layout each), with the
    /// search kernels allowed the shared memory the plan's search radius needs.
    fn search_cache(&mut self, plan: &Bm3dPlan, slots: usize) -> Result<SearchCache> {
        let s = &plan.settings;
        let v = self.variant.ok_or_else(|| Error::State("bm3d search cache before configure".into()))?;
        let smem_floats = search_floats(s.search_radius, s.patch_size);
        let bytes = WARPS as usize * 4 * smem_floats;
        if bytes > self.device.max_shared {
            return Err(Error::Unsupported(format!("bm3d search radius {} needs {bytes} bytes of shared memory per block; {} has {}", s.search_radius, self.device.name, self.device.max_shared)));
        }
        let kernels = self.kernels(&v)?;
        for f in [&kernels.search_hard, &kernels.search_wiener, &kernels.search_tc_hard, &kernels.search_tc_wiener] {
            raw::allow_device_max_dynamic_shared(f, self.device.max_shared).map_err(backend_err)?;
        }
        let (slot_keys, offsets) = search_cache_layout(plan, &self.plane_sizes);
        let buffer = DeviceBuffer::new(&self.device.ctx, 8 * slot_keys * slots).map_err(backend_err)?;
        Ok(SearchCache { buffer, slot_keys, offsets, frames: vec![None; slots * plan.groups.len() * 2], smem_floats })
    }

    /// Whether the own-frame search may run on tensor cores for `plan` (switched on, compute
    /// capability 8.0 and later, 8x8 patches); each launch then checks its planes and layout.
    fn tensor_search_possible(&self, plan: &Bm3dPlan) -> bool {
        self.tensor_cores_for(plan.settings.patch_size)
    }

    /// The tensor-core search switched on, a device that has it, and patches of `patch` it takes.
    fn tensor_cores_for(&self, patch: u32) -> bool {
        self.options.tensor_search && self.device.compute_capability.0 >= 8 && patch == 8
    }

    /// Shared bytes of the tensor-core search for this launch, or None where it does not apply:
    /// switched off, a device before compute capability 8.0, patches other than 8x8, planes
    /// smaller than a patch (the border rule), or a layout beyond the device's shared memory.
    fn tensor_search_bytes(&self, v: &Bm3dVariant, wiener: bool, args: &Bm3dArgs) -> Option<usize> {
        let usable = self.tensor_cores_for(v.patch) && args.w >= 8 && args.h >= 8;
        let bytes = search_tc_bytes(args.radius as u32, args.block_step as u32, wiener || v.sample_bytes != 1);
        (usable && bytes <= self.device.max_shared).then_some(bytes)
    }

    /// Queues the own-frame search of every reference patch of `args` into the cache entry at
    /// `args.cache` (kernels/bm3d/search.cu); `smem_floats`: the cache's shared floats per warp.
    fn launch_search(&mut self, launch: &Launch<'_>, v: &Bm3dVariant, wiener: bool, smem_floats: usize, args: &mut Bm3dArgs) -> Result<()> {
        let k = self.kernels(v)?;
        args.search_floats = smem_floats as i32;
        if let Some(bytes) = self.tensor_search_bytes(v, wiener, args) {
            let f = if wiener { &k.search_tc_wiener } else { &k.search_tc_hard };
            let tiles = (args.refs_x as u32).div_ceil(SEARCH_TC_SIDE) * (args.refs_y as u32).div_ceil(SEARCH_TC_SIDE);
            // SAFETY: as below; the kernel reads the tile's samples within the plane (w, h at
            // least 8: checked) and `bytes` is its layout's size for these arguments.
            return unsafe { raw::launch(f, (tiles, 1, 1), SEARCH_TC_SIDE * SEARCH_TC_SIDE * 32, bytes as u32, launch.compute, args) }.map_err(|e| Error::Backend(e.ctx("bm3d search (tensor cores)")));
        }
        let f = if wiener { &k.search_wiener } else { &k.search_hard };
        let grid = (((args.refs_x * args.refs_y) as u32).div_ceil(WARPS), 1, 1);
        // SAFETY: as launch_groups; the search kernel writes the keys of every reference patch
        // into the entry at `args.cache`, which lies in the cache buffer (sized in configure for
        // this plan's groups and steps).
        unsafe { raw::launch(f, grid, WARPS * 32, (WARPS as usize * 4 * smem_floats) as u32, launch.compute, args) }.map_err(|e| Error::Backend(e.ctx("bm3d search")))
    }

    /// Queues one step of plane group `g` for the frame at `center` (dt) of `job`: into the basic
    /// ring at `basic_slot`, or into `out` (the output frame).
    #[allow(clippy::too_many_arguments)]
    fn step(&mut self, launch: &Launch<'_>, plan: &Bm3dPlan, gi: usize, job: &Job, center: i32, wiener: bool, basic_slot: Option<usize>, out: Option<&OutputTarget>) -> Result<()> {
        let (mut args, v) = self.base_args(launch, plan, gi, wiener)?;
        let dts = job_dts(job);
        let window = step_window(&dts, center, plan.past, plan.future);
        for &dt in &window {
            args.slot[(dt - center + FRAME_CODE_BIAS) as usize] = slot_of(job, dt) as i32;
        }
        // Only the target's members are aggregated, into the one set of sums.
        let missing = || Error::State("bm3d: no sums (configured for per-frame groups)".into());
        args.num = self.num.as_ref().ok_or_else(missing)?.ptr;
        args.wimg = self.wimg.as_ref().ok_or_else(missing)?.ptr;
        args.out = out.map(|o| o.frame).unwrap_or(0);
        if let Some(bs) = basic_slot {
            args.basic_out = self.basic.as_ref().expect("two steps").ptr + 4 * (bs * self.basic_floats) as u64;
        }
        let stream = launch.compute;
        let sum_bytes = 8 * (args.n_planes * args.ew * args.eh) as usize;
        // SAFETY: both ranges lie in the sum buffers (sized for the largest group); the previous
        // step's kernels that read them are ordered before on this stream.
        unsafe {
            raw::memset(args.num, 0, sum_bytes, stream).map_err(backend_err)?;
            raw::memset(args.wimg, 0, sum_bytes, stream).map_err(backend_err)?;
        }
        self.prepare_motion(launch, plan, gi, job, &window, &mut args)?;
        let relative: Vec<i32> = window.iter().map(|&dt| dt - center).collect();
        // Every reference frame is grouped over the whole window here (per-frame groups take
        // `group_frame`).
        let refs: Vec<i32> = reference_dts(&relative, plan).into_iter().map(|(r, _)| r).collect();
        // A window of one frame reuses nothing: its group kernels search inline (faster there
        // than the f32 search kernel), unless the search runs on tensor cores.
        let keep_searches = refs.len() > 1;
        let tensor = self.tensor_search_bytes(&v, wiener, &args).is_some();
        for rdt in refs {
            args.ref_code = rdt + FRAME_CODE_BIAS;
            if let Some(cache) = self.search.as_ref().filter(|_| tensor && !plan.settings.window_references) {
                // The target's own search into the one scratch entry, read by the group launch
                // that follows on the same stream.
                args.cache = cache.buffer.ptr + 8 * cache.offsets[2 * gi + wiener as usize] as u64;
                let smem_floats = cache.smem_floats;
                self.launch_search(launch, &v, wiener, smem_floats, &mut args)?;
            } else if let Some(cache) = self.search.as_mut().filter(|_| keep_searches || tensor) {
                // The reference frame's own search: kept from an earlier job, or made now.
                let frame_slot = slot_of(job, center + rdt);
                let entry = 2 * gi + wiener as usize;
                let at = frame_slot * 2 * plan.groups.len() + entry;
                args.cache = cache.buffer.ptr + 8 * (frame_slot * cache.slot_keys + cache.offsets[entry]) as u64;
                let frame = frame_id(job, center + rdt);
                if cache.frames[at] != Some(frame) {
                    cache.frames[at] = None;
                    let smem_floats = cache.smem_floats;
                    self.launch_search(launch, &v, wiener, smem_floats, &mut args)?;
                    let cache = self.search.as_mut().expect("checked above");
                    cache.frames[at] = Some(frame);
                }
            }
            self.launch_groups(launch, &v, wiener, false, &mut args)?;
        }
        self.launch_finish(launch, &v, &mut args)
    }

    /// Per-frame groups: the job's frames computed in the order of [`frame_group_order`] (as
    /// src/bm3d/cpu.rs `compute_frame_groups` does): every frame's reference patches grouped once per step and each
    /// member added to its own frame's sums on the device ([`FrameSums`]); a basic estimate or
    /// the output is finished once every frame whose groups reach it is grouped.
    fn frame_groups(&mut self, launch: &Launch<'_>, plan: &Bm3dPlan, job: &Job, out: &OutputTarget) -> Result<()> {
        let dts = job_dts(job);
        let id = |dt: i32| frame_id(job, dt);
        let ops = frame_group_order(&dts, plan, |u| self.basic_keys[slot_of(job, u)] == Some(id(u)));
        for op in ops {
            match op {
                FrameGroupOp::Group { r, step, first } => self.group_frame(launch, plan, job, &dts, r, step, first)?,
                FrameGroupOp::Finish { u, step } if step == 0 && plan.two_step() => {
                    let slot = slot_of(job, u);
                    self.basic_keys[slot] = None;
                    self.finish_frame(launch, plan, job, u, step, None)?;
                    self.basic_keys[slot] = Some(id(u));
                }
                FrameGroupOp::Finish { u, step } => self.finish_frame(launch, plan, job, u, step, Some(out))?,
            }
        }
        Ok(())
    }

    /// Groups the reference patches of the job's frame `r` in `step` over its window
    /// (`r - past ..= r + future`), once per frame and step; every member goes to its frame's
    /// sums (which the frame's first group clears), except members of frames whose estimate of
    /// this step is made already or never will be (before `first`, the step's first frame this
    /// job finishes): the definition adds to them too, but nothing reads those sums.
    #[allow(clippy::too_many_arguments)]
    fn group_frame(&mut self, launch: &Launch<'_>, plan: &Bm3dPlan, job: &Job, dts: &[i32], r: i32, step: usize, first: i32) -> Result<()> {
        let id = |dt: i32| frame_id(job, dt);
        let basic_step = step == 0 && plan.two_step();
        let sums = self.frame_sums.as_mut().ok_or_else(|| Error::State("bm3d frame groups before configure".into()))?;
        let grouped = step * sums.ring_slots + slot_of(job, r);
        if sums.grouped[grouped] == Some(id(r)) {
            return Ok(());
        }
        let window: Vec<i32> = dts.iter().copied().filter(|&d| d >= r - plan.past as i32 && d <= r + plan.future as i32).collect();
        let mut entries = Vec::new();
        for &d in &window {
            let done = basic_step && self.basic_keys[slot_of(job, d)] == Some(id(d));
            if d < first || done {
                continue;
            }
            let e = sums.entry(step, id(d));
            if sums.owners[e] != Some(id(d)) {
                let bytes = 8 * sums.frame_elems;
                let at = 8 * (e * sums.frame_elems) as u64;
                // SAFETY: the entry lies in both buffers; the kernels that used it for an earlier
                // frame are ordered before on this stream.
                unsafe {
                    raw::memset(sums.num.ptr + at, 0, bytes, launch.compute).map_err(backend_err)?;
                    raw::memset(sums.wimg.ptr + at, 0, bytes, launch.compute).map_err(backend_err)?;
                }
                sums.owners[e] = Some(id(d));
            }
            entries.push((d, e));
        }
        let (num, wimg, stride, offsets) = (sums.num.ptr, sums.wimg.ptr, sums.frame_elems, sums.group_offsets.clone());
        for (gi, &offset) in offsets.iter().enumerate() {
            let (mut args, v) = self.base_args(launch, plan, gi, step == 1)?;
            // Frame codes relative to r: the groups of r are the same whichever job makes them.
            for &d in &window {
                args.slot[(d - r + FRAME_CODE_BIAS) as usize] = slot_of(job, d) as i32;
            }
            for &(d, e) in &entries {
                args.sum_slot[(d - r + FRAME_CODE_BIAS) as usize] = e as i32;
            }
            let at = 8 * offset as u64;
            (args.num, args.wimg, args.sum_stride) = (num + at, wimg + at, stride as u64);
            self.prepare_motion(launch, plan, gi, job, &window, &mut args)?;
            if let Some(cache) = self.search.as_ref().filter(|_| window.len() > 1 || self.tensor_search_bytes(&v, step == 1, &args).is_some()) {
                // The own-frame search into the scratch entry, read by the group launch that
                // follows on the same stream.
                args.cache = cache.buffer.ptr + 8 * cache.offsets[2 * gi + step] as u64;
                let smem_floats = cache.smem_floats;
                self.launch_search(launch, &v, step == 1, smem_floats, &mut args)?;
            }
            self.launch_groups(launch, &v, step == 1, true, &mut args)?;
        }
        self.frame_sums.as_mut().expect("checked above").grouped[grouped] = Some(id(r));
        Ok(())
    }

    /// The job's frame `u` in `step` from its sums: the basic estimate into its ring slot
    /// (`out` None), or the output; the sums are released.
    fn finish_frame(&mut self, launch: &Launch<'_>, plan: &Bm3dPlan, job: &Job, u: i32, step: usize, out: Option<&OutputTarget>) -> Result<()> {
        let id = frame_id(job, u);
        let slot = slot_of(job, u);
        let sums = self.frame_sums.as_mut().ok_or_else(|| Error::State("bm3d frame groups before configure".into()))?;
        let e = sums.entry(step, id);
        if sums.owners[e] != Some(id) {
            return Err(Error::State("bm3d frame groups: no sums for a frame to finish".into()));
        }
        sums.owners[e] = None;
        let (num, wimg, at, offsets) = (sums.num.ptr, sums.wimg.ptr, e * sums.frame_elems, sums.group_offsets.clone());
        for (gi, &offset) in offsets.iter().enumerate() {
            let (mut args, v) = self.base_args(launch, plan, gi, step == 1)?;
            let bytes = 8 * (at + offset) as u64;
            (args.num, args.wimg) = (num + bytes, wimg + bytes);
            match out {
                Some(o) => args.out = o.frame,
                None => args.basic_out = self.basic.as_ref().expect("two steps").ptr + 4 * (slot * self.basic_floats) as u64,
            }
            self.launch_finish(launch, &v, &mut args)?;
        }
        Ok(())
    }
}

impl CudaAlgorithm for CudaBm3d {
    fn describe(&self) -> String {
        "BM3D".into()
    }

    fn configure(&mut self, device: &DeviceInfo, geometry: &Geometry, layout: &FrameLayout, plan: &Plan, ring_slots: usize) -> Result<()> {
        let plan = plan.bm3d("the CUDA BM3D implementation")?;
        let v = Bm3dVariant::for_plan(plan, geometry.bytes_per_sample);
        self.kernels(&v)?;
        for (g, wiener) in plan.groups.iter().flat_map(|g| [(g, false), (g, true)]) {
            let smem = v.smem_bytes(wiener, g.planes.len(), plan.settings.seed_radius);
            if smem > device.max_shared {
                return Err(Error::Unsupported(format!(
                    "bm3d groups of {} with seed radius {} need {smem} bytes of shared memory per block; {} has {}",
                    if wiener { v.nmax_wiener } else { v.nmax_hard },
                    plan.settings.seed_radius,
                    device.name,
                    device.max_shared
                )));
            }
        }
        self.variant = Some(v);
        self.layout = Some(layout.clone());
        self.plane_sizes = geometry.planes.iter().map(|p| (p.width, p.height)).collect();
        let k = plan.settings.patch_size as usize;
        // Samples of each plane group's extents (its planes together).
        let group_elems: Vec<usize> = plan
            .groups
            .iter()
            .map(|g| {
                let (w, h) = self.plane_sizes[g.planes[0]];
                let (ew, eh) = extent(w, h, k);
                g.planes.len() * ew * eh
            })
            .collect();
        let ctx = &device.ctx;
        self.basic_offsets.clear();
        let mut at = 0u64;
        for &(w, h) in &self.plane_sizes {
            self.basic_offsets.push(at);
            at += (w * h) as u64;
        }
        self.basic_floats = at as usize;
        self.basic = if plan.two_step() { Some(DeviceBuffer::new(ctx, 4 * self.basic_floats * ring_slots).map_err(backend_err)?) } else { None };
        self.basic_keys = vec![None; ring_slots];
        (self.num, self.wimg, self.search, self.frame_sums) = (None, None, None, None);
        self.motion = if plan.settings.motion { Some(MotionCache::new(ctx, plan, &self.plane_sizes, ring_slots)?) } else { None };
        self.bayes = None;
        let most_refs = plan
            .groups
            .iter()
            .map(|g| {
                let (ew, eh) = extent(self.plane_sizes[g.planes[0]].0, self.plane_sizes[g.planes[0]].1, k);
                let step = plan.settings.block_step as usize;
                reference_corners(ew, k, step).len() * reference_corners(eh, k, step).len()
            })
            .max()
            .unwrap_or(1);
        // Apart only for Wiener groups of 32, whose one launch runs 4 blocks a SM (their group
        // buffer limited it when this was measured, runs 180-181; 128 registers do since runs
        // 182-187, not measured one launch against apart again); with smaller groups the extra
        // launch cost (`normal` spatial -18%, run 180).
        let apart = self.options.wiener_match_apart && plan.two_step() && v.nmax_wiener >= 32;
        self.group_members = if apart { Some(DeviceBuffer::new(ctx, 4 * most_refs * v.bayes_member_ints()).map_err(backend_err)?) } else { None };
        if plan.settings.bayes && plan.two_step() {
            let smem = WARPS as usize * 4 * v.bayes_floats();
            if smem > device.max_shared {
                return Err(Error::Unsupported(format!(
                    "the bm3d Bayesian estimate with groups of {} needs {smem} bytes of shared memory per block; {} has {}",
                    v.nmax_wiener, device.name, device.max_shared
                )));
            }
            let members = DeviceBuffer::new(ctx, 4 * most_refs * v.bayes_member_ints()).map_err(backend_err)?;
            let weight = DeviceBuffer::new(ctx, 4 * most_refs * MAX_PLANES).map_err(backend_err)?;
            self.bayes = Some(BayesBuffers { members, weight });
        }
        if plan.settings.frame_groups {
            // Every frame's sums while groups are added to them; the own-frame search of each
            // group launch goes to one scratch entry (each frame is grouped once per step).
            let group_offsets: Vec<usize> = group_elems.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
            let frame_elems = group_elems.iter().sum::<usize>();
            let steps = plan.settings.steps as usize;
            let per_step = (plan.past + plan.future + 1) as usize;
            let entries = steps * per_step;
            let num = DeviceBuffer::new(ctx, 8 * frame_elems * entries).map_err(backend_err)?;
            let wimg = DeviceBuffer::new(ctx, 8 * frame_elems * entries).map_err(backend_err)?;
            self.frame_sums = Some(FrameSums { num, wimg, frame_elems, group_offsets, per_step, owners: vec![None; entries], grouped: vec![None; steps * ring_slots], ring_slots });
            self.search = Some(self.search_cache(plan, 1)?);
        } else {
            // One set of sums, the largest plane group's, cleared by every step.
            let sum_floats = group_elems.iter().copied().max().unwrap_or(1);
            self.num = Some(DeviceBuffer::new(ctx, 8 * sum_floats).map_err(backend_err)?);
            self.wimg = Some(DeviceBuffer::new(ctx, 8 * sum_floats).map_err(backend_err)?);
            if plan.settings.window_references {
                self.search = Some(self.search_cache(plan, ring_slots)?);
            } else if self.tensor_search_possible(plan) {
                // The own-frame search on tensor cores, into one scratch entry that every step's
                // group launch reads.
                self.search = Some(self.search_cache(plan, 1)?);
            }
        }
        Ok(())
    }

    fn enqueue<'a>(&'a mut self, launch: &Launch<'a>, jobs: &[Job], plan: &Plan) -> Result<&'a Stream> {
        let plan = plan.bm3d("the CUDA BM3D implementation")?;
        if self.basic_keys.len() != launch.ring.slots {
            return Err(Error::State("bm3d: ring size differs from the configured one".into()));
        }
        for (job, out) in jobs.iter().zip(launch.outputs) {
            if plan.settings.frame_groups {
                self.frame_groups(launch, plan, job, out)?;
                continue;
            }
            let dts = job_dts(job);
            if plan.two_step() {
                for dt in basics_to_compute(&dts, plan) {
                    let slot = slot_of(job, dt);
                    let key = frame_id(job, dt);
                    if self.basic_keys[slot] == Some(key) {
                        continue;
                    }
                    self.basic_keys[slot] = None;
                    for gi in 0..plan.groups.len() {
                        self.step(launch, plan, gi, job, dt, false, Some(slot), None)?;
                    }
                    self.basic_keys[slot] = Some(key);
                }
            }
            for gi in 0..plan.groups.len() {
                self.step(launch, plan, gi, job, 0, plan.two_step(), None, Some(out))?;
            }
        }
        Ok(launch.compute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Algorithm, Bm3dParams, Bm3dProfile, Params};
    use crate::{PixelFormat, VideoInfo};

    fn layout(steps: u32) -> (usize, Vec<usize>) {
        let info = VideoInfo::new(PixelFormat::I420, 1920, 1080).unwrap();
        let geometry = Geometry::from_video_info(&info);
        let params = Params {
            algorithm: Algorithm::Bm3d,
            sigma: Some(20.0),
            temporal_past: 1,
            temporal_future: 1,
            bm3d: Bm3dParams { profile: Bm3dProfile::High, steps: Some(steps), ..Default::default() },
            ..Params::default()
        };
        let plan = Plan::new(&geometry, &params).unwrap();
        let sizes: Vec<(usize, usize)> = geometry.planes.iter().map(|p| (p.width, p.height)).collect();
        search_cache_layout(plan.bm3d("test").unwrap(), &sizes)
    }

    /// The tensor-core search's block fits an H100 / H200 block's opt-in shared memory (227 KB)
    /// at `high`'s radius 20 with block step 3 (so `high` takes it), and not at the largest radius
    /// (24), which falls back to the f32 search (src/bm3d/cuda.rs `tensor_search_bytes`).
    #[test]
    fn tensor_search_layout_fits_high_but_not_the_largest_radius() {
        let limit = 227 * 1024;
        assert!(search_tc_bytes(20, 3, true) <= limit, "{}", search_tc_bytes(20, 3, true));
        assert!(search_tc_bytes(8, 4, true) <= limit / 2, "two blocks a SM at the candidate default's radius 8");
        assert!(search_tc_bytes(crate::params::BM3D_MAX_SEARCH_RADIUS, 3, false) > limit);
    }

    /// The search cache's size as docs/design.md states it (1080p I420, `high`: about 124 MB a
    /// ring slot), and its entries laid out one after the other.
    #[test]
    fn search_cache_of_a_1080p_high_stream() {
        let (keys, offsets) = layout(2);
        // Luma: 639 x 359 reference patches, chroma (U and V together) 319 x 179; keys per
        // patch: 16 + 3 (hard), 32 + 3 (Wiener).
        let (luma, chroma) = (639 * 359, 319 * 179);
        assert_eq!(offsets, vec![0, luma * 19, luma * 54, luma * 54 + chroma * 19]);
        assert_eq!(keys, (luma + chroma) * 54);
        assert_eq!(8 * keys, 123_768_864);
        // One step: no Wiener entries.
        let (keys1, offsets1) = layout(1);
        assert_eq!(keys1, (luma + chroma) * 19);
        assert_eq!(offsets1, vec![0, luma * 19, luma * 19, luma * 19 + chroma * 19]);
    }

    /// A warp's shared memory holds the group or, while the group is
    /// searched, a predictive-search square of every plane, whichever is larger; warps stay
    /// 16-byte aligned (kernels/bm3d/group.cu reads the reference patch as vectors).
    #[test]
    fn group_kernels_shared_memory_per_warp() {
        let high = Bm3dVariant { patch: 8, nmax_hard: 16, nmax_wiener: 32, seeds: 3, sample_bytes: 1 };
        let head = 3 * 64 + SELECT_QUEUE_FLOATS + 8;
        // `high` (seed radius 4: squares of 16 x 16 samples): the groups are larger.
        assert_eq!(high.group_floats(false, 1, 4), (head + 4 * 16 + 16 * 64).next_multiple_of(4));
        assert_eq!(high.group_floats(true, 2, 4), (head + 4 * 32 + 32 * 64).next_multiple_of(4));
        // Seed radius 8 with three planes (3 x 24 x 24 samples) outgrows the hard group of 16.
        assert_eq!(high.group_floats(false, 3, 8), (head + 4 * 16 + 3 * 24 * 24).next_multiple_of(4));
        // The Wiener step's block-matching launch keeps the layout but only the staged square:
        // under half of the one launch's shared memory (what it runs apart for), 16-byte aligned.
        assert_eq!(high.match_floats(2, 4), (head + 4 * 32 + 2 * 16 * 16).next_multiple_of(4));
        assert!(2 * high.match_floats(2, 4) < high.group_floats(true, 2, 4));
        let tiny = Bm3dVariant { patch: 4, nmax_hard: 1, nmax_wiener: 1, seeds: 1, sample_bytes: 2 };
        for (wiener, planes, radius) in [(false, 1, 0), (true, 3, 8), (false, 2, 3)] {
            let floats = tiny.group_floats(wiener, planes, radius);
            assert_eq!(floats % 4, 0);
            assert!(floats >= 3 * 16 + SELECT_QUEUE_FLOATS + 2 + 3 + planes * ((2 * radius + 4) as usize).pow(2));
            assert_eq!(tiny.smem_bytes(wiener, planes, radius), WARPS as usize * 4 * floats);
        }
    }
}
