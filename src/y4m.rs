//! YUV4MPEG2 (`.y4m`) reading and writing for the command-line tools.
//!
//! A stream is one header line (`YUV4MPEG2 W640 H360 F30:1 Ip A1:1 C420jpeg ...`) followed by
//! frames, each a `FRAME[ params]` line and the planes Y, Cb, Cr (or Y alone for `Cmono*`), rows
//! tightly packed, chroma sizes rounded up, samples of more than 8 bits as 16-bit little-endian
//! words.
//!
//! Colour spaces map to engine formats ([`Y4mLayout`]). Where the engine has no format of exactly
//! the stream's bit depth, samples are carried in a wider one and shifted left on reading (e.g.
//! `C444p10` travels as `Y444_16LE` with samples times 64) and shifted back with rounding on
//! writing, so strengths keep their 8-bit meaning.
//!
//! | y4m colour space                              | engine format | carried bits |
//! |-----------------------------------------------|---------------|--------------|
//! | `C420jpeg` `C420mpeg2` `C420paldv` `C420` (or none) | `I420`  | 8            |
//! | `C422`                                        | `Y42B`        | 8            |
//! | `C444`                                        | `Y444`        | 8            |
//! | `Cmono`                                       | `GRAY8`       | 8            |
//! | `C420p9` `C420p10`                            | `I420_10LE`   | 10           |
//! | `C422p9` `C422p10`                            | `I422_10LE`   | 10           |
//! | `C444p9` .. `C444p16`                         | `Y444_16LE`   | 16           |
//! | `Cmono9` .. `Cmono16`                         | `GRAY16_LE`   | 16           |
//!
//! Other colour spaces (`C411`, `C444alpha`, `C420p12`, `C422p12`, ...) are refused with an error
//! naming them.

use std::io::{self, BufRead, Read, Write};

use crate::error::{Error, Result};
use crate::format::PixelFormat;
use crate::frame::{FrameRef, OwnedFrame, VideoInfo};

/// Longest header or frame line accepted.
const MAX_LINE: usize = 4096;

/// Largest frame accepted (a bad header must not make the tools allocate without bound).
const MAX_FRAME_BYTES: usize = 1 << 30;

/// How a y4m colour space is carried by an engine format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Y4mLayout {
    pub format: PixelFormat,
    /// Bits per sample in the file.
    pub bits: u32,
    /// Left shift from file samples to engine samples (0 when the engine format has `bits`).
    pub shift: u32,
}

impl Y4mLayout {
    /// The layout of a colour-space tag as written after `C` (e.g. `420jpeg`, `444p16`, `mono`).
    pub fn from_colorspace(tag: &str) -> Result<Self> {
        let unsupported =
            || Error::Unsupported(format!("y4m colour space C{tag} (supported: 420jpeg, 420mpeg2, 420paldv, 420, 422, 444, mono, 420p9, 420p10, 422p9, 422p10, 444p9..444p16, mono9..mono16)"));
        let (family, bits) = match tag.split_once('p') {
            // "420paldv" also contains a 'p': only digits after it make a bit depth.
            Some((family, digits)) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => (family, digits.parse::<u32>().map_err(|_| unsupported())?),
            _ => match tag {
                "420jpeg" | "420mpeg2" | "420paldv" | "420" => ("420", 8),
                "422" => ("422", 8),
                "444" => ("444", 8),
                _ => match tag.strip_prefix("mono") {
                    Some("") => ("mono", 8),
                    Some(d) if d.bytes().all(|b| b.is_ascii_digit()) => ("mono", d.parse::<u32>().map_err(|_| unsupported())?),
                    _ => return Err(unsupported()),
                },
            },
        };
        let (format, carrier_bits) = match (family, bits) {
            ("420", 8) => (PixelFormat::I420, 8),
            ("422", 8) => (PixelFormat::Y42B, 8),
            ("444", 8) => (PixelFormat::Y444, 8),
            ("mono", 8) => (PixelFormat::GRAY8, 8),
            ("420", 9..=10) => (PixelFormat::I420_10LE, 10),
            ("422", 9..=10) => (PixelFormat::I422_10LE, 10),
            ("444", 9..=16) => (PixelFormat::Y444_16LE, 16),
            ("mono", 9..=16) => (PixelFormat::GRAY16_LE, 16),
            _ => return Err(unsupported()),
        };
        Ok(Y4mLayout { format, bits, shift: carrier_bits - bits })
    }

    /// The y4m colour-space tag that carries frames of engine format `format` as they are
    /// (`None`: no y4m colour space does).
    pub fn tag_of(format: PixelFormat) -> Option<&'static str> {
        Some(match format {
            PixelFormat::I420 => "420jpeg",
            PixelFormat::Y42B => "422",
            PixelFormat::Y444 => "444",
            PixelFormat::GRAY8 => "mono",
            PixelFormat::I420_10LE => "420p10",
            PixelFormat::I422_10LE => "422p10",
            PixelFormat::Y444_16LE => "444p16",
            PixelFormat::GRAY16_LE => "mono16",
            _ => return None,
        })
    }

    /// Largest sample value in the file.
    pub fn max_value(&self) -> u32 {
        (1u32 << self.bits) - 1
    }

    /// A file sample as the engine stores it.
    #[inline]
    pub fn to_engine(&self, v: u32) -> u32 {
        v << self.shift
    }

    /// An engine sample as it is written to the file (rounded, clamped).
    #[inline]
    pub fn to_file(&self, v: u32) -> u32 {
        if self.shift == 0 {
            v
        } else {
            ((v + (1 << (self.shift - 1))) >> self.shift).min(self.max_value())
        }
    }

    /// Samples of memory plane `plane` of `frame` in file units (used for quality measures).
    pub fn file_samples(&self, frame: &OwnedFrame, plane: usize, out: &mut Vec<u32>) {
        out.clear();
        let data = &frame.planes[plane];
        if frame.info.format.info().bytes_per_sample == 1 {
            out.extend(data.iter().map(|&b| b as u32));
        } else {
            out.extend(data.chunks_exact(2).map(|w| self.to_file(u16::from_le_bytes([w[0], w[1]]) as u32)));
        }
    }
}

/// The stream header: size, layout and every token as read, for writing the same header back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Y4mHeader {
    pub width: usize,
    pub height: usize,
    /// Colour-space tag without the leading `C` (`420jpeg` when the header has none).
    pub colorspace: String,
    pub layout: Y4mLayout,
    /// Frame rate as numerator and denominator, when given.
    pub frame_rate: Option<(u64, u64)>,
    /// All header tokens after the magic word, in order.
    pub tokens: Vec<String>,
}

impl Y4mHeader {
    /// Parses a header line (without the trailing newline).
    pub fn parse(line: &str) -> Result<Self> {
        let mut parts = line.split(' ').filter(|t| !t.is_empty());
        if parts.next() != Some("YUV4MPEG2") {
            return Err(Error::InvalidFrame("not a YUV4MPEG2 stream (missing 'YUV4MPEG2' magic)".into()));
        }
        let tokens: Vec<String> = parts.map(str::to_owned).collect();
        let (mut width, mut height, mut colorspace, mut frame_rate) = (None, None, None, None);
        for t in &tokens {
            // Tokens are a one-letter key and a value; the key need not be ASCII in a bad file.
            let key_len = t.chars().next().map_or(0, char::len_utf8);
            let (key, value) = t.split_at(key_len);
            match key {
                "W" => width = Some(value.parse::<usize>().map_err(|_| Error::InvalidFrame(format!("bad y4m width '{value}'")))?),
                "H" => height = Some(value.parse::<usize>().map_err(|_| Error::InvalidFrame(format!("bad y4m height '{value}'")))?),
                "C" => colorspace = Some(value.to_owned()),
                "F" => {
                    let bad = || Error::InvalidFrame(format!("bad y4m frame rate '{value}'"));
                    let (n, d) = value.split_once(':').ok_or_else(bad)?;
                    frame_rate = Some((n.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?));
                }
                _ => {}
            }
        }
        let width = width.ok_or_else(|| Error::InvalidFrame("y4m header has no width (W)".into()))?;
        let height = height.ok_or_else(|| Error::InvalidFrame("y4m header has no height (H)".into()))?;
        let colorspace = colorspace.unwrap_or_else(|| "420jpeg".to_owned());
        let layout = Y4mLayout::from_colorspace(&colorspace)?;
        // Size checks (zero, too large) are the engine's.
        VideoInfo::new(layout.format, width, height)?;
        let header = Y4mHeader { width, height, colorspace, layout, frame_rate, tokens };
        if header.frame_bytes() > MAX_FRAME_BYTES {
            return Err(Error::InvalidFrame(format!("y4m frames of {width}x{height} C{} exceed {} MiB", header.colorspace, MAX_FRAME_BYTES >> 20)));
        }
        Ok(header)
    }

    /// A header for a new stream.
    pub fn new(width: usize, height: usize, colorspace: &str, frame_rate: (u64, u64)) -> Result<Self> {
        let line = format!("YUV4MPEG2 W{width} H{height} F{}:{} Ip A1:1 C{colorspace}", frame_rate.0, frame_rate.1);
        Self::parse(&line)
    }

    /// The same stream at `width x height` (an upscaled output): the W and H tokens replaced,
    /// every other token kept.
    pub fn resized(&self, width: usize, height: usize) -> Result<Self> {
        let tokens: Vec<String> = self
            .tokens
            .iter()
            .map(|t| match t.as_bytes().first() {
                Some(b'W') => format!("W{width}"),
                Some(b'H') => format!("H{height}"),
                _ => t.clone(),
            })
            .collect();
        Self::parse(&format!("YUV4MPEG2 {}", tokens.join(" ")))
    }

    pub fn video_info(&self) -> VideoInfo {
        VideoInfo { format: self.layout.format, width: self.width, height: self.height }
    }

    /// Bytes of one frame's samples in the file.
    pub fn frame_bytes(&self) -> usize {
        let info = self.video_info();
        let fi = self.layout.format.info();
        (0..fi.memory_planes).map(|p| info.plane_len(fi, p, fi.memory_plane_row_bytes(p, self.width))).sum()
    }

    /// The header line, with newline.
    pub fn line(&self) -> String {
        let mut s = String::from("YUV4MPEG2");
        for t in &self.tokens {
            s.push(' ');
            s.push_str(t);
        }
        s.push('\n');
        s
    }
}

/// Reads one line ending in `\n` (not included). `Ok(None)` at end of input before any byte.
fn read_line<R: BufRead>(r: &mut R, what: &str) -> Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf).map_err(|e| io_error(e, what))?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if n > MAX_LINE { Error::InvalidFrame(format!("y4m {what} line longer than {MAX_LINE} bytes")) } else { Error::InvalidFrame(format!("y4m stream ends inside a {what} line")) });
    }
    buf.pop();
    String::from_utf8(buf).map(Some).map_err(|_| Error::InvalidFrame(format!("y4m {what} line is not text")))
}

fn io_error(e: io::Error, what: &str) -> Error {
    Error::InvalidFrame(format!("reading y4m {what}: {e}"))
}

/// Reads frames of a y4m stream into engine frames.
pub struct Y4mReader<R> {
    inner: R,
    header: Y4mHeader,
    /// Bytes of the header line, newline included.
    header_len: usize,
    frames_read: u64,
    /// Bytes consumed by the header and every complete frame: where the next frame starts.
    offset: u64,
}

impl<R: BufRead> Y4mReader<R> {
    /// Reads and checks the stream header.
    pub fn new(mut inner: R) -> Result<Self> {
        let line = read_line(&mut inner, "header")?.ok_or_else(|| Error::InvalidFrame("empty input: no y4m header".into()))?;
        let header = Y4mHeader::parse(&line)?;
        Ok(Y4mReader { inner, header, header_len: line.len() + 1, frames_read: 0, offset: line.len() as u64 + 1 })
    }

    pub fn header(&self) -> &Y4mHeader {
        &self.header
    }

    /// The same reader, counting from frame `frames_read` at byte `offset` of the file: for a
    /// stream that was positioned there (the frames before it skipped by seeking), so that
    /// positions and messages name the file's frames.
    pub fn starting_at(self, frames_read: u64, offset: u64) -> Self {
        Y4mReader { frames_read, offset, ..self }
    }

    /// Byte offset of the next frame in the stream (after the last complete one).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Complete frames read so far.
    pub fn frames_read(&self) -> u64 {
        self.frames_read
    }

    /// Frames in a file of `file_len` bytes, assuming plain `FRAME` lines (for progress bars).
    pub fn estimate_frames(&self, file_len: u64) -> u64 {
        let per = (self.header.frame_bytes() + 6) as u64;
        file_len.saturating_sub(self.header_len as u64) / per
    }

    /// Reads the next frame into `frame` (which must have the stream's [`VideoInfo`] and packed
    /// strides, as [`OwnedFrame::new`] makes). Returns the frame line's parameters (text after
    /// `FRAME`, usually empty), or `None` at the end of the stream.
    pub fn read_frame(&mut self, frame: &mut OwnedFrame) -> Result<Option<String>> {
        let info = self.header.video_info();
        if frame.info != info || frame.strides != info.packed_strides() {
            return Err(Error::InvalidFrame("y4m frame buffer does not match the stream".into()));
        }
        let (n, at) = (self.frames_read, self.offset);
        let Some(line) = read_line(&mut self.inner, "frame").map_err(|e| Error::InvalidFrame(format!("{e} (frame {n}, byte {at})")))? else { return Ok(None) };
        let params = line
            .strip_prefix("FRAME")
            .filter(|rest| rest.is_empty() || rest.starts_with(' '))
            .ok_or_else(|| Error::InvalidFrame(format!("y4m frame {n} (byte {at}): expected a FRAME line, found '{}'", line.chars().take(32).collect::<String>())))?;
        let params = params.trim_start().to_owned();
        for plane in &mut frame.planes {
            self.inner.read_exact(plane).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    Error::InvalidFrame(format!("y4m stream ends inside frame {n}, which starts at byte {at} (truncated file?)"))
                } else {
                    io_error(e, "frame data")
                }
            })?;
            if self.header.layout.shift > 0 {
                let layout = self.header.layout;
                for w in plane.chunks_exact_mut(2) {
                    let v = u16::from_le_bytes([w[0], w[1]]) as u32;
                    if v > layout.max_value() {
                        return Err(Error::InvalidFrame(format!("y4m frame {n} (byte {at}): sample {v} exceeds {} bits", layout.bits)));
                    }
                    w.copy_from_slice(&(layout.to_engine(v) as u16).to_le_bytes());
                }
            }
        }
        self.frames_read += 1;
        self.offset += line.len() as u64 + 1 + frame.planes.iter().map(|p| p.len() as u64).sum::<u64>();
        Ok(Some(params))
    }
}

/// Writes engine frames as a y4m stream.
pub struct Y4mWriter<W> {
    inner: W,
    header: Y4mHeader,
    header_written: bool,
    scratch: Vec<u8>,
}

impl<W: Write> Y4mWriter<W> {
    pub fn new(inner: W, header: Y4mHeader) -> Self {
        Y4mWriter { inner, header, header_written: false, scratch: Vec::new() }
    }

    /// Writes one frame (the stream's [`VideoInfo`]; any strides) with the given frame-line
    /// parameters (usually empty).
    pub fn write_frame(&mut self, frame: &OwnedFrame, params: &str) -> io::Result<()> {
        self.write_frame_ref(&frame.as_ref(), params)
    }

    /// [`Self::write_frame`] of a borrowed frame (e.g. a mapped GStreamer buffer).
    pub fn write_frame_ref(&mut self, frame: &FrameRef<'_>, params: &str) -> io::Result<()> {
        let info = self.header.video_info();
        if frame.info != info {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "frame does not match the y4m stream"));
        }
        if !self.header_written {
            self.inner.write_all(self.header.line().as_bytes())?;
            self.header_written = true;
        }
        if params.is_empty() {
            self.inner.write_all(b"FRAME\n")?;
        } else {
            writeln!(self.inner, "FRAME {params}")?;
        }
        let fi = info.format.info();
        let layout = self.header.layout;
        for p in 0..fi.memory_planes {
            let data = frame.plane(p);
            let row = fi.memory_plane_row_bytes(p, info.width);
            let rows = fi.memory_plane_rows(p, info.height);
            let stride = frame.stride(p);
            for y in 0..rows {
                let src = &data[y * stride..y * stride + row];
                if layout.shift == 0 {
                    self.inner.write_all(src)?;
                } else {
                    self.scratch.clear();
                    for w in src.chunks_exact(2) {
                        let v = layout.to_file(u16::from_le_bytes([w[0], w[1]]) as u32) as u16;
                        self.scratch.extend_from_slice(&v.to_le_bytes());
                    }
                    self.inner.write_all(&self.scratch)?;
                }
            }
        }
        Ok(())
    }

    /// Writes the header if no frame was written (an empty stream is still a valid stream).
    pub fn finish(mut self) -> io::Result<W> {
        if !self.header_written {
            self.inner.write_all(self.header.line().as_bytes())?;
        }
        self.inner.flush()?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_spaces_map_to_formats() {
        let f = |t: &str| Y4mLayout::from_colorspace(t).map(|l| (l.format, l.bits, l.shift));
        assert_eq!(f("420jpeg").unwrap(), (PixelFormat::I420, 8, 0));
        assert_eq!(f("420paldv").unwrap(), (PixelFormat::I420, 8, 0));
        assert_eq!(f("420mpeg2").unwrap(), (PixelFormat::I420, 8, 0));
        assert_eq!(f("422").unwrap(), (PixelFormat::Y42B, 8, 0));
        assert_eq!(f("444").unwrap(), (PixelFormat::Y444, 8, 0));
        assert_eq!(f("mono").unwrap(), (PixelFormat::GRAY8, 8, 0));
        assert_eq!(f("420p10").unwrap(), (PixelFormat::I420_10LE, 10, 0));
        assert_eq!(f("422p10").unwrap(), (PixelFormat::I422_10LE, 10, 0));
        assert_eq!(f("422p9").unwrap(), (PixelFormat::I422_10LE, 9, 1));
        assert_eq!(f("420p9").unwrap(), (PixelFormat::I420_10LE, 9, 1));
        assert_eq!(f("444p10").unwrap(), (PixelFormat::Y444_16LE, 10, 6));
        assert_eq!(f("444p16").unwrap(), (PixelFormat::Y444_16LE, 16, 0));
        assert_eq!(f("mono16").unwrap(), (PixelFormat::GRAY16_LE, 16, 0));
        assert_eq!(f("mono12").unwrap(), (PixelFormat::GRAY16_LE, 12, 4));
        for bad in ["411", "444alpha", "420p12", "422p12", "mono8x", "444p17", "", "p"] {
            assert!(f(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_parses_and_round_trips() {
        let h = Y4mHeader::parse("YUV4MPEG2 W5 H3 F30000:1001 It A1:1 C420mpeg2 XYSCSS=420MPEG2").unwrap();
        assert_eq!((h.width, h.height, h.frame_rate), (5, 3, Some((30000, 1001))));
        assert_eq!(h.layout.format, PixelFormat::I420);
        assert_eq!(h.frame_bytes(), 15 + 2 * 3 * 2);
        assert_eq!(h.line(), "YUV4MPEG2 W5 H3 F30000:1001 It A1:1 C420mpeg2 XYSCSS=420MPEG2\n");
        assert_eq!(Y4mHeader::parse("YUV4MPEG2 W4 H4").unwrap().layout.format, PixelFormat::I420);
        assert!(Y4mHeader::parse("YUV4MPEG W4 H4").is_err());
        assert!(Y4mHeader::parse("YUV4MPEG2 W0 H4").is_err());
        assert!(Y4mHeader::parse("YUV4MPEG2 H4").is_err());
        assert!(Y4mHeader::parse("YUV4MPEG2 Wx H4").is_err());
        assert!(Y4mHeader::parse("YUV4MPEG2 W4 H4 C411").is_err());
        assert!(Y4mHeader::parse("YUV4MPEG2 W4 H4 \u{e9}x").is_ok());
        assert!(Y4mHeader::parse("YUV4MPEG2 W4 H4 F30").is_err());
        assert!(Y4mHeader::parse("YUV4MPEG2 W65536 H65536 C444p16").is_err());
    }

    fn stream(header: &str, frames: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut v = header.as_bytes().to_vec();
        v.push(b'\n');
        for (line, data) in frames {
            v.extend_from_slice(line.as_bytes());
            v.push(b'\n');
            v.extend_from_slice(data);
        }
        v
    }

    #[test]
    fn frames_round_trip_with_shift() {
        // 444p10: two 3x2 frames, values up to 1023.
        let samples: Vec<u16> = (0..18).map(|i| (i * 60) as u16).collect();
        let bytes: Vec<u8> = samples.iter().flat_map(|v| v.to_le_bytes()).collect();
        let input = stream("YUV4MPEG2 W3 H2 F25:1 C444p10", &[("FRAME", bytes.clone()), ("FRAME Ixyz", bytes.clone())]);
        let mut r = Y4mReader::new(&input[..]).unwrap();
        assert_eq!(r.estimate_frames(input.len() as u64), 2);
        let info = r.header().video_info();
        let mut f = OwnedFrame::new(info);
        assert_eq!(r.read_frame(&mut f).unwrap().as_deref(), Some(""));
        assert_eq!(u16::from_le_bytes([f.planes[0][2], f.planes[0][3]]), 60 << 6);
        let mut out = Vec::new();
        let mut w = Y4mWriter::new(&mut out, r.header().clone());
        w.write_frame(&f, "").unwrap();
        assert_eq!(r.read_frame(&mut f).unwrap().as_deref(), Some("Ixyz"));
        w.write_frame(&f, "Ixyz").unwrap();
        assert!(r.read_frame(&mut f).unwrap().is_none());
        w.finish().unwrap();
        assert_eq!(out, input);
    }

    #[test]
    fn bad_streams_are_errors() {
        let h = "YUV4MPEG2 W2 H2 Cmono";
        let mut f = OwnedFrame::new(VideoInfo::new(PixelFormat::GRAY8, 2, 2).unwrap());
        let truncated = stream(h, &[("FRAME", vec![1, 2, 3])]);
        assert!(Y4mReader::new(&truncated[..]).unwrap().read_frame(&mut f).is_err());
        let junk = stream(h, &[("FRAMX", vec![1, 2, 3, 4])]);
        assert!(Y4mReader::new(&junk[..]).unwrap().read_frame(&mut f).is_err());
        assert!(Y4mReader::new(&b""[..]).is_err());
        assert!(Y4mReader::new(&b"YUV4MPEG2 W2 H2"[..]).is_err());
        let too_big = stream("YUV4MPEG2 W1 H1 Cmono10", &[("FRAME", vec![0xff, 0x07])]);
        let mut g = OwnedFrame::new(VideoInfo::new(PixelFormat::GRAY16_LE, 1, 1).unwrap());
        assert!(Y4mReader::new(&too_big[..]).unwrap().read_frame(&mut g).is_err());
        let mut wrong = OwnedFrame::new(VideoInfo::new(PixelFormat::GRAY8, 3, 2).unwrap());
        let ok = stream(h, &[("FRAME", vec![1, 2, 3, 4])]);
        assert!(Y4mReader::new(&ok[..]).unwrap().read_frame(&mut wrong).is_err());
    }

    #[test]
    fn rounding_back_to_file_units() {
        let l = Y4mLayout::from_colorspace("444p10").unwrap();
        assert_eq!(l.to_file(l.to_engine(1023)), 1023);
        assert_eq!(l.to_file(65535), 1023);
        assert_eq!(l.to_file(31), 0);
        assert_eq!(l.to_file(32), 1);
    }
}
