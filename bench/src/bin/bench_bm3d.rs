//! BM3D speed: frames/s through the engine (`Denoiser` push/pop: unpack, upload, every kernel,
//! download, pack) for each profile and window shape, printed as a table (docs/benchmarks.md).
//!
//!   cargo run --release -p nlmdenoise-bench --bin bench_bm3d -- [--width 1920 --height 1080]
//!       [--frames 200] [--profiles fast,normal,high] [--windows spatial,vbm3d,live1,live2,offline2]
//!       [--backend cuda|cpu] [--depth 2] [--sigma 20] [--block-step N] [--search-radius N] [--frame-groups]
//!       [--hard-block-step N] [--seeds N] [--wiener-seeds N] [--motion BOOL] [--digest]
//!
//! Windows: `spatial` (past 0, future 0, two steps), `vbm3d` (1 past + 1 future, two steps),
//! `live1` (2 past, 0 future, one step), `live2` (2 past, 0 future, two steps). Frames: a noisy
//! moving pattern (bench_frames), 8 distinct frames cycled, after 8 warm-up frames.

use clap::Parser;
use nlmdenoise::BackendOptions;
use nlmdenoise::{Algorithm, BackendKind, Bm3dParams, Bm3dProfile, Params, PixelFormat, VideoInfo};
use nlmdenoise_bench::bench_frames::{engine_digest, engine_fps};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1920)]
    width: usize,
    #[arg(long, default_value_t = 1080)]
    height: usize,
    /// Frames timed per row.
    #[arg(long, default_value_t = 200)]
    frames: usize,
    #[arg(long, default_value = "fast,normal,high")]
    profiles: String,
    #[arg(long, default_value = "spatial,vbm3d,live1,live2")]
    windows: String,
    #[arg(long, default_value = "cuda")]
    backend: String,
    #[arg(long, default_value_t = 2)]
    depth: usize,
    #[arg(long, default_value_t = 20.0)]
    sigma: f32,
    /// Cost sweep instead of the profile table: "block_step:group:radius" settings (group for
    /// both steps), e.g. "6:16:8 8:8:6", each on every window of --windows.
    #[arg(long)]
    sweep: Option<String>,
    /// Block step on every profile row instead of the profile's (rows labelled `sN`).
    #[arg(long)]
    block_step: Option<u32>,
    /// Search radius on every profile row instead of the profile's (rows labelled `rN`).
    #[arg(long)]
    search_radius: Option<u32>,
    /// Block step of the hard-thresholding step on every profile row (rows labelled `hN`).
    #[arg(long)]
    hard_block_step: Option<u32>,
    /// Seeds of the predictive search on every profile row (rows labelled `seedsN`).
    #[arg(long)]
    seeds: Option<u32>,
    /// Seeds of the Wiener step's predictive search on every profile row (rows labelled `wsN`).
    #[arg(long)]
    wiener_seeds: Option<u32>,
    /// Per-frame groups on every profile row (`bm3d-frame-groups`; rows labelled `fg`).
    #[arg(long)]
    frame_groups: bool,
    /// Motion seeds on or off on every profile row instead of the profile's (`bm3d-motion`; rows
    /// labelled `mo` / `nomo`).
    #[arg(long, value_name = "BOOL")]
    motion: Option<bool>,
    /// The Bayesian estimate on every profile row (`bm3d-bayes`; rows labelled `bayes`).
    #[arg(long)]
    bayes: bool,
    /// Also print a digest of each profile row's first 12 outputs (untimed, a separate run): two
    /// builds meant to compute the same output print the same digest.
    #[arg(long)]
    digest: bool,
    /// The own-frame search on tensor cores where the device has them (default true; false: on
    /// the CUDA cores in f32, rows labelled `f32s`).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    tensor_search: bool,
    /// The Wiener step's block matching in a launch of its own (default true; false: one launch
    /// does both, rows labelled `w1`).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    wiener_apart: bool,
}

fn window(name: &str) -> Option<(u32, u32, u32)> {
    match name {
        "spatial" => Some((0, 0, 2)),
        "vbm3d" => Some((1, 1, 2)),
        "offline2" => Some((2, 2, 2)),
        "live1" => Some((2, 0, 1)),
        "live2" => Some((2, 0, 2)),
        _ => None,
    }
}

fn main() {
    let args = Args::parse();
    let kind: BackendKind = args.backend.parse().unwrap_or_else(|e| {
        eprintln!("bench_bm3d: --backend: {e}");
        std::process::exit(2)
    });
    let info = VideoInfo::new(PixelFormat::I420, args.width, args.height).expect("size");
    let options =
        BackendOptions { kind, pipeline_depth: args.depth, bm3d: nlmdenoise::bm3d::Bm3dOptions { tensor_search: args.tensor_search, wiener_match_apart: args.wiener_apart }, ..Default::default() };
    println!("| profile | window | past | future | steps | size | frames/s | ms/frame |");
    println!("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |");
    let mut described = None;
    if let Some(sweep) = &args.sweep {
        for cell in sweep.split_whitespace() {
            let v: Vec<u32> = cell.split(':').filter_map(|x| x.parse().ok()).collect();
            let [step, group, radius] = v[..] else {
                eprintln!("bench_bm3d: --sweep cell {cell} is not block_step:group:radius");
                continue;
            };
            for w in args.windows.split(',') {
                let Some((past, future, steps)) = window(w) else { continue };
                let bm3d = Bm3dParams { steps: Some(steps), block_step: Some(step), group_size: Some(group), wiener_group_size: Some(group), search_radius: Some(radius), ..Default::default() };
                let params = Params { algorithm: Algorithm::Bm3d, sigma: Some(args.sigma), temporal_past: past, temporal_future: future, bm3d, ..Params::default() };
                match engine_fps(info, params, &options, args.frames) {
                    Ok((f, _)) => println!("| p{step} n{group} r{radius} | {w} | {past} | {future} | {steps} | {}x{} | {f:.1} | {:.3} |", args.width, args.height, 1e3 / f),
                    Err(e) => println!("| p{step} n{group} r{radius} | {w} | {past} | {future} | {steps} | {}x{} | error: {e} | |", args.width, args.height),
                }
            }
        }
        return;
    }
    let mut overrides = String::new();
    if let Some(v) = args.block_step {
        overrides.push_str(&format!(" s{v}"));
    }
    if let Some(v) = args.search_radius {
        overrides.push_str(&format!(" r{v}"));
    }
    if let Some(v) = args.hard_block_step {
        overrides.push_str(&format!(" h{v}"));
    }
    if let Some(v) = args.seeds {
        overrides.push_str(&format!(" seeds{v}"));
    }
    if let Some(v) = args.wiener_seeds {
        overrides.push_str(&format!(" ws{v}"));
    }
    if args.frame_groups {
        overrides.push_str(" fg");
    }
    if args.bayes {
        overrides.push_str(" bayes");
    }
    if !args.tensor_search {
        overrides.push_str(" f32s");
    }
    if !args.wiener_apart {
        overrides.push_str(" w1");
    }
    match args.motion {
        Some(true) => overrides.push_str(" mo"),
        Some(false) => overrides.push_str(" nomo"),
        None => {}
    }
    for p in args.profiles.split(',') {
        let profile: Bm3dProfile = match p.parse() {
            Ok(v) => v,
            Err(e) => {
                eprintln!("bench_bm3d: {e}");
                continue;
            }
        };
        for w in args.windows.split(',') {
            let Some((past, future, steps)) = window(w) else {
                eprintln!("bench_bm3d: unknown window {w}");
                continue;
            };
            let params = Params {
                algorithm: Algorithm::Bm3d,
                sigma: Some(args.sigma),
                temporal_past: past,
                temporal_future: future,
                bm3d: Bm3dParams {
                    profile,
                    steps: Some(steps),
                    block_step: args.block_step,
                    search_radius: args.search_radius,
                    hard_block_step: args.hard_block_step,
                    seeds: args.seeds,
                    wiener_seeds: args.wiener_seeds,
                    frame_groups: args.frame_groups.then_some(true),
                    motion: args.motion,
                    bayes: args.bayes.then_some(true),
                    ..Default::default()
                },
                ..Params::default()
            };
            match engine_fps(info, params, &options, args.frames) {
                Ok((f, d)) => {
                    println!("| {p}{overrides} | {w} | {past} | {future} | {steps} | {}x{} | {f:.1} | {:.3} |", args.width, args.height, 1e3 / f);
                    described.get_or_insert(d);
                    if args.digest {
                        match engine_digest(info, params, &options, 12) {
                            Ok(h) => println!("digest {p}{overrides} {w}: {h:016x}"),
                            Err(e) => println!("digest {p}{overrides} {w}: error: {e}"),
                        }
                    }
                }
                Err(e) => println!("| {p}{overrides} | {w} | {past} | {future} | {steps} | {}x{} | error: {e} | |", args.width, args.height),
            }
        }
    }
    if let Some(d) = described {
        println!("\nbackend: {d}");
    }
}
