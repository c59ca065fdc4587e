//! Behaviour of the `nlmdenoise` element through gst-check harnesses, on the CPU backend.

mod common;

use common::*;
use gst::prelude::*;
use nlmdenoise::{ChromaMode, Params, PixelFormat};

#[test]
fn every_format_negotiates_and_matches_the_engine() {
    let params = Params { temporal_past: 0, ..small_params() };
    for format in PixelFormat::ALL {
        // Odd sizes exercise the rounding of subsampled planes and GStreamer's row alignment.
        let caps = caps(format, 9, 7, (25, 1));
        let info = video_info(&caps);
        let mut h = harness(&params);
        h.set_src_caps(caps.clone());
        let input = with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::DISCONT);
        h.push(input.clone()).unwrap_or_else(|e| panic!("{format}: push failed: {e:?}"));
        let out = h.try_pull().unwrap_or_else(|| panic!("{format}: no output in the same chain call"));
        let negotiated = h.sinkpad().and_then(|p| p.current_caps()).expect("caps downstream");
        assert_eq!(negotiated, caps, "{format}: src caps equal sink caps");
        let expected = engine_run(format, &info, &params, std::slice::from_ref(&input));
        assert_matches_engine(&out, &info, format, &expected[0], "single frame");
        assert_ne!(buffer_planes(&out, &info, format), buffer_planes(&input, &info, format), "{format}: output is denoised, not a copy");
        assert_eq!(out.pts(), input.pts());
    }
}

/// Output frames go downstream in the engine's own planes (one read-only memory per plane, no
/// copy) where the format stores one component per plane and those planes are the caps' default
/// layout (the harness takes no `GstVideoMeta`); elsewhere, and with `zero-copy=false`, they are
/// copied into one buffer. Both match the engine byte for byte, and lent frames stay valid after
/// the element is gone.
#[test]
fn zero_copy_output_matches_the_engine_and_outlives_the_element() {
    use PixelFormat::*;
    let params = Params { temporal_past: 1, ..small_params() };
    // (format, width, height, lent): 9x7 I420 rows are padded to 4 bytes by GStreamer, so its
    // planes are not the default layout; NV12, P010 and RGBA are lent as stored frames (and the
    // 9x7 NV12's rows are padded, as I420's).
    let cases = [
        (I420, 32, 16, true),
        (YV12, 32, 16, true),
        (Y444_16LE, 20, 10, true),
        (GRAY8, 12, 8, true),
        (I420_10LE, 16, 8, true),
        (I420, 9, 7, false),
        (NV12, 32, 16, true),
        (NV12, 9, 7, false),
        (P010_10LE, 16, 8, true),
        (RGBA, 8, 8, true),
    ];
    for (format, w, hgt, lent) in cases {
        let caps = caps(format, w, hgt, (25, 1));
        let info = video_info(&caps);
        let frames: Vec<gst::Buffer> = (0..4).map(|i| with_meta(make_buffer(&info, format, 60 + i), i, gst::BufferFlags::empty())).collect();
        let expected = engine_run(format, &info, &params, &frames);
        for zero_copy in [true, false] {
            let outputs = {
                let mut h = harness(&params);
                h.element().unwrap().set_property("zero-copy", zero_copy);
                h.set_src_caps(caps.clone());
                for f in &frames {
                    h.push(f.clone()).unwrap();
                }
                h.push_event(gst::event::Eos::new());
                pull_all(&mut h)
            };
            let what = format!("{format} {w}x{hgt} zero-copy={zero_copy}");
            assert_eq!(outputs.len(), frames.len(), "{what}");
            for (i, (out, want)) in outputs.iter().zip(&expected).enumerate() {
                let memories = if zero_copy && lent { format.info().memory_planes } else { 1 };
                assert_eq!(out.n_memory(), memories, "{what}: frame {i}'s memories");
                assert_matches_engine(out, &info, format, want, &what);
                assert_eq!(out.pts(), frames[i].pts(), "{what}");
            }
        }
    }
}

/// Where the planes are not the default layout (rows GStreamer would pad), a downstream that
/// takes `GstVideoMeta` still gets them without a copy, described by the meta.
#[test]
fn zero_copy_output_with_video_meta_for_padded_layouts() {
    let params = Params { temporal_past: 0, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 9, 7, (25, 1));
    let info = video_info(&caps);
    let input = with_meta(make_buffer(&info, format, 5), 0, gst::BufferFlags::empty());
    let expected = engine_run(format, &info, &params, std::slice::from_ref(&input));
    let mut h = harness(&params);
    h.add_propose_allocation_meta(gst_video::VideoMeta::meta_api(), None);
    h.set_src_caps(caps);
    h.push(input).unwrap();
    let out = h.try_pull().expect("output");
    assert_eq!(out.n_memory(), 3);
    let meta = out.meta::<gst_video::VideoMeta>().expect("a video meta");
    assert_eq!(meta.stride()[..3], [9, 5, 5]);
    assert_matches_engine(&out, &info, format, &expected[0], "I420 9x7 with a video meta");
}

/// Input buffers with their own plane layout (padded strides, planes in a custom order) described by
/// a VideoMeta are read through that layout.
#[test]
fn input_with_video_meta_strides_is_read_correctly() {
    let params = Params { temporal_past: 1, ..small_params() };
    for format in [PixelFormat::I420, PixelFormat::NV12, PixelFormat::RGB, PixelFormat::Y444_16LE] {
        let caps = caps(format, 11, 7, (25, 1));
        let info = video_info(&caps);
        let fi = format.info();
        let n = fi.memory_planes;
        // Every plane gets a stride of its row bytes + 13 and starts 64 bytes after the previous one.
        let strides: Vec<usize> = (0..n).map(|p| fi.memory_plane_row_bytes(p, 11) + 13).collect();
        let mut offsets = Vec::new();
        let mut size = 0;
        for (p, stride) in strides.iter().enumerate() {
            size += 64;
            offsets.push(size);
            size += stride * fi.memory_plane_rows(p, 7);
        }
        let mut h = harness(&params);
        h.set_src_caps(caps);
        let mut d = engine(format, &info, &params);
        for i in 0..2u64 {
            let mut data = vec![0u8; size];
            let src = make_buffer(&info, format, 40 + i);
            let src_map = src.map_readable().unwrap();
            // Copy the default-layout content into the padded layout, row by row.
            for p in 0..n {
                let row = fi.memory_plane_row_bytes(p, 11);
                for r in 0..fi.memory_plane_rows(p, 7) {
                    let from = info.offset()[p] + r * info.stride()[p] as usize;
                    data[offsets[p] + r * strides[p]..][..row].copy_from_slice(&src_map[from..from + row]);
                }
            }
            let mut buf = gst::Buffer::from_mut_slice(data.clone());
            {
                let b = buf.get_mut().unwrap();
                let st: Vec<i32> = strides.iter().map(|&s| s as i32).collect();
                gst_video::VideoMeta::add_full(b, gst_video::VideoFrameFlags::empty(), gst_format(format), 11, 7, &offsets, &st).unwrap();
            }
            let buf = with_meta(buf, i, gst::BufferFlags::empty());
            h.push(buf).unwrap();
            let planes: Vec<&[u8]> = (0..n).map(|p| &data[offsets[p]..]).collect();
            let einfo = nlmdenoise::VideoInfo::new(format, 11, 7).unwrap();
            d.push(&nlmdenoise::FrameRef::new(einfo, &planes, &strides).unwrap(), i as usize).unwrap();
            let want = engine_pop_all(&mut d);
            let got = h.pull().unwrap();
            assert_matches_engine(&got, &info, format, &want[0].1, &format!("{format} frame {i} with VideoMeta layout"));
        }
    }
}

#[test]
fn sequence_matches_the_engine_with_past_and_future_frames() {
    let params = Params { temporal_past: 2, temporal_future: 1, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 12, (25, 1));
    let info = video_info(&caps);
    let frames: Vec<gst::Buffer> = (0..6).map(|i| with_meta(make_buffer(&info, format, 100 + i), i, gst::BufferFlags::empty())).collect();
    let mut h = harness(&params);
    h.set_src_caps(caps);
    let mut outs = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        h.push(f.clone()).unwrap();
        let got = pull_all(&mut h);
        // One frame of delay: frame i-1 leaves with frame i.
        assert_eq!(got.len(), usize::from(i >= 1), "outputs after input {i}");
        outs.extend(got);
    }
    assert!(h.push_event(gst::event::Eos::new()));
    outs.extend(pull_all(&mut h));
    let expected = engine_run(format, &info, &params, &frames);
    assert_eq!(outs.len(), 6);
    for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
        assert_matches_engine(o, &info, format, e, &format!("frame {i}"));
        assert_eq!(o.pts(), frames[i].pts());
    }
}

#[test]
fn rgb_with_joint_weights_and_alpha_passthrough() {
    let params = Params { chroma_mode: ChromaMode::Joint, temporal_past: 1, ..small_params() };
    let format = PixelFormat::RGBA;
    let caps = caps(format, 10, 6, (30, 1));
    let info = video_info(&caps);
    let frames: Vec<gst::Buffer> = (0..3).map(|i| with_meta(make_buffer(&info, format, 7 + i), i, gst::BufferFlags::empty())).collect();
    let mut h = harness(&params);
    h.set_src_caps(caps);
    let mut outs = Vec::new();
    for f in &frames {
        h.push(f.clone()).unwrap();
        outs.extend(pull_all(&mut h));
    }
    let expected = engine_run(format, &info, &params, &frames);
    for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
        assert_matches_engine(o, &info, format, e, &format!("frame {i}"));
        let (got, inp) = (buffer_planes(o, &info, format), buffer_planes(&frames[i], &info, format));
        let alpha = |v: &Vec<u8>| v.iter().skip(3).step_by(4).copied().collect::<Vec<u8>>();
        assert_eq!(alpha(&got[0]), alpha(&inp[0]), "alpha is copied");
    }
    assert_eq!(outs.len(), 3);
}

#[test]
fn latency_query_reports_future_frames() {
    let format = PixelFormat::I420;
    for (future, fps, want_ms) in [(2u32, (25, 1), 80u64), (0, (25, 1), 0), (3, (50, 1), 60)] {
        let params = Params { temporal_future: future, ..small_params() };
        let caps = caps(format, 8, 8, fps);
        let info = video_info(&caps);
        let mut h = harness(&params);
        h.set_src_caps(caps);
        h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty())).unwrap();
        let latency = h.query_latency().expect("latency answered");
        assert_eq!(latency, gst::ClockTime::from_mseconds(want_ms), "temporal-future {future} at {}/{} fps", fps.0, fps.1);
    }
}

#[test]
fn latency_with_variable_framerate_uses_buffer_duration() {
    let format = PixelFormat::GRAY8;
    let params = Params { temporal_future: 2, ..small_params() };
    let caps = caps(format, 8, 8, (0, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    h.set_src_caps(caps);
    assert_eq!(h.query_latency(), Some(gst::ClockTime::ZERO), "nothing known yet");
    h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty())).unwrap();
    assert_eq!(h.query_latency(), Some(gst::ClockTime::from_mseconds(80)), "2 x the 40 ms buffer duration");
}

#[test]
fn eos_drains_every_held_frame_with_its_own_metadata() {
    let params = Params { temporal_past: 1, temporal_future: 2, ..small_params() };
    let format = PixelFormat::NV12;
    let caps = caps(format, 12, 8, (25, 1));
    let info = video_info(&caps);
    let flags = [gst::BufferFlags::DISCONT, gst::BufferFlags::DELTA_UNIT, gst::BufferFlags::DELTA_UNIT | gst::BufferFlags::MARKER, gst::BufferFlags::DROPPABLE, gst::BufferFlags::DELTA_UNIT];
    let frames: Vec<gst::Buffer> = flags.iter().enumerate().map(|(i, f)| with_meta(make_buffer(&info, format, 50 + i as u64), i as u64, *f)).collect();
    let mut h = harness(&params);
    h.set_src_caps(caps);
    for f in &frames {
        h.push(f.clone()).unwrap();
    }
    assert_eq!(h.buffers_in_queue(), 3, "two frames held for the future window");
    assert!(h.push_event(gst::event::Eos::new()));
    // Everything was pushed before EOS went downstream.
    let outs = pull_all(&mut h);
    assert_eq!(outs.len(), 5);
    let mut saw_eos = false;
    while let Some(ev) = h.try_pull_event() {
        saw_eos |= ev.type_() == gst::EventType::Eos;
    }
    assert!(saw_eos, "EOS forwarded");
    let expected = engine_run(format, &info, &params, &frames);
    for (i, (o, inp)) in outs.iter().zip(&frames).enumerate() {
        assert_eq!(o.pts(), inp.pts(), "pts of frame {i}");
        assert_eq!(o.dts(), inp.dts(), "dts of frame {i}");
        assert_eq!(o.duration(), inp.duration(), "duration of frame {i}");
        assert_eq!(o.offset(), inp.offset(), "offset of frame {i}");
        assert_eq!(o.offset_end(), inp.offset_end(), "offset-end of frame {i}");
        assert_eq!(o.flags() - gst::BufferFlags::TAG_MEMORY, inp.flags(), "flags of frame {i}");
        assert_matches_engine(o, &info, format, &expected[i], &format!("frame {i}"));
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Reset {
    Flush,
    Segment,
    Discont,
    StreamStart,
}

fn apply_reset(h: &mut gst_check::Harness, reset: Reset) {
    match reset {
        Reset::Flush => {
            assert!(h.push_event(gst::event::FlushStart::new()));
            assert!(h.push_event(gst::event::FlushStop::new(true)));
            assert!(h.push_event(gst::event::Segment::new(&gst::FormattedSegment::<gst::ClockTime>::new())));
        }
        Reset::Segment => {
            // A non-flushing seek: a new segment starting at the next frame.
            let mut seg = gst::FormattedSegment::<gst::ClockTime>::new();
            seg.set_start(gst::ClockTime::from_mseconds(40 * 3));
            seg.set_time(gst::ClockTime::from_mseconds(40 * 3));
            assert!(h.push_event(gst::event::Segment::new(&seg)));
        }
        Reset::StreamStart => {
            assert!(h.push_event(gst::event::StreamStart::new("second-stream")));
            assert!(h.push_event(gst::event::Segment::new(&gst::FormattedSegment::<gst::ClockTime>::new())));
        }
        Reset::Discont => {}
    }
}

/// After a reset, the next frame must come out as if it were the first frame of a fresh element.
#[test]
fn flush_segment_discont_and_stream_start_reset_the_window() {
    let params = Params { temporal_past: 2, temporal_future: 0, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 12, 10, (25, 1));
    let info = video_info(&caps);
    let history: Vec<gst::Buffer> = (0..3).map(|i| with_meta(make_buffer(&info, format, 10 + i), i, gst::BufferFlags::empty())).collect();
    // Frame 3 has the content of frame 2, so the history is informative and its absence shows.
    let next = with_meta(make_buffer(&info, format, 12), 3, gst::BufferFlags::empty());

    let mut fresh = harness(&params);
    fresh.set_src_caps(caps.clone());
    fresh.push(next.clone()).unwrap();
    let fresh_out = buffer_planes(&fresh.pull().unwrap(), &info, format);

    let mut all = history.clone();
    all.push(next.clone());
    let continued = owned_planes(&engine_run(format, &info, &params, &all)[3]);
    assert_ne!(fresh_out, continued, "the test frames must make history matter");

    for reset in [Reset::Flush, Reset::Segment, Reset::Discont, Reset::StreamStart] {
        let mut h = harness(&params);
        h.set_src_caps(caps.clone());
        for f in &history {
            h.push(f.clone()).unwrap();
        }
        assert_eq!(pull_all(&mut h).len(), 3);
        apply_reset(&mut h, reset);
        let mut d = next.clone();
        if reset == Reset::Discont {
            d.make_mut().set_flags(gst::BufferFlags::DISCONT);
        }
        h.push(d).unwrap();
        let out = h.pull().unwrap();
        assert_eq!(buffer_planes(&out, &info, format), fresh_out, "{reset:?}: frame after the reset equals a fresh element's output");
    }

    // Without a reset the history is used.
    let mut h = harness(&params);
    h.set_src_caps(caps);
    for f in &all {
        h.push(f.clone()).unwrap();
    }
    let outs = pull_all(&mut h);
    assert_eq!(buffer_planes(&outs[3], &info, format), continued);
}

/// With future frames: a flush drops the held frames, a DISCONT finishes and pushes them first.
#[test]
fn held_frames_are_dropped_on_flush_and_drained_on_discont() {
    let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
    let format = PixelFormat::Y444;
    let caps = caps(format, 8, 6, (25, 1));
    let info = video_info(&caps);
    let f: Vec<gst::Buffer> = (0..4).map(|i| with_meta(make_buffer(&info, format, 30 + i), i, gst::BufferFlags::empty())).collect();

    // Flush: A, B, C in; A, B out; C held and dropped; D then EOS.
    let mut h = harness(&params);
    h.set_src_caps(caps.clone());
    for b in &f[..3] {
        h.push(b.clone()).unwrap();
    }
    assert_eq!(pull_all(&mut h).len(), 2);
    apply_reset(&mut h, Reset::Flush);
    h.push(f[3].clone()).unwrap();
    assert!(h.push_event(gst::event::Eos::new()));
    let outs = pull_all(&mut h);
    assert_eq!(outs.iter().map(|b| b.pts()).collect::<Vec<_>>(), vec![f[3].pts()], "held frame dropped by the flush");
    assert_matches_engine(&outs[0], &info, format, &engine_run(format, &info, &params, &f[3..])[0], "first frame after flush");

    // DISCONT: C is finished without future frames and pushed before D's output.
    let mut h = harness(&params);
    h.set_src_caps(caps);
    for b in &f[..3] {
        h.push(b.clone()).unwrap();
    }
    let mut outs = pull_all(&mut h);
    let mut d = f[3].clone();
    d.make_mut().set_flags(gst::BufferFlags::DISCONT);
    h.push(d.clone()).unwrap();
    outs.extend(pull_all(&mut h));
    assert!(h.push_event(gst::event::Eos::new()));
    outs.extend(pull_all(&mut h));
    assert_eq!(outs.iter().map(|b| b.pts()).collect::<Vec<_>>(), f.iter().map(|b| b.pts()).collect::<Vec<_>>());
    let before = engine_run(format, &info, &params, &f[..3]);
    let after = engine_run(format, &info, &params, &[d]);
    for (i, e) in before.iter().chain(&after).enumerate() {
        assert_matches_engine(&outs[i], &info, format, e, &format!("frame {i}"));
    }
    assert!(outs[3].flags().contains(gst::BufferFlags::DISCONT));
    assert!(!outs[2].flags().contains(gst::BufferFlags::DISCONT), "the drained frame keeps its own flags");
}

#[test]
fn qos_drops_late_frames_before_processing() {
    let params = Params { temporal_past: 2, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 10, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    let bus = test_bus(&h.element().unwrap());
    assert!(h.element().unwrap().property::<bool>("qos"), "QoS enabled by default");
    h.set_src_caps(caps);
    let a = with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty());
    let b = with_meta(make_buffer(&info, format, 2), 1, gst::BufferFlags::empty());
    let c = with_meta(make_buffer(&info, format, 3), 5, gst::BufferFlags::empty());
    h.push(a.clone()).unwrap();
    // The sink reports being 100 ms late at 40 ms: frames before 140 ms are useless.
    assert!(h.push_upstream_event(gst::event::Qos::new(gst::QOSType::Underflow, 0.5, 100_000_000, gst::ClockTime::from_mseconds(40))));
    h.push(b).unwrap();
    h.push(c.clone()).unwrap();
    let outs = pull_all(&mut h);
    assert_eq!(outs.iter().map(|o| o.pts()).collect::<Vec<_>>(), vec![a.pts(), c.pts()], "the late frame was dropped");
    assert!(bus.pop_filtered(&[gst::MessageType::Qos]).is_some(), "QoS message posted for the drop");
    // The dropped frame is not a reference of the next one.
    let expected = engine_run(format, &info, &params, &[a, c]);
    assert_matches_engine(&outs[1], &info, format, &expected[1], "frame after the drop");
}

#[test]
fn empty_gap_buffer_drains_and_starts_a_new_window() {
    let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
    let format = PixelFormat::GRAY8;
    let caps = caps(format, 8, 6, (25, 1));
    let info = video_info(&caps);
    let f: Vec<gst::Buffer> = (0..4).map(|i| with_meta(make_buffer(&info, format, 90 + i), i, gst::BufferFlags::empty())).collect();
    let mut h = harness(&params);
    h.set_src_caps(caps);
    h.push(f[0].clone()).unwrap();
    h.push(f[1].clone()).unwrap();
    assert_eq!(h.buffers_in_queue(), 1);
    let gap = with_meta(gst::Buffer::new(), 2, gst::BufferFlags::GAP);
    h.push(gap).unwrap();
    assert_eq!(h.buffers_in_queue(), 2, "the held frame was drained at the gap");
    let mut gap_events = Vec::new();
    while let Some(ev) = h.try_pull_event() {
        if let gst::EventView::Gap(g) = ev.view() {
            gap_events.push(g.get());
        }
    }
    assert_eq!(gap_events, vec![(f[2].pts().unwrap(), f[2].duration())], "the gap is announced downstream");
    h.push(f[3].clone()).unwrap();
    assert!(h.push_event(gst::event::Eos::new()));
    let outs = pull_all(&mut h);
    assert_eq!(outs.iter().map(|b| b.pts()).collect::<Vec<_>>(), vec![f[0].pts(), f[1].pts(), f[3].pts()]);
    let before = engine_run(format, &info, &params, &f[..2]);
    let after = engine_run(format, &info, &params, &f[3..]);
    for (i, e) in before.iter().chain(&after).enumerate() {
        assert_matches_engine(&outs[i], &info, format, e, &format!("output {i}"));
    }
}

#[test]
fn caps_with_future_frames_post_a_latency_message() {
    let params = Params { temporal_future: 2, ..small_params() };
    let format = PixelFormat::GRAY8;
    let caps = caps(format, 8, 6, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    let bus = test_bus(&h.element().unwrap());
    h.set_src_caps(caps);
    h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty())).unwrap();
    assert!(bus.pop_filtered(&[gst::MessageType::Latency]).is_some(), "latency message after negotiation");
    h.element().unwrap().set_property("temporal-future", 1u32);
    assert!(bus.pop_filtered(&[gst::MessageType::Latency]).is_some(), "latency message after a temporal-future change");
    h.push(with_meta(make_buffer(&info, format, 2), 1, gst::BufferFlags::empty())).unwrap();
    // Once the engine has taken the change (at the next frame) the element says so again: its
    // delay also depends on what the engine chose (pipeline depth, automatic chunk size).
    assert!(bus.pop_filtered(&[gst::MessageType::Latency]).is_some(), "latency message once the engine applied the change");
    assert!(bus.pop_filtered(&[gst::MessageType::Latency]).is_none(), "one message per change");
    assert_eq!(h.query_latency(), Some(gst::ClockTime::from_mseconds(40)));
}

#[test]
fn caps_change_midstream_drains_and_recreates_the_engine() {
    let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
    let steps = [(PixelFormat::I420, 16, 12), (PixelFormat::NV12, 20, 10), (PixelFormat::NV12, 14, 6), (PixelFormat::BGRx, 14, 6)];
    let mut h = harness(&params);
    let mut expected_all = Vec::new();
    let mut outs = Vec::new();
    let mut pts = 0u64;
    for (format, w, hgt) in steps {
        let caps = caps(format, w, hgt, (25, 1));
        let info = video_info(&caps);
        h.set_src_caps(caps.clone());
        let frames: Vec<gst::Buffer> = (0..3)
            .map(|i| {
                pts += 1;
                with_meta(make_buffer(&info, format, 200 + pts + i), pts, gst::BufferFlags::empty())
            })
            .collect();
        for f in &frames {
            h.push(f.clone()).unwrap();
        }
        // Outputs of the previous format were drained at the caps event.
        outs.extend(pull_all(&mut h));
        for e in engine_run(format, &info, &params, &frames) {
            expected_all.push((format, info.clone(), e));
        }
    }
    assert!(h.push_event(gst::event::Eos::new()));
    outs.extend(pull_all(&mut h));
    assert_eq!(outs.len(), expected_all.len());
    for (i, (o, (format, info, e))) in outs.iter().zip(&expected_all).enumerate() {
        assert_eq!(o.size(), info.size(), "output {i} has the size of its own format");
        assert_matches_engine(o, info, *format, e, &format!("output {i}"));
    }
}

#[test]
fn strength_change_while_playing_applies_from_the_next_frame() {
    let params = Params { temporal_past: 1, ..small_params() };
    let format = PixelFormat::GRAY8;
    let caps = caps(format, 10, 8, (25, 1));
    let info = video_info(&caps);
    let frames: Vec<gst::Buffer> = (0..4).map(|i| with_meta(make_buffer(&info, format, 70 + i), i, gst::BufferFlags::empty())).collect();
    let mut h = harness(&params);
    h.set_src_caps(caps);
    let mut d = engine(format, &info, &params);
    for (i, f) in frames.iter().enumerate() {
        if i == 2 {
            h.element().unwrap().set_property("strength", 3.0f32);
            h.element().unwrap().set_property("search-radius", 1u32);
            d.set_params(Params { strength: 3.0, search_radius: 1, ..params }).unwrap();
        }
        h.push(f.clone()).unwrap();
        engine_push(&mut d, &info, format, f, i);
        let mut got = pull_all(&mut h);
        let want = engine_pop_all(&mut d);
        assert_eq!(got.len(), want.len());
        for (o, (_, e)) in got.drain(..).zip(&want) {
            assert_matches_engine(&o, &info, format, e, &format!("frame {i}"));
        }
    }
}

#[test]
fn joint_chroma_on_subsampled_format_is_a_clear_error() {
    let params = Params { chroma_mode: ChromaMode::Joint, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 8, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    let bus = test_bus(&h.element().unwrap());
    h.set_src_caps(caps);
    let r = h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty()));
    assert_eq!(r, Err(gst::FlowError::NotNegotiated));
    let msg = bus.pop_filtered(&[gst::MessageType::Error]).expect("error message posted");
    let gst::MessageView::Error(err) = msg.view() else { unreachable!() };
    assert!(err.error().to_string().contains("joint"), "message names the problem: {}", err.error());
    // Base transform retries negotiation with every buffer; the user sees the error once.
    for pts in 1..4 {
        let _ = h.push(with_meta(make_buffer(&info, format, 1), pts, gst::BufferFlags::empty()));
    }
    assert!(bus.pop_filtered(&[gst::MessageType::Error]).is_none(), "the same error posted again");
}

#[test]
fn an_invalid_device_id_is_refused() {
    init();
    let e = gst::ElementFactory::make("nlmdenoise").build().unwrap();
    e.set_property("device-id", "abc");
    let bus = test_bus(&e);
    assert!(e.set_state(gst::State::Paused).is_err(), "a typo must not run on device 0");
    let msg = bus.pop_filtered(&[gst::MessageType::Error]).expect("error message posted");
    let gst::MessageView::Error(err) = msg.view() else { unreachable!() };
    assert!(err.error().to_string().contains("device-id 'abc'"), "{}", err.error());
    let _ = e.set_state(gst::State::Null);
    // A valid value afterwards clears it.
    e.set_property("device-id", "0");
    assert!(e.set_state(gst::State::Paused).is_ok());
    let _ = e.set_state(gst::State::Null);
}

#[test]
fn persistent_late_frames_post_one_warning() {
    let params = small_params();
    let format = PixelFormat::I420;
    let caps = caps(format, 8, 8, (30, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    let bus = test_bus(&h.element().unwrap());
    h.set_src_caps(caps);
    h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty())).unwrap();
    let late = |h: &mut gst_check::Harness, i: u64| {
        assert!(h.push_upstream_event(gst::event::Qos::new(gst::QOSType::Underflow, 0.5, 20_000_000, gst::ClockTime::from_mseconds(33 * i))));
    };
    // A few late frames now and then: no warning.
    for i in 0..10 {
        late(&mut h, i * 20);
    }
    assert!(bus.pop_filtered(&[gst::MessageType::Warning]).is_none(), "occasional lateness is not worth a warning");
    // Most frames late for seconds: one warning that says what to change.
    for i in 300..400 {
        late(&mut h, i);
    }
    let msg = bus.pop_filtered(&[gst::MessageType::Warning]).expect("warning posted");
    let gst::MessageView::Warning(w) = msg.view() else { unreachable!() };
    assert!(w.error().to_string().contains("cannot keep up"), "{}", w.error());
    assert!(bus.pop_filtered(&[gst::MessageType::Warning]).is_none(), "once per stream");
}

#[test]
fn cuda_requested_without_cuda_fails_clearly() {
    init();
    let cuda = nlmdenoise::backends::create(&nlmdenoise::BackendOptions { kind: nlmdenoise::BackendKind::Cuda, ..Default::default() });
    let format = PixelFormat::I420;
    let caps = caps(format, 8, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = gst_check::Harness::new("nlmdenoise");
    h.element().unwrap().set_property_from_str("backend", "cuda");
    let bus = test_bus(&h.element().unwrap());
    h.play();
    h.set_src_caps(caps);
    let r = h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty()));
    match cuda {
        Ok(_) => assert!(r.is_ok(), "CUDA is available here, so the element must run"),
        Err(e) => {
            assert_eq!(r, Err(gst::FlowError::NotNegotiated), "engine said: {e}");
            let msg = bus.pop_filtered(&[gst::MessageType::Error]).expect("error message posted");
            let gst::MessageView::Error(err) = msg.view() else { unreachable!() };
            let text = err.error().to_string();
            assert!(text.contains("backend unavailable") || text.contains("CUDA"), "clear message: {text}");
        }
    }
}

/// `backend-in-use` is an empty string, not NULL, before caps (as its description says): an
/// application reading it as a string on an early message (the warnings `start` posts) must not
/// fail.
#[test]
fn backend_in_use_is_empty_before_caps() {
    init();
    for name in ["nlmdenoise", "nlmupscale"] {
        let e = gst::ElementFactory::make(name).build().unwrap();
        let v: Option<String> = e.property("backend-in-use");
        assert_eq!(v.as_deref(), Some(""), "{name}");
    }
}

#[test]
fn property_ranges_defaults_and_rejected_values() {
    use nlmdenoise::params::*;
    init();
    let e = gst::ElementFactory::make("nlmdenoise").build().unwrap();
    let p = Params::default();
    let o = nlmdenoise::BackendOptions::default();
    let uint = |name: &str| e.find_property(name).unwrap().downcast::<glib::ParamSpecUInt>().unwrap();
    let float = |name: &str| e.find_property(name).unwrap().downcast::<glib::ParamSpecFloat>().unwrap();
    for (name, max, def) in [
        ("search-radius", MAX_SEARCH_RADIUS, p.search_radius),
        ("patch-radius", MAX_PATCH_RADIUS, p.patch_radius),
        ("temporal-past", MAX_TEMPORAL_PAST, p.temporal_past),
        ("temporal-future", MAX_TEMPORAL_FUTURE, p.temporal_future),
        ("offsets-per-pass", 4, o.nlm.offsets_per_pass),
        ("pipeline-depth", 4, o.pipeline_depth as u32),
    ] {
        let ps = uint(name);
        assert_eq!((ps.maximum(), ps.default_value()), (max, def), "{name}");
        assert_eq!(e.property::<u32>(name), def, "{name} default");
    }
    assert_eq!(uint("offsets-per-pass").minimum(), 1);
    for (name, max, def) in [("strength", MAX_STRENGTH, p.strength), ("chroma-strength", MAX_STRENGTH, p.strength), ("wref", MAX_WREF, p.wref), ("sigma", MAX_SIGMA, -1.0)] {
        let ps = float(name);
        assert_eq!((ps.maximum(), ps.default_value()), (max, def), "{name}");
    }
    assert_eq!(float("strength").minimum(), 0.0, "strength 0: frames pass through");
    assert!(float("chroma-strength").minimum() > 0.0, "chroma strength 0 is invalid for the engine");
    assert_eq!(float("sigma").minimum(), -1.0);
    for (name, def) in [("backend", "auto"), ("weighting", "welsch"), ("chroma-mode", "independent"), ("planes", "all"), ("kernel", "auto"), ("intermediate", "unorm10")] {
        let v = e.property_value(name);
        let (_, ev) = glib::EnumValue::from_value(&v).unwrap();
        assert_eq!(ev.nick(), def, "{name} default");
    }

    // Values round-trip.
    e.set_property("strength", 42.5f32);
    e.set_property("sigma", 0.0f32);
    e.set_property_from_str("chroma-mode", "luma-guided");
    e.set_property_from_str("intermediate", "f16");
    assert_eq!(e.property::<f32>("strength"), 42.5);
    assert_eq!(e.property::<f32>("sigma"), 0.0);
    let v = e.property_value("chroma-mode");
    let (_, ev) = glib::EnumValue::from_value(&v).unwrap();
    assert_eq!(ev.nick(), "luma-guided");

    // Out-of-range values are rejected and leave the property unchanged.
    for (name, bad) in [("sigma", (MAX_SIGMA + 1.0).to_value()), ("strength", (-1.0f32).to_value()), ("chroma-strength", 0.0f32.to_value()), ("search-radius", (MAX_SEARCH_RADIUS + 1).to_value())] {
        let before = e.property_value(name);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.set_property_from_value(name, &bad)));
        assert!(r.is_err(), "{name} = {bad:?} must be rejected");
        assert_eq!(e.property_value(name).serialize().unwrap(), before.serialize().unwrap(), "{name} unchanged");
    }
    // The same through a gst-launch description: GLib warns and keeps the default.
    let bin = gst::parse::launch("nlmdenoise name=d sigma=300").unwrap();
    let d = bin.downcast::<gst::Bin>().map(|b| b.by_name("d").unwrap()).unwrap_or_else(|e| e);
    assert_eq!(d.property::<f32>("sigma"), -1.0);
}

#[test]
fn backend_options_are_locked_while_playing() {
    init();
    let e = gst::ElementFactory::make("nlmdenoise").build().unwrap();
    for name in ["backend", "device-id", "kernel", "offsets-per-pass", "intermediate", "pipeline-depth", "threads"] {
        let flags = e.find_property(name).unwrap().flags();
        assert!(flags.contains(gst::PARAM_FLAG_MUTABLE_READY), "{name} mutable in READY only");
    }
    for name in ["strength", "chroma-strength", "search-radius", "patch-radius", "temporal-past", "temporal-future", "weighting", "wref", "chroma-mode", "planes", "sigma"] {
        let flags = e.find_property(name).unwrap().flags();
        assert!(flags.contains(gst::PARAM_FLAG_MUTABLE_PLAYING), "{name} mutable while playing");
    }
}

use gst::glib;

#[test]
fn sigma_sets_strengths_unless_they_were_given() {
    init();
    let e = gst::ElementFactory::make("nlmdenoise").build().unwrap();
    e.set_property("sigma", 20.0f32);
    assert!((e.property::<f32>("strength") - 20.0 * nlmdenoise::params::STRENGTH_PER_SIGMA).abs() < 1e-4);
    assert!((e.property::<f32>("chroma-strength") - 20.0 * nlmdenoise::params::CHROMA_STRENGTH_PER_SIGMA).abs() < 1e-4);
    // The strengths follow the window shape they were fitted for when it changes afterwards.
    e.set_property("temporal-future", 2u32);
    assert!((e.property::<f32>("strength") - 20.0 * nlmdenoise::params::OFFLINE_STRENGTH_PER_SIGMA).abs() < 1e-4);
    e.set_property("temporal-future", 0u32);
    e.set_property("temporal-past", 0u32);
    assert!((e.property::<f32>("chroma-strength") - 20.0 * nlmdenoise::params::SPATIAL_CHROMA_STRENGTH_PER_SIGMA).abs() < 1e-4);
    let e = gst::ElementFactory::make("nlmdenoise").property("strength", 7.0f32).build().unwrap();
    e.set_property("sigma", 20.0f32);
    assert_eq!(e.property::<f32>("strength"), 7.0);
    assert_eq!(e.property::<f32>("sigma"), 20.0);
}

/// A custom meta of the tests (registered once), with the index of the frame it came with.
fn test_meta_index(buf: &gst::BufferRef) -> Option<u64> {
    gst::meta::CustomMeta::from_buffer(buf, "NlmTestMeta").ok().and_then(|m| m.structure().get::<u64>("index").ok())
}

fn add_test_metas(buf: &mut gst::BufferRef, i: u64) {
    use std::sync::Once;
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        gst::meta::CustomMeta::register("NlmTestMeta", &[]);
    });
    gst_video::VideoCaptionMeta::add(buf, gst_video::VideoCaptionType::Cea708Cdp, &[0x96, 0x69, i as u8]);
    let tc = gst_video::VideoTimeCode::new(gst::Fraction::new(25, 1), None, gst_video::VideoTimeCodeFlags::empty(), 0, 0, 0, i as u32, 0);
    gst_video::VideoTimeCodeMeta::add(buf, &tc.try_into().expect("a valid time code"));
    let mut m = gst::meta::CustomMeta::add(buf, "NlmTestMeta").expect("registered");
    m.mut_structure().set("index", i);
}

/// Every input's metas (a caption, a time code, a custom meta) come out on that frame's own
/// output, whatever the engine held back (past and future windows), and the buffer's memory metas
/// do not travel (the output is described by its own).
#[test]
fn metas_travel_with_their_own_frames() {
    let params = Params { temporal_past: 1, temporal_future: 2, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    h.set_src_caps(caps);
    for i in 0..7u64 {
        let mut b = with_meta(make_buffer(&info, format, 80 + i), i, gst::BufferFlags::empty());
        add_test_metas(b.get_mut().unwrap(), i);
        h.push(b).unwrap();
    }
    assert!(h.push_event(gst::event::Eos::new()));
    let outs = pull_all(&mut h);
    assert_eq!(outs.len(), 7);
    for (i, o) in outs.iter().enumerate() {
        let i = i as u64;
        let cap = o.meta::<gst_video::VideoCaptionMeta>().unwrap_or_else(|| panic!("frame {i}: caption meta"));
        assert_eq!(cap.data(), &[0x96, 0x69, i as u8], "frame {i}: its own caption");
        let tc = o.meta::<gst_video::VideoTimeCodeMeta>().unwrap_or_else(|| panic!("frame {i}: time code meta"));
        assert_eq!(tc.tc().frames(), i as u32, "frame {i}: its own time code");
        assert_eq!(test_meta_index(o), Some(i), "frame {i}: its own custom meta");
        assert_eq!(o.iter_meta::<gst_video::VideoCaptionMeta>().count(), 1, "frame {i}: copied once");
    }
}

/// Overlay compositions downstream can render are offered upstream through the allocation query
/// (so subtitles are not burnt in before denoising), beside the element's own VideoMeta.
#[test]
fn downstream_overlay_support_is_offered_upstream() {
    let params = small_params();
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    h.add_propose_allocation_meta(gst_video::VideoOverlayCompositionMeta::meta_api(), None);
    h.set_src_caps(caps.clone());
    h.push(with_meta(make_buffer(&info, format, 3), 0, gst::BufferFlags::empty())).unwrap();
    let mut q = gst::query::Allocation::new(Some(&caps), true);
    assert!(h.srcpad().expect("harness source pad").peer_query(&mut q), "allocation query answered");
    assert!(q.find_allocation_meta::<gst_video::VideoMeta>().is_some(), "VideoMeta offered");
    assert!(q.find_allocation_meta::<gst_video::VideoOverlayCompositionMeta>().is_some(), "overlay compositions offered upstream");
}

/// `strength` driven by a GstController control source: each frame is denoised with the value at
/// its own stream time (the element syncs controlled properties per frame), equal to the engine
/// with the strength changed between the same frames.
#[test]
fn controlled_strength_follows_the_control_source_frame_by_frame() {
    use gst_controller::prelude::*;
    let params = Params { temporal_past: 1, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    let e = h.element().expect("element");
    let source = gst_controller::InterpolationControlSource::new();
    source.set_mode(gst_controller::InterpolationMode::None);
    // Frames are 40 ms apart (with_meta): frames 0-2 at strength 3, frames 3-5 at 30.
    assert!(source.set(gst::ClockTime::ZERO, 3.0));
    assert!(source.set(gst::ClockTime::from_mseconds(120), 30.0));
    let binding = gst_controller::DirectControlBinding::new_absolute(&e, "strength", &source);
    e.add_control_binding(&binding).expect("strength is controllable");
    h.set_src_caps(caps);
    let frames: Vec<gst::Buffer> = (0..6u64).map(|i| with_meta(make_buffer(&info, format, 60 + i), i, gst::BufferFlags::empty())).collect();
    let mut outs = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        h.push(f.clone()).unwrap();
        let expect = if i < 3 { 3.0 } else { 30.0 };
        assert_eq!(e.property::<f32>("strength"), expect, "frame {i}: the value at its stream time");
        outs.extend(pull_all(&mut h));
    }
    let mut d = engine(format, &info, &Params { strength: 3.0, ..params });
    let mut expected = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if i == 3 {
            d.set_params(Params { strength: 30.0, ..*d.user_params() }).unwrap();
        }
        engine_push(&mut d, &info, format, f, i);
        expected.extend(engine_pop_all(&mut d));
    }
    assert_eq!(outs.len(), 6);
    for (i, (o, (_, e))) in outs.iter().zip(&expected).enumerate() {
        assert_matches_engine(o, &info, format, e, &format!("frame {i}"));
    }
}

/// `strength=0` while playing: the frames the window held come out first (denoised, in order),
/// then frames pass through byte for byte with their metadata and the latency drops to 0; back at
/// a strength, frames are denoised again (a new window) and the latency returns.
#[test]
fn strength_zero_passes_frames_through_after_draining() {
    let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 8, (25, 1));
    let info = video_info(&caps);
    let mut h = harness(&params);
    let e = h.element().expect("element");
    h.set_src_caps(caps);
    let frames: Vec<gst::Buffer> = (0..8u64).map(|i| with_meta(make_buffer(&info, format, 90 + i), i, gst::BufferFlags::empty())).collect();
    let latency = |h: &mut gst_check::Harness| h.query_latency().expect("latency answered");
    for f in &frames[..3] {
        h.push(f.clone()).unwrap();
    }
    assert_eq!(latency(&mut h), gst::ClockTime::from_mseconds(40), "one future frame");
    e.set_property("strength", 0.0f32);
    assert_eq!(e.property::<f32>("strength"), 0.0);
    for f in &frames[3..5] {
        h.push(f.clone()).unwrap();
    }
    assert_eq!(latency(&mut h), gst::ClockTime::ZERO, "no frame held while passing through");
    let outs = pull_all(&mut h);
    assert_eq!(outs.len(), 5, "the held frame drained, then two passed through");
    let expected = engine_run(format, &info, &params, &frames[..3]);
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o.pts(), frames[i].pts(), "frame {i} in order");
        if i < 3 {
            assert_matches_engine(o, &info, format, &expected[i], &format!("frame {i} (denoised before the change)"));
        } else {
            assert_eq!(o.map_readable().unwrap().as_slice(), frames[i].map_readable().unwrap().as_slice(), "frame {i} passed through unchanged");
        }
    }
    e.set_property("strength", params.strength);
    for f in &frames[5..] {
        h.push(f.clone()).unwrap();
    }
    assert_eq!(latency(&mut h), gst::ClockTime::from_mseconds(40), "the future frame held again");
    assert!(h.push_event(gst::event::Eos::new()));
    let outs = pull_all(&mut h);
    let expected = engine_run(format, &info, &params, &frames[5..]);
    assert_eq!(outs.len(), 3);
    for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
        assert_matches_engine(o, &info, format, e, &format!("frame {} (a new window after the pass-through)", i + 5));
    }
}

/// Frames the base class's QoS drops before they reach the engine count as late: when nearly every
/// frame is dropped (few reach downstream to be reported late), the "cannot keep up" warning still
/// comes, once, and its advice names only what applies (NLM on the CPU: no `algorithm=nlm`; BM3D:
/// the profile, NLM and, in this live window, per-frame groups with their latency, not
/// `search-radius`; `backend=cuda` only where a GPU is usable).
#[test]
fn frames_dropped_by_qos_count_and_the_advice_fits_the_settings() {
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 8, (25, 1));
    let info = video_info(&caps);
    let gpu = nlmdenoise::device::cuda::available();
    for bm3d in [false, true] {
        let mut h = harness(&small_params());
        if bm3d {
            let e = h.element().unwrap();
            e.set_property_from_str("algorithm", "bm3d");
            e.set_property("sigma", 20.0f32);
        }
        let bus = test_bus(&h.element().unwrap());
        h.set_src_caps(caps.clone());
        h.push(with_meta(make_buffer(&info, format, 1), 0, gst::BufferFlags::empty())).unwrap();
        // Downstream reports one frame 10 s late: the base class drops the frames before that.
        assert!(h.push_upstream_event(gst::event::Qos::new(gst::QOSType::Underflow, 0.5, 10_000_000_000, gst::ClockTime::ZERO)));
        for i in 1..41u64 {
            h.push(with_meta(make_buffer(&info, format, 1 + i), i, gst::BufferFlags::empty())).unwrap();
        }
        assert_eq!(pull_all(&mut h).len(), 1, "the late frames were dropped before the engine");
        let msg = bus.pop_filtered(&[gst::MessageType::Warning]).expect("frames dropped by QoS made the warning");
        let gst::MessageView::Warning(w) = msg.view() else { unreachable!() };
        assert!(w.error().to_string().contains("cannot keep up"), "{}", w.error());
        let advice = w.debug().map(|d| d.to_string()).unwrap_or_default();
        assert_eq!(advice.contains("backend=cuda"), gpu, "backend=cuda only with a usable GPU: {advice}");
        if bm3d {
            assert!(advice.contains("bm3d-profile=fast") && advice.contains("algorithm=nlm") && !advice.contains("search-radius"), "{advice}");
            assert!(advice.contains("bm3d-frame-groups=1 (each frame grouped once: faster, at 4 frames of latency)"), "{advice}");
        } else {
            assert!(advice.contains("search-radius") && !advice.contains("algorithm=nlm") && !advice.contains("bm3d"), "{advice}");
        }
        assert!(bus.pop_filtered(&[gst::MessageType::Warning]).is_none(), "once per stream");
    }
}

/// BM3D with a strength set and no sigma cannot start: one clear message that names the cause (a
/// set strength turns the estimate off) in the element's own terms, without a doubled prefix.
#[test]
fn bm3d_without_a_noise_level_says_why_once() {
    init();
    let p = gst::parse::launch("videotestsrc num-buffers=2 ! video/x-raw,format=I420,width=16,height=8 ! nlmdenoise backend=cpu algorithm=bm3d strength=10 ! fakesink").unwrap();
    let _ = p.set_state(gst::State::Playing);
    let msg = p.bus().unwrap().timed_pop_filtered(gst::ClockTime::from_seconds(10), &[gst::MessageType::Error]).expect("the element refuses to start");
    let _ = p.set_state(gst::State::Null);
    let gst::MessageView::Error(err) = msg.view() else { unreachable!() };
    let text = err.error().to_string();
    assert!(text.starts_with("Invalid parameter: bm3d needs the noise level"), "{text}");
    assert!(!text.to_lowercase().contains("invalid parameters: invalid parameter"), "one prefix: {text}");
    assert!(text.contains("sigma=-1") && text.contains("a set strength turns off"), "names the cause in the element's terms: {text}");
}

/// `bm3d-*` values the ranges cannot exclude (steps 0, patch size 5, a group of 12) are refused
/// when set, through the API and a gst-launch description alike, and the property keeps its value;
/// valid ones are taken.
#[test]
fn bm3d_values_outside_their_sets_are_refused_when_set() {
    init();
    let e = gst::ElementFactory::make("nlmdenoise").build().unwrap();
    for (name, bad, good) in [("bm3d-steps", 0, 1), ("bm3d-patch-size", 5, 4), ("bm3d-block-step", 0, 3), ("bm3d-hard-block-step", 0, 5), ("bm3d-group-size", 12, 16), ("bm3d-wiener-group-size", 0, 8)]
    {
        e.set_property(name, bad);
        assert_eq!(e.property::<i32>(name), -1, "{name}={bad} refused");
        e.set_property(name, good);
        assert_eq!(e.property::<i32>(name), good, "{name}={good} taken");
    }
    let bin = gst::parse::launch("nlmdenoise name=d bm3d-steps=0 bm3d-patch-size=5").unwrap();
    let d = bin.downcast::<gst::Bin>().map(|b| b.by_name("d").unwrap()).unwrap_or_else(|e| e);
    assert_eq!((d.property::<i32>("bm3d-steps"), d.property::<i32>("bm3d-patch-size")), (-1, -1), "refused at parse time");
}

/// Issue 33 item 11: a property the algorithm does not read was silent (and an invalid BM3D
/// combination failed the start even with NLM running); now the element starts and posts one
/// warning per such property off its default, naming it, and none for the properties it reads.
#[test]
fn properties_the_algorithm_does_not_read_are_warned_not_refused() {
    init();
    let warnings_at_start = |setup: &[(&str, &str)]| -> Vec<String> {
        let e = gst::ElementFactory::make("nlmdenoise").property_from_str("backend", "cpu").build().unwrap();
        for (name, value) in setup {
            e.set_property_from_str(name, value);
        }
        let bus = test_bus(&e);
        assert!(e.set_state(gst::State::Paused).is_ok(), "{setup:?}: starts");
        let _ = e.set_state(gst::State::Null);
        std::iter::from_fn(|| bus.pop_filtered(&[gst::MessageType::Warning]))
            .map(|m| match m.view() {
                gst::MessageView::Warning(w) => w.error().to_string(),
                _ => unreachable!(),
            })
            .collect()
    };
    // NLM with BM3D settings, one of them an invalid combination (block step 8 > patch size 4).
    let w = warnings_at_start(&[("bm3d-patch-size", "4"), ("bm3d-block-step", "8"), ("wref", "0.5")]);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w.iter().any(|m| m.contains("bm3d-patch-size does nothing with algorithm nlm")), "{w:?}");
    assert!(w.iter().any(|m| m.contains("bm3d-block-step does nothing with algorithm nlm")), "{w:?}");
    // BM3D with NLM settings.
    let w = warnings_at_start(&[("algorithm", "bm3d"), ("sigma", "10"), ("search-radius", "5"), ("weighting", "bisquare")]);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w.iter().all(|m| m.contains("does nothing with algorithm bm3d")), "{w:?}");
    // Defaults, or settings of the algorithm that runs: no warning.
    assert!(warnings_at_start(&[]).is_empty());
    assert!(warnings_at_start(&[("algorithm", "bm3d"), ("sigma", "10"), ("bm3d-profile", "high")]).is_empty());
}
