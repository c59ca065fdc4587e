//! NLM super-resolution speed: kernel-only frames/s (device events around the kernels of frames
//! already uploaded, `CudaBackend::time_kernels`) and end-to-end frames/s through the engine
//! (`Denoiser` push/pop: unpack, upload, kernels, download, pack), printed as a table
//! (docs/benchmarks.md).
//!
//!   cargo run --release -p nlmdenoise-bench --bin bench_sr -- [--sizes 960x540,1920x1080]
//!       [--scales 2] [--windows spatial,live,offline] [--iterations 1,2] [--frames 200]
//!       [--backend cuda|cpu] [--depth 2]
//!
//! Windows: `spatial` (past 0, future 0), `live` (2 past), `offline` (2 past + 2 future). Input:
//! I420 frames of a moving pattern (bench_frames), 8 distinct frames cycled after 8 warm-up frames.
//! The upscaler's defaults otherwise (`Params::upscaling`: patch radius 3, search radius 2, deblur 2).

use clap::Parser;
use nlmdenoise::BackendOptions;
use nlmdenoise::{BackendKind, Params, PixelFormat, SrParams, VideoInfo};
use nlmdenoise_bench::bench_frames::{engine_fps, uploaded_jobs};

#[derive(Parser)]
struct Args {
    /// Input sizes, WxH, comma separated.
    #[arg(long, default_value = "960x540,1920x1080")]
    sizes: String,
    #[arg(long, default_value = "2")]
    scales: String,
    #[arg(long, default_value = "spatial,live,offline")]
    windows: String,
    #[arg(long, default_value = "1")]
    iterations: String,
    /// Patch and search radii, comma separated `pPrR` (p3r2: the upscaler's default; p2r3: the
    /// default before 2026-11-26).
    #[arg(long, default_value = "p3r2")]
    radii: String,
    /// Frames timed per end-to-end row.
    #[arg(long, default_value_t = 200)]
    frames: usize,
    #[arg(long, default_value = "cuda")]
    backend: String,
    #[arg(long, default_value_t = 2)]
    depth: usize,
}

/// `pPrR`: patch radius P, search radius R.
fn radii(text: &str) -> Option<(u32, u32)> {
    let (p, r) = text.strip_prefix('p')?.split_once('r')?;
    Some((p.parse().ok()?, r.parse().ok()?))
}

fn window(name: &str) -> Option<(u32, u32)> {
    match name {
        "spatial" => Some((0, 0)),
        "live" => Some((2, 0)),
        "offline" => Some((2, 2)),
        _ => None,
    }
}

/// Kernel-only milliseconds per frame (median of 5 rounds of 50 jobs).
fn kernel_ms(info: VideoInfo, params: &Params) -> nlmdenoise::Result<f64> {
    let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, ..Default::default() })?;
    let (plan, jobs) = uploaded_jobs(&mut b, info, params)?;
    let mut times: Vec<f64> = (0..5).map(|_| b.time_kernels(&jobs, &plan, 50)).collect::<nlmdenoise::Result<_>>()?;
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(times[2])
}

fn main() {
    let args = Args::parse();
    let kind: BackendKind = args.backend.parse().unwrap_or_else(|e| {
        eprintln!("bench_sr: --backend: {e}");
        std::process::exit(2)
    });
    let options = BackendOptions { kind, pipeline_depth: args.depth, ..Default::default() };
    println!("| input | scale | output | window | past | future | iterations | patch, search radius | kernel frames/s | kernel ms | end-to-end frames/s |");
    println!("| --- | ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |");
    let mut described = None;
    for size in args.sizes.split(',') {
        let Some((w, h)) = size.split_once('x').and_then(|(w, h)| Some((w.parse::<usize>().ok()?, h.parse::<usize>().ok()?))) else {
            eprintln!("bench_sr: size {size} is not WxH");
            continue;
        };
        let info = VideoInfo::new(PixelFormat::I420, w, h).expect("size");
        for scale in args.scales.split(',').filter_map(|s| s.parse::<u32>().ok()) {
            for win in args.windows.split(',') {
                let Some((past, future)) = window(win) else {
                    eprintln!("bench_sr: unknown window {win}");
                    continue;
                };
                for (iterations, (patch_radius, search_radius)) in
                    args.iterations.split(',').filter_map(|s| s.parse::<u32>().ok()).flat_map(|i| args.radii.split(',').filter_map(radii).map(move |r| (i, r)))
                {
                    let up = Params::upscaling(scale);
                    let params = Params { temporal_past: past, temporal_future: future, patch_radius, search_radius, sr: SrParams { iterations, ..up.sr }, ..up }.with_noise_sigma(0.0);
                    let kernel = if kind == BackendKind::Cuda { kernel_ms(info, &params).map(Some) } else { Ok(None) };
                    let e2e = engine_fps(info, params, &options, args.frames);
                    let cell = |r: &nlmdenoise::Result<Option<f64>>| match r {
                        Ok(Some(ms)) => (format!("{:.1}", 1e3 / ms), format!("{ms:.3}")),
                        Ok(None) => ("-".into(), "-".into()),
                        Err(e) => (format!("error: {e}"), String::new()),
                    };
                    let (kf, kms) = cell(&kernel);
                    let e = match e2e {
                        Ok((f, d)) => {
                            described.get_or_insert(d);
                            format!("{f:.1}")
                        }
                        Err(e) => format!("error: {e}"),
                    };
                    println!("| {w}x{h} | {scale} | {}x{} | {win} | {past} | {future} | {iterations} | {patch_radius}, {search_radius} | {kf} | {kms} | {e} |", w * scale as usize, h * scale as usize);
                }
            }
        }
    }
    if let Some(d) = described {
        println!("\nbackend: {d}");
    }
}
