//! How a `--segment` of a decoded input (MP4, Matroska, ...) reaches its first frame: by a seek to
//! it rather than by decoding every frame before it, when the input allows a frame-exact one.
//!
//! Frames are numbered by counting decoded pictures (what a whole run sees). A seek keeps that
//! numbering only where a frame's number follows from its timestamp: a constant frame rate. So
//! the first picture's timestamp and the caps' frame duration give frame `first`'s time; a seek
//! to the keyframe at or before it (not an accurate seek: the decoder would then clip the
//! picture overlapping the target and shift its timestamp) restarts decoding there; the first
//! picture after the seek must sit on a frame boundary (within a quarter frame) at or before
//! `first`, and its number follows from its time; the count goes on from there and drops the
//! pictures before `first` as usual. Otherwise (a variable rate, a seek that fails or lands
//! elsewhere) the input is decoded from its start again and counted: slower, never wrong.
//!
//! The states, in [`Shared::seek`]: the branch's entry probe drops every picture until the
//! count is settled; the main loop sends the seeks (never a streaming thread: a flushing seek
//! takes the stream locks); the FLUSH_STOP that a seek sends down sets the count.

use std::sync::atomic::Ordering;

use gst::prelude::*;

use super::Shared;

/// Name of the video branch's entry queue, where the seeks go upstream from (sent to the pipeline,
/// a muxer would refuse them).
pub const ENTRY_NAME: &str = "video-entry";

/// Counting from the input's start (no seek, or after one): pictures pass the entry probe.
pub const COUNTING: u8 = 0;
/// Waiting for the first picture's time (dropped).
pub const WAIT_FIRST: u8 = 1;
/// The main loop is to seek to frame `first`.
pub const SEEK_DUE: u8 = 2;
/// Seeking: pictures dropped until the seek's FLUSH_STOP.
pub const SEEKING: u8 = 3;
/// The first picture after the seek decides: on a frame boundary at or before frame `first`,
/// counting goes on from its number; elsewhere, the fallback.
pub const CHECK: u8 = 4;
/// The main loop is to seek back to the start (the fallback).
pub const RESTART_DUE: u8 = 5;
/// Seeking back: pictures dropped until its FLUSH_STOP, then counted from 0.
pub const RESTARTING: u8 = 6;

/// What the entry probe does with a picture of time `pts` (stream time) lasting `duration` before
/// the count is settled: true to let it through (counted as usual), false to drop it.
pub fn on_picture(shared: &Shared, pts: Option<gst::ClockTime>, duration: Option<gst::ClockTime>, fps: Option<gst::Fraction>, first: u64) -> bool {
    match shared.seek.load(Ordering::SeqCst) {
        COUNTING => true,
        WAIT_FIRST => {
            let frame_ns = fps.filter(|f| f.numer() > 0 && f.denom() > 0).and_then(|f| gst::ClockTime::SECOND.mul_div_floor(f.denom() as u64, f.numer() as u64));
            match (pts, frame_ns) {
                (Some(pts), Some(d)) if d.nseconds() > 0 => {
                    shared.first_pts.store(pts.nseconds(), Ordering::SeqCst);
                    shared.frame_ns.store(d.nseconds(), Ordering::SeqCst);
                    shared.seek.store(SEEK_DUE, Ordering::SeqCst);
                    false
                }
                // A variable rate or untimed pictures: counted from the start.
                _ => {
                    shared.seek.store(COUNTING, Ordering::SeqCst);
                    true
                }
            }
        }
        CHECK => {
            let (origin, d) = (shared.first_pts.load(Ordering::SeqCst), shared.frame_ns.load(Ordering::SeqCst));
            // The frame boundary nearest `t`, if within a quarter frame.
            let boundary = |t: u64| (t >= origin).then(|| (t - origin + d / 2) / d).filter(|&k| t.abs_diff(origin + k * d) <= d / 4);
            let start = pts.map(|p| p.nseconds());
            let end = start.zip(duration).map(|(p, l)| p + l.nseconds());
            // A picture on a boundary is frame k. One that only ends on a boundary was clipped by
            // the decoder to a segment that starts inside it (another stream's keyframe, e.g. the
            // audio's, decided where the demuxer restarted): it is the frame before that
            // boundary, and only usable as a frame before `first` (its timestamp was moved).
            let number = match (start.and_then(boundary), end.and_then(boundary)) {
                (Some(k), _) if k <= first => Some(k),
                (None, Some(k)) if k >= 1 && k - 1 < first => Some(k - 1),
                _ => None,
            };
            match number {
                Some(k) => {
                    tracing::info!("segment: decoding from frame {k} (sought towards frame {first})");
                    shared.frames_in.store(k, Ordering::SeqCst);
                    shared.seek.store(COUNTING, Ordering::SeqCst);
                    true
                }
                _ => {
                    tracing::info!("the seek towards frame {first} landed at {pts:?}, not on a frame at or before it: decoding from the start instead");
                    shared.seek.store(RESTART_DUE, Ordering::SeqCst);
                    false
                }
            }
        }
        _ => false,
    }
}

/// At a flush event on the branch's entry (`stop`: FLUSH_STOP): the count restarts where the seek
/// went. Returns whether the event goes on. A flush of these seeks ends there: the branch behind the entry never had a picture of
/// the input (all dropped at the entry), and a muxer that sees a flush may drop its headers.
pub fn on_flush(shared: &Shared, stop: bool) -> bool {
    match (shared.seek.load(Ordering::SeqCst), stop) {
        (SEEKING | RESTARTING, false) => false,
        (SEEKING, true) => {
            shared.seek.store(CHECK, Ordering::SeqCst);
            false
        }
        (RESTARTING, true) => {
            shared.frames_in.store(0, Ordering::SeqCst);
            shared.seek.store(COUNTING, Ordering::SeqCst);
            false
        }
        _ => true,
    }
}

/// Frame `first`'s stream time.
fn target(shared: &Shared, first: u64) -> gst::ClockTime {
    gst::ClockTime::from_nseconds(shared.first_pts.load(Ordering::SeqCst) + first * shared.frame_ns.load(Ordering::SeqCst))
}

/// From the main loop: sends the seek that is due, if one is. Err when even the way back to the
/// start fails (the frames before the segment are gone: nothing can be counted).
pub fn send_due(pipeline: &gst::Pipeline, shared: &Shared, first: u64) -> Result<(), String> {
    match shared.seek.load(Ordering::SeqCst) {
        SEEK_DUE => {
            shared.seek.store(SEEKING, Ordering::SeqCst);
            let flags = gst::SeekFlags::FLUSH | gst::SeekFlags::KEY_UNIT | gst::SeekFlags::SNAP_BEFORE;
            if !seek_upstream(pipeline, flags, target(shared, first)) {
                tracing::info!("the input did not take a seek to frame {first}: decoding from the start instead");
                shared.seek.store(RESTART_DUE, Ordering::SeqCst);
                return send_due(pipeline, shared, first);
            }
            Ok(())
        }
        RESTART_DUE => {
            shared.seek.store(RESTARTING, Ordering::SeqCst);
            match seek_upstream(pipeline, gst::SeekFlags::FLUSH, gst::ClockTime::ZERO) {
                true => Ok(()),
                false => Err("the input can be neither sought to the segment nor back to its start".to_string()),
            }
        }
        _ => Ok(()),
    }
}

/// Sends a seek to stream time `position` from the video branch's entry towards the decoder and
/// demuxer; whether it was taken.
fn seek_upstream(pipeline: &gst::Pipeline, flags: gst::SeekFlags, position: gst::ClockTime) -> bool {
    let Some(pad) = pipeline.by_name(ENTRY_NAME).and_then(|e| e.static_pad("sink")) else { return false };
    pad.push_event(gst::event::Seek::new(1.0, flags, gst::SeekType::Set, position, gst::SeekType::None, gst::ClockTime::NONE))
}
