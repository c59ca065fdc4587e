//! Frames per second through GStreamer: `appsrc ! nlmdenoise ! fakesink` with pre-made frames, so
//! that neither frame generation nor display limits the rate.
//!
//! usage: pipeline_bench WIDTH HEIGHT FRAMES [element=NAME] [format=FORMAT] [source=pool|cuda] [ELEMENT PROPERTIES...]
//!        pipeline_bench decode=FILE.h264 [element=NAME] [ELEMENT PROPERTIES...]
//! e.g.   pipeline_bench 1920 1080 3000 backend=cuda temporal-past=2 search-radius=3 patch-radius=2
//!        pipeline_bench 960 540 1000 element=nlmupscale backend=cuda scale=2
//! (`element` picks the plugin's element, default nlmdenoise; `source=pool`: after the first
//! frame the source writes each frame into a buffer of the pool the element proposes, as a
//! decoder would, instead of pushing buffers of its own; `format`: the caps' format, default
//! I420, e.g. NV12 or P010_10LE; `source=cuda`: the frames are made once in CUDA memory
//! (`cudaupload`, GStreamer's nvcodec plugin) and pushed as `memory:CUDAMemory`, so that the
//! element copies them on the GPU: what a GPU decoder upstream costs at most, without the
//! decoder. `decode=FILE`: an H.264 elementary stream decoded on the GPU, `filesrc ! h264parse !
//! nvh264dec ! ELEMENT ! cudadownload ! fakesink`, against the same without the element.)
//!
//! Prints one table row for the pipeline with the element and one for the same pipeline without it
//! (`appsrc ! fakesink`), so the cost of the pipeline itself is visible.

use std::time::Instant;

use gst::prelude::*;

#[path = "common/source.rs"]
mod source;
use source::{fill_from_pool, noisy_i420, proposed_pool};

const DISTINCT_FRAMES: usize = 8;

/// The source thread's time making its buffers (writing them into the pool with `source=pool`).
static SOURCE_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Waits for the end of the stream; the error's text when it ended in one.
fn wait_for_end(bus: &gst::Bus) -> Option<String> {
    for msg in bus.iter_timed(gst::ClockTime::NONE) {
        match msg.view() {
            gst::MessageView::Eos(..) => return None,
            gst::MessageView::Error(e) => return Some(format!("{} ({:?})", e.error(), e.debug())),
            _ => {}
        }
    }
    None
}

fn run(format: &str, width: usize, height: usize, frames: usize, element: Option<(&str, &str)>) -> anyhow::Result<f64> {
    run_from(format, width, height, frames, element, Source::Own)
}

/// Where the source's buffers come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Buffers of its own (system memory).
    Own,
    /// After the first frame, the pool the element proposes.
    Pool,
    /// Buffers in CUDA memory made once (`cudaupload`).
    Cuda,
}

/// The templates uploaded into CUDA memory once: `appsrc ! cudaupload ! nlmdenoise sigma=0 !
/// appsink` (the element, passing frames through, only offers the GPU's primary context, which
/// cudaupload then uploads into, as a decoder after it would).
fn cuda_templates(caps: &gst::Caps, templates: &[gst::Buffer]) -> anyhow::Result<Vec<gst::Buffer>> {
    let pipeline = gst::parse::launch("appsrc name=src format=time ! cudaupload ! video/x-raw(memory:CUDAMemory) ! nlmdenoise sigma=0 ! appsink name=out sync=false")?
        .downcast::<gst::Pipeline>()
        .map_err(|_| anyhow::anyhow!("not a pipeline"))?;
    let src = pipeline.by_name("src").unwrap().downcast::<gst_app::AppSrc>().map_err(|_| anyhow::anyhow!("not an appsrc"))?;
    let out = pipeline.by_name("out").unwrap().downcast::<gst_app::AppSink>().map_err(|_| anyhow::anyhow!("not an appsink"))?;
    src.set_caps(Some(caps));
    pipeline.set_state(gst::State::Playing)?;
    let mut made = Vec::new();
    for t in templates {
        src.push_buffer(t.copy())?;
        let sample = out.pull_sample()?;
        made.push(sample.buffer_owned().ok_or_else(|| anyhow::anyhow!("no buffer"))?);
    }
    pipeline.set_state(gst::State::Null)?;
    Ok(made)
}

/// `filesrc location=FILE ! h264parse ! nvh264dec ! [ELEMENT !] cudadownload ! fakesink`:
/// frames, and frames per second from the first frame at the sink to the last.
fn run_decode(file: &str, element: Option<(&str, &str)>) -> anyhow::Result<(u64, f64)> {
    let middle = element.map(|(name, props)| format!("{name} name=nlm {props} ! ")).unwrap_or_default();
    let desc = format!("filesrc location={file} ! h264parse ! nvh264dec ! {middle}cudadownload ! fakesink name=sink sync=false");
    let pipeline = gst::parse::launch(&desc)?.downcast::<gst::Pipeline>().map_err(|_| anyhow::anyhow!("not a pipeline"))?;
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let caps_seen = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    if let Some(pad) = pipeline.by_name("nlm").and_then(|e| e.static_pad("sink")) {
        let caps_seen = caps_seen.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |pad, _| {
            *caps_seen.lock().unwrap() = pad.current_caps().map(|c| c.to_string());
            gst::PadProbeReturn::Remove
        });
    }
    // The rate between the first and the last frame at the sink: steady state, without the
    // pipeline's start (the decoder's and the element's set-up).
    let times = std::sync::Arc::new(std::sync::Mutex::new((None::<Instant>, None::<Instant>)));
    {
        let count = count.clone();
        let times = times.clone();
        pipeline.by_name("sink").unwrap().static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut t = times.lock().unwrap();
            let now = Instant::now();
            t.0.get_or_insert(now);
            t.1 = Some(now);
            gst::PadProbeReturn::Ok
        });
    }
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing)?;
    let error = wait_for_end(&bus);
    pipeline.set_state(gst::State::Null)?;
    if let Some(e) = error {
        anyhow::bail!("pipeline error: {e}");
    }
    let (first, last) = *times.lock().unwrap();
    let secs = match (first, last) {
        (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
        _ => anyhow::bail!("fewer than two frames reached the sink"),
    };
    if let Some(c) = caps_seen.lock().unwrap().as_ref() {
        eprintln!("element input caps: {c}");
    }
    let n = count.load(std::sync::atomic::Ordering::Relaxed);
    Ok((n, (n - 1) as f64 / secs))
}

fn decode_main(file: &str, name: &str, props: &str) -> anyhow::Result<()> {
    // Warm-up: kernels compiled, the decoder's first start.
    run_decode(file, Some((name, props)))?;
    let mut rows = Vec::new();
    for rep in 0..2 {
        let (n0, without) = run_decode(file, None)?;
        reset_counters();
        let (n, with) = run_decode(file, Some((name, props)))?;
        let breakdown = per_frame_breakdown(n as usize, with);
        rows.push(format!("| #{} | {n} | {with:.1} | {without:.1} ({n0} frames) | {:.1}% |", rep + 1, 100.0 * with / without));
        if rep == 1 {
            println!("| run | frames | filesrc ! h264parse ! nvh264dec ! {name} {props} ! cudadownload ! fakesink, frames/s | the same without {name} | ratio |");
            println!("|---|---:|---:|---:|---:|");
            for r in &rows {
                println!("{r}");
            }
            println!();
            println!("{breakdown}");
        }
    }
    Ok(())
}

/// `from_pool`: after the first frame, the source writes every frame into a buffer of the pool
/// the element proposes (when it proposes one), as a decoder or camera source would.
fn run_from(format: &str, width: usize, height: usize, frames: usize, element: Option<(&str, &str)>, source: Source) -> anyhow::Result<f64> {
    let from_pool = source == Source::Pool;
    let middle = element.map(|(name, props)| format!("{name} name=nlm {props} ! ")).unwrap_or_default();
    let desc = format!("appsrc name=src format=time block=true max-bytes=200000000 ! {middle}fakesink name=sink sync=false");
    let pipeline = gst::parse::launch(&desc)?.downcast::<gst::Pipeline>().map_err(|_| anyhow::anyhow!("not a pipeline"))?;
    let src = pipeline.by_name("src").unwrap().downcast::<gst_app::AppSrc>().map_err(|_| anyhow::anyhow!("not an appsrc"))?;
    let caps = gst::Caps::builder("video/x-raw").field("format", format).field("width", width as i32).field("height", height as i32).field("framerate", gst::Fraction::new(60, 1)).build();
    src.set_caps(Some(&caps));
    let size = gst_video::VideoInfo::from_caps(&caps)?.size();
    let mut templates: Vec<gst::Buffer> = (0..DISTINCT_FRAMES).map(|i| gst::Buffer::from_mut_slice(noisy_i420(width, size, i as u32))).collect();
    if source == Source::Cuda {
        templates = cuda_templates(&caps, &templates)?;
        let mut cuda_caps = caps.clone();
        cuda_caps.make_mut().set_features_simple(Some(gst::CapsFeatures::new(["memory:CUDAMemory"])));
        src.set_caps(Some(&cuda_caps));
    }
    let duration = gst::ClockTime::from_nseconds(1_000_000_000 / 60);
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing)?;
    let start = Instant::now();
    let info = gst_video::VideoInfo::from_caps(&caps)?;
    // Set when the first frame reached the element (its caps are set by then).
    let arrived = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(pad) = pipeline.by_name("nlm").and_then(|e| e.static_pad("sink")) {
        let arrived = arrived.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            arrived.store(true, std::sync::atomic::Ordering::SeqCst);
            gst::PadProbeReturn::Remove
        });
    }
    let feeder = std::thread::spawn(move || {
        let mut pool = None;
        for i in 0..frames {
            if from_pool && i == 1 {
                for _ in 0..2000 {
                    if arrived.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                pool = proposed_pool(&src, &caps);
            }
            let template = &templates[i % DISTINCT_FRAMES];
            let t = Instant::now();
            let mut buffer = pool.as_ref().and_then(|p| fill_from_pool(p, template, &info)).unwrap_or_else(|| template.copy());
            SOURCE_NS.fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
            {
                let b = buffer.get_mut().unwrap();
                b.set_pts(duration * i as u64);
                b.set_duration(duration);
            }
            if src.push_buffer(buffer).is_err() {
                break;
            }
        }
        let _ = src.end_of_stream();
    });
    let error = wait_for_end(&bus);
    let secs = start.elapsed().as_secs_f64();
    let _ = feeder.join();
    pipeline.set_state(gst::State::Null)?;
    if let Some(e) = error {
        anyhow::bail!("pipeline error: {e}");
    }
    Ok(frames as f64 / secs)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(file) = args.get(1).and_then(|a| a.strip_prefix("decode=")) {
        let name = args[2..].iter().find_map(|a| a.strip_prefix("element=")).unwrap_or("nlmdenoise").to_string();
        let props = args[2..].iter().filter(|a| !a.starts_with("element=")).cloned().collect::<Vec<_>>().join(" ");
        gst::init()?;
        gstnlmdenoise::plugin_register_static()?;
        return decode_main(file, &name, &props);
    }
    if args.len() < 4 {
        eprintln!("usage: {} WIDTH HEIGHT FRAMES [element=NAME] [format=FORMAT] [source=pool] [ELEMENT PROPERTIES...]", args[0]);
        std::process::exit(2);
    }
    let width: usize = args[1].parse()?;
    let height: usize = args[2].parse()?;
    let frames: usize = args[3].parse()?;
    let name = args[4..].iter().find_map(|a| a.strip_prefix("element=")).unwrap_or("nlmdenoise").to_string();
    let source = if args[4..].iter().any(|a| a == "source=pool") {
        Source::Pool
    } else if args[4..].iter().any(|a| a == "source=cuda") {
        Source::Cuda
    } else {
        Source::Own
    };
    let format = args[4..].iter().find_map(|a| a.strip_prefix("format=")).unwrap_or("I420").to_string();
    let props = args[4..].iter().filter(|a| !a.starts_with("element=") && !a.starts_with("source=") && !a.starts_with("format=")).cloned().collect::<Vec<_>>().join(" ");
    gst::init()?;
    gstnlmdenoise::plugin_register_static()?;
    // Warm-up: first use compiles kernels and allocates the ring.
    run(&format, width, height, frames.min(60), Some((&name, &props)))?;
    reset_counters();
    let with = run_from(&format, width, height, frames, Some((&name, &props)), source)?;
    let breakdown = per_frame_breakdown(frames, with);
    let without = run_from(&format, width, height, frames, None, if source == Source::Cuda { Source::Cuda } else { Source::Own })?;
    println!("| pipeline | size | frames | frames/s |");
    println!("|---|---|---|---|");
    let source = match source {
        Source::Pool => " (source=pool: frames written into the element's pool if it offers one)",
        Source::Cuda => " (source=cuda: frames in CUDA memory, made once)",
        Source::Own => "",
    };
    println!("| appsrc{source} ! {name} {props} ! fakesink | {width}x{height} {format} | {frames} | {with:.1} |");
    println!("| appsrc ! fakesink | {width}x{height} {format} | {frames} | {without:.1} |");
    println!();
    println!("{breakdown}");
    Ok(())
}

fn reset_counters() {
    use std::sync::atomic::Ordering::Relaxed;
    for c in nlmdenoise::engine::ENGINE_NS.iter().chain(nlmdenoise::device::cuda::HOST_NS.iter()) {
        c.store(0, Relaxed);
    }
    SOURCE_NS.store(0, Relaxed);
}

/// Where a frame's time goes on the streaming thread (microseconds per frame): the engine's and
/// the CUDA backend's counters; "rest" is the wall time per frame less all of them (GStreamer,
/// the element, buffer allocation).
fn per_frame_breakdown(frames: usize, fps: f64) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let e = &nlmdenoise::engine::ENGINE_NS;
    let h = &nlmdenoise::device::cuda::HOST_NS;
    let us = |ns: u64| ns as f64 / 1e3 / frames as f64;
    let total = 1e6 / fps;
    let parts = [
        ("engine unpack", us(e[0].load(Relaxed))),
        ("noise estimate", us(e[1].load(Relaxed))),
        ("engine pack", us(e[2].load(Relaxed))),
        ("scene-cut test", us(e[4].load(Relaxed))),
        ("backend upload", us(h[0].load(Relaxed))),
        ("backend launch", us(h[1].load(Relaxed))),
        ("backend finish (waits for the GPU)", us(h[2].load(Relaxed))),
    ];
    let rest = total - parts.iter().map(|p| p.1).sum::<f64>();
    let mut out = String::from("| per frame, us | wall | ");
    out += &parts.iter().map(|p| p.0).collect::<Vec<_>>().join(" | ");
    out += " | rest (GStreamer, element) |\n|---|---:|";
    out += &"---:|".repeat(parts.len() + 1);
    out += &format!("\n| {frames} frames | {total:.1} | ");
    out += &parts.iter().map(|p| format!("{:.1}", p.1)).collect::<Vec<_>>().join(" | ");
    out += &format!(" | {rest:.1} |");
    out += &format!("\n\nsource thread (another thread): {:.1} us per frame making its buffers (waits for a free pool buffer included)", us(SOURCE_NS.load(Relaxed)));
    out
}
