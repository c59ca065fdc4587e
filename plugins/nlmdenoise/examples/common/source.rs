//! What the examples' sources push: noisy test frames, and (`source=pool`) those frames written
//! into the buffer pool the element proposes, as decoders and camera sources do.

use gst::prelude::*;
use gst_video::prelude::*;
use rayon::prelude::*;

/// The buffer pool the element downstream of `src` proposes for `caps`, configured and active;
/// `None` when it proposes none (`zero-copy=false`, or not yet negotiated).
pub fn proposed_pool(src: &gst_app::AppSrc, caps: &gst::Caps) -> Option<gst::BufferPool> {
    let mut query = gst::query::Allocation::new(Some(caps), true);
    if !src.static_pad("src")?.peer_query(&mut query) {
        return None;
    }
    let (pool, size, min, max) = query.allocation_pools().next()?;
    let pool = pool?;
    let mut config = pool.config();
    config.set_params(Some(caps), size, min, max);
    config.add_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META);
    pool.set_config(config).ok()?;
    pool.set_active(true).ok()?;
    Some(pool)
}

/// A buffer of `pool` holding `template`'s picture, written plane by plane as a decoder would.
pub fn fill_from_pool(pool: &gst::BufferPool, template: &gst::Buffer, info: &gst_video::VideoInfo) -> Option<gst::Buffer> {
    let mut buffer = pool.acquire_buffer(None).ok()?;
    {
        let from = gst_video::VideoFrameRef::from_buffer_ref_readable(template.as_ref(), info).ok()?;
        let mut to = gst_video::VideoFrameRef::from_buffer_ref_writable(buffer.get_mut()?, info).ok()?;
        for p in 0..info.n_planes() {
            let (fs, ts) = (from.plane_stride()[p as usize] as usize, to.plane_stride()[p as usize] as usize);
            let row = fs.min(ts);
            let rows = from.comp_height(p) as usize;
            let src = from.plane_data(p).ok()?;
            let dst = to.plane_data_mut(p).ok()?;
            // Rows in parallel on the rayon pool: a source fast enough that the element, not
            // this copy, sets the rate (a decoder writes a frame well within its period).
            dst.par_chunks_mut(ts).take(rows).enumerate().for_each(|(r, out)| out[..row].copy_from_slice(&src[r * fs..r * fs + row]));
        }
    }
    Some(buffer)
}

/// One I420 frame of `size` bytes (GStreamer's layout, row strides rounded up to 4: at 854x480 a
/// frame is larger than width x height x 1.5) with a horizontal ramp plus noise.
pub fn noisy_i420(width: usize, size: usize, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..size)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let base = ((i % width) * 255 / width.max(1)) as i32;
            (base + (state % 41) as i32 - 20).clamp(0, 255) as u8
        })
        .collect()
}
