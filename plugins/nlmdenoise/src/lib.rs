//! GStreamer plugin `nlmdenoise`: temporal non-local means video denoising.
//!
//! The plugin holds two elements, thin wrappers around the engine crate's
//! [`::nlmdenoise::Denoiser`]: `nlmdenoise` ([`nlmdenoise::NlmDenoise`]) and `nlmupscale`
//! ([`nlmupscale::NlmUpscale`], multi-frame NLM super-resolution). See `docs/element.md` for
//! properties and example pipelines.
//!
//! Layout (the gst-plugins-rs pattern: siblings share through crate modules, never through each
//! other): each element's folder holds its `glib::wrapper!` (`mod.rs`) and its own properties and
//! caps (`imp.rs`). What both use lives in crate modules: the frame flow (`core`, `flow`,
//! `allocation`, `qos`, `errors`, `state`, `lending`), the settings and the shared property
//! table (`settings`, `properties`, [`enums`]) and the caps (`caps`).

// Unsafe code only where GStreamer's CUDA library is called (`cudamem`, which allows it).
#![deny(unsafe_code)]

use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use gst::glib;

mod allocation;
mod caps;
mod core;
mod cuda;
mod cudamem;
pub mod enums;
mod errors;
mod flow;
mod lending;
mod logbridge;
pub mod nlmdenoise;
pub mod nlmupscale;
mod properties;
mod qos;
mod settings;
mod state;

pub use caps::{format_to_gst, gst_to_format, MAX_SIDE};
pub use core::UNUSED_SETTING_WARNING;
pub use settings::{apply_devices, devices_to_string, MAX_PIPELINE_DEPTH, MAX_THREADS};

/// The plugin's debug category: the `nlmdenoise` element's, and the shared code's before it is
/// attached to an element (each element passes its own to [`core::Core::attach`]).
pub(crate) static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| gst::DebugCategory::new("nlmdenoise", gst::DebugColorFlags::empty(), Some("Temporal non-local means video denoiser")));

/// Locks `m`, going on after a panic elsewhere: the guarded values stay consistent between
/// statements, and a streaming thread must not take the whole pipeline down with it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    enums::mark_as_plugin_api();
    nlmdenoise::register(plugin)?;
    nlmupscale::register(plugin)
}

gst::plugin_define!(
    nlmdenoise,
    env!("CARGO_PKG_DESCRIPTION"),
    plugin_init,
    concat!(env!("CARGO_PKG_VERSION"), "-", env!("COMMIT_ID")),
    "MIT/X11",
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_NAME"),
    "nlmdenoise (local build)",
    env!("BUILD_REL_DATE")
);
