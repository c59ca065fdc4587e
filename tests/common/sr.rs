//! Super-resolution test helpers: running an upscaling `Denoiser` over a clip into poisoned
//! output frames, and low-resolution clips made by area-downscaling moving high-resolution content.

use super::clips::{clean_frame, write};
use super::samples;
use nlmdenoise::params::SrParams;
use nlmdenoise::PixelFormat as Format;
use nlmdenoise::{Algorithm, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};

/// Pushes every input through `d` (tagged with its index), popping into output frames of the
/// denoiser's output size whose every byte is `poison` before the pop; checks that each frame
/// comes out once, in order.
pub fn upscale(mut d: Denoiser<usize>, inputs: &[OwnedFrame], poison: u8) -> Vec<OwnedFrame> {
    let info = d.output_info();
    let mut outs: Vec<OwnedFrame> = Vec::new();
    let pop_all = |d: &mut Denoiser<usize>, outs: &mut Vec<OwnedFrame>| loop {
        let mut o = OwnedFrame::new(info);
        for p in &mut o.planes {
            p.fill(poison);
        }
        match d.pop(&mut o.as_mut()).unwrap() {
            Some(tag) => {
                assert_eq!(tag, outs.len(), "frames out of order");
                outs.push(o);
            }
            None => break,
        }
    };
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
        pop_all(&mut d, &mut outs);
    }
    d.finish_stream().unwrap();
    pop_all(&mut d, &mut outs);
    assert_eq!(outs.len(), inputs.len(), "frames lost");
    outs
}

/// `hr` reduced by `s` with the area filter (the mean of each s x s block of every component).
pub fn downscale(hr: &OwnedFrame, s: usize) -> OwnedFrame {
    let info = VideoInfo::new(hr.info.format, hr.info.width / s, hr.info.height / s).unwrap();
    let fi = info.format.info();
    let shift = if info.format == PixelFormat::P010_10LE { 6 } else { 0 };
    let src = samples(hr);
    let mut f = OwnedFrame::new(info);
    for (ci, c) in fi.components.iter().enumerate() {
        let (hw, hh) = (hr.info.width.div_ceil(c.sub_x), hr.info.height.div_ceil(c.sub_y));
        let (w, h) = (info.width.div_ceil(c.sub_x), info.height.div_ceil(c.sub_y));
        for y in 0..h {
            for x in 0..w {
                let mut sum = 0u64;
                for b in 0..s {
                    for a in 0..s {
                        let (sx, sy) = ((x * s + a).min(hw - 1), (y * s + b).min(hh - 1));
                        sum += (src[ci][sy * hw + sx] >> shift) as u64;
                    }
                }
                let n = (s * s) as u64;
                write(&mut f, c, x, y, (((sum + n / 2) / n) as u32) << shift);
            }
        }
    }
    f
}

/// A clip of `frames` high-resolution frames of `format` (moving one high-resolution sample per
/// frame: a fraction of a low-resolution sample) and its area-downscaled low-resolution frames.
pub fn moving_clip(format: PixelFormat, w: usize, h: usize, s: usize, frames: usize, phase: f64) -> (Vec<OwnedFrame>, Vec<OwnedFrame>) {
    let info = VideoInfo::new(format, w * s, h * s).unwrap();
    let hr: Vec<OwnedFrame> = (0..frames).map(|t| clean_frame(info, t, phase)).collect();
    let lr = hr.iter().map(|f| downscale(f, s)).collect();
    (hr, lr)
}

/// Super-resolution parameters small enough for the reference: search radius 2, patch radius 1,
/// strengths 3 (luma) and 4 (chroma), the given factor, iterations and window.
pub fn sr(scale: u32, iterations: u32, past: u32, future: u32) -> Params {
    Params {
        algorithm: Algorithm::NlmSr,
        search_radius: 2,
        patch_radius: 1,
        temporal_past: past,
        temporal_future: future,
        strength: 3.0,
        chroma_strength: 4.0,
        sr: SrParams { scale, iterations, ..SrParams::default() },
        ..Params::default()
    }
}

/// Samples of `b` beyond one 8-bit code value from `a` (same frames), the count compared and the
/// largest difference in stored units: (total, beyond, max).
pub fn differences(a: &[OwnedFrame], b: &[OwnedFrame]) -> (usize, usize, u32) {
    let tol = {
        let fi = a[0].info.format.info();
        let shift = if a[0].info.format == Format::P010_10LE { 6 } else { 0 };
        ((1u32 << fi.bits) / 256).max(1) << shift
    };
    let (mut total, mut beyond, mut max) = (0, 0, 0);
    for (x, y) in a.iter().zip(b) {
        for (p, q) in samples(x).iter().zip(samples(y)) {
            for (&u, &v) in p.iter().zip(&q) {
                total += 1;
                max = max.max(u.abs_diff(v));
                beyond += (u.abs_diff(v) > tol) as usize;
            }
        }
    }
    (total, beyond, max)
}
