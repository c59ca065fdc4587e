//! Element instances come and go: a stream that builds, runs and drops `nlmdenoise` and
//! `nlmupscale` hundreds of times (as the element fuzz target does, and as an application that
//! rebuilds its pipeline) must not keep threads or memory from the instances it dropped (each CPU
//! engine owns a thread pool).

mod common;

use common::*;
use gst::prelude::*;
use nlmdenoise::{Params, PixelFormat};

fn threads_and_rss_kib() -> (usize, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap();
    (field("Threads:"), field("VmRSS:"))
}

fn one_instance(upscale: bool, i: u64) {
    let params = Params { temporal_past: 1, temporal_future: 1, ..small_params() };
    let mut h = if upscale {
        init();
        let h = gst_check::Harness::new("nlmupscale");
        h.element().unwrap().set_property_from_str("backend", "cpu");
        h
    } else {
        harness(&params)
    };
    let format = PixelFormat::I420;
    let caps = caps(format, 16, 12, (25, 1));
    let info = video_info(&caps);
    h.set_src_caps(caps);
    for f in 0..3 {
        h.push(with_meta(make_buffer(&info, format, i + f), f, gst::BufferFlags::empty())).unwrap();
    }
    assert!(h.push_event(gst::event::Eos::new()));
    let _ = pull_all(&mut h);
}

#[test]
fn instances_leave_no_threads_or_memory_behind() {
    for upscale in [false, true] {
        for i in 0..20 {
            one_instance(upscale, i);
        }
    }
    // Dropped pools' threads end in the background: give them a moment before each count.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (threads0, rss0) = threads_and_rss_kib();
    for i in 0..200 {
        one_instance(i % 2 == 1, i);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (threads1, rss1) = threads_and_rss_kib();
    eprintln!("threads {threads0} -> {threads1}, RSS {rss0} -> {rss1} KiB over 200 instances");
    assert!(threads1 <= threads0 + 2, "threads {threads0} -> {threads1} over 200 instances");
    assert!(rss1 < rss0 + 16 * 1024, "RSS {rss0} -> {rss1} KiB over 200 instances");
}
