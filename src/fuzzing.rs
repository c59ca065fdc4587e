//! Entry points of the fuzz targets (`fuzz/`, run with cargo-fuzz; docs/reliability.md) and of
//! the corpus replay that every test run does (tests/fuzz_corpus.rs). Each takes arbitrary bytes
//! and returns normally whatever they hold: bad input is an `Err`, never a panic, a hang or an
//! unbounded allocation; where a step succeeds, its result is checked against a property that must
//! hold (a y4m stream read and written back reads the same).

use std::io::Cursor;

use crate::backends::BackendOptions;
use crate::device::BackendKind;
use crate::format::PixelFormat;
use crate::frame::{OwnedFrame, VideoInfo};
use crate::params::{Algorithm, Bm3dParams, Bm3dProfile, ChromaMode, Params, PlaneSelection, SrParams, Weighting};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::y4m::{Y4mReader, Y4mWriter};
use crate::Denoiser;

/// Largest frame the targets allocate (bytes): a header may announce up to 65536 x 65536, which
/// the tool would allocate too, but a fuzzer's memory limit is a few GB.
pub const MAX_FRAME_BYTES: usize = 1 << 24;
/// Frames read from one input at most.
pub const MAX_FRAMES: usize = 64;

/// The y4m reader on arbitrary bytes: the header, then frames until the end or an error. Every
/// frame read is written back with [`Y4mWriter`], and that stream must read back the same frames.
pub fn y4m(data: &[u8]) {
    let Ok(mut reader) = Y4mReader::new(Cursor::new(data)) else { return };
    let header = reader.header().clone();
    if header.frame_bytes() > MAX_FRAME_BYTES {
        return;
    }
    let info = header.video_info();
    let mut frame = OwnedFrame::new(info);
    let mut frames = Vec::new();
    let mut written = Vec::new();
    {
        let mut writer = Y4mWriter::new(&mut written, header.clone());
        while frames.len() < MAX_FRAMES {
            match reader.read_frame(&mut frame) {
                Ok(Some(params)) => {
                    writer.write_frame(&frame, &params).expect("writing to memory");
                    frames.push(frame.clone());
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
    if frames.is_empty() {
        return;
    }
    let mut again = Y4mReader::new(Cursor::new(&written)).expect("the header we wrote reads back");
    assert_eq!(again.header().video_info(), info);
    let mut back = OwnedFrame::new(info);
    for (i, f) in frames.iter().enumerate() {
        assert!(again.read_frame(&mut back).expect("a frame we wrote reads back").is_some(), "frame {i} missing");
        assert_eq!(back.planes, f.planes, "frame {i} differs after writing it back");
    }
}

/// Bytes taken one value at a time; zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().map(|(f, r)| (*f, r)).unwrap_or((0, &[]));
        self.0 = rest;
        first
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.byte() as usize % from.len()]
    }
    fn small(&mut self, n: u32) -> u32 {
        self.byte() as u32 % n
    }
    /// A float from its bit pattern: NaN, infinities and negative values included.
    fn float(&mut self) -> f32 {
        f32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn maybe<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        if self.byte() & 1 == 1 {
            Some(f(self))
        } else {
            None
        }
    }
}

/// Parameters and a frame format and size from arbitrary bytes (values past every range
/// included).
fn params_and_info(b: &mut Bytes<'_>) -> (Params, Option<VideoInfo>) {
    let format = b.pick(&PixelFormat::ALL);
    let (w, h) = (b.small(80) as usize, b.small(80) as usize);
    let bm3d = Bm3dParams {
        profile: b.pick(&[Bm3dProfile::Fast, Bm3dProfile::Normal, Bm3dProfile::High]),
        steps: b.maybe(|b| b.small(4)),
        patch_size: b.maybe(|b| b.small(10)),
        search_radius: b.maybe(|b| b.small(30)),
        block_step: b.maybe(|b| b.small(10)),
        hard_block_step: b.maybe(|b| b.small(10)),
        group_size: b.maybe(|b| b.small(40)),
        wiener_group_size: b.maybe(|b| b.small(40)),
        threshold: b.maybe(|b| b.float()),
        wiener_threshold: b.maybe(|b| b.float()),
        lambda: b.maybe(|b| b.float()),
        seeds: b.maybe(|b| b.small(10)),
        wiener_seeds: b.maybe(|b| b.small(10)),
        seed_radius: b.maybe(|b| b.small(10)),
        window_references: b.maybe(|b| b.byte() & 1 == 1),
        frame_groups: b.maybe(|b| b.byte() & 1 == 1),
        motion: b.maybe(|b| b.byte() & 1 == 1),
        bayes: b.maybe(|b| b.byte() & 1 == 1),
        chroma_sigma: b.maybe(|b| b.float()),
    };
    let sr = SrParams { scale: b.small(6), iterations: b.small(4), deblur: b.small(6), fusion: b.float(), ..SrParams::default() };
    let params = Params {
        algorithm: b.pick(&[Algorithm::Nlm, Algorithm::Bm3d, Algorithm::NlmSr]),
        search_radius: b.small(16),
        patch_radius: b.small(10),
        temporal_past: b.small(10),
        temporal_future: b.small(10),
        strength: b.float(),
        chroma_strength: b.float(),
        weighting: b.pick(&[Weighting::Welsch, Weighting::Bisquare]),
        wref: b.float(),
        chroma_mode: b.pick(&[ChromaMode::Independent, ChromaMode::LumaGuided, ChromaMode::Joint]),
        planes: b.pick(&[PlaneSelection::All, PlaneSelection::Luma, PlaneSelection::Chroma]),
        sigma: b.maybe(|b| b.float()),
        sigma_auto: b.byte() & 1 == 1,
        bm3d,
        sr,
        // Last: the bytes before it decode as they did before the field existed.
        aggregation_radius: b.small(4),
        ..Params::default()
    };
    (params, VideoInfo::new(format, w, h).ok())
}

/// Parameter checks and plans on arbitrary parameters, formats and sizes: `validate` decides,
/// and parameters it accepts make a plan (or a clear error) for any format and size.
pub fn params(data: &[u8]) {
    let mut b = Bytes(data);
    let (params, info) = params_and_info(&mut b);
    if params.validate().is_err() {
        return;
    }
    let _ = (params.frames_needed(), params.window_frames(), params.latency_frames());
    let Some(info) = info else { return };
    let geometry = Geometry::from_video_info(&info);
    if let Ok(plan) = Plan::new(&geometry, &params) {
        assert_eq!(plan.algorithm(), params.algorithm);
    }
}

/// The engine on the CPU with arbitrary parameters (radii kept small so that a run stays short)
/// on a few tiny frames of arbitrary content: a denoiser that is made takes every frame and gives
/// back as many, of its output size.
pub fn engine(data: &[u8]) {
    let mut b = Bytes(data);
    let (mut params, info) = params_and_info(&mut b);
    let Some(info) = info else { return };
    let info = match VideoInfo::new(info.format, info.width.min(24), info.height.min(24)) {
        Ok(i) => i,
        Err(_) => return,
    };
    params.search_radius = params.search_radius.min(3);
    params.temporal_past = params.temporal_past.min(2);
    params.temporal_future = params.temporal_future.min(2);
    params.bm3d.search_radius = params.bm3d.search_radius.map(|r| r.min(6));
    if params.sigma_auto {
        params.sigma = None;
    }
    let options = BackendOptions { kind: BackendKind::Cpu, threads: 1, ..Default::default() };
    let Ok(mut d) = Denoiser::<usize>::new(info, params, &options) else { return };
    let mut out = OwnedFrame::new(d.output_info());
    let n = 1 + b.small(4) as usize;
    let mut popped = 0;
    for i in 0..n {
        let mut f = OwnedFrame::new(info);
        for p in &mut f.planes {
            for v in p.iter_mut() {
                *v = b.byte();
            }
        }
        if d.push(&f.as_ref(), i).is_err() {
            return;
        }
        while let Ok(Some(_)) = d.pop(&mut out.as_mut()) {
            popped += 1;
        }
    }
    if d.finish_stream().is_err() {
        return;
    }
    while let Ok(Some(_)) = d.pop(&mut out.as_mut()) {
        popped += 1;
    }
    assert_eq!(popped, n, "{n} frames in, {popped} out");
}
