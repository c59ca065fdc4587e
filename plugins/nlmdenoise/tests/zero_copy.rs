//! Frames crossing between GStreamer and the engine without copies (`zero-copy`): upstream
//! writing into the engine's frames through the proposed pool. One test in this binary, so that
//! the engine's process-wide counters (`ENGINE_NS`) are this test's alone.

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use gst::prelude::*;
use nlmdenoise::engine::{ENGINE_NS, PUSHED, UNPACK};

/// Output bytes and, per input buffer reaching the element, its number of memories.
fn run_collecting(description: &str) -> (Vec<Vec<u8>>, Vec<usize>) {
    common::init();
    let pipeline = gst::parse::launch(description).unwrap().downcast::<gst::Pipeline>().unwrap();
    let outputs = Arc::new(Mutex::new(Vec::new()));
    let inputs = Arc::new(Mutex::new(Vec::new()));
    let o = outputs.clone();
    pipeline.by_name("sink").unwrap().static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, info| {
        if let Some(buf) = info.buffer() {
            o.lock().unwrap().push(buf.map_readable().unwrap().to_vec());
        }
        gst::PadProbeReturn::Ok
    });
    let i = inputs.clone();
    pipeline.by_name("nlm").unwrap().static_pad("sink").unwrap().add_probe(gst::PadProbeType::BUFFER, move |_, info| {
        if let Some(buf) = info.buffer() {
            i.lock().unwrap().push(buf.n_memory());
        }
        gst::PadProbeReturn::Ok
    });
    pipeline.set_state(gst::State::Playing).unwrap();
    let msg = pipeline.bus().unwrap().timed_pop_filtered(gst::ClockTime::from_seconds(60), &[gst::MessageType::Eos, gst::MessageType::Error]).expect("finished in time");
    pipeline.set_state(gst::State::Null).unwrap();
    if let gst::MessageView::Error(e) = msg.view() {
        panic!("pipeline error: {} ({:?})", e.error(), e.debug());
    }
    let (o, i) = (outputs.lock().unwrap().clone(), inputs.lock().unwrap().clone());
    (o, i)
}

/// With `zero-copy` (the default) a source that takes the element's proposed pool writes into
/// the engine's own frames (one memory per plane reach the element) and the output is the same,
/// byte for byte, as with copies both ways; with `zero-copy=false` no pool is proposed. Formats
/// that interleave components (NV12, packed RGB) are written into stored frames, which the CPU
/// backend unpacks itself (the CUDA backend takes them as they are: tests/cuda_stored.rs).
#[test]
fn upstream_writes_into_the_engine_frames_of_the_proposed_pool() {
    for (format, size) in [("I420", "width=64,height=48"), ("Y444", "width=40,height=20"), ("GRAY8", "width=32,height=16"), ("NV12", "width=64,height=48"), ("RGBx", "width=24,height=16")] {
        let desc = |zero_copy: bool| {
            format!(
                "videotestsrc pattern=ball num-buffers=12 ! video/x-raw,format={format},{size},framerate=30/1 ! \
                 nlmdenoise name=nlm backend=cpu temporal-past=2 temporal-future=1 search-radius=2 patch-radius=1 zero-copy={zero_copy} ! \
                 fakesink name=sink sync=false"
            )
        };
        ENGINE_NS.iter().for_each(|c| c.store(0, Relaxed));
        let (lent_out, lent_in) = run_collecting(&desc(true));
        let (pushed, unpacked) = (ENGINE_NS[PUSHED].load(Relaxed), ENGINE_NS[UNPACK].load(Relaxed));
        let stored = ["NV12", "RGBx"].contains(&format);
        // The frames came in as the engine's own: nothing was unpacked (but by the engine itself
        // for stored frames on the CPU backend).
        assert_eq!(pushed, 12, "{format}: frames pushed");
        assert_eq!(unpacked > 0, stored, "{format}: unpack time {unpacked} ns");
        ENGINE_NS.iter().for_each(|c| c.store(0, Relaxed));
        let (copied_out, copied_in) = run_collecting(&desc(false));
        assert!(ENGINE_NS[UNPACK].load(Relaxed) > 0, "{format}: copied in without zero-copy");
        let planes = match format {
            "GRAY8" | "RGBx" => 1,
            "NV12" => 2,
            _ => 3,
        };
        assert_eq!(lent_out.len(), 12, "{format}");
        assert!(lent_out == copied_out, "{format}: the output differs between lent and copied frames");
        assert!(lent_in.iter().all(|&n| n == planes), "{format}: upstream wrote into the pool's frames: {lent_in:?}");
        assert!(copied_in.iter().all(|&n| n == 1), "{format}: no pool without zero-copy: {copied_in:?}");
    }
    // The upscaler: input frames of one size from its pool, output frames of another lent out.
    let desc = |zero_copy: bool| {
        format!(
            "videotestsrc pattern=ball num-buffers=10 ! video/x-raw,format=I420,width=32,height=24,framerate=30/1 ! \
             nlmupscale name=nlm backend=cpu scale=2 temporal-past=1 temporal-future=1 zero-copy={zero_copy} ! fakesink name=sink sync=false"
        )
    };
    ENGINE_NS.iter().for_each(|c| c.store(0, Relaxed));
    let (lent_out, lent_in) = run_collecting(&desc(true));
    assert_eq!((ENGINE_NS[PUSHED].load(Relaxed), ENGINE_NS[UNPACK].load(Relaxed)), (10, 0), "nlmupscale: frames pushed, unpack time");
    let (copied_out, _) = run_collecting(&desc(false));
    assert_eq!(lent_out.len(), 10);
    assert!(lent_out == copied_out, "nlmupscale: the output differs between lent and copied frames");
    assert!(lent_in.iter().all(|&n| n == 3), "nlmupscale: upstream wrote into the pool's frames: {lent_in:?}");
}
