//! Running the pipeline: the bus loop (progress, noise estimates with `-v`, warnings, the end or
//! the first error, described for the user), then the summary on standard error and the exit
//! status the outcome calls for (interrupted, damaged or truncated input).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use gst::prelude::*;

use nlmdenoise::noise::NoiseEstimate;

use super::y4m_src::Feeder;
use super::{lock, Shared};
use crate::{Cli, Container};

/// How the run went, and what the summary reports of the element (read before the pipeline
/// stopped).
pub struct Outcome {
    result: Result<()>,
    seconds: f64,
    interrupted: bool,
    /// The frames the input promised, where known (a y4m file's size, or duration x frame rate).
    total_expected: Option<u64>,
    /// The input's duration, for a decoded input (its frames are counted from it).
    duration: Option<gst::ClockTime>,
    backend: Option<String>,
    /// The first estimate the element reported (sigma auto) and the last.
    first_noise: Option<NoiseEstimate>,
    noise: Option<NoiseEstimate>,
    /// Scene cuts the element found (its `scene-cuts`).
    scene_cuts: u64,
    caps: Option<gst::Caps>,
    out_caps: Option<gst::Caps>,
}

/// Sets the pipeline to NULL, waiting at most [`STOP_LIMIT`]: a source blocked in a read that
/// never returns (a pipe nobody writes to) holds the state change until it does; the tool then
/// goes on without it (the process ends soon after).
fn stop(pipeline: &gst::Pipeline) {
    let (done, wait) = std::sync::mpsc::channel();
    let p = pipeline.clone();
    std::thread::spawn(move || {
        let _ = p.set_state(gst::State::Null);
        let _ = done.send(());
    });
    if wait.recv_timeout(STOP_LIMIT).is_err() {
        eprintln!("nlmdenoise: warning: the pipeline did not stop within {} s (its source is blocked reading); leaving it", STOP_LIMIT.as_secs());
    }
}

const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// After an interrupt, an end of stream is sent into the pipeline from the top after this long
/// without one, and the run stops waiting for it after the second.
const INTERRUPT_EOS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);
const INTERRUPT_GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// Plays the pipeline to its end (or the first error), starting the y4m `feeder` if there is
/// one; `total` is the number of frames known up front. Stops the pipeline before returning.
pub fn play(pipeline: &gst::Pipeline, den: &gst::Element, cli: &Cli, input: &str, total: Option<u64>, feeder: Option<Feeder>, shared: &Arc<Shared>) -> Outcome {
    let mut feeder = feeder;
    let bus = pipeline.bus().expect("a pipeline has a bus");
    let bar = crate::progress::bar(cli.quiet, total, cli.stats_period);
    let start = Instant::now();
    let mut feeder_thread = None;
    let mut interrupted = false;
    let mut total_expected = total;
    let mut first_noise = None;
    let mut duration = None;
    let result = 'run: {
        if pipeline.set_state(gst::State::Playing).is_err() {
            // The reason is on the bus.
            if let Some(msg) = bus.timed_pop_filtered(gst::ClockTime::from_seconds(1), &[gst::MessageType::Error]) {
                if let gst::MessageView::Error(err) = msg.view() {
                    break 'run Err(describe_error(err, input, den, shared, cli.verbose > 0));
                }
            }
            break 'run Err(anyhow!("the pipeline failed to start"));
        }
        if let Some(f) = feeder.take() {
            let limit = cli.segment.map(|s| s.input_frames(cli.params().frames_needed()).1).or(cli.frames);
            feeder_thread = Some(f.start(limit, shared.clone()));
        }
        let mut total_known = total.is_some();
        let mut interrupted_at = None;
        let mut eos_sent = false;
        let decoded = feeder_thread.is_none();
        let segment_first = cli.segment.map_or(0, |s| s.input_frames(cli.params().frames_needed()).0);
        loop {
            if let Err(e) = super::seek::send_due(pipeline, shared, segment_first) {
                break 'run Err(anyhow!("{e}"));
            }
            bar.set_position(shared.frames_out.load(Ordering::Relaxed));
            if !total_known {
                if let Some((n, d)) = estimate_total(pipeline, den) {
                    total_expected = Some(n);
                    duration = Some(d);
                    let n = cli.frames.map_or(n, |l| l.min(n));
                    crate::progress::set_total(&bar, Some(n));
                    total_known = true;
                }
            }
            if total.is_none() && duration.is_none() {
                // A decoded input (a variable frame rate has no frame count to estimate).
                duration = pipeline.query_duration::<gst::ClockTime>();
            }
            if crate::interrupt::requested() && !interrupted {
                // The probe at the video branch's entry ends the stream at the next frame.
                interrupted = true;
                interrupted_at = Some(Instant::now());
            }
            // A stream that no frame enters any more (a stalled demuxer) never reaches that probe:
            // end it from the top, and if even that does not come through, stop waiting.
            if let Some(at) = interrupted_at {
                if !eos_sent && at.elapsed() > INTERRUPT_EOS_AFTER {
                    eos_sent = true;
                    // From another thread: a source blocked in a read holds the event too.
                    let p = pipeline.clone();
                    std::thread::spawn(move || p.send_event(gst::event::Eos::new()));
                }
                if at.elapsed() > INTERRUPT_GIVE_UP_AFTER {
                    break 'run Ok(());
                }
            }
            // A damaged input can stall the demuxer before its first picture without posting an
            // error: nothing would ever come (found by scripts/fuzz_media).
            if decoded && !interrupted && start.elapsed().as_secs_f64() > cli.stall_timeout && den.static_pad("sink").and_then(|p| p.current_caps()).is_none() {
                break 'run Err(anyhow!("no picture came out of '{input}' in {} s: the file is damaged or truncated, or its demuxer stalled (--stall-timeout sets the wait)", cli.stall_timeout));
            }
            let Some(msg) = bus.timed_pop(gst::ClockTime::from_mseconds(100)) else { continue };
            match msg.view() {
                gst::MessageView::Eos(_) => break 'run Ok(()),
                gst::MessageView::Error(err) => break 'run Err(describe_error(err, input, den, shared, cli.verbose > 0)),
                gst::MessageView::Element(m) => {
                    if let Some(e) = m.structure().filter(|st| st.name() == "nlmdenoise-noise").and_then(noise_of_message) {
                        first_noise.get_or_insert(e.0);
                        if cli.verbose > 0 && !cli.quiet {
                            bar.suspend(|| eprintln!("  {:.0} s: noise sigma estimate {}", e.1.seconds_f64(), crate::y4m::describe_noise(e.0)));
                        }
                    }
                }
                // The element's warnings about settings its algorithm does not read: the tool
                // has said so already, in its options' names (option_notes).
                gst::MessageView::Warning(w) if w.details().is_some_and(|d| d.name() == gstnlmdenoise::UNUSED_SETTING_WARNING) => {}
                gst::MessageView::Warning(w) if !cli.quiet => {
                    let src = w.src().map(|s| s.name().to_string()).unwrap_or_default();
                    bar.suspend(|| eprintln!("nlmdenoise: warning ({src}): {}", w.error()));
                }
                _ => {}
            }
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    // Empty before caps: no frame reached the denoiser.
    let backend: Option<String> = den.property::<Option<String>>("backend-in-use").filter(|b| !b.is_empty());
    // The upscaler does not estimate the noise (no such properties).
    let (luma, chroma) = match den.find_property("sigma-estimate") {
        Some(_) => (den.property::<f32>("sigma-estimate"), den.property::<f32>("chroma-sigma-estimate")),
        None => (-1.0, -1.0),
    };
    let noise = (luma >= 0.0).then(|| NoiseEstimate { luma, chroma: (chroma >= 0.0).then_some(chroma) });
    let scene_cuts = den.property::<u64>("scene-cuts");
    let caps = den.static_pad("sink").and_then(|p| p.current_caps());
    let out_caps = den.static_pad("src").and_then(|p| p.current_caps());
    stop(pipeline);
    if let Some(t) = feeder_thread {
        let _ = t.join();
    }
    bar.finish_and_clear();
    Outcome { result, seconds, interrupted, total_expected, duration, backend, first_noise, noise, scene_cuts, caps, out_caps }
}

/// The summary of a run (unless `--quiet`) and its result: the pipeline's error, or none for
/// a complete run, or the exit status's reason (interrupted, damaged or truncated input).
/// `input_desc` names the input where its caps do not (y4m).
pub fn finish(outcome: Outcome, cli: &Cli, input: &str, input_desc: Option<String>, output: Option<&str>, container: Option<Container>, shared: &Shared) -> Result<()> {
    let Outcome { result, seconds, interrupted, total_expected, duration, backend, first_noise, noise, scene_cuts, caps, out_caps } = outcome;
    result?;

    let frames = shared.frames_out.load(Ordering::Relaxed);
    let damage = lock(&shared.damage).clone();
    // A segment is all or nothing: the driver joins complete segments only.
    if let Some(s) = cli.segment.filter(|s| !interrupted && frames < s.end - s.start) {
        let seen = shared.frames_in.load(Ordering::Relaxed);
        match damage {
            Some(d) => bail!("the segment {}:{} is incomplete ({d}); {} of its {} were denoised", s.start, s.end, frames, crate::progress::count(s.end - s.start, "frame")),
            None => bail!("the input has {}; the segment {}:{} ends at frame {}", crate::progress::count(seen, "frame"), s.start, s.end, s.end),
        }
    }
    if frames == 0 && !interrupted {
        match damage {
            Some(d) => bail!("no complete frame in '{input}': {d}"),
            None => bail!("no video frame could be decoded from '{input}': the file is damaged or truncated, or holds no picture"),
        }
    }
    // The frames the input promised (duration x frame rate, or the y4m file's size) against those
    // that came out: fewer means the input ended early (truncated, damaged).
    let expected = total_expected.map(|t| cli.frames.map_or(t, |l| l.min(t)));
    let short = match duration {
        // A decoded input: the duration counts the longest stream, and duration x frame rate is
        // no frame count for a variable rate; a cut file is one where every stream (the video
        // and the audio) ends well before the duration. Reaching --frames is no cut.
        Some(d) => {
            let until = gst::ClockTime::from_nseconds(shared.decoded_until.load(Ordering::Relaxed));
            let margin = (d / 100).max(gst::ClockTime::from_mseconds(200));
            let limited = cli.frames.is_some_and(|l| frames >= l) || cli.segment.is_some();
            (!limited && until + margin < d).then(|| expected.unwrap_or(frames))
        }
        // A y4m input: the file's size gives its frames exactly.
        None if cli.segment.is_some() => None,
        None => expected.filter(|&t| frames + (t / 100).max(1) < t),
    };
    // An encoded file the tool keeps must play: it is demuxed again and its video samples counted
    // (a cut input can leave a muxer with a track it never got data for, which no player opens).
    let audio_kept = lock(&shared.audio).as_deref().is_some_and(|a| a.ends_with("re-encoded"));
    let written = match (output, container) {
        (Some(o), Some(Container::Mp4 | Container::Mkv)) if o != "-" => Some(match super::verify::samples(o) {
            // An audio track the muxer got no sample for (the input cut before its first audio)
            // has no description, and players refuse the whole file.
            Ok(n) if n.video > 0 && audio_kept && n.audio == 0 => {
                bail!(
                    "the input was cut before its first audio, and the output's empty audio track makes it unplayable; it was removed (--no-audio keeps the {})",
                    crate::progress::count(n.video, "frame")
                )
            }
            Ok(n) if n.video > 0 => n.video,
            Ok(_) => bail!("the output '{o}' holds no playable frame (of the {} denoised); it was removed", crate::progress::count(frames, "frame")),
            Err(e) => bail!(
                "the output '{o}' cannot be read back ({e}); it was removed ({} had been denoised{})",
                crate::progress::count(frames, "frame"),
                if audio_kept { "; where the input was cut before its first audio, --no-audio keeps them" } else { "" }
            ),
        }),
        _ => None,
    };
    // A y4m file output is read back the same way (frames counted from its FRAME lines).
    if let (Some(o), Some(Container::Y4m)) = (output, container) {
        if o != "-" {
            if frames == 0 {
                bail!("interrupted before the first frame was written; nothing usable, the output '{o}' was removed");
            }
            crate::y4m::check_written(o, frames)?;
        }
    }
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
            "nlmdenoise: {} {size} {format} in {seconds:.2} s ({:.2} fps), backend: {}",
            crate::progress::count(frames, "frame"),
            frames as f64 / seconds.max(1e-9),
            backend.map_or_else(|| "none (no frame reached the denoiser)".into(), |b| crate::progress::backend_words(&b))
        );
        match noise {
            Some(e) => eprintln!("  noise sigma (estimated, 8-bit units): {}", crate::y4m::describe_noise_span(first_noise, e)),
            // As the y4m path says it (the upscaler estimates nothing).
            None if cli.params().sigma_auto && cli.params().algorithm != nlmdenoise::Algorithm::NlmSr => {
                eprintln!("  noise sigma: no estimate (frames too small); sigma {} used", nlmdenoise::noise::FALLBACK_SIGMA)
            }
            None => {}
        }
        crate::progress::report_scene_cuts(scene_cuts);
        let extra = shared.extra_audio.load(Ordering::SeqCst);
        let audio = lock(&shared.audio).clone().map(|a| match extra {
            0 => a,
            n => format!("{a}; {n} more audio track{} dropped: only the first is kept", if n == 1 { "" } else { "s" }),
        });
        let input_kind = input_desc.unwrap_or_else(|| format!("video {format} {fps} fps"));
        let shown = if input == "-" { "standard input".to_string() } else { format!("'{input}'") };
        eprintln!("  input:  {shown} ({input_kind}, {})", audio.as_deref().unwrap_or("no audio"));
        if shared.gpu_frames.load(Ordering::SeqCst) {
            eprintln!("  decoded on the GPU: frames went to the denoiser in GPU memory (no host copy)");
        }
        let encoding = lock(&shared.encoding).clone();
        match output {
            None => eprintln!("  output: discarded"),
            Some(o) => {
                let out = if o == "-" { "standard output".into() } else { format!("'{o}'") };
                eprintln!("  output: {out} ({})", describe_encoding(cli, container, audio_kept, encoding.as_ref().map(|e| e.0)));
            }
        }
        if let Some((_, Some(note))) = encoding {
            eprintln!("  note: {note}");
        }
        if let Some(n) = written.filter(|&n| n != frames) {
            eprintln!("  note: the output holds {} of the {frames} denoised (checked by reading it back)", crate::progress::count(n, "frame"));
        }
        if let Some(o) = lock(&shared.orientation).clone() {
            let what = match (container, cli.no_autorotate) {
                (Some(Container::Mp4 | Container::Mkv), false) => "the frames were turned upright as it asks (--no-autorotate keeps them as stored)",
                (Some(Container::Mp4 | Container::Mkv), true) => "--no-autorotate: the frames are as stored, and the output has no orientation tag (players show them as stored)",
                (Some(Container::Y4m), _) => "y4m has no orientation field: the frames are as stored",
                _ => "",
            };
            if !what.is_empty() {
                eprintln!("  note: the input's orientation tag says {o}; {what}");
            }
        }
    }
    if interrupted {
        return Err(crate::exit_code::Interrupted.into());
    }
    if let Some(d) = damage {
        return Err(
            crate::exit_code::Incomplete(format!("{d}; the {} before it {} denoised and written", crate::progress::count(frames, "complete frame"), if frames == 1 { "was" } else { "were" })).into()
        );
    }
    // Frames the container leaves out (verify::plays) make a run incomplete even where the input
    // seemed whole (a cut within the end margin).
    if let Some(n) = written.filter(|&n| n < frames && short.is_none()) {
        return Err(crate::exit_code::Incomplete(format!(
            "the output holds {} that play, of the {frames} decoded and denoised: a gap in the input's frame times near its end put the last ones past the container's presentation end (checked by reading it back)",
            crate::progress::count(n, "frame")
        ))
        .into());
    }
    if let Some(t) = short {
        return Err(crate::exit_code::Incomplete(format!(
            "the input ended after {frames} of the {} it announced (truncated or damaged); the output holds {}{}",
            crate::progress::count(t, "frame"),
            crate::progress::count(written.unwrap_or(frames), "frame"),
            match written {
                None => ", every frame that could be decoded".to_string(),
                Some(n) if n == frames => ", every frame that could be decoded and encoded (checked by reading it back)".to_string(),
                // A frame the container's edit list leaves out (verify::plays).
                Some(_) => format!(" that play, of the {frames} decoded and denoised (checked by reading it back)"),
            }
        ))
        .into());
    }
    Ok(())
}

/// The summary's words for the output's encoding.
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

/// The estimate and its stream time from an "nlmdenoise-noise" element message.
fn noise_of_message(st: &gst::StructureRef) -> Option<(nlmdenoise::noise::NoiseEstimate, gst::ClockTime)> {
    let luma = st.get::<f32>("sigma").ok()?;
    let chroma = st.get::<f32>("chroma-sigma").ok().filter(|c| *c >= 0.0);
    Some((nlmdenoise::noise::NoiseEstimate { luma, chroma }, st.get::<gst::ClockTime>("timestamp").ok()?))
}

/// Frames in the input, from the pipeline's duration and the video frame rate (once known), and
/// that duration.
fn estimate_total(pipeline: &gst::Pipeline, den: &gst::Element) -> Option<(u64, gst::ClockTime)> {
    let caps = den.static_pad("sink")?.current_caps()?;
    let fps = gst_video::VideoInfo::from_caps(&caps).ok()?.fps();
    if fps.numer() <= 0 || fps.denom() <= 0 {
        return None;
    }
    let duration = pipeline.query_duration::<gst::ClockTime>()?;
    let frames = (duration.nseconds() as u128 * fps.numer() as u128 + fps.denom() as u128 * 500_000_000) / (fps.denom() as u128 * 1_000_000_000);
    Some((frames as u64, duration))
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
        // A parameter the stream cannot take: the engine's words once ("Cannot process 160x120
        // I420: invalid parameter: ..." -> "invalid parameter: ... (Cannot process 160x120 I420)").
        let text = e.to_string();
        if e.kind::<gst::LibraryError>() == Some(gst::LibraryError::Settings) {
            if let Some((before, what)) = text.split_once("invalid parameter: ") {
                let before = before.trim_end_matches(": ").trim_start_matches("Invalid parameters");
                let err = crate::invalid_parameter(what);
                return if before.is_empty() { err } else { err.context(format!("{before}{detail}")) };
            }
        }
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
