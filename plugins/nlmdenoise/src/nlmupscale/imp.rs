//! Implementation of the `nlmupscale` element: its own properties (`scale` and the fusion's
//! settings) and caps (output = input times `scale`); the shared properties are
//! [`crate::properties`], the frame flow (engine, draining, latency, allocation) the shared
//! [`crate::core::Core`], the computation the engine's [`nlmdenoise::sr`].

use std::sync::LazyLock;

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::subclass::prelude::*;

use nlmdenoise::params::{SR_BASE_STRENGTH, SR_MAX_DEBLUR, SR_MAX_SCALE, SR_STRENGTH_PER_SIGMA};
use nlmdenoise::{Params, SrParams};

use crate::caps::MAX_SIDE;
use crate::core::Core;
use crate::lock;
use crate::properties::{common_properties, Target, Words};
use crate::settings::Settings;

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| gst::DebugCategory::new("nlmupscale", gst::DebugColorFlags::empty(), Some("Multi-frame NLM super-resolution")));

pub struct NlmUpscale {
    core: Core,
}

/// The upscaler's settings before any property is set: `Params::upscaling`, and clean-input
/// strengths instead of an estimated noise level.
fn default_settings() -> Settings {
    Settings { params: Params::upscaling(SrParams::default().scale), estimate: false, base_strength: SR_BASE_STRENGTH, ..Settings::default() }
}

impl Default for NlmUpscale {
    fn default() -> Self {
        let core = Core::new("upscaler", "upscaling", crate::state::MetaPolicy::Scales);
        *lock(&core.settings) = default_settings();
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
            let defaults = default_settings();
            let sr = defaults.params.sr;
            let sigma = format!("Noise standard deviation of the input in 8-bit code values, to denoise while upscaling: sigma^2 is subtracted from patch distances and, unless strength/chroma-strength were set, the strengths follow it (hypot({SR_BASE_STRENGTH}, {SR_STRENGTH_PER_SIGMA} * sigma)). -1 (default): a clean input");
            let words = Words {
                device_id_nick: "CUDA device(s)",
                device_id: "CUDA device ordinal, a comma-separated list of ordinals (chunks spread over those devices), or 'all'",
                pipeline_depth: "Frames in flight on the GPU (adds that many frames of latency); 0 = synchronous",
                temporal_past: "Past frames fused (no added latency)",
                temporal_future: "Future frames fused; adds that many frames of latency",
                search_radius: "Low-resolution samples searched around each output sample's cell, in x and y",
                patch_radius: "Radius of the compared patches, in low-resolution samples",
                strength: "Strength h of the luma (and RGB) weights, 8-bit units; default: follows sigma when set",
                chroma_strength: "Strength h of the chroma weights, 8-bit units; default: follows sigma when set",
                sigma: &sigma,
                backend_in_use: "The backend the running stream computes on (read-only; empty before caps)",
            };
            let mut props = common_properties(&words, &defaults);
            props.extend([
            glib::ParamSpecUInt::builder("scale")
                .nick("Scale")
                .blurb("Integer upscaling factor: output width and height are the input's times this")
                .minimum(2)
                .maximum(SR_MAX_SCALE)
                .default_value(sr.scale)
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
            ]);
            props
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        // The shared table's 0 (nlmdenoise: pass frames through) means nothing here: an upscaler
        // always scales. strength 0 is refused; sigma 0 is a clean input, as -1.
        let zero = value.get::<f32>().is_ok_and(|v| v == 0.0);
        if zero && pspec.name() == "strength" {
            glib::g_warning!("nlmupscale", "strength 0 refused (nlmupscale always filters; 0.01 and up); the property keeps its value");
            return;
        }
        let clean = (-1.0f32).to_value();
        let value = if zero && pspec.name() == "sigma" { &clean } else { value };
        self.core.set_property(self.obj().upcast_ref(), value, pspec, |s, name, value| {
            let sr = &mut s.params.sr;
            match name {
                "scale" => sr.scale = value.get().unwrap_or(sr.scale),
                "iterations" => sr.iterations = value.get().unwrap_or(sr.iterations),
                "deblur" => sr.deblur = value.get().unwrap_or(sr.deblur),
                "fusion" => sr.fusion = value.get().unwrap_or(sr.fusion),
                "novelty-gate" => sr.novelty_gate = value.get().unwrap_or(sr.novelty_gate),
                _ => return None,
            }
            Some(Target::Params)
        });
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        self.core.property(self.obj().upcast_ref(), pspec, |s, name| {
            let sr = &s.params.sr;
            Some(match name {
                "scale" => sr.scale.to_value(),
                "iterations" => sr.iterations.to_value(),
                "deblur" => sr.deblur.to_value(),
                "fusion" => sr.fusion.to_value(),
                "novelty-gate" => sr.novelty_gate.to_value(),
                _ => return None,
            })
        })
    }

    fn constructed(&self) {
        self.parent_constructed();
        self.core.attach(self.obj().upcast_ref(), *CAT);
    }
}

impl GstObjectImpl for NlmUpscale {}

impl ElementImpl for NlmUpscale {
    crate::core::element_via_core!();

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
        static PAD_TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(crate::caps::pad_templates);
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
    crate::core::base_transform_via_core!();

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
        // In either memory (crate::cuda).
        let out = crate::caps::in_either_memory(&out);
        gst::debug!(CAT, imp = self, "transformed {caps} ({direction:?}) into {out}");
        Some(match filter {
            Some(f) => f.intersect_with_mode(&out, gst::CapsIntersectMode::First),
            None => out,
        })
    }

    fn propose_allocation(&self, _decide_query: Option<&gst::query::Allocation>, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        if self.core.propose_cuda_pool(query) {
            // Caps in CUDA memory: a pool of the pipeline's context (crate::cuda).
            return Ok(());
        }
        // Input frames are read through VideoMeta, so upstream may use any strides and offsets.
        // The query is not passed downstream: its caps are of the other size.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        // Buffers that are the engine's own frames, where the format and caps allow.
        self.core.propose_input_pool(query);
        Ok(())
    }
}
