//! The property table both elements share: one declaration of each property they both have
//! (name, type, range, default, flags; [`common_properties`]), one setter and one getter for them
//! ([`set_common_property`], [`common_property`]), and the `set_property`/`property` drivers both
//! elements call ([`Core::set_property`], [`Core::property`]), so that locking, re-deriving the
//! automatic settings, latency messages and unknown names are handled the same way in both.
//! Each element's own properties stay in its `imp.rs` and reach the drivers as a closure.

use gst::glib;
use gst::prelude::*;

use nlmdenoise::params::{MAX_PATCH_RADIUS, MAX_SEARCH_RADIUS, MAX_SIGMA, MAX_STRENGTH, MAX_TEMPORAL_FUTURE, MAX_TEMPORAL_PAST};

use crate::core::Core;
use crate::enums::Backend;
use crate::lock;
use crate::settings::{apply_devices, chunk_frames_from_property, chunk_frames_to_property, devices_to_string, Settings, MAX_PIPELINE_DEPTH, MAX_THREADS, SIGMA_UNSET};

/// The descriptions of the shared properties that each element words its own way (`nlmupscale`
/// fuses frames where `nlmdenoise` searches them); gst-inspect shows them.
pub struct Words<'a> {
    pub device_id_nick: &'a str,
    pub device_id: &'a str,
    pub pipeline_depth: &'a str,
    pub temporal_past: &'a str,
    pub temporal_future: &'a str,
    pub search_radius: &'a str,
    pub patch_radius: &'a str,
    pub strength: &'a str,
    pub chroma_strength: &'a str,
    pub sigma: &'a str,
    pub backend_in_use: &'a str,
}

/// The properties both elements have, described in `words`, with the element's default
/// `settings` as their defaults.
pub fn common_properties(words: &Words<'_>, defaults: &Settings) -> Vec<glib::ParamSpec> {
    let (p, o) = (&defaults.params, &defaults.options);
    vec![
        glib::ParamSpecEnum::builder_with_default("backend", Backend::from(o.kind))
            .nick("Backend")
            .blurb("Compute backend: auto = CUDA when a usable GPU and NVRTC are present, else CPU, and CPU from then on if the GPU fails mid-stream; cuda = fail when unavailable or failing")
            .mutable_ready()
            .build(),
        glib::ParamSpecString::builder("device-id").nick(words.device_id_nick).blurb(words.device_id).default_value(Some("0")).mutable_ready().build(),
        glib::ParamSpecUInt::builder("chunk-frames")
            .nick("Chunk frames")
            .blurb("Frames per batched launch (chunk along time): 1 = a frame at a time (no added latency), 0 = automatic from free device memory, N = N frames; chunks of N frames on D devices add (D+1)*N-1 frames of latency (D+1 chunks in flight). Several devices imply chunks (automatic when left at 1)")
            .maximum(nlmdenoise::device::chunked::MAX_CHUNK_FRAMES as u32)
            .default_value(chunk_frames_to_property(o.chunk_frames))
            .mutable_ready()
            .build(),
        glib::ParamSpecUInt::builder("threads").nick("CPU threads").blurb("Worker threads of the CPU backend (0 = all cores)").maximum(MAX_THREADS).default_value(o.threads as u32).mutable_ready().build(),
        glib::ParamSpecBoolean::builder("zero-copy")
            .nick("Zero-copy frames")
            .blurb("Propose upstream a pool of the engine's own frames, and hand output frames downstream in the engine's planes when downstream offers no pool of its own, so that frames cross without a copy (every format; NV12, NV21, P010 and packed RGB in their own layout, which the CUDA backend converts on the GPU); off: copy frames in and out")
            .default_value(defaults.zero_copy)
            .mutable_ready()
            .build(),
        glib::ParamSpecUInt::builder("pipeline-depth").nick("Pipeline depth").blurb(words.pipeline_depth).maximum(MAX_PIPELINE_DEPTH).default_value(o.pipeline_depth as u32).mutable_ready().build(),
        glib::ParamSpecUInt::builder("temporal-past").nick("Past frames").blurb(words.temporal_past).maximum(MAX_TEMPORAL_PAST).default_value(p.temporal_past).mutable_playing().build(),
        glib::ParamSpecUInt::builder("temporal-future").nick("Future frames").blurb(words.temporal_future).maximum(MAX_TEMPORAL_FUTURE).default_value(p.temporal_future).mutable_playing().build(),
        glib::ParamSpecFloat::builder("scene-cut")
            .nick("Scene-cut fraction")
            .blurb("Fraction of the picture that must change from one frame to the next for a scene cut: no frame borrows from a frame across a cut (0 = no detection, and no cost: 175-360 us of the streaming thread a 1080p frame)")
            .minimum(0.0)
            .maximum(1.0)
            .default_value(p.scene_cut)
            .mutable_playing()
            .build(),
        glib::ParamSpecUInt::builder("search-radius").nick("Search radius").blurb(words.search_radius).maximum(MAX_SEARCH_RADIUS).default_value(p.search_radius).mutable_playing().build(),
        glib::ParamSpecUInt::builder("patch-radius").nick("Patch radius").blurb(words.patch_radius).maximum(MAX_PATCH_RADIUS).default_value(p.patch_radius).mutable_playing().build(),
        glib::ParamSpecFloat::builder("strength").nick("Strength").blurb(words.strength).minimum(0.0).maximum(MAX_STRENGTH).default_value(p.strength).mutable_playing().controllable().build(),
        glib::ParamSpecFloat::builder("chroma-strength").nick("Chroma strength").blurb(words.chroma_strength).minimum(0.01).maximum(MAX_STRENGTH).default_value(p.chroma_strength).mutable_playing().controllable().build(),
        glib::ParamSpecFloat::builder("sigma").nick("Noise sigma").blurb(words.sigma).minimum(SIGMA_UNSET).maximum(MAX_SIGMA).default_value(p.sigma.unwrap_or(SIGMA_UNSET)).mutable_playing().controllable().build(),
        glib::ParamSpecString::builder("backend-in-use").nick("Backend in use").blurb(words.backend_in_use).read_only().build(),
        glib::ParamSpecUInt64::builder("scene-cuts").nick("Scene cuts found").blurb("Scene cuts found in the stream so far (see scene-cut); 0 before caps").read_only().build(),
    ]
}

/// What a property writes: the backend options (used from the next `set_caps`) or the engine
/// parameters (applied between frames, after re-deriving the automatic ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Options,
    Params,
}

/// Sets a property both elements have. `None`: `name` is not one of them; `Err`: the value was
/// refused (the message says why; the element refuses to start until it is replaced).
pub fn set_common_property(s: &mut Settings, name: &str, value: &glib::Value) -> Option<Result<Target, String>> {
    // `value` has been validated against the pspec (type and range) by GObject.
    let p = &mut s.params;
    match name {
        "backend" => s.options.kind = value.get::<Backend>().unwrap_or_default().into(),
        "device-id" => {
            let text = value.get::<Option<String>>().ok().flatten().unwrap_or_else(|| "0".to_string());
            if let Err(e) = apply_devices(&mut s.options, &text) {
                let bad = format!("device-id '{text}': {e}");
                s.bad_device_id = Some(bad.clone());
                return Some(Err(bad));
            }
            s.bad_device_id = None;
        }
        "chunk-frames" => s.options.chunk_frames = chunk_frames_from_property(value.get::<u32>().unwrap_or(1)),
        "threads" => s.options.threads = value.get::<u32>().unwrap_or(0) as usize,
        "pipeline-depth" => s.options.pipeline_depth = value.get::<u32>().unwrap_or(0) as usize,
        "zero-copy" => s.zero_copy = value.get().unwrap_or(true),
        _ => {
            match name {
                "temporal-past" => p.temporal_past = value.get().unwrap_or(p.temporal_past),
                "temporal-future" => p.temporal_future = value.get().unwrap_or(p.temporal_future),
                "scene-cut" => p.scene_cut = value.get().unwrap_or(p.scene_cut),
                "search-radius" => p.search_radius = value.get().unwrap_or(p.search_radius),
                "patch-radius" => p.patch_radius = value.get().unwrap_or(p.patch_radius),
                // An explicit strength turns the automatic ones (from sigma or the estimate) off.
                "strength" => {
                    // 0: pass frames through (Settings::zero_strength); the strength is kept.
                    let v: f32 = value.get().unwrap_or(p.strength);
                    s.zero_strength = v == 0.0;
                    if v > 0.0 {
                        p.strength = v;
                        s.strength_set = true;
                    }
                }
                "chroma-strength" => {
                    p.chroma_strength = value.get().unwrap_or(p.chroma_strength);
                    s.strength_set = true;
                }
                "sigma" => {
                    let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                    // 0: pass frames through (Settings::zero_sigma); sigma is kept.
                    s.zero_sigma = v == 0.0;
                    if v != 0.0 {
                        p.sigma = if v < 0.0 { None } else { Some(v) };
                    }
                }
                _ => return None,
            }
            return Some(Ok(Target::Params));
        }
    }
    Some(Ok(Target::Options))
}

/// The value of a property both elements have that the settings hold (`backend-in-use` is the
/// stream's: [`Core::property`]); `None` where `name` is not one of them.
pub fn common_property(s: &Settings, name: &str) -> Option<glib::Value> {
    let (p, o) = (&s.params, &s.options);
    Some(match name {
        "backend" => Backend::from(o.kind).to_value(),
        "device-id" => devices_to_string(o).to_value(),
        "chunk-frames" => chunk_frames_to_property(o.chunk_frames).to_value(),
        "threads" => (o.threads as u32).to_value(),
        "pipeline-depth" => (o.pipeline_depth as u32).to_value(),
        "zero-copy" => s.zero_copy.to_value(),
        "temporal-past" => p.temporal_past.to_value(),
        "temporal-future" => p.temporal_future.to_value(),
        "scene-cut" => p.scene_cut.to_value(),
        "search-radius" => p.search_radius.to_value(),
        "patch-radius" => p.patch_radius.to_value(),
        "strength" => (if s.zero_strength { 0.0 } else { p.strength }).to_value(),
        "chroma-strength" => p.chroma_strength.to_value(),
        "sigma" => (if s.zero_sigma { 0.0 } else { p.sigma.unwrap_or(SIGMA_UNSET) }).to_value(),
        _ => return None,
    })
}

impl Core {
    /// An element's `set_property`: the shared properties, else the element's own through `own`
    /// (`None`: not one of its own either). Parameter changes re-derive the automatic settings
    /// and reach the engine before the next frame; a change of the frames of delay posts a
    /// latency message, once the settings lock is released.
    pub fn set_property(&self, obj: &gst::Element, value: &glib::Value, pspec: &glib::ParamSpec, own: impl FnOnce(&mut Settings, &str, &glib::Value) -> Option<Target>) {
        let name = pspec.name();
        let mut guard = lock(&self.settings);
        let s = &mut *guard;
        let old_future = s.params.latency_frames();
        let target = match set_common_property(s, name, value) {
            Some(Ok(target)) => target,
            Some(Err(bad)) => {
                gst::error!(self.cat(), obj = obj, "{bad}");
                return;
            }
            None => match own(s, name, value) {
                Some(target) => target,
                None => {
                    gst::warning!(self.cat(), obj = obj, "unknown property {name}");
                    return;
                }
            },
        };
        if target == Target::Params {
            s.update_auto();
            s.params_changed();
        }
        gst::debug!(self.cat(), obj = obj, "{name} set");
        let latency_changed = s.params.latency_frames() != old_future;
        drop(guard);
        if latency_changed {
            // Let the pipeline query the new latency.
            let _ = obj.post_message(gst::message::Latency::builder().src(obj).build());
        }
    }

    /// An element's `property`: `backend-in-use` (the running stream's), the shared properties,
    /// else the element's own through `own`.
    pub fn property(&self, obj: &gst::Element, pspec: &glib::ParamSpec, own: impl FnOnce(&Settings, &str) -> Option<glib::Value>) -> glib::Value {
        let name = pspec.name();
        if name == "scene-cuts" {
            return lock(&self.state).as_ref().map_or(0, |st| st.denoiser.scene_cuts()).to_value();
        }
        if name == "backend-in-use" {
            // Empty (not NULL) before caps, as documented: applications read it as a string.
            return lock(&self.state).as_ref().map(|st| st.denoiser.backend_description()).unwrap_or_default().to_value();
        }
        let s = lock(&self.settings);
        common_property(&s, name).or_else(|| own(&s, name)).unwrap_or_else(|| {
            // GObject asks only for installed properties, all handled above.
            gst::warning!(self.cat(), obj = obj, "unknown property {name}");
            pspec.default_value().clone()
        })
    }
}
