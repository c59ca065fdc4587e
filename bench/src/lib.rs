//! Shared pieces of the benchmark and measurement binaries (`src/bin/`): synthetic frames and
//! deterministic Gaussian noise. The binaries here measure the engine; users run the CLI
//! (`cli/`) and the GStreamer element (`plugins/`).
//!
//! Measurement switches the binaries read from the environment (visible, benchmark-only; the
//! product reads none): `NLMDENOISE_CUDA_TILE`, `NLMDENOISE_CUDA_MERGE_PLANES`,
//! `NLMDENOISE_CUDA_FUSED_STREAMS`, `NLMDENOISE_CUDA_EXACT_TIES`, `NLMDENOISE_CUDA_DIRECT_IO`,
//! `NLMDENOISE_CUDA_ASYNC_IO`, `NLMDENOISE_CPU_TILE`, `NLMDENOISE_CPU_NO_SIMD`,
//! `NLMDENOISE_CPU_STATS`, `NLMDENOISE_CPU_SINGLE` ([`tuning_from_env`]).

pub mod bench_frames;
pub mod gaussian;

use nlmdenoise::nlm::cuda::launch::TileConfig;
use nlmdenoise::nlm::NlmTuning;
use nlmdenoise::BackendOptions;

/// `options` with the measurement switches set in the environment applied (see the crate doc);
/// an unparsable value is an error.
pub fn tuning_from_env(mut options: BackendOptions) -> anyhow::Result<BackendOptions> {
    let var = |k: &str| std::env::var(k).ok();
    let off = |k: &str| var(k).map(|v| v == "0");
    let t: &mut NlmTuning = &mut options.nlm.tuning;
    if let Some(s) = var("NLMDENOISE_CUDA_TILE") {
        t.cuda_tile = Some(TileConfig::parse(&s).filter(|t| t.is_valid()).ok_or_else(|| anyhow::anyhow!("NLMDENOISE_CUDA_TILE='{s}' is not a valid tile_h,run_w,dx_group[,min_blocks]"))?);
    }
    if off("NLMDENOISE_CUDA_MERGE_PLANES") == Some(true) {
        t.merge_planes = false;
    }
    if var("NLMDENOISE_CUDA_FUSED_STREAMS").as_deref() == Some("1") {
        t.fused_streams = 1;
    }
    if off("NLMDENOISE_CUDA_EXACT_TIES") == Some(true) {
        t.exact_ties = false;
    }
    if let Some(s) = var("NLMDENOISE_CPU_TILE") {
        let parsed = s.split_once('x').and_then(|(r, c)| Some((r.trim().parse::<usize>().ok()?, c.trim().parse::<usize>().ok()?)));
        t.cpu_tile = parsed.filter(|&(r, c)| r > 0 && c > 0).ok_or_else(|| anyhow::anyhow!("NLMDENOISE_CPU_TILE='{s}' is not ROWSxCOLS"))?;
    }
    if var("NLMDENOISE_CPU_NO_SIMD").is_some() {
        t.cpu_simd = false;
    }
    if var("NLMDENOISE_CPU_SINGLE").is_some() {
        t.cpu_pair_offsets = false;
    }
    if var("NLMDENOISE_CPU_STATS").is_some() {
        t.cpu_stats = true;
    }
    if off("NLMDENOISE_CUDA_DIRECT_IO") == Some(true) {
        options.host_io.direct = false;
    }
    if off("NLMDENOISE_CUDA_ASYNC_IO") == Some(true) {
        options.host_io.asynchronous = false;
    }
    if off("NLMDENOISE_CUDA_DEVICE_LAYOUT") == Some(true) {
        options.host_io.device_layout = false;
    }
    Ok(options)
}
