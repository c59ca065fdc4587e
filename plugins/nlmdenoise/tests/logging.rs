//! The engine's `tracing` events reach the GStreamer debug log, in the `nlmdenoise` category and
//! attributed to the element.

mod common;

use std::sync::{Arc, Mutex};

use gst::prelude::*;
use nlmdenoise::{Params, PixelFormat};

#[test]
fn engine_tracing_events_are_forwarded_to_the_debug_category() {
    common::init();
    gst::log::set_active(true);
    gst::log::set_threshold_for_name("nlmdenoise", gst::DebugLevel::Debug);
    type Record = (String, String, Option<String>);
    let records: Arc<Mutex<Vec<Record>>> = Arc::default();
    let r = records.clone();
    let handle = gst::log::add_log_function(move |cat, _level, file, _function, _line, obj, msg| {
        if cat.name() == "nlmdenoise" {
            let name = obj.map(|o| o.to_string());
            r.lock().unwrap().push((file.to_string(), msg.get().map(|m| m.to_string()).unwrap_or_default(), name));
        }
    });

    let params = Params { search_radius: 1, patch_radius: 1, ..Params::default() };
    let format = PixelFormat::GRAY8;
    let caps = common::caps(format, 8, 8, (25, 1));
    let info = common::video_info(&caps);
    let mut h = gst_check::Harness::new("nlmdenoise");
    let element = h.element().unwrap();
    element.set_property("name", "denoiser-under-test");
    element.set_property_from_str("backend", "auto");
    element.set_property("search-radius", params.search_radius);
    element.set_property("patch-radius", params.patch_radius);
    h.play();
    h.set_src_caps(caps);
    h.push(common::make_buffer(&info, format, 3)).unwrap();
    h.pull().unwrap();
    gst::log::remove_log_function(handle);

    let records = records.lock().unwrap();
    // Records whose source file is the engine's (not this plugin's) came through the bridge.
    let engine: Vec<_> = records.iter().filter(|(file, _, _)| !file.contains("plugins/nlmdenoise")).collect();
    assert!(!engine.is_empty(), "no engine records among {records:?}");
    assert!(engine.iter().all(|(_, _, obj)| obj.as_deref().is_some_and(|o| o.contains("denoiser-under-test"))), "engine records carry the element: {engine:?}");
    // `auto` logs which backend it picked.
    assert!(engine.iter().any(|(_, msg, _)| msg.contains("auto")), "backend choice logged: {engine:?}");
}
