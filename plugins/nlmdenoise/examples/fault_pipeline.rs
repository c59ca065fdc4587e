//! A pipeline under injected faults (docs/reliability.md, scripts/gpu.sh part `faults`):
//! `appsrc ! nlmdenoise ! fakesink`, counting what comes out and what the bus says.
//!
//! usage: fault_pipeline WIDTH HEIGHT FRAMES [format=FORMAT] [change-at=K:WxH] [pause-at=K:SECONDS] [source=pool] [ELEMENT PROPERTIES...]
//! e.g.   fault_pipeline 1920 1080 300 backend=cuda          (with the CUDA fault stand-in loaded)
//!        fault_pipeline 640 360 80 pause-at=40:12 change-at=40:1920x1080 backend=cuda
//!
//! `change-at` switches the frames (and caps) to another size from frame K on: the element builds
//! a new engine, the moment device memory can run out mid-stream. `pause-at` holds the source
//! for that long before frame K, so that a test can take device memory meanwhile. `source=pool`
//! writes the frames after the first into buffers of the pool the element proposes (until a caps
//! change), as a decoder would. `format`: the caps' format (default I420).
//!
//! Prints one line per warning and error the bus carries, then a summary line:
//! `frames in N received R out M lost-reported L accounted yes|NO in-order yes|no end eos|error
//! checksum H` (in: pushed into appsrc; received: reached the element; H: a hash of every output
//! buffer's bytes in order, to compare runs) and exits 0 at end of stream, 1 after
//! an error. `accounted yes`: every frame the element received came out or an error or warning
//! named it lost (the element's "N frame(s) in flight lost").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gst::prelude::*;

#[path = "common/source.rs"]
mod source;

fn frame(format: &str, width: usize, height: usize, seed: usize) -> Vec<u8> {
    let f = gst_video::VideoFormat::from_string(format);
    let size = gst_video::VideoInfo::builder(f, width as u32, height as u32).build().expect("valid size").size();
    source::noisy_i420(width, size, seed as u32)
}

fn caps(format: &str, width: usize, height: usize) -> gst::Caps {
    gst::Caps::builder("video/x-raw").field("format", format).field("width", width as i32).field("height", height as i32).field("framerate", gst::Fraction::new(30, 1)).build()
}

/// "K:WxH" -> (K, W, H); "K:S" -> (K, S).
fn parse_at(v: &str) -> anyhow::Result<(usize, String)> {
    let (k, rest) = v.split_once(':').ok_or_else(|| anyhow::anyhow!("expected K:VALUE, got {v}"))?;
    Ok((k.parse()?, rest.to_string()))
}

/// The number in "... N frame(s) in flight lost ..." of an element message's debug text.
fn lost_in(text: &str) -> usize {
    text.find(" frame(s) in flight lost").and_then(|end| text[..end].rsplit(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok())).unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: {} WIDTH HEIGHT FRAMES [format=FORMAT] [source=pool] [change-at=K:WxH] [pause-at=K:SECONDS] [ELEMENT PROPERTIES...]", args[0]);
        std::process::exit(2);
    }
    let (width, height, frames): (usize, usize, usize) = (args[1].parse()?, args[2].parse()?, args[3].parse()?);
    let mut change = None;
    let mut pause = None;
    let mut from_pool = false;
    let mut format = "I420".to_string();
    let mut props = Vec::new();
    for a in &args[4..] {
        if a == "source=pool" {
            from_pool = true;
        } else if let Some(v) = a.strip_prefix("format=") {
            format = v.to_string();
        } else if let Some(v) = a.strip_prefix("change-at=") {
            let (k, size) = parse_at(v)?;
            let (w, h) = size.split_once('x').ok_or_else(|| anyhow::anyhow!("change-at: expected K:WxH"))?;
            change = Some((k, w.parse::<usize>()?, h.parse::<usize>()?));
        } else if let Some(v) = a.strip_prefix("pause-at=") {
            let (k, secs) = parse_at(v)?;
            pause = Some((k, secs.parse::<f64>()?));
        } else {
            props.push(a.clone());
        }
    }
    gst::init()?;
    gstnlmdenoise::plugin_register_static()?;
    let desc = format!("appsrc name=src format=time block=true max-buffers=8 ! nlmdenoise name=nlm {} ! fakesink name=sink sync=false signal-handoffs=true", props.join(" "));
    let pipeline = gst::parse::launch(&desc)?.downcast::<gst::Pipeline>().map_err(|_| anyhow::anyhow!("not a pipeline"))?;
    let src = pipeline.by_name("src").unwrap().downcast::<gst_app::AppSrc>().map_err(|_| anyhow::anyhow!("not an appsrc"))?;
    let out_pts: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let checksum = Arc::new(Mutex::new(std::collections::hash_map::DefaultHasher::new()));
    {
        let out_pts = out_pts.clone();
        let checksum = checksum.clone();
        pipeline.by_name("sink").unwrap().connect("handoff", false, move |values| {
            if let Ok(buf) = values[1].get::<gst::Buffer>() {
                out_pts.lock().unwrap().push(buf.pts().map(|t| t.nseconds()).unwrap_or(u64::MAX));
                if let Ok(map) = buf.map_readable() {
                    use std::hash::Hasher;
                    checksum.lock().unwrap().write(map.as_slice());
                }
            }
            None
        });
    }
    // Frames the element received (its sink pad), as opposed to frames still queued in appsrc
    // when the pipeline stopped.
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    {
        let received = received.clone();
        pipeline.by_name("nlm").unwrap().static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            received.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            gst::PadProbeReturn::Ok
        });
    }
    src.set_caps(Some(&caps(&format, width, height)));
    let duration = gst::ClockTime::from_nseconds(1_000_000_000 / 30);
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing)?;
    let received_by_feeder = received.clone();
    let feeder = std::thread::spawn(move || {
        let mut pool: Option<gst::BufferPool> = None;
        let (mut w, mut h) = (width, height);
        let mut templates: Vec<gst::Buffer> = (0..4).map(|i| gst::Buffer::from_mut_slice(frame(&format, w, h, i))).collect();
        for i in 0..frames {
            if pause.is_some_and(|(k, _)| k == i) {
                eprintln!("fault_pipeline: pausing before frame {i}");
                std::thread::sleep(Duration::from_secs_f64(pause.unwrap().1));
            }
            if let Some((k, nw, nh)) = change {
                if k == i {
                    eprintln!("fault_pipeline: {w}x{h} -> {nw}x{nh} at frame {i}");
                    (w, h) = (nw, nh);
                    src.set_caps(Some(&caps(&format, w, h)));
                    templates = (0..4).map(|i| gst::Buffer::from_mut_slice(frame(&format, w, h, i))).collect();
                    pool = None;
                }
            }
            if from_pool && i == 1 {
                // The element proposes its pool once it has the caps (the first frame arrived).
                for _ in 0..2000 {
                    if received_by_feeder.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                pool = source::proposed_pool(&src, &caps(&format, w, h));
                eprintln!("fault_pipeline: source=pool, {}", if pool.is_some() { "writing into the element's pool" } else { "no pool proposed" });
            }
            let template = &templates[i % templates.len()];
            let info = gst_video::VideoInfo::from_caps(&caps(&format, w, h)).expect("valid caps");
            let mut buffer = pool.as_ref().and_then(|p| source::fill_from_pool(p, template, &info)).unwrap_or_else(|| template.copy());
            {
                let b = buffer.get_mut().unwrap();
                b.set_pts(duration * i as u64);
                b.set_duration(duration);
            }
            if src.push_buffer(buffer).is_err() {
                return i;
            }
        }
        let _ = src.end_of_stream();
        frames
    });
    let mut lost = 0;
    let mut end = "eos";
    for msg in bus.iter_timed(gst::ClockTime::from_seconds(600)) {
        match msg.view() {
            gst::MessageView::Eos(..) => break,
            gst::MessageView::Error(e) => {
                let debug = e.debug().map(|d| d.to_string()).unwrap_or_default();
                println!("error: {} | {debug}", e.error());
                lost += lost_in(&debug);
                end = "error";
                break;
            }
            gst::MessageView::Warning(w) => {
                let debug = w.debug().map(|d| d.to_string()).unwrap_or_default();
                println!("warning: {} | {debug}", w.error());
                lost += lost_in(&debug);
            }
            _ => {}
        }
    }
    // Let the element deliver what it finished before the error reached the bus.
    std::thread::sleep(Duration::from_millis(300));
    pipeline.set_state(gst::State::Null)?;
    let pushed = feeder.join().unwrap_or(0);
    let out = out_pts.lock().unwrap().clone();
    let in_order = out.windows(2).all(|w| w[0] < w[1]);
    let received = received.load(std::sync::atomic::Ordering::SeqCst);
    let accounted = if out.len() + lost == received { "yes" } else { "NO" };
    let checksum = {
        use std::hash::Hasher;
        checksum.lock().unwrap().finish()
    };
    println!("frames in {pushed} received {received} out {} lost-reported {lost} accounted {accounted} in-order {} end {end} checksum {checksum:016x}", out.len(), if in_order { "yes" } else { "no" });
    std::process::exit(if end == "eos" { 0 } else { 1 });
}
