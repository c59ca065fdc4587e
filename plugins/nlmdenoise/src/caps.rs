//! Caps of both elements: the mapping between GStreamer's video formats and the engine's, the
//! pad templates (every engine format, any size up to [`MAX_SIDE`]), and the engine's view of
//! negotiated caps and of mapped input frames. Each element's `transform_caps` stays its own.

use gst_video::prelude::*;

use nlmdenoise::{FrameRef, PixelFormat};

/// Largest frame side the engine accepts.
pub const MAX_SIDE: i32 = 1 << 16;

/// The GStreamer format of an engine format (every engine format has one).
pub fn format_to_gst(format: PixelFormat) -> gst_video::VideoFormat {
    gst_video::VideoFormat::from_string(format.name())
}

/// The engine format of a GStreamer format, if the engine supports it.
pub fn gst_to_format(format: gst_video::VideoFormat) -> Option<PixelFormat> {
    PixelFormat::ALL.into_iter().find(|f| format_to_gst(*f) == format && format != gst_video::VideoFormat::Unknown)
}

/// The pad templates of every element of the plugin: every engine format, any size, in CUDA
/// memory and in system memory (`crate::cuda`: left out of caps queries where CUDA memory is
/// unavailable); the caps each element accepts are then its own business.
pub fn pad_templates() -> Vec<gst::PadTemplate> {
    let formats = || PixelFormat::ALL.into_iter().map(format_to_gst);
    // CUDA memory first: between two elements that take both (cudaupload, a GPU decoder) frames
    // stay on the GPU; a neighbour of system memory only picks system memory.
    let mut caps = gst_video::VideoCapsBuilder::new().features([crate::cudamem::CAPS_FEATURE]).format_list(formats()).width_range(1..=MAX_SIDE).height_range(1..=MAX_SIDE).build();
    let system = gst_video::VideoCapsBuilder::new().format_list(formats()).width_range(1..=MAX_SIDE).height_range(1..=MAX_SIDE).build();
    caps.merge(system);
    let src = gst::PadTemplate::new("src", gst::PadDirection::Src, gst::PadPresence::Always, &caps).expect("valid src template");
    let sink = gst::PadTemplate::new("sink", gst::PadDirection::Sink, gst::PadPresence::Always, &caps).expect("valid sink template");
    vec![src, sink]
}

/// `caps` with each structure also in the other memory (system <-> CUDA, after the structure's
/// own, so that frames stay where they are when both sides can): both elements take frames in
/// one memory and give them in the other (the engine copies on the GPU, or through the host).
/// Without CUDA memory available here, the caps as they are.
pub fn in_either_memory(caps: &gst::Caps) -> gst::Caps {
    if !crate::cudamem::available() || caps.is_any() {
        return caps.clone();
    }
    let mut out = caps.clone();
    for (s, f) in caps.iter_with_features() {
        let other = if crate::cudamem::is_cuda_features(f) { gst::CapsFeatures::new_empty() } else { gst::CapsFeatures::new([crate::cudamem::CAPS_FEATURE]) };
        out.merge_structure_full(s.to_owned(), Some(other));
    }
    out
}

/// The caps' video info and the engine's: an error message where the caps are not video or the
/// format is not one of the engine's.
pub fn engine_info_from_caps(caps: &gst::CapsRef) -> Result<(gst_video::VideoInfo, nlmdenoise::VideoInfo), String> {
    let info = gst_video::VideoInfo::from_caps(caps).map_err(|e| format!("invalid video caps {caps}: {e}"))?;
    let format = gst_to_format(info.format()).ok_or_else(|| format!("format {} is not supported", info.format().to_str()))?;
    let engine_info = nlmdenoise::VideoInfo::new(format, info.width() as usize, info.height() as usize).map_err(|e| e.to_string())?;
    Ok((info, engine_info))
}

/// Builds the engine's view of a mapped input frame from its real plane pointers and strides.
pub fn frame_ref<'a>(info: nlmdenoise::VideoInfo, frame: &'a gst_video::VideoFrameRef<&gst::BufferRef>) -> Result<FrameRef<'a>, String> {
    let n = frame.n_planes() as usize;
    let strides = frame.plane_stride();
    let mut planes = Vec::with_capacity(n);
    let mut st = Vec::with_capacity(n);
    for (p, &s) in strides.iter().enumerate().take(n) {
        if s <= 0 {
            return Err(format!("plane {p} has stride {s}; only positive strides are supported"));
        }
        planes.push(frame.plane_data(p as u32).map_err(|e| e.to_string())?);
        st.push(s as usize);
    }
    FrameRef::new(info, &planes, &st).map_err(|e| e.to_string())
}
