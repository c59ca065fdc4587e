//! `addnoise`: adds deterministic white Gaussian noise to a .y4m clip (for demos and tests).
//!
//! ```text
//! addnoise -i clean.y4m -o noisy.y4m --sigma 15 --seed 1
//! ```
//!
//! Every sample of every plane gets an independent N(0, sigma^2) value added (sigma in 8-bit code
//! values, scaled to the clip's bit depth), rounded to the nearest integer and clamped. The same
//! seed gives the same bytes on every machine: the generator is SplitMix64 and the normal variates
//! come from the Box-Muller transform, both written out here.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};

use anyhow::{bail, Context, Result};
use clap::Parser;

use nlmdenoise::y4m::{Y4mReader, Y4mWriter};
use nlmdenoise::OwnedFrame;

use nlmdenoise_bench::gaussian::SplitMix64;

/// Adds white Gaussian noise with a fixed seed to a YUV4MPEG2 clip.
#[derive(Debug, Parser)]
#[command(name = "addnoise", version)]
struct Cli {
    /// Input .y4m file, or - for standard input.
    #[arg(short, long)]
    input: String,
    /// Output .y4m file, or - for standard output.
    #[arg(short, long)]
    output: String,
    /// Noise standard deviation in 8-bit code values.
    #[arg(long, default_value_t = 15.0)]
    sigma: f64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Add noise to luma only (chroma copied).
    #[arg(long)]
    luma_only: bool,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(&cli) {
        eprintln!("addnoise: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: &Cli) -> Result<()> {
    if !(cli.sigma.is_finite() && cli.sigma >= 0.0) {
        bail!("sigma must be a finite number >= 0, got {}", cli.sigma);
    }
    let input: Box<dyn BufRead> =
        if cli.input == "-" { Box::new(BufReader::new(io::stdin().lock())) } else { Box::new(BufReader::new(File::open(&cli.input).with_context(|| format!("cannot open '{}'", cli.input))?)) };
    let output: Box<dyn Write> =
        if cli.output == "-" { Box::new(BufWriter::new(io::stdout().lock())) } else { Box::new(BufWriter::new(File::create(&cli.output).with_context(|| format!("cannot create '{}'", cli.output))?)) };
    let mut reader = Y4mReader::new(input).context("reading the y4m header")?;
    let header = reader.header().clone();
    let layout = header.layout;
    let info = header.video_info();
    let wide = info.format.info().bytes_per_sample == 2;
    // Engine samples are the file's shifted left by `layout.shift`; the noise follows the engine's
    // 8-bit scale so that sigma means the same at every bit depth.
    let scale = info.format.info().scale_to_8bit();
    let max = (layout.max_value() << layout.shift) as f64;
    let mut rng = SplitMix64(cli.seed);
    let mut writer = Y4mWriter::new(output, header);
    let mut frame = OwnedFrame::new(info);
    let mut n = 0u64;
    while let Some(params) = reader.read_frame(&mut frame).with_context(|| format!("reading frame {n}"))? {
        let planes = if cli.luma_only { 1 } else { frame.planes.len() };
        for plane in frame.planes.iter_mut().take(planes) {
            let mut spare: Option<f64> = None;
            let mut noise = || {
                if let Some(v) = spare.take() {
                    return v;
                }
                let (a, b) = rng.normal_pair();
                spare = Some(b);
                a
            };
            if wide {
                for w in plane.chunks_exact_mut(2) {
                    let v = u16::from_le_bytes([w[0], w[1]]) as f64 + cli.sigma * scale * noise();
                    // Round in file units so that the written value is exactly this one.
                    let step = (1u32 << layout.shift) as f64;
                    let q = ((v / step).round() * step).clamp(0.0, max) as u16;
                    w.copy_from_slice(&q.to_le_bytes());
                }
            } else {
                for b in plane.iter_mut() {
                    *b = (*b as f64 + cli.sigma * noise()).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
        writer.write_frame(&frame, &params).with_context(|| format!("writing frame {n}"))?;
        n += 1;
    }
    writer.finish().context("writing the output")?;
    eprintln!("addnoise: {n} frames, sigma {} (8-bit units), seed {}", cli.sigma, cli.seed);
    Ok(())
}
