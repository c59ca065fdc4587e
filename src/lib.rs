//! Temporal non-local means video denoising.
//!
//! The engine knows nothing of GStreamer: give it frames ([`frame::FrameRef`]) of a supported
//! [`format::PixelFormat`], get denoised frames back in order from [`engine::Denoiser`]. Backends
//! ([`backend`]): a plain f64 reference, a fast multithreaded CPU implementation and CUDA.

pub mod backend;
pub mod convert;
pub mod engine;
pub mod error;
pub mod format;
pub mod frame;
pub mod params;
pub mod plan;
pub mod planar;
pub mod window;
pub mod y4m;

pub use backend::{BackendKind, BackendOptions};
pub use engine::Denoiser;
pub use error::{Error, Result};
pub use format::PixelFormat;
pub use frame::{FrameMut, FrameRef, OwnedFrame, VideoInfo};
pub use params::{ChromaMode, Params, PlaneSelection, Weighting};
