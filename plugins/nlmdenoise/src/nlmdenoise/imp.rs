//! Implementation of the `nlmdenoise` element: its own properties (algorithm choice, BM3D and
//! NLM settings, the CUDA kernel's knobs, the noise estimate); the shared properties are
//! [`crate::properties`], the frame flow (engine, draining, latency, allocation) the shared
//! [`crate::core::Core`].

use std::sync::LazyLock;

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::subclass::prelude::*;

use nlmdenoise::params::{BM3D_MAX_GROUP, BM3D_MAX_SEARCH_RADIUS, BM3D_MAX_SEEDS, BM3D_MAX_SEED_RADIUS, MAX_SIGMA, MAX_WREF};
use nlmdenoise::Params;

use crate::core::Core;
use crate::enums::{Algorithm, Bm3dProfile, ChromaMode, Intermediate, Kernel, Planes, Weighting};
use crate::properties::{common_properties, Target, Words};
use crate::settings::{Settings, SIGMA_UNSET};
use crate::{lock, CAT};

/// How `nlmdenoise` describes the properties it shares with `nlmupscale`.
const WORDS: Words<'static> = Words {
    device_id_nick: "CUDA devices",
    device_id: "CUDA device ordinal (\"0\"), a comma list (\"0,1\") or \"all\"; with several devices chunks of frames go round-robin to one worker per device",
    pipeline_depth: "Frames in flight on the GPU (0 = synchronous); each adds one frame of latency. Ignored by the CPU backend",
    temporal_past: "Past frames searched (no added latency)",
    temporal_future: "Future frames searched; adds that many frames of latency",
    search_radius: "Radius of the search window: offsets -r..r in x and y",
    patch_radius: "Radius of the compared patches: (2r+1)^2 samples",
    strength: "Filtering strength h for luma, RGB and shared weights, in 8-bit code values (higher = smoother); 0 = pass frames through unchanged",
    chroma_strength: "Filtering strength h for chroma planes with independent weights, in 8-bit code values",
    sigma: "Noise standard deviation in 8-bit code values. NLM: 2*sigma^2 is subtracted from patch distances, and unless strength/chroma-strength were set they follow it (per sigma: 0.90 / 0.97 spatial, 0.71 / 0.85 with past frames, 0.68 / 0.81 with future frames); BM3D: its thresholds. -1 (default) = auto: estimated from the stream (sigma-estimate) unless strength or chroma-strength is set; 0 = pass frames through unchanged",
    backend_in_use: "The backend (and device, kernel) the running stream denoises on; empty before caps are negotiated",
};

/// A `bm3d-*` integer property: -1 = the profile's value.
fn profile_value(value: &glib::Value) -> Option<u32> {
    let v: i32 = value.get().unwrap_or(-1);
    (v >= 0).then_some(v as u32)
}

/// Why `value` of `bm3d-*` integer property `name` can never be used, whatever the others (the
/// property's range cannot say it); `None`: acceptable. Such a value is refused when set, as an
/// out-of-range one is, instead of failing when the stream starts.
fn bm3d_value_refused(name: &str, value: &glib::Value) -> Option<&'static str> {
    let v: i32 = value.get().ok()?;
    match name {
        "bm3d-steps" if v == 0 => Some("1 or 2 (-1: the profile's)"),
        "bm3d-patch-size" if v >= 0 && v != 4 && v != 8 => Some("4 or 8 (-1: the profile's)"),
        "bm3d-block-step" if v == 0 => Some("1 to the patch size (-1: the profile's)"),
        "bm3d-hard-block-step" if v == 0 => Some("1 to the patch size (-1: bm3d-block-step's)"),
        "bm3d-group-size" | "bm3d-wiener-group-size" if v >= 0 && !(v as u32).is_power_of_two() => Some("a power of two up to 32 (-1: the profile's)"),
        _ => None,
    }
}

/// A `bm3d-*` float property: negative = the profile's value.
fn profile_float(value: &glib::Value) -> Option<f32> {
    let v: f32 = value.get().unwrap_or(-1.0);
    (v >= 0.0).then_some(v)
}

fn profile_property(v: Option<u32>) -> glib::Value {
    v.map(|v| v as i32).unwrap_or(-1).to_value()
}

pub struct NlmDenoise {
    core: Core,
}

impl Default for NlmDenoise {
    fn default() -> Self {
        NlmDenoise { core: Core::new("denoiser", "denoising", crate::state::MetaPolicy::KeepsGeometry) }
    }
}

#[glib::object_subclass]
impl ObjectSubclass for NlmDenoise {
    const NAME: &'static str = "GstNlmDenoise";
    type Type = super::NlmDenoise;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for NlmDenoise {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let p = Params::default();
            let o = nlmdenoise::BackendOptions::default();
            let mut props = common_properties(&WORDS, &Settings::default());
            props.extend([
            glib::ParamSpecEnum::builder_with_default("algorithm", Algorithm::Nlm)
                .nick("Algorithm")
                .blurb("Denoising algorithm (changing it while playing finishes the held frames first); bm3d takes its noise level from sigma (or the estimate, sigma=-1)")
                .mutable_playing()
                .build(),
            glib::ParamSpecEnum::builder_with_default("bm3d-profile", Bm3dProfile::Normal)
                .nick("BM3D profile")
                .blurb("BM3D settings chosen together (the bm3d-* properties below replace single values of it); from sigma 30 fast and normal search wider")
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-steps")
                .nick("BM3D steps")
                .blurb("1: hard thresholding only; 2: then the Wiener step (with a temporal window, two steps read twice as many frames); -1: the profile's")
                .minimum(-1)
                .maximum(2)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-patch-size")
                .nick("BM3D patch size")
                .blurb("Side of the patches: 4 or 8; -1: the profile's")
                .minimum(-1)
                .maximum(8)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-search-radius")
                .nick("BM3D search radius")
                .blurb("Block matching searches offsets -r..r of the target frame; -1: the profile's")
                .minimum(-1)
                .maximum(BM3D_MAX_SEARCH_RADIUS as i32)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-block-step")
                .nick("BM3D block step")
                .blurb("Pixels between reference patches (1..patch size; smaller = better and slower); -1: the profile's")
                .minimum(-1)
                .maximum(8)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-hard-block-step")
                .nick("BM3D hard-thresholding block step")
                .blurb("Pixels between reference patches in the hard-thresholding step alone (the basic estimate; 1..patch size); -1: bm3d-block-step's")
                .minimum(-1)
                .maximum(8)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-group-size")
                .nick("BM3D group size")
                .blurb("Most patches per group, hard-thresholding step (power of two up to 32); -1: the profile's")
                .minimum(-1)
                .maximum(BM3D_MAX_GROUP as i32)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-wiener-group-size")
                .nick("BM3D Wiener group size")
                .blurb("Most patches per group, Wiener step (power of two up to 32); -1: the profile's")
                .minimum(-1)
                .maximum(BM3D_MAX_GROUP as i32)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-wiener-seeds")
                .nick("BM3D Wiener seeds")
                .blurb("bm3d-seeds for the Wiener step alone (its search runs on the basic estimate); -1: bm3d-seeds' where set, else the profile's (2 for normal)")
                .minimum(-1)
                .maximum(BM3D_MAX_SEEDS as i32)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-seeds")
                .nick("BM3D seeds")
                .blurb("Other frames of the window: patches around this many best matches of the neighbouring frame are searched (predictive search); -1: the profile's")
                .minimum(-1)
                .maximum(BM3D_MAX_SEEDS as i32)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-seed-radius")
                .nick("BM3D seed radius")
                .blurb("Predictive search radius around each seed; -1: the profile's")
                .minimum(-1)
                .maximum(BM3D_MAX_SEED_RADIUS as i32)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-window-references")
                .nick("BM3D window references")
                .blurb("V-BM3D: 1 = reference patches in every frame of the temporal window, each group's patches in the current frame aggregated into it (cleaner, one step per window frame); 0 = in the current frame only; -1: the profile's (1 for normal and high)")
                .minimum(-1)
                .maximum(1)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-frame-groups")
                .nick("BM3D per-frame groups")
                .blurb("1 = every frame's reference patches grouped once within the window centred on their own frame, each member added to its own frame (V-BM3D's aggregation: the picture of bm3d-window-references; reads past + future frames on each side per step, so more latency); 0 = off (each output's own groups: less latency); -1: on where temporal-future > 0 (and past + future <= 7), off for live windows. Every backend")
                .minimum(-1)
                .maximum(1)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-motion")
                .nick("BM3D motion seeds")
                .blurb("1 = motion seeds: the predictive search into each next frame also starts where the coarse motion of the frame pair (8-sample cells, 32-sample blocks, up to 16 samples) moves its best match, so groups follow motion faster than the seed radius a frame; 0 = off; -1 = the profile's (on in every profile)")
                .minimum(-1)
                .maximum(1)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecInt::builder("bm3d-bayes")
                .nick("BM3D Bayesian estimate")
                .blurb("1 = the Wiener step's estimate of each group averaged with an NL-Bayes estimate from the group's own mean and covariance (about 0.2 dB cleaner at sigma 10-40, costlier); 0 = off; -1 = the profile's (off in every profile). Two-step runs only")
                .minimum(-1)
                .maximum(1)
                .default_value(-1)
                .mutable_playing()
                .build(),
            glib::ParamSpecFloat::builder("bm3d-threshold")
                .nick("BM3D grouping threshold")
                .blurb("Hard-thresholding step: largest mean squared distance (8-bit units squared) of a grouped patch; -1: the profile's (2500, or 3 sigma^2 where larger)")
                .minimum(-1.0)
                .maximum(65025.0)
                .default_value(-1.0)
                .mutable_playing()
                .build(),
            glib::ParamSpecFloat::builder("bm3d-wiener-threshold")
                .nick("BM3D Wiener grouping threshold")
                .blurb("Wiener step: largest mean squared distance on the basic estimate; -1: the profile's (400)")
                .minimum(-1.0)
                .maximum(65025.0)
                .default_value(-1.0)
                .mutable_playing()
                .build(),
            glib::ParamSpecFloat::builder("bm3d-lambda")
                .nick("BM3D hard threshold")
                .blurb("Hard threshold in units of sigma; -1: the profile's (2.7)")
                .minimum(-1.0)
                .maximum(20.0)
                .default_value(-1.0)
                .mutable_playing()
                .build(),
            glib::ParamSpecFloat::builder("chroma-sigma")
                .nick("Chroma noise sigma")
                .blurb("BM3D: noise sigma of the chroma planes in 8-bit code values; -1 = sigma")
                .minimum(SIGMA_UNSET)
                .maximum(MAX_SIGMA)
                .default_value(SIGMA_UNSET)
                .mutable_playing()
                .build(),
            glib::ParamSpecEnum::builder_with_default("weighting", Weighting::Welsch)
                .nick("Weighting")
                .blurb("Weight function of the patch distance")
                .mutable_playing()
                .build(),
            glib::ParamSpecUInt::builder("aggregation-radius")
                .nick("Aggregation radius")
                .blurb("Patch-wise aggregation: each patch's weight also counts for the samples within this radius of its centre (0 = pixel-wise NLM, up to patch-radius; not with kernel=multipass). patch-radius=3 aggregation-radius=2 wref=2: about 0.6 dB cleaner than the defaults at 3x their GPU and 1.4x their CPU time")
                .maximum(nlmdenoise::params::MAX_PATCH_RADIUS)
                .default_value(p.aggregation_radius)
                .mutable_playing()
                .build(),
            glib::ParamSpecFloat::builder("wref")
                .nick("Centre weight")
                .blurb("Weight of the centre sample as a multiple of the largest other weight")
                .minimum(0.0)
                .maximum(MAX_WREF)
                .default_value(p.wref)
                .mutable_playing()
                .controllable()
                .build(),
            glib::ParamSpecEnum::builder_with_default("chroma-mode", ChromaMode::Independent)
                .nick("Chroma mode")
                .blurb("How chroma weights are obtained (joint needs a 4:4:4 or RGB format)")
                .mutable_playing()
                .build(),
            glib::ParamSpecEnum::builder_with_default("planes", Planes::All)
                .nick("Planes")
                .blurb("Planes to denoise; the others are copied (luma/chroma need a YUV format)")
                .mutable_playing()
                .build(),
            glib::ParamSpecEnum::builder_with_default("kernel", Kernel::Auto)
                .nick("CUDA kernel")
                .blurb("GPU kernel: fused single pass or multi-pass (CUDA only)")
                .mutable_ready()
                .build(),
            glib::ParamSpecUInt::builder("offsets-per-pass")
                .nick("Offsets per pass")
                .blurb("Search offsets per pass of the multi-pass kernel (CUDA only)")
                .minimum(1)
                .maximum(4)
                .default_value(o.nlm.offsets_per_pass)
                .mutable_ready()
                .build(),
            glib::ParamSpecEnum::builder_with_default("intermediate", Intermediate::Unorm10)
                .nick("Intermediate storage")
                .blurb("Storage of the multi-pass kernel's distances and weights (CUDA only)")
                .mutable_ready()
                .build(),
            glib::ParamSpecFloat::builder("sigma-estimate")
                .nick("Estimated noise sigma")
                .blurb("With sigma=-1 (auto): the noise sigma of luma (RGB: all planes) estimated from the stream, 8-bit code values; -1 before the first estimate or without auto")
                .minimum(-1.0)
                .maximum(MAX_SIGMA)
                .default_value(-1.0)
                .read_only()
                .build(),
            glib::ParamSpecFloat::builder("chroma-sigma-estimate")
                .nick("Estimated chroma noise sigma")
                .blurb("With sigma=-1 (auto): the noise sigma of the chroma planes estimated from the stream, 8-bit code values; -1 when none")
                .minimum(-1.0)
                .maximum(MAX_SIGMA)
                .default_value(-1.0)
                .read_only()
                .build(),
            ]);
            props
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        if let Some(expected) = bm3d_value_refused(pspec.name(), value) {
            glib::g_warning!("nlmdenoise", "value {value:?} of property '{}' refused: expected {expected}; the property keeps its value", pspec.name());
            return;
        }
        self.core.set_property(self.obj().upcast_ref(), value, pspec, |s, name, value| {
            let (p, o) = (&mut s.params, &mut s.options);
            match name {
                "kernel" => o.nlm.gpu_kernel = value.get::<Kernel>().unwrap_or_default().into(),
                "offsets-per-pass" => o.nlm.offsets_per_pass = value.get::<u32>().unwrap_or(3),
                "intermediate" => o.nlm.intermediate = value.get::<Intermediate>().unwrap_or_default().into(),
                "algorithm" => p.algorithm = value.get::<Algorithm>().unwrap_or_default().into(),
                "bm3d-profile" => p.bm3d.profile = value.get::<Bm3dProfile>().unwrap_or_default().into(),
                "bm3d-steps" => p.bm3d.steps = profile_value(value),
                "bm3d-patch-size" => p.bm3d.patch_size = profile_value(value),
                "bm3d-search-radius" => p.bm3d.search_radius = profile_value(value),
                "bm3d-block-step" => p.bm3d.block_step = profile_value(value),
                "bm3d-hard-block-step" => p.bm3d.hard_block_step = profile_value(value),
                "bm3d-group-size" => p.bm3d.group_size = profile_value(value),
                "bm3d-wiener-group-size" => p.bm3d.wiener_group_size = profile_value(value),
                "bm3d-seeds" => p.bm3d.seeds = profile_value(value),
                "bm3d-wiener-seeds" => p.bm3d.wiener_seeds = profile_value(value),
                "bm3d-seed-radius" => p.bm3d.seed_radius = profile_value(value),
                "bm3d-window-references" => p.bm3d.window_references = profile_value(value).map(|v| v == 1),
                "bm3d-frame-groups" => p.bm3d.frame_groups = profile_value(value).map(|v| v == 1),
                "bm3d-motion" => p.bm3d.motion = profile_value(value).map(|v| v == 1),
                "bm3d-bayes" => p.bm3d.bayes = profile_value(value).map(|v| v == 1),
                "bm3d-threshold" => p.bm3d.threshold = profile_float(value),
                "bm3d-wiener-threshold" => p.bm3d.wiener_threshold = profile_float(value),
                "bm3d-lambda" => p.bm3d.lambda = profile_float(value),
                "chroma-sigma" => {
                    let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                    p.bm3d.chroma_sigma = if v < 0.0 { None } else { Some(v) };
                }
                "aggregation-radius" => p.aggregation_radius = value.get().unwrap_or(p.aggregation_radius),
                "wref" => p.wref = value.get().unwrap_or(p.wref),
                "weighting" => p.weighting = value.get::<Weighting>().unwrap_or_default().into(),
                "chroma-mode" => p.chroma_mode = value.get::<ChromaMode>().unwrap_or_default().into(),
                "planes" => p.planes = value.get::<Planes>().unwrap_or_default().into(),
                _ => return None,
            }
            // The CUDA kernel's knobs are backend options; the rest are engine parameters.
            Some(if matches!(name, "kernel" | "offsets-per-pass" | "intermediate") { Target::Options } else { Target::Params })
        });
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        if matches!(pspec.name(), "sigma-estimate" | "chroma-sigma-estimate") {
            let e = lock(&self.core.state).as_ref().and_then(|st| st.denoiser.noise_estimate());
            let v = match (pspec.name(), e) {
                ("sigma-estimate", Some(e)) => e.luma,
                (_, Some(e)) => e.chroma.unwrap_or(-1.0),
                _ => -1.0,
            };
            return v.to_value();
        }
        self.core.property(self.obj().upcast_ref(), pspec, |s, name| {
            let (p, o) = (&s.params, &s.options);
            Some(match name {
                "kernel" => Kernel::from(o.nlm.gpu_kernel).to_value(),
                "offsets-per-pass" => o.nlm.offsets_per_pass.to_value(),
                "intermediate" => Intermediate::from(o.nlm.intermediate).to_value(),
                "algorithm" => Algorithm::from(p.algorithm).to_value(),
                "bm3d-profile" => Bm3dProfile::from(p.bm3d.profile).to_value(),
                "bm3d-steps" => profile_property(p.bm3d.steps),
                "bm3d-patch-size" => profile_property(p.bm3d.patch_size),
                "bm3d-search-radius" => profile_property(p.bm3d.search_radius),
                "bm3d-block-step" => profile_property(p.bm3d.block_step),
                "bm3d-hard-block-step" => profile_property(p.bm3d.hard_block_step),
                "bm3d-group-size" => profile_property(p.bm3d.group_size),
                "bm3d-wiener-group-size" => profile_property(p.bm3d.wiener_group_size),
                "bm3d-seeds" => profile_property(p.bm3d.seeds),
                "bm3d-wiener-seeds" => profile_property(p.bm3d.wiener_seeds),
                "bm3d-seed-radius" => profile_property(p.bm3d.seed_radius),
                "bm3d-window-references" => profile_property(p.bm3d.window_references.map(u32::from)),
                "bm3d-frame-groups" => profile_property(p.bm3d.frame_groups.map(u32::from)),
                "bm3d-motion" => profile_property(p.bm3d.motion.map(u32::from)),
                "bm3d-bayes" => profile_property(p.bm3d.bayes.map(u32::from)),
                "bm3d-threshold" => p.bm3d.threshold.unwrap_or(-1.0).to_value(),
                "bm3d-wiener-threshold" => p.bm3d.wiener_threshold.unwrap_or(-1.0).to_value(),
                "bm3d-lambda" => p.bm3d.lambda.unwrap_or(-1.0).to_value(),
                "chroma-sigma" => p.bm3d.chroma_sigma.unwrap_or(SIGMA_UNSET).to_value(),
                "aggregation-radius" => p.aggregation_radius.to_value(),
                "wref" => p.wref.to_value(),
                "weighting" => Weighting::from(p.weighting).to_value(),
                "chroma-mode" => ChromaMode::from(p.chroma_mode).to_value(),
                "planes" => Planes::from(p.planes).to_value(),
                _ => return None,
            })
        })
    }

    fn constructed(&self) {
        self.parent_constructed();
        self.core.attach(self.obj().upcast_ref(), *CAT);
    }
}

impl GstObjectImpl for NlmDenoise {}

impl ElementImpl for NlmDenoise {
    crate::core::element_via_core!();

    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static ELEMENT_METADATA: LazyLock<gst::subclass::ElementMetadata> =
            LazyLock::new(|| gst::subclass::ElementMetadata::new("Temporal NLM denoiser", "Filter/Effect/Video", "Temporal non-local means video denoising on CUDA or CPU", "nlmdenoise developers"));
        Some(&*ELEMENT_METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static PAD_TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(crate::caps::pad_templates);
        PAD_TEMPLATES.as_ref()
    }
}

impl BaseTransformImpl for NlmDenoise {
    crate::core::base_transform_via_core!();

    fn transform_caps(&self, _direction: gst::PadDirection, caps: &gst::Caps, filter: Option<&gst::Caps>) -> Option<gst::Caps> {
        // Same frames either way, in either memory (crate::cuda).
        let out = crate::caps::in_either_memory(caps);
        Some(match filter {
            Some(f) => f.intersect_with_mode(&out, gst::CapsIntersectMode::First),
            None => out,
        })
    }

    fn propose_allocation(&self, decide_query: Option<&gst::query::Allocation>, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        if self.core.propose_cuda_pool(query) {
            // Caps in CUDA memory: a pool of the pipeline's context (crate::cuda).
            self.core.offer_downstream_metas(decide_query, query);
            return Ok(());
        }
        // Input frames are read through VideoMeta, so upstream may use any strides and offsets.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        // Buffers that are the engine's own frames, where the format and caps allow.
        self.core.propose_input_pool(query);
        // What downstream takes and stays valid here (overlay compositions: not burnt in).
        self.core.offer_downstream_metas(decide_query, query);
        if decide_query.is_none() {
            return self.parent_propose_allocation(decide_query, query);
        }
        Ok(())
    }
}
