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
    let fps = push_pop_fps(&mut d, frames, || {})?;
    Ok((fps, d.backend_description()))
}

/// A digest (FNV-1a over every output byte) of the first `frames` outputs of the engine for this
/// pattern, untimed: two builds that should compute the same output can be compared with it.
pub fn engine_digest(info: VideoInfo, params: nlmdenoise::Params, options: &nlmdenoise::BackendOptions, frames: usize) -> nlmdenoise::Result<u64> {
    let mut d: nlmdenoise::Denoiser<usize> = nlmdenoise::Denoiser::new(info, params, options)?;
    let mut out = OwnedFrame::new(d.output_info());
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut fold = |f: &OwnedFrame| {
        for b in f.planes.iter().flatten() {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for i in 0..frames {
        d.push(&frame(d.info(), i % 8, 11).as_ref(), i)?;
        while d.pop(&mut out.as_mut())?.is_some() {
            fold(&out);
        }
    }
    d.finish_stream()?;
    while d.pop(&mut out.as_mut())?.is_some() {
        fold(&out);
    }
    Ok(h)
}

/// Frames per second of `d` pushing `frames` frames of this pattern and popping into host frames
/// (8 distinct frames cycled), timed after 8 warm-up frames; `warmed_up` runs between the two
/// (e.g. to reset counters).
pub fn push_pop_fps(d: &mut nlmdenoise::Denoiser<usize>, frames: usize, warmed_up: impl FnOnce()) -> nlmdenoise::Result<f64> {
    let inputs: Vec<OwnedFrame> = (0..8).map(|n| frame(d.info(), n, 11)).collect();
    let mut out = OwnedFrame::new(d.output_info());
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i)?;
        while d.pop(&mut out.as_mut())?.is_some() {}
    }
    warmed_up();
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
    Ok(popped as f64 / t.elapsed().as_secs_f64())
}

/// Configures `b` for frames of `info` with a ring of 8 slots, submits frames of this pattern
/// (the backend keeps them) and returns the plan and up to 8 jobs with a full window (for
/// kernel-only timing).
pub fn uploaded_jobs(b: &mut dyn nlmdenoise::device::Backend, info: VideoInfo, params: &nlmdenoise::Params) -> nlmdenoise::Result<(nlmdenoise::Plan, Vec<nlmdenoise::window::Job>)> {
    use nlmdenoise::planar::Geometry;
    let geometry = Geometry::from_video_info(&info);
    let plan = nlmdenoise::Plan::new(&geometry, params)?;
    let slots = 8;
    b.configure(&nlmdenoise::device::StreamSetup { geometry: &geometry, plan: &plan, past: 0, future: 0, stored: None, ring_slots: Some(slots) })?;
    let mut window = nlmdenoise::window::TemporalWindow::new(params.temporal_past, params.temporal_future, slots - params.window_frames() as usize);
    let mut jobs = Vec::new();
    for n in 0..slots + params.temporal_future as usize + 2 {
        let mut planar = b.pool().take(&geometry);
        nlmdenoise::convert::unpack(&frame(info, n, 7).as_ref(), &mut planar)?;
        let slot = window.push(false);
        b.submit(slot, std::sync::Arc::new(planar))?;
        while let Some(j) = window.next_job() {
            if j.references.len() == (params.window_frames() - 1) as usize {
                jobs.push(j);
            }
        }
    }
    jobs.truncate(slots);
    Ok((plan, jobs))
}
