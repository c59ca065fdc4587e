//! The `nlmdenoise` element: public wrapper type, property enums and registration.

use gst::glib;
use gst::prelude::*;

pub(crate) mod imp;

pub use imp::format_to_gst;
pub use imp::gst_to_format;
pub use imp::{apply_devices, devices_to_string};

glib::wrapper! {
    /// Temporal non-local means video denoiser (a `GstBaseTransform`).
    pub struct NlmDenoise(ObjectSubclass<imp::NlmDenoise>) @extends gst_base::BaseTransform, gst::Element, gst::Object;
}

/// Property `algorithm`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseAlgorithm")]
pub enum Algorithm {
    #[default]
    #[enum_value(name = "Temporal non-local means", nick = "nlm")]
    Nlm = 0,
    #[enum_value(name = "BM3D: block matching and 3D filtering (V-BM3D over the temporal window); needs sigma", nick = "bm3d")]
    Bm3d = 1,
}

impl Algorithm {
    pub fn to_engine(self) -> nlmdenoise::Algorithm {
        match self {
            Algorithm::Nlm => nlmdenoise::Algorithm::Nlm,
            Algorithm::Bm3d => nlmdenoise::Algorithm::Bm3d,
        }
    }

    pub fn from_engine(a: nlmdenoise::Algorithm) -> Self {
        match a {
            nlmdenoise::Algorithm::Nlm => Algorithm::Nlm,
            nlmdenoise::Algorithm::Bm3d => Algorithm::Bm3d,
            // The upscaler is its own element (nlmupscale); nlmdenoise never holds it.
            nlmdenoise::Algorithm::NlmSr => Algorithm::Nlm,
        }
    }
}

/// Property `bm3d-profile`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseBm3dProfile")]
pub enum Bm3dProfile {
    #[enum_value(name = "Fast: sparse reference patches, small search and groups", nick = "fast")]
    Fast = 0,
    #[default]
    #[enum_value(name = "Normal: the balance of speed and quality", nick = "normal")]
    Normal = 1,
    #[enum_value(name = "High: dense reference patches, wide search, large groups", nick = "high")]
    High = 2,
}

impl Bm3dProfile {
    pub fn to_engine(self) -> nlmdenoise::Bm3dProfile {
        match self {
            Bm3dProfile::Fast => nlmdenoise::Bm3dProfile::Fast,
            Bm3dProfile::Normal => nlmdenoise::Bm3dProfile::Normal,
            Bm3dProfile::High => nlmdenoise::Bm3dProfile::High,
        }
    }

    pub fn from_engine(p: nlmdenoise::Bm3dProfile) -> Self {
        match p {
            nlmdenoise::Bm3dProfile::Fast => Bm3dProfile::Fast,
            nlmdenoise::Bm3dProfile::Normal => Bm3dProfile::Normal,
            nlmdenoise::Bm3dProfile::High => Bm3dProfile::High,
        }
    }
}

/// Property `backend`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseBackend")]
pub enum Backend {
    /// CUDA when a usable device and NVRTC are present, else the CPU backend.
    #[default]
    #[enum_value(name = "Auto: CUDA when usable, else CPU", nick = "auto")]
    Auto = 0,
    #[enum_value(name = "CPU (multithreaded)", nick = "cpu")]
    Cpu = 1,
    #[enum_value(name = "CUDA (error when unavailable)", nick = "cuda")]
    Cuda = 2,
}

impl Backend {
    pub fn to_engine(self) -> nlmdenoise::BackendKind {
        match self {
            Backend::Auto => nlmdenoise::BackendKind::Auto,
            Backend::Cpu => nlmdenoise::BackendKind::Cpu,
            Backend::Cuda => nlmdenoise::BackendKind::Cuda,
        }
    }

    /// The property value of a backend kind (the reference, never set by the element, as auto).
    pub fn from_engine(kind: nlmdenoise::BackendKind) -> Self {
        match kind {
            nlmdenoise::BackendKind::Cpu => Backend::Cpu,
            nlmdenoise::BackendKind::Cuda => Backend::Cuda,
            nlmdenoise::BackendKind::Auto | nlmdenoise::BackendKind::Reference => Backend::Auto,
        }
    }
}

/// Property `weighting`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseWeighting")]
pub enum Weighting {
    #[default]
    #[enum_value(name = "Welsch: exp(-d2/h^2)", nick = "welsch")]
    Welsch = 0,
    #[enum_value(name = "Bisquare: max(1-d2/h^2,0)^2", nick = "bisquare")]
    Bisquare = 1,
}

/// Property `chroma-mode`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseChromaMode")]
pub enum ChromaMode {
    #[default]
    #[enum_value(name = "Independent: each plane computes its own weights", nick = "independent")]
    Independent = 0,
    #[enum_value(name = "Luma-guided: chroma reuses the luma weights", nick = "luma-guided")]
    LumaGuided = 1,
    #[enum_value(name = "Joint: one set of weights from all planes (4:4:4 and RGB only)", nick = "joint")]
    Joint = 2,
}

/// Property `planes`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoisePlanes")]
pub enum Planes {
    #[default]
    #[enum_value(name = "All planes", nick = "all")]
    All = 0,
    #[enum_value(name = "Luma only (chroma copied)", nick = "luma")]
    Luma = 1,
    #[enum_value(name = "Chroma only (luma copied)", nick = "chroma")]
    Chroma = 2,
}

/// Property `kernel` (CUDA only).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseKernel")]
pub enum Kernel {
    #[default]
    #[enum_value(name = "Auto: the faster one for the parameters", nick = "auto")]
    Auto = 0,
    #[enum_value(name = "Fused single-pass kernel", nick = "fused")]
    Fused = 1,
    #[enum_value(name = "Multi-pass kernels", nick = "multipass")]
    Multipass = 2,
}

/// Property `intermediate` (CUDA multi-pass only).
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseIntermediate")]
pub enum Intermediate {
    #[enum_value(name = "32-bit float", nick = "f32")]
    F32 = 0,
    #[enum_value(name = "16-bit float", nick = "f16")]
    F16 = 1,
    #[default]
    #[enum_value(name = "Three 10-bit normalized values per 32-bit word", nick = "unorm10")]
    Unorm10 = 2,
}

/// Registers the element (and its enum types as plugin API) with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    for t in [
        Algorithm::static_type(),
        Bm3dProfile::static_type(),
        Backend::static_type(),
        Weighting::static_type(),
        ChromaMode::static_type(),
        Planes::static_type(),
        Kernel::static_type(),
        Intermediate::static_type(),
    ] {
        t.mark_as_plugin_api(gst::PluginAPIFlags::empty());
    }
    gst::Element::register(Some(plugin), "nlmdenoise", gst::Rank::NONE, NlmDenoise::static_type())
}
