//! Benchmark of the multi-pass CUDA path (docs/multipass.md): a table over offsets per pass
//! {1,2,3,4} x intermediate {f32,f16,unorm10} x configuration, kernel time only (CUDA events),
//! with the bytes each frame moves according to the pass plan and the achieved bandwidth as a
//! fraction of a measured device-to-device copy; the fused kernel's frames/s for comparison.
//!
//!   R-live:   1920x1080 I420, past 2, search radius 3, patch radius 2
//!   R-knlm:   1920x1080 I420, past 1 + future 1, search radius 2, patch radius 4
//!   5x5/5x5:  search radius 2, patch radius 2, single frame, GRAY8 at 480p, 720p, 1080p
//!
//! `--errors`: max/mean abs error and PSNR change of f16/unorm10 vs f32 on a smooth synthetic
//! scene with Gaussian noise (sigma 10 and 20), through the engine.
//!
//!   cargo run --release --bin bench_multipass -- [--iters 30] [--errors] [--quick]

use nlmdenoise_bench::bench_frames::uploaded_jobs;

use clap::Parser;
use cudarc::driver::result;
use nlmdenoise::device::cuda::raw::{DeviceBuffer, Event, Stream};
use nlmdenoise::device::BackendKind;
use nlmdenoise::nlm::cuda::multipass;
use nlmdenoise::nlm::{GpuKernel, Intermediate, NlmOptions};
use nlmdenoise::plan::Plan;
use nlmdenoise::planar::Geometry;
use nlmdenoise::BackendOptions;
use nlmdenoise::{Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};

#[derive(Parser)]
struct Args {
    /// Timed frames per batch (median of 3 batches).
    #[arg(long, default_value_t = 30)]
    iters: usize,
    /// Only the error measurement.
    #[arg(long)]
    errors: bool,
    /// Only offsets per pass 3 and the 1080p configurations (a short run).
    #[arg(long)]
    quick: bool,
}

struct Config {
    name: String,
    info: VideoInfo,
    params: Params,
}

fn configs(quick: bool) -> Vec<Config> {
    let base = Params::default();
    let hd = |f| VideoInfo::new(f, 1920, 1080).unwrap();
    let mut v = vec![
        Config { name: "R-live 1080p I420".into(), info: hd(PixelFormat::I420), params: Params { search_radius: 3, patch_radius: 2, temporal_past: 2, temporal_future: 0, ..base } },
        Config { name: "R-knlm 1080p I420".into(), info: hd(PixelFormat::I420), params: Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..base } },
    ];
    let sizes: &[(usize, usize, &str)] = if quick { &[(1920, 1080, "1080p")] } else { &[(854, 480, "480p"), (1280, 720, "720p"), (1920, 1080, "1080p")] };
    for &(w, h, n) in sizes {
        v.push(Config {
            name: format!("5x5/5x5 {n} GRAY8"),
            info: VideoInfo::new(PixelFormat::GRAY8, w, h).unwrap(),
            params: Params { search_radius: 2, patch_radius: 2, temporal_past: 0, temporal_future: 0, ..base },
        });
    }
    v
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn multipass_ms(c: &Config, per_pass: u32, inter: Intermediate, iters: usize) -> nlmdenoise::Result<f64> {
    let opts =
        BackendOptions { kind: BackendKind::Cuda, nlm: NlmOptions { gpu_kernel: GpuKernel::Multipass, offsets_per_pass: per_pass, intermediate: inter, ..Default::default() }, ..Default::default() };
    let mut b = nlmdenoise::backends::cuda(&opts)?;
    let (plan, jobs) = uploaded_jobs(&mut b, c.info, &c.params)?;
    let mut t = Vec::new();
    for _ in 0..3 {
        t.push(b.time_kernels(&jobs, &plan, iters)?);
    }
    Ok(median(t))
}

fn fused_ms(c: &Config, iters: usize) -> nlmdenoise::Result<f64> {
    let opts = BackendOptions { kind: BackendKind::Cuda, nlm: NlmOptions { gpu_kernel: GpuKernel::Fused, ..Default::default() }, ..Default::default() };
    let mut b = nlmdenoise::backends::cuda(&opts)?;
    let (plan, jobs) = uploaded_jobs(&mut b, c.info, &c.params)?;
    let mut t = Vec::new();
    for _ in 0..3 {
        t.push(b.time_kernels(&jobs, &plan, iters)?);
    }
    Ok(median(t))
}

/// Device-to-device copy bandwidth (bytes read + written per second) of a 512 MiB copy.
fn copy_bandwidth() -> Result<f64, nlmdenoise::BackendError> {
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| nlmdenoise::BackendError::Driver(e.to_string()))?;
    let bytes = 512usize << 20;
    let a = DeviceBuffer::new(&ctx, bytes)?;
    let b = DeviceBuffer::new(&ctx, bytes)?;
    let s = Stream::new(&ctx)?;
    let (e0, e1) = (Event::new(&ctx, true)?, Event::new(&ctx, true)?);
    let mut best = 0f64;
    for _ in 0..5 {
        e0.record(&s)?;
        for _ in 0..4 {
            // SAFETY: both ranges are whole allocations of `bytes` bytes.
            unsafe { result::memcpy_dtod_async(b.ptr, a.ptr, bytes, s.raw) }.map_err(|e| nlmdenoise::BackendError::Driver(e.to_string()))?;
        }
        e1.record(&s)?;
        e1.synchronize()?;
        let ms = e0.elapsed_ms(&e1)? as f64;
        best = best.max(4.0 * 2.0 * bytes as f64 / (ms * 1e-3));
    }
    Ok(best)
}

fn inter_name(i: Intermediate) -> &'static str {
    match i {
        Intermediate::F32 => "f32",
        Intermediate::F16 => "f16",
        Intermediate::Unorm10 => "unorm10",
    }
}

fn speed_table(args: &Args) {
    let copy = match copy_bandwidth() {
        Ok(b) => b,
        Err(e) => {
            println!("FAIL: device-to-device copy: {e}");
            f64::NAN
        }
    };
    println!("device-to-device copy (cuMemcpyDtoD, 512 MiB, read + write): {:.0} GB/s", copy / 1e9);
    println!();
    println!("| config | kernel | offsets/pass | intermediate | ms/frame | frames/s | MB moved/frame (pass plan) | GB/s | of copy BW |");
    println!("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    let pps: &[u32] = if args.quick { &[3] } else { &[1, 2, 3, 4] };
    for c in configs(args.quick) {
        match fused_ms(&c, args.iters) {
            Ok(ms) => println!("| {} | fused | - | - | {ms:.3} | {:.0} | | | |", c.name, 1e3 / ms),
            Err(e) => println!("| {} | fused | - | - | error: {e} | | | | |", c.name),
        }
        let geometry = Geometry::from_video_info(&c.info);
        let plan = Plan::new(&geometry, &c.params).expect("plan");
        let mut dts: Vec<i32> = (1..=c.params.temporal_past as i32).map(|d| -d).collect();
        dts.extend(1..=c.params.temporal_future as i32);
        for &pp in pps {
            for inter in [Intermediate::F32, Intermediate::F16, Intermediate::Unorm10] {
                let bytes = multipass::bytes_per_frame(&geometry, plan.nlm("bench").expect("NLM plan"), &dts, pp, inter) as f64;
                match multipass_ms(&c, pp, inter, args.iters) {
                    Ok(ms) => {
                        let bw = bytes / (ms * 1e-3);
                        println!("| {} | multipass | {pp} | {} | {ms:.3} | {:.0} | {:.1} | {:.0} | {:.0}% |", c.name, inter_name(inter), 1e3 / ms, bytes / 1e6, bw / 1e9, 100.0 * bw / copy);
                    }
                    Err(e) => println!("| {} | multipass | {pp} | {} | error: {e} | | {:.1} | | |", c.name, inter_name(inter), bytes / 1e6),
                }
            }
        }
    }
}

/// Smooth synthetic scene (gradients, soft edges, slow motion) plus Gaussian noise.
fn scene(info: VideoInfo, n: usize, sigma: f64, seed: u64) -> (OwnedFrame, OwnedFrame) {
    let mut clean = OwnedFrame::new(info);
    let mut noisy = OwnedFrame::new(info);
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(n as u64 + 1);
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let fi = info.format.info();
    for c in fi.components.iter() {
        let (w, h) = (info.width.div_ceil(c.sub_x), info.height.div_ceil(c.sub_y));
        for y in 0..h {
            for x in 0..w {
                let (xf, yf) = (x as f64 + 0.7 * n as f64, y as f64);
                let disc = if ((xf - w as f64 * 0.5).powi(2) + (yf - h as f64 * 0.5).powi(2)).sqrt() < h as f64 * 0.3 { 50.0 } else { 0.0 };
                let v = 60.0 + 0.25 * xf * 256.0 / w as f64 + 40.0 * (yf * 0.02).sin() * (xf * 0.013).cos() + disc;
                let g = (-2.0 * uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * uniform()).cos();
                let i = y * clean.strides[c.memory_plane] + c.offset + x * c.step;
                clean.planes[c.memory_plane][i] = v.round().clamp(0.0, 255.0) as u8;
                noisy.planes[c.memory_plane][i] = (v + sigma * g).round().clamp(0.0, 255.0) as u8;
            }
        }
    }
    (clean, noisy)
}

fn psnr(a: &OwnedFrame, b: &OwnedFrame) -> f64 {
    let (mut se, mut n) = (0f64, 0usize);
    for (p, q) in a.planes.iter().zip(&b.planes) {
        for (&x, &y) in p.iter().zip(q) {
            se += (x as f64 - y as f64).powi(2);
            n += 1;
        }
    }
    10.0 * (255.0f64 * 255.0 / (se / n as f64).max(1e-12)).log10()
}

fn denoise(info: VideoInfo, params: Params, opts: &BackendOptions, inputs: &[OwnedFrame]) -> nlmdenoise::Result<Vec<OwnedFrame>> {
    let mut d: Denoiser<usize> = Denoiser::new(info, params, opts)?;
    let mut outs = vec![None; inputs.len()];
    let mut o = OwnedFrame::new(info);
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i)?;
        while let Some(t) = d.pop(&mut o.as_mut())? {
            outs[t] = Some(o.clone());
        }
    }
    d.finish_stream()?;
    while let Some(t) = d.pop(&mut o.as_mut())? {
        outs[t] = Some(o.clone());
    }
    Ok(outs.into_iter().map(|o| o.expect("every frame comes out")).collect())
}

fn error_table() {
    println!();
    println!("Error of reduced-precision intermediates vs f32 (smooth synthetic scene + Gaussian noise, 6 frames, I420 1280x720, 8-bit code values)");
    println!("| config | sigma | strength | offsets/pass | intermediate | max abs err | mean abs err | PSNR f32 (dB) | PSNR (dB) | change (dB) |");
    println!("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    let info = VideoInfo::new(PixelFormat::I420, 1280, 720).unwrap();
    let base = Params::default();
    let cfgs =
        [("R-live", Params { search_radius: 3, patch_radius: 2, temporal_past: 2, ..base }), ("R-knlm", Params { search_radius: 2, patch_radius: 4, temporal_past: 1, temporal_future: 1, ..base })];
    for sigma in [10.0, 20.0] {
        let frames: Vec<(OwnedFrame, OwnedFrame)> = (0..6).map(|n| scene(info, n, sigma, 42)).collect();
        let noisy: Vec<OwnedFrame> = frames.iter().map(|f| f.1.clone()).collect();
        for (name, p) in cfgs {
            let h = (sigma * 1.2) as f32;
            let params = Params { strength: h, chroma_strength: h, ..p };
            for pp in [1u32, 3] {
                let opts = |inter| BackendOptions {
                    kind: BackendKind::Cuda,
                    nlm: NlmOptions { gpu_kernel: GpuKernel::Multipass, offsets_per_pass: pp, intermediate: inter, ..Default::default() },
                    ..Default::default()
                };
                let reference = match denoise(info, params, &opts(Intermediate::F32), &noisy) {
                    Ok(r) => r,
                    Err(e) => {
                        println!("| {name} | {sigma} | {h} | {pp} | f32 | error: {e} | | | | |");
                        continue;
                    }
                };
                let p32: f64 = frames.iter().zip(&reference).map(|(f, r)| psnr(&f.0, r)).sum::<f64>() / frames.len() as f64;
                for inter in [Intermediate::F16, Intermediate::Unorm10] {
                    match denoise(info, params, &opts(inter), &noisy) {
                        Ok(out) => {
                            let (mut max, mut sum, mut n) = (0u8, 0f64, 0usize);
                            for (a, b) in reference.iter().zip(&out) {
                                for (p, q) in a.planes.iter().zip(&b.planes) {
                                    for (&x, &y) in p.iter().zip(q) {
                                        max = max.max(x.abs_diff(y));
                                        sum += x.abs_diff(y) as f64;
                                        n += 1;
                                    }
                                }
                            }
                            let pq: f64 = frames.iter().zip(&out).map(|(f, r)| psnr(&f.0, r)).sum::<f64>() / frames.len() as f64;
                            println!("| {name} | {sigma} | {h} | {pp} | {} | {max} | {:.4} | {p32:.3} | {pq:.3} | {:+.3} |", inter_name(inter), sum / n as f64, pq - p32);
                        }
                        Err(e) => println!("| {name} | {sigma} | {h} | {pp} | {} | error: {e} | | | | |", inter_name(inter)),
                    }
                }
            }
        }
    }
}

fn main() {
    let args = Args::parse();
    if !nlmdenoise::device::cuda::available() {
        println!("SKIPPED: no usable CUDA device/driver/NVRTC");
        return;
    }
    if !args.errors {
        speed_table(&args);
    }
    error_table();
}
