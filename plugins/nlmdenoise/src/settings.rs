//! The settings both elements keep (engine parameters, backend options, what the user set
//! explicitly) and the rules that derive the rest from them ([`Settings::update_auto`]), with the
//! value conversions of the properties that do not map one to one (`device-id`, `chunk-frames`).
//! The property table itself is [`crate::properties`].

use nlmdenoise::device::{ChunkFrames, Devices};
use nlmdenoise::BackendOptions;
use nlmdenoise::{Params, SettingUse};

/// The properties of one algorithm, with what reads them (the engine's rule, as the command
/// line's options): one moved off its default that the algorithm does not read gets a warning
/// at start.
pub const ALGORITHM_PROPERTIES: &[(&str, SettingUse)] = &[
    ("bm3d-profile", SettingUse::Bm3d),
    ("bm3d-steps", SettingUse::Bm3d),
    ("bm3d-patch-size", SettingUse::Bm3d),
    ("bm3d-search-radius", SettingUse::Bm3d),
    ("bm3d-block-step", SettingUse::Bm3d),
    ("bm3d-hard-block-step", SettingUse::Bm3d),
    ("bm3d-group-size", SettingUse::Bm3d),
    ("bm3d-wiener-group-size", SettingUse::Bm3d),
    ("bm3d-seeds", SettingUse::Bm3d),
    ("bm3d-wiener-seeds", SettingUse::Bm3d),
    ("bm3d-seed-radius", SettingUse::Bm3d),
    ("bm3d-window-references", SettingUse::Bm3d),
    ("bm3d-frame-groups", SettingUse::Bm3d),
    ("bm3d-motion", SettingUse::Bm3d),
    ("bm3d-bayes", SettingUse::Bm3d),
    ("bm3d-threshold", SettingUse::Bm3d),
    ("bm3d-wiener-threshold", SettingUse::Bm3d),
    ("bm3d-lambda", SettingUse::Bm3d),
    ("chroma-sigma", SettingUse::Bm3d),
    ("search-radius", SettingUse::NlmWindow),
    ("patch-radius", SettingUse::NlmWindow),
    ("weighting", SettingUse::Nlm),
    ("aggregation-radius", SettingUse::Nlm),
    ("wref", SettingUse::Nlm),
    ("kernel", SettingUse::Nlm),
    ("offsets-per-pass", SettingUse::Nlm),
    ("intermediate", SettingUse::Nlm),
];

/// Upper bound of the `pipeline-depth` property (and the command line's `--pipeline-depth`): the
/// engine has no limit of its own; more frames in flight only add latency.
pub const MAX_PIPELINE_DEPTH: u32 = nlmdenoise::backends::MAX_PIPELINE_DEPTH as u32;
/// Upper bound of the `threads` property (and the command line's `--threads`).
pub const MAX_THREADS: u32 = nlmdenoise::backends::MAX_THREADS as u32;
/// `sigma` value meaning "not set" (no noise-variance subtraction).
pub const SIGMA_UNSET: f32 = -1.0;

/// What the properties set; the streaming thread copies it at `start`, `set_caps` and between
/// frames.
#[derive(Debug, Clone)]
pub struct Settings {
    pub params: Params,
    pub options: BackendOptions,
    /// Bumped on every change of `params`; the streaming thread applies changes between frames.
    pub generation: u64,
    /// The strengths were set explicitly; otherwise setting `sigma` also sets them
    /// (Params::with_noise_sigma), and without `sigma` the noise level is estimated.
    pub strength_set: bool,
    /// A `device-id` value that names no device list, with the reason: the element refuses to
    /// start until it is replaced (a typo must not silently run on device 0).
    pub bad_device_id: Option<String>,
    /// Without `sigma` or a strength, estimate the noise level (nlmdenoise); nlmupscale keeps its
    /// clean-input strengths instead (`base_strength`).
    pub estimate: bool,
    /// Strengths when neither `sigma` nor a strength is set and nothing is estimated.
    pub base_strength: f32,
    /// Output frames go downstream in the engine's own planes, without a copy, where the format
    /// and downstream allow it (property `zero-copy`; `OutputPlanes`).
    pub zero_copy: bool,
    /// `strength` (or `sigma`) was set to 0: frames pass through unchanged (`nlmdenoise`); the
    /// parameters keep their last values for when filtering resumes.
    pub zero_strength: bool,
    pub zero_sigma: bool,
}

impl Default for Settings {
    fn default() -> Self {
        // Neither sigma nor a strength set: the noise level is estimated (sigma = auto).
        Settings {
            params: Params { sigma_auto: true, ..Params::default() },
            options: BackendOptions::default(),
            generation: 0,
            strength_set: false,
            bad_device_id: None,
            estimate: true,
            base_strength: Params::default().strength,
            zero_copy: true,
            zero_strength: false,
            zero_sigma: false,
        }
    }
}

impl Settings {
    /// Re-derives what follows from the others after any change: `sigma` -1 (unset) means auto
    /// unless a strength was set; a set `sigma` without a set strength gives the strengths that
    /// suit it and the current window (which may just have changed).
    pub fn update_auto(&mut self) {
        self.params.sigma_auto = self.estimate && self.params.sigma.is_none() && !self.strength_set;
        if !self.estimate && self.params.sigma.is_none() && !self.strength_set {
            self.params.strength = self.base_strength;
            self.params.chroma_strength = self.base_strength;
        }
        self.params.strength_fixed = self.strength_set;
        if let (Some(sigma), false) = (self.params.sigma, self.strength_set) {
            self.params = self.params.with_noise_sigma(sigma);
        }
    }

    /// Frames pass through unchanged: `strength` or `sigma` is 0.
    pub fn passthrough(&self) -> bool {
        self.zero_strength || self.zero_sigma
    }

    /// Marks `params` changed: the streaming thread applies them before the next frame.
    pub fn params_changed(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }
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

/// `chunk-frames` as the engine's option, and back.
pub fn chunk_frames_from_property(v: u32) -> ChunkFrames {
    match v {
        0 => ChunkFrames::Auto,
        1 => ChunkFrames::Off,
        n => ChunkFrames::Frames(n as usize),
    }
}

pub fn chunk_frames_to_property(c: ChunkFrames) -> u32 {
    match c {
        ChunkFrames::Auto => 0,
        ChunkFrames::Off => 1,
        ChunkFrames::Frames(n) => n as u32,
    }
}
