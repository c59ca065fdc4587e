//! CUDA backend (placeholder until implemented).

use crate::backend::{Backend, BackendOptions};
use crate::error::{Error, Result};

pub fn create(_options: &BackendOptions) -> Result<Box<dyn Backend>> {
    Err(Error::BackendUnavailable("CUDA backend not built yet".into()))
}
