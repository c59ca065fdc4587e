//! Temporal non-local means: *what* the NLM filter computes, in every implementation.
//!
//! * [`plan`]: the parameters resolved against a stream's planes (weight groups, strengths) and
//!   the weight formula, shared by every implementation;
//! * [`reference`](mod@reference): the f64 definition, the oracle of the others (a host algorithm);
//! * [`cpu`]: the fast multithreaded f32 implementation (a host algorithm);
//! * [`cuda`]: the fused kernel with its exact f64 pass, and the multi-pass path (CUDA
//!   algorithms), with their kernels in `kernels/nlm/`.
//!
//! Where a frame is computed (threads, a GPU's ring and streams, chunks, several devices) is the
//! device layer's business ([`crate::device`]); it drives these through
//! [`crate::device::host::HostAlgorithm`] and [`crate::device::cuda::CudaAlgorithm`].

pub mod cpu;
pub mod cuda;
pub mod plan;
pub mod reference;

pub use plan::{NlmPlan, WeightGroup};

use cuda::launch::TileConfig;

/// Switches of the NLM implementations for measurements and comparisons. The defaults are the
/// product's behaviour; benchmarks set others (docs/tuning.md, "Measurement switches").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NlmTuning {
    /// CUDA fused kernel: this tile shape for every launch instead of the automatic choice.
    pub cuda_tile: Option<TileConfig>,
    /// CUDA fused kernel: one launch for the batches of one kernel shape, whatever their plane
    /// sizes (default on); off: one launch per plane size.
    pub merge_planes: bool,
    /// CUDA fused kernel: streams that consecutive calls' launches alternate between (1 or 2,
    /// default 2: a frame's grid fills the SMs the previous frame's last blocks leave idle).
    pub fused_streams: u32,
    /// CUDA (fused and multi-pass): samples near a rounding tie recomputed in f64, so that 8- and
    /// 10-bit outputs round like the reference (default on); off: faster, outputs may then differ
    /// from the reference by one code value at those samples.
    pub exact_ties: bool,
    /// CPU: output rows per band and columns per tile (default 32 x 256).
    pub cpu_tile: (usize, usize),
    /// CPU: AVX2 + FMA code where the processor has it (default on); off: baseline instructions.
    pub cpu_simd: bool,
    /// CPU: two search offsets per pass over the accumulators (default on).
    pub cpu_pair_offsets: bool,
    /// CPU: print per frame how many samples were computed exactly (f64), on stderr.
    pub cpu_stats: bool,
}

impl Default for NlmTuning {
    fn default() -> Self {
        NlmTuning { cuda_tile: None, merge_planes: true, fused_streams: 2, exact_ties: true, cpu_tile: (32, 256), cpu_simd: true, cpu_pair_offsets: true, cpu_stats: false }
    }
}
