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
    /// A backend failed while running; the variant says how ([`BackendError`]).
    #[error("backend error: {0}")]
    Backend(#[from] BackendError),
    /// An engine call was made in the wrong state (e.g. pop with nothing ready).
    #[error("invalid state: {0}")]
    State(String),
}

/// How a backend failed. Callers decide by variant (the element falls back to the CPU when a GPU
/// fails, whatever the way), never by the text, which is for people.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BackendError {
    /// The device (or pinned host memory) could not hold what the stream needs.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// A kernel could not be launched (resources, configuration).
    #[error("kernel launch failed: {0}")]
    Launch(String),
    /// The device faulted or went away; its context is unusable (CUDA's sticky errors).
    #[error("device lost: {0}")]
    DeviceLost(String),
    /// A kernel did not compile (NVRTC) or its module did not load.
    #[error("kernel compilation failed: {0}")]
    Compile(String),
    /// Any other error of the driver.
    #[error("{0}")]
    Driver(String),
    /// A host-side failure of the backend (worker threads: could not start, stopped, panicked).
    #[error("{0}")]
    Host(String),
}

impl BackendError {
    /// The same failure with `what` (the operation) in front of its text.
    pub fn context(self, what: impl std::fmt::Display) -> Self {
        use BackendError::*;
        match self {
            OutOfMemory(m) => OutOfMemory(format!("{what}: {m}")),
            Launch(m) => Launch(format!("{what}: {m}")),
            DeviceLost(m) => DeviceLost(format!("{what}: {m}")),
            Compile(m) => Compile(format!("{what}: {m}")),
            Driver(m) => Driver(format!("{what}: {m}")),
            Host(m) => Host(format!("{what}: {m}")),
        }
    }

    /// True for failures of a compute device (every variant but [`BackendError::Host`]).
    pub fn is_device_failure(&self) -> bool {
        !matches!(self, BackendError::Host(_))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
