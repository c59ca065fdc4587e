//! `nlmdenoise`: denoise a YUV4MPEG2 (.y4m) clip with temporal non-local means.
//!
//! ```text
//! nlmdenoise -i noisy.y4m -o clean.y4m --strength 12 --temporal-past 3
//! ffmpeg -i in.mp4 -f yuv4mpegpipe - | nlmdenoise -i - -o - | ffmpeg -f yuv4mpegpipe -i - out.mp4
//! ```

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use nlmdenoise::backend::{GpuKernel, Intermediate};
use nlmdenoise::y4m::{Y4mHeader, Y4mLayout, Y4mReader, Y4mWriter};
use nlmdenoise::{BackendKind, BackendOptions, ChromaMode, Denoiser, OwnedFrame, Params, PlaneSelection, Weighting};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum KernelArg {
    Auto,
    Fused,
    Multipass,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IntermediateArg {
    F32,
    F16,
    Unorm10,
}

/// Temporal non-local means video denoiser for YUV4MPEG2 (.y4m) streams.
///
/// Reads 8-bit 4:2:0, 4:2:2, 4:4:4 and mono y4m, 10-bit 4:2:0 and 9..16-bit 4:4:4 and mono, and
/// writes the denoised clip in the same colour space. Strengths and sigma are in 8-bit code values
/// whatever the bit depth.
#[derive(Debug, Parser)]
#[command(name = "nlmdenoise", version)]
struct Cli {
    /// Input .y4m file, or - for standard input.
    #[arg(short, long, value_name = "FILE")]
    input: String,

    /// Output .y4m file, or - for standard output. Without it the output is discarded (useful
    /// with --psnr-ref or for timing).
    #[arg(short, long, value_name = "FILE")]
    output: Option<String>,

    /// Search window radius a: offsets -a..=a in x and y (0..=12).
    #[arg(long, default_value_t = Params::default().search_radius)]
    search_radius: u32,

    /// Patch radius s: (2s+1)^2 samples compared (0..=7).
    #[arg(long, default_value_t = Params::default().patch_radius)]
    patch_radius: u32,

    /// Past frames searched (0..=7; no added latency).
    #[arg(long, default_value_t = Params::default().temporal_past)]
    temporal_past: u32,

    /// Future frames searched (0..=7; adds that many frames of latency).
    #[arg(long, default_value_t = Params::default().temporal_future)]
    temporal_future: u32,

    /// Filtering strength h for luma (and RGB, joint and luma-guided weights), 8-bit units.
    /// Default: 0.71 * sigma when --sigma is given, else 10.
    #[arg(long)]
    strength: Option<f32>,

    /// Filtering strength h for chroma planes with their own weights, 8-bit units.
    /// Default: 0.85 * sigma when --sigma is given, else 10.
    #[arg(long)]
    chroma_strength: Option<f32>,

    /// Weight function: welsch (exp(-d2/h^2)) or bisquare ((1-d2/h^2)^2).
    #[arg(long, default_value_t = Params::default().weighting)]
    weighting: Weighting,

    /// Weight of the centre sample as a multiple of the largest other weight.
    #[arg(long, default_value_t = Params::default().wref)]
    wref: f32,

    /// Chroma weights: independent, luma-guided or joint (4:4:4 only).
    #[arg(long, default_value_t = Params::default().chroma_mode)]
    chroma_mode: ChromaMode,

    /// Planes to denoise: all, luma or chroma; the others are copied.
    #[arg(long, default_value_t = Params::default().planes)]
    planes: PlaneSelection,

    /// Noise standard deviation (8-bit units); 2*sigma^2 is subtracted from every distance.
    #[arg(long)]
    sigma: Option<f32>,

    /// Backend: auto (CUDA if usable, else CPU), cpu, cuda or reference (slow f64 oracle).
    #[arg(long, default_value_t = BackendKind::Auto)]
    backend: BackendKind,

    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device_id: usize,

    /// CPU backend worker threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,

    /// GPU kernel.
    #[arg(long, value_enum, default_value_t = KernelArg::Auto)]
    kernel: KernelArg,

    /// Search offsets per pass of the multi-pass GPU kernel (1..=4).
    #[arg(long, default_value_t = BackendOptions::default().offsets_per_pass)]
    offsets_per_pass: u32,

    /// Storage of the multi-pass kernel's intermediates.
    #[arg(long, value_enum, default_value_t = IntermediateArg::Unorm10)]
    intermediate: IntermediateArg,

    /// Frames in flight on an asynchronous backend (0 = synchronous).
    #[arg(long, default_value_t = 0)]
    pipeline_depth: usize,

    /// Process at most N frames.
    #[arg(long, value_name = "N")]
    frames: Option<u64>,

    /// Clean reference clip (same size and colour space): print the PSNR of the input and of the
    /// output against it.
    #[arg(long, value_name = "CLEAN.y4m")]
    psnr_ref: Option<String>,

    /// No progress bar and no summary line.
    #[arg(short, long)]
    quiet: bool,

    /// More log output (-v: info, -vv: debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

impl Cli {
    fn params(&self) -> Params {
        let base = Params {
            search_radius: self.search_radius,
            patch_radius: self.patch_radius,
            temporal_past: self.temporal_past,
            temporal_future: self.temporal_future,
            weighting: self.weighting,
            wref: self.wref,
            chroma_mode: self.chroma_mode,
            planes: self.planes,
            ..Params::default()
        };
        // Strengths follow the noise level unless given.
        let p = match self.sigma {
            Some(sigma) => base.with_noise_sigma(sigma),
            None => base,
        };
        Params { strength: self.strength.unwrap_or(p.strength), chroma_strength: self.chroma_strength.unwrap_or(p.chroma_strength), ..p }
    }

    fn backend_options(&self) -> BackendOptions {
        BackendOptions {
            kind: self.backend,
            device_id: self.device_id,
            threads: self.threads,
            pipeline_depth: self.pipeline_depth,
            gpu_kernel: match self.kernel {
                KernelArg::Auto => GpuKernel::Auto,
                KernelArg::Fused => GpuKernel::Fused,
                KernelArg::Multipass => GpuKernel::Multipass,
            },
            offsets_per_pass: self.offsets_per_pass,
            intermediate: match self.intermediate {
                IntermediateArg::F32 => Intermediate::F32,
                IntermediateArg::F16 => Intermediate::F16,
                IntermediateArg::Unorm10 => Intermediate::Unorm10,
            },
        }
    }
}

/// Squared-error sums against a clean clip, in file units.
#[derive(Default, Clone, Copy)]
struct ErrorSums {
    luma_sse: f64,
    luma_n: u64,
    all_sse: f64,
    all_n: u64,
}

impl ErrorSums {
    fn add(&mut self, layout: &Y4mLayout, frame: &OwnedFrame, clean: &OwnedFrame, a: &mut Vec<u32>, b: &mut Vec<u32>) {
        for p in 0..frame.planes.len() {
            layout.file_samples(frame, p, a);
            layout.file_samples(clean, p, b);
            let sse: f64 = a.iter().zip(b.iter()).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
            if p == 0 {
                self.luma_sse += sse;
                self.luma_n += a.len() as u64;
            }
            self.all_sse += sse;
            self.all_n += a.len() as u64;
        }
    }

    fn psnr(sse: f64, n: u64, peak: f64) -> f64 {
        if n == 0 {
            return f64::NAN;
        }
        let mse = sse / n as f64;
        if mse == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (peak * peak / mse).log10()
        }
    }

    fn describe(&self, peak: f64) -> String {
        format!("Y {:.2} dB, all planes {:.2} dB", Self::psnr(self.luma_sse, self.luma_n, peak), Self::psnr(self.all_sse, self.all_n, peak))
    }
}

/// Per-frame data that travels through the denoiser with the frame.
struct Tag {
    index: u64,
    frame_params: String,
}

/// The clean clip and the frames of it still waiting for their denoised counterpart.
struct PsnrState {
    reader: Y4mReader<Box<dyn BufRead>>,
    waiting: VecDeque<OwnedFrame>,
    input: ErrorSums,
    output: ErrorSums,
    a: Vec<u32>,
    b: Vec<u32>,
}

fn open_input(path: &str) -> Result<(Box<dyn BufRead>, Option<u64>)> {
    if path == "-" {
        return Ok((Box::new(BufReader::with_capacity(1 << 20, io::stdin().lock())), None));
    }
    let file = File::open(path).with_context(|| format!("cannot open input '{path}'"))?;
    let len = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    Ok((Box::new(BufReader::with_capacity(1 << 20, file)), len))
}

fn open_output(path: &str) -> Result<Box<dyn Write>> {
    if path == "-" {
        return Ok(Box::new(BufWriter::with_capacity(1 << 20, io::stdout().lock())));
    }
    let file = File::create(path).with_context(|| format!("cannot create output '{path}'"))?;
    Ok(Box::new(BufWriter::with_capacity(1 << 20, file)))
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(io::stderr).with_target(false).try_init();
}

fn progress_bar(cli: &Cli, total: Option<u64>) -> ProgressBar {
    let bar = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} frames ({per_sec}, eta {eta})")
                .expect("valid template"),
        ),
        None => ProgressBar::new_spinner().with_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos} frames ({per_sec})").expect("valid template")),
    };
    if cli.quiet || !io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// Moves every ready output to the writer (and the PSNR sums).
fn drain(
    denoiser: &mut Denoiser<Tag>,
    out: &mut OwnedFrame,
    writer: &mut Option<Y4mWriter<Box<dyn Write>>>,
    psnr: &mut Option<PsnrState>,
    layout: &Y4mLayout,
    bar: &ProgressBar,
    written: &mut u64,
) -> Result<()> {
    while let Some(tag) = denoiser.pop(&mut out.as_mut()).context("denoising")? {
        if tag.index != *written {
            bail!("internal error: output frame {} arrived when {} was expected", tag.index, *written);
        }
        if let Some(w) = writer.as_mut() {
            w.write_frame(out, &tag.frame_params).with_context(|| format!("writing output frame {}", tag.index))?;
        }
        if let Some(ps) = psnr.as_mut() {
            let clean = ps.waiting.pop_front().context("internal error: no clean frame for an output")?;
            ps.output.add(layout, out, &clean, &mut ps.a, &mut ps.b);
        }
        *written += 1;
        bar.inc(1);
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<()> {
    let params = cli.params();
    params.validate().context("bad parameters")?;
    let (input, input_len) = open_input(&cli.input)?;
    let mut reader = Y4mReader::new(input).with_context(|| format!("reading the y4m header of '{}'", cli.input))?;
    let header: Y4mHeader = reader.header().clone();
    let layout = header.layout;
    let info = header.video_info();

    let mut psnr = match &cli.psnr_ref {
        None => None,
        Some(path) => {
            let (r, _) = open_input(path)?;
            let clean = Y4mReader::new(r).with_context(|| format!("reading the y4m header of '{path}'"))?;
            let ch = clean.header();
            if (ch.width, ch.height, ch.layout) != (header.width, header.height, header.layout) {
                bail!(
                    "--psnr-ref '{path}' is {}x{} C{}, the input is {}x{} C{}",
                    ch.width,
                    ch.height,
                    ch.colorspace,
                    header.width,
                    header.height,
                    header.colorspace
                );
            }
            Some(PsnrState { reader: clean, waiting: VecDeque::new(), input: ErrorSums::default(), output: ErrorSums::default(), a: Vec::new(), b: Vec::new() })
        }
    };

    let options = cli.backend_options();
    let mut denoiser: Denoiser<Tag> = Denoiser::new(info, params, &options)
        .with_context(|| format!("starting the {} backend for {}x{} {}", options.kind, info.width, info.height, info.format))?;
    let mut writer = match &cli.output {
        Some(path) => Some(Y4mWriter::new(open_output(path)?, header.clone())),
        None => None,
    };

    let total = input_len.map(|len| reader.estimate_frames(len)).map(|n| cli.frames.map_or(n, |m| m.min(n)));
    let bar = progress_bar(cli, total);
    let mut frame = OwnedFrame::new(info);
    let mut out = OwnedFrame::new(info);
    let mut clean = OwnedFrame::new(info);
    let (mut read, mut written) = (0u64, 0u64);
    let start = Instant::now();

    while cli.frames.is_none_or(|n| read < n) {
        let Some(frame_params) = reader.read_frame(&mut frame).with_context(|| format!("reading input frame {read}"))? else { break };
        if let Some(ps) = psnr.as_mut() {
            if ps.reader.read_frame(&mut clean).with_context(|| format!("reading reference frame {read}"))?.is_none() {
                bail!("--psnr-ref clip has only {read} frames; the input has more");
            }
            ps.input.add(&layout, &frame, &clean, &mut ps.a, &mut ps.b);
            ps.waiting.push_back(clean.clone());
        }
        denoiser.push(&frame.as_ref(), Tag { index: read, frame_params }).with_context(|| format!("denoising frame {read}"))?;
        read += 1;
        drain(&mut denoiser, &mut out, &mut writer, &mut psnr, &layout, &bar, &mut written)?;
    }
    denoiser.finish_stream().context("finishing the stream")?;
    drain(&mut denoiser, &mut out, &mut writer, &mut psnr, &layout, &bar, &mut written)?;
    if written != read {
        bail!("internal error: {read} frames read but {written} written");
    }
    if let Some(w) = writer {
        w.finish().context("writing the output")?;
    }
    let seconds = start.elapsed().as_secs_f64();
    bar.finish_and_clear();

    if !cli.quiet {
        eprintln!(
            "nlmdenoise: {written} frames {}x{} C{} in {seconds:.2} s ({:.2} fps), backend: {}",
            info.width,
            info.height,
            header.colorspace,
            written as f64 / seconds.max(1e-9),
            denoiser.backend_description()
        );
    }
    if let Some(ps) = psnr {
        let peak = layout.max_value() as f64;
        eprintln!("PSNR input  vs reference: {}", ps.input.describe(peak));
        eprintln!("PSNR output vs reference: {}", ps.output.describe(peak));
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    if let Some(out) = cli.output.as_deref().filter(|o| *o != "-") {
        let same = match (std::fs::canonicalize(out), std::fs::canonicalize(&cli.input)) {
            (Ok(a), Ok(b)) => a == b,
            _ => Path::new(out) == Path::new(&cli.input),
        };
        if cli.input != "-" && same {
            eprintln!("nlmdenoise: error: the output would overwrite the input '{out}'");
            std::process::exit(2);
        }
    }
    if let Err(e) = run(&cli) {
        eprintln!("nlmdenoise: error: {e:#}");
        std::process::exit(1);
    }
}
