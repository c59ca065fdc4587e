//! Implementation of the `nlmdenoise` element: its properties and caps; the frame flow (engine,
//! draining, latency, allocation) is the shared [`crate::transform::Core`].

use std::sync::LazyLock;

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::prelude::*;

use nlmdenoise::device::Devices;
use nlmdenoise::nlm::{GpuKernel, Intermediate as EngineIntermediate};
use nlmdenoise::params::{
    BM3D_MAX_GROUP, BM3D_MAX_SEARCH_RADIUS, BM3D_MAX_SEEDS, BM3D_MAX_SEED_RADIUS, MAX_PATCH_RADIUS, MAX_SEARCH_RADIUS, MAX_SIGMA, MAX_STRENGTH, MAX_TEMPORAL_FUTURE, MAX_TEMPORAL_PAST, MAX_WREF,
};
use nlmdenoise::BackendOptions;
use nlmdenoise::{ChromaMode as EngineChromaMode, Params, PixelFormat, PlaneSelection, Weighting as EngineWeighting};

use super::{Algorithm, Backend, Bm3dProfile, ChromaMode, Intermediate, Kernel, Planes, Weighting};
use crate::transform::{lock, Core};

pub(crate) static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| gst::DebugCategory::new("nlmdenoise", gst::DebugColorFlags::empty(), Some("Temporal non-local means video denoiser")));

/// Largest frame side the engine accepts.
pub const MAX_SIDE: i32 = 1 << 16;
/// Upper bound of the `pipeline-depth` property.
pub const MAX_PIPELINE_DEPTH: u32 = 4;
/// Upper bound of the `threads` property.
pub const MAX_THREADS: u32 = 1024;
/// `sigma` value meaning "not set" (no noise-variance subtraction).
pub const SIGMA_UNSET: f32 = -1.0;

/// The GStreamer format of an engine format (every engine format has one).
pub fn format_to_gst(format: PixelFormat) -> gst_video::VideoFormat {
    gst_video::VideoFormat::from_string(format.name())
}

/// The engine format of a GStreamer format, if the engine supports it.
pub fn gst_to_format(format: gst_video::VideoFormat) -> Option<PixelFormat> {
    PixelFormat::ALL.into_iter().find(|f| format_to_gst(*f) == format && format != gst_video::VideoFormat::Unknown)
}

/// Sets `options.device_id` / `options.devices` from a `device-id` value: one ordinal ("0"), a
/// comma list ("0,1") or "all".
pub fn apply_devices(options: &mut BackendOptions, text: &str) -> Result<(), String> {
    let devices: Devices = text.parse().map_err(|e: nlmdenoise::Error| e.to_string())?;
    match devices {
        Devices::List(v) if v.len() == 1 => {
            options.device_id = v[0];
            options.devices = Devices::Default;
        }
        Devices::List(v) => {
            options.device_id = v[0];
            options.devices = Devices::List(v);
        }
        other => options.devices = other,
    }
    Ok(())
}

/// The `device-id` value of `options`.
pub fn devices_to_string(options: &BackendOptions) -> String {
    match &options.devices {
        Devices::Default => options.device_id.to_string(),
        other => other.to_string(),
    }
}

/// A `bm3d-*` integer property: -1 = the profile's value.
fn profile_value(value: &glib::Value) -> Option<u32> {
    let v: i32 = value.get().unwrap_or(-1);
    (v >= 0).then_some(v as u32)
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
        NlmDenoise { core: Core::new("denoiser", "denoising") }
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
            let o = BackendOptions::default();
            vec![
                glib::ParamSpecEnum::builder_with_default("backend", Backend::Auto)
                    .nick("Backend")
                    .blurb("Compute backend: auto = CUDA when a usable GPU and NVRTC are present, else CPU, and CPU from then on if the GPU fails mid-stream; cuda = fail when unavailable or failing")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("device-id")
                    .nick("CUDA devices")
                    .blurb("CUDA device ordinal (\"0\"), a comma list (\"0,1\") or \"all\"; with several devices chunks of frames go round-robin to one worker per device")
                    .default_value(Some("0"))
                    .mutable_ready()
                    .build(),
                crate::transform::chunk_frames_property(),
                glib::ParamSpecUInt::builder("threads")
                    .nick("CPU threads")
                    .blurb("Worker threads of the CPU backend (0 = all cores)")
                    .maximum(MAX_THREADS)
                    .default_value(o.threads as u32)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("algorithm", Algorithm::Nlm)
                    .nick("Algorithm")
                    .blurb("Denoising algorithm (changing it while playing finishes the held frames first); bm3d takes its noise level from sigma (or the estimate, sigma=-1)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("bm3d-profile", Bm3dProfile::Normal)
                    .nick("BM3D profile")
                    .blurb("BM3D settings chosen together (the bm3d-* properties below replace single values of it)")
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
                    .blurb("V-BM3D: 1 = reference patches in every frame of the temporal window, each group's patches in the current frame aggregated into it (cleaner, one step per window frame); 0 = in the current frame only; -1: the profile's (1 for high)")
                    .minimum(-1)
                    .maximum(1)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("bm3d-threshold")
                    .nick("BM3D grouping threshold")
                    .blurb("Hard-thresholding step: largest mean squared distance (8-bit units squared) of a grouped patch; -1: the profile's (2500)")
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
                glib::ParamSpecFloat::builder("strength")
                    .nick("Strength")
                    .blurb("Filtering strength h for luma, RGB and shared weights, in 8-bit code values (higher = smoother)")
                    .minimum(0.01)
                    .maximum(MAX_STRENGTH)
                    .default_value(p.strength)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("chroma-strength")
                    .nick("Chroma strength")
                    .blurb("Filtering strength h for chroma planes with independent weights, in 8-bit code values")
                    .minimum(0.01)
                    .maximum(MAX_STRENGTH)
                    .default_value(p.chroma_strength)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("search-radius")
                    .nick("Search radius")
                    .blurb("Radius of the search window: offsets -r..r in x and y")
                    .maximum(MAX_SEARCH_RADIUS)
                    .default_value(p.search_radius)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("patch-radius")
                    .nick("Patch radius")
                    .blurb("Radius of the compared patches: (2r+1)^2 samples")
                    .maximum(MAX_PATCH_RADIUS)
                    .default_value(p.patch_radius)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("temporal-past")
                    .nick("Past frames")
                    .blurb("Past frames searched (no added latency)")
                    .maximum(MAX_TEMPORAL_PAST)
                    .default_value(p.temporal_past)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("temporal-future")
                    .nick("Future frames")
                    .blurb("Future frames searched; adds that many frames of latency")
                    .maximum(MAX_TEMPORAL_FUTURE)
                    .default_value(p.temporal_future)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("weighting", Weighting::Welsch)
                    .nick("Weighting")
                    .blurb("Weight function of the patch distance")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("wref")
                    .nick("Centre weight")
                    .blurb("Weight of the centre sample as a multiple of the largest other weight")
                    .minimum(0.0)
                    .maximum(MAX_WREF)
                    .default_value(p.wref)
                    .mutable_playing()
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
                glib::ParamSpecFloat::builder("sigma")
                    .nick("Noise sigma")
                    .blurb("Noise standard deviation in 8-bit code values. NLM: 2*sigma^2 is subtracted from patch distances, and unless strength/chroma-strength were set they follow it (per sigma: 0.90 / 0.97 spatial, 0.71 / 0.85 with past frames, 0.68 / 0.81 with future frames); BM3D: its thresholds. -1 (default) = auto: estimated from the stream (sigma-estimate) unless strength or chroma-strength is set")
                    .minimum(SIGMA_UNSET)
                    .maximum(MAX_SIGMA)
                    .default_value(p.sigma.unwrap_or(SIGMA_UNSET))
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
                crate::transform::zero_copy_property(),
                glib::ParamSpecUInt::builder("pipeline-depth")
                    .nick("Pipeline depth")
                    .blurb("Frames in flight on the GPU (0 = synchronous); each adds one frame of latency. Ignored by the CPU backend")
                    .maximum(MAX_PIPELINE_DEPTH)
                    .default_value(o.pipeline_depth as u32)
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
                glib::ParamSpecString::builder("backend-in-use")
                    .nick("Backend in use")
                    .blurb("The backend (and device, kernel) the running stream denoises on; empty before caps are negotiated")
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
                    Err(e) => {
                        gst::error!(CAT, imp = self, "device-id: {e}");
                        s.bad_device_id = Some(format!("device-id '{text}': {e}"));
                        return;
                    }
                }
            }
            "chunk-frames" => s.options.chunk_frames = crate::transform::chunk_frames_from_property(value.get::<u32>().unwrap_or(1)),
            "threads" => s.options.threads = value.get::<u32>().unwrap_or(0) as usize,
            "kernel" => {
                s.options.nlm.gpu_kernel = match value.get::<Kernel>().unwrap_or_default() {
                    Kernel::Auto => GpuKernel::Auto,
                    Kernel::Fused => GpuKernel::Fused,
                    Kernel::Multipass => GpuKernel::Multipass,
                }
            }
            "offsets-per-pass" => s.options.nlm.offsets_per_pass = value.get::<u32>().unwrap_or(3),
            "intermediate" => {
                s.options.nlm.intermediate = match value.get::<Intermediate>().unwrap_or_default() {
                    Intermediate::F32 => EngineIntermediate::F32,
                    Intermediate::F16 => EngineIntermediate::F16,
                    Intermediate::Unorm10 => EngineIntermediate::Unorm10,
                }
            }
            "pipeline-depth" => s.options.pipeline_depth = value.get::<u32>().unwrap_or(0) as usize,
            "zero-copy" => s.zero_copy = value.get().unwrap_or(true),
            name => {
                let p = &mut s.params;
                match name {
                    "algorithm" => p.algorithm = value.get::<Algorithm>().unwrap_or_default().to_engine(),
                    "bm3d-profile" => p.bm3d.profile = value.get::<Bm3dProfile>().unwrap_or_default().to_engine(),
                    "bm3d-steps" => p.bm3d.steps = profile_value(value),
                    "bm3d-patch-size" => p.bm3d.patch_size = profile_value(value),
                    "bm3d-search-radius" => p.bm3d.search_radius = profile_value(value),
                    "bm3d-block-step" => p.bm3d.block_step = profile_value(value),
                    "bm3d-group-size" => p.bm3d.group_size = profile_value(value),
                    "bm3d-wiener-group-size" => p.bm3d.wiener_group_size = profile_value(value),
                    "bm3d-seeds" => p.bm3d.seeds = profile_value(value),
                    "bm3d-seed-radius" => p.bm3d.seed_radius = profile_value(value),
                    "bm3d-window-references" => p.bm3d.window_references = profile_value(value).map(|v| v == 1),
                    "bm3d-threshold" => p.bm3d.threshold = profile_float(value),
                    "bm3d-wiener-threshold" => p.bm3d.wiener_threshold = profile_float(value),
                    "bm3d-lambda" => p.bm3d.lambda = profile_float(value),
                    "chroma-sigma" => {
                        let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                        p.bm3d.chroma_sigma = if v < 0.0 { None } else { Some(v) };
                    }
                    "strength" => {
                        p.strength = value.get().unwrap_or(p.strength);
                        s.strength_set = true;
                    }
                    "chroma-strength" => {
                        p.chroma_strength = value.get().unwrap_or(p.chroma_strength);
                        s.strength_set = true;
                    }
                    "search-radius" => p.search_radius = value.get().unwrap_or(p.search_radius),
                    "patch-radius" => p.patch_radius = value.get().unwrap_or(p.patch_radius),
                    "temporal-past" => p.temporal_past = value.get().unwrap_or(p.temporal_past),
                    "temporal-future" => p.temporal_future = value.get().unwrap_or(p.temporal_future),
                    "wref" => p.wref = value.get().unwrap_or(p.wref),
                    "weighting" => {
                        p.weighting = match value.get::<Weighting>().unwrap_or_default() {
                            Weighting::Welsch => EngineWeighting::Welsch,
                            Weighting::Bisquare => EngineWeighting::Bisquare,
                        }
                    }
                    "chroma-mode" => {
                        p.chroma_mode = match value.get::<ChromaMode>().unwrap_or_default() {
                            ChromaMode::Independent => EngineChromaMode::Independent,
                            ChromaMode::LumaGuided => EngineChromaMode::LumaGuided,
                            ChromaMode::Joint => EngineChromaMode::Joint,
                        }
                    }
                    "planes" => {
                        p.planes = match value.get::<Planes>().unwrap_or_default() {
                            Planes::All => PlaneSelection::All,
                            Planes::Luma => PlaneSelection::Luma,
                            Planes::Chroma => PlaneSelection::Chroma,
                        }
                    }
                    "sigma" => {
                        let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                        p.sigma = if v < 0.0 { None } else { Some(v) };
                    }
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
            // Let the pipeline query the new latency.
            let obj = self.obj();
            let _ = obj.post_message(gst::message::Latency::builder().src(&*obj).build());
        }
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
        if pspec.name() == "backend-in-use" {
            return lock(&self.core.state).as_ref().map(|st| st.denoiser.backend_description()).to_value();
        }
        let s = lock(&self.core.settings);
        let p = &s.params;
        let o = &s.options;
        match pspec.name() {
            "backend" => Backend::from_engine(o.kind).to_value(),
            "device-id" => devices_to_string(o).to_value(),
            "chunk-frames" => crate::transform::chunk_frames_to_property(o.chunk_frames).to_value(),
            "threads" => (o.threads as u32).to_value(),
            "kernel" => match o.nlm.gpu_kernel {
                GpuKernel::Auto => Kernel::Auto,
                GpuKernel::Fused => Kernel::Fused,
                GpuKernel::Multipass => Kernel::Multipass,
            }
            .to_value(),
            "offsets-per-pass" => o.nlm.offsets_per_pass.to_value(),
            "intermediate" => match o.nlm.intermediate {
                EngineIntermediate::F32 => Intermediate::F32,
                EngineIntermediate::F16 => Intermediate::F16,
                EngineIntermediate::Unorm10 => Intermediate::Unorm10,
            }
            .to_value(),
            "pipeline-depth" => (o.pipeline_depth as u32).to_value(),
            "zero-copy" => s.zero_copy.to_value(),
            "algorithm" => Algorithm::from_engine(p.algorithm).to_value(),
            "bm3d-profile" => Bm3dProfile::from_engine(p.bm3d.profile).to_value(),
            "bm3d-steps" => profile_property(p.bm3d.steps),
            "bm3d-patch-size" => profile_property(p.bm3d.patch_size),
            "bm3d-search-radius" => profile_property(p.bm3d.search_radius),
            "bm3d-block-step" => profile_property(p.bm3d.block_step),
            "bm3d-group-size" => profile_property(p.bm3d.group_size),
            "bm3d-wiener-group-size" => profile_property(p.bm3d.wiener_group_size),
            "bm3d-seeds" => profile_property(p.bm3d.seeds),
            "bm3d-seed-radius" => profile_property(p.bm3d.seed_radius),
            "bm3d-window-references" => profile_property(p.bm3d.window_references.map(u32::from)),
            "bm3d-threshold" => p.bm3d.threshold.unwrap_or(-1.0).to_value(),
            "bm3d-wiener-threshold" => p.bm3d.wiener_threshold.unwrap_or(-1.0).to_value(),
            "bm3d-lambda" => p.bm3d.lambda.unwrap_or(-1.0).to_value(),
            "chroma-sigma" => p.bm3d.chroma_sigma.unwrap_or(SIGMA_UNSET).to_value(),
            "strength" => p.strength.to_value(),
            "chroma-strength" => p.chroma_strength.to_value(),
            "search-radius" => p.search_radius.to_value(),
            "patch-radius" => p.patch_radius.to_value(),
            "temporal-past" => p.temporal_past.to_value(),
            "temporal-future" => p.temporal_future.to_value(),
            "wref" => p.wref.to_value(),
            "weighting" => match p.weighting {
                EngineWeighting::Welsch => Weighting::Welsch,
                EngineWeighting::Bisquare => Weighting::Bisquare,
            }
            .to_value(),
            "chroma-mode" => match p.chroma_mode {
                EngineChromaMode::Independent => ChromaMode::Independent,
                EngineChromaMode::LumaGuided => ChromaMode::LumaGuided,
                EngineChromaMode::Joint => ChromaMode::Joint,
            }
            .to_value(),
            "planes" => match p.planes {
                PlaneSelection::All => Planes::All,
                PlaneSelection::Luma => Planes::Luma,
                PlaneSelection::Chroma => Planes::Chroma,
            }
            .to_value(),
            "sigma" => p.sigma.unwrap_or(SIGMA_UNSET).to_value(),
            // Every installed property is handled above; GObject never asks for another.
            _ => pspec.default_value().clone(),
        }
    }

    fn constructed(&self) {
        self.parent_constructed();
        let obj = self.obj();
        obj.set_qos(true);
        self.core.attach(obj.upcast_ref(), *CAT);
    }
}

impl GstObjectImpl for NlmDenoise {}

impl ElementImpl for NlmDenoise {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static ELEMENT_METADATA: LazyLock<gst::subclass::ElementMetadata> =
            LazyLock::new(|| gst::subclass::ElementMetadata::new("Temporal NLM denoiser", "Filter/Effect/Video", "Temporal non-local means video denoising on CUDA or CPU", "nlmdenoise developers"));
        Some(&*ELEMENT_METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static PAD_TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(crate::transform::pad_templates);
        PAD_TEMPLATES.as_ref()
    }
}

impl BaseTransformImpl for NlmDenoise {
    crate::transform::base_transform_via_core!();

    fn propose_allocation(&self, decide_query: Option<&gst::query::Allocation>, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        // Input frames are read through VideoMeta, so upstream may use any strides and offsets.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        // Buffers that are the engine's own frames, where the format and caps allow.
        self.core.propose_input_pool(query);
        if decide_query.is_none() {
            return self.parent_propose_allocation(decide_query, query);
        }
        Ok(())
    }
}
