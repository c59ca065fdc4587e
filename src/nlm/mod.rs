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

use crate::error::Result;

/// Which GPU implementation of NLM computes a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GpuKernel {
    /// Whichever the benchmarks showed to be faster.
    #[default]
    Auto,
    Fused,
    Multipass,
}

/// Storage of the multi-pass path's distance and weight intermediates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Intermediate {
    F32,
    F16,
    /// Three 10-bit normalized values per 32-bit word.
    #[default]
    Unorm10,
}

/// How NLM is computed (not what: that is [`crate::params::Params`]): the GPU implementation and
/// its switches. The composition root ([`crate::backends`]) hands them to the NLM implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NlmOptions {
    pub gpu_kernel: GpuKernel,
    /// Search offsets handled per pass by the multi-pass kernel (1..=4).
    pub offsets_per_pass: u32,
    pub intermediate: Intermediate,
    /// Switches of the implementations (measurement switches).
    pub tuning: NlmTuning,
}

impl Default for NlmOptions {
    fn default() -> Self {
        NlmOptions { gpu_kernel: GpuKernel::Auto, offsets_per_pass: 3, intermediate: Intermediate::Unorm10, tuning: NlmTuning::default() }
    }
}

impl NlmOptions {
    /// Checks the options that only matter on the path that uses them (multi-pass: offsets per
    /// pass), so that a bad value is reported as such with or without a device.
    pub fn validate(&self) -> Result<()> {
        if self.gpu_kernel == GpuKernel::Multipass {
            cuda::multipass::validate_offsets_per_pass(self.offsets_per_pass)?;
        }
        Ok(())
    }
}

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
