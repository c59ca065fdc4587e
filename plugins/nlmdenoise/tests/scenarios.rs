//! Stress scenarios for the element in real pipelines (CPU backend), each checking that frames in
//! equal frames out per segment, timestamps are kept, nothing deadlocks and memory stays
//! bounded: seek storms with future frames, state cycling, caps renegotiated every few frames,
//! every `mutable_playing` property changed from another thread while data flows, instances in
//! parallel tee branches, 1- and 2-frame streams. docs/reliability.md lists them with the counts.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gst::glib;
use gst::prelude::*;

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())).unwrap_or(0)
}

fn launch(description: &str) -> gst::Pipeline {
    common::init();
    gst::parse::launch(description).unwrap().downcast::<gst::Pipeline>().unwrap()
}

/// Buffers seen on a pad, split into segments at each flush (FLUSH_STOP starts a new one).
#[derive(Default, Clone, Debug)]
struct Segments(Vec<Vec<Option<gst::ClockTime>>>);

fn record(pad: &gst::Pad) -> Arc<Mutex<Segments>> {
    let seen = Arc::new(Mutex::new(Segments(vec![Vec::new()])));
    let s = seen.clone();
    pad.add_probe(gst::PadProbeType::BUFFER | gst::PadProbeType::EVENT_FLUSH, move |_, info| {
        let mut s = s.lock().unwrap();
        match &info.data {
            Some(gst::PadProbeData::Buffer(b)) => s.0.last_mut().unwrap().push(b.pts()),
            Some(gst::PadProbeData::Event(e)) if e.type_() == gst::EventType::FlushStop => s.0.push(Vec::new()),
            _ => {}
        }
        gst::PadProbeReturn::Ok
    });
    seen
}

/// What the appsink named `sink` of `p` receives: per sample its PTS, format and size.
type SampleRecord = (Option<gst::ClockTime>, gst_video::VideoFormat, u32, u32);
fn samples_out(p: &gst::Pipeline) -> Arc<Mutex<Vec<SampleRecord>>> {
    let sink = p.by_name("sink").unwrap().downcast::<gst_app::AppSink>().unwrap();
    let outs = Arc::new(Mutex::new(Vec::new()));
    let o = outs.clone();
    sink.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |s| {
                let sample = s.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let info = gst_video::VideoInfo::from_caps(sample.caps().unwrap()).unwrap();
                o.lock().unwrap().push((sample.buffer().unwrap().pts(), info.format(), info.width(), info.height()));
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    outs
}

/// Waits for EOS; panics on an error or after `timeout` (a deadlock).
fn wait_eos(pipeline: &gst::Pipeline, timeout: Duration) {
    let bus = pipeline.bus().unwrap();
    let msg = bus.timed_pop_filtered(gst::ClockTime::from_nseconds(timeout.as_nanos() as u64), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("EOS in time (no deadlock)");
    if let gst::MessageView::Error(e) = msg.view() {
        panic!("pipeline error: {} ({:?})", e.error(), e.debug());
    }
}

/// Every segment's output is its input in order, less at most `held` frames discarded by the
/// flush that ended it (the frames held for the future window plus the one in flight: a flush
/// discards data in flight by definition); the last segment (ended by EOS) lost none.
fn check_segments(input: &Segments, output: &Segments, held: usize) {
    assert_eq!(input.0.len(), output.0.len(), "both pads saw the same flushes");
    let last = input.0.len() - 1;
    for (i, (a, b)) in input.0.iter().zip(&output.0).enumerate() {
        assert!(b.len() <= a.len() && a.len() - b.len() <= if i == last { 0 } else { held }, "segment {i}: {} in, {} out", a.len(), b.len());
        assert_eq!(&a[..b.len()], &b[..], "segment {i}: timestamps kept, in order");
    }
}

#[test]
fn seek_storm_with_future_frames() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("seek-storm.avi");
    let make = launch(&format!("videotestsrc num-buffers=300 pattern=ball ! video/x-raw,format=I420,width=64,height=48,framerate=30/1 ! avimux ! filesink location={}", file.display()));
    make.set_state(gst::State::Playing).unwrap();
    wait_eos(&make, Duration::from_secs(60));
    make.set_state(gst::State::Null).unwrap();

    let p = launch(&format!("filesrc location={} ! avidemux ! nlmdenoise name=d backend=cpu temporal-past=2 temporal-future=2 search-radius=2 patch-radius=1 ! fakesink sync=false", file.display()));
    let d = p.by_name("d").unwrap();
    let (input, output) = (record(&d.static_pad("sink").unwrap()), record(&d.static_pad("src").unwrap()));
    p.set_state(gst::State::Paused).unwrap();
    p.state(gst::ClockTime::from_seconds(10)).0.unwrap();
    p.set_state(gst::State::Playing).unwrap();
    let mut rng = 12345u64;
    for _ in 0..50 {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let frame = (rng >> 33) % 290;
        let pos = gst::ClockTime::SECOND.mul_div_floor(frame, 30).unwrap();
        assert!(p.seek_simple(gst::SeekFlags::FLUSH | gst::SeekFlags::ACCURATE, pos).is_ok(), "seek to frame {frame}");
        std::thread::sleep(Duration::from_millis(2 + (rng >> 60)));
    }
    // A seek near the end may have let the stream reach EOS before the next seek restarted it:
    // that EOS message is still on the bus and is not the end of the last segment.
    let bus = p.bus().unwrap();
    while bus.pop_filtered(&[gst::MessageType::Eos]).is_some() {}
    wait_eos(&p, Duration::from_secs(120));
    p.set_state(gst::State::Null).unwrap();
    let (input, output) = (input.lock().unwrap().clone(), output.lock().unwrap().clone());
    assert!(input.0.len() > 40, "{} segments: the seeks flushed", input.0.len());
    check_segments(&input, &output, 2 + 1);
    assert!(!output.0.last().unwrap().is_empty(), "the last segment ran to the end");
}

#[test]
fn state_cycling_500_times() {
    let p = launch(
        "videotestsrc pattern=ball ! video/x-raw,format=I420,width=32,height=24,framerate=30/1 ! \
         nlmdenoise backend=cpu temporal-future=1 search-radius=1 patch-radius=1 ! fakesink sync=false",
    );
    let bus = p.bus().unwrap();
    let warm = |p: &gst::Pipeline| {
        for _ in 0..20 {
            p.set_state(gst::State::Playing).unwrap();
            p.set_state(gst::State::Null).unwrap();
        }
    };
    warm(&p);
    let rss0 = rss_kib();
    for i in 0..500 {
        p.set_state(gst::State::Playing).unwrap();
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        p.set_state(gst::State::Null).unwrap();
    }
    p.set_state(gst::State::Paused).unwrap();
    for _ in 0..500 {
        p.set_state(gst::State::Playing).unwrap();
        p.set_state(gst::State::Paused).unwrap();
    }
    p.set_state(gst::State::Null).unwrap();
    let grown = rss_kib().saturating_sub(rss0);
    assert!(bus.pop_filtered(&[gst::MessageType::Error]).is_none(), "no error while cycling");
    assert!(grown < 32 * 1024, "resident memory grew by {grown} KiB over 1000 state changes");
}

/// appsrc pushing frames whose caps change every 3 frames (size and format), future frames on:
/// every frame comes out, at its own size and format, in order.
#[test]
fn caps_renegotiated_every_few_frames() {
    common::init();
    let p = launch("appsrc name=src format=time ! nlmdenoise backend=cpu temporal-future=2 search-radius=1 patch-radius=1 ! appsink name=sink sync=false");
    let src = p.by_name("src").unwrap().downcast::<gst_app::AppSrc>().unwrap();
    let outs = samples_out(&p);
    p.set_state(gst::State::Playing).unwrap();
    let formats = ["I420", "NV12", "Y444", "GRAY8", "RGBA", "I420_10LE"];
    let sizes = [(32, 24), (17, 9), (48, 32), (8, 8)];
    let mut sent = Vec::new();
    for i in 0..60u64 {
        let k = (i / 3) as usize;
        let (fmt, (w, h)) = (formats[k % formats.len()], sizes[k % sizes.len()]);
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::from_string(fmt), w, h).fps(gst::Fraction::new(30, 1)).build().unwrap();
        if i % 3 == 0 {
            src.set_caps(Some(&info.to_caps().unwrap()));
        }
        let mut buf = gst::Buffer::with_size(info.size()).unwrap();
        {
            let b = buf.get_mut().unwrap();
            let pts = gst::ClockTime::SECOND.mul_div_floor(i, 30).unwrap();
            b.set_pts(pts);
            b.map_writable().unwrap().iter_mut().enumerate().for_each(|(j, v)| *v = ((j as u64 * 7 + i * 13) % 251) as u8);
        }
        sent.push((buf.pts(), info.format(), w, h));
        src.push_buffer(buf).unwrap();
    }
    src.end_of_stream().unwrap();
    wait_eos(&p, Duration::from_secs(60));
    p.set_state(gst::State::Null).unwrap();
    assert_eq!(*outs.lock().unwrap(), sent, "every frame out, with its own caps, in order");
}

/// Settings refused while playing (a warning; the running parameters stay) are not taken up by
/// the engine made for the next input caps either: the stream goes on with the running
/// parameters instead of ending in an error.
#[test]
fn refused_settings_stay_refused_across_a_caps_change() {
    let p = launch("appsrc name=src format=time ! nlmdenoise name=d backend=cpu search-radius=1 patch-radius=1 ! appsink name=sink sync=false");
    let src = p.by_name("src").unwrap().downcast::<gst_app::AppSrc>().unwrap();
    let d = p.by_name("d").unwrap();
    let outs = samples_out(&p);
    // Counted as posted (wait_eos drops the messages it is not waiting for).
    let refusals = Arc::new(AtomicU64::new(0));
    let r = refusals.clone();
    p.bus().unwrap().set_sync_handler(move |_, msg| {
        if let gst::MessageView::Warning(w) = msg.view() {
            r.fetch_add(u64::from(w.error().to_string().contains("needs the noise level")), Ordering::SeqCst);
        }
        gst::BusSyncReply::Pass
    });
    p.set_state(gst::State::Playing).unwrap();
    let push = |i: u64, w: u32, h: u32| {
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, w, h).fps(gst::Fraction::new(30, 1)).build().unwrap();
        src.set_caps(Some(&info.to_caps().unwrap()));
        let mut buf = gst::Buffer::with_size(info.size()).unwrap();
        {
            let b = buf.get_mut().unwrap();
            b.set_pts(gst::ClockTime::SECOND.mul_div_floor(i, 30).unwrap());
            b.map_writable().unwrap().iter_mut().enumerate().for_each(|(j, v)| *v = ((j as u64 * 7 + i * 13) % 251) as u8);
        }
        src.push_buffer(buf).unwrap();
    };
    let wait_for = |n: usize| {
        let t = Instant::now();
        while outs.lock().unwrap().len() < n {
            assert!(t.elapsed() < Duration::from_secs(30), "{n} frames out in time");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    for i in 0..3 {
        push(i, 32, 24);
    }
    wait_for(1);
    // BM3D with a strength (no noise estimate) and no sigma: refused.
    d.set_property_from_str("algorithm", "bm3d");
    d.set_property("strength", 5.0f32);
    push(3, 32, 24);
    for i in 4..7 {
        push(i, 48, 32);
    }
    src.end_of_stream().unwrap();
    wait_eos(&p, Duration::from_secs(60));
    p.set_state(gst::State::Null).unwrap();
    let refusals = refusals.load(Ordering::SeqCst);
    let sizes: Vec<(u32, u32)> = outs.lock().unwrap().iter().map(|o| (o.2, o.3)).collect();
    assert_eq!(sizes, [(32, 24); 4].into_iter().chain([(48, 32); 3]).collect::<Vec<_>>(), "every frame out, at its own size");
    assert!(refusals >= 1, "the refused settings warned ({refusals} warnings)");
}

/// Every `mutable_playing` property set to random in-range values from another thread while
/// frames flow: every frame still comes out (invalid combinations warn and keep the old values).
#[test]
fn properties_changed_from_another_thread_while_playing() {
    let p = launch(
        "videotestsrc num-buffers=300 pattern=ball ! video/x-raw,format=I420,width=40,height=30,framerate=30/1 ! \
         nlmdenoise name=d backend=cpu search-radius=1 patch-radius=1 ! fakesink name=sink sync=false",
    );
    let d = p.by_name("d").unwrap();
    let out = record(&p.by_name("sink").unwrap().static_pad("sink").unwrap());
    // Stops the changer however the test ends: a thread left setting properties keeps the
    // pipeline alive past the test.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    // An application sets a bad combination before the first frame at its own risk: with no
    // running parameters to keep, the stream ends with an error. The changes start once frames
    // flow (an engine runs).
    let first = out.clone();
    let (d2, stop2) = (d.clone(), stop.0.clone());
    let changer = std::thread::spawn(move || {
        let started = Instant::now();
        while first.lock().unwrap().0.iter().all(|s| s.is_empty()) && !stop2.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let props: Vec<glib::ParamSpec> =
            d2.list_properties().iter().filter(|p| p.flags().contains(gst::PARAM_FLAG_MUTABLE_PLAYING) && p.flags().contains(glib::ParamFlags::WRITABLE)).cloned().collect();
        assert!(props.len() >= 10, "{} mutable properties", props.len());
        let mut rng = 99u64;
        let mut changes = 0u64;
        while !stop2.load(Ordering::SeqCst) {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let spec = &props[(rng >> 33) as usize % props.len()];
            let r = ((rng >> 11) as f64) / ((1u64 << 53) as f64);
            // Small radii keep the CPU backend fast; everything else over its whole range.
            let small = |name: &str| name.contains("radius") || name.starts_with("temporal") || name.contains("size") || name.contains("seeds");
            let value: Option<glib::Value> = if let Some(s) = spec.downcast_ref::<glib::ParamSpecUInt>() {
                let hi = if small(spec.name()) { s.minimum().saturating_add(2).min(s.maximum()) } else { s.maximum() };
                Some((s.minimum() + ((hi - s.minimum()) as f64 * r) as u32).to_value())
            } else if let Some(s) = spec.downcast_ref::<glib::ParamSpecInt>() {
                let hi = if small(spec.name()) { (s.minimum() + 3).min(s.maximum()) } else { s.maximum() };
                Some((s.minimum() + ((hi - s.minimum()) as f64 * r) as i32).to_value())
            } else if let Some(s) = spec.downcast_ref::<glib::ParamSpecFloat>() {
                Some((s.minimum() + (s.maximum().min(60.0) - s.minimum()) * r as f32).to_value())
            } else if let Some(s) = spec.downcast_ref::<glib::ParamSpecEnum>() {
                let class = s.enum_class();
                let values = class.values();
                Some(values[(rng >> 20) as usize % values.len()].to_value(&class))
            } else {
                None
            };
            if let Some(v) = value {
                d2.set_property_from_value(spec.name(), &v);
                changes += 1;
            }
            // Short: a fast pipeline (300 small frames) must still see many changes.
            std::thread::sleep(Duration::from_micros(50));
        }
        changes
    });
    // An application reading the element's state on its messages from a synchronous handler,
    // on the thread that posts them: the element must not post while holding its own locks.
    let warnings = Arc::new(AtomicU64::new(0));
    let (d3, w) = (d.clone(), warnings.clone());
    p.bus().unwrap().set_sync_handler(move |_, msg| {
        if let gst::MessageView::Warning(_) = msg.view() {
            let _: String = d3.property("backend-in-use");
            let _: f32 = d3.property("sigma-estimate");
            w.fetch_add(1, Ordering::SeqCst);
        }
        gst::BusSyncReply::Pass
    });
    p.set_state(gst::State::Playing).unwrap();
    wait_eos(&p, Duration::from_secs(120));
    drop(stop);
    let changes = changer.join().unwrap();
    p.set_state(gst::State::Null).unwrap();
    let n: usize = out.lock().unwrap().0.iter().map(|s| s.len()).sum();
    assert_eq!(n, 300, "every frame came out through {changes} property changes");
    assert!(changes > 50, "{changes} changes");
    assert!(warnings.load(Ordering::SeqCst) > 0, "invalid combinations warned (read from a synchronous handler)");
}

#[test]
fn instances_in_parallel_tee_branches() {
    let p = launch(
        "videotestsrc num-buffers=120 pattern=ball ! video/x-raw,format=I420,width=48,height=32,framerate=30/1 ! tee name=t \
         t. ! queue ! nlmdenoise backend=cpu search-radius=1 patch-radius=1 ! fakesink name=a sync=false \
         t. ! queue ! nlmdenoise backend=cpu temporal-future=2 search-radius=2 patch-radius=1 ! fakesink name=b sync=false \
         t. ! queue ! nlmdenoise backend=cpu algorithm=bm3d sigma=10 bm3d-profile=fast ! fakesink name=c sync=false",
    );
    let rec: Vec<_> = ["a", "b", "c"].iter().map(|n| record(&p.by_name(n).unwrap().static_pad("sink").unwrap())).collect();
    p.set_state(gst::State::Playing).unwrap();
    wait_eos(&p, Duration::from_secs(300));
    p.set_state(gst::State::Null).unwrap();
    let want: Vec<_> = (0..120).map(|i| Some(gst::ClockTime::SECOND.mul_div_floor(i, 30).unwrap())).collect();
    for (name, r) in ["a", "b", "c"].iter().zip(rec) {
        assert_eq!(r.lock().unwrap().0.concat(), want, "branch {name}");
    }
}

#[test]
fn one_and_two_frame_streams_come_out_whole() {
    for frames in [1, 2] {
        for extra in ["temporal-future=2", "temporal-future=7 temporal-past=7", "algorithm=bm3d sigma=10 bm3d-profile=fast temporal-past=1 temporal-future=1"] {
            let p = launch(&format!(
                "videotestsrc num-buffers={frames} ! video/x-raw,format=I420,width=24,height=16,framerate=30/1 ! \
                 nlmdenoise backend=cpu search-radius=1 patch-radius=1 {extra} ! fakesink name=sink sync=false"
            ));
            let out = record(&p.by_name("sink").unwrap().static_pad("sink").unwrap());
            let t = Instant::now();
            p.set_state(gst::State::Playing).unwrap();
            wait_eos(&p, Duration::from_secs(60));
            p.set_state(gst::State::Null).unwrap();
            assert_eq!(out.lock().unwrap().0.concat().len(), frames as usize, "{frames} frames, {extra} ({:?})", t.elapsed());
        }
    }
}
