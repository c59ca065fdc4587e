//! The GLib enum types of the elements' properties (their names, nicks and descriptions are
//! what gst-inspect shows) and their mapping to the engine's enums, written once for both
//! directions ([`From`]), so that `set_property` and `property` are one `into()` each.

use gst::glib;
use gst::prelude::*;

use nlmdenoise::nlm::{GpuKernel, Intermediate as EngineIntermediate};
use nlmdenoise::{Algorithm as EngineAlgorithm, BackendKind, Bm3dProfile as EngineBm3dProfile, ChromaMode as EngineChromaMode, PlaneSelection, Weighting as EngineWeighting};

/// `From` both ways between a property enum and the engine's enum with the same variant names.
/// Engine variants without a property value (`extra`) read as the given property value.
macro_rules! engine_enum {
    ($prop:ident <=> $engine:ident { $($v:ident),+ $(,)? } $(extra { $($e:ident => $ev:ident),+ $(,)? })?) => {
        impl From<$prop> for $engine {
            fn from(v: $prop) -> Self {
                match v {
                    $($prop::$v => $engine::$v,)+
                }
            }
        }

        impl From<$engine> for $prop {
            fn from(v: $engine) -> Self {
                match v {
                    $($engine::$v => $prop::$v,)+
                    $($($engine::$e => $prop::$ev,)+)?
                }
            }
        }
    };
}

/// Property `algorithm`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseAlgorithm")]
pub enum Algorithm {
    #[default]
    #[enum_value(name = "Temporal non-local means", nick = "nlm")]
    Nlm = 0,
    #[enum_value(name = "BM3D: block matching and 3D filtering (V-BM3D over the temporal window); its noise level: sigma, or estimated (sigma=-1, no strength set)", nick = "bm3d")]
    Bm3d = 1,
}

// The upscaler is its own element (nlmupscale); nlmdenoise never holds it.
engine_enum!(Algorithm <=> EngineAlgorithm { Nlm, Bm3d } extra { NlmSr => Nlm });

/// Property `bm3d-profile`.
#[derive(Debug, Eq, PartialEq, Ord, PartialOrd, Hash, Clone, Copy, glib::Enum, Default)]
#[repr(u32)]
#[enum_type(name = "GstNlmDenoiseBm3dProfile")]
pub enum Bm3dProfile {
    #[enum_value(name = "Fast: sparse reference patches, small search and groups", nick = "fast")]
    Fast = 0,
    #[default]
    #[enum_value(name = "Normal: the picture of high at real-time speed on a GPU", nick = "normal")]
    Normal = 1,
    #[enum_value(name = "High: dense reference patches, wide search, large groups", nick = "high")]
    High = 2,
}

engine_enum!(Bm3dProfile <=> EngineBm3dProfile { Fast, Normal, High });

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

// The reference backend is never set by the element: it reads as auto.
engine_enum!(Backend <=> BackendKind { Auto, Cpu, Cuda } extra { Reference => Auto });

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

engine_enum!(Weighting <=> EngineWeighting { Welsch, Bisquare });

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

engine_enum!(ChromaMode <=> EngineChromaMode { Independent, LumaGuided, Joint });

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

engine_enum!(Planes <=> PlaneSelection { All, Luma, Chroma });

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

engine_enum!(Kernel <=> GpuKernel { Auto, Fused, Multipass });

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

engine_enum!(Intermediate <=> EngineIntermediate { F32, F16, Unorm10 });

/// Marks the enum types as plugin API (gst-inspect and the documentation cache describe them
/// with the plugin).
pub fn mark_as_plugin_api() {
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
}
