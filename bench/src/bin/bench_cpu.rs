//! `bench_cpu`: measures the engine alone on raw 8-bit I420 clips, for `scripts/bench_cpu.sh`.
//!
//! ```text
//! bench_cpu noise --input clean.yuv --output noisy.yuv --width 1280 --height 720 --sigma 12 --seed 1
//! bench_cpu run   --input noisy.yuv --width 1280 --height 720 --patch-radius 3 --search-radius 7 \
//!                 --strength 14 [--output out.yuv] [--backend cpu] [--threads 0] [--repeat 3]
//! bench_cpu psnr  --reference clean.yuv --input out.yuv --width 1280 --height 720
//! ```
//!
//! `run` loads every frame first, then times push/pop through `Denoiser` (unpack, denoise, pack),
//! best of `--repeat` passes, and prints one line `fps=... seconds=... frames=... backend=...`.
//! `psnr` prints `psnr_y=... psnr_yuv=...` (all planes' squared errors pooled).

use std::fs;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use nlmdenoise::{BackendKind, BackendOptions, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo, Weighting};
use nlmdenoise_bench::gaussian::SplitMix64;

#[derive(Debug, Parser)]
#[command(name = "bench_cpu", about = "Engine-only timing and quality helpers for raw I420 clips")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Adds Gaussian noise (SplitMix64 + Box-Muller, fixed seed) to every sample.
    Noise {
        #[arg(long)]
        input: String,
        #[arg(long)]
        output: String,
        #[arg(long)]
        width: usize,
        #[arg(long)]
        height: usize,
        #[arg(long, default_value_t = 12.0)]
        sigma: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Denoises a clip and reports frames per second of the engine.
    Run {
        #[arg(long)]
        input: String,
        #[arg(long)]
        output: Option<String>,
        #[arg(long)]
        width: usize,
        #[arg(long)]
        height: usize,
        #[arg(long, default_value_t = 7)]
        search_radius: u32,
        #[arg(long, default_value_t = 3)]
        patch_radius: u32,
        #[arg(long, default_value_t = 10.0)]
        strength: f32,
        /// Chroma strength (default: same as --strength).
        #[arg(long)]
        chroma_strength: Option<f32>,
        #[arg(long, default_value_t = 0)]
        temporal_past: u32,
        #[arg(long, default_value_t = 1.0)]
        wref: f32,
        #[arg(long, default_value = "welsch")]
        weighting: String,
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// CPU worker threads (0 = all cores).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Timed passes over the clip; the best is reported.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Use only the first N frames (0 = all).
        #[arg(long, default_value_t = 0)]
        frames: usize,
    },
    /// PSNR of a clip against a reference clip.
    Psnr {
        #[arg(long)]
        reference: String,
        #[arg(long)]
        input: String,
        #[arg(long)]
        width: usize,
        #[arg(long)]
        height: usize,
        /// Compare only the first N frames (0 = all the shorter clip has).
        #[arg(long, default_value_t = 0)]
        frames: usize,
    },
}

fn frame_bytes(w: usize, h: usize) -> (usize, usize) {
    let luma = w * h;
    let chroma = w.div_ceil(2) * h.div_ceil(2);
    (luma, luma + 2 * chroma)
}

fn read_clip(path: &str, w: usize, h: usize) -> Result<Vec<u8>> {
    let data = fs::read(path).with_context(|| format!("reading {path}"))?;
    let (_, fb) = frame_bytes(w, h);
    if data.is_empty() || data.len() % fb != 0 {
        bail!("{path}: {} bytes is not a whole number of {w}x{h} I420 frames ({fb} bytes each)", data.len());
    }
    Ok(data)
}

fn to_frame(info: VideoInfo, bytes: &[u8]) -> OwnedFrame {
    let mut f = OwnedFrame::new(info);
    let (l, _) = frame_bytes(info.width, info.height);
    let c = (l..bytes.len()).len() / 2;
    f.planes[0].copy_from_slice(&bytes[..l]);
    f.planes[1].copy_from_slice(&bytes[l..l + c]);
    f.planes[2].copy_from_slice(&bytes[l + c..]);
    f
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Noise { input, output, width, height, sigma, seed } => {
            let mut data = read_clip(&input, width, height)?;
            let mut rng = SplitMix64(seed);
            for pair in data.chunks_mut(2) {
                let (a, b) = rng.normal_pair();
                for (v, n) in pair.iter_mut().zip([a, b]) {
                    *v = (*v as f64 + sigma * n).round().clamp(0.0, 255.0) as u8;
                }
            }
            fs::write(&output, &data).with_context(|| format!("writing {output}"))?;
        }
        Cmd::Run { input, output, width, height, search_radius, patch_radius, strength, chroma_strength, temporal_past, wref, weighting, backend, threads, repeat, frames } => {
            let data = read_clip(&input, width, height)?;
            let (_, fb) = frame_bytes(width, height);
            let info = VideoInfo::new(PixelFormat::I420, width, height)?;
            let mut inputs: Vec<OwnedFrame> = data.chunks(fb).map(|c| to_frame(info, c)).collect();
            if frames > 0 {
                inputs.truncate(frames);
            }
            let params = Params {
                search_radius,
                patch_radius,
                temporal_past,
                temporal_future: 0,
                strength,
                chroma_strength: chroma_strength.unwrap_or(strength),
                wref,
                weighting: weighting.parse::<Weighting>()?,
                ..Params::default()
            };
            let options = BackendOptions { kind: backend.parse::<BackendKind>()?, threads, ..Default::default() };
            let mut outs: Vec<OwnedFrame> = inputs.iter().map(|_| OwnedFrame::new(info)).collect();
            let mut best = f64::INFINITY;
            let mut description = String::new();
            for _ in 0..repeat.max(1) {
                // A fresh denoiser per pass (its set-up is not timed).
                let mut d: Denoiser<usize> = Denoiser::new(info, params, &options)?;
                description = d.backend_description();
                let start = Instant::now();
                for (i, f) in inputs.iter().enumerate() {
                    d.push(&f.as_ref(), i)?;
                    let mut o = OwnedFrame::new(info);
                    while let Some(k) = d.pop(&mut o.as_mut())? {
                        std::mem::swap(&mut outs[k], &mut o);
                    }
                }
                d.finish_stream()?;
                let mut o = OwnedFrame::new(info);
                while let Some(k) = d.pop(&mut o.as_mut())? {
                    std::mem::swap(&mut outs[k], &mut o);
                }
                best = best.min(start.elapsed().as_secs_f64());
            }
            println!("fps={:.3} seconds={:.3} frames={} backend=\"{}\"", inputs.len() as f64 / best, best, inputs.len(), description);
            if let Some(path) = output {
                let mut bytes = Vec::with_capacity(fb * outs.len());
                for o in &outs {
                    for p in &o.planes {
                        bytes.extend_from_slice(p);
                    }
                }
                fs::write(&path, bytes).with_context(|| format!("writing {path}"))?;
            }
        }
        Cmd::Psnr { reference, input, width, height, frames } => {
            let r = read_clip(&reference, width, height)?;
            let x = read_clip(&input, width, height)?;
            let (l, fb) = frame_bytes(width, height);
            let mut n = r.len().min(x.len()) / fb;
            if frames > 0 {
                n = n.min(frames);
            }
            let (mut se_y, mut se_all) = (0f64, 0f64);
            for f in 0..n {
                for i in 0..fb {
                    let d = r[f * fb + i] as f64 - x[f * fb + i] as f64;
                    se_all += d * d;
                    if i < l {
                        se_y += d * d;
                    }
                }
            }
            let psnr = |se: f64, count: usize| if se == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 * count as f64 / se).log10() };
            println!("psnr_y={:.3} psnr_yuv={:.3} frames={n}", psnr(se_y, n * l), psnr(se_all, n * fb));
        }
    }
    Ok(())
}
