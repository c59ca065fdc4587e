//! CUDA benchmark: kernel-only and end-to-end throughput of the fused temporal NLM kernel on the
//! two reference configurations, printed as a table (docs/benchmarks.md records the runs).
//!
//!   R-live: 1920x1080 I420, temporal_past 2, search radius 3, patch radius 2, independent chroma
//!   R-knlm: 1920x1080 I420, past 1 + future 1, search radius 2, patch radius 4
//!
//! Kernel only: frames are uploaded once into a ring of 8 slots; the kernels of jobs whose
//! targets rotate over the slots are timed with device events (median of several batches).
//! End to end: host frames through `Denoiser` (unpack, upload, kernels, download, pack), wall clock.
//!
//!   cargo run --release --bin bench_cuda -- [--iters 400] [--frames 600] [--sweep]
//!
//! Brief mode (`--brief`, used by `scripts/bench`): one row per configuration and path, printed as
//! soon as it is measured: kernel only with the default tile and tie handling, end to end at
//! `--depth` only, with "ns per (sample x offset x frame)" and the GPU share of one 1080p60 stream.
//! `--search-radius/--patch-radius/--past/--future` (comma lists) replace the two reference
//! configurations by one per combination (R-live values where a flag is not given); `--config`
//! keeps one reference configuration; `--only kernel|e2e` skips the other path; `--backend cpu`
//! runs the end-to-end rows on the CPU backend (`--threads`, 0 = all cores).

use std::time::Instant;

use nlmdenoise_bench::bench_frames::{frame, push_pop_fps, uploaded_jobs};
use nlmdenoise_bench::tuning_from_env;

use clap::Parser;
use cudarc::driver::{sys, CudaContext};
use nlmdenoise::convert;
use nlmdenoise::device::{Backend, BackendKind};
use nlmdenoise::nlm::cuda::launch::TileConfig;
use nlmdenoise::plan::Plan;
use nlmdenoise::planar::{Geometry, PlanarFrame};
use nlmdenoise::BackendOptions;
use nlmdenoise::{Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};

#[derive(Parser)]
struct Args {
    /// Timed kernel launches per batch.
    #[arg(long, default_value_t = 300)]
    iters: usize,
    /// Frames pushed through the engine per end-to-end run.
    #[arg(long, default_value_t = 600)]
    frames: usize,
    /// Also time a few tile shapes per configuration.
    #[arg(long)]
    sweep: bool,
    #[arg(long, default_value_t = 1920)]
    width: usize,
    /// Pixel format of the frames (GStreamer's name): I420, NV12, P010_10LE, RGBA, ...
    #[arg(long, default_value = "I420")]
    format: String,
    #[arg(long, default_value_t = 1080)]
    height: usize,
    /// Search radii (comma list); with any of the four window flags, one "custom" configuration
    /// per combination replaces R-live and R-knlm (R-live values for flags not given).
    #[arg(long, value_delimiter = ',')]
    search_radius: Vec<u32>,
    /// Patch radii (comma list).
    #[arg(long, value_delimiter = ',')]
    patch_radius: Vec<u32>,
    /// Past frames (comma list).
    #[arg(long, value_delimiter = ',')]
    past: Vec<u32>,
    /// Future frames (comma list).
    #[arg(long, value_delimiter = ',')]
    future: Vec<u32>,
    /// Patch-wise aggregation radii (comma list; a window flag like the four above).
    #[arg(long, value_delimiter = ',')]
    aggregation_radius: Vec<u32>,
    /// Centre weight of the custom configurations (R-live's 1 where not given).
    #[arg(long)]
    wref: Option<f32>,
    /// Only this reference configuration: live (R-live) or knlm (R-knlm).
    #[arg(long)]
    config: Option<String>,
    /// Noise sigma for every configuration (distance offset 2 sigma^2, strengths from sigma as
    /// `--sigma` gives them), or `auto` (estimated per frame; end-to-end rows only). Default: no
    /// sigma, strength 10.
    #[arg(long)]
    sigma: Option<String>,
    /// Only one path: kernel or e2e.
    #[arg(long)]
    only: Option<String>,
    /// One row per configuration and path, printed as measured (see the file's doc comment).
    #[arg(long)]
    brief: bool,
    /// Pipeline depth of the end-to-end row in brief mode.
    #[arg(long, default_value_t = 2)]
    depth: usize,
    /// Backend of the end-to-end rows in brief mode: cuda or cpu.
    #[arg(long, default_value = "cuda")]
    backend: String,
    /// CPU backend worker threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

/// Host-side costs per frame of the end-to-end path (no GPU work): the engine's unpack and pack,
/// and the backend's copies into and out of pinned staging memory.
fn host_profile(info: VideoInfo) {
    let geometry = Geometry::from_video_info(&info);
    let f = frame(info, 0, 3);
    let mut planar = PlanarFrame::zeroed(&geometry);
    let mut out = OwnedFrame::new(info);
    let bytes: usize = geometry.total_samples() * geometry.bytes_per_sample;
    let mut staging = vec![1u8; bytes];
    let n = 200;
    let time = |what: &str, f: &mut dyn FnMut()| {
        f();
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!("host: {what}: {us:.0} us/frame ({:.1} GB/s)", bytes as f64 / us / 1e3);
    };
    time("engine unpack (FrameRef -> planar)", &mut || convert::unpack(&f.as_ref(), &mut planar).unwrap());
    time("engine pack (planar -> FrameMut)", &mut || convert::pack(&planar, &mut out.as_mut()).unwrap());
    time("planar -> staging, parallel", &mut || {
        let mut at = 0;
        for p in &planar.planes {
            let b = p.samples.as_bytes();
            nlmdenoise::convert::copy_bytes(&mut staging[at..at + b.len()], b);
            at += b.len();
        }
    });
    time("planar -> staging, one thread", &mut || {
        let mut at = 0;
        for p in &planar.planes {
            let b = p.samples.as_bytes();
            staging[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
    });
}

struct Config {
    name: String,
    params: Params,
}

fn configs() -> Vec<Config> {
    let base = Params::default();
    vec![
        Config { name: "R-live".into(), params: Params { search_radius: 3, patch_radius: 2, aggregation_radius: 0, wref: 1.0, temporal_past: 2, temporal_future: 0, ..base } },
        Config { name: "R-knlm".into(), params: Params { search_radius: 2, patch_radius: 4, aggregation_radius: 0, wref: 1.0, temporal_past: 1, temporal_future: 1, ..base } },
    ]
}

/// The configurations the command line asks for: the reference ones (optionally one of them), or
/// one "custom" configuration per combination of the window flags.
fn selected_configs(args: &Args) -> Result<Vec<Config>, String> {
    if args.search_radius.is_empty() && args.patch_radius.is_empty() && args.past.is_empty() && args.future.is_empty() && args.aggregation_radius.is_empty() && args.wref.is_none() {
        let all = configs();
        return match args.config.as_deref() {
            None => Ok(all),
            Some(c) => {
                let name = match c {
                    "live" | "R-live" => "R-live",
                    "knlm" | "R-knlm" => "R-knlm",
                    _ => return Err(format!("--config {c}: expected live or knlm")),
                };
                Ok(all.into_iter().filter(|x| x.name == name).collect())
            }
        };
    }
    let live = configs().remove(0).params;
    let or = |v: &Vec<u32>, d: u32| if v.is_empty() { vec![d] } else { v.clone() };
    let mut out = Vec::new();
    for &a in &or(&args.search_radius, live.search_radius) {
        for &s in &or(&args.patch_radius, live.patch_radius) {
            for &p in &or(&args.past, live.temporal_past) {
                for &f in &or(&args.future, live.temporal_future) {
                    for &r in &or(&args.aggregation_radius, 0) {
                        let wref = args.wref.unwrap_or(live.wref);
                        let params = Params { search_radius: a, patch_radius: s, temporal_past: p, temporal_future: f, aggregation_radius: r, wref, ..live };
                        params.validate().map_err(|e| format!("search {a} patch {s} past {p} future {f} aggregation {r}: {e}"))?;
                        let name = if r > 0 || args.wref.is_some() { format!("custom a{a} s{s} p{p} f{f} r{r} wref {wref}") } else { format!("custom a{a} s{s} p{p} f{f}") };
                        out.push(Config { name, params });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Positions at which weights are computed per frame: the sum over weight groups of the size of
/// the group's output planes (one position per output pixel; 1.5 x width x height for I420 with
/// independent chroma).
fn weight_positions(geometry: &Geometry, plan: &Plan) -> usize {
    let Ok(plan) = plan.nlm("weight_positions") else { return 0 };
    plan.groups
        .iter()
        .map(|g| {
            let p = geometry.planes[g.outputs[0]];
            p.width * p.height
        })
        .sum()
}

/// Floating-point operations per (output sample, search offset, frame) of the algorithm as the
/// fused kernel computes it, for `guides` guide and `outputs` output planes: squared difference
/// (sub + fma = 3 per guide plane), horizontal and vertical running box sums (2 + 2), weight
/// (fma, max, exp = 3), weight sum (1), weighted sums (fma = 2 per output plane).
fn ops_per_pair(guides: usize, outputs: usize) -> usize {
    3 * guides + 4 + 3 + 1 + 2 * outputs
}

fn ops_per_frame(geometry: &Geometry, plan: &Plan, frames: usize) -> f64 {
    let Ok(plan) = plan.nlm("ops_per_frame") else { return 0.0 };
    let offsets = (2 * plan.search_radius as usize + 1).pow(2);
    plan.groups
        .iter()
        .map(|g| {
            let p = geometry.planes[g.outputs[0]];
            (p.width * p.height * offsets * frames * ops_per_pair(g.guides.len(), g.outputs.len())) as f64
        })
        .sum()
}

fn fp32_peak(device: usize) -> Option<(f64, String)> {
    let ctx = CudaContext::new(device).ok()?;
    let sms = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).ok()? as f64;
    let khz = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).ok()? as f64;
    let (major, minor) = ctx.compute_capability().ok()?;
    let lanes = if major == 8 && minor == 0 { 64.0 } else { 128.0 };
    let peak = sms * lanes * 2.0 * khz * 1e3;
    Some((peak, format!("{sms} SMs x {lanes} FP32 lanes x 2 x {:.2} GHz = {:.1} TFLOP/s", khz / 1e6, peak / 1e12)))
}

/// `options` with the environment's measurement switches (nlmdenoise_bench::tuning_from_env).
fn env_options(options: BackendOptions) -> nlmdenoise::Result<BackendOptions> {
    tuning_from_env(options).map_err(|e| nlmdenoise::Error::InvalidParameter(e.to_string()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Kernel-only milliseconds per frame (median of 5 batches).
fn kernel_ms(info: VideoInfo, params: &Params, iters: usize, tile: Option<TileConfig>, exact_ties: bool) -> nlmdenoise::Result<(f64, String)> {
    kernel_ms_with(info, params, iters, tile, exact_ties, false)
}

/// Kernel-only milliseconds per frame; `batched`: all jobs in one launch (as chunked workers launch).
fn kernel_ms_with(info: VideoInfo, params: &Params, iters: usize, tile: Option<TileConfig>, exact_ties: bool, batched: bool) -> nlmdenoise::Result<(f64, String)> {
    let mut opts = env_options(BackendOptions { kind: BackendKind::Cuda, ..Default::default() })?;
    if tile.is_some() {
        // None keeps NLMDENOISE_CUDA_TILE (sweeps through the environment) or the default.
        opts.nlm.tuning.cuda_tile = tile;
    }
    opts.nlm.tuning.exact_ties = exact_ties;
    let mut b = nlmdenoise::backends::cuda(&opts)?;
    let (plan, jobs) = uploaded_jobs(&mut b, info, params)?;
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(if batched { b.time_batched(&jobs, &plan, iters)? } else { b.time_kernels(&jobs, &plan, iters)? });
    }
    Ok((median(times), b.describe()))
}

/// End-to-end frames per second through `Denoiser` with `depth` frames in flight.
fn end_to_end_fps(info: VideoInfo, params: &Params, frames: usize, depth: usize, exact_ties: bool) -> nlmdenoise::Result<f64> {
    end_to_end_fps_with(info, params, frames, depth, exact_ties, true, true)
}

/// `direct_io`: page-locked engine frames copied by DMA (else staged); `async_io`: those copies
/// overlap the caller (else `upload` and `finish` wait for them, as before run 16).
fn end_to_end_fps_with(info: VideoInfo, params: &Params, frames: usize, depth: usize, exact_ties: bool, direct_io: bool, async_io: bool) -> nlmdenoise::Result<f64> {
    let mut opts = env_options(BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, ..Default::default() })?;
    opts.nlm.tuning.exact_ties = exact_ties;
    opts.host_io.direct = direct_io;
    opts.host_io.asynchronous = async_io;
    let b = nlmdenoise::backends::cuda(&opts)?;
    denoiser_fps(info, params, frames, Box::new(b))
}

/// End-to-end frames per second through the engine's planar API, as the element runs it with
/// frames lent both ways (`take_spare`, `push_planar`, `pop_planar`, `recycle`): no host copy
/// in or out. The frames keep the content of an earlier output (what a source would overwrite),
/// which costs the same to compute.
fn planar_end_to_end_fps(info: VideoInfo, params: &Params, frames: usize, depth: usize) -> nlmdenoise::Result<f64> {
    let opts = env_options(BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, ..Default::default() })?;
    let mut d: Denoiser<usize> = Denoiser::with_backend(info, *params, Box::new(nlmdenoise::backends::cuda(&opts)?))?;
    let mut popped = 0;
    let run = |d: &mut Denoiser<usize>, n: usize, popped: &mut usize| -> nlmdenoise::Result<()> {
        for i in 0..n {
            let f = d.take_spare();
            d.push_planar(f, i)?;
            while let Some((_, f)) = d.pop_planar() {
                d.recycle(f);
                *popped += 1;
            }
        }
        Ok(())
    };
    // Warm-up with real frames, so that the recycled frames hold pictures.
    for (i, f) in (0..8).map(|n| frame(info, n, 11)).enumerate() {
        d.push(&f.as_ref(), i)?;
        while let Some((_, f)) = d.pop_planar() {
            d.recycle(f);
        }
    }
    run(&mut d, 8, &mut popped)?;
    popped = 0;
    let t = Instant::now();
    run(&mut d, frames, &mut popped)?;
    d.finish_stream()?;
    while let Some((_, f)) = d.pop_planar() {
        d.recycle(f);
        popped += 1;
    }
    Ok(popped as f64 / t.elapsed().as_secs_f64())
}

/// End-to-end frames per second of the CPU backend with `threads` workers (0 = all cores).
fn cpu_end_to_end_fps(info: VideoInfo, params: &Params, frames: usize, threads: usize) -> nlmdenoise::Result<f64> {
    let b = nlmdenoise::backends::create(&env_options(BackendOptions { kind: BackendKind::Cpu, threads, ..Default::default() })?)?;
    denoiser_fps(info, params, frames, b)
}

fn denoiser_fps(info: VideoInfo, params: &Params, frames: usize, backend: Box<dyn Backend>) -> nlmdenoise::Result<f64> {
    use std::sync::atomic::Ordering::Relaxed;
    let host = &nlmdenoise::device::cuda::HOST_NS;
    let mut d: Denoiser<usize> = Denoiser::with_backend(info, *params, backend)?;
    let fps = push_pop_fps(&mut d, frames, || host.iter().for_each(|h| h.store(0, Relaxed)))?;
    let per = |i: usize| host[i].load(Relaxed) as f64 / 1e3 / frames as f64;
    if host[3].load(Relaxed) > 0 {
        eprintln!("  caller thread per frame: {:.0} us total, backend upload {:.0} us, launch {:.0} us, finish {:.0} us", 1e6 / fps, per(0), per(1), per(2));
    }
    Ok(fps)
}

/// Brief mode: one row per configuration and path, printed (and flushed) as soon as measured.
fn brief(args: &Args, info: VideoInfo, configs: &[Config]) {
    use std::io::Write;
    let kernel = args.only.as_deref() != Some("e2e");
    let e2e = args.only.as_deref() != Some("kernel");
    let cpu = args.backend == "cpu";
    println!("| config | path | size | a | s | past | future | ms/frame | frames/s | ns per (sample x offset x frame) | GPU share of one 1080p60 stream |");
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let size = match info.format {
        PixelFormat::I420 => format!("{}x{}", info.width, info.height),
        f => format!("{}x{} {f}", info.width, info.height),
    };
    for c in configs {
        let p = &c.params;
        let geometry = Geometry::from_video_info(&info);
        let plan = match Plan::new(&geometry, p) {
            Ok(plan) => plan,
            Err(e) => {
                println!("| {} | plan | {size} | {} | {} | {} | {} | error: {e} | | | |", c.name, p.search_radius, p.patch_radius, p.temporal_past, p.temporal_future);
                continue;
            }
        };
        let work = (weight_positions(&geometry, &plan) * (2 * p.search_radius as usize + 1).pow(2) * p.window_frames() as usize) as f64;
        let row = |path: &str, r: nlmdenoise::Result<f64>, share: bool| {
            let head = format!("| {} | {path} | {size} | {} | {} | {} | {}", c.name, p.search_radius, p.patch_radius, p.temporal_past, p.temporal_future);
            match r {
                Ok(ms) => {
                    let share = if share && info.width == 1920 && info.height == 1080 { format!("{:.1}%", 60.0 * ms / 1000.0 * 100.0) } else { String::new() };
                    println!("{head} | {ms:.3} | {:.1} | {:.4} | {share} |", 1e3 / ms, ms * 1e6 / work);
                }
                Err(e) => println!("{head} | error: {e} | | | |"),
            }
            let _ = std::io::stdout().flush();
        };
        if kernel && !cpu {
            row("kernel only", kernel_ms(info, p, args.iters, None, true).map(|(ms, _)| ms), true);
        }
        if e2e {
            if cpu {
                let threads = if args.threads == 0 { "all cores".to_string() } else { format!("{} threads", args.threads) };
                row(&format!("end to end, CPU backend, {threads}"), cpu_end_to_end_fps(info, p, args.frames, args.threads).map(|fps| 1e3 / fps), false);
            } else {
                row(&format!("end to end, pipeline depth {}", args.depth), end_to_end_fps(info, p, args.frames, args.depth, true).map(|fps| 1e3 / fps), false);
                row(&format!("end to end, planar frames (no host copy), pipeline depth {}", args.depth), planar_end_to_end_fps(info, p, args.frames, args.depth).map(|fps| 1e3 / fps), false);
            }
        }
    }
}

fn main() {
    let args = Args::parse();
    let format: PixelFormat = args.format.parse().expect("--format: a pixel format the engine supports");
    let info = VideoInfo::new(format, args.width, args.height).expect("size");
    let configs = match selected_configs(&args) {
        Ok(c) => c
            .into_iter()
            .map(|c| match args.sigma.as_deref() {
                None => c,
                Some("auto") => Config { name: format!("{} sigma auto", c.name), params: Params { sigma_auto: true, ..c.params } },
                Some(v) => {
                    let sigma: f32 = v.parse().expect("--sigma: a number or auto");
                    Config { name: format!("{} sigma {sigma}", c.name), params: c.params.with_noise_sigma(sigma) }
                }
            })
            .collect::<Vec<_>>(),
        Err(e) => {
            eprintln!("bench_cuda: {e}");
            std::process::exit(2);
        }
    };
    if let Some(o) = args.only.as_deref() {
        if o != "kernel" && o != "e2e" {
            eprintln!("bench_cuda: --only {o}: expected kernel or e2e");
            std::process::exit(2);
        }
    }
    if args.backend != "cuda" && args.backend != "cpu" {
        eprintln!("bench_cuda: --backend {}: expected cuda or cpu", args.backend);
        std::process::exit(2);
    }
    if args.brief && args.backend == "cpu" {
        brief(&args, info, &configs);
        return;
    }
    if !nlmdenoise::device::cuda::available() {
        println!("SKIPPED: no usable CUDA device/driver/NVRTC");
        return;
    }
    if args.brief {
        brief(&args, info, &configs);
        return;
    }
    host_profile(info);
    let (peak, peak_desc) = fp32_peak(0).unwrap_or((f64::NAN, "unknown".into()));
    println!("fp32 peak: {peak_desc}");
    let mut rows = Vec::new();
    let kernel = args.only.as_deref() != Some("e2e");
    let e2e = args.only.as_deref() != Some("kernel");
    for c in configs {
        let geometry = Geometry::from_video_info(&info);
        let plan = Plan::new(&geometry, &c.params).expect("plan");
        let ops = ops_per_frame(&geometry, &plan, c.params.window_frames() as usize);
        // Aggregated builds have no exact path: their "ties in f32" row would time the same kernel.
        let mut tiles: Vec<(Option<TileConfig>, bool)> = if c.params.aggregation_radius > 0 { vec![(None, true)] } else { vec![(None, true), (None, false)] };
        if args.sweep {
            let d = TileConfig::choose(c.params.search_radius, c.params.patch_radius, c.params.aggregation_radius, 1, 1, 1);
            for (h, r, g) in [(d.tile_h, 8, 4), (d.tile_h, 4, d.dx_group), (d.tile_h / 2, 8, d.dx_group), (d.tile_h * 2, 8, d.dx_group), (d.tile_h, 8, d.dx_group.min(3))] {
                let t = TileConfig { tile_h: h, run_w: r, dx_group: g, threads: 128, min_blocks: 0 };
                let (ow, oh) = t.output_tile(c.params.aggregation_radius);
                if t.is_valid() && ow > 0 && oh > 0 && Some(t) != Some(d) {
                    tiles.push((Some(t), true));
                }
            }
        }
        if !kernel {
            tiles.clear();
        }
        for (tile, exact_ties) in tiles {
            match kernel_ms(info, &c.params, args.iters, tile, exact_ties) {
                Ok((ms, desc)) => {
                    let fps = 1e3 / ms;
                    let at_peak_ms = ops / peak * 1e3;
                    let mut label = tile.map(|t| format!("{},{},{}", t.tile_h, t.run_w, t.dx_group)).unwrap_or_else(|| "default".into());
                    if !exact_ties {
                        label.push_str(", ties in f32");
                    }
                    eprintln!("{} kernel tile {label}: {ms:.4} ms ({desc})", c.name);
                    rows.push(format!("| {} | kernel only, tile {label} | {ms:.3} | {fps:.0} | {:.2} | {at_peak_ms:.3} | {:.1}% |", c.name, ops / 1e9, 100.0 * at_peak_ms / ms));
                }
                Err(e) => rows.push(format!("| {} | kernel only, tile {tile:?} | error: {e} | | | | |", c.name)),
            }
        }
        if kernel {
            match kernel_ms_with(info, &c.params, args.iters, None, true, true) {
                Ok((ms, _)) => {
                    let at_peak_ms = ops / peak * 1e3;
                    rows.push(format!("| {} | kernel only, 8 jobs per launch (batched) | {ms:.3} | {:.0} | {:.2} | {at_peak_ms:.3} | {:.1}% |", c.name, 1e3 / ms, ops / 1e9, 100.0 * at_peak_ms / ms));
                }
                Err(e) => rows.push(format!("| {} | kernel only, batched | error: {e} | | | | |", c.name)),
            }
        }
        if e2e {
            match end_to_end_fps_with(info, &c.params, args.frames, 2, true, false, false) {
                Ok(fps) => rows.push(format!("| {} | end to end, pipeline depth 2, staged host copies (direct I/O off) | {:.3} | {fps:.0} | | | |", c.name, 1e3 / fps)),
                Err(e) => rows.push(format!("| {} | end to end, staged | error: {e} | | | | |", c.name)),
            }
            match end_to_end_fps_with(info, &c.params, args.frames, 2, true, true, false) {
                Ok(fps) => rows.push(format!("| {} | end to end, pipeline depth 2, direct I/O synchronous (async off) | {:.3} | {fps:.0} | | | |", c.name, 1e3 / fps)),
                Err(e) => rows.push(format!("| {} | end to end, direct synchronous | error: {e} | | | | |", c.name)),
            }
        }
        let depths: &[(usize, bool)] = if e2e { &[(0, true), (2, true), (4, true), (2, false)] } else { &[] };
        for &(depth, exact_ties) in depths {
            let ties = if exact_ties { "" } else { ", ties in f32" };
            match end_to_end_fps(info, &c.params, args.frames, depth, exact_ties) {
                Ok(fps) => rows.push(format!("| {} | end to end, pipeline depth {depth}{ties} | {:.3} | {fps:.0} | | | |", c.name, 1e3 / fps)),
                Err(e) => rows.push(format!("| {} | end to end, depth {depth} | error: {e} | | | | |", c.name)),
            }
        }
    }
    println!();
    println!("{}x{} I420 8-bit; ops model per (sample, offset, frame): 3*guides + 10 + 2*outputs flops", info.width, info.height);
    println!("| config | measurement | ms/frame | frames/s | GFLOP/frame | ms at fp32 peak | of peak |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        println!("{r}");
    }
}
