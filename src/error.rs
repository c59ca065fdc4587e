//! Engine error type. Every fallible engine call returns [`Result`]; nothing in the engine panics on
//! bad input.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// A parameter is out of its range or does not fit the stream.
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// A frame does not match the declared format, size or plane layout.
    #[error("invalid frame: {0}")]
    InvalidFrame(String),
    /// The format is not supported for the requested operation.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The requested backend cannot run on this machine (no GPU, no driver, no NVRTC, ...).
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// A backend failed while running (GPU error, out of memory, kernel compile failure, ...).
    #[error("backend error: {0}")]
    Backend(String),
    /// An engine call was made in the wrong state (e.g. pop with nothing ready).
    #[error("invalid state: {0}")]
    State(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
