//! GStreamer plugin `nlmdenoise`: temporal non-local means video denoising.
//!
//! The plugin holds two elements, thin wrappers around the engine crate's
//! [`::nlmdenoise::Denoiser`] sharing their frame flow ([`transform`]): `nlmdenoise`
//! ([`nlmdenoise::NlmDenoise`]) and `nlmupscale` ([`nlmupscale::NlmUpscale`], multi-frame NLM
//! super-resolution). See `docs/element.md` for properties and example pipelines.

use gst::glib;

mod lending;
mod logbridge;
pub mod nlmdenoise;
pub mod nlmupscale;
mod transform;

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
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
