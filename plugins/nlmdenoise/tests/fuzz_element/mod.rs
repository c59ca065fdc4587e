//! The element fuzz entry point (issue #34), shared by the libFuzzer target `element`
//! (fuzz/fuzz_targets/element.rs) and the corpus replay (tests/fuzz_element.rs): bytes choose
//! an element (`nlmdenoise` or `nlmupscale`), up to seven property settings (any writable
//! property, values of its type taken from the bytes, out-of-range ones included: the element
//! must refuse them), caps (a format of its template, 1..48 x 1..48, any frame rate, 0/1 too),
//! then up to five buffers (of the right size or not, any content) and events (flush, gap, a
//! second caps, end of stream) through a gst-check harness, on the CPU backend. It must never
//! panic, crash or hang; errors are fine.

use gst::glib;
use gst::prelude::*;
use gst_check::Harness;

/// The bytes, read front to back; zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
}

fn init() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        gst::init().expect("gst::init");
        gstnlmdenoise::plugin_register_static().expect("register the plugin");
    });
}

/// A value of `pspec`'s type from the bytes: usually inside its range, sometimes at or past its
/// ends (GObject refuses those; the element must not see them).
fn value_for(pspec: &glib::ParamSpec, b: &mut Bytes) -> Option<glib::Value> {
    let wild = b.byte() % 8 == 0;
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecUInt>() {
        let v = if wild { b.u32() } else { p.minimum() + b.u32() % (p.maximum() - p.minimum()).saturating_add(1).max(1) };
        return Some(v.to_value());
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecInt>() {
        let span = (p.maximum() as i64 - p.minimum() as i64 + 1).max(1);
        let v = if wild { b.u32() as i32 } else { (p.minimum() as i64 + b.u32() as i64 % span) as i32 };
        return Some(v.to_value());
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecFloat>() {
        let v = match (wild, b.byte() % 4) {
            (true, 0) => f32::NAN,
            (true, 1) => f32::INFINITY,
            (true, _) => -1e9,
            (false, _) => p.minimum() + (p.maximum() - p.minimum()).min(1e6) * (b.byte() as f32 / 255.0),
        };
        return Some(v.to_value());
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecDouble>() {
        let v = if wild { f64::NAN } else { p.minimum() + (p.maximum() - p.minimum()).min(1e6) * (b.byte() as f64 / 255.0) };
        return Some(v.to_value());
    }
    if pspec.downcast_ref::<glib::ParamSpecBoolean>().is_some() {
        return Some((b.byte() & 1 == 1).to_value());
    }
    if let Some(p) = pspec.downcast_ref::<glib::ParamSpecEnum>() {
        let class = p.enum_class();
        let values = class.values();
        let v = &values[b.byte() as usize % values.len()];
        return class.to_value(v.value());
    }
    if pspec.downcast_ref::<glib::ParamSpecString>().is_some() {
        let choices = ["0", "0,1", "all", "", "7", "x", "-1", "0,0,0"];
        return Some(choices[b.byte() as usize % choices.len()].to_value());
    }
    None
}

/// Whether GObject takes `v` for `pspec` (g_param_value_is_valid needs GLib 2.74 bindings):
/// numbers within the declared range, NaN never.
fn in_range(pspec: &glib::ParamSpec, v: &glib::Value) -> bool {
    if let (Some(p), Ok(x)) = (pspec.downcast_ref::<glib::ParamSpecUInt>(), v.get::<u32>()) {
        return (p.minimum()..=p.maximum()).contains(&x);
    }
    if let (Some(p), Ok(x)) = (pspec.downcast_ref::<glib::ParamSpecInt>(), v.get::<i32>()) {
        return (p.minimum()..=p.maximum()).contains(&x);
    }
    if let (Some(p), Ok(x)) = (pspec.downcast_ref::<glib::ParamSpecFloat>(), v.get::<f32>()) {
        return (p.minimum()..=p.maximum()).contains(&x);
    }
    if let (Some(p), Ok(x)) = (pspec.downcast_ref::<glib::ParamSpecDouble>(), v.get::<f64>()) {
        return (p.minimum()..=p.maximum()).contains(&x);
    }
    true
}

/// The formats of the element's sink pad template.
fn template_formats(element: &gst::Element) -> Vec<String> {
    let caps = element.static_pad("sink").map(|p| p.pad_template_caps()).unwrap_or_else(gst::Caps::new_any);
    let mut formats = Vec::new();
    for s in caps.iter() {
        if let Ok(list) = s.get::<gst::List>("format") {
            formats.extend(list.iter().filter_map(|v| v.get::<String>().ok()));
        } else if let Ok(f) = s.get::<String>("format") {
            formats.push(f);
        }
    }
    formats.sort();
    formats.dedup();
    formats
}

fn caps_from(b: &mut Bytes, formats: &[String]) -> gst::Caps {
    let format = formats.get(b.byte() as usize % formats.len().max(1)).cloned().unwrap_or_else(|| "I420".into());
    let (w, h) = (1 + b.byte() as i32 % 48, 1 + b.byte() as i32 % 48);
    let fps = gst::Fraction::new(b.byte() as i32 % 61, 1 + b.byte() as i32 % 2);
    gst::Caps::builder("video/x-raw").field("format", format).field("width", w).field("height", h).field("framerate", fps).build()
}

/// Runs one input (see the module's doc).
pub fn element(data: &[u8]) {
    init();
    let mut b = Bytes(data);
    let name = if b.byte() & 1 == 0 { "nlmdenoise" } else { "nlmupscale" };
    let mut h = Harness::new(name);
    let element = h.element().expect("the harness's element");
    let settable: Vec<glib::ParamSpec> = element
        .list_properties()
        .iter()
        .filter(|p| p.flags().contains(glib::ParamFlags::WRITABLE) && !p.flags().contains(glib::ParamFlags::CONSTRUCT_ONLY) && !["name", "parent", "backend"].contains(&p.name()))
        .cloned()
        .collect();
    for _ in 0..b.byte() % 8 {
        let p = &settable[b.byte() as usize % settable.len()];
        if let Some(v) = value_for(p, &mut b) {
            // Out-of-range and mistyped values are refused by GObject before the element sees them.
            if p.value_type() == v.type_() && in_range(p, &v) {
                element.set_property_from_value(p.name(), &v);
            }
        }
    }
    // The CPU backend whatever the bytes say (no GPU here, and the same path everywhere), with
    // radii and windows small enough to stay fast on frames of 48 x 48 at most.
    element.set_property_from_str("backend", "cpu");
    let formats = template_formats(&element);
    h.play();
    let _ = h.push_event(gst::event::StreamStart::new("fuzz"));
    let caps = caps_from(&mut b, &formats);
    let _ = h.push_event(gst::event::Caps::new(&caps));
    let _ = h.push_event(gst::event::Segment::new(&gst::FormattedSegment::<gst::ClockTime>::new()));
    let frame_size = gst_video::VideoInfo::from_caps(&caps).map(|i| i.size()).unwrap_or(0);
    for i in 0..b.byte() % 6 {
        match b.byte() % 8 {
            0 => {
                let _ = h.push_event(gst::event::FlushStart::new());
                let _ = h.push_event(gst::event::FlushStop::new(true));
                // A flush that resets time ends the segment: a new one before any data.
                let _ = h.push_event(gst::event::Segment::new(&gst::FormattedSegment::<gst::ClockTime>::new()));
            }
            1 => {
                let gap = gst::event::Gap::builder(gst::ClockTime::from_mseconds(40 * i as u64)).duration(gst::ClockTime::from_mseconds(40)).build();
                let _ = h.push_event(gap);
            }
            2 => {
                let caps = caps_from(&mut b, &formats);
                let _ = h.push_event(gst::event::Caps::new(&caps));
            }
            _ => {
                // Mostly a whole frame; sometimes a wrong size.
                let size = if b.byte() % 4 == 0 { b.byte() as usize * 37 } else { frame_size };
                let mut content = vec![0u8; size];
                for (k, v) in content.iter_mut().enumerate() {
                    *v = data.get(k % data.len().max(1)).copied().unwrap_or(0) ^ (k as u8);
                }
                let mut buffer = gst::Buffer::from_mut_slice(content);
                buffer.get_mut().unwrap().set_pts(gst::ClockTime::from_mseconds(40 * i as u64));
                let _ = h.push(buffer);
            }
        }
        while h.try_pull().is_some() {}
    }
    let _ = h.push_event(gst::event::Eos::new());
    while h.try_pull().is_some() {}
}
