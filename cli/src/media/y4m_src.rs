//! The y4m source: `appsrc` with the file's caps, fed from a thread that reads the frames and
//! stamps them from the header's frame rate. Feeding through the element (rather than the y4m
//! path's direct engine calls) keeps one pipeline for every input.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, bail, Context, Result};
use gst::prelude::*;
use gst_video::prelude::*;

use nlmdenoise::y4m::Y4mReader;
use nlmdenoise::OwnedFrame;

use super::pipeline::{encoder_format, encoder_size_problem, output_scale, VideoBranch};
use super::{lock, post_error, Shared};
use crate::Cli;

/// What the y4m source tells the run: the frames the file holds (from its size), how the summary
/// names it, and the feeder to start once the pipeline plays.
pub struct Y4mSource {
    pub total: Option<u64>,
    pub desc: String,
    pub feeder: Feeder,
}

/// The `appsrc` and the reader that feeds it.
pub struct Feeder {
    appsrc: gst_app::AppSrc,
    reader: Y4mReader<Box<dyn BufRead + Send>>,
    vinfo: gst_video::VideoInfo,
}

impl Feeder {
    /// Starts feeding (at most `limit` frames).
    pub fn start(self, limit: Option<u64>, shared: Arc<Shared>) -> JoinHandle<()> {
        feed_y4m(self.appsrc, self.reader, self.vinfo, limit, shared)
    }
}

/// Adds an `appsrc` for the y4m file `input` (- for standard input), linked to the video branch, whose format (and the
/// encoder's) it fixes from the header.
pub fn add_source(pipeline: &gst::Pipeline, video: &VideoBranch, cli: &Cli, input: &str, shared: &Shared) -> Result<Y4mSource> {
    let (source, len): (Box<dyn BufRead + Send>, _) = if input == "-" {
        (Box::new(BufReader::with_capacity(1 << 20, std::io::stdin())), None)
    } else {
        let file = File::open(input).with_context(|| format!("cannot open input '{input}'"))?;
        let len = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        (Box::new(BufReader::with_capacity(1 << 20, file)), len)
    };
    let reader = Y4mReader::new(source).with_context(|| format!("reading the y4m header of '{input}'"))?;
    // A segment starts where its context does, by seeking where the file allows (the branch's
    // entry then counts from there).
    let first = cli.segment.map_or(0, |s| s.input_frames(cli.params().frames_needed()).0);
    let reader = match crate::y4m::open_at_frame(input, first)? {
        Some(at) => {
            shared.frames_in.store(first, Ordering::Relaxed);
            at
        }
        None => reader,
    };
    let header = reader.header().clone();
    let (num, den_) = header.frame_rate.unwrap_or((25, 1));
    let format = gstnlmdenoise::format_to_gst(header.layout.format);
    let vinfo = gst_video::VideoInfo::builder(format, header.width as u32, header.height as u32)
        .fps(gst::Fraction::new(num.min(i32::MAX as u64) as i32, den_.clamp(1, i32::MAX as u64) as i32))
        .build()
        .context("y4m header")?;
    let appsrc = gst_app::AppSrc::builder().caps(&vinfo.to_caps().context("y4m caps")?).format(gst::Format::Time).block(true).max_bytes((vinfo.size() * 4) as u64).build();
    video.format_filter.set_property("caps", gst::Caps::builder("video/x-raw").field("format", format.to_str()).build());
    if let Some(f) = &video.encoder_filter {
        let (enc_format, note) = encoder_format(&gst_video::VideoFormatInfo::from_format(format), cli.bit_depth);
        let scale = output_scale(cli);
        if let Some(problem) = encoder_size_problem(enc_format, header.width as u32 * scale, header.height as u32 * scale) {
            bail!("{problem}");
        }
        f.set_property("caps", gst::Caps::builder("video/x-raw").field("format", enc_format.to_str()).build());
        *lock(&shared.encoding) = Some((enc_format, note));
    }
    pipeline.add(&appsrc)?;
    appsrc.link(&video.entry).context("linking appsrc")?;
    let total = len.map(|l| reader.estimate_frames(l));
    Ok(Y4mSource { total, desc: format!("y4m C{}", header.colorspace), feeder: Feeder { appsrc, reader, vinfo } })
}

/// Feeds the frames of a y4m file to `appsrc` (timestamps from the header's frame rate).
fn feed_y4m(appsrc: gst_app::AppSrc, mut reader: Y4mReader<Box<dyn BufRead + Send>>, vinfo: gst_video::VideoInfo, limit: Option<u64>, shared: Arc<Shared>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let info = reader.header().video_info();
        let mut frame = OwnedFrame::new(info);
        let fps = vinfo.fps();
        let duration = gst::ClockTime::SECOND.mul_div_floor(fps.denom() as u64, fps.numer().max(1) as u64);
        // Frame numbers of the file (a segment's reader may start past frame 0).
        let mut n = reader.frames_read();
        while limit.is_none_or(|l| n < l) {
            if crate::interrupt::requested() {
                break;
            }
            match reader.read_frame(&mut frame) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    *lock(&shared.damage) = Some(e.to_string());
                    break;
                }
            }
            // Every way out of this loop ends the stream (EOS or an error on the bus): a feeder
            // that just stopped would leave the pipeline waiting forever.
            let buffer = match y4m_buffer(&frame, &vinfo, n, duration) {
                Ok(b) => b,
                Err(e) => {
                    post_error(appsrc.upcast_ref(), &shared, format!("input frame {n}: {e}"));
                    return;
                }
            };
            if appsrc.push_buffer(buffer).is_err() {
                return; // stopped (error or flushing)
            }
            n += 1;
        }
        let _ = appsrc.end_of_stream();
    })
}

/// Copies a y4m frame into a new buffer of `vinfo` (its own strides) stamped as frame `n`.
fn y4m_buffer(frame: &OwnedFrame, vinfo: &gst_video::VideoInfo, n: u64, duration: Option<gst::ClockTime>) -> Result<gst::Buffer> {
    let fps = vinfo.fps();
    let mut buffer = gst::Buffer::with_size(vinfo.size()).map_err(|_| anyhow!("cannot allocate a {} byte buffer", vinfo.size()))?;
    {
        let buf = buffer.get_mut().context("a new buffer is writable")?;
        buf.set_pts(gst::ClockTime::SECOND.mul_div_floor(n * fps.denom() as u64, fps.numer().max(1) as u64));
        buf.set_duration(duration);
        let mut vf = gst_video::VideoFrameRef::from_buffer_ref_writable(buf, vinfo).map_err(|_| anyhow!("cannot map a buffer as {:?}", vinfo.format()))?;
        for p in 0..frame.planes.len() {
            let dst_stride = vf.plane_stride().get(p).copied().unwrap_or(0).max(0) as usize;
            let dst = vf.plane_data_mut(p as u32).map_err(|e| anyhow!("plane {p}: {e}"))?;
            let row = frame.strides[p];
            for (r, src) in frame.planes[p].chunks_exact(row).enumerate() {
                let d = dst.get_mut(r * dst_stride..r * dst_stride + row).ok_or_else(|| anyhow!("plane {p} of the buffer is smaller than the y4m frame"))?;
                d.copy_from_slice(src);
            }
        }
    }
    Ok(buffer)
}
