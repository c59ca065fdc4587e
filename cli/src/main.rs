//! `nlmdenoise`: denoise a video file with temporal non-local means.
//!
//! ```text
//! nlmdenoise input.mp4 denoised.mp4                       # H.264 + AAC in MP4, audio kept
//! nlmdenoise input.mov denoised.mkv --crf 18 --preset slow
//! nlmdenoise -i noisy.y4m -o clean.y4m --strength 12       # native y4m path
//! ffmpeg -i in.mp4 -f yuv4mpegpipe - | nlmdenoise -i - -o - | ffmpeg -f yuv4mpegpipe -i - out.mp4
//! ```
//!
//! Two paths (see README.md, "Command-line tool"):
//! * y4m in and y4m out (files or pipes): read and written by the engine crate's y4m module, frames
//!   through the engine directly ([`y4m`]).
//! * anything else: a GStreamer pipeline with the `nlmdenoise` element registered statically from the
//!   plugin crate ([`media`]): `filesrc ! decodebin` (or `appsrc` fed from a y4m file), video through
//!   `nlmdenoise`, x264enc + mp4mux / matroskamux or the tool's y4m writer (appsink), audio re-encoded (AAC / Opus).

#![forbid(unsafe_code)]

use std::path::Path;

use anyhow::{bail, Result};
use clap::{Parser, ValueEnum};

use nlmdenoise::device::ChunkFrames;
use nlmdenoise::nlm::{GpuKernel, Intermediate, NlmOptions};
use nlmdenoise::params::AGGREGATION_STRENGTH_SCALE;
use nlmdenoise::{Algorithm, BackendKind, BackendOptions, Bm3dParams, Bm3dProfile, ChromaMode, Params, PlaneSelection, Weighting};

mod exit_code;
mod interrupt;
mod media;
mod progress;
mod y4m;

/// Temporal window of the command-line tool when none is given: it works on whole files, so
/// latency does not matter and future frames are as useful as past ones.
pub const OFFLINE_TEMPORAL_PAST: u32 = 2;
pub const OFFLINE_TEMPORAL_FUTURE: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KernelArg {
    Auto,
    Fused,
    Multipass,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IntermediateArg {
    F32,
    F16,
    Unorm10,
}

/// Output container (normally taken from the output file's extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Container {
    /// H.264 (x264enc) and AAC audio (avenc_aac) in MP4 (mp4mux).
    Mp4,
    /// H.264 (x264enc) and Opus audio (opusenc) in Matroska (matroskamux).
    Mkv,
    /// Uncompressed YUV4MPEG2 video, no audio.
    Y4m,
}

impl Container {
    fn from_path(path: &str) -> Result<Self> {
        if path == "-" {
            return Ok(Container::Y4m);
        }
        let ext = Path::new(path).extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("mp4" | "m4v") => Ok(Container::Mp4),
            Some("mkv") => Ok(Container::Mkv),
            Some("y4m") => Ok(Container::Y4m),
            _ => bail!("cannot tell the output format from '{path}': name it .mp4, .mkv or .y4m, or pass --container mp4|mkv|y4m"),
        }
    }
}

/// Bits per sample of encoded (H.264) video.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BitDepthArg {
    /// The input's: 8-bit inputs give 8-bit video, deeper ones 10-bit.
    Auto,
    #[value(name = "8")]
    Eight,
    #[value(name = "10")]
    Ten,
}

/// x264 speed presets (x264enc `speed-preset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    Ultrafast,
    Superfast,
    Veryfast,
    Faster,
    Fast,
    Medium,
    Slow,
    Slower,
    Veryslow,
    Placebo,
}

impl Preset {
    pub fn nick(self) -> &'static str {
        match self {
            Preset::Ultrafast => "ultrafast",
            Preset::Superfast => "superfast",
            Preset::Veryfast => "veryfast",
            Preset::Faster => "faster",
            Preset::Fast => "fast",
            Preset::Medium => "medium",
            Preset::Slow => "slow",
            Preset::Slower => "slower",
            Preset::Veryslow => "veryslow",
            Preset::Placebo => "placebo",
        }
    }
}

/// Temporal non-local means video denoiser.
///
/// `--sigma`: a value or `auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SigmaArg {
    Auto,
    Value(f32),
}

impl std::str::FromStr for SigmaArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(SigmaArg::Auto);
        }
        s.parse::<f32>().map(SigmaArg::Value).map_err(|_| format!("'{s}' is neither a number nor auto"))
    }
}

/// Reads any file GStreamer can decode (and YUV4MPEG2 natively) and writes H.264 in MP4 (.mp4) or
/// Matroska (.mkv), or uncompressed .y4m; audio is kept (re-encoded to AAC in MP4, Opus in
/// Matroska). y4m in and y4m out take the native path: 8-bit 4:2:0, 4:2:2, 4:4:4 and mono, 10-bit
/// 4:2:0 and 9..16-bit 4:4:4 and mono, written back in the same colour space. Strengths and sigma
/// are in 8-bit code values whatever the bit depth. The temporal window defaults to 2 past and 2
/// future frames (offline: latency does not matter).
#[derive(Debug, Parser)]
#[command(
    name = "nlmdenoise",
    version,
    after_help = "Exit status: 0 done; 1 error (bad usage, unreadable input, failed pipeline, an output with no playable frame, e.g. interrupted before the first; no output \
file is left behind); 3 the input ended early or was damaged (the output holds every complete frame); 4 interrupted by \
Ctrl-C or SIGTERM (the output is finished with the frames done); 130 aborted by a second interrupt (signals \
within 0.5 s of the first are the same request)."
)]
pub struct Cli {
    /// Input file (same as -i): a .y4m file, - for y4m on standard input (into any output), or any
    /// file GStreamer can decode (mp4, mkv, mov, webm, avi, ...). A named pipe or a process
    /// substitution (`<(ffmpeg ... -f yuv4mpegpipe -)`) is read as y4m, as standard input is,
    /// unless its name has another extension (`stream.mkv`).
    #[arg(value_name = "INPUT", conflicts_with = "input")]
    input_pos: Option<String>,

    /// Output file (same as -o): .mp4, .mkv or .y4m; - for standard output (y4m, or with
    /// --container mkv Matroska, --container mp4 fragmented MP4).
    #[arg(value_name = "OUTPUT", conflicts_with = "output")]
    output_pos: Option<String>,

    /// Input file (see INPUT).
    #[arg(short, long, value_name = "FILE")]
    input: Option<String>,

    /// Output file (see OUTPUT). Without any output the result is discarded (useful with
    /// --psnr-ref or for timing).
    #[arg(short, long, value_name = "FILE")]
    output: Option<String>,

    /// Output container instead of the one the output's extension names.
    #[arg(long, value_enum)]
    container: Option<Container>,

    /// Denoising algorithm: nlm (temporal non-local means), bm3d (block matching and 3D
    /// filtering, V-BM3D over the temporal window) or nlm-sr (multi-frame NLM super-resolution:
    /// upscales by --scale, denoising with --sigma; what --scale selects).
    #[arg(long, default_value_t = Params::default().algorithm)]
    algorithm: Algorithm,

    /// BM3D settings chosen together: fast, normal (high's picture at real-time speed on a GPU) or
    /// high (docs/tuning.md; from --sigma 30 fast and normal search wider); the --bm3d-*
    /// flags below replace single values of it.
    #[arg(long, default_value_t = Bm3dProfile::default())]
    bm3d_profile: Bm3dProfile,

    /// BM3D steps: 1 (hard thresholding) or 2 (then Wiener; with a temporal window two steps read
    /// twice as many frames). Default: the profile's.
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    bm3d_steps: Option<u32>,

    /// BM3D patch side: 4 or 8. Default: the profile's.
    #[arg(allow_negative_numbers = true, long, value_name = "K")]
    bm3d_patch_size: Option<u32>,

    /// BM3D block matching radius in the target frame. Default: the profile's.
    #[arg(allow_negative_numbers = true, long, value_name = "R")]
    bm3d_search_radius: Option<u32>,

    /// BM3D pixels between reference patches (1..=patch size). Default: the profile's.
    #[arg(allow_negative_numbers = true, long, value_name = "P")]
    bm3d_block_step: Option<u32>,

    /// BM3D pixels between reference patches in the hard-thresholding step alone (1..=patch
    /// size; with --bm3d-steps 1 the only step). Default: --bm3d-block-step's.
    #[arg(allow_negative_numbers = true, long, value_name = "P")]
    bm3d_hard_block_step: Option<u32>,

    /// BM3D most patches per group, hard-thresholding step (power of two <= 32).
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    bm3d_group_size: Option<u32>,

    /// BM3D most patches per group, Wiener step (power of two <= 32).
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    bm3d_wiener_group_size: Option<u32>,

    /// BM3D grouping threshold of the hard-thresholding step: the largest mean squared distance
    /// (8-bit units squared) of a grouped patch. Default: the profile's (2500, or 3 sigma^2 where
    /// larger with --sigma).
    #[arg(allow_negative_numbers = true, long, value_name = "D")]
    bm3d_threshold: Option<f32>,

    /// BM3D grouping threshold of the Wiener step (distances on the basic estimate). Default:
    /// the profile's (400).
    #[arg(allow_negative_numbers = true, long, value_name = "D")]
    bm3d_wiener_threshold: Option<f32>,

    /// BM3D hard threshold in units of sigma. Default: the profile's (2.7).
    #[arg(allow_negative_numbers = true, long, value_name = "L")]
    bm3d_lambda: Option<f32>,

    /// BM3D predictive search: patches around this many best matches of the neighbouring frame
    /// are searched in each other frame of the window. Default: the profile's.
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    bm3d_seeds: Option<u32>,

    /// BM3D predictive search of the Wiener step alone (on the basic estimate). Default:
    /// --bm3d-seeds' where given, else the profile's (2 for normal).
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    bm3d_wiener_seeds: Option<u32>,

    /// BM3D predictive search radius around each seed. Default: the profile's.
    #[arg(allow_negative_numbers = true, long, value_name = "R")]
    bm3d_seed_radius: Option<u32>,

    /// V-BM3D: reference patches in every frame of the temporal window (true), each group's
    /// patches in the current frame aggregated into it (cleaner, one step per window frame), or in
    /// the current frame only (false). Default: the profile's (true for normal and high).
    #[arg(long, value_name = "BOOL")]
    bm3d_window_references: Option<bool>,

    /// BM3D per-frame groups: every frame's reference patches grouped once, within the window
    /// centred on their own frame, each member added to its own frame (the picture of window
    /// references, 2-3x faster for `normal` and `high`; `fast` about 0.5 dB cleaner; a step reads past + future frames on
    /// each side, so more latency). Every backend. Default: on when --temporal-future is above 0
    /// (and past + future is at most 7), off for live windows.
    #[arg(long, value_name = "BOOL")]
    bm3d_frame_groups: Option<bool>,

    /// BM3D motion seeds: the predictive search into each next frame also starts where the
    /// coarse motion of the frame pair moves its best match, so groups follow motion faster than
    /// the seed radius a frame (a few percent of BM3D's time). Default: on.
    #[arg(long, value_name = "BOOL")]
    bm3d_motion: Option<bool>,

    /// BM3D Bayesian estimate: the Wiener step's estimate of each group averaged with an
    /// NL-Bayes estimate from the group's own mean and covariance (about 0.2 dB cleaner at sigma
    /// 10-40, costlier: docs/tuning.md "Bayesian estimate"). Two-step runs only. Default: off.
    #[arg(long, value_name = "BOOL")]
    bm3d_bayes: Option<bool>,

    /// BM3D noise sigma of the chroma planes (8-bit units). Default: --sigma.
    #[arg(allow_negative_numbers = true, long, value_name = "SIGMA")]
    chroma_sigma: Option<f32>,

    /// Upscale by this integer factor (2, 3 or 4) with multi-frame NLM super-resolution
    /// (--algorithm nlm-sr; docs/tuning.md "Super-resolution"). 1: no upscaling (an error with --algorithm nlm-sr, which alone upscales by 2).
    #[arg(allow_negative_numbers = true, long, value_name = "N", default_value_t = 1)]
    scale: u32,

    /// Super-resolution fusion passes: 1, or 2 (the second matches against the first's result).
    #[arg(allow_negative_numbers = true, long, value_name = "N", default_value_t = nlmdenoise::SrParams::default().iterations)]
    sr_iterations: u32,

    /// Super-resolution deblur: back-projection steps of the initial estimate against the
    /// target frame (0..=4; each undoes more of the downscale's blur).
    #[arg(allow_negative_numbers = true, long, value_name = "STEPS", default_value_t = nlmdenoise::SrParams::default().deblur)]
    deblur: u32,

    /// Super-resolution fusion: share (0..1) of the correction fused from the temporal window
    /// that is added to the deblurred estimate.
    #[arg(allow_negative_numbers = true, long, value_name = "SHARE", default_value_t = nlmdenoise::SrParams::default().fusion)]
    fusion: f32,

    /// Super-resolution: apply the fused correction everywhere, not only where another frame
    /// matches better than the current one (repetitive, synthetic content gains; smooth static
    /// content softens).
    #[arg(long)]
    no_novelty_gate: bool,

    /// Search window radius a: offsets -a..=a in x and y (0..=12). Default: 3; with --scale (or
    /// --algorithm nlm-sr), 2 (low-resolution samples).
    #[arg(allow_negative_numbers = true, long)]
    search_radius: Option<u32>,

    /// Patch radius s: (2s+1)^2 samples compared (0..=7). Default: 2; with --scale (or --algorithm
    /// nlm-sr), 3.
    #[arg(allow_negative_numbers = true, long)]
    patch_radius: Option<u32>,

    /// Past frames searched (0..=7).
    #[arg(allow_negative_numbers = true, long, default_value_t = OFFLINE_TEMPORAL_PAST)]
    temporal_past: u32,

    /// Future frames searched (0..=7). Offline, so the default is symmetric with the past.
    #[arg(allow_negative_numbers = true, long, default_value_t = OFFLINE_TEMPORAL_FUTURE)]
    temporal_future: u32,

    /// Scene cuts: the fraction of the picture (0..=1) that must change from one frame to the
    /// next for a cut, across which no frame borrows from another; 0 turns the test off.
    #[arg(allow_negative_numbers = true, long, default_value_t = Params::default().scene_cut)]
    scene_cut: f32,

    /// Filtering strength h for luma (and RGB, joint and luma-guided weights), 8-bit units.
    /// Default: see `strength_help` (the text --help shows is made from the engine's factors).
    #[arg(allow_negative_numbers = true, long)]
    strength: Option<f32>,

    /// Filtering strength h for chroma planes with their own weights, 8-bit units.
    /// Default: see `strength_help`.
    #[arg(allow_negative_numbers = true, long)]
    chroma_strength: Option<f32>,

    /// Weight function: welsch (exp(-d2/h^2)) or bisquare ((1-d2/h^2)^2).
    #[arg(long, default_value_t = Params::default().weighting)]
    weighting: Weighting,

    /// NLM patch-wise aggregation: each patch's weight also counts for the samples within this
    /// radius of its centre (0 = pixel-wise NLM, up to --patch-radius; not with --kernel
    /// multipass). --patch-radius 3 --aggregation-radius 2 --wref 2: about 0.6 dB cleaner than the
    /// defaults at 3x their GPU time and 1.4x their CPU time (docs/tuning.md, "Patch-wise aggregation").
    #[arg(allow_negative_numbers = true, long, default_value_t = Params::default().aggregation_radius)]
    aggregation_radius: u32,

    /// Weight of the centre sample as a multiple of the largest other weight.
    #[arg(allow_negative_numbers = true, long, default_value_t = Params::default().wref)]
    wref: f32,

    /// Chroma weights: independent, luma-guided or joint (4:4:4 only).
    #[arg(long, default_value_t = Params::default().chroma_mode)]
    chroma_mode: ChromaMode,

    /// Planes to denoise: all, luma or chroma; the others are copied.
    #[arg(long, default_value_t = Params::default().planes)]
    planes: PlaneSelection,

    /// Noise standard deviation (8-bit units), or auto: estimated from the input as it goes.
    /// NLM: 2*sigma^2 is subtracted from every distance and the strengths follow it; BM3D: its
    /// thresholds; nlm-sr (--scale): the target frame is denoised first and the strengths follow
    /// it. Default: auto, unless --strength or --chroma-strength is given; with --scale: a clean
    /// input (no denoising).
    #[arg(allow_negative_numbers = true, long, value_name = "SIGMA|auto")]
    sigma: Option<SigmaArg>,

    /// Backend: auto (CUDA if usable, else CPU), cpu, cuda (also spelt gpu) or reference (slow
    /// f64 oracle; y4m in and out only).
    #[arg(long, default_value_t = BackendKind::Auto)]
    backend: BackendKind,

    /// CUDA device(s): an ordinal (0), a comma list (0,1) or all. With several devices, chunks
    /// of frames go round-robin to one worker per device (output identical to one device).
    #[arg(long, value_name = "LIST", default_value = "0")]
    device_id: String,

    /// Frames per batched launch (a chunk along time): 1 = a frame at a time, 0 = automatic from
    /// the device's free memory (on the CPU: from host memory, at most 8), N = N frames (an error
    /// when they do not fit in that memory). Output is identical for every value.
    #[arg(allow_negative_numbers = true, long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=nlmdenoise::device::chunked::MAX_CHUNK_FRAMES as i64))]
    chunk_frames: u32,

    /// CPU backend worker threads (0 = all cores).
    #[arg(allow_negative_numbers = true, long, default_value_t = 0)]
    threads: usize,

    /// GPU kernel.
    #[arg(long, value_enum, default_value_t = KernelArg::Auto)]
    kernel: KernelArg,

    /// Search offsets per pass of the multi-pass GPU kernel (1..=4).
    #[arg(allow_negative_numbers = true, long, default_value_t = NlmOptions::default().offsets_per_pass)]
    offsets_per_pass: u32,

    /// Storage of the multi-pass kernel's intermediates.
    #[arg(long, value_enum, default_value_t = IntermediateArg::Unorm10)]
    intermediate: IntermediateArg,

    /// Frames in flight on an asynchronous backend (0 = synchronous).
    #[arg(allow_negative_numbers = true, long, default_value_t = 0)]
    pipeline_depth: usize,

    /// Process at most N frames, N at least 1 (encoded outputs: the audio is cut at the same
    /// time).
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    frames: Option<u64>,

    /// Write only frames START..END of the input (0-based, END excluded), for segment-parallel
    /// runs (scripts/cluster, docs/cluster.md): the frames the temporal window needs on either
    /// side are read and denoised too, so the frames written are those a run over the whole input
    /// writes at those positions, given a fixed --sigma or --strength (sigma auto estimates from
    /// the segment's own frames). Encoded outputs hold no audio (the driver muxes the source's
    /// audio once). Fails, leaving no output, when the input ends before END.
    #[arg(long, value_name = "START:END", value_parser = parse_segment, conflicts_with_all = ["frames", "psnr_ref"])]
    segment: Option<Segment>,

    /// With --segment and a y4m OUTPUT: write the segment's frames at their own places in OUTPUT
    /// (the stream header at its start, frame N at the byte where a whole run writes it) instead
    /// of a file of the segment alone, so that segments run side by side assemble one file with
    /// no copy (scripts/cluster does this). OUTPUT is created when missing and never truncated or
    /// removed: a failed run leaves the other frames as they were (its own range is not to be
    /// trusted). Needs input frames without per-frame parameters (plain FRAME lines).
    #[arg(long, requires = "segment")]
    segment_in_place: bool,

    /// H.264 constant quality (x264 CRF, 0..=50; lower is better and larger). Ignored with --bitrate.
    #[arg(allow_negative_numbers = true, long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=50))]
    crf: u32,

    /// H.264 average bitrate in kbit/s instead of constant quality.
    #[arg(allow_negative_numbers = true, long, value_name = "KBIT/S", value_parser = clap::value_parser!(u32).range(1..=2_000_000))]
    bitrate: Option<u32>,

    /// x264 speed preset: slower presets give smaller files at the same quality.
    #[arg(long, value_enum, default_value_t = Preset::Medium)]
    preset: Preset,

    /// Bits per sample of the H.264 video (mp4, mkv): auto keeps the input's depth (10 for 10-bit
    /// and deeper inputs, whose extra bits H.264 cannot hold), 8 or 10 force one. The chroma
    /// subsampling follows the input (4:2:0, 4:2:2, 4:4:4).
    #[arg(long, value_enum, default_value_t = BitDepthArg::Auto)]
    bit_depth: BitDepthArg,

    /// Audio bitrate in kbit/s (AAC in MP4, Opus in Matroska).
    #[arg(allow_negative_numbers = true, long, value_name = "KBIT/S", default_value_t = 128, value_parser = clap::value_parser!(u32).range(6..=510))]
    audio_bitrate: u32,

    /// Drop the audio instead of re-encoding it.
    #[arg(long)]
    no_audio: bool,

    /// Encode the frames as stored, not turned upright: by default, as ffmpeg does, an MP4/MKV
    /// output of an input with an orientation tag (phone videos) is rotated or flipped as the tag
    /// asks (GStreamer's muxers do not write the tag, so it cannot be kept instead). y4m outputs
    /// always hold the frames as stored.
    #[arg(long)]
    no_autorotate: bool,

    /// Clean reference clip (same size and colour space; y4m in and out only): print the PSNR of
    /// the input and of the output against it.
    #[arg(long, value_name = "CLEAN.y4m")]
    psnr_ref: Option<String>,

    /// Overwrite an existing output file without asking.
    #[arg(short = 'y', long, conflicts_with = "no_overwrite")]
    overwrite: bool,

    /// Never overwrite an existing output file: stop with an error instead of asking.
    #[arg(short = 'n', long)]
    no_overwrite: bool,

    /// No progress bar and no summary.
    #[arg(short, long)]
    quiet: bool,

    /// Give up on an encoded input (MP4, Matroska, ...) whose first picture has not reached the
    /// denoiser after this many seconds: a damaged file can stall GStreamer's demuxer without an
    /// error. Exit 1, no output left. y4m inputs are read by the tool itself and never stall.
    #[arg(long, value_name = "SECONDS", default_value_t = 20.0, value_parser = positive_seconds)]
    stall_timeout: f64,

    /// When standard error is not a terminal (a log file, a pipe): a progress line every this
    /// many seconds (frames done, frames/s, time left; 0: none). On a terminal the bar updates
    /// continuously. (ffmpeg's -stats_period.)
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    stats_period: f64,

    /// More output: -v logs what the engine and the element decide (backend, format, latency) and
    /// prints the noise estimate once per second of video; -vv adds debug detail. RUST_LOG and
    /// GST_DEBUG override.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// --help's text for `--strength` (`chroma` false) or `--chroma-strength`: the defaults stated
/// from the factors the engine applies ([`Params::strength_per_sigma`]) for the tool's window
/// and the others, so that the text cannot drift from what the tool does.
fn strength_help(chroma: bool) -> String {
    let factor = |past: u32, future: u32| {
        let k = Params { temporal_past: past, temporal_future: future, ..Params::default() }.strength_per_sigma();
        if chroma {
            k.1
        } else {
            k.0
        }
    };
    let (offline, live, spatial) = (factor(OFFLINE_TEMPORAL_PAST, OFFLINE_TEMPORAL_FUTURE), factor(Params::default().temporal_past, 0), factor(0, 0));
    let (what, fixed, other) = if chroma {
        ("chroma planes with their own weights", Params::default().chroma_strength, "--strength")
    } else {
        ("luma (and RGB, joint and luma-guided weights)", Params::default().strength, "--chroma-strength")
    };
    format!(
        "Filtering strength h for {what}, 8-bit units. Default: {offline:.2} * sigma with the default window \
         ({OFFLINE_TEMPORAL_PAST} past + {OFFLINE_TEMPORAL_FUTURE} future frames; {live:.2} with past frames only, {spatial:.2} with \
         neither; {AGGREGATION_STRENGTH_SCALE} times these with --aggregation-radius above 0), sigma being --sigma or else \
         estimated from the input as it goes; {fixed} when only {other} is given; with --scale, the upscaler's (docs/tuning.md)."
    )
}

/// The command line's definition, with the help texts made at run time.
fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command().mut_arg("strength", |a| a.help(strength_help(false))).mut_arg("chroma_strength", |a| a.help(strength_help(true)))
}

impl Cli {
    pub fn input_path(&self) -> Option<&str> {
        self.input.as_deref().or(self.input_pos.as_deref())
    }

    pub fn output_path(&self) -> Option<&str> {
        self.output.as_deref().or(self.output_pos.as_deref())
    }

    pub fn params(&self) -> Params {
        // --scale above 1 selects super-resolution; --algorithm nlm-sr alone upscales by 2.
        let (algorithm, scale) = match (self.algorithm, self.scale) {
            (Algorithm::NlmSr, 1) => (Algorithm::NlmSr, nlmdenoise::SrParams::default().scale),
            (_, 1) => (self.algorithm, nlmdenoise::SrParams::default().scale),
            (_, s) => (Algorithm::NlmSr, s),
        };
        let radii = if algorithm == Algorithm::NlmSr { Params::upscaling(scale) } else { Params::default() };
        let base = Params {
            algorithm,
            sr: nlmdenoise::SrParams { scale, iterations: self.sr_iterations, deblur: self.deblur, fusion: self.fusion, novelty_gate: !self.no_novelty_gate },
            search_radius: self.search_radius.unwrap_or(radii.search_radius),
            patch_radius: self.patch_radius.unwrap_or(radii.patch_radius),
            temporal_past: self.temporal_past,
            temporal_future: self.temporal_future,
            scene_cut: self.scene_cut,
            weighting: self.weighting,
            wref: self.wref,
            aggregation_radius: self.aggregation_radius,
            chroma_mode: self.chroma_mode,
            planes: self.planes,
            bm3d: Bm3dParams {
                profile: self.bm3d_profile,
                steps: self.bm3d_steps,
                patch_size: self.bm3d_patch_size,
                search_radius: self.bm3d_search_radius,
                block_step: self.bm3d_block_step,
                hard_block_step: self.bm3d_hard_block_step,
                group_size: self.bm3d_group_size,
                wiener_group_size: self.bm3d_wiener_group_size,
                threshold: self.bm3d_threshold,
                wiener_threshold: self.bm3d_wiener_threshold,
                lambda: self.bm3d_lambda,
                seeds: self.bm3d_seeds,
                wiener_seeds: self.bm3d_wiener_seeds,
                seed_radius: self.bm3d_seed_radius,
                window_references: self.bm3d_window_references,
                frame_groups: self.bm3d_frame_groups,
                motion: self.bm3d_motion,
                bayes: self.bm3d_bayes,
                chroma_sigma: self.chroma_sigma,
            },
            ..Params::default()
        };
        // Strengths follow the noise level unless given; without either, the noise level is
        // estimated (denoising), or the input taken as clean (upscaling: --sigma denoises too).
        let explicit = self.strength.is_some() || self.chroma_strength.is_some();
        let upscaling = algorithm == Algorithm::NlmSr;
        let p = match self.sigma {
            Some(SigmaArg::Value(sigma)) => base.with_noise_sigma(sigma),
            Some(SigmaArg::Auto) => Params { sigma_auto: true, ..base },
            None if !explicit && upscaling => Params { sigma: None, ..base.with_noise_sigma(0.0) },
            None if !explicit => Params { sigma_auto: true, ..base },
            None if upscaling => base.with_noise_sigma(0.0),
            None => base,
        };
        let strength = self.strength.unwrap_or(p.strength);
        // Upscaling: one strength given serves both plane kinds.
        let chroma_default = if upscaling && self.strength.is_some() { strength } else { p.chroma_strength };
        Params { strength, chroma_strength: self.chroma_strength.unwrap_or(chroma_default), ..p }
    }

    pub fn backend_options(&self) -> Result<BackendOptions> {
        let mut options = BackendOptions {
            kind: self.backend,
            threads: self.threads,
            pipeline_depth: self.pipeline_depth,
            nlm: NlmOptions {
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
                ..NlmOptions::default()
            },
            chunk_frames: match self.chunk_frames {
                0 => ChunkFrames::Auto,
                1 => ChunkFrames::Off,
                n => ChunkFrames::Frames(n as usize),
            },
            ..BackendOptions::default()
        };
        gstnlmdenoise::apply_devices(&mut options, &self.device_id).map_err(|e| invalid_parameter(&e).context("--device-id"))?;
        Ok(options)
    }
}

/// An engine parameter error for `message`, without the "invalid parameter: " a caller's text
/// (the element's, `apply_devices`') may already start with.
pub fn invalid_parameter(message: &str) -> anyhow::Error {
    let message = message.strip_prefix("Invalid parameters: ").unwrap_or(message);
    let message = message.strip_prefix("invalid parameter: ").unwrap_or(message);
    nlmdenoise::Error::InvalidParameter(message.to_string()).into()
}

/// The message of a failed run. A parameter error reads "invalid parameter: WHAT" once, first,
/// whatever found it, with the steps it went through after it in brackets.
fn describe_failure(e: &anyhow::Error) -> String {
    let invalid = e.chain().find_map(|c| match c.downcast_ref::<nlmdenoise::Error>() {
        Some(nlmdenoise::Error::InvalidParameter(m)) => Some(m),
        _ => None,
    });
    let Some(message) = invalid else { return format!("{e:#}") };
    let steps: Vec<String> = e.chain().take_while(|c| c.downcast_ref::<nlmdenoise::Error>().is_none()).map(|c| c.to_string()).collect();
    if steps.is_empty() {
        format!("invalid parameter: {message}")
    } else {
        format!("invalid parameter: {message} ({})", steps.join(": "))
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only on a terminal (not in logs and pipes).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).with_target(false).try_init();
}

/// Whether `path` starts like a YUV4MPEG2 stream (standard input counts as one, and so do pipes
/// and FIFOs unless named with another extension).
fn is_y4m_input(path: &str) -> Result<bool> {
    use std::io::Read;
    if path == "-" {
        return Ok(true);
    }
    let y4m_name = Path::new(path).extension().is_some_and(|e| e.eq_ignore_ascii_case("y4m"));
    // A pipe, FIFO or process substitution (/dev/fd/N) cannot be peeked at without losing what
    // is read: like standard input it carries y4m, unless its name says another format
    // (`stream.mkv`), which GStreamer then reads from its first byte.
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => bail!("cannot open input '{path}': it is a directory"),
        Ok(m) if !m.is_file() => return Ok(y4m_name || Path::new(path).extension().is_none()),
        _ => {}
    }
    let mut file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot open input '{path}': {e}"))?;
    let mut magic = [0u8; 9];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => bail!("cannot read input '{path}': {e}"),
        }
    }
    // A .y4m name keeps the native reader (and its precise header errors) even for a bad file.
    Ok(&magic[..got] == b"YUV4MPEG2" || y4m_name)
}

/// An existing regular file at `out` is overwritten with -y, refused with -n, and otherwise only
/// after a yes on the terminal (like ffmpeg); without a terminal to ask on, refused.
fn check_overwrite(cli: &Cli, out: &str) -> Result<()> {
    use std::io::{BufRead, IsTerminal, Write};
    let Ok(meta) = std::fs::metadata(out) else { return Ok(()) };
    if !meta.is_file() || cli.overwrite {
        return Ok(());
    }
    if cli.no_overwrite {
        bail!("the output '{out}' exists (-n: not overwriting it)");
    }
    let stdin_free = cli.input_path() != Some("-");
    if !(stdin_free && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        bail!("the output '{out}' exists; pass -y to overwrite it");
    }
    eprint!("nlmdenoise: the output '{out}' exists. Overwrite? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Ok(())
    } else {
        bail!("not overwriting '{out}'")
    }
}

fn run(cli: &Cli) -> Result<()> {
    let Some(input) = cli.input_path() else {
        bail!("no input: nlmdenoise INPUT [OUTPUT] [options] (see --help)");
    };
    // One rule for every path, before any output exists: an output of no frame is no output.
    if cli.frames == Some(0) {
        bail!("--frames must be at least 1");
    }
    // `-o /dev/null`, the usual way to time a run: the output is discarded.
    let output = cli.output_path().filter(|o| *o != "/dev/null");
    if let Some(out) = output.filter(|o| *o != "-") {
        let same = match (std::fs::canonicalize(out), std::fs::canonicalize(input)) {
            (Ok(a), Ok(b)) => a == b,
            _ => Path::new(out) == Path::new(input),
        };
        if input != "-" && same {
            bail!("the output would overwrite the input '{out}'");
        }
    }
    if cli.segment_in_place && output.is_none_or(|o| o == "-") {
        bail!("--segment-in-place writes into an OUTPUT file (not standard output, not /dev/null)");
    }
    // In place, the output is the file every segment writes into: it is meant to exist.
    if let Some(out) = output.filter(|o| *o != "-" && !cli.segment_in_place) {
        check_overwrite(cli, out)?;
    }
    if cli.sigma == Some(SigmaArg::Auto) && (cli.strength.is_some() || cli.chroma_strength.is_some()) {
        bail!("--sigma auto sets the strengths from the estimate; give a sigma value with --strength, or drop --strength");
    }
    let upscaling = cli.params().algorithm == Algorithm::NlmSr;
    if upscaling && cli.psnr_ref.is_some() {
        bail!("--psnr-ref compares frames of the input's size; it does not combine with --scale");
    }
    let container = match (cli.container, output) {
        (Some(c), Some(_)) => Some(c),
        (Some(_), None) => bail!("--container needs an output (-o FILE, or -o - for standard output)"),
        (None, Some(out)) => Some(Container::from_path(out)?),
        (None, None) => None,
    };
    if cli.output_path().is_none() && !cli.quiet {
        eprintln!("nlmdenoise: no output named: the denoised video is discarded (name an OUTPUT or -o FILE to keep it)");
    }
    // A second interrupt removes an unfinished MP4 file (standard output is never removed).
    interrupt::install(output.filter(|o| *o != "-" && container == Some(Container::Mp4)).map(std::path::PathBuf::from));
    let y4m_in = is_y4m_input(input)?;
    if y4m_in && matches!(container, None | Some(Container::Y4m)) {
        return y4m::run(cli, input, output);
    }
    if cli.segment_in_place {
        bail!("--segment-in-place needs y4m input and y4m output (encoded segments are joined by the driver)");
    }
    if cli.psnr_ref.is_some() {
        bail!("--psnr-ref needs y4m input and y4m output (or no output)");
    }
    if cli.backend == BackendKind::Reference {
        bail!("--backend reference is only available for y4m input and output");
    }
    media::run(cli, input, output, container, y4m_in)
}

/// Options of one algorithm, by clap id, with what reads them.
const ALGORITHM_OPTIONS: &[(&str, nlmdenoise::SettingUse)] = {
    use nlmdenoise::SettingUse::{Bm3d, Nlm, NlmWindow, SuperResolution};
    &[
        ("bm3d_profile", Bm3d),
        ("bm3d_steps", Bm3d),
        ("bm3d_patch_size", Bm3d),
        ("bm3d_search_radius", Bm3d),
        ("bm3d_block_step", Bm3d),
        ("bm3d_hard_block_step", Bm3d),
        ("bm3d_group_size", Bm3d),
        ("bm3d_wiener_group_size", Bm3d),
        ("bm3d_threshold", Bm3d),
        ("bm3d_wiener_threshold", Bm3d),
        ("bm3d_lambda", Bm3d),
        ("bm3d_seeds", Bm3d),
        ("bm3d_wiener_seeds", Bm3d),
        ("bm3d_seed_radius", Bm3d),
        ("bm3d_window_references", Bm3d),
        ("bm3d_frame_groups", Bm3d),
        ("bm3d_motion", Bm3d),
        ("bm3d_bayes", Bm3d),
        ("chroma_sigma", Bm3d),
        ("sr_iterations", SuperResolution),
        ("deblur", SuperResolution),
        ("fusion", SuperResolution),
        ("no_novelty_gate", SuperResolution),
        ("search_radius", NlmWindow),
        ("patch_radius", NlmWindow),
        ("weighting", Nlm),
        ("aggregation_radius", Nlm),
        ("wref", Nlm),
        ("kernel", Nlm),
        ("offsets_per_pass", Nlm),
        ("intermediate", Nlm),
    ]
};

/// Options given on the command line that the chosen algorithm does not read: a note each
/// (the engine's words, as the element's), and an error for options that contradict each other.
fn option_notes(m: &clap::ArgMatches, cli: &Cli) -> Result<Vec<String>> {
    let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if given("scale") && given("algorithm") {
        match (cli.algorithm, cli.scale) {
            (Algorithm::NlmSr, 1) => bail!("--algorithm nlm-sr upscales and --scale 1 means no upscaling: give --scale 2, 3 or 4, or another algorithm"),
            (Algorithm::Nlm | Algorithm::Bm3d, s) if s > 1 => {
                bail!("--scale {s} upscales with NLM super-resolution (nlm-sr); it does not combine with --algorithm {}", cli.algorithm.name())
            }
            _ => {}
        }
    }
    let algorithm = cli.params().algorithm;
    Ok(ALGORITHM_OPTIONS.iter().filter(|(id, _)| given(id)).filter_map(|&(id, used)| nlmdenoise::unused_setting_note(&format!("--{}", id.replace('_', "-")), used, algorithm)).collect())
}

/// A number of seconds above 0 (`--stall-timeout`).
/// Frames `start..end` of the input (0-based, `end` excluded): what a `--segment` run writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
}

impl Segment {
    /// The input frames a segment run reads: the frames its jobs read before and after it
    /// ([`Params::frames_needed`]: the temporal window, twice it for two-step BM3D), fewer at the
    /// input's start, at its end as many as there are.
    pub fn input_frames(&self, (past, future): (u32, u32)) -> (u64, u64) {
        (self.start.saturating_sub(past as u64), self.end + future as u64)
    }

    /// Whether input frame `index` is one the segment writes.
    pub fn writes(&self, index: u64) -> bool {
        (self.start..self.end).contains(&index)
    }
}

fn parse_segment(v: &str) -> std::result::Result<Segment, String> {
    let parsed = v.split_once(':').and_then(|(a, b)| Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?)));
    match parsed {
        Some((start, end)) if start < end => Ok(Segment { start, end }),
        Some(_) => Err(format!("'{v}': the segment's END must be above its START")),
        None => Err(format!("'{v}' is not START:END (frame numbers from 0, END excluded, e.g. 0:250)")),
    }
}

fn positive_seconds(v: &str) -> std::result::Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!("'{v}' is not a number of seconds above 0")),
    }
}

fn main() {
    let parsed = command().try_get_matches().and_then(|m| Ok((<Cli as clap::FromArgMatches>::from_arg_matches(&m)?, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            // --help and --version succeed; every usage error is an error like any other.
            let ok = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand);
            std::process::exit(if ok { exit_code::OK } else { exit_code::ERROR });
        }
    };
    init_logging(cli.verbose);
    let notes = option_notes(&matches, &cli);
    if let Ok(notes) = &notes {
        if !cli.quiet {
            notes.iter().for_each(|n| eprintln!("nlmdenoise: note: {n}"));
        }
    }
    if let Err(e) = notes.and_then(|_| run(&cli)) {
        let code = exit_code::of_error(&e);
        let what = match code {
            exit_code::INCOMPLETE => "incomplete input",
            exit_code::INTERRUPTED => "stopped",
            _ => "error",
        };
        eprintln!("nlmdenoise: {what}: {}", describe_failure(&e));
        std::process::exit(code);
    }
}
