//! Frames in CUDA memory (`video/x-raw(memory:CUDAMemory)`) through both elements.
//!
//! Everywhere (CI included): where CUDA memory is unavailable (no NVIDIA driver or GPU, or no
//! libgstcuda), the pad templates still list it, but caps queries leave it out, so a pipeline that
//! forces CUDA memory into the element fails to link (auto-plugging then picks another path) and
//! system memory works as before.
//!
//! On a GPU with GStreamer's nvcodec plugin (cudaupload, cudadownload): the same frames through
//! `cudaupload ! element ! cudadownload` and through system memory are identical, for NLM with a
//! fixed and an estimated strength, BM3D, `nlmupscale`, NV12 and I420, the CUDA backend (frames
//! copied on the GPU) and the CPU backend (through the memory's host mapping); the element's CUDA
//! context is the pipeline's (cudaupload takes it: one context offered in the whole pipeline);
//! end of stream with frames held for future references, and a caps change mid-stream, lose
//! nothing. Without them every GPU test prints "SKIPPED" and passes.

mod common;

use gst::prelude::*;
use gst_video::prelude::*;
use rand::{Rng, SeedableRng};

fn cuda_usable() -> bool {
    nlmdenoise::device::cuda::available()
}

fn skip(test: &str, why: &str) {
    println!("SKIPPED: {test}: {why}");
    eprintln!("SKIPPED: {test}: {why}");
    if let Some(path) = std::env::var_os("NLMDENOISE_TEST_SKIP_LOG") {
        use std::io::Write;
        // One write per line: tests skip from several threads at once (tests/common/mod.rs).
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(format!("{test}: {why}\n").as_bytes());
        }
    }
}

/// True when the GPU tests can run (a GPU, and nvcodec's cudaupload); else reports the skip.
fn gpu_pipeline_or_skip(test: &str) -> bool {
    common::init();
    if !cuda_usable() {
        skip(test, "no usable CUDA device/driver/NVRTC");
        return false;
    }
    if gst::ElementFactory::find("cudaupload").is_none() || gst::ElementFactory::find("cudadownload").is_none() {
        skip(test, "GStreamer's nvcodec plugin (cudaupload/cudadownload) is not installed");
        return false;
    }
    true
}

fn has_cuda_structure(caps: &gst::Caps) -> bool {
    caps.iter_with_features().any(|(_, f)| f.contains("memory:CUDAMemory"))
}

#[test]
fn without_cuda_memory_caps_queries_leave_it_out() {
    common::init();
    if cuda_usable() {
        skip("without_cuda_memory_caps_queries_leave_it_out", "a GPU is present (the GPU tests cover it)");
        return;
    }
    for name in ["nlmdenoise", "nlmupscale"] {
        let element = gst::ElementFactory::make(name).build().unwrap();
        let sink = element.static_pad("sink").unwrap();
        let src = element.static_pad("src").unwrap();
        assert!(has_cuda_structure(&sink.pad_template_caps()), "{name}: the template lists CUDA memory");
        assert!(!has_cuda_structure(&sink.query_caps(None)), "{name}: sink caps offer CUDA memory without a GPU: {}", sink.query_caps(None));
        assert!(!has_cuda_structure(&src.query_caps(None)), "{name}: src caps offer CUDA memory without a GPU");
        let cuda =
            gst::Caps::builder("video/x-raw").features(["memory:CUDAMemory"]).field("format", "NV12").field("width", 64).field("height", 48).field("framerate", gst::Fraction::new(25, 1)).build();
        assert!(!sink.query_accept_caps(&cuda), "{name}: accepts CUDA memory without a GPU");
        let system = gst::Caps::builder("video/x-raw").field("format", "NV12").field("width", 64).field("height", 48).field("framerate", gst::Fraction::new(25, 1)).build();
        assert!(sink.query_accept_caps(&system), "{name}: refuses system memory");
    }
}

#[test]
fn without_cuda_memory_a_forced_cuda_pipeline_does_not_link() {
    common::init();
    if cuda_usable() {
        skip("without_cuda_memory_a_forced_cuda_pipeline_does_not_link", "a GPU is present");
        return;
    }
    // FATAL_ERRORS: no half-linked pipeline comes back with the error (it would leak).
    let r = gst::parse::launch_full("videotestsrc num-buffers=3 ! video/x-raw(memory:CUDAMemory),format=NV12,width=64,height=48 ! nlmdenoise ! fakesink", None, gst::ParseFlags::FATAL_ERRORS);
    assert!(r.is_err(), "linked CUDA memory into nlmdenoise without a GPU");
    // System memory still runs.
    let p = gst::parse::launch("videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=64,height=48 ! nlmdenoise ! fakesink").unwrap();
    let bus = p.bus().unwrap();
    p.set_state(gst::State::Playing).unwrap();
    let msg = bus.timed_pop_filtered(gst::ClockTime::from_seconds(60), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("a message");
    p.set_state(gst::State::Null).unwrap();
    assert_eq!(msg.type_(), gst::MessageType::Eos, "{msg:?}");
}

/// What a pipeline run returned: each output frame's rows (without padding), and the
/// "gst.cuda.context" have-context messages posted (by which element).
struct Run {
    frames: Vec<Vec<u8>>,
    context_offers: Vec<String>,
    sink_caps: Option<gst::Caps>,
    /// At the element's last CUDA input buffer (as it arrives): the `GstCudaContext` its memory
    /// belongs to, and the one the element answers a context query with (addresses).
    contexts: Option<(usize, usize)>,
}

/// The start of `GstCudaMemory` (gstcudamemory.h, 1.22 to 1.26): its memory and context.
#[repr(C)]
struct CudaMemoryHead {
    mem: gst::ffi::GstMemory,
    context: *mut gst::ffi::GstObject,
}

/// The `GstCudaContext` of a buffer's first memory, if it is CUDA memory.
fn buffer_context(buffer: &gst::BufferRef) -> Option<usize> {
    let mem = buffer.peek_memory(0);
    if !mem.is_type("gst.cuda.memory") {
        return None;
    }
    // SAFETY: a "gst.cuda.memory" memory is a GstCudaMemory, whose layout starts as above.
    Some(unsafe { (*(mem.as_ptr() as *const CudaMemoryHead)).context } as usize)
}

/// The `GstCudaContext` `element` answers a "gst.cuda.context" query with.
fn element_context(element: &gst::Element) -> Option<usize> {
    let mut q = gst::query::Context::new("gst.cuda.context");
    if !element.static_pad("src")?.query(&mut q) {
        return None;
    }
    let context = q.context_owned()?;
    let obj = context.structure().get::<gst::Object>("gst.cuda.context").ok()?;
    Some(obj.as_ptr() as usize)
}

/// Pushes `frames` (each `caps`' default layout) through `middle` (a gst-launch fragment between
/// `appsrc name=src` and `appsink name=out`); `caps2`/`frames2` follow after a caps change.
fn run(middle: &str, caps: &gst::Caps, frames: &[Vec<u8>], then: Option<(&gst::Caps, &[Vec<u8>])>) -> Run {
    let buffers: Vec<gst::Buffer> = frames.iter().map(|f| gst::Buffer::from_slice(f.clone())).collect();
    let then_buffers = then.map(|(c, f)| (c, f.iter().map(|f| gst::Buffer::from_slice(f.clone())).collect::<Vec<_>>()));
    run_buffers(middle, caps, &buffers, then_buffers.as_ref().map(|(c, b)| (*c, b.as_slice())), None)
}

/// [`run`] with buffers made beforehand (pushed as shallow copies, timestamps set).
/// `flush_at`: before the element's input buffer of that index, a flush (flush-start,
/// flush-stop, a new segment) goes into the element.
fn run_buffers(middle: &str, caps: &gst::Caps, frames: &[gst::Buffer], then: Option<(&gst::Caps, &[gst::Buffer])>, flush_at: Option<usize>) -> Run {
    let desc = format!("appsrc name=src format=time ! {middle} ! appsink name=out sync=false");
    let pipeline = gst::parse::launch(&desc).unwrap().downcast::<gst::Pipeline>().unwrap();
    let src = pipeline.by_name("src").unwrap().downcast::<gst_app::AppSrc>().unwrap();
    let out = pipeline.by_name("out").unwrap().downcast::<gst_app::AppSink>().unwrap();
    let offers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let bus = pipeline.bus().unwrap();
    {
        let offers = offers.clone();
        bus.set_sync_handler(move |_, msg| {
            if let gst::MessageView::HaveContext(c) = msg.view() {
                if c.context().context_type() == "gst.cuda.context" {
                    offers.lock().unwrap().push(msg.src().map(|s| s.name().to_string()).unwrap_or_default());
                }
            }
            gst::BusSyncReply::Pass
        });
    }
    let contexts = std::sync::Arc::new(std::sync::Mutex::new(None));
    if let Some(element) = pipeline.by_name("dn") {
        let contexts = contexts.clone();
        let weak = element.downgrade();
        element.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            let (Some(buffer), Some(element)) = (info.buffer(), weak.upgrade()) else { return gst::PadProbeReturn::Ok };
            match buffer_context(buffer) {
                Some(theirs) => {
                    // Kept for the last buffer (the element may adopt the buffers' context at
                    // the first one).
                    *contexts.lock().unwrap() = Some((theirs, element_context(&element).unwrap_or(0)));
                    gst::PadProbeReturn::Ok
                }
                None => gst::PadProbeReturn::Ok,
            }
        });
    }
    if let (Some(at), Some(element)) = (flush_at, pipeline.by_name("dn")) {
        let seen = std::sync::atomic::AtomicUsize::new(0);
        element.static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |pad, _| {
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == at {
                pad.send_event(gst::event::FlushStart::new());
                pad.send_event(gst::event::FlushStop::new(true));
                pad.send_event(gst::event::Segment::new(&gst::FormattedSegment::<gst::ClockTime>::new()));
            }
            gst::PadProbeReturn::Ok
        });
    }
    let collected = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let collected = collected.clone();
        out.set_callbacks(
            gst_app::AppSinkCallbacks::builder()
                .new_sample(move |sink| {
                    let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                    let info = gst_video::VideoInfo::from_caps(sample.caps().unwrap()).unwrap();
                    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(sample.buffer().unwrap(), &info).unwrap();
                    let mut rows = Vec::new();
                    for p in 0..frame.n_planes() {
                        let fi = info.format_info();
                        let h = fi.scale_height(p as u8, info.height()) as usize;
                        let w = fi.scale_width(p as u8, info.width()) as usize * fi.pixel_stride()[p as usize] as usize;
                        let stride = frame.plane_stride()[p as usize] as usize;
                        let data = frame.plane_data(p).unwrap();
                        for r in 0..h {
                            rows.extend_from_slice(&data[r * stride..r * stride + w]);
                        }
                    }
                    collected.lock().unwrap().push(rows);
                    Ok(gst::FlowSuccess::Ok)
                })
                .build(),
        );
    }
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut pts = 0;
    let mut push = |caps: &gst::Caps, frames: &[gst::Buffer]| {
        src.set_caps(Some(caps));
        for f in frames {
            let mut b = f.copy();
            {
                let b = b.get_mut().unwrap();
                b.set_pts(gst::ClockTime::from_mseconds(40 * pts));
                b.set_duration(gst::ClockTime::from_mseconds(40));
            }
            pts += 1;
            src.push_buffer(b).unwrap();
        }
    };
    push(caps, frames);
    if let Some((c, f)) = then {
        push(c, f);
    }
    src.end_of_stream().unwrap();
    let msg = bus.timed_pop_filtered(gst::ClockTime::from_seconds(120), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("a message");
    let element = pipeline.by_name("dn");
    let sink_caps = element.and_then(|e| e.static_pad("sink")).and_then(|p| p.current_caps());
    pipeline.set_state(gst::State::Null).unwrap();
    bus.unset_sync_handler();
    assert_eq!(msg.type_(), gst::MessageType::Eos, "{desc}: {msg:?}");
    let frames = std::mem::take(&mut *collected.lock().unwrap());
    let context_offers = offers.lock().unwrap().clone();
    let contexts = *contexts.lock().unwrap();
    Run { frames, context_offers, sink_caps, contexts }
}

fn caps(format: &str, w: i32, h: i32) -> gst::Caps {
    gst::Caps::builder("video/x-raw").field("format", format).field("width", w).field("height", h).field("framerate", gst::Fraction::new(25, 1)).build()
}

fn random_frames(caps: &gst::Caps, n: usize, seed: u64) -> Vec<Vec<u8>> {
    let info = gst_video::VideoInfo::from_caps(caps).unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            // A smooth picture with noise, so that the denoisers do something.
            let mut v = vec![0u8; info.size()];
            for (i, b) in v.iter_mut().enumerate() {
                *b = (((i % 97) as i32 * 2) + rng.random_range(-20..20)).clamp(0, 255) as u8;
            }
            v
        })
        .collect()
}

/// `element` through CUDA memory (cudaupload ! element ! cudadownload) and through system memory:
/// same frames, the element's input negotiated in CUDA memory, one CUDA context offered.
fn same_in_cuda_and_system(test: &str, element: &str, format: &str, w: i32, h: i32, n: usize) {
    let c = caps(format, w, h);
    let frames = random_frames(&c, n, 0xC0DA);
    let system = run(&format!("{element} name=dn"), &c, &frames, None);
    let cuda = run(&format!("cudaupload ! video/x-raw(memory:CUDAMemory) ! {element} name=dn ! cudadownload"), &c, &frames, None);
    assert_eq!(system.frames.len(), n, "{test}: system memory lost frames");
    assert_eq!(cuda.frames.len(), n, "{test}: CUDA memory lost frames");
    let sink_caps = cuda.sink_caps.expect("negotiated");
    assert!(has_cuda_structure(&sink_caps), "{test}: the element's input is not CUDA memory: {sink_caps}");
    for (i, (a, b)) in system.frames.iter().zip(&cuda.frames).enumerate() {
        assert!(a == b, "{test}: frame {i} differs between CUDA and system memory");
    }
    assert!(cuda.context_offers.len() <= 1, "{test}: several CUDA contexts offered: {:?}", cuda.context_offers);
    // Across memories: CUDA in, system out (the engine's output comes to the host), and system
    // in, CUDA out.
    let cuda_in = run(&format!("cudaupload ! video/x-raw(memory:CUDAMemory) ! {element} ! video/x-raw"), &c, &frames, None);
    let cuda_out = run(&format!("{element} ! video/x-raw(memory:CUDAMemory) ! cudadownload"), &c, &frames, None);
    assert!(system.frames == cuda_in.frames, "{test}: CUDA in, system out differs");
    assert!(system.frames == cuda_out.frames, "{test}: system in, CUDA out differs");
    let (theirs, ours) = cuda.contexts.expect("a CUDA buffer reached the element");
    assert_eq!(theirs, ours, "{test}: cudaupload's buffers are not in the element's CUDA context");
    eprintln!("{test}: {n} frames identical; context offered by {:?}", cuda.context_offers);
}

#[test]
fn cuda_memory_nlm_matches_system_memory() {
    if !gpu_pipeline_or_skip("cuda_memory_nlm_matches_system_memory") {
        return;
    }
    for format in ["NV12", "I420"] {
        same_in_cuda_and_system("nlm fixed", "nlmdenoise backend=cuda sigma=10 temporal-past=1 temporal-future=1", format, 320, 240, 12);
        same_in_cuda_and_system("nlm estimated", "nlmdenoise backend=cuda temporal-past=2 temporal-future=0", format, 320, 240, 40);
        same_in_cuda_and_system("nlm pipelined", "nlmdenoise backend=cuda sigma=8 pipeline-depth=2", format, 96, 54, 9);
    }
}

#[test]
fn cuda_memory_bm3d_and_upscale_match_system_memory() {
    if !gpu_pipeline_or_skip("cuda_memory_bm3d_and_upscale_match_system_memory") {
        return;
    }
    same_in_cuda_and_system("bm3d", "nlmdenoise backend=cuda algorithm=bm3d bm3d-profile=fast sigma=15 temporal-past=1", "NV12", 320, 240, 6);
    same_in_cuda_and_system("upscale", "nlmupscale backend=cuda scale=2", "NV12", 160, 120, 6);
    same_in_cuda_and_system("upscale i420", "nlmupscale backend=cuda scale=2", "I420", 160, 120, 6);
}

#[test]
fn cuda_memory_on_the_cpu_backend_goes_through_the_host() {
    if !gpu_pipeline_or_skip("cuda_memory_on_the_cpu_backend_goes_through_the_host") {
        return;
    }
    same_in_cuda_and_system("cpu backend", "nlmdenoise backend=cpu sigma=10 temporal-past=1", "NV12", 160, 120, 6);
}

#[test]
fn cuda_memory_caps_change_and_held_frames_lose_nothing() {
    if !gpu_pipeline_or_skip("cuda_memory_caps_change_and_held_frames_lose_nothing") {
        return;
    }
    let (a, b) = (caps("NV12", 320, 240), caps("NV12", 160, 120));
    let (fa, fb) = (random_frames(&a, 7, 1), random_frames(&b, 5, 2));
    let element = "nlmdenoise backend=cuda sigma=10 temporal-past=1 temporal-future=2 name=dn";
    let system = run(element, &a, &fa, Some((&b, &fb)));
    let cuda = run(&format!("cudaupload ! video/x-raw(memory:CUDAMemory) ! {element} ! cudadownload"), &a, &fa, Some((&b, &fb)));
    assert_eq!(cuda.frames.len(), 12, "frames lost at the caps change or at EOS");
    assert!(system.frames == cuda.frames, "frames differ around a caps change in CUDA memory");
}

/// `frames` uploaded by a cudaupload of a pipeline of their own, in the CUDA context it makes
/// for itself (not the one the element offers; as frames of a decoder started before the element,
/// or an application's, would be).
fn upload_in_own_context(caps: &gst::Caps, frames: &[Vec<u8>]) -> Vec<gst::Buffer> {
    let p = gst::parse::launch("appsrc name=src format=time ! cudaupload ! video/x-raw(memory:CUDAMemory) ! appsink name=out sync=false").unwrap().downcast::<gst::Pipeline>().unwrap();
    let src = p.by_name("src").unwrap().downcast::<gst_app::AppSrc>().unwrap();
    let out = p.by_name("out").unwrap().downcast::<gst_app::AppSink>().unwrap();
    src.set_caps(Some(caps));
    p.set_state(gst::State::Playing).unwrap();
    let mut made = Vec::new();
    for f in frames {
        src.push_buffer(gst::Buffer::from_slice(f.clone())).unwrap();
        made.push(out.pull_sample().unwrap().buffer_owned().unwrap());
    }
    p.set_state(gst::State::Null).unwrap();
    made
}

#[test]
fn the_element_adopts_the_context_of_its_input() {
    if !gpu_pipeline_or_skip("the_element_adopts_the_context_of_its_input") {
        return;
    }
    let c = caps("NV12", 320, 240);
    let frames = random_frames(&c, 8, 0xAD0);
    let uploaded = upload_in_own_context(&c, &frames);
    let foreign = buffer_context(&uploaded[0]).expect("CUDA memory");
    let mut cuda_caps = c.clone();
    cuda_caps.make_mut().set_features_simple(Some(gst::CapsFeatures::new(["memory:CUDAMemory"])));
    let element = "nlmdenoise backend=cuda sigma=10 temporal-past=1 temporal-future=1 name=dn";
    let system = run(element, &c, &frames, None);
    let cuda = run_buffers(&format!("{element} ! cudadownload"), &cuda_caps, &uploaded, None, None);
    assert_eq!(cuda.frames.len(), 8, "frames lost adopting the input's context");
    assert!(system.frames == cuda.frames, "frames differ after adopting the input's context");
    let (theirs, ours) = cuda.contexts.expect("CUDA buffers reached the element");
    assert_eq!(theirs, foreign);
    assert_eq!(ours, theirs, "the element did not adopt its input's CUDA context");
}

#[test]
fn cuda_memory_flush_mid_window_matches_system_memory() {
    if !gpu_pipeline_or_skip("cuda_memory_flush_mid_window_matches_system_memory") {
        return;
    }
    let c = caps("NV12", 320, 240);
    let frames: Vec<gst::Buffer> = random_frames(&c, 10, 0xF1).into_iter().map(gst::Buffer::from_slice).collect();
    let element = "nlmdenoise backend=cuda sigma=10 temporal-past=1 temporal-future=2 pipeline-depth=1 name=dn";
    let system = run_buffers(element, &c, &frames, None, Some(5));
    let cuda = run_buffers(&format!("cudaupload ! video/x-raw(memory:CUDAMemory) ! {element} ! cudadownload"), &c, &frames, None, Some(5));
    // Frames held in the window at the flush are dropped (by definition), the same either way.
    assert!(system.frames.len() < 10 && system.frames.len() >= 5, "{} frames out of 10 around a flush", system.frames.len());
    assert!(system.frames == cuda.frames, "a flush mid-window in CUDA memory gives other frames ({} against {})", cuda.frames.len(), system.frames.len());
}
