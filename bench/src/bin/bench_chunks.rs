//! Chunked processing benchmark (issue 7): frames/s against chunk size, scaling over devices
//! with where the time goes, and a long run in bounded memory. Prints markdown tables.
//!
//!   R-live:  I420, temporal_past 2, search radius 3, patch radius 2
//!   offline: I420, temporal_past 2 + temporal_future 2, search radius 3, patch radius 2
//!   (`--search-radius` / `--patch-radius` change both: small radii show what batching saves)
//!
//!   bench_chunks [--backend cuda|cpu] [--frames 600] sizes     frames/s vs chunk size at 720p and 1080p
//!   bench_chunks [--devices 0,1] devices                       1080p, 1 device vs all listed ones
//!   bench_chunks --long 18000 [--devices all] long             10 minutes of 1080p30: fps, peak RSS, peak device memory
//!
//! `--backend sim` stands in for a device that costs the host nothing (`--sim-us` per job of
//! device time, jobs computed one after the other in the background, outputs not written): the
//! caller's thread and the workers then show how they overlap on any machine (`--devices 0,1`
//! gives two such devices).
//!
//! `--chunks` replaces the chunk list (`off` = unchunked at `--depth`, `auto`); `--sizes` the
//! sizes (e.g. 1280x720,1920x1080); `--config live|offline` keeps one configuration. Frames are
//! synthetic (bench/src/bench_frames.rs): 8 distinct frames cycled.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nlmdenoise_bench::bench_frames::frame;

use clap::Parser;
use nlmdenoise::device::chunked::{BackendFactory, ChunkStats, ChunkedBackend};
use nlmdenoise::device::{Backend, BackendKind, ChunkFrames, Devices};
use nlmdenoise::device::{Configured, DeviceMemory, Frame, FramePool, StreamSetup};
use nlmdenoise::plan::Plan;
use nlmdenoise::planar::Geometry;
use nlmdenoise::window::Job;
use nlmdenoise::BackendOptions;
use nlmdenoise::{Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};

#[derive(Parser)]
struct Args {
    /// sizes | devices | long | all
    #[arg(default_value = "all")]
    mode: String,
    #[arg(long, default_value = "cuda")]
    backend: String,
    /// Frames per measured run (after 2 chunks of warm-up).
    #[arg(long, default_value_t = 600)]
    frames: usize,
    /// Chunk sizes of the sizes table (comma list; off, auto or a number).
    #[arg(long, value_delimiter = ',', default_value = "off,1,2,4,8,16,32,64,auto")]
    chunks: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "1280x720,1920x1080")]
    sizes: Vec<String>,
    /// live, offline, bm3d, bm3d-offline or sr (default: live and offline). bm3d: BM3D `normal`,
    /// sigma 20, spatial two steps; bm3d-offline: the same over 1 past + 1 future frame; sr: NLM
    /// super-resolution x2 over 2 past + 2 future frames (`--size` is the input's).
    #[arg(long)]
    config: Option<String>,
    /// Frames lent both ways (`take_spare`, `push_planar`, `pop_planar`, `recycle`), as the
    /// element runs the engine: no unpack or pack on the caller's thread. Default: the copying API
    /// (`push` / `pop`).
    #[arg(long)]
    lent: bool,
    /// Frame size of the devices table.
    #[arg(long, default_value = "1920x1080")]
    size: String,
    /// Devices of the devices table and the long run (all or a comma list).
    #[arg(long, default_value = "all")]
    devices: String,
    /// Chunk size of the devices table and the long run.
    #[arg(long, default_value = "auto")]
    chunk: String,
    /// Pipeline depth of the unchunked rows.
    #[arg(long, default_value_t = 2)]
    depth: usize,
    /// CPU backend threads per worker (0 = all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Frames of the long run (18000 = 10 minutes at 30 fps).
    #[arg(long, default_value_t = 18000)]
    long: usize,
    /// Search radius of both configurations (default 3).
    #[arg(long, default_value_t = 3)]
    search_radius: u32,
    /// Patch radius of both configurations (default 2).
    #[arg(long, default_value_t = 2)]
    patch_radius: u32,
    /// Device time per job of `--backend sim`, microseconds.
    #[arg(long, default_value_t = 500)]
    sim_us: u64,
}

/// `--backend sim`: an asynchronous device that computes each launched job in `us`
/// microseconds, one after the other, without the host's CPU; `finish` sleeps until the job is
/// done. Upload and finish copy nothing (a DMA engine would).
struct Sim {
    us: u64,
    depth: usize,
    /// Completion time of each launched job, oldest first, with its target's frame.
    done_at: VecDeque<(Instant, Option<Arc<Frame>>)>,
    slots: Vec<Option<Arc<Frame>>>,
    frames: FramePool,
    out: Option<Geometry>,
}

impl Backend for Sim {
    fn describe(&self) -> String {
        format!("sim ({} us per job, depth {})", self.us, self.depth)
    }
    fn configure(&mut self, setup: &StreamSetup<'_>) -> nlmdenoise::Result<Configured> {
        self.done_at.clear();
        let ring_slots = setup.ring_slots.unwrap_or((setup.past + 1 + setup.future) as usize + self.depth);
        self.slots = vec![None; ring_slots];
        self.out = Some(setup.plan.output_geometry(setup.geometry));
        Ok(Configured { pipeline_depth: self.depth, ring_slots, stored: false, on_device: false })
    }
    fn pool(&mut self) -> &mut FramePool {
        &mut self.frames
    }
    fn submit(&mut self, slot: usize, frame: Arc<Frame>) -> nlmdenoise::Result<()> {
        self.slots[slot] = Some(frame);
        Ok(())
    }
    fn launch(&mut self, jobs: &[Job], _: &Plan) -> nlmdenoise::Result<()> {
        for job in jobs {
            let now = Instant::now();
            let start = self.done_at.back().map(|d| d.0).filter(|t| *t > now).unwrap_or(now);
            let target = self.slots[job.slot].take();
            self.done_at.push_back((start + Duration::from_micros(self.us), target));
        }
        Ok(())
    }
    fn finish(&mut self) -> nlmdenoise::Result<Frame> {
        let (t, target) = self.done_at.pop_front().ok_or_else(|| nlmdenoise::Error::State("finish without a launched job".into()))?;
        let now = Instant::now();
        if t > now {
            std::thread::sleep(t - now);
        }
        // The input as its own output (timing only); a frame of the pool where it is shared.
        let out = self.out.clone().ok_or_else(|| nlmdenoise::Error::State("finish before configure".into()))?;
        Ok(match target.map(Arc::try_unwrap) {
            Some(Ok(f)) if f.matches(&out) => f,
            _ => self.frames.take(&out),
        })
    }
    fn memory(&mut self, _: &Geometry, _: &Plan) -> Option<DeviceMemory> {
        None
    }
}

fn sim(args: &Args) -> Option<u64> {
    (args.backend == "sim").then_some(args.sim_us)
}

struct Config {
    name: &'static str,
    params: Params,
}

fn configs(args: &Args) -> Vec<Config> {
    let live = Params { search_radius: args.search_radius, patch_radius: args.patch_radius, temporal_past: 2, temporal_future: 0, ..Params::default() };
    let all = vec![Config { name: "R-live", params: live }, Config { name: "offline p2 f2", params: Params { temporal_future: 2, ..live } }];
    let bm3d = Params { algorithm: nlmdenoise::Algorithm::Bm3d, sigma: Some(20.0), temporal_past: 0, temporal_future: 0, ..Params::default() };
    match args.config.as_deref() {
        Some("live") => all.into_iter().take(1).collect(),
        Some("offline") => all.into_iter().skip(1).collect(),
        Some("bm3d") => vec![Config { name: "BM3D normal spatial", params: bm3d }],
        Some("bm3d-offline") => vec![Config { name: "V-BM3D normal p1 f1", params: Params { temporal_past: 1, temporal_future: 1, ..bm3d } }],
        Some("sr") => vec![Config { name: "SR x2 p2 f2", params: Params { temporal_past: 2, temporal_future: 2, ..Params::upscaling(2) } }],
        _ => all,
    }
}

fn kind(args: &Args) -> BackendKind {
    if sim(args).is_some() {
        // Not used for the backend itself (see `run`); host rules for devices `all`.
        return BackendKind::Cpu;
    }
    args.backend.parse().unwrap_or_else(|e| {
        // A typo must not silently benchmark another backend.
        eprintln!("bench_chunks: --backend: {e}");
        std::process::exit(2)
    })
}

/// Timings of one run.
#[derive(Default, Clone)]
struct Run {
    fps: f64,
    frames: usize,
    secs: f64,
    latency: usize,
    describe: String,
    /// Caller's thread per frame (ms): push (unpack, copy, dispatch, waiting), pop (pack).
    push_ms: f64,
    pop_ms: f64,
    /// Chunk counters per frame (ms), summed over workers for the worker columns.
    wait_ms: f64,
    upload_ms: f64,
    launch_ms: f64,
    finish_ms: f64,
    idle_ms: f64,
    uploads_per_frame: f64,
    /// Pooled host frames allocated during the measured run (0: the pools were reused).
    pool_growth: u64,
    pool_frames: u64,
}

/// Pops every finished frame (copied out, or lent and recycled); how many.
fn drain(d: &mut Denoiser<usize>, out: &mut OwnedFrame, lent: bool) -> nlmdenoise::Result<usize> {
    let mut n = 0;
    if lent {
        while let Some((_, f)) = d.pop_planar() {
            d.recycle(f);
            n += 1;
        }
    } else {
        while d.pop(&mut out.as_mut())?.is_some() {
            n += 1;
        }
    }
    Ok(n)
}

fn ms(ns: &AtomicU64, frames: usize) -> f64 {
    ns.load(Ordering::Relaxed) as f64 / 1e6 / frames as f64
}

fn reset_stats(s: &ChunkStats) {
    s.main_wait_ns.store(0, Ordering::Relaxed);
    for w in &s.workers {
        for c in [&w.upload_ns, &w.launch_ns, &w.finish_ns, &w.idle_ns, &w.chunks, &w.frames, &w.uploads] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

fn options(args: &Args, chunk: ChunkFrames, devices: Devices) -> BackendOptions {
    BackendOptions { kind: kind(args), threads: args.threads, pipeline_depth: args.depth, chunk_frames: chunk, devices, ..BackendOptions::default() }
}

/// Pushes `frames` frames (8 distinct ones cycled) through a denoiser on `opts` and pops
/// everything; `tick` runs after every push (memory sampling).
fn run(info: VideoInfo, params: Params, opts: &BackendOptions, sim_us: Option<u64>, frames: usize, lent: bool, mut tick: impl FnMut(usize)) -> nlmdenoise::Result<Run> {
    let (backend, stats): (Box<dyn Backend>, Option<Arc<ChunkStats>>) = if let Some(us) = sim_us {
        let make = move |depth: usize| Box::new(Sim { us, depth, done_at: VecDeque::new(), slots: Vec::new(), frames: FramePool::host(), out: None }) as Box<dyn Backend>;
        if opts.chunked() {
            let ordinals = match &opts.devices {
                Devices::List(v) => v.clone(),
                Devices::All => vec![0, 1],
                Devices::Default => vec![opts.device_id],
            };
            let factory: BackendFactory = Arc::new(move |_, depth| Ok(make(depth)));
            let c = ChunkedBackend::with_factory(opts.chunk_frames, &ordinals, factory)?;
            let s = c.stats();
            (Box::new(c), Some(s))
        } else {
            (make(opts.pipeline_depth), None)
        }
    } else if opts.chunked() {
        let c = nlmdenoise::backends::chunked_backend(opts)?;
        let s = c.stats();
        (Box::new(c), Some(s))
    } else {
        (nlmdenoise::backends::create(opts)?, None)
    };
    let mut d: Denoiser<usize> = Denoiser::with_backend(info, params, backend)?;
    let latency = d.latency_frames();
    let inputs: Vec<OwnedFrame> = (0..8).map(|n| frame(info, n, 11)).collect();
    let mut out = OwnedFrame::new(d.output_info());
    // Warm-up: kernels compiled, buffers allocated, two chunks through.
    let warm = (latency + 8).max(16);
    for i in 0..warm {
        d.push(&inputs[i % 8].as_ref(), i)?;
        while d.pop(&mut out.as_mut())?.is_some() {}
    }
    d.finish_stream()?;
    while d.pop(&mut out.as_mut())?.is_some() {}
    let pool_before = stats.as_ref().map(|s| s.pool_frames.load(Ordering::Relaxed)).unwrap_or(0);
    if let Some(s) = &stats {
        reset_stats(s);
    }
    let (mut push, mut pop) = (Duration::ZERO, Duration::ZERO);
    let t = Instant::now();
    let mut popped = 0;
    for i in 0..frames {
        let t0 = Instant::now();
        if lent {
            // The spare frames keep an earlier output: what a source would overwrite.
            let f = d.take_spare();
            d.push_planar(f, i)?;
        } else {
            d.push(&inputs[i % 8].as_ref(), i)?;
        }
        let t1 = Instant::now();
        popped += drain(&mut d, &mut out, lent)?;
        pop += t1.elapsed();
        push += t1 - t0;
        tick(i);
    }
    let t0 = Instant::now();
    d.finish_stream()?;
    push += t0.elapsed();
    let t1 = Instant::now();
    popped += drain(&mut d, &mut out, lent)?;
    pop += t1.elapsed();
    let secs = t.elapsed().as_secs_f64();
    let n = popped.max(1);
    let mut r = Run {
        fps: popped as f64 / secs,
        frames: popped,
        secs,
        latency,
        describe: d.backend_description(),
        push_ms: push.as_secs_f64() * 1e3 / n as f64,
        pop_ms: pop.as_secs_f64() * 1e3 / n as f64,
        ..Default::default()
    };
    if let Some(s) = &stats {
        r.wait_ms = ms(&s.main_wait_ns, n);
        r.pool_frames = s.pool_frames.load(Ordering::Relaxed);
        r.pool_growth = r.pool_frames - pool_before;
        for w in &s.workers {
            r.upload_ms += ms(&w.upload_ns, n);
            r.launch_ms += ms(&w.launch_ns, n);
            r.finish_ms += ms(&w.finish_ns, n);
            r.idle_ms += ms(&w.idle_ns, n);
            r.uploads_per_frame += w.uploads.load(Ordering::Relaxed) as f64 / n as f64;
        }
    }
    Ok(r)
}

fn chunk_arg(args: &Args) -> ChunkFrames {
    args.chunk.parse().unwrap_or_else(|e| {
        eprintln!("bench_chunks: --chunk: {e}");
        std::process::exit(2)
    })
}

fn parse_size(s: &str) -> Option<(usize, usize)> {
    let (w, h) = s.split_once('x')?;
    Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
}

fn flush() {
    let _ = std::io::stdout().flush();
}

fn sizes_table(args: &Args) {
    println!("\n### Frames/s against chunk size ({} backend, {} frames per run)\n", args.backend, args.frames);
    println!("Per output frame, ms. Caller's thread: push (unpack, copy in, dispatch, waiting, copy out), pop (pack); of push: copy in (into a pooled input frame), copy out (output planes into the engine's frame when the worker could not write them there), wait (for a worker). Workers, summed: idle (waiting for a chunk). Pool: pooled host frames (allocated during the measured run).\n");
    println!("| size | config | chunk | latency (frames) | frames/s | push | pop | wait | worker idle | uploads/frame | pool | backend |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    flush();
    for size in &args.sizes {
        let Some((w, h)) = parse_size(size) else {
            println!("| {size} | bad size |");
            continue;
        };
        let info = match VideoInfo::new(PixelFormat::I420, w, h) {
            Ok(i) => i,
            Err(e) => {
                println!("| {size} | error: {e} |");
                continue;
            }
        };
        for c in configs(args) {
            for chunk in &args.chunks {
                let spec: ChunkFrames = match chunk.parse() {
                    Ok(s) => s,
                    Err(e) => {
                        println!("| {size} | {} | {chunk} | error: {e} |", c.name);
                        continue;
                    }
                };
                let label = if spec == ChunkFrames::Off { format!("off (depth {})", args.depth) } else { chunk.clone() };
                match run(info, c.params, &options(args, spec, Devices::Default), sim(args), args.frames, args.lent, |_| {}) {
                    Ok(r) => println!(
                        "| {size} | {} | {label} | {} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} | {} (+{}) | {} |",
                        c.name, r.latency, r.fps, r.push_ms, r.pop_ms, r.wait_ms, r.idle_ms, r.uploads_per_frame, r.pool_frames, r.pool_growth, r.describe
                    ),
                    Err(e) => println!("| {size} | {} | {label} | error: {e} | | | | | | | | |", c.name),
                }
                flush();
            }
        }
    }
}

fn device_list(args: &Args) -> nlmdenoise::Result<Vec<usize>> {
    let d: Devices = args.devices.parse()?;
    nlmdenoise::backends::device_ordinals(&options(args, ChunkFrames::Auto, d))
}

fn devices_table(args: &Args) {
    let all = match device_list(args) {
        Ok(v) => v,
        Err(e) => {
            println!("\ndevices: error: {e}");
            return;
        }
    };
    let chunk = chunk_arg(args);
    let (w, h) = args.size.split_once('x').and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?))).unwrap_or_else(|| {
        eprintln!("bench_chunks: --size: expected WxH, got {}", args.size);
        std::process::exit(2)
    });
    let info = VideoInfo::new(PixelFormat::I420, w, h).expect("a valid size");
    let api = if args.lent { "frames lent both ways" } else { "the copying API" };
    println!("\n### Scaling over devices, {w}x{h} I420, chunk {chunk} ({} backend, {} frames per run, {api})\n", args.backend, args.frames);
    println!("Per output frame, ms. Caller's thread: push (unpack + copy in + dispatch + waiting + copy out), of which copy in (into pooled input frames), wait (for a worker) and copy out (output planes into the engine's frame), and pop (pack). Workers (summed over workers): upload (host staging or DMA enqueue), launch (enqueue kernels), finish (waiting for kernels + download into a pooled output frame), write (output planes into the engine's frame), idle (waiting for a chunk). Pool: pooled host frames (allocated during the measured run).\n");
    println!("| config | devices | frames/s | speed-up | latency | push | wait | pop | upload | launch | finish | idle | pool |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    flush();
    let mut sets = vec![vec![all[0]]];
    if all.len() > 1 {
        sets.push(all.clone());
    }
    for c in configs(args) {
        let mut base = None;
        for set in &sets {
            let label = set.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
            // A single device as a chunked run too, so the two rows differ only in the workers.
            let mut o = options(args, chunk, Devices::List(set.clone()));
            if set.len() == 1 {
                o.devices = Devices::Default;
                o.device_id = set[0];
                if o.chunk_frames == ChunkFrames::Off {
                    o.chunk_frames = ChunkFrames::Auto;
                }
            }
            match run(info, c.params, &o, sim(args), args.frames, args.lent, |_| {}) {
                Ok(r) => {
                    let b = *base.get_or_insert(r.fps);
                    println!(
                        "| {} | {label} | {:.1} | {:.2}x | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} (+{}) |",
                        c.name,
                        r.fps,
                        r.fps / b,
                        r.latency,
                        r.push_ms,
                        r.wait_ms,
                        r.pop_ms,
                        r.upload_ms,
                        r.launch_ms,
                        r.finish_ms,
                        r.idle_ms,
                        r.pool_frames,
                        r.pool_growth
                    );
                }
                Err(e) => println!("| {} | {label} | error: {e} | | | | | | | | | | |", c.name),
            }
            flush();
        }
    }
    if all.len() < 2 {
        println!("\n(one device: the 2-device row is skipped)");
    }
}

/// Peak resident set (VmHWM) in KiB.
fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn long_run(args: &Args) {
    let devices = match device_list(args) {
        Ok(v) => v,
        Err(e) => {
            println!("\nlong run: error: {e}");
            return;
        }
    };
    let chunk = chunk_arg(args);
    let info = VideoInfo::new(PixelFormat::I420, 1920, 1080).expect("1080p");
    let c = configs(args).into_iter().next().expect("a config");
    // Device memory in use, sampled from one probe backend per device (the device-wide figure,
    // so it includes every context on the device).
    let peak_used: Arc<Vec<AtomicU64>> = Arc::new(devices.iter().map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop, devs, k) = (peak_used.clone(), stop.clone(), devices.clone(), kind(args));
        std::thread::spawn(move || {
            let gpu = k != BackendKind::Cpu && k != BackendKind::Reference;
            let mut base = vec![u64::MAX; devs.len()];
            while !stop.load(Ordering::Relaxed) {
                for (i, &d) in devs.iter().enumerate() {
                    if let Some(used) = gpu.then(|| nlmdenoise::device::cuda::device_memory_in_use(d)).flatten() {
                        base[i] = base[i].min(used);
                        peak[i].fetch_max(used, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            base
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let hwm_before = vm_hwm_kib().unwrap_or(0);
    let o = if devices.len() > 1 { options(args, chunk, Devices::List(devices.clone())) } else { BackendOptions { device_id: devices[0], ..options(args, chunk, Devices::Default) } };
    let mut hwm_at = Vec::new();
    let total = args.long;
    let r = run(info, c.params, &o, sim(args), total, args.lent, |i| {
        if (i + 1) % (total / 4).max(1) == 0 {
            hwm_at.push((i + 1, vm_hwm_kib().unwrap_or(0)));
        }
    });
    stop.store(true, Ordering::Relaxed);
    let base = sampler.join().unwrap_or_default();
    println!("\n### Long run: {total} frames of 1920x1080 I420 ({}, chunk {chunk}, {} backend, devices {:?})\n", c.name, args.backend, devices);
    match r {
        Ok(r) => {
            println!("| frames | seconds | frames/s | latency | peak RSS (VmHWM) | VmHWM after 1/4, 2/4, 3/4, 4/4 | pooled host frames (allocated during the run) | peak device memory used (device-wide, `device::cuda::device_memory_in_use` every 50 ms; idle baseline) |");
            println!("| ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |");
            let dev = devices
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let p = peak_used[i].load(Ordering::Relaxed);
                    if p == 0 {
                        format!("dev {d}: n/a (device_memory() reported nothing)")
                    } else {
                        format!("dev {d}: {} MiB ({} MiB)", p >> 20, base.get(i).copied().unwrap_or(0).min(p) >> 20)
                    }
                })
                .collect::<Vec<_>>()
                .join("; ");
            let marks = hwm_at.iter().map(|(_, k)| format!("{} MiB", k >> 10)).collect::<Vec<_>>().join(", ");
            println!(
                "| {} | {:.1} | {:.1} | {} | {} MiB (before the run {} MiB) | {marks} | {} (+{}) | {dev} |",
                r.frames,
                r.secs,
                r.fps,
                r.latency,
                vm_hwm_kib().unwrap_or(0) >> 10,
                hwm_before >> 10,
                r.pool_frames,
                r.pool_growth
            );
            println!("\nbackend: {}", r.describe);
        }
        Err(e) => println!("error: {e}"),
    }
    flush();
}

fn main() {
    let args = Args::parse();
    println!("bench_chunks: backend {}, host {} cores", args.backend, std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    match args.mode.as_str() {
        "sizes" => sizes_table(&args),
        "devices" => devices_table(&args),
        "long" => long_run(&args),
        "all" => {
            sizes_table(&args);
            devices_table(&args);
        }
        m => {
            eprintln!("unknown mode '{m}' (sizes, devices, long, all)");
            std::process::exit(2);
        }
    }
}
