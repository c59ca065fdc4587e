//! The native YUV4MPEG2 path: y4m in (file or standard input), y4m out (file, standard output or
//! nothing), frames through the engine directly; optional PSNR against a clean clip.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use crossbeam_channel::{bounded, Receiver, Sender};
use indicatif::ProgressBar;

use nlmdenoise::y4m::{Y4mHeader, Y4mLayout, Y4mReader, Y4mWriter};
use nlmdenoise::{Denoiser, OwnedFrame};

use crate::{Cli, Segment};

/// Squared-error sums against a clean clip, in file units.
#[derive(Default, Clone, Copy)]
struct ErrorSums {
    luma_sse: f64,
    luma_n: u64,
    all_sse: f64,
    all_n: u64,
}

impl ErrorSums {
    fn add(&mut self, layout: &Y4mLayout, frame: &OwnedFrame, clean: &OwnedFrame, a: &mut Vec<u32>, b: &mut Vec<u32>) {
        for p in 0..frame.planes.len() {
            layout.file_samples(frame, p, a);
            layout.file_samples(clean, p, b);
            let sse: f64 = a.iter().zip(b.iter()).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
            if p == 0 {
                self.luma_sse += sse;
                self.luma_n += a.len() as u64;
            }
            self.all_sse += sse;
            self.all_n += a.len() as u64;
        }
    }

    fn psnr(sse: f64, n: u64, peak: f64) -> f64 {
        if n == 0 {
            return f64::NAN;
        }
        let mse = sse / n as f64;
        if mse == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (peak * peak / mse).log10()
        }
    }

    fn describe(&self, peak: f64) -> String {
        format!("Y {:.2} dB, all planes {:.2} dB", Self::psnr(self.luma_sse, self.luma_n, peak), Self::psnr(self.all_sse, self.all_n, peak))
    }
}

/// Per-frame data that travels through the denoiser with the frame.
struct Tag {
    index: u64,
    frame_params: String,
}

/// The clean clip and the frames of it still waiting for their denoised counterpart.
struct PsnrState {
    reader: Y4mReader<Box<dyn BufRead + Send>>,
    waiting: VecDeque<OwnedFrame>,
    input: ErrorSums,
    output: ErrorSums,
    a: Vec<u32>,
    b: Vec<u32>,
}

fn open_input(path: &str) -> Result<(Box<dyn BufRead + Send>, Option<u64>)> {
    if path == "-" {
        return Ok((Box::new(BufReader::with_capacity(1 << 20, io::stdin())), None));
    }
    let file = File::open(path).with_context(|| format!("cannot open input '{path}'"))?;
    let len = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    Ok((Box::new(BufReader::with_capacity(1 << 20, file)), len))
}

/// A y4m file opened at frame `first` for a segment run, the frames before it skipped by seeking:
/// only for a regular file whose FRAME lines carry no parameters (checked at the frame before and
/// at `first`, where every frame has the same size). None otherwise: the caller reads through.
pub fn open_at_frame(path: &str, first: u64) -> Result<Option<Y4mReader<Box<dyn BufRead + Send>>>> {
    use std::io::{Read, Seek, SeekFrom};
    if first == 0 || path == "-" {
        return Ok(None);
    }
    let mut file = File::open(path).with_context(|| format!("cannot open input '{path}'"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let reader = Y4mReader::new(BufReader::new(&mut file)).with_context(|| format!("reading the y4m header of '{path}'"))?;
    let (header_len, per) = (reader.offset(), reader.header().frame_bytes() as u64 + 6);
    drop(reader);
    let at = header_len + first * per;
    for pos in [at - per, at] {
        let mut tag = [0u8; 6];
        file.seek(SeekFrom::Start(pos))?;
        if file.read_exact(&mut tag).is_err() || &tag != b"FRAME\n" {
            return Ok(None);
        }
    }
    let mut header = vec![0u8; header_len as usize];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut header)?;
    file.seek(SeekFrom::Start(at))?;
    let stream: Box<dyn BufRead + Send> = Box::new(BufReader::with_capacity(1 << 20, io::Cursor::new(header).chain(file)));
    Ok(Some(Y4mReader::new(stream)?.starting_at(first, at)))
}

/// The frames of the y4m file at `path`, counted from its FRAME lines (each followed by a whole
/// frame; the samples are skipped, not read).
pub fn count_frames(path: &str) -> Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut file = BufReader::new(File::open(path).with_context(|| format!("cannot open '{path}'"))?);
    let reader = Y4mReader::new(&mut file).with_context(|| format!("reading the y4m header of '{path}'"))?;
    let (mut at, frame_bytes) = (reader.offset(), reader.header().frame_bytes() as u64);
    drop(reader);
    let len = file.get_ref().metadata()?.len();
    let mut frames = 0u64;
    let mut line = Vec::new();
    while at < len {
        file.seek(SeekFrom::Start(at))?;
        line.clear();
        let n = file.read_until(b'\n', &mut line)? as u64;
        if !line.starts_with(b"FRAME") || !line.ends_with(b"\n") || at + n + frame_bytes > len {
            bail!("'{path}' is damaged after frame {frames} (byte {at})");
        }
        at += n + frame_bytes;
        frames += 1;
    }
    Ok(frames)
}

/// Reads a finished y4m output back: it must hold the `written` frames.
pub fn check_written(path: &str, written: u64) -> Result<()> {
    let found = count_frames(path).context("reading the output back")?;
    if found != written {
        bail!("the output '{path}' holds {found} frames, {written} were written; it was removed");
    }
    Ok(())
}

/// The writer of a `--segment-in-place` run: the bytes of the stream a whole run writes, less
/// the frames before the segment: the header lands at the file's start, the frames from byte
/// `frames_at` on. Every segment writes the same header, so running them side by side is safe.
struct InPlace {
    file: BufWriter<File>,
    header_left: usize,
    frames_at: u64,
}

impl Write for InPlace {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.header_left == 0 {
            return self.file.write(buf);
        }
        let n = self.file.write(&buf[..buf.len().min(self.header_left)])?;
        self.header_left -= n;
        if self.header_left == 0 {
            self.file.seek(SeekFrom::Start(self.frames_at))?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Bytes of one frame record (`FRAME` line and samples) of a stream whose frames carry no
/// parameters.
fn frame_record_bytes(header: &Y4mHeader) -> u64 {
    (b"FRAME\n".len() + header.frame_bytes()) as u64
}

fn open_in_place(path: &str, header: &Y4mHeader, first_frame: u64) -> Result<Box<dyn Write + Send>> {
    let file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path).with_context(|| format!("cannot open output '{path}' to write a segment in place"))?;
    let header_len = header.line().len();
    let frames_at = header_len as u64 + first_frame * frame_record_bytes(header);
    Ok(Box::new(InPlace { file: BufWriter::with_capacity(1 << 20, file), header_left: header_len, frames_at }))
}

/// Reads back what a `--segment-in-place` run wrote: the header and a FRAME line where each of
/// frames `first..first + count` starts.
fn check_in_place(path: &str, header: &Y4mHeader, first: u64, count: u64) -> Result<()> {
    let mut file = File::open(path).with_context(|| format!("reading the output '{path}' back"))?;
    let line = header.line();
    let mut found = vec![0u8; line.len()];
    file.read_exact(&mut found).with_context(|| format!("reading the header of '{path}' back"))?;
    if found != line.as_bytes() {
        bail!("the output '{path}' starts with another y4m header than this segment's: it holds another run's frames");
    }
    let mut marker = [0u8; 6];
    for i in first..first + count {
        file.seek(SeekFrom::Start(line.len() as u64 + i * frame_record_bytes(header)))?;
        if file.read_exact(&mut marker).is_err() || &marker != b"FRAME\n" {
            bail!("frame {i} of the output '{path}' was not written in place");
        }
    }
    Ok(())
}

fn open_output(path: &str) -> Result<Box<dyn Write + Send>> {
    if path == "-" {
        return Ok(Box::new(BufWriter::with_capacity(1 << 20, io::stdout())));
    }
    let file = File::create(path).with_context(|| format!("cannot create output '{path}'"))?;
    Ok(Box::new(BufWriter::with_capacity(1 << 20, file)))
}

/// Frames in flight between the reading thread, the engine and the writing thread.
const IO_FRAMES: usize = 4;

enum ReadItem {
    Frame(OwnedFrame, String),
    End,
    /// The input ended after this many frames, before the first frame to denoise.
    EndBefore(u64),
    Damaged(nlmdenoise::Error),
}

/// Reads frames on its own thread (the first `skip` read and dropped, then at most `limit`), so
/// that reading overlaps denoising: filled frames arrive on `frames`, and go back through `free`
/// to be filled again.
struct FrameReader {
    frames: Receiver<ReadItem>,
    free: Sender<OwnedFrame>,
}

impl FrameReader {
    fn start(mut reader: Y4mReader<Box<dyn BufRead + Send>>, info: nlmdenoise::VideoInfo, skip: u64, limit: Option<u64>) -> Self {
        let (tx, frames) = bounded(IO_FRAMES);
        let (free, free_rx) = bounded::<OwnedFrame>(IO_FRAMES);
        for _ in 0..IO_FRAMES {
            free.send(OwnedFrame::new(info)).expect("room for every frame");
        }
        std::thread::Builder::new()
            .name("y4m-reader".into())
            .spawn(move || {
                let mut n = 0u64;
                // Frames before a segment's context: read (a pipe cannot seek) and dropped.
                let mut scratch = OwnedFrame::new(info);
                for skipped in 0..skip {
                    let item = match reader.read_frame(&mut scratch) {
                        Ok(Some(_)) => continue,
                        Ok(None) => ReadItem::EndBefore(skipped),
                        Err(e) => ReadItem::Damaged(e),
                    };
                    let _ = tx.send(item);
                    return;
                }
                drop(scratch);
                // Ends when the input ends or is damaged, or when the engine side hangs up.
                while let Ok(mut frame) = free_rx.recv() {
                    if limit.is_some_and(|l| n >= l) {
                        let _ = tx.send(ReadItem::End);
                        return;
                    }
                    let item = match reader.read_frame(&mut frame) {
                        Ok(Some(params)) => ReadItem::Frame(frame, params),
                        Ok(None) => ReadItem::End,
                        Err(e) => ReadItem::Damaged(e),
                    };
                    let last = !matches!(item, ReadItem::Frame(..));
                    if tx.send(item).is_err() || last {
                        return;
                    }
                    n += 1;
                }
            })
            .expect("spawning the reading thread");
        FrameReader { frames, free }
    }
}

/// Writes frames on its own thread: denoised frames arrive on `frames` and go back through
/// `free`; `done` gives the writer's result once `frames` is closed.
struct FrameWriter {
    frames: Option<Sender<(OwnedFrame, String)>>,
    free: Receiver<OwnedFrame>,
    spare: usize,
    done: std::thread::JoinHandle<io::Result<()>>,
}

impl FrameWriter {
    /// `plain_only`: frames with frame-line parameters are an error (an in-place segment's frame
    /// offsets assume plain FRAME lines).
    fn start(mut writer: Y4mWriter<Box<dyn Write + Send>>, plain_only: bool) -> Self {
        let (frames, rx) = bounded::<(OwnedFrame, String)>(IO_FRAMES);
        let (free_tx, free) = bounded(IO_FRAMES);
        let done = std::thread::Builder::new()
            .name("y4m-writer".into())
            .spawn(move || {
                for (frame, params) in rx {
                    if plain_only && !params.is_empty() {
                        return Err(io::Error::other(format!("a frame line of the input carries parameters ('FRAME {params}'); --segment-in-place needs plain FRAME lines")));
                    }
                    writer.write_frame(&frame, &params)?;
                    let _ = free_tx.send(frame);
                }
                writer.finish().map(|_| ())
            })
            .expect("spawning the writing thread");
        FrameWriter { frames: Some(frames), free, spare: IO_FRAMES, done }
    }

    /// A frame to pop an output into: a new one while fewer than IO_FRAMES exist, else one the
    /// writer is done with. None when the writer stopped (its error comes from `finish`).
    fn frame(&mut self, info: nlmdenoise::VideoInfo) -> Option<OwnedFrame> {
        if self.spare > 0 {
            self.spare -= 1;
            return Some(OwnedFrame::new(info));
        }
        self.free.recv().ok()
    }

    /// Waits for the writer to write everything it was given and to flush.
    fn finish(mut self) -> io::Result<()> {
        self.frames = None;
        self.done.join().unwrap_or_else(|_| Err(io::Error::other("the writing thread panicked")))
    }
}

/// The error of a writer that stopped taking frames (its thread's I/O error).
fn writer_failed(writer: &mut Option<FrameWriter>, frame: u64) -> anyhow::Error {
    match writer.take().map(FrameWriter::finish) {
        Some(Err(e)) => anyhow::Error::new(e).context(format!("writing the output (frame {frame} or before)")),
        _ => anyhow::anyhow!("writing output frame {frame}: the writer stopped"),
    }
}

/// Frames out of the denoiser so far: `popped` numbers them as input frames, `written` counts
/// those written (a segment's own; all of them otherwise).
struct OutputCount {
    popped: u64,
    written: u64,
    segment: Option<Segment>,
}

/// Moves every ready output to the writer (and the PSNR sums).
fn drain(
    denoiser: &mut Denoiser<Tag>,
    discard: &mut OwnedFrame,
    writer: &mut Option<FrameWriter>,
    psnr: &mut Option<PsnrState>,
    layout: &Y4mLayout,
    bar: &ProgressBar,
    count: &mut OutputCount,
) -> Result<()> {
    let OutputCount { popped, written, segment } = count;
    let segment = *segment;
    while denoiser.ready() > 0 {
        let mut out = match writer.as_mut() {
            Some(w) => match w.frame(discard.info) {
                Some(f) => f,
                None => return Err(writer_failed(writer, *written)),
            },
            None => std::mem::replace(discard, OwnedFrame::new(discard.info)),
        };
        let tag = denoiser.pop(&mut out.as_mut()).context("denoising")?.context("internal error: a ready frame did not pop")?;
        if tag.index != *popped {
            bail!("internal error: output frame {} arrived when {} was expected", tag.index, *popped);
        }
        *popped += 1;
        // A segment's context frames were denoised for their neighbours' sake only.
        if segment.is_some_and(|s| !s.writes(tag.index)) {
            match writer.as_mut() {
                // Its place in the writer's pool is free again (a new frame fills it).
                Some(w) => w.spare += 1,
                None => *discard = out,
            }
            continue;
        }
        if let Some(ps) = psnr.as_mut() {
            let clean = ps.waiting.pop_front().context("internal error: no clean frame for an output")?;
            ps.output.add(layout, &out, &clean, &mut ps.a, &mut ps.b);
        }
        match writer.as_mut() {
            Some(w) => {
                let sent = w.frames.as_ref().map(|tx| tx.send((out, tag.frame_params)).is_ok()).unwrap_or(false);
                if !sent {
                    return Err(writer_failed(writer, tag.index));
                }
            }
            None => *discard = out,
        }
        *written += 1;
        bar.inc(1);
    }
    Ok(())
}

/// "luma 4.20, chroma 3.10" (8-bit units).
pub fn describe_noise(e: nlmdenoise::noise::NoiseEstimate) -> String {
    match e.chroma {
        Some(c) => format!("luma {:.2}, chroma {c:.2}", e.luma),
        None => format!("{:.2}", e.luma),
    }
}

/// The summary's words for the estimates over a run: one value, or the first and the last
/// where they differ ("first luma 4.20, chroma 3.10; last luma 4.35, chroma 3.05").
pub fn describe_noise_span(first: Option<nlmdenoise::noise::NoiseEstimate>, last: nlmdenoise::noise::NoiseEstimate) -> String {
    let last = describe_noise(last);
    match first.map(describe_noise) {
        Some(first) if first != last => format!("first {first}; last {last}"),
        _ => last,
    }
}

/// With -v and sigma auto: the estimate once per second of video, from 0 s, as the element
/// reports it on the GStreamer path (at the frame where a second has passed since the last).
struct NoiseReports {
    /// The header's frame rate (25/1 when it has none).
    rate: (u64, u64),
    /// The first frame due for a report.
    next: u64,
    /// The first estimate of the run, for the summary.
    first: Option<nlmdenoise::noise::NoiseEstimate>,
}

impl NoiseReports {
    fn new(rate: Option<(u64, u64)>) -> Self {
        let rate = rate.filter(|r| r.0 > 0 && r.1 > 0).unwrap_or((25, 1));
        NoiseReports { rate, next: 0, first: None }
    }

    /// After frame `index` went in: the estimate then, printed when `print` and a report is due.
    fn after_push(&mut self, index: u64, estimate: Option<nlmdenoise::noise::NoiseEstimate>, print: bool, bar: &ProgressBar) {
        let Some(e) = estimate else { return };
        self.first.get_or_insert(e);
        if index < self.next {
            return;
        }
        let (n, d) = self.rate;
        // The first frame at least a second (n/d frames) later.
        self.next = index + n.div_ceil(d);
        if print {
            bar.suspend(|| eprintln!("  {:.0} s: noise sigma estimate {}", (index * d) as f64 / n as f64, describe_noise(e)));
        }
    }
}

/// Denoises y4m `input` into y4m `output` (none: discarded). A failed run removes its output
/// file; one that ended early (damaged input, interrupt) keeps it, valid.
pub fn run(cli: &Cli, input_path: &str, output: Option<&str>) -> Result<()> {
    let result = run_inner(cli, input_path, output);
    // In place, the file holds other segments' frames too: it is never removed.
    if let (Err(e), Some(path), false) = (&result, output, cli.segment_in_place) {
        crate::exit_code::remove_failed_output(e, path);
    }
    result
}

fn run_inner(cli: &Cli, input_path: &str, output: Option<&str>) -> Result<()> {
    let params = cli.params();
    params.validate()?;
    let (input, input_len) = open_input(input_path)?;
    let reader = Y4mReader::new(input).with_context(|| format!("reading the y4m header of '{input_path}'"))?;
    let header: Y4mHeader = reader.header().clone();
    let layout = header.layout;
    let info = header.video_info();

    let mut psnr = match &cli.psnr_ref {
        None => None,
        Some(path) => {
            let (r, _) = open_input(path)?;
            let clean = Y4mReader::new(r).with_context(|| format!("reading the y4m header of '{path}'"))?;
            let ch = clean.header();
            if (ch.width, ch.height, ch.layout) != (header.width, header.height, header.layout) {
                bail!("--psnr-ref '{path}' is {}x{} C{}, the input is {}x{} C{}", ch.width, ch.height, ch.colorspace, header.width, header.height, header.colorspace);
            }
            Some(PsnrState { reader: clean, waiting: VecDeque::new(), input: ErrorSums::default(), output: ErrorSums::default(), a: Vec::new(), b: Vec::new() })
        }
    };

    let options = cli.backend_options()?;
    let mut denoiser: Denoiser<Tag> = Denoiser::new(info, params, &options).with_context(|| format!("starting the {} backend for {}x{} {}", options.kind, info.width, info.height, info.format))?;
    let out_info = denoiser.output_info();
    let out_header = if out_info == info { header.clone() } else { header.resized(out_info.width, out_info.height)? };
    let segment = cli.segment;
    let in_place = segment.filter(|_| cli.segment_in_place);
    let mut writer = match (output, in_place) {
        (Some(path), Some(s)) => Some(FrameWriter::start(Y4mWriter::new(open_in_place(path, &out_header, s.start)?, out_header.clone()), true)),
        (Some(path), None) => Some(FrameWriter::start(Y4mWriter::new(open_output(path)?, out_header.clone()), false)),
        (None, _) => None,
    };

    // A segment reads its frames and the window's context around them: [first, end).
    let (first, limit) = match segment {
        Some(s) => {
            let (first, end) = s.input_frames(params.frames_needed());
            (first, Some(end - first))
        }
        None => (0, cli.frames),
    };
    let total = match segment {
        Some(s) => Some(s.end - s.start),
        None => input_len.map(|len| reader.estimate_frames(len)).map(|n| cli.frames.map_or(n, |m| m.min(n))),
    };
    let bar = crate::progress::bar(cli.quiet, total, cli.stats_period);
    // Reading, denoising and writing overlap: the reader and the writer have threads of their own.
    // A segment of a y4m file starts where its context does, by seeking where it can.
    let (reader, skip) = match open_at_frame(input_path, first)? {
        Some(at) => (at, 0),
        None => (reader, first),
    };
    let source = FrameReader::start(reader, info, skip, limit);
    let mut out = OwnedFrame::new(out_info);
    let mut clean = OwnedFrame::new(info);
    // `read` and `count.popped` number input frames (from `first`), `count.written` counts the frames written.
    let mut read = first;
    let mut count = OutputCount { popped: first, written: 0, segment };
    let start = Instant::now();
    let mut reports = NoiseReports::new(header.frame_rate);

    // A damaged or truncated input, or an interrupt, ends the reading; the frames read so far
    // are still denoised (the engine drains the future window) and written.
    let mut damage = None;
    let mut interrupted = false;
    loop {
        if crate::interrupt::requested() {
            interrupted = true;
            break;
        }
        // A reader blocked on a pipe that sends nothing must not hold an interrupt back: the
        // wait is cut into slices that look at it.
        let item = loop {
            match source.frames.recv_timeout(std::time::Duration::from_millis(100)) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) if crate::interrupt::requested() => break None,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break Some(Err(())),
                Ok(item) => break Some(Ok(item)),
            }
        };
        let Some(item) = item else {
            interrupted = true;
            break;
        };
        let (frame, frame_params) = match item {
            Ok(ReadItem::Frame(f, p)) => (f, p),
            Ok(ReadItem::End) => break,
            Ok(ReadItem::EndBefore(n)) => bail!("the input has {}; the segment starts at frame {}", crate::progress::count(n, "frame"), segment.map_or(0, |s| s.start)),
            Ok(ReadItem::Damaged(e)) => {
                damage = Some(e);
                break;
            }
            Err(_) => bail!("internal error: the reading thread stopped"),
        };
        if let Some(ps) = psnr.as_mut() {
            if ps.reader.read_frame(&mut clean).with_context(|| format!("reading reference frame {read}"))?.is_none() {
                bail!("--psnr-ref clip has only {read} frames; the input has more");
            }
            ps.input.add(&layout, &frame, &clean, &mut ps.a, &mut ps.b);
            ps.waiting.push_back(clean.clone());
        }
        denoiser.push(&frame.as_ref(), Tag { index: read, frame_params }).with_context(|| format!("denoising frame {read}"))?;
        let _ = source.free.send(frame);
        if params.sigma_auto {
            reports.after_push(read, denoiser.noise_estimate(), cli.verbose > 0, &bar);
        }
        read += 1;
        drain(&mut denoiser, &mut out, &mut writer, &mut psnr, &layout, &bar, &mut count)?;
    }
    if let (Some(e), 0) = (&damage, read) {
        bail!("no complete frame in '{input_path}': {e}");
    }
    // A segment is all or nothing: the driver joins complete segments only.
    if let Some(s) = segment.filter(|s| !interrupted && read < s.end) {
        match &damage {
            Some(e) => bail!("the segment {}:{} is incomplete: frame {read} of the input is damaged: {e}", s.start, s.end),
            None => bail!("the input has {}; the segment ends at frame {}", crate::progress::count(read, "frame"), s.end),
        }
    }
    denoiser.finish_stream().context("finishing the stream")?;
    drain(&mut denoiser, &mut out, &mut writer, &mut psnr, &layout, &bar, &mut count)?;
    if count.popped != read {
        bail!("internal error: {read} frames read but {} denoised", count.popped);
    }
    let written = count.written;
    drop(source);
    if let Some(w) = writer {
        w.finish().context("writing the output")?;
    }
    // What is kept must play: an output of no frame is none (an interrupt or damage before the
    // first), and a file output is read back.
    if let Some(path) = output.filter(|o| *o != "-") {
        if written == 0 {
            let why = if interrupted { "interrupted before the first frame was written" } else { "no frame could be written" };
            bail!("{why}; nothing usable, the output '{path}' was removed");
        }
        match in_place {
            Some(s) => check_in_place(path, &out_header, s.start, written)?,
            None => check_written(path, written)?,
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    bar.finish_and_clear();

    if !cli.quiet {
        eprintln!(
            "nlmdenoise: {} {}x{}{} {} in {seconds:.2} s ({:.2} fps), backend: {}",
            crate::progress::count(written, "frame"),
            info.width,
            info.height,
            if out_info == info { String::new() } else { format!(" -> {}x{}", out_info.width, out_info.height) },
            info.format,
            written as f64 / seconds.max(1e-9),
            crate::progress::backend_words(&denoiser.backend_description())
        );
        if params.sigma_auto {
            match denoiser.noise_estimate() {
                Some(e) => eprintln!("  noise sigma (estimated, 8-bit units): {}", describe_noise_span(reports.first, e)),
                None => eprintln!("  noise sigma: no estimate (frames too small); sigma {} used", nlmdenoise::noise::FALLBACK_SIGMA),
            }
        }
        crate::progress::report_scene_cuts(denoiser.scene_cuts());
        let show = |p: &str| if p == "-" { "standard stream".to_string() } else { format!("'{p}'") };
        eprintln!("  input:  {} (y4m C{})\n  output: {}", show(input_path), header.colorspace, output.map_or("discarded".to_string(), |o| format!("{} (y4m)", show(o))));
    }
    if let Some(ps) = psnr {
        let peak = layout.max_value() as f64;
        eprintln!("PSNR input  vs reference: {}", ps.input.describe(peak));
        eprintln!("PSNR output vs reference: {}", ps.output.describe(peak));
    }
    if let Some(e) = damage {
        return Err(crate::exit_code::Incomplete(format!(
            "{e}; the {} before it {} denoised and written",
            crate::progress::count(written, "complete frame"),
            if written == 1 { "was" } else { "were" }
        ))
        .into());
    }
    if interrupted {
        return Err(crate::exit_code::Interrupted.into());
    }
    Ok(())
}
