//! Launch geometry, in one place: tile shape, shared memory, grid, the by-value argument block
//! and the weight constants. The shared-memory formula mirrors the constants at the top of
//! kernels/nlm/fused.cu; the kernel traps if the launch provides less than it needs.

use crate::nlm::{NlmPlan, WeightGroup};
use crate::params::Weighting;
use crate::planar::Geometry;

/// Columns whose weights a block computes (one warp across; its output columns less twice the
/// aggregation radius); fixed in the kernel.
pub const TILE_W: u32 = 32;
pub const MAX_FRAMES: usize = 16;
pub const MAX_BATCH: usize = 3;
pub const MAX_PLANES: usize = 3;

/// Block shape of the fused kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// Rows whose weights a block computes (a multiple of threads / 32; its output rows less twice
    /// the aggregation radius).
    pub tile_h: u32,
    /// Outputs per phase-1 run (divides 32).
    pub run_w: u32,
    /// Search offsets per round.
    pub dx_group: u32,
    pub threads: u32,
    /// Blocks per SM the compiler must leave registers for (`__launch_bounds__`, MIN_BLOCKS);
    /// 0 = automatic (`auto_min_blocks`, resolved by `KernelVariant::for_batch`).
    pub min_blocks: u32,
}

/// Shared memory per SM of an H100 / H200 (bytes), for callers without a device (the compile test).
pub const SHARED_PER_SM_H100: usize = 228 * 1024;
/// Shared memory the driver reserves per resident block (bytes, compute capability 8.0 and up).
const SHARED_RESERVED_PER_BLOCK: usize = 1024;
/// Most blocks per SM the automatic register cap plans for: 5 blocks of 128 threads leave 96
/// registers per thread, which every single-guide variant up to search radius 8 fits without
/// spilling (ptxas, sm_90); with 4 blocks (128 registers) R-live ran as fast, with 6 (80) R-knlm
/// spilled and ran no faster (H100 runs 28-29, docs/benchmarks.md).
const MAX_AUTO_MIN_BLOCKS: u32 = 5;

/// Threads of an exact-path block (kernels/nlm/exact.cu, EXACT_WARPS warps, each taking one
/// queued sample at a time).
pub const EXACT_THREADS: u32 = 128;

/// Blocks of an exact-path launch of the fused backend for `jobs` jobs (a grid-stride loop over
/// the device-side list): enough warps that every queued sample of a frame of real video has its
/// own (the pass's duration is one sample's latency); blocks without a sample end at once.
pub fn exact_grid(jobs: usize) -> (u32, u32, u32) {
    const EXACT_BLOCKS: u32 = 2112;
    ((EXACT_BLOCKS / jobs.max(1) as u32).max(132), 1, jobs as u32)
}

/// The register cap that lets as many blocks stay resident as shared memory allows: without one
/// ptxas gives the fused kernel 140-180 registers, i.e. 2-3 blocks per SM, and R-live ran 19%
/// slower than with 5.
pub fn auto_min_blocks(shared_bytes: usize, shared_per_sm: usize) -> u32 {
    ((shared_per_sm / (shared_bytes + SHARED_RESERVED_PER_BLOCK)) as u32).clamp(1, MAX_AUTO_MIN_BLOCKS)
}

impl TileConfig {
    /// The default shape for a group: phase 1 has about one run per thread, runs of 8 for one
    /// guide plane (4 when three guide planes must fit in registers); with patch-wise aggregation
    /// (radius r) at least 4 output rows beside the 2r rows of halo.
    pub fn choose(search_radius: u32, patch_radius: u32, aggregation_radius: u32, guides: u32, step_x: u32, step_y: u32) -> Self {
        let threads = 128;
        let tile_h = if step_y == 1 { ((32u32.saturating_sub(2 * patch_radius)) / 4 * 4).max(4) } else { 16 };
        let tile_h = tile_h.max((2 * aggregation_radius + 4).div_ceil(4) * 4);
        let run_w = if guides == 1 && step_x == 1 { 8 } else { 4 };
        let max_group = if guides == 1 { 7 } else { 4 };
        let offsets = 2 * search_radius + 1;
        let rounds = offsets.div_ceil(max_group);
        let dx_group = offsets.div_ceil(rounds);
        TileConfig { tile_h, run_w, dx_group, threads, min_blocks: 0 }
    }

    /// Parses "tile_h,run_w,dx_group\[,min_blocks\]" (benchmark sweeps: `NlmTuning::cuda_tile`).
    pub fn parse(s: &str) -> Option<Self> {
        let v: Vec<u32> = s.split(',').map(|x| x.trim().parse().ok()).collect::<Option<_>>()?;
        match v[..] {
            [tile_h, run_w, dx_group] => Some(TileConfig { tile_h, run_w, dx_group, threads: 128, min_blocks: 0 }),
            [tile_h, run_w, dx_group, min_blocks] => Some(TileConfig { tile_h, run_w, dx_group, threads: 128, min_blocks }),
            _ => None,
        }
    }

    /// Output samples of a block (across, down): the tile less the aggregation halo.
    pub fn output_tile(&self, aggregation_radius: u32) -> (u32, u32) {
        (TILE_W.saturating_sub(2 * aggregation_radius), self.tile_h.saturating_sub(2 * aggregation_radius))
    }

    pub fn is_valid(&self) -> bool {
        let groups = self.threads / TILE_W;
        self.threads % TILE_W == 0
            && groups > 0
            && self.tile_h > 0
            && self.tile_h <= 32 * groups
            && self.tile_h % groups == 0
            && self.run_w > 0
            && TILE_W % self.run_w == 0
            && self.dx_group > 0
            && self.min_blocks <= 32
    }

    /// Whether phase 1 can read its runs with 16-byte loads (kernels/nlm/fused.cu, VEC_LOADS):
    /// unit step, runs of a multiple of 4, one offset group or groups of a multiple of 4.
    pub fn vec_loads_possible(&self, search_radius: u32, step_x: u32) -> bool {
        let dx_groups = (2 * search_radius + 1).div_ceil(self.dx_group);
        step_x == 1 && self.run_w % 4 == 0 && (dx_groups == 1 || self.dx_group % 4 == 0)
    }

    /// Dynamic shared memory of one block, in bytes (kernels/nlm/fused.cu, SMEM_FLOATS);
    /// `staged_outputs`: output planes staged besides the guides (0 where the outputs are the
    /// guides, OUTPUTS_ARE_GUIDES); `vec_loads`: the layout of 16-byte phase-1 loads where they
    /// are possible.
    #[allow(clippy::too_many_arguments)]
    pub fn shared_bytes(&self, search_radius: u32, patch_radius: u32, guides: u32, staged_outputs: u32, step_x: u32, step_y: u32, vec_loads: bool) -> usize {
        let (a, s) = (search_radius as usize, patch_radius as usize);
        let (sx, sy) = (step_x as usize, step_y as usize);
        let (th, dxg) = (self.tile_h as usize, self.dx_group as usize);
        let tw = TILE_W as usize;
        let patch_d = 2 * s + 1;
        let dx_span = (2 * a + 1).div_ceil(dxg) * dxg;
        let guide_rows = sy * (th - 1) + patch_d;
        let h_floats = dxg * guide_rows * (tw + 4);
        // Pitches of the phase-1 arrays: odd for scalar loads, 12 mod 16 and wide enough for the
        // runs' rounded 16-byte reads where the kernel uses vector loads (VEC_LOADS, run_pitch).
        let run_w = self.run_w as usize;
        let dx_groups = dx_span / dxg;
        let vec_loads = vec_loads && self.vec_loads_possible(search_radius, step_x);
        let round4 = |n: usize| n.div_ceil(4) * 4;
        let run_pitch = |width: usize, read: usize| if vec_loads { (width.max(read) + 3) / 16 * 16 + 12 } else { width | 1 };
        let t_read = tw - run_w + round4(run_w - 1 + patch_d);
        let r_read = tw - run_w + (dx_groups - 1) * dxg + round4(run_w - 1 + dxg - 1 + patch_d);
        let t_pitch = run_pitch(sx * (tw - 1) + patch_d, t_read);
        let r_pitch = run_pitch(sx * (tw + dx_span - 2) + patch_d, r_read);
        let r_h = guide_rows + 2 * sy * a;
        let o_pitch = (tw + dx_span - 1) | 1;
        let o_h = th + 2 * a;
        let floats = h_floats + guides as usize * (guide_rows * t_pitch + r_h * r_pitch) + staged_outputs as usize * o_h * o_pitch;
        floats * 4
    }
}

/// One weight group's planes and weight constants (kernels/nlm/args.cuh, NlmGroup).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct NlmGroup {
    pub guide: [u64; MAX_PLANES],
    pub output: [u64; MAX_PLANES],
    pub k_dist: f32,
    pub k_bias: f32,
    pub h: f32,
    pub out_w: i32,
    pub out_h: i32,
    pub guide_w: i32,
    pub guide_h: i32,
    /// Fused launch: tiles per row of this group.
    pub tiles_x: i32,
    /// Fused launch: blockIdx.x of this group's first tile.
    pub first_block: i32,
    /// Fused launch: words from each exact list's start to this group's list.
    pub exact_offset: u32,
    /// Fused launch: this group's index in its exact launch.
    pub exact_group: i32,
    /// Fused launch: entries that list holds.
    pub exact_capacity: u32,
}

/// The kernel's by-value argument (kernels/nlm/args.cuh, NlmArgs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct NlmArgs {
    pub ring: u64,
    pub dst: u64,
    pub frame_bytes: u64,
    pub group: [NlmGroup; MAX_BATCH],
    pub slot: [i32; MAX_FRAMES],
    pub n_frames: i32,
    pub target: i32,
    pub out_w: i32,
    pub out_h: i32,
    pub guide_w: i32,
    pub guide_h: i32,
    pub wref: f32,
    pub smem_bytes: u32,
    pub distance_offset: f32,
    pub scale_to_8bit: f32,
    /// Device list of samples for the exact path: [count, entries...] (u64 each).
    pub exact: u64,
    pub exact_capacity: u64,
    /// Device table of `NlmJob`s of a batched launch; 0 for a single job (fields above).
    pub jobs: u64,
    /// Weight groups per job in the launch (gridDim.z = jobs x n_groups).
    pub n_groups: i32,
    /// Words from each exact list's start to this launch's part (one part per launch group).
    pub exact_offset: u32,
}

/// One job of a batched launch (kernels/nlm/args.cuh, NlmJob).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct NlmJob {
    pub dst: u64,
    pub exact: u64,
    pub slot: [i32; MAX_FRAMES],
    pub n_frames: i32,
    pub target: i32,
}

pub const NLM_ARGS_BYTES: usize = std::mem::size_of::<NlmArgs>();

/// The kernels' WEIGHTING constant.
pub fn weighting_define(w: Weighting) -> u32 {
    match w {
        Weighting::Welsch => 0,
        Weighting::Bisquare => 1,
    }
}

/// Weight constants of a group: the kernel computes welsch weights as
/// exp2(-max(dist * k_dist - k_bias, 0)) and bisquare as (sat(1 + k_bias - dist * k_dist))^2,
/// where dist is the plain sum of squared sample differences over all guide planes and patch
/// samples. That is NlmPlan::weight of the mean squared distance in 8-bit units.
pub fn weight_constants(plan: &NlmPlan, group: &WeightGroup) -> (f32, f32) {
    let patch = (2 * plan.patch_radius as usize + 1).pow(2);
    let norm = 1.0 / (group.guides.len() * patch) as f64;
    let scale = plan.scale_to_8bit as f64;
    let h2 = group.h as f64 * group.h as f64;
    let per_unit = norm / (scale * scale) / h2;
    let bias = plan.distance_offset as f64 / h2;
    match plan.weighting {
        Weighting::Welsch => ((per_unit * std::f64::consts::LOG2_E) as f32, (bias * std::f64::consts::LOG2_E) as f32),
        Weighting::Bisquare => (per_unit as f32, bias as f32),
    }
}

/// Weight groups of one shape, computed by one launch (blockIdx.z picks the group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Indices into the plan's groups.
    pub groups: Vec<usize>,
    pub guides: u32,
    pub outputs: u32,
    pub step_x: u32,
    pub step_y: u32,
    pub out_w: usize,
    pub out_h: usize,
    pub guide_w: usize,
    pub guide_h: usize,
    /// Every group's output planes are its guide planes, at step 1 (independent planes, joint
    /// RGB): the kernel reads the output tile from the staged guide window.
    pub outputs_are_guides: bool,
}

impl Batch {
    /// Tiles of one group: (across, down); `aggregation_radius` r: each tile writes its inner
    /// samples, r from its edges.
    pub fn tiles(&self, tile: &TileConfig, aggregation_radius: u32) -> (u32, u32) {
        let (w, h) = tile.output_tile(aggregation_radius);
        ((self.out_w as u32).div_ceil(w.max(1)), (self.out_h as u32).div_ceil(h.max(1)))
    }

    /// Shape of the fused kernel variant: batches with the same key can share a launch.
    fn shape(&self) -> (u32, u32, u32, u32, bool) {
        (self.guides, self.outputs, self.step_x, self.step_y, self.outputs_are_guides)
    }
}

/// Groups the batches into fused launches: batches of one kernel shape (plane counts and guide
/// step), whatever their plane sizes, share a launch while its groups fit (MAX_BATCH), so that
/// e.g. I420's luma and chroma tiles fill the GPU as one grid instead of two, each with a
/// partly idle last wave. Each batch keeps its own exact-path launch. `merge` false: one launch
/// per batch (`NlmTuning::merge_planes` off, for comparisons).
pub fn fused_launches(batches: &[Batch], merge: bool) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, b) in batches.iter().enumerate() {
        let groups = |l: &Vec<usize>| l.iter().map(|&j| batches[j].groups.len()).sum::<usize>();
        let fits = |l: &Vec<usize>| batches[l[0]].shape() == b.shape() && groups(l) + b.groups.len() <= MAX_BATCH;
        match out.iter_mut().find(|l| merge && fits(l)) {
            Some(l) => l.push(i),
            None => out.push(vec![i]),
        }
    }
    out
}

/// Splits the plan's groups into launches: groups with the same plane counts, guide step and
/// plane sizes share one launch (e.g. the U and V planes of I420 with independent chroma).
pub fn batches(geometry: &Geometry, plan: &NlmPlan) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    for (i, g) in plan.groups.iter().enumerate() {
        let o = geometry.planes[g.outputs[0]];
        let gp = geometry.planes[g.guides[0]];
        let b = Batch {
            groups: vec![i],
            guides: g.guides.len() as u32,
            outputs: g.outputs.len() as u32,
            step_x: g.guide_step_x as u32,
            step_y: g.guide_step_y as u32,
            out_w: o.width,
            out_h: o.height,
            guide_w: gp.width,
            guide_h: gp.height,
            outputs_are_guides: g.outputs == g.guides && g.guide_step_x == 1 && g.guide_step_y == 1,
        };
        let same = |x: &Batch| Batch { groups: vec![i], ..x.clone() } == b;
        match out.iter_mut().find(|x| x.groups.len() < MAX_BATCH && same(x)) {
            Some(x) => x.groups.push(i),
            None => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::VideoInfo;
    use crate::params::{ChromaMode, Params};

    #[test]
    fn args_block_has_the_kernels_size() {
        assert_eq!(NLM_ARGS_BYTES, 448);
        assert_eq!(std::mem::size_of::<NlmJob>(), 88);
        assert_eq!(std::mem::size_of::<NlmGroup>(), 96);
    }

    #[test]
    fn i420_chroma_planes_share_a_launch() {
        let g = Geometry::from_video_info(&VideoInfo::new(PixelFormat::I420, 64, 48).unwrap());
        let plan = NlmPlan::new(&g, &Params::default()).unwrap();
        let b = batches(&g, &plan);
        assert_eq!(b.iter().map(|b| b.groups.clone()).collect::<Vec<_>>(), vec![vec![0], vec![1, 2]]);
        assert_eq!(b[1].tiles(&TileConfig::choose(3, 2, 0, 1, 1, 1), 0), (1, 1));
        assert_eq!(b[0].tiles(&TileConfig::choose(3, 2, 0, 1, 1, 1), 0), (2, 2));
        // With aggregation radius 2 a 32 x 24 tile writes 28 x 20 samples: 64 x 48 luma takes 3 x 3.
        let t = TileConfig::choose(3, 3, 2, 1, 1, 1);
        assert_eq!((t.tile_h, t.output_tile(2)), (24, (28, 20)));
        assert_eq!(b[0].tiles(&t, 2), (3, 3));
        // Luma and chroma share one fused launch (three groups), or not when merging is off.
        assert_eq!(fused_launches(&b, true), vec![vec![0, 1]]);
        assert_eq!(fused_launches(&b, false), vec![vec![0], vec![1]]);
        let guided = NlmPlan::new(&g, &Params { chroma_mode: ChromaMode::LumaGuided, ..Params::default() }).unwrap();
        let b = batches(&g, &guided);
        assert_eq!((b[1].step_x, b[1].guides, b[1].outputs, b[1].guide_w), (2, 1, 2, 64));
        // Different shapes (luma-guided chroma: step 2, two outputs) keep separate launches.
        assert_eq!(fused_launches(&b, true), vec![vec![0], vec![1]]);
        // Luma denoises itself (its output tile is read from its guide window); guided chroma
        // reads the luma plane and writes two others.
        assert!(b[0].outputs_are_guides && !b[1].outputs_are_guides);
    }

    #[test]
    fn register_cap_follows_shared_memory() {
        let per_sm = SHARED_PER_SM_H100;
        // R-live's block (43.5 KB) leaves room for 5 per H100 SM, R-knlm's (34.8 KB) for 6: capped at 5.
        assert_eq!(auto_min_blocks(43_528, per_sm), 5);
        assert_eq!(auto_min_blocks(34_816, per_sm), 5);
        assert_eq!(auto_min_blocks(60_000, per_sm), 3);
        assert_eq!(auto_min_blocks(200_000, per_sm), 1);
        assert_eq!(auto_min_blocks(300_000, per_sm), 1, "at least one block");
        // A smaller SM (100 KB) gets a smaller cap for the same block.
        assert_eq!(auto_min_blocks(43_528, 100 * 1024), 2);
    }

    #[test]
    fn default_tiles_are_valid_and_fit_shared_memory() {
        for a in 0..=12 {
            for s in 0..=7 {
                for (g, sx, sy) in [(1, 1, 1), (3, 1, 1), (1, 2, 2), (1, 2, 1)] {
                    let t = TileConfig::choose(a, s, 0, g, sx, sy);
                    assert!(t.is_valid(), "{t:?}");
                    // Every aggregation radius (at most the patch radius) leaves output samples.
                    let t = TileConfig::choose(a, s, s, g, sx, sy);
                    let (ow, oh) = t.output_tile(s);
                    assert!(t.is_valid() && ow >= 4 && oh >= 4, "a={a} s={s}: {t:?}, {ow}x{oh}");
                    assert!(t.shared_bytes(a, s, g, 3, sx, sy, true) <= 227 * 1024, "a={a} s={s} r={s} g={g}: {t:?}");
                    assert!(t.shared_bytes(a, s, g, 3, sx, sy, true) <= 227 * 1024, "a={a} s={s} g={g}: {t:?}");
                }
            }
        }
        // R-live: phase 1 has exactly one run per thread.
        let t = TileConfig::choose(3, 2, 0, 1, 1, 1);
        assert_eq!((t.tile_h, t.run_w, t.dx_group), (28, 8, 7));
    }
}
