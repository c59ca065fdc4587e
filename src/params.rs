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

/// Luma strength per unit of noise sigma when only `sigma` is given: the least-squares fit of the
/// best strengths found by `scripts/quality` (temporal past 2, sigma 5..30; docs/tuning.md).
pub const STRENGTH_PER_SIGMA: f32 = 0.71;
/// Chroma strength per unit of noise sigma (median of the per-clip fits; docs/tuning.md).
pub const CHROMA_STRENGTH_PER_SIGMA: f32 = 0.85;

/// Which filter computes the output frames. Each has its own folder under `src/` (its plan, f64
/// reference, CPU and CUDA implementations); the device layer runs any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// Temporal non-local means ([`crate::nlm`]).
    #[default]
    Nlm,
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

text_enum!(Algorithm, "algorithm", Algorithm::Nlm => "nlm");
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
    /// Noise standard deviation; when set, 2*sigma^2 is subtracted from every distance.
    pub sigma: Option<f32>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            algorithm: Algorithm::Nlm,
            search_radius: 3,
            patch_radius: 2,
            temporal_past: 2,
            temporal_future: 0,
            strength: 10.0,
            chroma_strength: 10.0,
            weighting: Weighting::Welsch,
            wref: 1.0,
            chroma_mode: ChromaMode::Independent,
            planes: PlaneSelection::All,
            sigma: None,
        }
    }
}

impl Params {
    /// Sets `sigma` and the strengths that suit it (see [`STRENGTH_PER_SIGMA`]); used when a
    /// caller knows the noise level but gave no strength.
    pub fn with_noise_sigma(self, sigma: f32) -> Params {
        let h = |k: f32| (k * sigma).clamp(0.01, MAX_STRENGTH);
        Params { sigma: Some(sigma), strength: h(STRENGTH_PER_SIGMA), chroma_strength: h(CHROMA_STRENGTH_PER_SIGMA), ..self }
    }

    /// Checks every range; formats are checked by [`crate::plan::Plan::new`].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidParameter(m));
        if self.search_radius > MAX_SEARCH_RADIUS {
            return bad(format!("search radius {} out of range 0..={MAX_SEARCH_RADIUS}", self.search_radius));
        }
        if self.patch_radius > MAX_PATCH_RADIUS {
            return bad(format!("patch radius {} out of range 0..={MAX_PATCH_RADIUS}", self.patch_radius));
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
        Ok(())
    }

    /// Frames of delay between an input frame and its output.
    pub fn latency_frames(&self) -> u32 {
        self.temporal_future
    }

    /// Number of frames the temporal window spans.
    pub fn window_frames(&self) -> u32 {
        self.temporal_past + 1 + self.temporal_future
    }

    /// True when changing from `self` to `other` only changes per-launch values (strengths, wref,
    /// weighting, sigma), so that the window and compiled kernels stay valid.
    pub fn same_structure(&self, other: &Params) -> bool {
        self.algorithm == other.algorithm
            && self.search_radius == other.search_radius
            && self.patch_radius == other.patch_radius
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
        assert!(Params { sigma: Some(-2.0), ..p }.validate().is_err());
        Params { search_radius: 0, patch_radius: 0, temporal_past: 0, ..p }.validate().unwrap();
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
