//! Implementation of the `nlmupscale` element: its properties and caps (output = input times
//! `scale`); the frame flow (engine, draining, latency, allocation) is the shared
//! [`crate::transform::Core`], the computation the engine's [`nlmdenoise::sr`].

use std::sync::LazyLock;

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::prelude::*;

use nlmdenoise::params::{MAX_PATCH_RADIUS, MAX_SEARCH_RADIUS, MAX_SIGMA, MAX_STRENGTH, MAX_TEMPORAL_FUTURE, MAX_TEMPORAL_PAST, SR_BASE_STRENGTH, SR_MAX_DEBLUR, SR_MAX_SCALE, SR_STRENGTH_PER_SIGMA};
use nlmdenoise::{Params, SrParams};

use crate::nlmdenoise::imp::{MAX_PIPELINE_DEPTH, MAX_SIDE, MAX_THREADS, SIGMA_UNSET};
use crate::nlmdenoise::{apply_devices, devices_to_string, Backend};
use crate::transform::{lock, Core, Settings};

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| gst::DebugCategory::new("nlmupscale", gst::DebugColorFlags::empty(), Some("Multi-frame NLM super-resolution")));

pub struct NlmUpscale {
    core: Core,
}

impl Default for NlmUpscale {
    fn default() -> Self {
        let core = Core::new("upscaler", "upscaling");
        let p = Params::upscaling(SrParams::default().scale);
        *lock(&core.settings) = Settings { params: p, estimate: false, base_strength: SR_BASE_STRENGTH, ..Settings::default() };
        NlmUpscale { core }
    }
}

impl NlmUpscale {
    fn scale(&self) -> i32 {
        lock(&self.core.settings).params.sr.scale as i32
    }
}

#[glib::object_subclass]
impl ObjectSubclass for NlmUpscale {
    const NAME: &'static str = "GstNlmUpscale";
    type Type = super::NlmUpscale;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for NlmUpscale {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let p = Params::upscaling(SrParams::default().scale);
            let sr = p.sr;
            vec![
                glib::ParamSpecUInt::builder("scale")
                    .nick("Scale")
                    .blurb("Integer upscaling factor: output width and height are the input's times this")
                    .minimum(2)
                    .maximum(SR_MAX_SCALE)
                    .default_value(sr.scale)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("backend", Backend::Auto)
                    .nick("Backend")
                    .blurb("Compute backend: auto = CUDA when a usable GPU and NVRTC are present, else CPU, and CPU from then on if the GPU fails mid-stream; cuda = fail when unavailable or failing")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("device-id")
                    .nick("CUDA device(s)")
                    .blurb("CUDA device ordinal, a comma-separated list of ordinals (chunks spread over those devices), or 'all'")
                    .default_value(Some("0"))
                    .mutable_ready()
                    .build(),
                crate::transform::chunk_frames_property(),
                glib::ParamSpecUInt::builder("threads")
                    .nick("CPU threads")
                    .blurb("Worker threads of the CPU backend (0 = all cores)")
                    .maximum(MAX_THREADS)
                    .default_value(0)
                    .mutable_ready()
                    .build(),
                crate::transform::zero_copy_property(),
                glib::ParamSpecUInt::builder("pipeline-depth")
                    .nick("Pipeline depth")
                    .blurb("Frames in flight on the GPU (adds that many frames of latency); 0 = synchronous")
                    .maximum(MAX_PIPELINE_DEPTH)
                    .default_value(0)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("temporal-past")
                    .nick("Past frames")
                    .blurb("Past frames fused (no added latency)")
                    .maximum(MAX_TEMPORAL_PAST)
                    .default_value(p.temporal_past)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("temporal-future")
                    .nick("Future frames")
                    .blurb("Future frames fused; adds that many frames of latency")
                    .maximum(MAX_TEMPORAL_FUTURE)
                    .default_value(p.temporal_future)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("search-radius")
                    .nick("Search radius")
                    .blurb("Low-resolution samples searched around each output sample's cell, in x and y")
                    .maximum(MAX_SEARCH_RADIUS)
                    .default_value(p.search_radius)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("patch-radius")
                    .nick("Patch radius")
                    .blurb("Radius of the compared patches, in low-resolution samples")
                    .maximum(MAX_PATCH_RADIUS)
                    .default_value(p.patch_radius)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("strength")
                    .nick("Strength")
                    .blurb("Strength h of the luma (and RGB) weights, 8-bit units; default: follows sigma when set")
                    .minimum(0.01)
                    .maximum(MAX_STRENGTH)
                    .default_value(SR_BASE_STRENGTH)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("chroma-strength")
                    .nick("Chroma strength")
                    .blurb("Strength h of the chroma weights, 8-bit units; default: follows sigma when set")
                    .minimum(0.01)
                    .maximum(MAX_STRENGTH)
                    .default_value(SR_BASE_STRENGTH)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("sigma")
                    .nick("Noise sigma")
                    .blurb(&format!("Noise standard deviation of the input in 8-bit code values, to denoise while upscaling: sigma^2 is subtracted from patch distances and, unless strength/chroma-strength were set, the strengths follow it (hypot({SR_BASE_STRENGTH}, {SR_STRENGTH_PER_SIGMA} * sigma)). -1 (default): a clean input"))
                    .minimum(SIGMA_UNSET)
                    .maximum(MAX_SIGMA)
                    .default_value(SIGMA_UNSET)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("iterations")
                    .nick("Iterations")
                    .blurb("Fusion passes: 1, or 2 (the second matches against the first's result; twice the cost)")
                    .minimum(1)
                    .maximum(2)
                    .default_value(sr.iterations)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("deblur")
                    .nick("Deblur steps")
                    .blurb("Back-projection steps of the initial estimate against the current frame: undo the blur of the downscale")
                    .maximum(SR_MAX_DEBLUR)
                    .default_value(sr.deblur)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("fusion")
                    .nick("Fusion")
                    .blurb("Share of the correction fused from the temporal window that is added to the deblurred estimate (0 = the current frame alone)")
                    .minimum(0.0)
                    .maximum(1.0)
                    .default_value(sr.fusion)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecBoolean::builder("novelty-gate")
                    .nick("Novelty gate")
                    .blurb("Apply the fused correction only where another frame matches better than the current one (static content stays as sharp as the deblurred frame); off: everywhere (repetitive, synthetic content gains, smooth static content softens)")
                    .default_value(sr.novelty_gate)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("backend-in-use")
                    .nick("Backend in use")
                    .blurb("The backend the running stream computes on (read-only; empty before caps)")
                    .read_only()
                    .build(),
            ]
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let mut guard = lock(&self.core.settings);
        let s = &mut *guard;
        let old_future = s.params.latency_frames();
        // `value` has been validated against the pspec (type and range) by GObject.
        match pspec.name() {
            "backend" => s.options.kind = value.get::<Backend>().unwrap_or_default().to_engine(),
            "device-id" => {
                let text = value.get::<Option<String>>().ok().flatten().unwrap_or_else(|| "0".to_string());
                match apply_devices(&mut s.options, &text) {
                    Ok(()) => s.bad_device_id = None,
                    Err(e) => s.bad_device_id = Some(format!("device-id '{text}': {e}")),
                }
                if let Some(bad) = &s.bad_device_id {
                    gst::error!(CAT, imp = self, "{bad}");
                    return;
                }
            }
            "chunk-frames" => s.options.chunk_frames = crate::transform::chunk_frames_from_property(value.get::<u32>().unwrap_or(1)),
            "threads" => s.options.threads = value.get::<u32>().unwrap_or(0) as usize,
            "pipeline-depth" => s.options.pipeline_depth = value.get::<u32>().unwrap_or(0) as usize,
            "zero-copy" => s.zero_copy = value.get().unwrap_or(true),
            name => {
                let p = &mut s.params;
                match name {
                    "scale" => p.sr.scale = value.get().unwrap_or(p.sr.scale),
                    "temporal-past" => p.temporal_past = value.get().unwrap_or(p.temporal_past),
                    "temporal-future" => p.temporal_future = value.get().unwrap_or(p.temporal_future),
                    "search-radius" => p.search_radius = value.get().unwrap_or(p.search_radius),
                    "patch-radius" => p.patch_radius = value.get().unwrap_or(p.patch_radius),
                    "strength" => {
                        p.strength = value.get().unwrap_or(p.strength);
                        s.strength_set = true;
                    }
                    "chroma-strength" => {
                        p.chroma_strength = value.get().unwrap_or(p.chroma_strength);
                        s.strength_set = true;
                    }
                    "sigma" => {
                        let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                        p.sigma = if v < 0.0 { None } else { Some(v) };
                    }
                    "iterations" => p.sr.iterations = value.get().unwrap_or(p.sr.iterations),
                    "deblur" => p.sr.deblur = value.get().unwrap_or(p.sr.deblur),
                    "fusion" => p.sr.fusion = value.get().unwrap_or(p.sr.fusion),
                    "novelty-gate" => p.sr.novelty_gate = value.get().unwrap_or(p.sr.novelty_gate),
                    other => {
                        gst::warning!(CAT, imp = self, "unknown property {other}");
                        return;
                    }
                }
                s.update_auto();
                self.core.params_changed(s);
            }
        }
        gst::debug!(CAT, imp = self, "{} set", pspec.name());
        let latency_changed = s.params.latency_frames() != old_future;
        drop(guard);
        if latency_changed {
            let obj = self.obj();
            let _ = obj.post_message(gst::message::Latency::builder().src(&*obj).build());
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        if pspec.name() == "backend-in-use" {
            return lock(&self.core.state).as_ref().map(|st| st.denoiser.backend_description()).to_value();
        }
        let s = lock(&self.core.settings);
        let (p, o) = (&s.params, &s.options);
        match pspec.name() {
            "scale" => p.sr.scale.to_value(),
            "backend" => Backend::from_engine(o.kind).to_value(),
            "device-id" => devices_to_string(o).to_value(),
            "chunk-frames" => crate::transform::chunk_frames_to_property(o.chunk_frames).to_value(),
            "threads" => (o.threads as u32).to_value(),
            "pipeline-depth" => (o.pipeline_depth as u32).to_value(),
            "zero-copy" => s.zero_copy.to_value(),
            "temporal-past" => p.temporal_past.to_value(),
            "temporal-future" => p.temporal_future.to_value(),
            "search-radius" => p.search_radius.to_value(),
            "patch-radius" => p.patch_radius.to_value(),
            "strength" => p.strength.to_value(),
            "chroma-strength" => p.chroma_strength.to_value(),
            "sigma" => p.sigma.unwrap_or(SIGMA_UNSET).to_value(),
            "iterations" => p.sr.iterations.to_value(),
            "deblur" => p.sr.deblur.to_value(),
            "fusion" => p.sr.fusion.to_value(),
            "novelty-gate" => p.sr.novelty_gate.to_value(),
            other => {
                gst::warning!(CAT, imp = self, "unknown property {other}");
                glib::Value::from_type(pspec.value_type())
            }
        }
    }

    fn constructed(&self) {
        self.parent_constructed();
        let obj = self.obj();
        obj.set_qos(true);
        self.core.attach(obj.upcast_ref(), *CAT);
    }
}

impl GstObjectImpl for NlmUpscale {}

impl ElementImpl for NlmUpscale {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static ELEMENT_METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "NLM super-resolution upscaler",
                "Filter/Effect/Converter/Video/Scaler",
                "Multi-frame non-local means super-resolution by an integer factor, on CUDA or CPU",
                "nlmdenoise developers",
            )
        });
        Some(&*ELEMENT_METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static PAD_TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(crate::transform::pad_templates);
        PAD_TEMPLATES.as_ref()
    }
}

/// A width or height field of caps, scaled: times `scale` towards the source pad, divided by it
/// (exactly, or the range's multiples) towards the sink pad. None: no size fits.
fn scale_dimension(value: &glib::SendValue, scale: i32, up: bool) -> Option<glib::SendValue> {
    if let Ok(v) = value.get::<i32>() {
        return if up { v.checked_mul(scale).filter(|&s| s <= MAX_SIDE).map(|s| s.to_send_value()) } else { (v % scale == 0).then(|| (v / scale).to_send_value()) };
    }
    if let Ok(r) = value.get::<gst::IntRange<i32>>() {
        let (lo, hi) = if up { (r.min().saturating_mul(scale).min(MAX_SIDE), r.max().saturating_mul(scale).min(MAX_SIDE)) } else { ((r.min() + scale - 1) / scale, r.max() / scale) };
        return match (lo, hi) {
            (lo, hi) if lo > hi => None,
            (lo, hi) if lo == hi => Some(lo.to_send_value()),
            (lo, hi) => Some(gst::IntRange::new(lo.max(1), hi).to_send_value()),
        };
    }
    None
}

impl BaseTransformImpl for NlmUpscale {
    crate::transform::base_transform_via_core!();

    fn transform_caps(&self, direction: gst::PadDirection, caps: &gst::Caps, filter: Option<&gst::Caps>) -> Option<gst::Caps> {
        let scale = self.scale();
        let up = direction == gst::PadDirection::Sink;
        let mut out = gst::Caps::new_empty();
        {
            let out = out.get_mut().expect("new caps");
            for (s, features) in caps.iter_with_features() {
                let mut s = s.to_owned();
                let w = s.value("width").ok().and_then(|v| scale_dimension(v, scale, up));
                let h = s.value("height").ok().and_then(|v| scale_dimension(v, scale, up));
                match (s.has_field("width"), w, s.has_field("height"), h) {
                    (true, None, _, _) | (_, _, true, None) => continue,
                    (_, w, _, h) => {
                        if let Some(w) = w {
                            s.set_value("width", w);
                        }
                        if let Some(h) = h {
                            s.set_value("height", h);
                        }
                    }
                }
                out.append_structure_full(s, Some(features.to_owned()));
            }
        }
        gst::debug!(CAT, imp = self, "transformed {caps} ({direction:?}) into {out}");
        Some(match filter {
            Some(f) => f.intersect_with_mode(&out, gst::CapsIntersectMode::First),
            None => out,
        })
    }

    fn propose_allocation(&self, _decide_query: Option<&gst::query::Allocation>, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        // Input frames are read through VideoMeta, so upstream may use any strides and offsets.
        // The query is not passed downstream: its caps are of the other size.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        // Buffers that are the engine's own frames, where the format and caps allow.
        self.core.propose_input_pool(query);
        Ok(())
    }
}
