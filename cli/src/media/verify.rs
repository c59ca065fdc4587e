//! Checking an encoded output the tool wrote: its video frames counted by demuxing the file again
//! (`parsebin`, no decoding: about as fast as reading it), as a player shows them (samples outside
//! the demuxer's segment, such as those past an MP4's edit list, do not count), so that an output
//! the tool keeps is one that plays, and the frame count it reports is the file's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use gst::prelude::*;

use super::factories::make;

/// Longest read-back, in seconds.
const READ_BACK_LIMIT_S: u64 = 300;

/// Samples read back from a container file, per kind of track.
#[derive(Debug, Clone, Copy, Default)]
pub struct Samples {
    pub video: u64,
    pub audio: u64,
}

/// The samples in the container file at `path`; an error where it cannot be demuxed.
pub fn samples(path: &str) -> Result<Samples> {
    let pipeline = gst::Pipeline::new();
    let src = make("filesrc")?;
    src.set_property("location", path);
    let parse = make("parsebin")?;
    pipeline.add_many([&src, &parse])?;
    src.link(&parse).context("linking filesrc and parsebin")?;
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let weak = pipeline.downgrade();
    let counter = counts.clone();
    parse.connect_pad_added(move |_, pad| {
        let Some(pipeline) = weak.upgrade() else { return };
        let Ok(sink) = gst::ElementFactory::make("fakesink").property("sync", false).property("async", false).build() else { return };
        if pipeline.add(&sink).is_err() {
            return;
        }
        // No preroll: one demuxer thread feeds every sink, and a sink waiting for the others
        // to preroll would wait for ever.
        let _ = sink.sync_state_with_parent();
        let kind = pad.current_caps().or_else(|| Some(pad.query_caps(None))).and_then(|c| c.structure(0).map(|s| s.name().to_string())).unwrap_or_default();
        let index = if kind.starts_with("video/") {
            Some(0)
        } else if kind.starts_with("audio/") {
            Some(1)
        } else {
            None
        };
        if let Some(i) = index {
            let counter = counter.clone();
            pad.add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
                if let Some(gst::PadProbeData::Buffer(b)) = &info.data {
                    // Video: the frames a player shows; audio: any sample (the track must not be empty).
                    if i != 0 || plays(pad, b) {
                        counter[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
                gst::PadProbeReturn::Ok
            });
        }
        let _ = pad.link(&sink.static_pad("sink").expect("fakesink has a sink pad"));
    });
    let bus = pipeline.bus().expect("a pipeline has a bus");
    let result = match pipeline.set_state(gst::State::Playing) {
        Err(_) => Err(bus
            .timed_pop_filtered(gst::ClockTime::from_seconds(1), &[gst::MessageType::Error])
            .and_then(|m| match m.view() {
                gst::MessageView::Error(e) => Some(anyhow!("{}", e.error())),
                _ => None,
            })
            .unwrap_or_else(|| anyhow!("it cannot be opened"))),
        // Demuxing reads the file at disk speed; the limit only guards against a hang.
        Ok(_) => match bus.timed_pop_filtered(gst::ClockTime::from_seconds(READ_BACK_LIMIT_S), &[gst::MessageType::Eos, gst::MessageType::Error]) {
            Some(m) => match m.view() {
                gst::MessageView::Error(e) => Err(anyhow!("{}", e.error())),
                _ => Ok(read(&counts)),
            },
            None => match read(&counts) {
                Samples { video: 0, .. } => Err(anyhow!("nothing read within {READ_BACK_LIMIT_S} s")),
                n => Ok(n),
            },
        },
    };
    let _ = pipeline.set_state(gst::State::Null);
    result
}

/// Whether a player shows the sample: its time span meets the demuxer's segment. An MP4's edit
/// list ends the presentation where the muxer computed its track's end, and a frame lost just
/// before the end of a cut input (a gap in the times, with B-frames) puts the last sample past it:
/// it is in the file, yet no player shows it (ffmpeg flags it "discard").
fn plays(pad: &gst::Pad, buffer: &gst::BufferRef) -> bool {
    let Some(pts) = buffer.pts() else { return true };
    let Some(segment) = pad.sticky_event::<gst::event::Segment>(0) else { return true };
    let Some(segment) = segment.segment().downcast_ref::<gst::ClockTime>() else { return true };
    let end = buffer.duration().map(|d| pts + d);
    segment.clip(pts, end).is_some()
}

fn read(counts: &[AtomicU64; 2]) -> Samples {
    Samples { video: counts[0].load(Ordering::Relaxed), audio: counts[1].load(Ordering::Relaxed) }
}
