//! Planar images: the engine's internal representation. Every component of a frame (Y, U, V, R, G,
//! B, alpha) becomes one tightly packed plane of 8-bit or 16-bit samples, so backends never see
//! strides, interleaving or padding.

use crate::format::{ComponentKind, FormatInfo};
use crate::frame::VideoInfo;

/// Sample storage of one plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Samples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl Samples {
    pub fn len(&self) -> usize {
        match self {
            Samples::U8(v) => v.len(),
            Samples::U16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        match self {
            Samples::U8(v) => v[i] as u32,
            Samples::U16(v) => v[i] as u32,
        }
    }

    #[inline]
    pub fn set(&mut self, i: usize, value: u32) {
        match self {
            Samples::U8(v) => v[i] = value as u8,
            Samples::U16(v) => v[i] = value as u16,
        }
    }

    /// The samples as raw bytes (little-endian words for 16-bit planes), e.g. for a GPU upload.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Samples::U8(v) => v,
            Samples::U16(v) => bytemuck::cast_slice(v),
        }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Samples::U8(v) => v,
            Samples::U16(v) => bytemuck::cast_slice_mut(v),
        }
    }
}

/// Size and role of one plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlaneGeometry {
    pub width: usize,
    pub height: usize,
    pub kind: ComponentKind,
    pub sub_x: usize,
    pub sub_y: usize,
}

/// The planes of every frame of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Geometry {
    pub planes: Vec<PlaneGeometry>,
    pub bytes_per_sample: usize,
    /// Significant bits (see [`FormatInfo::bits`]).
    pub bits: u32,
}

impl Geometry {
    pub fn from_video_info(info: &VideoInfo) -> Self {
        let fi: &FormatInfo = info.format.info();
        let planes = fi.components.iter().map(|c| PlaneGeometry { width: info.width.div_ceil(c.sub_x), height: info.height.div_ceil(c.sub_y), kind: c.kind, sub_x: c.sub_x, sub_y: c.sub_y }).collect();
        Geometry { planes, bytes_per_sample: fi.bytes_per_sample, bits: fi.bits }
    }

    /// The geometry of frames `scale` times as wide and as high (super-resolution output): the
    /// full-resolution size times `scale`, each plane subsampled from it as in this geometry.
    pub fn scaled(&self, scale: usize) -> Geometry {
        // Every format has a full-resolution plane (luma, R, G, B or gray).
        let full = self.planes.iter().find(|p| p.sub_x == 1 && p.sub_y == 1).copied().unwrap_or(self.planes[0]);
        let (w, h) = (full.width * scale, full.height * scale);
        let planes = self.planes.iter().map(|p| PlaneGeometry { width: w.div_ceil(p.sub_x), height: h.div_ceil(p.sub_y), ..*p }).collect();
        Geometry { planes, bytes_per_sample: self.bytes_per_sample, bits: self.bits }
    }

    /// The planes of frames kept in the format's own memory layout ("stored frames"): one plane
    /// per memory plane of the format, its rows the memory plane's rows without padding (a row
    /// of `memory_plane_row_bytes` bytes, as samples of the format's size). For NV12 a luma
    /// plane and one plane of interleaved U/V pairs; for RGBA one plane of 4 samples a pixel.
    /// Stored frames cross between callers and the engine without unpacking
    /// ([`exchange_layout`]); a backend that converts on its own takes them as they are.
    pub fn stored(info: &VideoInfo) -> Self {
        let fi: &FormatInfo = info.format.info();
        let planes = (0..fi.memory_planes)
            .map(|p| {
                let first = fi.components.iter().find(|c| c.memory_plane == p).expect("every memory plane holds a component");
                PlaneGeometry {
                    width: fi.memory_plane_row_bytes(p, info.width) / fi.bytes_per_sample,
                    height: fi.memory_plane_rows(p, info.height),
                    kind: first.kind,
                    sub_x: first.sub_x,
                    sub_y: first.sub_y,
                }
            })
            .collect();
        Geometry { planes, bytes_per_sample: fi.bytes_per_sample, bits: fi.bits }
    }

    /// Stored sample value per unit of the 8-bit scale that strengths and distances use.
    pub fn scale_to_8bit(&self) -> f64 {
        (1u64 << (self.bits - 8)) as f64
    }

    pub fn max_value(&self) -> u32 {
        if self.bytes_per_sample == 1 {
            255
        } else {
            65535
        }
    }

    /// Samples in all planes together.
    pub fn total_samples(&self) -> usize {
        self.planes.iter().map(|p| p.width * p.height).sum()
    }
}

/// How frames of `info` cross between a caller and the engine without copies
/// (`Denoiser::push_planar` / `pop_planar`): the frames' planes and, per memory plane of the
/// format, the index of the frame's plane that holds it. Where the format stores one component
/// per memory plane (`FormatInfo::planes_as_stored`: I420, YV12, Y444, ...) these are the engine's
/// own planar frames; elsewhere (NV12, P010, packed RGB) stored frames ([`Geometry::stored`]),
/// one plane per memory plane in order.
pub fn exchange_layout(info: &VideoInfo) -> (Geometry, Vec<usize>) {
    match info.format.info().planes_as_stored() {
        Some(order) => (Geometry::from_video_info(info), order),
        None => {
            let g = Geometry::stored(info);
            let order = (0..g.planes.len()).collect();
            (g, order)
        }
    }
}

/// One plane of samples, rows packed without padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plane {
    pub width: usize,
    pub height: usize,
    pub samples: Samples,
}

impl Plane {
    pub fn samples_are_u16(&self) -> bool {
        matches!(self.samples, Samples::U16(_))
    }

    #[inline]
    pub fn get(&self, x: usize, y: usize) -> u32 {
        self.samples.get(y * self.width + x)
    }
}

/// All planes of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanarFrame {
    pub planes: Vec<Plane>,
}

impl PlanarFrame {
    /// A zeroed frame of the given geometry.
    pub fn zeroed(geometry: &Geometry) -> Self {
        let planes = geometry
            .planes
            .iter()
            .map(|g| {
                let n = g.width * g.height;
                let samples = if geometry.bytes_per_sample == 1 { Samples::U8(vec![0; n]) } else { Samples::U16(vec![0; n]) };
                Plane { width: g.width, height: g.height, samples }
            })
            .collect();
        PlanarFrame { planes }
    }

    /// True when the frame's planes have the sizes and sample type of `geometry`.
    pub fn matches(&self, geometry: &Geometry) -> bool {
        self.planes.len() == geometry.planes.len()
            && self.planes.iter().zip(&geometry.planes).all(|(p, g)| {
                p.width == g.width && p.height == g.height && p.samples.len() == g.width * g.height && matches!((&p.samples, geometry.bytes_per_sample), (Samples::U8(_), 1) | (Samples::U16(_), 2))
            })
    }
}

/// Index of `x` reflected into 0..n with the edge sample repeated (... 1 0 | 0 1 2 ... n-1 | n-1 ...),
/// valid for any `x` and any `n >= 1`. This is the border rule of every algorithm and backend.
#[inline]
pub fn mirror(x: isize, n: usize) -> usize {
    let n = n as isize;
    let period = 2 * n;
    let r = x.rem_euclid(period);
    (if r < n { r } else { period - 1 - r }) as usize
}

#[cfg(test)]
mod mirror_tests {
    use super::mirror;

    #[test]
    fn mirror_reflects_with_edge_repeat() {
        let got: Vec<usize> = (-4..7).map(|x| mirror(x, 3)).collect();
        assert_eq!(got, vec![2, 2, 1, 0, 0, 1, 2, 2, 1, 0, 0]);
        assert!((-20..20).all(|x| mirror(x, 1) == 0));
    }
}
