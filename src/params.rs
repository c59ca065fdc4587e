//! Denoising parameters, their ranges and defaults.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

pub const MAX_SEARCH_RADIUS: u32 = 12;
pub const MAX_PATCH_RADIUS: u32 = 7;
pub const MAX_TEMPORAL_PAST: u32 = 7;
pub const MAX_TEMPORAL_FUTURE: u32 = 7;
pub const MAX_STRENGTH: f32 = 1000.0;
pub const MAX_WREF: f32 = 100.0;
pub const MAX_SIGMA: f32 = 255.0;

/// Luma strength per unit of noise sigma when only `sigma` is given, for the live window (past
/// frames only): the least-squares fit of the best strengths found by `scripts/quality_noise`
/// (sigma 5..30, four clips; docs/quality.md, "Noise estimation").
pub const STRENGTH_PER_SIGMA: f32 = 0.71;
/// Chroma strength per unit of noise sigma, live window (median of the per-clip optima).
pub const CHROMA_STRENGTH_PER_SIGMA: f32 = 0.85;
/// The same for the spatial window (no past or future frame): with fewer candidates per patch,
/// a higher strength pays.
pub const SPATIAL_STRENGTH_PER_SIGMA: f32 = 0.90;
pub const SPATIAL_CHROMA_STRENGTH_PER_SIGMA: f32 = 0.97;
/// The same for the offline window (future frames too): more candidates of the same content,
/// so a lower strength already averages the noise away and keeps more detail.
pub const OFFLINE_STRENGTH_PER_SIGMA: f32 = 0.68;
pub const OFFLINE_CHROMA_STRENGTH_PER_SIGMA: f32 = 0.81;
/// With patch-wise aggregation (`aggregation_radius` above 0) the sigma-derived strengths are
/// this times the pixel-wise ones: each sample then averages several patches' weights, so each
/// weight can be stricter (scripts/quality_nlm_fit, p3s3a2w2: best at 0.8 at sigma 20 and 30, 0.9
/// at 10, over 0.7-1.1; docs/tuning.md, "Patch-wise aggregation").
pub const AGGREGATION_STRENGTH_SCALE: f32 = 0.8;

/// Which filter computes the output frames. Each has its own folder under `src/` (its plan, f64
/// reference, CPU and CUDA implementations); the device layer runs any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// Temporal non-local means ([`crate::nlm`]).
    #[default]
    Nlm,
    /// Block matching and 3D filtering, spatial or over the temporal window (V-BM3D,
    /// [`crate::bm3d`]).
    Bm3d,
    /// Multi-frame NLM super-resolution: output frames `sr.scale` times the input's size
    /// ([`crate::sr`]).
    NlmSr,
}

impl Algorithm {
    /// The name front ends use (`--algorithm`, the element's `algorithm`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Nlm => "nlm",
            Algorithm::Bm3d => "bm3d",
            Algorithm::NlmSr => "nlm-sr",
        }
    }
}

/// Which algorithms read a setting. Front ends (the command line, the elements) tell the user,
/// with the same words ([`unused_setting_note`]), about a setting they gave that the chosen
/// algorithm does not read, rather than ignore it silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingUse {
    /// NLM's patches and search window: NLM and NLM super-resolution.
    NlmWindow,
    /// NLM's weighting, reference weight and GPU kernel choices: NLM only.
    Nlm,
    /// The BM3D profile and settings, the chroma sigma: BM3D only.
    Bm3d,
    /// Iterations, deblur, fusion, novelty gate: super-resolution only.
    SuperResolution,
}

impl SettingUse {
    pub fn used_by(self, algorithm: Algorithm) -> bool {
        match self {
            SettingUse::NlmWindow => algorithm != Algorithm::Bm3d,
            SettingUse::Nlm => algorithm == Algorithm::Nlm,
            SettingUse::Bm3d => algorithm == Algorithm::Bm3d,
            SettingUse::SuperResolution => algorithm == Algorithm::NlmSr,
        }
    }
}

/// The note for `setting` (as the front end spells it: `--wref`, `wref`) given by the user when
/// `algorithm` does not read it; `None` when it does.
pub fn unused_setting_note(setting: &str, used: SettingUse, algorithm: Algorithm) -> Option<String> {
    let readers = match used {
        SettingUse::NlmWindow => "nlm and nlm-sr",
        SettingUse::Nlm => "nlm",
        SettingUse::Bm3d => "bm3d",
        SettingUse::SuperResolution => "upscaling (nlm-sr)",
    };
    (!used.used_by(algorithm)).then(|| format!("{setting} does nothing with algorithm {} (used by {readers} only): ignored", algorithm.name()))
}

/// Largest upscaling factor of [`Algorithm::NlmSr`].
pub const SR_MAX_SCALE: u32 = 4;
/// Most back-projection (deblur) steps of [`Algorithm::NlmSr`].
pub const SR_MAX_DEBLUR: u32 = 4;
/// Luma strength of NLM super-resolution on clean input (no noise sigma): the weights then only
/// reflect how well the degraded high-resolution patch explains a low-resolution one
/// (scripts/quality_sr's grid, docs/quality.md "Super-resolution").
pub const SR_BASE_STRENGTH: f32 = 3.0;
/// Strength per unit of noise sigma of NLM super-resolution, added in quadrature to
/// [`SR_BASE_STRENGTH`] (`h = hypot(base, k * sigma)`).
pub const SR_STRENGTH_PER_SIGMA: f32 = 0.67;
/// Patch radius of the upscaler by default: 7 x 7 low-resolution patches tell the sub-sample
/// offsets of the other frames apart better than 5 x 5 (+0.08 dB at x2, docs/quality.md).
pub const SR_PATCH_RADIUS: u32 = 3;
/// Search radius of the upscaler by default: with 7 x 7 patches, 5 x 5 candidates measured as
/// good as 7 x 7, and cost what 5 x 5 patches with 7 x 7 candidates did.
pub const SR_SEARCH_RADIUS: u32 = 2;

/// Settings of NLM super-resolution ([`Algorithm::NlmSr`]; ignored by the others).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SrParams {
    /// Integer upscaling factor (2..=[`SR_MAX_SCALE`]).
    pub scale: u32,
    /// Fusion passes: 1, or 2 (the second matches against the first's result).
    pub iterations: u32,
    /// Back-projection steps of the initial estimate against the target frame (the light
    /// deblur: undoes the area filter of the downscale; 0..=[`SR_MAX_DEBLUR`]).
    pub deblur: u32,
    /// Share of the fused correction added to the estimate (0: the deblurred target frame
    /// alone; 1: all of it).
    pub fusion: f32,
    /// Weigh the correction by how much better another frame matches than the target (the
    /// novelty gate, default on: static content stays as sharp as the deblurred target). Off, the
    /// target's own repeats count too (synthetic, repetitive content gains; smooth static content
    /// softens).
    pub novelty_gate: bool,
}

impl Default for SrParams {
    fn default() -> Self {
        SrParams { scale: 2, iterations: 1, deblur: 2, fusion: 1.0, novelty_gate: true }
    }
}

impl SrParams {
    pub fn validate(&self) -> Result<()> {
        if !(2..=SR_MAX_SCALE).contains(&self.scale) {
            return Err(Error::InvalidParameter(format!("scale {} out of range 2..={SR_MAX_SCALE}", self.scale)));
        }
        if !(1..=2).contains(&self.iterations) {
            return Err(Error::InvalidParameter(format!("super-resolution iterations {} out of range 1..=2", self.iterations)));
        }
        if self.deblur > SR_MAX_DEBLUR {
            return Err(Error::InvalidParameter(format!("deblur steps {} out of range 0..={SR_MAX_DEBLUR}", self.deblur)));
        }
        if !(self.fusion.is_finite() && (0.0..=1.0).contains(&self.fusion)) {
            return Err(Error::InvalidParameter(format!("fusion {} out of range [0, 1]", self.fusion)));
        }
        Ok(())
    }
}

/// A set of BM3D settings chosen together (docs/tuning.md says what each costs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Bm3dProfile {
    /// Sparse reference patches, small search window and groups: real time at 1080p.
    Fast,
    /// The default: `high`'s picture at real-time speed on a GPU (denser reference patches than
    /// `fast`, a smaller search than `high`, per-frame groups with future frames).
    #[default]
    Normal,
    /// Dense reference patches, wide search, large groups: closest to the published BM3D.
    High,
}

/// BM3D settings: a profile and, where set, individual values that replace the profile's.
/// Distances and thresholds are in 8-bit code values squared (mean over the patch samples).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bm3dParams {
    pub profile: Bm3dProfile,
    /// 1: hard thresholding only (the basic estimate); 2: then the Wiener step (default).
    pub steps: Option<u32>,
    /// Patch side k (4 or 8).
    pub patch_size: Option<u32>,
    /// Block matching searches offsets -r..=r in x and y of the target frame.
    pub search_radius: Option<u32>,
    /// Pixels between reference patches, horizontally and vertically (1..=k).
    pub block_step: Option<u32>,
    /// The same for the hard-thresholding step alone (the first; in one-step runs the only one);
    /// None: `block_step`. Its groups only make the basic estimate that the Wiener step matches
    /// on and weighs with, so they can be sparser than the Wiener step's (docs/tuning.md).
    pub hard_block_step: Option<u32>,
    /// Most patches in a group of the hard-thresholding step (power of 2, 1..=32).
    pub group_size: Option<u32>,
    /// Most patches in a group of the Wiener step (power of 2, 1..=32).
    pub wiener_group_size: Option<u32>,
    /// Largest distance of a grouped patch, hard-thresholding step.
    pub threshold: Option<f32>,
    /// Largest distance of a grouped patch, Wiener step (distances on the basic estimate).
    pub wiener_threshold: Option<f32>,
    /// Hard threshold in units of sigma.
    pub lambda: Option<f32>,
    /// Other frames: patches around the best `seeds` matches of the neighbouring frame are
    /// searched (predictive search)...
    pub seeds: Option<u32>,
    /// The Wiener step's `seeds` alone; None: `seeds`. Its search runs on the basic estimate,
    /// where fewer seeds find the same matches more often (docs/tuning.md).
    pub wiener_seeds: Option<u32>,
    /// ... within this radius of each.
    pub seed_radius: Option<u32>,
    /// V-BM3D: reference patches in every frame of the window, not only the target, each
    /// grouped over the window; the members of each group that lie in the target are aggregated
    /// into it (as full V-BM3D aggregates every group into every frame). Cost: one step per
    /// frame of the window.
    pub window_references: Option<bool>,
    /// Per-frame groups: every frame's reference patches are grouped once, within the window
    /// centred on their own frame (`temporal_past` before it, `temporal_future` after it), and
    /// every member of a group is added to its own frame's estimate (V-BM3D's aggregation); a
    /// frame's estimate gathers the groups of the frames within `temporal_future` before and
    /// `temporal_past` after it. The same picture as `window_references` (docs/tuning.md,
    /// "Per-frame groups"); each frame's groups are computed once per stream, not once per
    /// output frame (both backends share them between output frames), at the cost of latency:
    /// two-step runs read 2 (past + future) frames on each side. Replaces `window_references`
    /// where both are set. Every backend. None: on where the window has future frames (and
    /// past + future is at most [`MAX_TEMPORAL_PAST`]), off for live windows
    /// ([`Params::bm3d_settings`]).
    pub frame_groups: Option<bool>,
    /// Motion seeds: the predictive search into the next frame also starts where the coarse
    /// motion between the two frames moves its best match ([`crate::bm3d`], "Motion seeds"), so
    /// that groups follow motion faster than the seed radius a frame. None: the profile's (on in
    /// every profile: docs/tuning.md, "Motion").
    pub motion: Option<bool>,
    /// The Wiener step's estimate of each group averaged with a Bayesian one (NL-Bayes' second
    /// step in BM3D's groups, [`crate::bm3d`] "Step 2 with the Bayesian estimate"): cleaner
    /// (+0.2 dB PSNR-YUV on the harness at sigma 10-40, docs/tuning.md), costlier. None: the
    /// profile's (off in every profile). Acts on two-step runs only.
    pub bayes: Option<bool>,
    /// Noise sigma of chroma planes (8-bit code values); default: `Params::sigma`.
    pub chroma_sigma: Option<f32>,
}

/// BM3D settings with every value resolved (profile plus overrides), checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm3dSettings {
    pub steps: u32,
    pub patch_size: u32,
    pub search_radius: u32,
    pub block_step: u32,
    /// Block step of the hard-thresholding step ([`Bm3dParams::hard_block_step`]).
    pub hard_block_step: u32,
    pub group_size: u32,
    pub wiener_group_size: u32,
    pub threshold: f32,
    pub wiener_threshold: f32,
    pub lambda: f32,
    pub seeds: u32,
    /// Seeds of the Wiener step's predictive search ([`Bm3dParams::wiener_seeds`]).
    pub wiener_seeds: u32,
    pub seed_radius: u32,
    pub window_references: bool,
    pub frame_groups: bool,
    pub motion: bool,
    pub bayes: bool,
}

impl Bm3dSettings {
    /// Pixels between reference patches in the Wiener step (`wiener`) or the hard-thresholding
    /// step.
    pub fn block_step_of(&self, wiener: bool) -> u32 {
        if wiener {
            self.block_step
        } else {
            self.hard_block_step
        }
    }

    /// Seeds of the predictive search in the Wiener step (`wiener`) or the hard-thresholding
    /// step.
    pub fn seeds_of(&self, wiener: bool) -> u32 {
        if wiener {
            self.wiener_seeds
        } else {
            self.seeds
        }
    }

    /// The most seeds either step uses (what a kernel's seed lists and a search cache entry hold).
    pub fn most_seeds(&self) -> u32 {
        self.seeds.max(self.wiener_seeds)
    }
}

pub const BM3D_MAX_GROUP: u32 = 32;
pub const BM3D_MAX_SEARCH_RADIUS: u32 = 24;
pub const BM3D_MAX_SEEDS: u32 = 8;
pub const BM3D_MAX_SEED_RADIUS: u32 = 8;

/// Noise level (8-bit code values) from which `fast` and `normal` search wider (`fast` also groups
/// more) (docs/tuning.md, "BM3D at high noise"): with the search square of a few patches, the
/// group of a flat area is made of patches that overlap the reference and each other, its noise is
/// averaged over few independent samples, and the noise coefficients that survive hard
/// thresholding come back as patch-sized blotches and streaks.
pub const BM3D_HIGH_NOISE_SIGMA: f32 = 30.0;

/// The hard-thresholding step's group threshold (mean squared difference per sample) is at least
/// this many times sigma^2 (docs/tuning.md, "BM3D at high noise"): two patches of the same
/// content differ by 2 sigma^2 per sample on average, so the profiles' 2500 rejects most true
/// matches from sigma 35 on, and the groups of flat areas shrink to the few patches whose noise
/// happened to agree.
pub const BM3D_THRESHOLD_PER_VARIANCE: f32 = 3.0;

impl Bm3dProfile {
    /// The profile's values at low and moderate noise (docs/tuning.md, "BM3D profiles").
    pub fn settings(self) -> Bm3dSettings {
        let base = Bm3dSettings {
            steps: 2,
            patch_size: 8,
            search_radius: 8,
            block_step: 6,
            hard_block_step: 6,
            group_size: 16,
            wiener_group_size: 16,
            threshold: 2500.0,
            wiener_threshold: 400.0,
            lambda: 2.7,
            seeds: 2,
            wiener_seeds: 2,
            seed_radius: 3,
            window_references: false,
            frame_groups: false,
            motion: true,
            bayes: false,
        };
        match self {
            Bm3dProfile::Fast => Bm3dSettings { search_radius: 6, group_size: 8, wiener_group_size: 8, seed_radius: 2, ..base },
            // `high`'s picture at real-time speed on a GPU (issue #29, docs/tuning.md "The default
            // profile"): reference patches every 4 samples, radius 8, the Wiener step's predictive
            // search from 2 seeds.
            Bm3dProfile::Normal => Bm3dSettings { block_step: 4, hard_block_step: 4, wiener_group_size: 32, seeds: 3, wiener_seeds: 2, seed_radius: 4, window_references: true, ..base },
            Bm3dProfile::High => {
                Bm3dSettings { search_radius: 20, block_step: 3, hard_block_step: 3, wiener_group_size: 32, seeds: 3, wiener_seeds: 3, seed_radius: 4, window_references: true, ..base }
            }
        }
    }

    /// The profile's values for noise of `sigma` (8-bit code values; `None`: not known yet, the
    /// values of [`settings`](Self::settings)): the hard-thresholding group threshold at least
    /// [`BM3D_THRESHOLD_PER_VARIANCE`] sigma^2 (every profile, from sigma 29); from
    /// [`BM3D_HIGH_NOISE_SIGMA`] on, `fast` searches radius 12 with groups of 16 in both steps and
    /// `normal` radius 16 (its Wiener groups hold 32 already).
    pub fn settings_for(self, sigma: Option<f32>) -> Bm3dSettings {
        let s = self.settings();
        let Some(sigma) = sigma else { return s };
        // At most 255^2, the largest mean squared difference of 8-bit samples: every patch passes.
        let s = Bm3dSettings { threshold: s.threshold.max(BM3D_THRESHOLD_PER_VARIANCE * sigma * sigma).min(65025.0), ..s };
        if sigma < BM3D_HIGH_NOISE_SIGMA {
            return s;
        }
        match self {
            Bm3dProfile::Fast => Bm3dSettings { search_radius: 12, group_size: 16, wiener_group_size: 16, ..s },
            Bm3dProfile::Normal => Bm3dSettings { search_radius: 16, ..s },
            Bm3dProfile::High => s,
        }
    }
}

impl Bm3dParams {
    /// The profile's settings for noise of `sigma` ([`Bm3dProfile::settings_for`]) with the
    /// overrides applied, checked; per-frame groups as set (off when not: the window decides
    /// their default, [`Params::bm3d_settings`]).
    pub fn resolve_for(&self, sigma: Option<f32>) -> Result<Bm3dSettings> {
        let p = self.profile.settings_for(sigma);
        let s = Bm3dSettings {
            steps: self.steps.unwrap_or(p.steps),
            patch_size: self.patch_size.unwrap_or(p.patch_size),
            search_radius: self.search_radius.unwrap_or(p.search_radius),
            block_step: self.block_step.unwrap_or(p.block_step),
            hard_block_step: 0, // below: block_step's unless set
            group_size: self.group_size.unwrap_or(p.group_size),
            wiener_group_size: self.wiener_group_size.unwrap_or(p.wiener_group_size),
            threshold: self.threshold.unwrap_or(p.threshold),
            wiener_threshold: self.wiener_threshold.unwrap_or(p.wiener_threshold),
            lambda: self.lambda.unwrap_or(p.lambda),
            seeds: self.seeds.unwrap_or(p.seeds),
            wiener_seeds: 0, // below
            seed_radius: self.seed_radius.unwrap_or(p.seed_radius),
            window_references: self.window_references.unwrap_or(p.window_references),
            frame_groups: self.frame_groups.unwrap_or(p.frame_groups),
            motion: self.motion.unwrap_or(p.motion),
            bayes: self.bayes.unwrap_or(p.bayes),
        };
        // An explicit patch size smaller than the profile's step brings the step down with it.
        let s = if self.block_step.is_none() { Bm3dSettings { block_step: s.block_step.min(s.patch_size), ..s } } else { s };
        // The Wiener step's seeds: as set, else with `seeds` set the same, else the profile's.
        let wiener_seeds = self.wiener_seeds.unwrap_or(if self.seeds.is_some() { s.seeds } else { p.wiener_seeds });
        let s = Bm3dSettings { hard_block_step: self.hard_block_step.unwrap_or(s.block_step), wiener_seeds, ..s };
        let bad = |m: String| Err(Error::InvalidParameter(m));
        if !(1..=2).contains(&s.steps) {
            return bad(format!("bm3d steps {} out of range 1..=2", s.steps));
        }
        if s.patch_size != 4 && s.patch_size != 8 {
            return bad(format!("bm3d patch size {} not supported (4 or 8)", s.patch_size));
        }
        if s.search_radius > BM3D_MAX_SEARCH_RADIUS {
            return bad(format!("bm3d search radius {} out of range 0..={BM3D_MAX_SEARCH_RADIUS}", s.search_radius));
        }
        for (name, step) in [("block step", s.block_step), ("hard block step", s.hard_block_step)] {
            if step < 1 || step > s.patch_size {
                return bad(format!("bm3d {name} {step} out of range 1..={} (the patch size)", s.patch_size));
            }
        }
        for (name, n) in [("group size", s.group_size), ("wiener group size", s.wiener_group_size)] {
            if !(1..=BM3D_MAX_GROUP).contains(&n) || !n.is_power_of_two() {
                return bad(format!("bm3d {name} {n} must be a power of two in 1..={BM3D_MAX_GROUP}"));
            }
        }
        for (name, t) in [("threshold", s.threshold), ("wiener threshold", s.wiener_threshold)] {
            if !(t.is_finite() && (0.0..=65025.0).contains(&t)) {
                return bad(format!("bm3d {name} {t} out of range [0, 65025]"));
            }
        }
        if !(s.lambda.is_finite() && (0.0..=20.0).contains(&s.lambda)) {
            return bad(format!("bm3d lambda {} out of range [0, 20]", s.lambda));
        }
        for (name, n) in [("seeds", s.seeds), ("wiener seeds", s.wiener_seeds)] {
            if !(1..=BM3D_MAX_SEEDS).contains(&n) {
                return bad(format!("bm3d {name} {n} out of range 1..={BM3D_MAX_SEEDS}"));
            }
        }
        if s.seed_radius > BM3D_MAX_SEED_RADIUS {
            return bad(format!("bm3d seed radius {} out of range 0..={BM3D_MAX_SEED_RADIUS}", s.seed_radius));
        }
        if let Some(c) = self.chroma_sigma {
            if !(c.is_finite() && (0.0..=MAX_SIGMA).contains(&c)) {
                return bad(format!("chroma sigma {c} out of range [0, {MAX_SIGMA}]"));
            }
        }
        Ok(s)
    }
}

/// How a patch distance becomes a weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Weighting {
    /// exp(-d2 / h^2)
    #[default]
    Welsch,
    /// (max(1 - d2 / h^2, 0))^2
    Bisquare,
}

/// How the weights of chroma (or colour) planes are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChromaMode {
    /// Every plane computes its own weights from its own patches.
    #[default]
    Independent,
    /// Chroma planes reuse the weights computed on luma at the co-sited positions.
    LumaGuided,
    /// Distances summed over all planes, one set of weights (4:4:4 and RGB only).
    Joint,
}

/// Which planes are denoised; the others are copied through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PlaneSelection {
    #[default]
    All,
    Luma,
    Chroma,
}

macro_rules! text_enum {
    ($t:ty, $what:literal, $( $v:path => $s:literal ),+ $(,)?) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                match self { $( $v => $s, )+ }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s.to_ascii_lowercase().as_str() {
                    $( $s => Ok($v), )+
                    _ => Err(Error::InvalidParameter(format!(concat!("unknown ", $what, " '{}' (expected one of: {})"), s, [$($s),+].join(", ")))),
                }
            }
        }
    };
}

text_enum!(Algorithm, "algorithm", Algorithm::Nlm => "nlm", Algorithm::Bm3d => "bm3d", Algorithm::NlmSr => "nlm-sr");
text_enum!(Bm3dProfile, "bm3d profile", Bm3dProfile::Fast => "fast", Bm3dProfile::Normal => "normal", Bm3dProfile::High => "high");
text_enum!(Weighting, "weighting", Weighting::Welsch => "welsch", Weighting::Bisquare => "bisquare");
text_enum!(ChromaMode, "chroma mode", ChromaMode::Independent => "independent", ChromaMode::LumaGuided => "luma-guided", ChromaMode::Joint => "joint");
text_enum!(PlaneSelection, "plane selection", PlaneSelection::All => "all", PlaneSelection::Luma => "luma", PlaneSelection::Chroma => "chroma");

/// Parameters of the denoiser: the algorithm and its settings. Strengths and `sigma` are in 8-bit code values whatever
/// the stream's bit depth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub algorithm: Algorithm,
    /// Radius `a` of the search window: offsets -a..=a in x and y.
    pub search_radius: u32,
    /// Radius `s` of the patch compared around each sample: (2s+1)^2 samples.
    pub patch_radius: u32,
    /// NLM patch-wise aggregation: each patch's weight for a search offset also counts for the
    /// samples within this radius (Chebyshev) of its centre, so that a sample takes its value from
    /// the matches of every patch around it, not of its own patch alone; 0 (pixel-wise NLM) ..=
    /// `patch_radius` (docs/tuning.md, "Patch-wise aggregation").
    pub aggregation_radius: u32,
    /// Past frames searched (no added latency).
    pub temporal_past: u32,
    /// Future frames searched (adds that many frames of latency).
    pub temporal_future: u32,
    /// Filtering strength `h` for luma (and for RGB, joint and luma-guided weights).
    pub strength: f32,
    /// Filtering strength `h` for chroma planes with independent weights.
    pub chroma_strength: f32,
    pub weighting: Weighting,
    /// Weight of the centre sample as a multiple of the largest other weight.
    pub wref: f32,
    pub chroma_mode: ChromaMode,
    pub planes: PlaneSelection,
    /// Noise standard deviation. NLM: when set, 2*sigma^2 is subtracted from every distance;
    /// BM3D: required (thresholds and Wiener coefficients follow it).
    pub sigma: Option<f32>,
    /// BM3D settings (ignored by NLM).
    pub bm3d: Bm3dParams,
    /// Super-resolution settings (ignored by the denoisers).
    pub sr: SrParams,
    /// Estimate the noise level from the frames ([`crate::noise`]) and use it as `sigma` (BM3D:
    /// the chroma estimate as `bm3d.chroma_sigma` unless that is set); NLM's strengths follow it
    /// ([`Params::strength_per_sigma`]) unless `strength_fixed`. `sigma` is then ignored.
    pub sigma_auto: bool,
    /// With `sigma_auto`: keep `strength` and `chroma_strength` as given.
    pub strength_fixed: bool,
    /// Scene cuts ([`crate::scene`]): the fraction of the picture (0..=1) that must change from
    /// one frame to the next for a cut, across which no temporal window reaches; 0: no detection.
    pub scene_cut: f32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            algorithm: Algorithm::Nlm,
            search_radius: 3,
            patch_radius: 2,
            aggregation_radius: 0,
            temporal_past: 2,
            temporal_future: 0,
            strength: 10.0,
            chroma_strength: 10.0,
            weighting: Weighting::Welsch,
            wref: 1.0,
            chroma_mode: ChromaMode::Independent,
            planes: PlaneSelection::All,
            sigma: None,
            bm3d: Bm3dParams::default(),
            sr: SrParams::default(),
            sigma_auto: false,
            strength_fixed: false,
            scene_cut: crate::scene::DEFAULT_SCENE_CUT,
        }
    }
}

impl Params {
    /// The upscaler's defaults (element `nlmupscale`, CLI `--scale`): super-resolution by
    /// `scale` with its own radii and strength and no noise (`sigma` denoises while upscaling).
    pub fn upscaling(scale: u32) -> Params {
        Params {
            algorithm: Algorithm::NlmSr,
            sr: SrParams { scale, ..SrParams::default() },
            search_radius: SR_SEARCH_RADIUS,
            patch_radius: SR_PATCH_RADIUS,
            strength: SR_BASE_STRENGTH,
            chroma_strength: SR_BASE_STRENGTH,
            sigma_auto: false,
            ..Params::default()
        }
    }

    /// Sets `sigma` and the strengths that suit it and the window (see
    /// [`Params::strength_per_sigma`]); used when a caller knows the noise level but gave no
    /// strength.
    pub fn with_noise_sigma(self, sigma: f32) -> Params {
        self.with_noise_sigmas(sigma, sigma)
    }

    /// [`Self::with_noise_sigma`] with its own sigma for the chroma planes (their strength; NLM's
    /// distance offset follows the luma sigma).
    pub fn with_noise_sigmas(self, sigma: f32, chroma_sigma: f32) -> Params {
        let (k, kc) = self.strength_per_sigma();
        let h = |k: f32, s: f32| {
            let h = if self.algorithm == Algorithm::NlmSr { SR_BASE_STRENGTH.hypot(k * s) } else { k * s };
            h.clamp(0.01, MAX_STRENGTH)
        };
        Params { sigma: Some(sigma), strength: h(k, sigma), chroma_strength: h(kc, chroma_sigma), ..self }
    }

    /// NLM strength (luma, chroma) per unit of noise sigma for this window shape, fitted by
    /// `scripts/quality_noise`: spatial ([`SPATIAL_STRENGTH_PER_SIGMA`]), live
    /// ([`STRENGTH_PER_SIGMA`]) or offline ([`OFFLINE_STRENGTH_PER_SIGMA`]), each with its chroma
    /// factor; times [`AGGREGATION_STRENGTH_SCALE`] with patch-wise aggregation.
    pub fn strength_per_sigma(&self) -> (f32, f32) {
        let (k, kc) = self.pixel_wise_strength_per_sigma();
        if self.algorithm == Algorithm::Nlm && self.aggregation_radius > 0 {
            (AGGREGATION_STRENGTH_SCALE * k, AGGREGATION_STRENGTH_SCALE * kc)
        } else {
            (k, kc)
        }
    }

    /// [`Self::strength_per_sigma`] without patch-wise aggregation's scale.
    fn pixel_wise_strength_per_sigma(&self) -> (f32, f32) {
        if self.algorithm == Algorithm::NlmSr {
            (SR_STRENGTH_PER_SIGMA, SR_STRENGTH_PER_SIGMA)
        } else if self.temporal_future > 0 {
            (OFFLINE_STRENGTH_PER_SIGMA, OFFLINE_CHROMA_STRENGTH_PER_SIGMA)
        } else if self.temporal_past == 0 {
            (SPATIAL_STRENGTH_PER_SIGMA, SPATIAL_CHROMA_STRENGTH_PER_SIGMA)
        } else {
            (STRENGTH_PER_SIGMA, CHROMA_STRENGTH_PER_SIGMA)
        }
    }

    /// The parameters a frame is denoised with under `sigma_auto`, for the estimated deviations
    /// (8-bit code values); `self` unchanged otherwise.
    pub fn with_estimate(&self, luma: f32, chroma: Option<f32>) -> Params {
        if !self.sigma_auto {
            return *self;
        }
        let (s, c) = (luma.clamp(0.0, MAX_SIGMA), chroma.unwrap_or(luma).clamp(0.0, MAX_SIGMA));
        let mut p = if self.strength_fixed { Params { sigma: Some(s), ..*self } } else { self.with_noise_sigmas(s, c) };
        if p.algorithm == Algorithm::Bm3d && self.bm3d.chroma_sigma.is_none() && chroma.is_some() {
            p.bm3d.chroma_sigma = Some(c);
        }
        p
    }

    /// Checks every range; formats are checked by [`crate::plan::Plan::new`].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidParameter(m));
        if !(self.scene_cut.is_finite() && (0.0..=1.0).contains(&self.scene_cut)) {
            return bad(format!("scene cut {} out of range [0, 1] (0: no detection)", self.scene_cut));
        }
        if self.search_radius > MAX_SEARCH_RADIUS {
            return bad(format!("search radius {} out of range 0..={MAX_SEARCH_RADIUS}", self.search_radius));
        }
        if self.patch_radius > MAX_PATCH_RADIUS {
            return bad(format!("patch radius {} out of range 0..={MAX_PATCH_RADIUS}", self.patch_radius));
        }
        if self.aggregation_radius > self.patch_radius {
            return bad(format!("aggregation radius {} out of range 0..={} (the patch radius)", self.aggregation_radius, self.patch_radius));
        }
        if self.temporal_past > MAX_TEMPORAL_PAST {
            return bad(format!("temporal past {} out of range 0..={MAX_TEMPORAL_PAST}", self.temporal_past));
        }
        if self.temporal_future > MAX_TEMPORAL_FUTURE {
            return bad(format!("temporal future {} out of range 0..={MAX_TEMPORAL_FUTURE}", self.temporal_future));
        }
        for (name, h) in [("strength", self.strength), ("chroma strength", self.chroma_strength)] {
            if !(h.is_finite() && h > 0.0 && h <= MAX_STRENGTH) {
                return bad(format!("{name} {h} out of range (0, {MAX_STRENGTH}]"));
            }
        }
        if !(self.wref.is_finite() && self.wref >= 0.0 && self.wref <= MAX_WREF) {
            return bad(format!("wref {} out of range [0, {MAX_WREF}]", self.wref));
        }
        if let Some(s) = self.sigma {
            if !(s.is_finite() && (0.0..=MAX_SIGMA).contains(&s)) {
                return bad(format!("sigma {s} out of range [0, {MAX_SIGMA}]"));
            }
        }
        // BM3D settings only when BM3D runs: an unused setting is noted by the front end, not an
        // error (issue 33 item 11); switching to BM3D checks them then.
        if self.algorithm == Algorithm::Bm3d {
            let s = self.bm3d_resolved(None)?;
            // Per-frame groups read past + future frames on each side per step.
            if s.frame_groups && self.temporal_past + self.temporal_future > MAX_TEMPORAL_PAST {
                return bad(format!(
                    "bm3d frame groups: temporal past + future {} out of range 0..={MAX_TEMPORAL_PAST} (each step reads that many frames on each side)",
                    self.temporal_past + self.temporal_future
                ));
            }
        }
        if self.algorithm == Algorithm::NlmSr {
            self.sr.validate()?;
        }
        if self.algorithm == Algorithm::Bm3d && self.sigma.is_none() && !self.sigma_auto {
            return bad("bm3d needs the noise level: give sigma (8-bit code values), or let it be estimated (sigma auto: the element's sigma=-1, the command line without --sigma), which a set strength turns off".into());
        }
        Ok(())
    }

    /// The BM3D settings that run: the profile's for the given noise level with the overrides
    /// applied. With `sigma_auto` the estimate moves during the stream and the backend is not
    /// configured again for it, so the values stay those of unknown noise (the profile's
    /// `settings`); give the sigma for the high-noise values (docs/tuning.md).
    pub fn bm3d_settings(&self) -> Result<Bm3dSettings> {
        self.bm3d_resolved(if self.sigma_auto { None } else { self.sigma })
    }

    /// The BM3D settings for noise of `sigma` in this window: the profile's with the overrides,
    /// and per-frame groups, unless set, on where the window has future frames and past + future
    /// is within [`MAX_TEMPORAL_PAST`]: there the latency is paid already, and they give `fast`
    /// and `normal` about 0.5 dB and `high` its picture 2-3x faster (docs/tuning.md, "Per-frame
    /// groups"); a live window keeps them off (they would add 2 past frames of latency).
    fn bm3d_resolved(&self, sigma: Option<f32>) -> Result<Bm3dSettings> {
        let s = self.bm3d.resolve_for(sigma)?;
        let offline = self.temporal_future > 0 && self.temporal_past + self.temporal_future <= MAX_TEMPORAL_PAST;
        Ok(Bm3dSettings { frame_groups: self.bm3d.frame_groups.unwrap_or(offline), ..s })
    }

    /// Past and future frames a job reads. NLM: the temporal window. Two-step BM3D over a
    /// temporal window reads twice as far: the Wiener step of frame t matches on the basic
    /// estimates of t-past..t+future, each computed from its own window (src/bm3d/mod.rs).
    ///
    /// With per-frame groups (`Bm3dParams::frame_groups`) a step of frame t reads the windows of
    /// the frames t - future ..= t + past, so past + future frames on each side, and two steps
    /// twice that.
    pub fn frames_needed(&self) -> (u32, u32) {
        let bm3d = if self.algorithm == Algorithm::Bm3d { self.bm3d_resolved(None).ok() } else { None };
        let steps = bm3d.map(|s| s.steps).unwrap_or(1);
        let (p, f) = match bm3d {
            Some(s) if s.frame_groups => (self.temporal_past + self.temporal_future, self.temporal_past + self.temporal_future),
            _ => (self.temporal_past, self.temporal_future),
        };
        (steps * p, steps * f)
    }

    /// Frames of delay between an input frame and its output.
    pub fn latency_frames(&self) -> u32 {
        self.frames_needed().1
    }

    /// Number of frames a job reads.
    pub fn window_frames(&self) -> u32 {
        let (p, f) = self.frames_needed();
        p + 1 + f
    }

    /// True when changing from `self` to `other` only changes per-launch values (strengths, wref,
    /// weighting, sigma), so that the window and compiled kernels stay valid.
    pub fn same_structure(&self, other: &Params) -> bool {
        // The noise level picks BM3D's values (`Bm3dProfile::settings_for`): a sigma crossing
        // BM3D_HIGH_NOISE_SIGMA changes the search and the group sizes.
        let bm3d_same = self.algorithm != Algorithm::Bm3d || self.bm3d_settings().ok() == other.bm3d_settings().ok();
        let sr_same = self.algorithm != Algorithm::NlmSr || (self.sr.scale == other.sr.scale && self.sr.iterations == other.sr.iterations && self.sr.deblur == other.sr.deblur);
        bm3d_same
            && sr_same
            && self.algorithm == other.algorithm
            && self.search_radius == other.search_radius
            && self.patch_radius == other.patch_radius
            && self.aggregation_radius == other.aggregation_radius
            && self.temporal_past == other.temporal_past
            && self.temporal_future == other.temporal_future
            && self.chroma_mode == other.chroma_mode
            && self.planes == other.planes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_ranges_checked() {
        Params::default().validate().unwrap();
        let p = Params::default();
        assert!(Params { search_radius: MAX_SEARCH_RADIUS + 1, ..p }.validate().is_err());
        assert!(Params { patch_radius: MAX_PATCH_RADIUS + 1, ..p }.validate().is_err());
        assert!(Params { temporal_past: 8, ..p }.validate().is_err());
        assert!(Params { temporal_future: 8, ..p }.validate().is_err());
        assert!(Params { strength: 0.0, ..p }.validate().is_err());
        assert!(Params { chroma_strength: f32::NAN, ..p }.validate().is_err());
        assert!(Params { wref: -1.0, ..p }.validate().is_err());
        assert!(Params { aggregation_radius: 2, ..p }.validate().is_ok());
        let (k, kc) = p.strength_per_sigma();
        assert_eq!(Params { aggregation_radius: 1, ..p }.strength_per_sigma(), (AGGREGATION_STRENGTH_SCALE * k, AGGREGATION_STRENGTH_SCALE * kc));
        let e = Params { aggregation_radius: 3, ..p }.validate().unwrap_err().to_string();
        assert!(e.contains("aggregation radius 3 out of range 0..=2"), "{e}");
        assert!(Params { sigma: Some(-2.0), ..p }.validate().is_err());
        Params { search_radius: 0, patch_radius: 0, temporal_past: 0, ..p }.validate().unwrap();
    }

    #[test]
    fn bm3d_hard_block_step_follows_the_block_step_unless_set() {
        let resolve = |b: Bm3dParams| b.resolve_for(None).unwrap();
        let high = resolve(Bm3dParams { profile: Bm3dProfile::High, ..Default::default() });
        assert_eq!((high.block_step_of(false), high.block_step_of(true)), (3, 3));
        let s = resolve(Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), ..Default::default() });
        assert_eq!((s.block_step_of(false), s.block_step_of(true)), (4, 4));
        let s = resolve(Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), hard_block_step: Some(5), ..Default::default() });
        assert_eq!((s.block_step_of(false), s.block_step_of(true)), (5, 4));
        // A patch size below the profile's step brings the step down, and the hard step with it.
        let s = resolve(Bm3dParams { patch_size: Some(4), ..Default::default() });
        assert_eq!((s.block_step_of(false), s.block_step_of(true)), (4, 4));
        assert!(Bm3dParams { patch_size: Some(4), hard_block_step: Some(5), ..Default::default() }.resolve_for(None).is_err());
    }

    #[test]
    fn bm3d_wiener_seeds_follow_the_seeds_unless_set() {
        let resolve = |b: Bm3dParams| b.resolve_for(None).unwrap();
        let seeds = |s: Bm3dSettings| (s.seeds_of(false), s.seeds_of(true), s.most_seeds());
        // `normal` sets the Wiener step's 2 apart from its 3; seeds set alone take both steps.
        assert_eq!(seeds(resolve(Bm3dParams::default())), (3, 2, 3));
        assert_eq!(seeds(resolve(Bm3dParams { seeds: Some(2), ..Default::default() })), (2, 2, 2));
        assert_eq!(seeds(resolve(Bm3dParams { seeds: Some(4), wiener_seeds: Some(1), ..Default::default() })), (4, 1, 4));
        assert_eq!(seeds(resolve(Bm3dParams { profile: Bm3dProfile::High, ..Default::default() })), (3, 3, 3));
        assert_eq!(seeds(resolve(Bm3dParams { profile: Bm3dProfile::High, seeds: Some(2), ..Default::default() })), (2, 2, 2));
        assert_eq!(seeds(resolve(Bm3dParams { profile: Bm3dProfile::High, wiener_seeds: Some(2), ..Default::default() })), (3, 2, 3));
        assert_eq!(seeds(resolve(Bm3dParams { seeds: Some(1), wiener_seeds: Some(4), ..Default::default() })), (1, 4, 4));
        assert!(Bm3dParams { wiener_seeds: Some(0), ..Default::default() }.resolve_for(None).is_err());
    }

    /// `normal` is the setting measured for the default profile (docs/tuning.md, "The default
    /// profile"; runs 189-190 timed it as `high` with these overrides): every value equal.
    #[test]
    fn normal_is_high_with_block_step_4_radius_8_and_2_wiener_seeds() {
        for sigma in [None, Some(10.0), Some(20.0), Some(29.9)] {
            let high = Bm3dParams { profile: Bm3dProfile::High, block_step: Some(4), search_radius: Some(8), wiener_seeds: Some(2), ..Default::default() };
            assert_eq!(Bm3dParams::default().resolve_for(sigma).unwrap(), high.resolve_for(sigma).unwrap(), "sigma {sigma:?}");
        }
    }

    #[test]
    fn bm3d_searches_wider_and_groups_more_at_high_noise() {
        let at = |profile, sigma: Option<f32>, sigma_auto| Params { algorithm: Algorithm::Bm3d, sigma, sigma_auto, bm3d: Bm3dParams { profile, ..Default::default() }, ..Params::default() };
        let normal = |sigma| at(Bm3dProfile::Normal, Some(sigma), false).bm3d_settings().unwrap();
        let fast = |sigma| at(Bm3dProfile::Fast, Some(sigma), false).bm3d_settings().unwrap();
        assert_eq!((fast(29.9).search_radius, fast(29.9).group_size, fast(29.9).wiener_group_size), (6, 8, 8));
        assert_eq!((fast(30.0).search_radius, fast(30.0).group_size, fast(30.0).wiener_group_size, fast(30.0).block_step), (12, 16, 16, 6));
        // `normal` (Wiener groups of 32 already) searches wider.
        assert_eq!((normal(29.9).search_radius, normal(29.9).group_size, normal(29.9).wiener_group_size), (8, 16, 32));
        assert_eq!(normal(40.0), Bm3dSettings { threshold: 4800.0, search_radius: 16, ..normal(20.0) });
        let fast = fast(40.0);
        let high = at(Bm3dProfile::High, Some(40.0), false).bm3d_settings().unwrap();
        assert_eq!(high, Bm3dSettings { threshold: 4800.0, ..Bm3dProfile::High.settings() });
        // The hard-thresholding threshold follows sigma^2 once 3 sigma^2 passes the profile's 2500;
        // the Wiener step's does not move.
        assert_eq!((normal(20.0).threshold, normal(28.0).threshold, normal(50.0).threshold), (2500.0, 2500.0, 7500.0));
        assert_eq!((normal(50.0).wiener_threshold, fast.threshold, normal(200.0).threshold), (400.0, 4800.0, 65025.0));
        // An explicit value wins at every noise level; an estimated sigma keeps the low-noise values.
        let mut p = at(Bm3dProfile::Normal, Some(40.0), false);
        p.bm3d.search_radius = Some(10);
        p.bm3d.threshold = Some(3000.0);
        let s = p.bm3d_settings().unwrap();
        assert_eq!((s.search_radius, s.wiener_group_size, s.threshold), (10, 32, 3000.0));
        assert_eq!(at(Bm3dProfile::Normal, Some(40.0), true).bm3d_settings().unwrap(), Bm3dProfile::Normal.settings());
        // Crossing the level is a change of structure (the backend is configured again).
        assert!(!at(Bm3dProfile::Normal, Some(20.0), false).same_structure(&at(Bm3dProfile::Normal, Some(35.0), false)));
        assert!(at(Bm3dProfile::Normal, Some(20.0), false).same_structure(&at(Bm3dProfile::Normal, Some(25.0), false)));
    }

    #[test]
    fn sigma_sets_strengths_from_the_fit() {
        let p = Params::default().with_noise_sigma(20.0);
        assert_eq!(p.sigma, Some(20.0));
        assert!((p.strength - 14.2).abs() < 1e-4);
        assert!((p.chroma_strength - 17.0).abs() < 1e-4);
        p.validate().unwrap();
        assert!(Params::default().with_noise_sigma(0.0).validate().is_ok());
    }

    #[test]
    fn enums_parse() {
        assert_eq!("luma-guided".parse::<ChromaMode>().unwrap(), ChromaMode::LumaGuided);
        assert_eq!("Bisquare".parse::<Weighting>().unwrap(), Weighting::Bisquare);
        assert!("both".parse::<PlaneSelection>().is_err());
    }
}
