//! The y4m output of the GStreamer path: an `appsink` whose frames the tool writes with its own
//! y4m writer (`nlmdenoise::y4m::Y4mWriter`), so that every depth and subsampling the engine
//! carries in y4m (4:2:0, 4:2:2, 4:4:4 and mono at 8 bits, 4:2:0 at 10, 4:4:4 and mono at 16)
//! comes out as it went in. GStreamer 1.22's `y4menc` writes 8-bit only: a 10-bit input became
//! 8-bit 4:2:0 through it.

use std::io::{BufWriter, Write};
use std::sync::Mutex;

use anyhow::{Context, Result};
use gst::prelude::*;
use gst_video::prelude::*;
use gstnlmdenoise::{format_to_gst, gst_to_format};
use nlmdenoise::y4m::{Y4mHeader, Y4mLayout, Y4mWriter};
use nlmdenoise::{FrameRef, PixelFormat, VideoInfo};

type Out = Box<dyn Write + Send>;

/// An appsink that takes the formats y4m carries as they are (videoconvert before it picks the
/// closest one to the element's output) and writes them to `output` (`-` or none: standard
/// output).
pub fn y4m_sink(output: Option<&str>) -> Result<gst::Element> {
    let formats: Vec<String> = PixelFormat::ALL.into_iter().filter(|f| Y4mLayout::tag_of(*f).is_some()).map(|f| format_to_gst(f).to_str().to_string()).collect();
    let caps = gst::Caps::builder("video/x-raw").field("format", gst::List::new(formats.iter().map(|s| s.as_str()))).build();
    let out: Out = match output {
        Some("-") | None => Box::new(std::io::stdout()),
        Some(path) => Box::new(std::fs::File::create(path).with_context(|| format!("creating '{path}'"))?),
    };
    let out = Mutex::new(Some(BufWriter::with_capacity(1 << 20, out)));
    let writer: Mutex<Option<Y4mWriter<BufWriter<Out>>>> = Mutex::new(None);
    let sink = gst_app::AppSink::builder().caps(&caps).sync(false).build();
    let state = std::sync::Arc::new((out, writer));
    let (s1, s2) = (state.clone(), state);
    sink.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |sink| {
                let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                write_sample(&s1.0, &s1.1, &sample).map_err(|e| {
                    gst::element_error!(sink, gst::ResourceError::Write, ("writing the y4m output: {e:#}"));
                    gst::FlowError::Error
                })?;
                Ok(gst::FlowSuccess::Ok)
            })
            .eos(move |sink| {
                let w = s2.1.lock().unwrap_or_else(|e| e.into_inner()).take();
                let done = match w {
                    Some(w) => w.finish().and_then(|mut o| o.flush()),
                    // No frame: nothing is known of the stream, so nothing is written.
                    None => s2.0.lock().unwrap_or_else(|e| e.into_inner()).take().map_or(Ok(()), |mut o| o.flush()),
                };
                if let Err(e) = done {
                    gst::element_error!(sink, gst::ResourceError::Write, ("finishing the y4m output: {e}"));
                }
            })
            .build(),
    );
    Ok(sink.upcast())
}

fn write_sample(out: &Mutex<Option<BufWriter<Out>>>, writer: &Mutex<Option<Y4mWriter<BufWriter<Out>>>>, sample: &gst::Sample) -> Result<()> {
    let caps = sample.caps().context("a frame without caps")?;
    let vinfo = gst_video::VideoInfo::from_caps(caps).context("video caps")?;
    let format = gst_to_format(vinfo.format()).context("a format the engine does not take")?;
    let info = VideoInfo::new(format, vinfo.width() as usize, vinfo.height() as usize)?;
    let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
    if w.is_none() {
        let tag = Y4mLayout::tag_of(format).context("a format y4m does not carry")?;
        let fps = vinfo.fps();
        let rate = if fps.numer() > 0 && fps.denom() > 0 { (fps.numer() as u64, fps.denom() as u64) } else { (25, 1) };
        let header = Y4mHeader::new(info.width, info.height, tag, rate)?;
        let o = out.lock().unwrap_or_else(|e| e.into_inner()).take().context("the output is closed")?;
        *w = Some(Y4mWriter::new(o, header));
    }
    let buffer = sample.buffer().context("a sample without a buffer")?;
    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &vinfo).map_err(|_| anyhow::anyhow!("mapping a frame"))?;
    let n = frame.n_planes() as usize;
    let planes: Vec<&[u8]> = (0..n).map(|p| frame.plane_data(p as u32)).collect::<std::result::Result<_, _>>().map_err(|_| anyhow::anyhow!("a frame plane"))?;
    let strides: Vec<usize> = (0..n).map(|p| frame.plane_stride()[p] as usize).collect();
    let frame_ref = FrameRef::new(info, &planes, &strides)?;
    w.as_mut().expect("made above").write_frame_ref(&frame_ref, "")?;
    Ok(())
}
