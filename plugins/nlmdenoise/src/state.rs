//! The per-stream state of an element (what `set_caps` creates and `stop` drops) and the tag each
//! frame carries through the engine ([`FrameMeta`]), so that an output buffer gets its own input
//! frame's timestamps and flags, however many frames the engine holds back.

use nlmdenoise::BackendOptions;
use nlmdenoise::Denoiser;

use crate::lending::Lending;

/// What an output buffer inherits from its input frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameMeta {
    pub pts: Option<gst::ClockTime>,
    dts: Option<gst::ClockTime>,
    duration: Option<gst::ClockTime>,
    offset: u64,
    offset_end: u64,
    flags: gst::BufferFlags,
}

impl FrameMeta {
    pub fn of(buf: &gst::BufferRef) -> Self {
        FrameMeta { pts: buf.pts(), dts: buf.dts(), duration: buf.duration(), offset: buf.offset(), offset_end: buf.offset_end(), flags: buf.flags() - gst::BufferFlags::TAG_MEMORY }
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
}
