//! gst-launch style pipelines: the statically registered element through `gst::parse::launch`,
//! and the built shared library through the `gst-launch-1.0` tool.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use gst::prelude::*;

/// Runs `description` to EOS; returns the buffers (pts) reaching the sink named `sink`.
fn run_to_eos(description: &str) -> Vec<Option<gst::ClockTime>> {
    common::init();
    let pipeline = gst::parse::launch(description).unwrap().downcast::<gst::Pipeline>().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = pipeline.by_name("sink").expect("sink named 'sink'");
    let pad = sink.static_pad("sink").unwrap();
    let s = seen.clone();
    pad.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
        if let Some(buf) = info.buffer() {
            s.lock().unwrap().push(buf.pts());
        }
        gst::PadProbeReturn::Ok
    });
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    let msg = bus.timed_pop_filtered(gst::ClockTime::from_seconds(120), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("pipeline finished in time");
    pipeline.set_state(gst::State::Null).unwrap();
    if let gst::MessageView::Error(e) = msg.view() {
        panic!("pipeline error: {} ({:?})", e.error(), e.debug());
    }
    let v = seen.lock().unwrap().clone();
    v
}

#[test]
fn parse_launch_videotestsrc_to_fakesink() {
    let pts = run_to_eos("videotestsrc num-buffers=5 ! video/x-raw,width=32,height=24 ! nlmdenoise backend=cpu search-radius=2 patch-radius=1 ! fakesink name=sink");
    assert_eq!(pts.len(), 5);
}

/// docs/element.md's "check that it works" pipeline runs the element on I420 (without the format
/// in its caps, videotestsrc picked BGRA).
#[test]
fn documented_check_pipeline_negotiates_i420() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/element.md")).unwrap();
    let start = doc.find("gst-launch-1.0 videotestsrc num-buffers=100").expect("the check pipeline in docs/element.md");
    let line: String = doc[start..].lines().take(2).collect::<Vec<_>>().join(" ").replace('\\', " ");
    let desc = line.trim_start_matches("gst-launch-1.0").replace("num-buffers=100", "num-buffers=3").replace("fakesink", "fakesink name=sink");
    assert!(desc.contains("format=I420"), "{desc}");
    common::init();
    let pipeline = gst::parse::launch(&desc).unwrap().downcast::<gst::Pipeline>().unwrap();
    let d = pipeline.iterate_elements().into_iter().flatten().find(|e| e.factory().is_some_and(|f| f.name() == "nlmdenoise")).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    bus.timed_pop_filtered(gst::ClockTime::from_seconds(60), &[gst::MessageType::Eos, gst::MessageType::Error]).unwrap();
    let caps = d.static_pad("sink").unwrap().current_caps();
    pipeline.set_state(gst::State::Null).unwrap();
    let caps = caps.expect("negotiated");
    assert_eq!(caps.structure(0).unwrap().get::<&str>("format").unwrap(), "I420");
}

#[test]
fn parse_launch_with_future_frames_delivers_every_frame_in_order() {
    let pts = run_to_eos(
        "videotestsrc num-buffers=6 pattern=ball ! video/x-raw,format=I420,width=24,height=16,framerate=30/1 ! \
         nlmdenoise backend=cpu temporal-future=2 search-radius=1 patch-radius=1 ! fakesink name=sink sync=false",
    );
    let want: Vec<_> = (0..6).map(|i| Some(gst::ClockTime::SECOND.mul_div_floor(i, 30).unwrap())).collect();
    assert_eq!(pts, want);
}

/// A live source with a synchronising sink: the pipeline latency includes the future frames, so
/// the sink renders every frame instead of dropping them as late.
#[test]
fn live_pipeline_with_future_frames_accounts_for_the_latency() {
    common::init();
    let pipeline = gst::parse::launch(
        "videotestsrc is-live=true num-buffers=10 ! video/x-raw,format=GRAY8,width=16,height=8,framerate=50/1 ! \
         nlmdenoise name=d backend=cpu temporal-future=3 search-radius=1 patch-radius=1 ! fakesink name=sink sync=true qos=true processing-deadline=0",
    )
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    let msg = bus.timed_pop_filtered(gst::ClockTime::from_seconds(30), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("finished");
    let mut q = gst::query::Latency::new();
    assert!(pipeline.query(&mut q), "latency query answered");
    let (live, min, _) = q.result();
    let sink = pipeline.by_name("sink").unwrap();
    let rendered: u64 = sink.property::<gst::Structure>("stats").get("rendered").unwrap();
    let dropped: u64 = sink.property::<gst::Structure>("stats").get("dropped").unwrap();
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(matches!(msg.view(), gst::MessageView::Eos(_)), "{msg:?}");
    assert!(live);
    // videotestsrc reports one frame (20 ms), the element three, the sink no processing deadline.
    assert_eq!(min, gst::ClockTime::from_mseconds(80), "pipeline latency includes 3 frames at 50 fps");
    assert_eq!((rendered, dropped), (10, 0));
}

fn target_profile_dir() -> PathBuf {
    // target/<profile>/deps/<this test binary>
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|p| p.parent()).unwrap().to_path_buf()
}

/// The shared library as gst-launch-1.0 loads it (needs the cdylib that `cargo test` builds).
#[test]
fn gst_launch_loads_the_built_plugin() {
    let dir = target_profile_dir();
    let lib = dir.join("libgstnlmdenoise.so");
    assert!(lib.exists(), "{} not built", lib.display());
    let registry = std::env::temp_dir().join(format!("nlmdenoise-test-registry-{}.bin", std::process::id()));
    let out = Command::new("gst-launch-1.0")
        .args(["-q", "videotestsrc", "num-buffers=5", "!", "video/x-raw,width=32,height=24", "!", "nlmdenoise", "backend=cpu", "search-radius=2", "patch-radius=1", "!", "fakesink"])
        .env("GST_PLUGIN_PATH", &dir)
        .env("GST_REGISTRY", &registry)
        .output()
        .expect("gst-launch-1.0 runs (apt install gstreamer1.0-tools)");
    let _ = std::fs::remove_file(&registry);
    assert!(out.status.success(), "gst-launch-1.0 failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// scripts/gst-demo.sh with an absolute output folder writes there and nothing into the
/// repository (it used to prefix the folder with the repository's path for its registry), and a
/// run too short to time says so instead of printing a frame rate.
#[test]
fn gst_demo_writes_where_it_is_told() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let dir = target_profile_dir();
    if !dir.join("libgstnlmdenoise.so").exists() || Command::new("ffmpeg").arg("-version").output().is_err() {
        panic!("needs the built plugin and ffmpeg (scripts/test.sh provides both)");
    }
    let out = std::env::temp_dir().join(format!("nlmdenoise-gst-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    // Clips given, so the script needs neither cargo nor the addnoise tool.
    let (clean, noisy) = (out.join("c.y4m"), out.join("n.y4m"));
    for (f, noise) in [(&clean, ""), (&noisy, ",noise=alls=20:allf=t")] {
        let st = Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", &format!("testsrc2=size=64x48:rate=25{noise}"), "-frames:v", "5", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe"])
            .arg(f)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let profile = dir.file_name().unwrap().to_str().unwrap().to_string();
    let r = Command::new("bash")
        .arg(repo.join("scripts/gst-demo.sh"))
        .env("GST_DEMO_OUT", &out)
        .env("GST_DEMO_CLEAN", &clean)
        .env("GST_DEMO_NOISY", &noisy)
        .env("GST_DEMO_NO_BUILD", "1")
        .env("GST_DEMO_PROFILE", &profile)
        .env("GST_DEMO_BACKEND", "cpu")
        .env("GST_DEMO_PROPS", "search-radius=1 patch-radius=1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&r.stderr));
    assert!(out.join("registry.bin").exists() && out.join("denoised.y4m").exists(), "outputs in the folder given");
    let stray = repo.join(out.strip_prefix("/").unwrap());
    let leaked = stray.exists();
    let _ = std::fs::remove_dir_all(&stray);
    assert!(!leaked, "nothing under the repository: {}", stray.display());
    assert!(stdout.contains("too short to time"), "5 small frames are not timed: {stdout}");
    let _ = std::fs::remove_dir_all(&out);
}
