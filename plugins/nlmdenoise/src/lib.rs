//! GStreamer plugin `nlmdenoise`: temporal non-local means video denoising.
//!
//! The plugin holds one element, `nlmdenoise` ([`nlmdenoise::NlmDenoise`]), a thin wrapper around
//! the engine crate's [`::nlmdenoise::Denoiser`]. See `docs/element.md` for properties and example
//! pipelines.

use gst::glib;

mod logbridge;
pub mod nlmdenoise;
mod transform;

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    nlmdenoise::register(plugin)
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
