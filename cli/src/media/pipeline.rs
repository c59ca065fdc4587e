//! Building the pipeline around the processing element: the video branch from its entry queue
//! to the sink or muxer (with the encoder and its input format), the probes that count frames
//! and end the stream early (`--frames`, an interrupt), and the decoding source: `decodebin`,
//! whose pads are linked as they appear, video to the branch and audio re-encoded into the muxer
//! (or dropped). The y4m source is [`super::y4m_src`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use gst::prelude::*;

use super::configure::working_caps;
use super::factories::{make, missing};
use super::{lock, post_error, Shared};
use crate::{BitDepthArg, Cli, Container};

/// The elements of the video branch that the source and the callbacks set up or link to.
pub struct VideoBranch {
    /// The branch's first element (a queue), where the source links.
    pub entry: gst::Element,
    /// The format converter after it, left out for frames in GPU memory ([`gpu_frames`]).
    pub convert_in: gst::Element,
    pub denoiser: gst::Element,
    /// Pins the format the element works in (see `working_caps`): videoconvert alone would pick
    /// the "least lossy" format, Y444_16LE, for everything.
    pub format_filter: gst::Element,
    /// The encoder's input format: set once the input's is known (`encoder_format`).
    pub encoder_filter: Option<gst::Element>,
    pub mux: Option<gst::Element>,
}

/// Fragment length of an MP4 written to standard output (fragmented, so that a pipe can take it).
const STDOUT_MP4_FRAGMENT_MS: u32 = 1000;

/// Adds and links `queue ! videoconvert ! capsfilter ! ELEMENT ! videoconvert ! ...` up to the
/// encoder and muxer, the y4m writer, or a fakesink, as the output asks.
pub fn build_video_branch(pipeline: &gst::Pipeline, den: &gst::Element, cli: &Cli, output: Option<&str>, container: Option<Container>) -> Result<VideoBranch> {
    let vqueue = make("queue")?;
    vqueue.set_property("name", super::seek::ENTRY_NAME);
    let conv_in = make("videoconvert")?;
    let conv_out = make("videoconvert")?;
    let format_filter = make("capsfilter")?;
    let mut chain = vec![vqueue.clone(), conv_in.clone(), format_filter.clone(), den.clone(), conv_out];
    let mut mux = None;
    let mut encoder_filter: Option<gst::Element> = None;
    match container {
        Some(c @ (Container::Mp4 | Container::Mkv)) => {
            let enc = video_encoder(cli)?;
            // The encoder's input format: set once the input's is known (encoder_format).
            let enc_filter = make("capsfilter")?;
            chain.push(enc_filter.clone());
            encoder_filter = Some(enc_filter);
            if !cli.no_autorotate {
                // Turns the frames upright as the input's orientation tag asks (identity without
                // one), after the encoder's format is fixed: videoflip takes every format the
                // encoder is given, not every format the element works in.
                let flip = make("videoflip")?;
                flip.set_property_from_str("video-direction", "auto");
                chain.push(flip);
            }
            let q = make("queue")?;
            q.set_property("max-size-buffers", 0u32);
            q.set_property("max-size-bytes", 0u32);
            q.set_property("max-size-time", 0u64);
            let m = make(if c == Container::Mp4 { "mp4mux" } else { "matroskamux" })?;
            let sink = match output {
                // Standard output may be a pipe, where the muxer cannot seek back: Matroska
                // streams as it is, MP4 is written fragmented (its index comes first and each
                // fragment indexes itself).
                Some("-") => {
                    if c == Container::Mp4 {
                        m.set_property("fragment-duration", STDOUT_MP4_FRAGMENT_MS);
                    }
                    let s = make("fdsink")?;
                    s.set_property("fd", 1i32);
                    s
                }
                path => {
                    let s = make("filesink")?;
                    s.set_property("location", path.expect("a container comes with an output"));
                    s
                }
            };
            pipeline.add_many([&m, &sink])?;
            m.link(&sink).context("linking the muxer")?;
            chain.extend([enc, q]);
            mux = Some(m);
        }
        Some(Container::Y4m) => {
            // The tool's own y4m writer keeps depth and subsampling (y4menc: 8-bit only).
            chain.push(super::y4m_sink::y4m_sink(output)?);
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
    Ok(VideoBranch { entry: vqueue, convert_in: conv_in, denoiser: den.clone(), format_filter, encoder_filter, mux })
}

/// Counts the frames that leave the element, and ends the video branch at its entry at
/// `--frames` or an interrupt. With `--segment`, the frames before the segment's context are
/// dropped at the entry, the stream ends after its context, and only the segment's own frames
/// go on from the element.
pub fn add_probes(video: &VideoBranch, den: &gst::Element, cli: &Cli, shared: &Arc<Shared>) {
    let params = cli.params();
    let segment = cli.segment;
    // The input frames that enter the element: [first, end).
    let (first, limit) = match segment {
        Some(s) => {
            let (first, end) = s.input_frames(params.frames_needed());
            (first, Some(end))
        }
        None => (0, cli.frames),
    };
    {
        let sh = shared.clone();
        den.static_pad("src").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            let index = first + sh.frames_denoised.fetch_add(1, Ordering::Relaxed);
            if segment.is_some_and(|s| !s.writes(index)) {
                drop(info.data.take());
                return gst::PadProbeReturn::Handled;
            }
            sh.frames_out.fetch_add(1, Ordering::Relaxed);
            gst::PadProbeReturn::Ok
        });
    }
    {
        // The input's orientation, for the summary (the tag travels as a sticky event).
        let sh = shared.clone();
        den.static_pad("sink").unwrap().add_probe(gst::PadProbeType::EVENT_DOWNSTREAM, move |_, info| {
            if let Some(gst::EventView::Tag(tag)) = info.event().map(|e| e.view()) {
                if let Some(o) = tag.tag().get::<gst::tags::ImageOrientation>() {
                    let o = o.get().to_string();
                    *lock(&sh.orientation) = (o != "rotate-0").then_some(o);
                }
            }
            gst::PadProbeReturn::Ok
        });
    }
    // --frames and interrupts: the video branch ends at its entry (EOS, later buffers dropped),
    // and the audio at the same running time, so that the muxer finishes a playable file. (An EOS
    // sent to the source would not do: the demuxer reads the file in pull mode.)
    {
        let sh = shared.clone();
        video.entry.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
            // Before a segment's count is settled (`seek`): only then are the caps and times read.
            if !crate::interrupt::requested() && sh.seek.load(Ordering::SeqCst) != super::seek::COUNTING {
                let fps = pad.current_caps().and_then(|c| gst_video::VideoInfo::from_caps(&c).ok()).map(|i| i.fps());
                let pts = info.buffer().and_then(|b| b.pts()).and_then(|pts| stream_time(pad, pts));
                if !super::seek::on_picture(&sh, pts, info.buffer().and_then(|b| b.duration()), fps, first) {
                    drop(info.data.take());
                    return gst::PadProbeReturn::Handled;
                }
            }
            let n = sh.frames_in.fetch_add(1, Ordering::Relaxed);
            if n < first && !crate::interrupt::requested() {
                // Before a segment's context: decoded (frame-exact counting) and dropped.
                drop(info.data.take());
                return gst::PadProbeReturn::Handled;
            }
            let rt = info.buffer().and_then(|b| b.pts()).and_then(|pts| running_time(pad, pts));
            if let (0, Some(limit), None) = (n, limit, segment) {
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
    if segment.is_some() {
        let sh = shared.clone();
        video.entry.static_pad("sink").unwrap().add_probe(gst::PadProbeType::EVENT_FLUSH | gst::PadProbeType::EVENT_DOWNSTREAM, move |_, info| {
            let goes_on = match info.event().map(|e| e.view()) {
                Some(gst::EventView::FlushStart(_)) => super::seek::on_flush(&sh, false),
                Some(gst::EventView::FlushStop(_)) => super::seek::on_flush(&sh, true),
                // The end of the input reached while dropping the pictures before a seek (a short
                // input decodes fast) is not the end of the segment.
                Some(gst::EventView::Eos(_)) => sh.seek.load(Ordering::SeqCst) == super::seek::COUNTING,
                _ => true,
            };
            if goes_on {
                return gst::PadProbeReturn::Ok;
            }
            // Taken and `Handled` rather than `Drop` (see the buffers' probe).
            drop(info.data.take());
            gst::PadProbeReturn::Handled
        });
    }
    // An interrupt stops after the frame in progress: the frames already queued between the
    // branch's entry and the element (a second of video) are dropped at the element instead of
    // being denoised first; the EOS sent at the entry follows them. The audio ends where the
    // video does.
    {
        let sh = shared.clone();
        den.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
            if !crate::interrupt::requested() {
                return gst::PadProbeReturn::Ok;
            }
            if let Some(rt) = info.buffer().and_then(|b| b.pts()).and_then(|pts| running_time(pad, pts)) {
                let mut cut = lock(&sh.audio_cutoff);
                if cut.is_none_or(|c| rt < c) {
                    *cut = Some(rt);
                }
            }
            drop(info.data.take());
            gst::PadProbeReturn::Handled
        });
    }
}

/// Adds `filesrc ! decodebin` for `input`: video pads go to the branch (fixing its format and
/// the encoder's), audio to the muxer when `container` keeps it, anything else to a fakesink.
pub fn add_decoder(pipeline: &gst::Pipeline, video: &VideoBranch, cli: &Cli, input: &str, container: Option<Container>, shared: &Arc<Shared>) -> Result<()> {
    let src = make("filesrc")?;
    src.set_property("location", input);
    let dec = make("decodebin")?;
    pipeline.add_many([&src, &dec])?;
    src.link(&dec).context("linking filesrc and decodebin")?;
    let weak = pipeline.downgrade();
    let vsink = video.entry.static_pad("sink").unwrap();
    let sh = shared.clone();
    let mux_ = video.mux.clone();
    let filter = video.format_filter.clone();
    let (entry, convert_in, den) = (video.entry.clone(), video.convert_in.clone(), video.denoiser.clone());
    let on_gpu = !matches!(cli.backend, nlmdenoise::BackendKind::Cpu | nlmdenoise::BackendKind::Reference);
    let (enc_filter, bit_depth) = (video.encoder_filter.clone(), cli.bit_depth);
    // A segment past the input's first frames seeks to them (frame-exact where it can: `seek`).
    if cli.segment.is_some_and(|s| s.input_frames(cli.params().frames_needed()).0 > 0) {
        shared.seek.store(super::seek::WAIT_FIRST, Ordering::SeqCst);
    }
    // A segment's output is video only: the driver muxes the source's audio once.
    let keep_audio = !cli.no_audio && cli.segment.is_none() && matches!(container, Some(Container::Mp4 | Container::Mkv));
    let (audio_bitrate, frame_limit, scale) = (cli.audio_bitrate, cli.frames, output_scale(cli));
    dec.connect_pad_added(move |dec, pad| {
        let Some(pipeline) = weak.upgrade() else { return };
        let caps = pad.current_caps().unwrap_or_else(|| pad.query_caps(None));
        let name = caps.structure(0).map(|s| s.name().to_string()).unwrap_or_default();
        let linked = (name.starts_with("video/") && !sh.video_linked.load(Ordering::SeqCst)) || (name.starts_with("audio/") && !sh.audio_linked.load(Ordering::SeqCst));
        if linked {
            let sh2 = sh.clone();
            pad.add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
                if let Some(b) = info.buffer() {
                    let end = b.pts().map(|pts| pts + b.duration().unwrap_or(gst::ClockTime::ZERO)).and_then(|end| stream_time(pad, end));
                    if let Some(end) = end {
                        sh2.decoded_until.fetch_max(end.nseconds(), Ordering::Relaxed);
                    }
                }
                gst::PadProbeReturn::Ok
            });
        }
        if name.starts_with("video/") && !sh.video_linked.swap(true, Ordering::SeqCst) {
            if on_gpu && gpu_frames(pad, &den) {
                // Decoded on the GPU: the frames go into the element in GPU memory, copied there
                // on the device; the converter (system memory) is left out.
                if let Err(e) = leave_out_converter(&pipeline, &entry, &convert_in, &filter, &den) {
                    post_error(dec, &sh, format!("{e:#}"));
                    return;
                }
                // Said in the summary when the first frame does arrive in GPU memory (the
                // decoder negotiates again once linked).
                let sh3 = sh.clone();
                den.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, info| {
                    if let Some(b) = info.buffer() {
                        sh3.gpu_frames.store(b.n_memory() > 0 && b.peek_memory(0).is_type("gst.cuda.memory"), Ordering::SeqCst);
                    }
                    gst::PadProbeReturn::Remove
                });
            } else {
                filter.set_property("caps", working_caps(&caps));
            }
            let decoded = caps.is_fixed().then(|| gst_video::VideoInfo::from_caps(&caps).ok()).flatten();
            if let (Some(f), Some(info)) = (&enc_filter, decoded) {
                let (enc_format, note) = encoder_format(&info.format_info(), bit_depth);
                if let Some(problem) = encoder_size_problem(enc_format, info.width() * scale, info.height() * scale) {
                    post_error(dec, &sh, problem);
                    return;
                }
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
            if name.starts_with("audio/") {
                // The output has one audio track (the first); the summary names the others.
                sh.extra_audio.fetch_add(1, Ordering::SeqCst);
            }
            link_fakesink(&pipeline, pad);
        }
    });
    let sh = shared.clone();
    dec.connect_no_more_pads(move |dec| {
        if !sh.video_linked.load(Ordering::SeqCst) {
            post_error(dec, &sh, "the input has no video stream".to_string());
        }
    });
    Ok(())
}

/// True when the decoder behind `pad` can give frames in CUDA memory (GStreamer's nvcodec
/// decoders) that `den` takes as they are: CUDA memory is available to the element and the
/// decoded format is one the engine works in.
fn gpu_frames(pad: &gst::Pad, den: &gst::Element) -> bool {
    let Some(sink) = den.static_pad("sink") else { return false };
    let offered = pad.query_caps(None);
    let in_cuda = |c: &gst::Caps| c.iter_with_features().any(|(_, f)| f.contains("memory:CUDAMemory"));
    if !in_cuda(&offered) {
        return false;
    }
    let taken = sink.query_caps(None);
    let both = offered.intersect(&taken);
    in_cuda(&both)
}

/// `entry ! den` instead of `entry ! convert ! filter ! den`.
fn leave_out_converter(pipeline: &gst::Pipeline, entry: &gst::Element, convert: &gst::Element, filter: &gst::Element, den: &gst::Element) -> Result<()> {
    entry.unlink(convert);
    convert.unlink(filter);
    filter.unlink(den);
    for e in [convert, filter] {
        let _ = e.set_state(gst::State::Null);
    }
    pipeline.remove_many([convert, filter]).context("removing the format converter")?;
    entry.link(den).context("linking the decoder's frames in GPU memory to the denoiser")
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

/// Links decoded audio through `queue ! audioconvert ! audioresample ! ENC ! queue` into the
/// muxer; returns the pad that feeds the muxer (where the audio is cut: buffers leave it only as
/// the muxer interleaves them).
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

/// What H.264 (x264enc) gets for an input of format `input`: its chroma subsampling (4:2:0,
/// 4:2:2 or 4:4:4; grey as 4:2:0, RGB as 4:4:4) and, with `--bit-depth auto`, 10 bits for inputs
/// deeper than 8 (x264 takes 8 or 10), else the depth asked for. The note says when bits are
/// dropped.
pub fn encoder_format(input: &gst_video::VideoFormatInfo, depth: BitDepthArg) -> (gst_video::VideoFormat, Option<String>) {
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

/// Why H.264 cannot take frames of `width` x `height` in `format`, or None: x264 needs whole
/// chroma samples (an even width for 4:2:0 and 4:2:2, an even height for 4:2:0).
pub fn encoder_size_problem(format: gst_video::VideoFormat, width: u32, height: u32) -> Option<String> {
    let info = gst_video::VideoFormatInfo::from_format(format);
    let (sub_x, sub_y) = if info.n_components() >= 3 { (info.w_sub()[1], info.h_sub()[1]) } else { (0, 0) };
    let odd_w = sub_x > 0 && width % 2 == 1;
    let odd_h = sub_y > 0 && height % 2 == 1;
    let what = match (odd_w, odd_h) {
        (false, false) => return None,
        (true, false) => "width",
        (false, true) => "height",
        (true, true) => "width and height",
    };
    let chroma = if sub_y > 0 { "4:2:0" } else { "4:2:2" };
    Some(format!(
        "H.264 {chroma} needs an even {what}, and the video to encode is {width}x{height}: crop or pad the input to even sizes first (ffmpeg -vf crop=trunc(iw/2)*2:trunc(ih/2)*2), or write y4m (-o out.y4m), which takes any size"
    ))
}

/// The output's size factor over the input (`--scale` when upscaling, else 1).
pub fn output_scale(cli: &Cli) -> u32 {
    let p = cli.params();
    if p.algorithm == nlmdenoise::Algorithm::NlmSr {
        p.sr.scale
    } else {
        1
    }
}

/// The running time of `pts` in the segment `pad` has seen.
fn running_time(pad: &gst::Pad, pts: gst::ClockTime) -> Option<gst::ClockTime> {
    let ev = pad.sticky_event::<gst::event::Segment>(0)?;
    ev.segment().downcast_ref::<gst::ClockTime>()?.to_running_time(pts)
}

/// The stream time of `pts` in the segment `pad` has seen.
fn stream_time(pad: &gst::Pad, pts: gst::ClockTime) -> Option<gst::ClockTime> {
    let ev = pad.sticky_event::<gst::event::Segment>(0)?;
    ev.segment().downcast_ref::<gst::ClockTime>()?.to_stream_time(pts)
}

/// How long `frames` frames last at `fps` (None for a variable or unknown rate).
fn frames_duration(frames: u64, fps: gst::Fraction) -> Option<gst::ClockTime> {
    (fps.numer() > 0).then(|| gst::ClockTime::SECOND.mul_div_floor(frames * fps.denom() as u64, fps.numer() as u64)).flatten()
}
