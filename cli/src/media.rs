//! The GStreamer path: decode any file (or feed a y4m file through `appsrc`), denoise the video
//! with the `nlmdenoise` element (registered statically from the plugin crate), re-encode.
//!
//! ```text
//! filesrc ! decodebin ─video─> queue ! videoconvert ! nlmdenoise ! videoconvert ! x264enc ! queue ─> mp4mux/matroskamux ! filesink
//!                     └audio─> queue ! audioconvert ! audioresample ! avenc_aac/opusenc ! queue ─┘
//! (y4m input: appsrc instead of filesrc ! decodebin; .y4m output: ... ! videoconvert ! y4menc ! filesink)
//! ```
//!
//! The element, not appsink/appsrc around the engine, keeps timestamps, the end-of-stream drain of
//! the future window and caps handling in one place (the element's), shared with gst-launch users.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use gst::prelude::*;
use gst_video::prelude::*;

use nlmdenoise::y4m::Y4mReader;
use nlmdenoise::{BackendKind, OwnedFrame};

use crate::{BitDepthArg, Cli, Container, IntermediateArg, KernelArg};

/// The Debian package that provides a GStreamer element (bookworm).
fn package_of(factory: &str) -> &'static str {
    match factory {
        "x264enc" => "gstreamer1.0-plugins-ugly",
        "avenc_aac" => "gstreamer1.0-libav",
        "mp4mux" | "matroskamux" | "y4menc" => "gstreamer1.0-plugins-good",
        "filesrc" | "filesink" | "fdsink" | "fakesink" | "queue" => "libgstreamer1.0-0",
        _ => "gstreamer1.0-plugins-base",
    }
}

fn what_is(factory: &str) -> &'static str {
    match factory {
        "x264enc" => "H.264 encoder",
        "avenc_aac" => "AAC encoder",
        "opusenc" => "Opus encoder",
        "mp4mux" => "MP4 muxer",
        "matroskamux" => "Matroska muxer",
        "y4menc" => "YUV4MPEG2 encoder",
        "decodebin" => "automatic decoder",
        "videoconvert" | "audioconvert" | "audioresample" => "format converter",
        _ => "element",
    }
}

fn missing(factory: &str) -> String {
    format!("the GStreamer element '{factory}' ({}) is missing: install the Debian package {}", what_is(factory), package_of(factory))
}

fn make(factory: &str) -> Result<gst::Element> {
    gst::ElementFactory::make(factory).build().map_err(|_| anyhow!(missing(factory)))
}

/// What the pad-added handler and the probes share with the main thread.
#[derive(Default)]
struct Shared {
    /// Buffers that left the denoiser.
    frames_out: AtomicU64,
    /// Buffers that entered the video branch (for --frames).
    frames_in: AtomicU64,
    video_linked: AtomicBool,
    audio_linked: AtomicBool,
    /// The video branch was ended early (--frames, an interrupt).
    video_ended: AtomicBool,
    /// Description of the input's audio stream ("48000 Hz, 2 ch") and what became of it.
    audio: Mutex<Option<String>>,
    /// Running time from which audio is cut (--frames).
    audio_cutoff: Mutex<Option<gst::ClockTime>>,
    /// Where a y4m input fed through appsrc turned out damaged or truncated (the stream was
    /// ended there, so the frames before it are still written).
    damage: Mutex<Option<String>>,
    /// The format the video encoder gets and why, when it differs from the input's depth.
    encoding: Mutex<Option<(gst_video::VideoFormat, Option<String>)>>,
    /// An error found in a callback, reported instead of GStreamer's own.
    error: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Posts an error on the bus from a streaming thread (the message the user sees is `msg`).
fn post_error(element: &gst::Element, shared: &Shared, msg: String) {
    lock(&shared.error).get_or_insert(msg.clone());
    let _ = element.post_message(gst::message::Error::builder(gst::CoreError::Failed, &msg).src(element).build());
}

fn configure_denoiser(den: &gst::Element, cli: &Cli) -> Result<()> {
    let p = cli.params();
    p.validate()?;
    let backend = match cli.backend {
        BackendKind::Auto => "auto",
        BackendKind::Cpu => "cpu",
        BackendKind::Cuda => "cuda",
        BackendKind::Reference => bail!("--backend reference is only available for y4m input and output"),
    };
    if cli.pipeline_depth > 4 {
        bail!("--pipeline-depth {} is out of range (0..=4)", cli.pipeline_depth);
    }
    if !(1..=4).contains(&cli.offsets_per_pass) {
        bail!("--offsets-per-pass {} is out of range (1..=4)", cli.offsets_per_pass);
    }
    if cli.threads > 1024 {
        bail!("--threads {} is out of range (0..=1024)", cli.threads);
    }
    let options = cli.backend_options()?;
    den.set_property_from_str("backend", backend);
    den.set_property("device-id", gstnlmdenoise::devices_to_string(&options));
    den.set_property("chunk-frames", cli.chunk_frames);
    den.set_property("threads", cli.threads as u32);
    den.set_property_from_str(
        "kernel",
        match cli.kernel {
            KernelArg::Auto => "auto",
            KernelArg::Fused => "fused",
            KernelArg::Multipass => "multipass",
        },
    );
    den.set_property("offsets-per-pass", cli.offsets_per_pass);
    den.set_property_from_str(
        "intermediate",
        match cli.intermediate {
            IntermediateArg::F32 => "f32",
            IntermediateArg::F16 => "f16",
            IntermediateArg::Unorm10 => "unorm10",
        },
    );
    den.set_property("pipeline-depth", cli.pipeline_depth as u32);
    den.set_property_from_str("algorithm", p.algorithm.as_str());
    den.set_property_from_str("bm3d-profile", p.bm3d.profile.as_str());
    let profile_value = |v: Option<u32>| v.map(|v| v as i32).unwrap_or(-1);
    den.set_property("bm3d-steps", profile_value(p.bm3d.steps));
    den.set_property("bm3d-patch-size", profile_value(p.bm3d.patch_size));
    den.set_property("bm3d-search-radius", profile_value(p.bm3d.search_radius));
    den.set_property("bm3d-block-step", profile_value(p.bm3d.block_step));
    den.set_property("bm3d-group-size", profile_value(p.bm3d.group_size));
    den.set_property("bm3d-wiener-group-size", profile_value(p.bm3d.wiener_group_size));
    den.set_property("bm3d-seeds", profile_value(p.bm3d.seeds));
    den.set_property("bm3d-seed-radius", profile_value(p.bm3d.seed_radius));
    den.set_property("bm3d-window-references", profile_value(p.bm3d.window_references.map(u32::from)));
    den.set_property("bm3d-threshold", p.bm3d.threshold.unwrap_or(-1.0));
    den.set_property("bm3d-wiener-threshold", p.bm3d.wiener_threshold.unwrap_or(-1.0));
    den.set_property("bm3d-lambda", p.bm3d.lambda.unwrap_or(-1.0));
    den.set_property("chroma-sigma", p.bm3d.chroma_sigma.unwrap_or(-1.0));
    den.set_property("search-radius", p.search_radius);
    den.set_property("patch-radius", p.patch_radius);
    den.set_property("temporal-past", p.temporal_past);
    den.set_property("temporal-future", p.temporal_future);
    den.set_property_from_str("weighting", p.weighting.as_str());
    den.set_property("wref", p.wref);
    den.set_property_from_str("chroma-mode", p.chroma_mode.as_str());
    den.set_property_from_str("planes", p.planes.as_str());
    // sigma first: with strengths not yet set explicitly the element derives them from it; the
    // computed strengths (explicit or derived, as in the y4m path) are then set on top.
    den.set_property("sigma", p.sigma.unwrap_or(-1.0));
    if !p.sigma_auto {
        // Setting a strength turns the element's automatic sigma off (sigma -1 then means none).
        den.set_property("strength", p.strength);
        den.set_property("chroma-strength", p.chroma_strength);
    }
    Ok(())
}

/// Sets the `nlmupscale` element's properties from the command line (--scale and the NLM
/// settings that apply to it).
fn configure_upscaler(up: &gst::Element, cli: &Cli) -> Result<()> {
    let p = cli.params();
    p.validate()?;
    let options = cli.backend_options()?;
    let backend = match cli.backend {
        BackendKind::Auto => "auto",
        BackendKind::Cpu => "cpu",
        BackendKind::Cuda => "cuda",
        BackendKind::Reference => bail!("--backend reference is only available for y4m input and output"),
    };
    up.set_property_from_str("backend", backend);
    up.set_property("device-id", gstnlmdenoise::devices_to_string(&options));
    up.set_property("chunk-frames", cli.chunk_frames);
    up.set_property("threads", cli.threads.min(1024) as u32);
    up.set_property("pipeline-depth", cli.pipeline_depth.min(4) as u32);
    up.set_property("scale", p.sr.scale);
    up.set_property("iterations", p.sr.iterations);
    up.set_property("deblur", p.sr.deblur);
    up.set_property("fusion", p.sr.fusion);
    up.set_property("novelty-gate", p.sr.novelty_gate);
    up.set_property("search-radius", p.search_radius);
    up.set_property("patch-radius", p.patch_radius);
    up.set_property("temporal-past", p.temporal_past);
    up.set_property("temporal-future", p.temporal_future);
    // sigma first (strengths follow it), then the strengths the command line resolved.
    up.set_property("sigma", p.sigma.filter(|s| *s > 0.0).unwrap_or(-1.0));
    up.set_property("strength", p.strength);
    up.set_property("chroma-strength", p.chroma_strength);
    Ok(())
}

fn video_encoder(cli: &Cli) -> Result<gst::Element> {
    let enc = make("x264enc")?;
    enc.set_property_from_str("speed-preset", cli.preset.nick());
    match cli.bitrate {
        Some(kbps) => {
            enc.set_property_from_str("pass", "cbr");
            enc.set_property("bitrate", kbps.min(2_048_000));
        }
        None => {
            enc.set_property_from_str("pass", "qual");
            enc.set_property("quantizer", cli.crf);
        }
    }
    Ok(enc)
}

fn describe_encoding(cli: &Cli, container: Option<Container>, audio: bool, encoded: Option<gst_video::VideoFormat>) -> String {
    let profile = encoded.map(|f| {
        let info = gst_video::VideoFormatInfo::from_format(f);
        let chroma = match (info.w_sub().get(1), info.h_sub().get(1)) {
            (Some(1), Some(1)) => "4:2:0",
            (Some(1), Some(0)) => "4:2:2",
            _ => "4:4:4",
        };
        format!(" {}-bit {chroma}", info.depth()[0])
    });
    let video = match cli.bitrate {
        Some(kbps) => format!("H.264{} {kbps} kbit/s, preset {}", profile.unwrap_or_default(), cli.preset.nick()),
        None => format!("H.264{} crf {}, preset {}", profile.unwrap_or_default(), cli.crf, cli.preset.nick()),
    };
    match container {
        Some(Container::Mp4) if audio => format!("{video} + AAC {} kbit/s in MP4", cli.audio_bitrate),
        Some(Container::Mp4) => format!("{video} in MP4, no audio"),
        Some(Container::Mkv) if audio => format!("{video} + Opus {} kbit/s in Matroska", cli.audio_bitrate),
        Some(Container::Mkv) => format!("{video} in Matroska, no audio"),
        Some(Container::Y4m) => "y4m, no audio".to_string(),
        None => "discarded".to_string(),
    }
}

/// Builds and links `queue ! audioconvert ! audioresample ! ENC ! queue ! mux` for a decoded
/// audio pad.
/// Links decoded audio through an encoder into the muxer; returns the pad that feeds the muxer
/// (where the audio is cut: buffers leave it only as the muxer interleaves them).
fn link_audio(pipeline: &gst::Pipeline, pad: &gst::Pad, mux: &gst::Element, container: Container, audio_bitrate: u32) -> Result<gst::Pad> {
    let encoder = match container {
        Container::Mp4 => "avenc_aac",
        _ => "opusenc",
    };
    if gst::ElementFactory::find(encoder).is_none() {
        bail!("{} (or pass --no-audio)", missing(encoder));
    }
    let q1 = make("queue")?;
    let conv = make("audioconvert")?;
    let resample = make("audioresample")?;
    let enc = make(encoder)?;
    enc.set_property("bitrate", (audio_bitrate * 1000) as i32);
    let q2 = make("queue")?;
    // Compressed audio is small; an unbounded queue in front of the muxer keeps audio from
    // blocking the demuxer while the video encoder holds frames back.
    q2.set_property("max-size-buffers", 0u32);
    q2.set_property("max-size-bytes", 0u32);
    q2.set_property("max-size-time", 0u64);
    let elements = [&q1, &conv, &resample, &enc, &q2];
    pipeline.add_many(elements).context("adding the audio branch")?;
    gst::Element::link_many(elements).context("linking the audio branch")?;
    let mux_pad = mux.request_pad_simple("audio_%u").context("the muxer refused an audio stream")?;
    q2.static_pad("src").unwrap().link(&mux_pad).context("linking audio to the muxer")?;
    for e in elements {
        e.sync_state_with_parent().context("starting the audio branch")?;
    }
    pad.link(&q1.static_pad("sink").unwrap()).context("linking the decoded audio")?;
    Ok(q2.static_pad("src").unwrap())
}

fn link_fakesink(pipeline: &gst::Pipeline, pad: &gst::Pad) {
    if let Ok(sink) = make("fakesink") {
        sink.set_property("sync", false);
        sink.set_property("async", false);
        if pipeline.add(&sink).is_ok() {
            let _ = sink.sync_state_with_parent();
            let _ = pad.link(&sink.static_pad("sink").unwrap());
        }
    }
}

fn audio_summary(caps: &gst::CapsRef) -> String {
    let s = caps.structure(0);
    let rate = s.and_then(|s| s.get::<i32>("rate").ok());
    let ch = s.and_then(|s| s.get::<i32>("channels").ok());
    match (rate, ch) {
        (Some(r), Some(c)) => format!("audio {r} Hz {c} ch"),
        _ => "audio".to_string(),
    }
}

/// Feeds the frames of a y4m file to `appsrc` (timestamps from the header's frame rate).
fn feed_y4m(appsrc: gst_app::AppSrc, mut reader: Y4mReader<std::io::BufReader<std::fs::File>>, vinfo: gst_video::VideoInfo, limit: Option<u64>, shared: Arc<Shared>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let info = reader.header().video_info();
        let mut frame = OwnedFrame::new(info);
        let fps = vinfo.fps();
        let duration = gst::ClockTime::SECOND.mul_div_floor(fps.denom() as u64, fps.numer().max(1) as u64);
        let mut n = 0u64;
        while limit.is_none_or(|l| n < l) {
            if crate::interrupt::requested() {
                break;
            }
            match reader.read_frame(&mut frame) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    *lock(&shared.damage) = Some(e.to_string());
                    break;
                }
            }
            // Every way out of this loop ends the stream (EOS or an error on the bus): a feeder
            // that just stopped would leave the pipeline waiting forever.
            let buffer = match y4m_buffer(&frame, &vinfo, n, duration) {
                Ok(b) => b,
                Err(e) => {
                    post_error(appsrc.upcast_ref(), &shared, format!("input frame {n}: {e}"));
                    return;
                }
            };
            if appsrc.push_buffer(buffer).is_err() {
                return; // stopped (error or flushing)
            }
            n += 1;
        }
        let _ = appsrc.end_of_stream();
    })
}

/// Copies a y4m frame into a new buffer of `vinfo` (its own strides) stamped as frame `n`.
fn y4m_buffer(frame: &OwnedFrame, vinfo: &gst_video::VideoInfo, n: u64, duration: Option<gst::ClockTime>) -> Result<gst::Buffer> {
    let fps = vinfo.fps();
    let mut buffer = gst::Buffer::with_size(vinfo.size()).map_err(|_| anyhow!("cannot allocate a {} byte buffer", vinfo.size()))?;
    {
        let buf = buffer.get_mut().context("a new buffer is writable")?;
        buf.set_pts(gst::ClockTime::SECOND.mul_div_floor(n * fps.denom() as u64, fps.numer().max(1) as u64));
        buf.set_duration(duration);
        let mut vf = gst_video::VideoFrameRef::from_buffer_ref_writable(buf, vinfo).map_err(|_| anyhow!("cannot map a buffer as {:?}", vinfo.format()))?;
        for p in 0..frame.planes.len() {
            let dst_stride = vf.plane_stride().get(p).copied().unwrap_or(0).max(0) as usize;
            let dst = vf.plane_data_mut(p as u32).map_err(|e| anyhow!("plane {p}: {e}"))?;
            let row = frame.strides[p];
            for (r, src) in frame.planes[p].chunks_exact(row).enumerate() {
                let d = dst.get_mut(r * dst_stride..r * dst_stride + row).ok_or_else(|| anyhow!("plane {p} of the buffer is smaller than the y4m frame"))?;
                d.copy_from_slice(src);
            }
        }
    }
    Ok(buffer)
}

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

    let mut needed = vec!["queue", "videoconvert"];
    needed.extend(if y4m_in { &["appsrc"][..] } else { &["filesrc", "decodebin"][..] });
    match container {
        Some(Container::Mp4) => needed.extend(["x264enc", "mp4mux", "filesink"]),
        Some(Container::Mkv) => needed.extend(["x264enc", "matroskamux", "filesink"]),
        Some(Container::Y4m) => needed.extend(["y4menc", if output == Some("-") { "fdsink" } else { "filesink" }]),
        None => needed.push("fakesink"),
    }
    for f in needed {
        if gst::ElementFactory::find(f).is_none() {
            bail!(missing(f));
        }
    }

    let result = build_and_run(cli, input, output, container, y4m_in);
    if let (Err(e), Some(path)) = (&result, output) {
        crate::exit_code::remove_failed_output(e, path);
    }
    result
}

fn build_and_run(cli: &Cli, input: &str, output: Option<&str>, container: Option<Container>, y4m_in: bool) -> Result<()> {
    let pipeline = gst::Pipeline::new();
    let shared = Arc::new(Shared::default());
    let vqueue = make("queue")?;
    let conv_in = make("videoconvert")?;
    let upscaling = cli.params().algorithm == nlmdenoise::Algorithm::NlmSr;
    let factory = if upscaling { "nlmupscale" } else { "nlmdenoise" };
    let den = gst::ElementFactory::make(factory).build().with_context(|| format!("creating the {factory} element"))?;
    if upscaling {
        configure_upscaler(&den, cli)?;
    } else {
        configure_denoiser(&den, cli)?;
    }
    let conv_out = make("videoconvert")?;
    // Pins the format the denoiser works in (see `working_caps`): videoconvert alone would pick
    // the "least lossy" format, Y444_16LE, for everything.
    let format_filter = make("capsfilter")?;
    let mut chain = vec![vqueue.clone(), conv_in, format_filter.clone(), den.clone(), conv_out];
    let mut mux = None;
    let mut encoder_filter: Option<gst::Element> = None;
    match container {
        Some(c @ (Container::Mp4 | Container::Mkv)) => {
            let enc = video_encoder(cli)?;
            // The encoder's input format: set once the input's is known (encoder_format).
            let enc_filter = make("capsfilter")?;
            chain.push(enc_filter.clone());
            encoder_filter = Some(enc_filter);
            let q = make("queue")?;
            q.set_property("max-size-buffers", 0u32);
            q.set_property("max-size-bytes", 0u32);
            q.set_property("max-size-time", 0u64);
            let m = make(if c == Container::Mp4 { "mp4mux" } else { "matroskamux" })?;
            let sink = make("filesink")?;
            sink.set_property("location", output.expect("a container comes with an output"));
            pipeline.add_many([&m, &sink])?;
            m.link(&sink).context("linking the muxer")?;
            chain.extend([enc, q]);
            mux = Some(m);
        }
        Some(Container::Y4m) => {
            let enc = make("y4menc")?;
            let sink = match output {
                Some("-") | None => {
                    let s = make("fdsink")?;
                    s.set_property("fd", 1i32);
                    s
                }
                Some(path) => {
                    let s = make("filesink")?;
                    s.set_property("location", path);
                    s
                }
            };
            chain.extend([enc, sink]);
        }
        None => {
            let sink = make("fakesink")?;
            sink.set_property("sync", false);
            chain.push(sink);
        }
    }
    pipeline.add_many(&chain)?;
    gst::Element::link_many(&chain).context("linking the video branch")?;
    if let Some(m) = &mux {
        let pad = m.request_pad_simple("video_%u").context("the muxer refused a video stream")?;
        chain.last().unwrap().static_pad("src").unwrap().link(&pad).context("linking video to the muxer")?;
    }

    // Counting and --frames.
    {
        let sh = shared.clone();
        den.static_pad("src").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            sh.frames_out.fetch_add(1, Ordering::Relaxed);
            gst::PadProbeReturn::Ok
        });
    }
    // --frames and interrupts: the video branch ends at its entry (EOS, later buffers dropped),
    // and the audio at the same running time, so that the muxer finishes a playable file. (An EOS
    // sent to the source would not do: the demuxer reads the file in pull mode.)
    {
        let (sh, limit) = (shared.clone(), cli.frames);
        vqueue.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
            let n = sh.frames_in.fetch_add(1, Ordering::Relaxed);
            let rt = info.buffer().and_then(|b| b.pts()).and_then(|pts| running_time(pad, pts));
            if let (0, Some(limit)) = (n, limit) {
                // Provisional audio cut from the frame rate; made exact at frame `limit`.
                let fps = pad.current_caps().and_then(|c| gst_video::VideoInfo::from_caps(&c).ok()).map(|i| i.fps());
                if let (Some(r0), Some(len)) = (rt, fps.and_then(|f| frames_duration(limit, f))) {
                    lock(&sh.audio_cutoff).get_or_insert(r0 + len);
                }
            }
            if !(limit.is_some_and(|l| n >= l) || crate::interrupt::requested()) {
                return gst::PadProbeReturn::Ok;
            }
            if !sh.video_ended.swap(true, Ordering::SeqCst) {
                if let Some(r) = rt {
                    *lock(&sh.audio_cutoff) = Some(r);
                }
                pad.send_event(gst::event::Eos::new());
            }
            // Dropped here rather than with `Drop`, which GStreamer 1.22 answers with a critical
            // (it unrefs the buffer the bindings already released).
            drop(info.data.take());
            gst::PadProbeReturn::Handled
        });
    }

    // The source.
    let mut feeder = None;
    let mut total: Option<u64> = None;
    let input_desc;
    if y4m_in {
        let file = std::fs::File::open(input).with_context(|| format!("cannot open input '{input}'"))?;
        let len = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        let reader = Y4mReader::new(std::io::BufReader::with_capacity(1 << 20, file)).with_context(|| format!("reading the y4m header of '{input}'"))?;
        let header = reader.header().clone();
        let (num, den_) = header.frame_rate.unwrap_or((25, 1));
        let format = gstnlmdenoise::format_to_gst(header.layout.format);
        let vinfo = gst_video::VideoInfo::builder(format, header.width as u32, header.height as u32)
            .fps(gst::Fraction::new(num.min(i32::MAX as u64) as i32, den_.clamp(1, i32::MAX as u64) as i32))
            .build()
            .context("y4m header")?;
        let appsrc = gst_app::AppSrc::builder().caps(&vinfo.to_caps().context("y4m caps")?).format(gst::Format::Time).block(true).max_bytes((vinfo.size() * 4) as u64).build();
        format_filter.set_property("caps", gst::Caps::builder("video/x-raw").field("format", format.to_str()).build());
        if let Some(f) = &encoder_filter {
            let (enc_format, note) = encoder_format(&gst_video::VideoFormatInfo::from_format(format), cli.bit_depth);
            f.set_property("caps", gst::Caps::builder("video/x-raw").field("format", enc_format.to_str()).build());
            *lock(&shared.encoding) = Some((enc_format, note));
        }
        pipeline.add(&appsrc)?;
        appsrc.link(&vqueue).context("linking appsrc")?;
        total = len.map(|l| reader.estimate_frames(l));
        input_desc = format!("y4m C{}", header.colorspace);
        feeder = Some((appsrc, reader, vinfo));
    } else {
        let src = make("filesrc")?;
        src.set_property("location", input);
        let dec = make("decodebin")?;
        pipeline.add_many([&src, &dec])?;
        src.link(&dec).context("linking filesrc and decodebin")?;
        let weak = pipeline.downgrade();
        let vsink = vqueue.static_pad("sink").unwrap();
        let sh = shared.clone();
        let mux_ = mux.clone();
        let filter = format_filter.clone();
        let (enc_filter, bit_depth) = (encoder_filter.clone(), cli.bit_depth);
        let keep_audio = !cli.no_audio && matches!(container, Some(Container::Mp4 | Container::Mkv));
        let (audio_bitrate, frame_limit) = (cli.audio_bitrate, cli.frames);
        dec.connect_pad_added(move |dec, pad| {
            let Some(pipeline) = weak.upgrade() else { return };
            let caps = pad.current_caps().unwrap_or_else(|| pad.query_caps(None));
            let name = caps.structure(0).map(|s| s.name().to_string()).unwrap_or_default();
            if name.starts_with("video/") && !sh.video_linked.swap(true, Ordering::SeqCst) {
                filter.set_property("caps", working_caps(&caps));
                let decoded = caps.is_fixed().then(|| gst_video::VideoInfo::from_caps(&caps).ok()).flatten();
                if let (Some(f), Some(info)) = (&enc_filter, decoded) {
                    let (enc_format, note) = encoder_format(&info.format_info(), bit_depth);
                    f.set_property("caps", gst::Caps::builder("video/x-raw").field("format", enc_format.to_str()).build());
                    *lock(&sh.encoding) = Some((enc_format, note));
                }
                if let Some(limit) = frame_limit {
                    // The audio cut (running time) before any buffer flows, so that audio the
                    // demuxer delivers ahead of the video is cut too; made exact at frame `limit`.
                    let fps = caps.is_fixed().then(|| gst_video::VideoInfo::from_caps(&caps).ok()).flatten().map(|i| i.fps());
                    if let Some(len) = fps.and_then(|f| frames_duration(limit, f)) {
                        lock(&sh.audio_cutoff).get_or_insert(len);
                    }
                }
                if let Err(e) = pad.link(&vsink) {
                    post_error(dec, &sh, format!("cannot link the decoded video ({caps}): {e:?}"));
                }
            } else if name.starts_with("audio/") && !sh.audio_linked.swap(true, Ordering::SeqCst) {
                let summary = audio_summary(&caps);
                if keep_audio {
                    let (mux, container) = (mux_.as_ref().expect("muxer"), container.expect("container"));
                    let to_mux = match link_audio(&pipeline, pad, mux, container, audio_bitrate) {
                        Ok(p) => p,
                        Err(e) => {
                            post_error(dec, &sh, format!("{e:#}"));
                            return;
                        }
                    };
                    {
                        let sh2 = sh.clone();
                        to_mux.add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
                            let cut = *lock(&sh2.audio_cutoff);
                            match (cut, info.buffer().and_then(|b| b.pts()).and_then(|pts| running_time(pad, pts))) {
                                (Some(cut), Some(rt)) if rt >= cut => {
                                    if let Some(peer) = pad.peer() {
                                        peer.send_event(gst::event::Eos::new());
                                    }
                                    drop(info.data.take());
                                    gst::PadProbeReturn::Handled
                                }
                                _ => gst::PadProbeReturn::Ok,
                            }
                        });
                    }
                    *lock(&sh.audio) = Some(format!("{summary}, re-encoded"));
                } else {
                    *lock(&sh.audio) = Some(format!("{summary}, dropped"));
                    link_fakesink(&pipeline, pad);
                }
            } else {
                link_fakesink(&pipeline, pad);
            }
        });
        let sh = shared.clone();
        dec.connect_no_more_pads(move |dec| {
            if !sh.video_linked.load(Ordering::SeqCst) {
                post_error(dec, &sh, "the input has no video stream".to_string());
            }
        });
        input_desc = String::new();
    }
    if let (Some(t), Some(l)) = (total, cli.frames) {
        total = Some(t.min(l));
    }

    let bus = pipeline.bus().expect("a pipeline has a bus");
    let bar = crate::progress::bar(cli.quiet, total);
    let start = Instant::now();
    let mut feeder_thread = None;
    let mut interrupted = false;
    let mut total_expected = total;
    let result = 'run: {
        if pipeline.set_state(gst::State::Playing).is_err() {
            // The reason is on the bus.
            if let Some(msg) = bus.timed_pop_filtered(gst::ClockTime::from_seconds(1), &[gst::MessageType::Error]) {
                if let gst::MessageView::Error(err) = msg.view() {
                    break 'run Err(describe_error(err, input, &den, &shared, cli.verbose > 0));
                }
            }
            break 'run Err(anyhow!("the pipeline failed to start"));
        }
        if let Some((appsrc, reader, vinfo)) = feeder.take() {
            feeder_thread = Some(feed_y4m(appsrc, reader, vinfo, cli.frames, shared.clone()));
        }
        let mut total_known = total.is_some();
        loop {
            bar.set_position(shared.frames_out.load(Ordering::Relaxed));
            if !total_known {
                if let Some(n) = estimate_total(&pipeline, &den) {
                    total_expected = Some(n);
                    let n = cli.frames.map_or(n, |l| l.min(n));
                    crate::progress::set_total(&bar, Some(n));
                    total_known = true;
                }
            }
            if crate::interrupt::requested() && !interrupted {
                // The probe at the video branch's entry ends the stream at the next frame.
                interrupted = true;
            }
            let Some(msg) = bus.timed_pop(gst::ClockTime::from_mseconds(100)) else { continue };
            match msg.view() {
                gst::MessageView::Eos(_) => break 'run Ok(()),
                gst::MessageView::Error(err) => break 'run Err(describe_error(err, input, &den, &shared, cli.verbose > 0)),
                gst::MessageView::Element(m) if cli.verbose > 0 && !cli.quiet => {
                    if let Some(e) = m.structure().filter(|st| st.name() == "nlmdenoise-noise").and_then(noise_of_message) {
                        bar.suspend(|| eprintln!("  {:.0} s: noise sigma estimate {}", e.1.seconds_f64(), crate::y4m::describe_noise(e.0)));
                    }
                }
                gst::MessageView::Warning(w) if !cli.quiet => {
                    let src = w.src().map(|s| s.name().to_string()).unwrap_or_default();
                    bar.suspend(|| eprintln!("nlmdenoise: warning ({src}): {}", w.error()));
                }
                _ => {}
            }
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let backend: Option<String> = den.property("backend-in-use");
    // The upscaler does not estimate the noise (no such properties).
    let (luma, chroma) = match den.find_property("sigma-estimate") {
        Some(_) => (den.property::<f32>("sigma-estimate"), den.property::<f32>("chroma-sigma-estimate")),
        None => (-1.0, -1.0),
    };
    let noise = (luma >= 0.0).then(|| nlmdenoise::noise::NoiseEstimate { luma, chroma: (chroma >= 0.0).then_some(chroma) });
    let caps = den.static_pad("sink").and_then(|p| p.current_caps());
    let out_caps = den.static_pad("src").and_then(|p| p.current_caps());
    let _ = pipeline.set_state(gst::State::Null);
    if let Some(t) = feeder_thread {
        let _ = t.join();
    }
    bar.finish_and_clear();
    result?;

    let frames = shared.frames_out.load(Ordering::Relaxed);
    let damage = lock(&shared.damage).clone();
    if frames == 0 && !interrupted {
        match damage {
            Some(d) => bail!("no complete frame in '{input}': {d}"),
            None => bail!("no video frame could be decoded from '{input}': the file is damaged or truncated, or holds no picture"),
        }
    }
    // The frames the input promised (duration x frame rate, or the y4m file's size) against those
    // that came out: fewer means the input ended early (truncated, damaged).
    let expected = total_expected.map(|t| cli.frames.map_or(t, |l| l.min(t)));
    let short = expected.filter(|&t| frames + (t / 100).max(1) < t);
    if !cli.quiet {
        let vinfo = caps.as_ref().and_then(|c| gst_video::VideoInfo::from_caps(c).ok());
        let (mut size, format, fps) = match &vinfo {
            Some(i) => (format!("{}x{}", i.width(), i.height()), i.format().to_str().to_string(), format!("{}/{}", i.fps().numer(), i.fps().denom())),
            None => ("?x?".into(), "?".into(), "?".into()),
        };
        if let Some(o) = out_caps.as_ref().and_then(|c| gst_video::VideoInfo::from_caps(c).ok()).filter(|o| vinfo.as_ref().is_some_and(|i| (i.width(), i.height()) != (o.width(), o.height()))) {
            size.push_str(&format!(" -> {}x{}", o.width(), o.height()));
        }
        eprintln!(
            "nlmdenoise: {frames} frames {size} {format} in {seconds:.2} s ({:.2} fps), backend: {}",
            frames as f64 / seconds.max(1e-9),
            backend.unwrap_or_else(|| "none (no frame reached the denoiser)".into())
        );
        if let Some(e) = noise {
            eprintln!("  noise sigma (estimated, 8-bit units): {}", crate::y4m::describe_noise(e));
        }
        let audio = lock(&shared.audio).clone();
        let input_kind = if input_desc.is_empty() { format!("video {format} {fps} fps") } else { input_desc };
        eprintln!("  input:  '{input}' ({input_kind}, {})", audio.as_deref().unwrap_or("no audio"));
        let out = output.map_or("(discarded)".to_string(), |o| if o == "-" { "standard output".into() } else { format!("'{o}'") });
        let encoding = lock(&shared.encoding).clone();
        eprintln!("  output: {out} ({})", describe_encoding(cli, container, audio.as_deref().is_some_and(|a| a.ends_with("re-encoded")), encoding.as_ref().map(|e| e.0)));
        if let Some((_, Some(note))) = encoding {
            eprintln!("  note: {note}");
        }
    }
    if interrupted {
        return Err(crate::exit_code::Interrupted.into());
    }
    if let Some(d) = damage {
        return Err(crate::exit_code::Incomplete(format!("{d}; the {frames} complete frames before it were denoised and written")).into());
    }
    if let Some(t) = short {
        return Err(
            crate::exit_code::Incomplete(format!("the input ended after {frames} of the {t} frames it announced (truncated or damaged); the output holds every frame that could be decoded")).into()
        );
    }
    Ok(())
}

/// What H.264 (x264enc) gets for an input of format `input`: its chroma subsampling (4:2:0,
/// 4:2:2 or 4:4:4; grey as 4:2:0, RGB as 4:4:4) and, with `--bit-depth auto`, 10 bits for inputs
/// deeper than 8 (x264 takes 8 or 10), else the depth asked for. The note says when bits are
/// dropped.
fn encoder_format(input: &gst_video::VideoFormatInfo, depth: BitDepthArg) -> (gst_video::VideoFormat, Option<String>) {
    use gst_video::VideoFormat as F;
    let bits = input.depth().first().copied().unwrap_or(8);
    let sub = if input.is_yuv() && input.n_components() >= 3 {
        (input.w_sub()[1], input.h_sub()[1])
    } else if input.is_rgb() {
        (0, 0)
    } else {
        (1, 1)
    };
    let ten = match depth {
        BitDepthArg::Auto => bits > 8,
        BitDepthArg::Ten => true,
        BitDepthArg::Eight => false,
    };
    let format = match (sub, ten) {
        ((1, 1), false) => F::I420,
        ((1, 0), false) => F::Y42b,
        (_, false) => F::Y444,
        ((1, 1), true) => F::I42010le,
        ((1, 0), true) => F::I42210le,
        (_, true) => F::Y44410le,
    };
    let note = match (bits, ten) {
        (b, true) if b > 10 => Some(format!("the input has {b} bits per sample; H.264 keeps 10")),
        (b, false) if b > 8 => Some(format!("the input has {b} bits per sample; --bit-depth 8 writes 8 (--bit-depth auto keeps 10)")),
        _ => None,
    };
    (format, note)
}

/// The running time of `pts` in the segment `pad` has seen.
fn running_time(pad: &gst::Pad, pts: gst::ClockTime) -> Option<gst::ClockTime> {
    let ev = pad.sticky_event::<gst::event::Segment>(0)?;
    ev.segment().downcast_ref::<gst::ClockTime>()?.to_running_time(pts)
}

/// How long `frames` frames last at `fps` (None for a variable or unknown rate).
fn frames_duration(frames: u64, fps: gst::Fraction) -> Option<gst::ClockTime> {
    (fps.numer() > 0).then(|| gst::ClockTime::SECOND.mul_div_floor(frames * fps.denom() as u64, fps.numer() as u64)).flatten()
}

/// The estimate and its stream time from an "nlmdenoise-noise" element message.
fn noise_of_message(st: &gst::StructureRef) -> Option<(nlmdenoise::noise::NoiseEstimate, gst::ClockTime)> {
    let luma = st.get::<f32>("sigma").ok()?;
    let chroma = st.get::<f32>("chroma-sigma").ok().filter(|c| *c >= 0.0);
    Some((nlmdenoise::noise::NoiseEstimate { luma, chroma }, st.get::<gst::ClockTime>("timestamp").ok()?))
}

/// Frames in the input, from the pipeline's duration and the video frame rate (once known).
fn estimate_total(pipeline: &gst::Pipeline, den: &gst::Element) -> Option<u64> {
    let caps = den.static_pad("sink")?.current_caps()?;
    let fps = gst_video::VideoInfo::from_caps(&caps).ok()?.fps();
    if fps.numer() <= 0 || fps.denom() <= 0 {
        return None;
    }
    let duration = pipeline.query_duration::<gst::ClockTime>()?;
    let frames = (duration.nseconds() as u128 * fps.numer() as u128 + fps.denom() as u128 * 500_000_000) / (fps.denom() as u128 * 1_000_000_000);
    Some(frames as u64)
}

/// A clear message for an error GStreamer posted.
fn describe_error(err: &gst::message::Error, input: &str, den: &gst::Element, shared: &Shared, verbose: bool) -> anyhow::Error {
    if let Some(ours) = lock(&shared.error).clone() {
        return anyhow!(ours);
    }
    let e = err.error();
    let src = err.src();
    let src_name = src.map(|s| s.path_string().to_string()).unwrap_or_default();
    let debug = err.debug().map(|d| d.to_string()).unwrap_or_default();
    let detail = if verbose && !debug.is_empty() { format!(" [{src_name}: {debug}]") } else { String::new() };
    if src.is_some_and(|s| s == den.upcast_ref::<gst::Object>()) {
        return anyhow!("denoising failed: {e}{detail}");
    }
    if let Some(kind) = e.kind::<gst::StreamError>() {
        return match kind {
            gst::StreamError::TypeNotFound => {
                anyhow!("cannot decode '{input}': GStreamer does not recognise its format (not a video file, or damaged){detail}")
            }
            gst::StreamError::CodecNotFound => anyhow!(
                "cannot decode '{input}': no GStreamer decoder for one of its streams ({e}); decoders are in the Debian packages gstreamer1.0-libav, gstreamer1.0-plugins-good, -bad and -ugly{detail}"
            ),
            _ => anyhow!("cannot decode '{input}': {e}{detail}"),
        };
    }
    if e.kind::<gst::CoreError>() == Some(gst::CoreError::MissingPlugin) {
        return anyhow!("cannot process '{input}': a GStreamer plugin is missing ({e}); decoders are in the Debian packages gstreamer1.0-libav, gstreamer1.0-plugins-good, -bad and -ugly{detail}");
    }
    if let Some(kind) = e.kind::<gst::ResourceError>() {
        return match kind {
            gst::ResourceError::OpenWrite | gst::ResourceError::Write | gst::ResourceError::NoSpaceLeft => anyhow!("cannot write the output: {e}{detail}"),
            _ => anyhow!("cannot read '{input}': {e}{detail}"),
        };
    }
    anyhow!("{src_name}: {e}{detail}")
}

/// Caps for the denoiser's input given the decoder's output: the decoder's own format when the
/// engine takes it (no conversion), else the engine formats of the same bit depth class
/// (videoconvert picks the closest one).
fn working_caps(decoded: &gst::CapsRef) -> gst::Caps {
    use gstnlmdenoise::{format_to_gst, gst_to_format};
    // Unfixed caps (a decoder that could not say what it outputs) have no VideoInfo.
    let info = decoded.is_fixed().then(|| gst_video::VideoInfo::from_caps(decoded).ok()).flatten();
    if let Some(f) = info.as_ref().and_then(|i| gst_to_format(i.format())) {
        return gst::Caps::builder("video/x-raw").field("format", format_to_gst(f).to_str()).build();
    }
    let deep = info.as_ref().is_some_and(|i| i.format_info().depth().first().copied().unwrap_or(8) > 8);
    let formats: Vec<&str> = nlmdenoise::PixelFormat::ALL.into_iter().filter(|f| (f.info().bytes_per_sample > 1) == deep).map(|f| format_to_gst(f).to_str()).map(|s| s.as_str()).collect();
    gst::Caps::builder("video/x-raw").field("format", gst::List::new(formats)).build()
}
