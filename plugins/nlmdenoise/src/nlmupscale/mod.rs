//! The `nlmupscale` element: public wrapper type and registration.

use gst::glib;
use gst::prelude::*;

mod imp;

glib::wrapper! {
    /// Multi-frame NLM super-resolution: output frames `scale` times the input's width and
    /// height (a `GstBaseTransform`).
    pub struct NlmUpscale(ObjectSubclass<imp::NlmUpscale>) @extends gst_base::BaseTransform, gst::Element, gst::Object;
}

/// Registers the element with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(Some(plugin), "nlmupscale", gst::Rank::NONE, NlmUpscale::static_type())
}
