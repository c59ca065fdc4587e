//! GStreamer's `leaks` tracer over the element's life (issue #34): every GstObject and
//! GstMiniObject (buffers, caps, events, queries, pools, memories, pads, elements) created while a
//! scenario runs must be gone once the scenario has ended. The scenarios walk the element's paths:
//! negotiation in several formats, past and future windows, the end-of-stream drain, caps changes
//! mid-stream, flushes, gaps, property changes while playing, QoS, its own buffer pool offered
//! upstream and lent output, a real pipeline with a seek, errors, and `nlmupscale`.
//!
//! The tracer is chosen when GStreamer initialises, so this binary holds one test, which sets
//! `GST_TRACERS` before `gst::init`. Each scenario runs twice: once to create what GStreamer and
//! the plugin keep for the process (static caps of pad templates, registered meta and
//! allocator types, thread pools), then with the tracer's activity tracking on; what that second
//! run leaves alive is a leak.

mod common;

use common::*;
use gst::prelude::*;
use nlmdenoise::{Params, PixelFormat};

/// Pushes `n` frames of `format` at `w`x`h` from `first_pts` and pulls what comes out.
fn push_frames(h: &mut gst_check::Harness, format: PixelFormat, w: i32, hh: i32, first_pts: u64, n: u64) -> usize {
    let caps = caps(format, w, hh, (25, 1));
    let info = video_info(&caps);
    h.set_src_caps(caps);
    let mut out = 0;
    for i in 0..n {
        h.push(with_meta(make_buffer(&info, format, first_pts + i), first_pts + i, gst::BufferFlags::empty())).unwrap();
        out += pull_all(h).len();
    }
    out
}

/// A named scenario: a closure that builds, runs and drops everything it uses.
type Scenario = (&'static str, Box<dyn Fn()>);

fn scenarios() -> Vec<Scenario> {
    vec![
        (
            "formats, past and future frames, end-of-stream drain",
            Box::new(|| {
                let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
                for format in [PixelFormat::I420, PixelFormat::NV12, PixelFormat::BGRx, PixelFormat::GRAY8] {
                    let mut h = harness(&params);
                    let mut n = push_frames(&mut h, format, 16, 12, 0, 4);
                    assert!(h.push_event(gst::event::Eos::new()));
                    n += pull_all(&mut h).len();
                    assert_eq!(n, 4, "{format}");
                }
            }),
        ),
        (
            "caps changes mid-stream, flush, gap, segment",
            Box::new(|| {
                let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
                let mut h = harness(&params);
                push_frames(&mut h, PixelFormat::I420, 16, 12, 0, 3);
                push_frames(&mut h, PixelFormat::NV12, 20, 10, 3, 3);
                assert!(h.push_event(gst::event::FlushStart::new()));
                assert!(h.push_event(gst::event::FlushStop::new(true)));
                assert!(h.push_event(gst::event::Segment::new(&gst::FormattedSegment::<gst::ClockTime>::new())));
                push_frames(&mut h, PixelFormat::NV12, 20, 10, 6, 2);
                let gap = gst::event::Gap::builder(gst::ClockTime::from_seconds(1)).duration(gst::ClockTime::from_mseconds(40)).build();
                assert!(h.push_event(gap));
                push_frames(&mut h, PixelFormat::NV12, 20, 10, 30, 2);
                assert!(h.push_event(gst::event::Eos::new()));
                pull_all(&mut h);
            }),
        ),
        (
            "properties changed while playing, QoS, latency query",
            Box::new(|| {
                let params = Params { temporal_past: 2, ..small_params() };
                let mut h = harness(&params);
                push_frames(&mut h, PixelFormat::GRAY8, 10, 8, 0, 2);
                h.element().unwrap().set_property("strength", 3.0f32);
                h.element().unwrap().set_property("search-radius", 1u32);
                h.element().unwrap().set_property("temporal-past", 1u32);
                push_frames(&mut h, PixelFormat::GRAY8, 10, 8, 2, 2);
                let qos = gst::event::Qos::new(gst::QOSType::Underflow, 0.5, 1_000_000_000, gst::ClockTime::from_mseconds(80));
                h.push_upstream_event(qos);
                push_frames(&mut h, PixelFormat::GRAY8, 10, 8, 4, 2);
                let mut q = gst::query::Latency::new();
                h.element().unwrap().static_pad("src").unwrap().peer_query(&mut q);
                assert!(h.push_event(gst::event::Eos::new()));
                pull_all(&mut h);
            }),
        ),
        (
            "the element's pool offered upstream, lent output, a seek in a pipeline",
            Box::new(|| {
                let p = gst::parse::launch(
                    "videotestsrc num-buffers=12 ! video/x-raw,format=I420,width=32,height=24,framerate=25/1 ! nlmdenoise backend=cpu search-radius=1 patch-radius=1 temporal-past=1 temporal-future=1 strength=10 zero-copy=true ! fakesink sync=false",
                )
                .unwrap()
                .downcast::<gst::Pipeline>()
                .unwrap();
                p.set_state(gst::State::Paused).unwrap();
                let bus = p.bus().unwrap();
                let _ = bus.timed_pop_filtered(gst::ClockTime::from_seconds(5), &[gst::MessageType::AsyncDone, gst::MessageType::Error]);
                p.seek_simple(gst::SeekFlags::FLUSH, gst::ClockTime::from_mseconds(120)).unwrap();
                p.set_state(gst::State::Playing).unwrap();
                let msg = bus.timed_pop_filtered(gst::ClockTime::from_seconds(10), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("EOS");
                assert!(matches!(msg.view(), gst::MessageView::Eos(_)), "{msg:?}");
                p.set_state(gst::State::Null).unwrap();
            }),
        ),
        (
            "a refused configuration (an error posted, the stream stopped)",
            Box::new(|| {
                let params = Params { chroma_mode: nlmdenoise::ChromaMode::Joint, ..small_params() };
                let mut h = harness(&params);
                let caps = caps(PixelFormat::I420, 16, 12, (25, 1));
                let info = video_info(&caps);
                h.set_src_caps(caps);
                assert!(h.push(make_buffer(&info, PixelFormat::I420, 1)).is_err());
            }),
        ),
        (
            "nlmupscale, past and future frames",
            Box::new(|| {
                init();
                let mut h = gst_check::Harness::new("nlmupscale");
                {
                    let e = h.element().unwrap();
                    e.set_property_from_str("backend", "cpu");
                    e.set_property("temporal-past", 1u32);
                    e.set_property("temporal-future", 1u32);
                }
                h.play();
                h.set_src_caps(caps(PixelFormat::I420, 16, 12, (25, 1)));
                let info = video_info(&caps(PixelFormat::I420, 16, 12, (25, 1)));
                for i in 0..3 {
                    h.push(with_meta(make_buffer(&info, PixelFormat::I420, i), i, gst::BufferFlags::empty())).unwrap();
                }
                assert!(h.push_event(gst::event::Eos::new()));
                assert_eq!(pull_all(&mut h).len(), 3);
            }),
        ),
    ]
}

/// Objects created and not yet freed since tracking started, kept up to date from the tracer's
/// activity checkpoints: each checkpoint lists the creations and destructions since the previous
/// one (by type name and address; an address freed and reused is created again), so a count per
/// (type, address) above zero is an object alive.
#[derive(Default)]
struct Activity(std::collections::HashMap<String, i64>);

impl Activity {
    fn update(&mut self, tracer: &gst::Tracer) {
        let cp = tracer.emit_by_name::<gst::Structure>("activity-get-checkpoint", &[]);
        for (field, step) in [("objects-created-list", 1), ("objects-removed-list", -1)] {
            // An empty list comes back typed as a list of integers.
            let Ok(list) = cp.get::<gst::List>(field) else { continue };
            for v in list.iter() {
                if let Ok(o) = v.get::<gst::Structure>() {
                    let key = format!("{} at {}", o.get::<String>("type-name").unwrap_or_default(), o.get::<String>("address").unwrap_or_default());
                    *self.0.entry(key).or_default() += step;
                }
            }
        }
    }

    fn alive(&self) -> Vec<String> {
        let mut v: Vec<String> = self.0.iter().filter(|(_, &n)| n > 0).map(|(k, _)| k.clone()).collect();
        v.sort();
        v
    }
}

#[test]
fn no_gstreamer_object_outlives_a_scenario() {
    // The only test of this binary: nothing else runs while the variable is set.
    std::env::set_var("GST_TRACERS", "leaks");
    init();
    let tracer = gst::active_tracers().into_iter().find(|t| t.type_().name() == "GstLeaksTracer").expect("the leaks tracer is active (GST_TRACERS=leaks)");
    // The check itself: a buffer made while tracking is alive while it lives, and not after.
    tracer.emit_by_name::<()>("activity-start-tracking", &[]);
    let mut activity = Activity::default();
    let canary = gst::Buffer::with_size(64).unwrap();
    activity.update(&tracer);
    assert!(activity.alive().iter().any(|o| o.starts_with("GstBuffer")), "the tracer lists a live buffer: {:?}", activity.alive());
    drop(canary);
    activity.update(&tracer);
    assert_eq!(activity.alive(), Vec::<String>::new(), "and not once it is freed");
    tracer.emit_by_name::<()>("activity-stop-tracking", &[]);
    let mut leaks = Vec::new();
    for (name, run) in scenarios() {
        run(); // what the process keeps once
        tracer.emit_by_name::<()>("activity-start-tracking", &[]);
        run();
        // Streaming threads release their last references as they wind down.
        let mut activity = Activity::default();
        activity.update(&tracer);
        for _ in 0..50 {
            if activity.alive().is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            activity.update(&tracer);
        }
        let alive = activity.alive();
        tracer.emit_by_name::<()>("activity-stop-tracking", &[]);
        eprintln!("leaks tracer: {name}: {} object(s) alive after the scenario", alive.len());
        if !alive.is_empty() {
            leaks.push(format!("{name}: {}", alive.join(", ")));
        }
    }
    assert!(leaks.is_empty(), "objects created by a scenario and still alive after it:\n{}", leaks.join("\n"));
}
