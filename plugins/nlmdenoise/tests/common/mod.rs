//! Shared helpers of the element tests: plugin registration, test frames, the engine run the
//! element must reproduce, frame comparison.
#![allow(dead_code)]

use std::sync::Once;

use gst::prelude::*;
use gst_check::Harness;
use gst_video::prelude::*;
use nlmdenoise::{BackendKind, BackendOptions, Denoiser, FrameRef, OwnedFrame, Params, PixelFormat};

pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        gst::init().expect("gst::init");
        gstnlmdenoise::plugin_register_static().expect("register the nlmdenoise plugin");
        // scripts/test.sh runs the element tests a second time under GStreamer's leaks tracer
        // (GST_TRACERS=leaks): the tracer checks what is still alive when GStreamer is
        // deinitialised, so the process does that when it exits, after every test, and exits
        // with status 1 when the tracer reports a leak (its GLib warning "Leaks detected", no log domain).
        if std::env::var_os("NLM_TEST_DEINIT_AT_EXIT").is_some() {
            extern "C" {
                fn atexit(f: extern "C" fn()) -> i32;
                fn _exit(status: i32) -> !;
            }
            static LEAKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            extern "C" fn deinit() {
                // A failed test can leave a pipeline running (its streaming thread blocked), and
                // gst_deinit then waits for it forever: a watchdog ends the process instead.
                std::thread::spawn(|| {
                    std::thread::sleep(std::time::Duration::from_secs(60));
                    eprintln!("gst::deinit did not return within 60 s: a pipeline is still running (after a failed test?)");
                    // SAFETY: ends the process at once; the exit handlers are running already.
                    unsafe { _exit(1) };
                });
                gst::glib::log_set_handler(None, gst::glib::LogLevels::LEVEL_WARNING, false, false, |_, _, message| {
                    if message.contains("Leaks detected") {
                        LEAKED.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    eprintln!("GStreamer: {message}");
                });
                // SAFETY: at exit every test has returned and dropped its pipelines and
                // harnesses; nothing uses GStreamer after this.
                unsafe { gst::deinit() };
                if LEAKED.load(std::sync::atomic::Ordering::SeqCst) {
                    eprintln!("the leaks tracer found objects alive at exit (GST_DEBUG=GST_TRACER:7 lists them)");
                    // SAFETY: ends the process at once, as exit() must not be called again.
                    unsafe { _exit(1) };
                }
            }
            // SAFETY: registering a plain function with the C library.
            assert_eq!(unsafe { atexit(deinit) }, 0);
        }
    });
}

/// A bus set on `element` for a test to read. On drop the element lets go of it and the messages
/// left on it are dropped: a message holds its source element, and the element holds its bus, a
/// cycle the leaks tracer reports (a pipeline's bus is flushed when it stops; a bare one is not).
pub struct TestBus {
    bus: gst::Bus,
    element: gst::glib::WeakRef<gst::Element>,
}

impl std::ops::Deref for TestBus {
    type Target = gst::Bus;
    fn deref(&self) -> &gst::Bus {
        &self.bus
    }
}

impl Drop for TestBus {
    fn drop(&mut self) {
        if let Some(e) = self.element.upgrade() {
            e.set_bus(None);
        }
        self.bus.set_flushing(true);
    }
}

pub fn test_bus(element: &gst::Element) -> TestBus {
    let bus = gst::Bus::new();
    element.set_bus(Some(&bus));
    TestBus { bus, element: element.downgrade() }
}

pub fn gst_format(format: PixelFormat) -> gst_video::VideoFormat {
    let f = gst_video::VideoFormat::from_string(format.name());
    assert_ne!(f, gst_video::VideoFormat::Unknown, "{format} has no GStreamer name");
    f
}

pub fn caps(format: PixelFormat, width: i32, height: i32, fps: (i32, i32)) -> gst::Caps {
    init();
    gst_video::VideoCapsBuilder::new().format(gst_format(format)).width(width).height(height).framerate(gst::Fraction::new(fps.0, fps.1)).build()
}

pub fn video_info(caps: &gst::Caps) -> gst_video::VideoInfo {
    gst_video::VideoInfo::from_caps(caps).expect("valid caps")
}

/// Parameters small enough for the reference-speed CPU backend; strengths high enough to change
/// every frame visibly.
pub fn small_params() -> Params {
    Params { search_radius: 2, patch_radius: 1, temporal_past: 2, temporal_future: 0, strength: 25.0, chroma_strength: 20.0, ..Params::default() }
}

/// A harness around a fresh `nlmdenoise` on the CPU backend with `params`.
pub fn harness(params: &Params) -> Harness {
    init();
    let mut h = Harness::new("nlmdenoise");
    {
        let e = h.element().expect("element");
        e.set_property_from_str("backend", "cpu");
        e.set_property("search-radius", params.search_radius);
        e.set_property("patch-radius", params.patch_radius);
        e.set_property("temporal-past", params.temporal_past);
        e.set_property("temporal-future", params.temporal_future);
        e.set_property("strength", params.strength);
        e.set_property("chroma-strength", params.chroma_strength);
        e.set_property("wref", params.wref);
        e.set_property_from_str("weighting", params.weighting.as_str());
        e.set_property_from_str("chroma-mode", params.chroma_mode.as_str());
        e.set_property_from_str("planes", params.planes.as_str());
        e.set_property("sigma", params.sigma.unwrap_or(-1.0));
    }
    h.play();
    h
}

/// Deterministic noisy content: a gradient plus pseudo-random noise, valid for the format's bit
/// depth. `seed` selects the frame.
pub fn make_buffer(info: &gst_video::VideoInfo, format: PixelFormat, seed: u64) -> gst::Buffer {
    let mut data = vec![0u8; info.size()];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for (i, b) in data.iter_mut().enumerate() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let noise = (x % 61) as i32 - 30;
        *b = ((i % 97) as i32 * 2 + 30 + noise).clamp(0, 255) as u8;
    }
    if matches!(format, PixelFormat::I420_10LE | PixelFormat::I422_10LE) {
        // 10 significant bits in each little-endian word.
        for w in data.chunks_exact_mut(2) {
            w[1] &= 0x03;
        }
    }
    gst::Buffer::from_mut_slice(data)
}

pub fn with_meta(mut buf: gst::Buffer, index: u64, flags: gst::BufferFlags) -> gst::Buffer {
    let b = buf.make_mut();
    b.set_pts(gst::ClockTime::from_mseconds(40 * index));
    b.set_dts(gst::ClockTime::from_mseconds(40 * index));
    b.set_duration(gst::ClockTime::from_mseconds(40));
    b.set_offset(index);
    b.set_offset_end(index + 1);
    b.set_flags(flags);
    buf
}

/// The engine's view of a default-layout GStreamer buffer, built from the VideoInfo offsets and
/// strides (independently of the element's VideoFrame mapping).
pub fn engine_frame<'a>(info: &gst_video::VideoInfo, format: PixelFormat, data: &'a [u8]) -> FrameRef<'a> {
    let n = info.n_planes() as usize;
    let planes: Vec<&[u8]> = (0..n).map(|p| &data[info.offset()[p]..]).collect();
    let strides: Vec<usize> = (0..n).map(|p| info.stride()[p] as usize).collect();
    let einfo = nlmdenoise::VideoInfo::new(format, info.width() as usize, info.height() as usize).unwrap();
    FrameRef::new(einfo, &planes, &strides).expect("engine accepts the GStreamer layout")
}

/// The engine on the CPU backend, as the element should run it.
pub fn engine(format: PixelFormat, info: &gst_video::VideoInfo, params: &Params) -> Denoiser<usize> {
    let einfo = nlmdenoise::VideoInfo::new(format, info.width() as usize, info.height() as usize).unwrap();
    Denoiser::new(einfo, *params, &BackendOptions { kind: BackendKind::Cpu, ..BackendOptions::default() }).expect("engine")
}

pub fn engine_push(d: &mut Denoiser<usize>, info: &gst_video::VideoInfo, format: PixelFormat, buf: &gst::Buffer, tag: usize) {
    let map = buf.map_readable().unwrap();
    d.push(&engine_frame(info, format, map.as_slice()), tag).unwrap();
}

/// Pops every ready engine output.
pub fn engine_pop_all(d: &mut Denoiser<usize>) -> Vec<(usize, OwnedFrame)> {
    let mut out = Vec::new();
    loop {
        let mut f = OwnedFrame::new(d.output_info());
        match d.pop(&mut f.as_mut()).unwrap() {
            Some(tag) => out.push((tag, f)),
            None => return out,
        }
    }
}

/// Runs `frames` through a fresh engine (then `finish_stream`) and returns the outputs in order.
pub fn engine_run(format: PixelFormat, info: &gst_video::VideoInfo, params: &Params, frames: &[gst::Buffer]) -> Vec<OwnedFrame> {
    let mut d = engine(format, info, params);
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        engine_push(&mut d, info, format, f, i);
        out.extend(engine_pop_all(&mut d));
    }
    d.finish_stream().unwrap();
    out.extend(engine_pop_all(&mut d));
    assert!(out.iter().enumerate().all(|(i, (tag, _))| *tag == i), "engine outputs in order");
    out.into_iter().map(|(_, f)| f).collect()
}

/// The visible samples of each memory plane of a buffer (row padding removed).
pub fn buffer_planes(buf: &gst::Buffer, info: &gst_video::VideoInfo, format: PixelFormat) -> Vec<Vec<u8>> {
    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buf.as_ref(), info).expect("map output");
    let fi = format.info();
    let (w, h) = (info.width() as usize, info.height() as usize);
    (0..fi.memory_planes)
        .map(|p| {
            let stride = frame.plane_stride()[p] as usize;
            let data = frame.plane_data(p as u32).unwrap();
            let row = fi.memory_plane_row_bytes(p, w);
            (0..fi.memory_plane_rows(p, h)).flat_map(|r| data[r * stride..r * stride + row].iter().copied()).collect()
        })
        .collect()
}

pub fn owned_planes(f: &OwnedFrame) -> Vec<Vec<u8>> {
    let fi = f.info.format.info();
    (0..fi.memory_planes)
        .map(|p| {
            let row = fi.memory_plane_row_bytes(p, f.info.width);
            (0..fi.memory_plane_rows(p, f.info.height)).flat_map(|r| f.planes[p][r * f.strides[p]..r * f.strides[p] + row].iter().copied()).collect()
        })
        .collect()
}

#[track_caller]
pub fn assert_matches_engine(buf: &gst::Buffer, info: &gst_video::VideoInfo, format: PixelFormat, expected: &OwnedFrame, what: &str) {
    let got = buffer_planes(buf, info, format);
    let want = owned_planes(expected);
    for (p, (g, w)) in got.iter().zip(&want).enumerate() {
        if g != w {
            let first = g.iter().zip(w).position(|(a, b)| a != b).unwrap_or(0);
            panic!("{what}: {format} plane {p} differs from the engine's output at byte {first}: {} vs {}", g[first], w[first]);
        }
    }
}

/// Pulls every buffer the harness holds.
pub fn pull_all(h: &mut Harness) -> Vec<gst::Buffer> {
    let mut v = Vec::new();
    while let Some(b) = h.try_pull() {
        v.push(b);
    }
    v
}
