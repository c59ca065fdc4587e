//! Finding GStreamer elements: every factory the pipeline needs is checked before anything is
//! built, and a missing one is named with the Debian package that provides it.

use anyhow::{anyhow, bail, Result};

use crate::Container;

/// The Debian package that provides a GStreamer element (bookworm).
fn package_of(factory: &str) -> &'static str {
    match factory {
        "x264enc" => "gstreamer1.0-plugins-ugly",
        "avenc_aac" => "gstreamer1.0-libav",
        "mp4mux" | "matroskamux" | "y4menc" => "gstreamer1.0-plugins-good",
        "filesrc" | "filesink" | "fdsink" | "fakesink" | "queue" => "libgstreamer1.0-0",
        _ => "gstreamer1.0-plugins-base",
    }
}

fn what_is(factory: &str) -> &'static str {
    match factory {
        "x264enc" => "H.264 encoder",
        "avenc_aac" => "AAC encoder",
        "opusenc" => "Opus encoder",
        "mp4mux" => "MP4 muxer",
        "matroskamux" => "Matroska muxer",
        "y4menc" => "YUV4MPEG2 encoder",
        "decodebin" => "automatic decoder",
        "videoconvert" | "audioconvert" | "audioresample" => "format converter",
        _ => "element",
    }
}

pub fn missing(factory: &str) -> String {
    format!("the GStreamer element '{factory}' ({}) is missing: install the Debian package {}", what_is(factory), package_of(factory))
}

pub fn make(factory: &str) -> Result<gst::Element> {
    gst::ElementFactory::make(factory).build().map_err(|_| anyhow!(missing(factory)))
}

/// Fails, naming the package to install, unless every element the pipeline for this input and
/// output needs is installed.
pub fn check_available(y4m_in: bool, output: Option<&str>, container: Option<Container>) -> Result<()> {
    let mut needed = vec!["queue", "videoconvert"];
    let sink = if output == Some("-") { "fdsink" } else { "filesink" };
    needed.extend(if y4m_in { &["appsrc"][..] } else { &["filesrc", "decodebin"][..] });
    match container {
        Some(Container::Mp4) => needed.extend(["x264enc", "mp4mux", sink]),
        Some(Container::Mkv) => needed.extend(["x264enc", "matroskamux", sink]),
        Some(Container::Y4m) => needed.extend(["appsink"]),
        None => needed.push("fakesink"),
    }
    for f in needed {
        if gst::ElementFactory::find(f).is_none() {
            bail!(missing(f));
        }
    }
    Ok(())
}
