//! The `nlmdenoise` element: public wrapper type and registration (its property enums are
//! [`crate::enums`], shared with `nlmupscale`).

use gst::glib;
use gst::prelude::*;

mod imp;

glib::wrapper! {
    /// Temporal non-local means video denoiser (a `GstBaseTransform`).
    pub struct NlmDenoise(ObjectSubclass<imp::NlmDenoise>) @extends gst_base::BaseTransform, gst::Element, gst::Object;
}

/// Registers the element with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(Some(plugin), "nlmdenoise", gst::Rank::NONE, NlmDenoise::static_type())
}
