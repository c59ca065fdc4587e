//! Behaviour of the `nlmupscale` element through gst-check harnesses, on the CPU backend: output
//! caps scaled, frames equal to the engine's, timestamps kept, the temporal window drained at EOS,
//! latency reported, caps that no size fits refused, the properties' rules.

mod common;

use common::*;
use gst::prelude::*;
use gst_check::Harness;
use nlmdenoise::params::{SrParams, SR_BASE_STRENGTH};
use nlmdenoise::{Algorithm, Params, PixelFormat};

fn upscale_params(scale: u32, past: u32, future: u32) -> Params {
    Params {
        algorithm: Algorithm::NlmSr,
        search_radius: 2,
        patch_radius: 1,
        temporal_past: past,
        temporal_future: future,
        strength: SR_BASE_STRENGTH,
        chroma_strength: SR_BASE_STRENGTH,
        sr: SrParams { scale, ..SrParams::default() },
        ..Params::default()
    }
}

fn upscaler(p: &Params) -> Harness {
    init();
    let mut h = Harness::new("nlmupscale");
    {
        let e = h.element().expect("element");
        e.set_property_from_str("backend", "cpu");
        e.set_property("scale", p.sr.scale);
        e.set_property("search-radius", p.search_radius);
        e.set_property("patch-radius", p.patch_radius);
        e.set_property("temporal-past", p.temporal_past);
        e.set_property("temporal-future", p.temporal_future);
    }
    h.play();
    h
}

#[test]
fn output_is_scaled_and_equals_the_engine() {
    for (format, w, h, scale, past, future) in [(PixelFormat::I420, 16, 12, 2, 1, 1), (PixelFormat::GRAY8, 9, 7, 3, 2, 0), (PixelFormat::NV12, 10, 6, 4, 0, 0), (PixelFormat::RGBA, 7, 5, 2, 1, 0)] {
        let p = upscale_params(scale, past, future);
        let mut harness = upscaler(&p);
        let incaps = caps(format, w, h, (30, 1));
        let info = video_info(&incaps);
        harness.set_src_caps(incaps);
        let inputs: Vec<gst::Buffer> = (0..5).map(|i| with_meta(make_buffer(&info, format, 7 + i), i, if i == 0 { gst::BufferFlags::DISCONT } else { gst::BufferFlags::empty() })).collect();
        for b in &inputs {
            harness.push(b.clone()).unwrap();
        }
        harness.push_event(gst::event::Eos::new());
        let outs = pull_all(&mut harness);
        assert_eq!(outs.len(), inputs.len(), "{format} x{scale}: every frame out after EOS");
        let negotiated = harness.sinkpad().and_then(|p| p.current_caps()).expect("output caps");
        let out_info = video_info(&negotiated);
        assert_eq!((out_info.width(), out_info.height(), out_info.format()), (w as u32 * scale, h as u32 * scale, gst_format(format)), "{format}: output caps {negotiated}");
        assert_eq!(out_info.fps(), gst::Fraction::new(30, 1));
        let expected = engine_run(format, &info, &p, &inputs);
        for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
            assert_eq!(o.pts(), inputs[i].pts(), "{format}: frame {i} keeps its timestamp");
            assert_matches_engine(o, &out_info, format, e, &format!("{format} x{scale} frame {i}"));
        }
    }
}

#[test]
fn latency_counts_the_future_frames() {
    let p = upscale_params(2, 1, 2);
    let mut h = upscaler(&p);
    h.set_src_caps(caps(PixelFormat::I420, 8, 8, (25, 1)));
    let info = video_info(&caps(PixelFormat::I420, 8, 8, (25, 1)));
    h.push(with_meta(make_buffer(&info, PixelFormat::I420, 1), 0, gst::BufferFlags::DISCONT)).unwrap();
    assert!(h.try_pull().is_none(), "the first output waits for two future frames");
    assert_eq!(h.query_latency(), Some(gst::ClockTime::from_mseconds(80)), "2 frames at 25 fps");
}

#[test]
fn caps_no_size_fits_are_refused() {
    init();
    let mut h = Harness::new("nlmupscale");
    h.element().unwrap().set_property_from_str("backend", "cpu");
    h.set_sink_caps_str("video/x-raw,format=I420,width=100,height=48");
    h.play();
    let info = video_info(&caps(PixelFormat::I420, 32, 24, (25, 1)));
    h.set_src_caps(caps(PixelFormat::I420, 32, 24, (25, 1)));
    let r = h.push(make_buffer(&info, PixelFormat::I420, 3));
    assert_eq!(r, Err(gst::FlowError::NotNegotiated), "64x48 output cannot become 100x48");
}

#[test]
fn sigma_sets_the_strengths_unless_they_are_set() {
    init();
    let h = Harness::new("nlmupscale");
    let e = h.element().unwrap();
    assert_eq!(e.property::<f32>("strength"), SR_BASE_STRENGTH);
    assert_eq!(e.property::<u32>("scale"), 2);
    assert!(e.property::<bool>("novelty-gate"), "the gate is on by default");
    e.set_property("sigma", 10.0f32);
    let want = Params { algorithm: Algorithm::NlmSr, ..Params::default() }.with_noise_sigma(10.0).strength;
    assert!((e.property::<f32>("strength") - want).abs() < 1e-4 && want > SR_BASE_STRENGTH, "strength {} for sigma 10", e.property::<f32>("strength"));
    e.set_property("sigma", -1.0f32);
    assert_eq!(e.property::<f32>("strength"), SR_BASE_STRENGTH, "back to the clean-input strength");
    e.set_property("strength", 5.0f32);
    e.set_property("sigma", 10.0f32);
    assert_eq!(e.property::<f32>("strength"), 5.0, "a set strength stays");
}

/// Several devices and chunks along time (`device-id` list, `chunk-frames`; here two CPU
/// workers) upscale to the same bytes as the engine a frame at a time, every frame out, in order.
#[test]
fn chunks_and_several_devices_give_the_engine_output() {
    let p = upscale_params(2, 1, 1);
    let format = PixelFormat::I420;
    for (devices, chunk) in [("0", 3u32), ("0,1", 1), ("0,1", 2)] {
        let mut harness = upscaler(&p);
        {
            let e = harness.element().unwrap();
            e.set_state(gst::State::Null).unwrap();
            e.set_property("device-id", devices);
            e.set_property("chunk-frames", chunk);
            assert_eq!(e.property::<String>("device-id"), devices);
            assert_eq!(e.property::<u32>("chunk-frames"), chunk);
        }
        harness.play();
        let incaps = caps(format, 14, 10, (30, 1));
        let info = video_info(&incaps);
        harness.set_src_caps(incaps);
        let inputs: Vec<gst::Buffer> = (0..7).map(|i| with_meta(make_buffer(&info, format, 40 + i), i, gst::BufferFlags::empty())).collect();
        for b in &inputs {
            harness.push(b.clone()).unwrap();
        }
        harness.push_event(gst::event::Eos::new());
        let outs = pull_all(&mut harness);
        let what = format!("devices {devices}, chunk {chunk}");
        assert_eq!(outs.len(), inputs.len(), "{what}: every frame out");
        let out_info = video_info(&harness.sinkpad().and_then(|p| p.current_caps()).expect("output caps"));
        let expected = engine_run(format, &info, &p, &inputs);
        for (i, (o, e)) in outs.iter().zip(&expected).enumerate() {
            assert_eq!(o.pts(), inputs[i].pts(), "{what}: frame {i} in order");
            assert_matches_engine(o, &out_info, format, e, &format!("{what} frame {i}"));
        }
    }
}

/// `scale` changed while frames flow takes effect through renegotiation: every frame comes out
/// (those held for the future frame included), each buffer the size its caps say, first at the
/// old factor, then at the new one.
#[test]
fn scale_changed_while_playing_renegotiates() {
    init();
    let p = gst::parse::launch(
        "videotestsrc pattern=ball num-buffers=20 ! video/x-raw,format=I420,width=32,height=24,framerate=30/1 ! \
         nlmupscale name=up backend=cpu scale=2 temporal-past=1 temporal-future=1 ! fakesink name=sink sync=false",
    )
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    let up = p.by_name("up").unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    p.by_name("sink").unwrap().static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
        if let Some(buf) = info.buffer() {
            let caps = pad.current_caps().unwrap();
            let vi = gst_video::VideoInfo::from_caps(&caps).unwrap();
            s.lock().unwrap().push((vi.width(), vi.size(), buf.size()));
        }
        gst::PadProbeReturn::Ok
    });
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = count.clone();
    // Weak: a probe on the element's own pad holding the element would keep both alive for ever.
    let up2 = up.downgrade();
    up.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, _| {
        if c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 10 {
            if let Some(up) = up2.upgrade() {
                up.set_property("scale", 3u32);
            }
        }
        gst::PadProbeReturn::Ok
    });
    p.set_state(gst::State::Playing).unwrap();
    let msg = p.bus().unwrap().timed_pop_filtered(gst::ClockTime::from_seconds(60), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("finished in time");
    p.set_state(gst::State::Null).unwrap();
    if let gst::MessageView::Error(e) = msg.view() {
        panic!("pipeline error: {} ({:?})", e.error(), e.debug());
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 20, "every frame out: {seen:?}");
    assert!(seen.iter().all(|(_, size, got)| got == size), "each buffer the size of its caps: {seen:?}");
    let widths: Vec<u32> = seen.iter().map(|(w, _, _)| *w).collect();
    assert_eq!(widths.first(), Some(&64));
    assert_eq!(widths.last(), Some(&96), "the new factor applies: {widths:?}");
    assert!(widths.windows(2).all(|w| w[0] <= w[1]), "one switch, old factor first: {widths:?}");
}

#[test]
fn defaults_are_the_upscalers_not_the_denoisers() {
    // The upscaler compares 7 x 7 patches over 5 x 5 candidates (docs/quality.md); nlmdenoise keeps
    // its own radii.
    init();
    let up = gst::ElementFactory::make("nlmupscale").build().expect("nlmupscale");
    let den = gst::ElementFactory::make("nlmdenoise").build().expect("nlmdenoise");
    let radii = |e: &gst::Element| (e.property::<u32>("patch-radius"), e.property::<u32>("search-radius"));
    let sr = Params::upscaling(2);
    assert_eq!(radii(&up), (sr.patch_radius, sr.search_radius));
    assert_eq!(radii(&up), (nlmdenoise::params::SR_PATCH_RADIUS, nlmdenoise::params::SR_SEARCH_RADIUS));
    assert_eq!(radii(&den), (Params::default().patch_radius, Params::default().search_radius));
    assert_ne!(radii(&up), radii(&den));
    let spec = up.find_property("patch-radius").expect("patch-radius");
    assert_eq!(spec.default_value().get::<u32>().unwrap(), nlmdenoise::params::SR_PATCH_RADIUS);
    assert_eq!(up.property::<f32>("fusion"), 1.0);
}

/// The upscaler's outputs carry the metas that do not depend on the frame's size (a caption) and
/// drop those that do (a crop rectangle in the input's pixels), each on its own frame.
#[test]
fn metas_that_depend_on_the_size_are_dropped() {
    let p = upscale_params(2, 1, 1);
    let mut harness = upscaler(&p);
    let format = PixelFormat::I420;
    let incaps = caps(format, 16, 12, (30, 1));
    let info = video_info(&incaps);
    harness.set_src_caps(incaps);
    for i in 0..4u64 {
        let mut b = with_meta(make_buffer(&info, format, 30 + i), i, gst::BufferFlags::empty());
        {
            let b = b.get_mut().unwrap();
            gst_video::VideoCaptionMeta::add(b, gst_video::VideoCaptionType::Cea708Cdp, &[0x96, 0x69, i as u8]);
            gst_video::VideoCropMeta::add(b, (1, 1, 8, 6));
        }
        harness.push(b).unwrap();
    }
    harness.push_event(gst::event::Eos::new());
    let outs = pull_all(&mut harness);
    assert_eq!(outs.len(), 4);
    for (i, o) in outs.iter().enumerate() {
        let cap = o.meta::<gst_video::VideoCaptionMeta>().unwrap_or_else(|| panic!("frame {i}: caption meta"));
        assert_eq!(cap.data(), &[0x96, 0x69, i as u8], "frame {i}: its own caption");
        assert!(o.meta::<gst_video::VideoCropMeta>().is_none(), "frame {i}: a crop in the input's pixels is dropped");
    }
}

/// The shared property table's 0 (`nlmdenoise`: pass frames through) does not apply to the
/// upscaler: `strength=0` is refused, `sigma=0` is a clean input (-1); `scale` says what it does
/// while playing (renegotiation), so gst-inspect shows it changeable while playing.
#[test]
fn zero_strength_is_refused_and_scale_changes_while_playing() {
    init();
    let e = gst::ElementFactory::make("nlmupscale").build().unwrap();
    let before: f32 = e.property("strength");
    e.set_property("strength", 0.0f32);
    assert_eq!(e.property::<f32>("strength"), before, "strength 0 refused");
    e.set_property("sigma", 0.0f32);
    assert_eq!(e.property::<f32>("sigma"), -1.0, "sigma 0: a clean input");
    let scale = e.find_property("scale").unwrap();
    assert!(scale.flags().contains(gst::PARAM_FLAG_MUTABLE_PLAYING), "scale applies while playing (renegotiation)");
}
