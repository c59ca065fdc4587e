//! Video denoising engine: temporal non-local means and (V-)BM3D on host threads and CUDA devices,
//! and multi-frame NLM super-resolution on the same machinery.
//!
//! The engine knows nothing of GStreamer: give it frames ([`frame::FrameRef`]) of a supported
//! [`format::PixelFormat`], get denoised frames back in order from [`engine::Denoiser`].
//!
//! Two axes, kept apart in the tree:
//! * *where* frames are computed: [`device`] (host threads, a CUDA device with its ring, streams
//!   and host I/O, chunks along time, several devices);
//! * *what* is computed: one folder per algorithm ([`nlm`], [`bm3d`], [`sr`]), each with its plan, its
//!   f64 reference, its CPU and its CUDA implementation.
//!
//! [`backends`] is the composition root that pairs them. [`engine`] (window, ordering,
//! unpack/pack) sits above both; [`plan::Plan`] carries the
//! parameters resolved for a stream from the engine to the device layer and its algorithm.

pub mod backends;
pub mod bm3d;
pub mod convert;
pub mod device;
pub mod engine;
pub mod error;
pub mod format;
pub mod frame;
pub mod fuzzing;
pub mod nlm;
pub mod noise;
pub mod params;
pub mod plan;
pub mod planar;
pub mod scene;
pub mod sr;
pub mod window;
pub mod y4m;

pub use backends::BackendOptions;
pub use device::BackendKind;
pub use engine::Denoiser;
pub use error::{BackendError, Error, Result};
pub use format::PixelFormat;
pub use frame::{FrameMut, FrameRef, OwnedFrame, VideoInfo};
pub use params::{unused_setting_note, Algorithm, Bm3dParams, Bm3dProfile, ChromaMode, Params, PlaneSelection, SettingUse, SrParams, Weighting};
pub use plan::Plan;
