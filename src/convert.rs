//! Unpacking caller frames into planar images and packing results back: the first and last stage of
//! the engine's data flow on the host.

use crate::error::{Error, Result};
use crate::frame::{FrameMut, FrameRef, VideoInfo};
use rayon::prelude::*;

use crate::planar::{PlanarFrame, Samples};

/// Planes with at least this many samples are converted by several threads, a band of rows each.
const PARALLEL_SAMPLES: usize = 1 << 18;
const ROWS_PER_TASK: usize = 64;

/// Host-side copies of at least this many bytes are split over the thread pool.
const PARALLEL_COPY_BYTES: usize = 1 << 20;
const COPY_CHUNK: usize = 256 << 10;

/// Copies `src` into `dst` (same length), in parallel when it is large.
pub fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    if src.len() >= PARALLEL_COPY_BYTES {
        dst.par_chunks_mut(COPY_CHUNK).zip(src.par_chunks(COPY_CHUNK)).for_each(|(d, s)| d.copy_from_slice(s));
    } else {
        dst.copy_from_slice(src);
    }
}

/// Copies every component of `src` into the planes of `dst` (which must have the frame's geometry).
pub fn unpack(src: &FrameRef<'_>, dst: &mut PlanarFrame) -> Result<()> {
    let info = src.info.format.info();
    if dst.planes.len() != info.components.len() {
        return Err(Error::InvalidFrame("planar frame does not match the input format".into()));
    }
    for (comp, plane) in info.components.iter().zip(dst.planes.iter_mut()) {
        let data = src.plane(comp.memory_plane);
        let stride = src.stride(comp.memory_plane);
        let (w, h) = (plane.width, plane.height);
        let row_in = |y: usize| &data[y * stride + comp.offset..];
        let parallel = w * h >= PARALLEL_SAMPLES;
        match &mut plane.samples {
            Samples::U8(out) => {
                let band = |(i, rows): (usize, &mut [u8])| {
                    for (r, out) in rows.chunks_mut(w).enumerate() {
                        let row = row_in(i * ROWS_PER_TASK + r);
                        if comp.step == 1 {
                            out.copy_from_slice(&row[..w]);
                        } else {
                            for (x, o) in out.iter_mut().enumerate() {
                                *o = row[x * comp.step];
                            }
                        }
                    }
                };
                if parallel {
                    out.par_chunks_mut(w * ROWS_PER_TASK).enumerate().for_each(band);
                } else {
                    out.chunks_mut(w * ROWS_PER_TASK).enumerate().for_each(band);
                }
            }
            Samples::U16(out) => {
                let band = |(i, rows): (usize, &mut [u16])| {
                    for (r, out) in rows.chunks_mut(w).enumerate() {
                        let row = row_in(i * ROWS_PER_TASK + r);
                        for (x, o) in out.iter_mut().enumerate() {
                            let j = x * comp.step;
                            *o = u16::from_le_bytes([row[j], row[j + 1]]);
                        }
                    }
                };
                if parallel {
                    out.par_chunks_mut(w * ROWS_PER_TASK).enumerate().for_each(band);
                } else {
                    out.chunks_mut(w * ROWS_PER_TASK).enumerate().for_each(band);
                }
            }
        }
    }
    Ok(())
}

/// Writes every plane of `src` into the components of `dst`. Bytes of `dst` that belong to no
/// component (row padding) are left as they are.
pub fn pack(src: &PlanarFrame, dst: &mut FrameMut<'_>) -> Result<()> {
    let info = dst.info.format.info();
    if src.planes.len() != info.components.len() {
        return Err(Error::InvalidFrame("planar frame does not match the output format".into()));
    }
    for (comp, plane) in info.components.iter().zip(src.planes.iter()) {
        let stride = dst.stride(comp.memory_plane);
        let (w, h) = (plane.width, plane.height);
        // Rows of the memory plane: the last one may be shorter than the stride.
        let data = &mut dst.plane_mut(comp.memory_plane)[..stride * (h - 1) + comp.offset + w.saturating_sub(1) * comp.step + 1 + usize::from(plane.samples_are_u16())];
        let band = |(i, rows): (usize, &mut [u8])| {
            for (r, row) in rows.chunks_mut(stride).enumerate() {
                let y = i * ROWS_PER_TASK + r;
                let row = &mut row[comp.offset..];
                match &plane.samples {
                    Samples::U8(inp) => {
                        let inp = &inp[y * w..(y + 1) * w];
                        if comp.step == 1 {
                            row[..w].copy_from_slice(inp);
                        } else {
                            for (x, v) in inp.iter().enumerate() {
                                row[x * comp.step] = *v;
                            }
                        }
                    }
                    Samples::U16(inp) => {
                        let inp = &inp[y * w..(y + 1) * w];
                        for (x, v) in inp.iter().enumerate() {
                            let j = x * comp.step;
                            row[j..j + 2].copy_from_slice(&v.to_le_bytes());
                        }
                    }
                }
            }
        };
        if w * h >= PARALLEL_SAMPLES {
            data.par_chunks_mut(stride * ROWS_PER_TASK).enumerate().for_each(band);
        } else {
            data.chunks_mut(stride * ROWS_PER_TASK).enumerate().for_each(band);
        }
    }
    Ok(())
}

/// A stored frame ([`crate::planar::Geometry::stored`]) seen as a caller's frame of `info`:
/// its planes are the memory planes, rows at the stride of their own length.
pub fn stored_ref<'a>(info: VideoInfo, frame: &'a PlanarFrame) -> Result<FrameRef<'a>> {
    let planes: Vec<&[u8]> = frame.planes.iter().map(|p| p.samples.as_bytes()).collect();
    FrameRef::new(info, &planes, &info.packed_strides())
}

/// [`stored_ref`], writable.
pub fn stored_mut(info: VideoInfo, frame: &mut PlanarFrame) -> Result<FrameMut<'_>> {
    let strides = info.packed_strides();
    let planes: Vec<&mut [u8]> = frame.planes.iter_mut().map(|p| p.samples.as_bytes_mut()).collect();
    FrameMut::new(info, planes, &strides)
}

/// Copies the rows of every memory plane of `src` into `dst` (same format and size; strides may
/// differ): a stored frame in or out, without unpacking. Row padding of `dst` is left as it is.
pub fn copy_frame(src: &FrameRef<'_>, dst: &mut FrameMut<'_>) -> Result<()> {
    if src.info != dst.info {
        return Err(Error::InvalidFrame("copying between frames of different formats or sizes".into()));
    }
    let info = src.info.format.info();
    for p in 0..info.memory_planes {
        let row = info.memory_plane_row_bytes(p, src.info.width);
        let rows = info.memory_plane_rows(p, src.info.height);
        let (si, di) = (src.stride(p), dst.stride(p));
        let from = src.plane(p);
        let to = dst.plane_mut(p);
        if si == row && di == row {
            copy_bytes(&mut to[..row * rows], &from[..row * rows]);
            continue;
        }
        for y in 0..rows {
            to[y * di..y * di + row].copy_from_slice(&from[y * si..y * si + row]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::{OwnedFrame, VideoInfo};
    use crate::planar::Geometry;

    #[test]
    fn every_format_round_trips_through_planes_with_padding() {
        for format in PixelFormat::ALL {
            // 701x401 planes are large enough to take the multi-threaded path.
            for (w, h) in [(1, 1), (3, 5), (8, 6), (17, 9), (701, 401)] {
                let info = VideoInfo::new(format, w, h).unwrap();
                let strides: Vec<usize> = info.packed_strides().iter().map(|s| s + 7).collect();
                let mut input = OwnedFrame::with_strides(info, &strides).unwrap();
                let mut seed = 12345u32 ^ (w * 31 + h) as u32;
                for p in &mut input.planes {
                    for b in p.iter_mut() {
                        seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
                        *b = (seed >> 24) as u8;
                    }
                }
                let geometry = Geometry::from_video_info(&info);
                let mut planar = PlanarFrame::zeroed(&geometry);
                unpack(&input.as_ref(), &mut planar).unwrap();
                // Pack into a copy of the input whose component bytes are scrambled: padding must
                // survive, component bytes must be restored.
                let mut out = input.clone();
                pack(&planar, &mut out.as_mut()).unwrap();
                assert_eq!(out, input, "{format} {w}x{h}");
                let mut zero = OwnedFrame::with_strides(info, &strides).unwrap();
                pack(&planar, &mut zero.as_mut()).unwrap();
                let mut again = PlanarFrame::zeroed(&geometry);
                unpack(&zero.as_ref(), &mut again).unwrap();
                assert_eq!(again, planar, "{format} {w}x{h}");
            }
        }
    }
}
