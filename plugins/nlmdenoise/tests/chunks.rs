//! The `chunk-frames` and `device-id` properties: values, mapping to the engine's options, and
//! chunked runs (several "devices" on the CPU backend: one worker each) giving the same frames,
//! timestamps and count as a frame at a time.

mod common;

use common::*;
use gst::prelude::*;
use nlmdenoise::device::{ChunkFrames, Devices};
use nlmdenoise::BackendOptions;
use nlmdenoise::{Params, PixelFormat};

#[test]
fn device_id_takes_an_ordinal_a_list_or_all() {
    init();
    let e = gst::ElementFactory::make("nlmdenoise").build().unwrap();
    assert_eq!(e.property::<String>("device-id"), "0");
    assert_eq!(e.property::<u32>("chunk-frames"), 1, "a frame at a time by default");
    for (set, get) in [("1", "1"), ("0,1", "0,1"), (" 2 , 3 ", "2,3"), ("ALL", "all"), ("0", "0")] {
        e.set_property("device-id", set);
        assert_eq!(e.property::<String>("device-id"), get, "device-id={set}");
    }
    // A bad list is refused (logged) and the previous value kept.
    e.set_property("device-id", "1,x");
    assert_eq!(e.property::<String>("device-id"), "0");
    // gst-launch syntax: `device-id=0` still works (the value is a string now).
    let bin = gst::parse::launch("nlmdenoise name=d device-id=1 chunk-frames=0").unwrap();
    let d = bin.downcast::<gst::Bin>().map(|b| b.by_name("d").unwrap()).unwrap_or_else(|e| e);
    assert_eq!(d.property::<String>("device-id"), "1");
    assert_eq!(d.property::<u32>("chunk-frames"), 0);
    for (desc, want) in [("device-id=0,1", "0,1"), ("device-id=\"0,1\"", "0,1"), ("device-id=all", "all")] {
        let bin = gst::parse::launch(&format!("nlmdenoise name=d {desc}")).unwrap();
        let d = bin.downcast::<gst::Bin>().map(|b| b.by_name("d").unwrap()).unwrap_or_else(|e| e);
        assert_eq!(d.property::<String>("device-id"), want, "{desc}");
    }
    let flags = d.find_property("chunk-frames").unwrap().flags();
    assert!(flags.contains(gst::PARAM_FLAG_MUTABLE_READY));

    let mut o = BackendOptions::default();
    gstnlmdenoise::apply_devices(&mut o, "3").unwrap();
    assert_eq!((o.device_id, &o.devices), (3, &Devices::Default));
    gstnlmdenoise::apply_devices(&mut o, "1,0").unwrap();
    assert_eq!((o.device_id, &o.devices), (1, &Devices::List(vec![1, 0])));
    gstnlmdenoise::apply_devices(&mut o, "all").unwrap();
    assert_eq!(o.devices, Devices::All);
    assert!(gstnlmdenoise::apply_devices(&mut o, "").is_err());
    let _ = ChunkFrames::Auto;
}

/// Runs `n` frames through a harness with `props` set; returns the output buffers.
fn run(params: &Params, props: &[(&str, &str)], n: u64) -> (Vec<gst::Buffer>, Vec<gst::Buffer>) {
    let format = PixelFormat::I420;
    let caps = caps(format, 20, 14, (25, 1));
    let info = video_info(&caps);
    let frames: Vec<gst::Buffer> = (0..n).map(|i| with_meta(make_buffer(&info, format, 300 + i), i, gst::BufferFlags::empty())).collect();
    let mut h = harness(params);
    for (k, v) in props {
        h.element().unwrap().set_property_from_str(k, v);
    }
    h.set_src_caps(caps);
    let mut outs = Vec::new();
    for f in &frames {
        h.push(f.clone()).unwrap();
        outs.extend(pull_all(&mut h));
    }
    assert!(h.push_event(gst::event::Eos::new()));
    outs.extend(pull_all(&mut h));
    (frames, outs)
}

#[test]
fn chunked_and_multi_worker_runs_match_frame_at_a_time() {
    let params = Params { temporal_past: 2, temporal_future: 2, ..small_params() };
    let n = 11;
    let (frames, base) = run(&params, &[], n);
    assert_eq!(base.len(), n as usize);
    let format = PixelFormat::I420;
    let info = video_info(&caps(format, 20, 14, (25, 1)));
    for props in [vec![("chunk-frames", "3")], vec![("chunk-frames", "0")], vec![("chunk-frames", "4"), ("device-id", "0,1")]] {
        let (_, outs) = run(&params, &props, n);
        assert_eq!(outs.len(), n as usize, "{props:?}: every frame comes out");
        for (i, (o, b)) in outs.iter().zip(&base).enumerate() {
            assert_eq!(o.pts(), frames[i].pts(), "{props:?} frame {i}: timestamp");
            assert_eq!(buffer_planes(o, &info, format), buffer_planes(b, &info, format), "{props:?} frame {i}: samples");
        }
    }
}

/// The latency query includes the frames chunks hold back: `temporal-future + (D + 1) * N - 1`
/// frames for chunks of N frames on D devices, and outputs come out exactly that late.
#[test]
fn latency_query_includes_the_chunks_in_flight() {
    let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
    let format = PixelFormat::I420;
    for (props, frames) in [(vec![("chunk-frames", "3")], 1 + 2 * 3 - 1), (vec![("chunk-frames", "2"), ("device-id", "0,1")], 1 + 3 * 2 - 1), (vec![], 1)] {
        let caps = caps(format, 20, 14, (25, 1));
        let info = video_info(&caps);
        let mut h = harness(&params);
        for (k, v) in &props {
            h.element().unwrap().set_property_from_str(k, v);
        }
        h.set_src_caps(caps);
        let mut out = 0;
        for i in 0..12u64 {
            h.push(with_meta(make_buffer(&info, format, 700 + i), i, gst::BufferFlags::empty())).unwrap();
            if i == 0 {
                // The engine exists once the first buffer negotiated the caps.
                assert_eq!(h.query_latency(), Some(gst::ClockTime::from_mseconds(40 * frames as u64)), "{props:?}: {frames} frames at 25 fps");
            }
            out += pull_all(&mut h).len();
            assert_eq!(out, (i as usize + 1).saturating_sub(frames), "{props:?}: outputs after input {i}");
        }
    }
}
