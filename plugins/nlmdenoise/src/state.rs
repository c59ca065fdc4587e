//! The per-stream state of an element (what `set_caps` creates and `stop` drops) and the tag each
//! frame carries through the engine ([`FrameMeta`]), so that an output buffer gets its own input
//! frame's timestamps, flags and metas, however many frames the engine holds back.

use gst::glib;
use nlmdenoise::BackendOptions;
use nlmdenoise::Denoiser;

use crate::lending::Lending;

/// Which of an input buffer's metas its output frame carries (GstMeta API tags say what a meta
/// depends on; a meta whose API has the `memory` tag describes the buffer's memory and never
/// travels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaPolicy {
    /// The frame keeps its size, orientation and colours (`nlmdenoise`): metas tagged with at
    /// most `video`, `size`, `orientation` and `colorspace` (captions, timecodes, overlay
    /// compositions, regions of interest, crop, reference timestamps, custom metas, ...).
    KeepsGeometry,
    /// The frame is scaled (`nlmupscale`): metas tagged with at most `video` and `colorspace`,
    /// as GStreamer's scalers do; those that depend on the size (crop, regions of interest) are
    /// dropped.
    Scales,
}

impl MetaPolicy {
    fn tags(self) -> &'static [&'static str] {
        match self {
            MetaPolicy::KeepsGeometry => &["video", "size", "orientation", "colorspace"],
            MetaPolicy::Scales => &["video", "colorspace"],
        }
    }

    /// Whether metas of API `api` travel with the frame.
    pub fn keeps(self, api: glib::Type) -> bool {
        use gst::prelude::*;
        // Overlay compositions place their rectangles in the input's pixels (their API has no
        // tags): a scaled frame would show them in the wrong place.
        let misplaced = self == MetaPolicy::Scales && api == gst_video::VideoOverlayCompositionMeta::meta_api();
        !misplaced && !gst::meta::meta_api_type_has_tag::<gst::meta::tags::Memory>(api) && gst::meta::meta_api_type_tags_contain_only(api, self.tags())
    }
}

/// What an output buffer inherits from its input frame.
#[derive(Debug, Clone)]
pub struct FrameMeta {
    pub pts: Option<gst::ClockTime>,
    dts: Option<gst::ClockTime>,
    duration: Option<gst::ClockTime>,
    offset: u64,
    offset_end: u64,
    flags: gst::BufferFlags,
    /// The input's metas that travel with the frame ([`MetaPolicy`]), copied onto an empty
    /// buffer (none: the input had none to carry).
    metas: Option<gst::Buffer>,
}

impl FrameMeta {
    pub fn of(buf: &gst::BufferRef, policy: MetaPolicy) -> Self {
        let mut carrier: Option<gst::Buffer> = None;
        let copy = gst::meta::MetaTransformCopy::new(..);
        for meta in buf.iter_meta::<gst::Meta>() {
            if !policy.keeps(meta.api()) {
                continue;
            }
            let c = carrier.get_or_insert_with(gst::Buffer::new);
            // Metas without a copy function stay behind, as with GStreamer's own filters.
            let _ = meta.transform(c.get_mut().expect("a new buffer"), &copy);
        }
        FrameMeta {
            pts: buf.pts(),
            dts: buf.dts(),
            duration: buf.duration(),
            offset: buf.offset(),
            offset_end: buf.offset_end(),
            flags: buf.flags() - gst::BufferFlags::TAG_MEMORY,
            metas: carrier.filter(|c| c.n_memory() == 0 && c.iter_meta::<gst::Meta>().next().is_some()),
        }
    }

    pub fn apply(&self, buf: &mut gst::BufferRef) {
        buf.set_pts(self.pts);
        buf.set_dts(self.dts);
        buf.set_duration(self.duration);
        buf.set_offset(self.offset);
        buf.set_offset_end(self.offset_end);
        let old = buf.flags() - gst::BufferFlags::TAG_MEMORY;
        buf.unset_flags(old);
        buf.set_flags(self.flags);
        if let Some(carrier) = &self.metas {
            let copy = gst::meta::MetaTransformCopy::new(..);
            for meta in carrier.iter_meta::<gst::Meta>() {
                let _ = meta.transform(buf, &copy);
            }
        }
    }
}

/// What `set_caps` sets up for a stream: the caps' infos and the engine that processes them.
pub struct State {
    pub info: gst_video::VideoInfo,
    pub engine_info: nlmdenoise::VideoInfo,
    /// The output caps' info (the input's, or scaled).
    pub out_info: gst_video::VideoInfo,
    pub denoiser: Denoiser<FrameMeta>,
    /// `Settings::generation` the denoiser's parameters correspond to.
    pub generation: u64,
    /// Duration of the last input buffer (latency for variable-framerate streams).
    pub last_duration: Option<gst::ClockTime>,
    /// Stream time of the last noise-estimate message (at most one a second).
    pub last_noise_message: Option<gst::ClockTime>,
    /// With `backend=auto` on a GPU: the CPU backend's options, to go on with if the GPU fails
    /// mid-stream (documented in docs/element.md); taken at the first such failure.
    pub fallback: Option<BackendOptions>,
    /// Frames lent without copies (`zero-copy`, [`crate::lending`]); declared after `denoiser`, so
    /// that the planes its stores hold are freed after the engine's backend.
    pub lending: Option<Lending>,
    /// Frames pass through unchanged (`strength=0` or `sigma=0`); the engine holds nothing.
    pub passthrough: bool,
    /// The input caps, and the output caps, are in CUDA memory (`crate::cuda`).
    pub cuda_in: bool,
    pub cuda_out: bool,
}
