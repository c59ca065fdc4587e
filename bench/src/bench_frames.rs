//! Synthetic frames shared by the GPU benchmark binaries.

use nlmdenoise::{OwnedFrame, VideoInfo};

/// A deterministic noisy moving pattern (xorshift noise; never all zeros, so no data path can
/// take a shortcut): frame `n` of the sequence for `seed`.
pub fn frame(info: VideoInfo, n: usize, seed: u64) -> OwnedFrame {
    let mut f = OwnedFrame::new(info);
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(n as u64 * 1442695040888963407 + 1);
    for (pi, p) in f.planes.iter_mut().enumerate() {
        let stride = f.strides[pi];
        for (i, b) in p.iter_mut().enumerate() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let (x, y) = ((i % stride) as f32, (i / stride) as f32);
            let base = 128.0 + 60.0 * ((x + 2.0 * n as f32) * 0.05).sin() * (y * 0.03).cos();
            *b = (base + ((s >> 40) % 21) as f32 - 10.0).clamp(0.0, 255.0) as u8;
        }
    }
    f
}

/// Frames per second through the engine (`Denoiser` push/pop from host frames: unpack, upload,
/// kernels, download, pack) for `frames` frames of this pattern (8 distinct frames cycled, after 8
/// warm-up frames), and the backend's description.
pub fn engine_fps(info: VideoInfo, params: nlmdenoise::Params, options: &nlmdenoise::BackendOptions, frames: usize) -> nlmdenoise::Result<(f64, String)> {
    let mut d: nlmdenoise::Denoiser<usize> = nlmdenoise::Denoiser::new(info, params, options)?;
    let inputs: Vec<OwnedFrame> = (0..8).map(|n| frame(info, n, 11)).collect();
    let mut out = OwnedFrame::new(d.output_info());
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i)?;
        while d.pop(&mut out.as_mut())?.is_some() {}
    }
    let t = std::time::Instant::now();
    let mut popped = 0;
    for i in 0..frames {
        d.push(&inputs[i % inputs.len()].as_ref(), i)?;
        while d.pop(&mut out.as_mut())?.is_some() {
            popped += 1;
        }
    }
    d.finish_stream()?;
    while d.pop(&mut out.as_mut())?.is_some() {
        popped += 1;
    }
    Ok((popped as f64 / t.elapsed().as_secs_f64(), d.backend_description()))
}
