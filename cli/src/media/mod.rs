//! The GStreamer path: decode any file (or feed a y4m file through `appsrc`), denoise the video
//! with the `nlmdenoise` element (registered statically from the plugin crate), re-encode.
//!
//! ```text
//! filesrc ! decodebin ─video─> queue ! videoconvert ! nlmdenoise ! videoconvert ! videoflip ! x264enc ! queue ─> mp4mux/matroskamux ! filesink
//!                     (a GPU decoder: ─video─> queue ! nlmdenoise, frames in CUDA memory)
//!                     └audio─> queue ! audioconvert ! audioresample ! avenc_aac/opusenc ! queue ──────────────┘
//! (y4m input: appsrc instead of filesrc ! decodebin; .y4m output: ... ! videoconvert ! appsink, written by the y4m writer)
//! ```
//!
//! The element, not appsink/appsrc around the engine, keeps timestamps, the end-of-stream drain of
//! the future window and caps handling in one place (the element's), shared with gst-launch users.
//!
//! Submodules by concept: [`factories`] (finding elements), [`configure`] (the element's
//! properties and working caps), [`pipeline`] (video branch, decodebin, audio, muxer),
//! [`y4m_src`] (the appsrc feeder), [`run`] (bus loop and summary).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use gst::prelude::*;

use crate::{Cli, Container};

mod configure;
mod factories;
mod pipeline;
mod run;
mod seek;
mod verify;
mod y4m_sink;
mod y4m_src;

/// What the pad-added handler and the probes share with the main thread.
#[derive(Default)]
struct Shared {
    /// Buffers that left the denoiser (for `--segment`, those of the segment: the others are
    /// dropped as they leave it).
    frames_out: AtomicU64,
    /// Buffers that left the denoiser, a segment's context frames included.
    frames_denoised: AtomicU64,
    /// Buffers that entered the video branch (for --frames), numbered as the input's frames (a
    /// segment that seeks starts counting at its first frame).
    frames_in: AtomicU64,
    /// How a `--segment` of a decoded input reaches its first frame ([`seek`]).
    seek: AtomicU8,
    /// The input's first picture (stream time, ns) and frame duration (ns), for the seek's target.
    first_pts: AtomicU64,
    frame_ns: AtomicU64,
    /// How far into the input (stream time, ns) the decoded streams reached: the end of the
    /// latest decoded video or audio buffer. Against the input's duration it tells a cut file
    /// (every stream ends early) from one whose streams differ in length or frame rate.
    decoded_until: AtomicU64,
    video_linked: AtomicBool,
    audio_linked: AtomicBool,
    /// The video branch was ended early (--frames, an interrupt).
    video_ended: AtomicBool,
    /// Description of the input's audio stream ("48000 Hz, 2 ch") and what became of it.
    audio: Mutex<Option<String>>,
    /// Audio streams after the first: the output keeps one; the summary says how many went.
    extra_audio: AtomicU64,
    /// Running time from which audio is cut (--frames).
    audio_cutoff: Mutex<Option<gst::ClockTime>>,
    /// Where a y4m input fed through appsrc turned out damaged or truncated (the stream was
    /// ended there, so the frames before it are still written).
    damage: Mutex<Option<String>>,
    /// The format the video encoder gets and why, when it differs from the input's depth.
    encoding: Mutex<Option<(gst_video::VideoFormat, Option<String>)>>,
    /// The input's orientation tag (`image-orientation`, e.g. "rotate-90") when not upright.
    orientation: Mutex<Option<String>>,
    /// An error found in a callback, reported instead of GStreamer's own.
    error: Mutex<Option<String>>,
    /// The decoder gives its frames to the element in GPU memory (`pipeline::gpu_frames`).
    gpu_frames: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Posts an error on the bus from a streaming thread (the message the user sees is `msg`).
fn post_error(element: &gst::Element, shared: &Shared, msg: String) {
    lock(&shared.error).get_or_insert(msg.clone());
    let _ = element.post_message(gst::message::Error::builder(gst::CoreError::Failed, &msg).src(element).build());
}

/// Denoises (or upscales) `input` into `output` through a GStreamer pipeline around the plugin's
/// element (`container` None: the output is discarded).
pub fn run(cli: &Cli, input: &str, output: Option<&str>, container: Option<Container>, y4m_in: bool) -> Result<()> {
    gst::init().context("initialising GStreamer")?;
    gstnlmdenoise::plugin_register_static().context("registering the nlmdenoise element")?;
    if cli.verbose > 0 {
        // -v: the element's own log (backend chosen, format, latency, reconfigurations) at INFO,
        // -vv at DEBUG; GST_DEBUG still overrides.
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            gst::log::set_colored(false);
        }
        if std::env::var_os("GST_DEBUG").is_none() {
            gst::log::set_threshold_for_name("nlmdenoise", if cli.verbose > 1 { gst::DebugLevel::Debug } else { gst::DebugLevel::Info });
        }
    }

    factories::check_available(y4m_in, output, container)?;

    let result = build_and_run(cli, input, output, container, y4m_in);
    if let (Err(e), Some(path)) = (&result, output) {
        crate::exit_code::remove_failed_output(e, path);
    }
    result
}

/// Builds the pipeline for `input`, runs it and reports.
fn build_and_run(cli: &Cli, input: &str, output: Option<&str>, container: Option<Container>, y4m_in: bool) -> Result<()> {
    let pipeline = gst::Pipeline::new();
    let shared = Arc::new(Shared::default());
    let den = configure::make_element(cli)?;
    let video = pipeline::build_video_branch(&pipeline, &den, cli, output, container)?;
    pipeline::add_probes(&video, &den, cli, &shared);
    let (total, input_desc, feeder) = if y4m_in {
        let source = y4m_src::add_source(&pipeline, &video, cli, input, &shared)?;
        (source.total, Some(source.desc), Some(source.feeder))
    } else {
        pipeline::add_decoder(&pipeline, &video, cli, input, container, &shared)?;
        (None, None, None)
    };
    let total = match (total, cli.frames, cli.segment) {
        (_, _, Some(s)) => Some(s.end - s.start),
        (Some(t), Some(l), _) => Some(t.min(l)),
        (t, _, _) => t,
    };
    let outcome = run::play(&pipeline, &den, cli, input, total, feeder, &shared);
    run::finish(outcome, cli, input, input_desc, output, container, &shared)
}
