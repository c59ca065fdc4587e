//! Pixel formats the engine accepts and how their samples are laid out in memory.
//!
//! Every format is described as a list of *components* (Y, U, V, R, G, B, A, padding). A component
//! lives in one memory plane, starts at a byte offset inside a pixel group and advances by a fixed
//! byte step per sample. The engine unpacks components into planar images ([`crate::planar`]), runs
//! the backend, and packs them back; see [`crate::convert`].

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Raw video formats, named as in GStreamer.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    I420,
    YV12,
    NV12,
    NV21,
    I420_10LE,
    P010_10LE,
    Y42B,
    I422_10LE,
    Y444,
    Y444_16LE,
    GRAY8,
    GRAY16_LE,
    RGBA,
    BGRA,
    RGBx,
    BGRx,
    RGB,
    BGR,
}

/// What a component carries; decides how it is denoised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComponentKind {
    Luma,
    Chroma,
    /// R, G or B: denoised jointly with the other two colour components.
    Color,
    /// Alpha or padding byte: copied through untouched.
    PassThrough,
}

/// Where one component's samples are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    pub kind: ComponentKind,
    /// Index of the memory plane holding it.
    pub memory_plane: usize,
    /// Byte offset of the first sample inside a row.
    pub offset: usize,
    /// Bytes between consecutive samples of this component in a row.
    pub step: usize,
    /// Horizontal and vertical subsampling factors (1 or 2).
    pub sub_x: usize,
    pub sub_y: usize,
}

/// Static description of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatInfo {
    pub format: PixelFormat,
    pub components: Vec<Component>,
    pub memory_planes: usize,
    /// Bytes per sample: 1 or 2 (little-endian words).
    pub bytes_per_sample: usize,
    /// Significant bits of a sample counted from bit 0 of the word (16 for MSB-aligned P010).
    pub bits: u32,
}

impl FormatInfo {
    /// Factor that maps a stored sample to the 8-bit scale used by strengths and distances.
    pub fn scale_to_8bit(&self) -> f64 {
        (1u64 << (self.bits - 8)) as f64
    }

    /// Largest value a sample may hold.
    pub fn max_value(&self) -> u32 {
        if self.bytes_per_sample == 1 {
            255
        } else {
            u16::MAX as u32
        }
    }

    /// For formats whose memory planes each hold one component, sample after sample, as the
    /// engine's planar frames store them (I420, YV12, Y42B, Y444, GRAY8, the 10/12/16-bit
    /// little-endian planar formats, ...): the component of each memory plane, in memory-plane
    /// order. A planar frame's planes then *are* the frame's planes, with the row stride of the
    /// plane's width, and can be handed out without packing. `None` for packed and semi-planar
    /// layouts.
    pub fn planes_as_stored(&self) -> Option<Vec<usize>> {
        if self.components.len() != self.memory_planes {
            return None;
        }
        let mut order = vec![usize::MAX; self.memory_planes];
        for (i, c) in self.components.iter().enumerate() {
            if c.offset != 0 || c.step != self.bytes_per_sample || order[c.memory_plane] != usize::MAX {
                return None;
            }
            order[c.memory_plane] = i;
        }
        Some(order)
    }

    /// Number of memory-plane rows for a frame of the given height.
    pub fn memory_plane_rows(&self, plane: usize, height: usize) -> usize {
        let sub_y = self.components.iter().filter(|c| c.memory_plane == plane).map(|c| c.sub_y).max().unwrap_or(1);
        height.div_ceil(sub_y)
    }

    /// Bytes one row of a memory plane needs (without padding).
    pub fn memory_plane_row_bytes(&self, plane: usize, width: usize) -> usize {
        self.components
            .iter()
            .filter(|c| c.memory_plane == plane)
            .map(|c| {
                let n = width.div_ceil(c.sub_x);
                // Bytes up to and including the last sample, rounded up to whole pixel groups.
                let used = c.offset + (n - 1) * c.step + self.bytes_per_sample;
                used.div_ceil(c.step) * c.step
            })
            .max()
            .unwrap_or(0)
    }

    pub fn is_rgb(&self) -> bool {
        self.components.iter().any(|c| c.kind == ComponentKind::Color)
    }

    pub fn has_chroma(&self) -> bool {
        self.components.iter().any(|c| c.kind == ComponentKind::Chroma)
    }

    /// True when all colour-carrying components share one sampling grid (4:4:4, RGB, grey).
    pub fn is_full_resolution(&self) -> bool {
        self.components.iter().all(|c| c.sub_x == 1 && c.sub_y == 1)
    }
}

impl PixelFormat {
    pub const ALL: [PixelFormat; 18] = [
        PixelFormat::I420,
        PixelFormat::YV12,
        PixelFormat::NV12,
        PixelFormat::NV21,
        PixelFormat::I420_10LE,
        PixelFormat::P010_10LE,
        PixelFormat::Y42B,
        PixelFormat::I422_10LE,
        PixelFormat::Y444,
        PixelFormat::Y444_16LE,
        PixelFormat::GRAY8,
        PixelFormat::GRAY16_LE,
        PixelFormat::RGBA,
        PixelFormat::BGRA,
        PixelFormat::RGBx,
        PixelFormat::BGRx,
        PixelFormat::RGB,
        PixelFormat::BGR,
    ];

    /// GStreamer's name for the format.
    pub fn name(self) -> &'static str {
        use PixelFormat::*;
        match self {
            I420 => "I420",
            YV12 => "YV12",
            NV12 => "NV12",
            NV21 => "NV21",
            I420_10LE => "I420_10LE",
            P010_10LE => "P010_10LE",
            Y42B => "Y42B",
            I422_10LE => "I422_10LE",
            Y444 => "Y444",
            Y444_16LE => "Y444_16LE",
            GRAY8 => "GRAY8",
            GRAY16_LE => "GRAY16_LE",
            RGBA => "RGBA",
            BGRA => "BGRA",
            RGBx => "RGBx",
            BGRx => "BGRx",
            RGB => "RGB",
            BGR => "BGR",
        }
    }

    /// The format's layout (a table built once; no allocation per call).
    pub fn info(self) -> &'static FormatInfo {
        static TABLE: std::sync::LazyLock<Vec<FormatInfo>> = std::sync::LazyLock::new(|| PixelFormat::ALL.iter().map(|f| f.build_info()).collect());
        let i = PixelFormat::ALL.iter().position(|f| *f == self).expect("every format is in ALL");
        &TABLE[i]
    }

    fn build_info(self) -> FormatInfo {
        use ComponentKind::*;
        use PixelFormat::*;
        let c = |kind, memory_plane, offset, step, sub_x, sub_y| Component { kind, memory_plane, offset, step, sub_x, sub_y };
        let (components, memory_planes, bytes_per_sample, bits) = match self {
            I420 => (vec![c(Luma, 0, 0, 1, 1, 1), c(Chroma, 1, 0, 1, 2, 2), c(Chroma, 2, 0, 1, 2, 2)], 3, 1, 8),
            YV12 => (vec![c(Luma, 0, 0, 1, 1, 1), c(Chroma, 2, 0, 1, 2, 2), c(Chroma, 1, 0, 1, 2, 2)], 3, 1, 8),
            NV12 => (vec![c(Luma, 0, 0, 1, 1, 1), c(Chroma, 1, 0, 2, 2, 2), c(Chroma, 1, 1, 2, 2, 2)], 2, 1, 8),
            NV21 => (vec![c(Luma, 0, 0, 1, 1, 1), c(Chroma, 1, 1, 2, 2, 2), c(Chroma, 1, 0, 2, 2, 2)], 2, 1, 8),
            I420_10LE => (vec![c(Luma, 0, 0, 2, 1, 1), c(Chroma, 1, 0, 2, 2, 2), c(Chroma, 2, 0, 2, 2, 2)], 3, 2, 10),
            P010_10LE => (vec![c(Luma, 0, 0, 2, 1, 1), c(Chroma, 1, 0, 4, 2, 2), c(Chroma, 1, 2, 4, 2, 2)], 2, 2, 16),
            Y42B => (vec![c(Luma, 0, 0, 1, 1, 1), c(Chroma, 1, 0, 1, 2, 1), c(Chroma, 2, 0, 1, 2, 1)], 3, 1, 8),
            I422_10LE => (vec![c(Luma, 0, 0, 2, 1, 1), c(Chroma, 1, 0, 2, 2, 1), c(Chroma, 2, 0, 2, 2, 1)], 3, 2, 10),
            Y444 => (vec![c(Luma, 0, 0, 1, 1, 1), c(Chroma, 1, 0, 1, 1, 1), c(Chroma, 2, 0, 1, 1, 1)], 3, 1, 8),
            Y444_16LE => (vec![c(Luma, 0, 0, 2, 1, 1), c(Chroma, 1, 0, 2, 1, 1), c(Chroma, 2, 0, 2, 1, 1)], 3, 2, 16),
            GRAY8 => (vec![c(Luma, 0, 0, 1, 1, 1)], 1, 1, 8),
            GRAY16_LE => (vec![c(Luma, 0, 0, 2, 1, 1)], 1, 2, 16),
            RGBA => (vec![c(Color, 0, 0, 4, 1, 1), c(Color, 0, 1, 4, 1, 1), c(Color, 0, 2, 4, 1, 1), c(PassThrough, 0, 3, 4, 1, 1)], 1, 1, 8),
            BGRA => (vec![c(Color, 0, 2, 4, 1, 1), c(Color, 0, 1, 4, 1, 1), c(Color, 0, 0, 4, 1, 1), c(PassThrough, 0, 3, 4, 1, 1)], 1, 1, 8),
            RGBx => (vec![c(Color, 0, 0, 4, 1, 1), c(Color, 0, 1, 4, 1, 1), c(Color, 0, 2, 4, 1, 1), c(PassThrough, 0, 3, 4, 1, 1)], 1, 1, 8),
            BGRx => (vec![c(Color, 0, 2, 4, 1, 1), c(Color, 0, 1, 4, 1, 1), c(Color, 0, 0, 4, 1, 1), c(PassThrough, 0, 3, 4, 1, 1)], 1, 1, 8),
            RGB => (vec![c(Color, 0, 0, 3, 1, 1), c(Color, 0, 1, 3, 1, 1), c(Color, 0, 2, 3, 1, 1)], 1, 1, 8),
            BGR => (vec![c(Color, 0, 2, 3, 1, 1), c(Color, 0, 1, 3, 1, 1), c(Color, 0, 0, 3, 1, 1)], 1, 1, 8),
        };
        FormatInfo { format: self, components, memory_planes, bytes_per_sample, bits }
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PixelFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.to_ascii_uppercase();
        PixelFormat::ALL
            .into_iter()
            .find(|f| f.name().to_ascii_uppercase() == wanted || (wanted == "P010" && *f == PixelFormat::P010_10LE))
            .ok_or_else(|| Error::Unsupported(format!("pixel format '{s}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in PixelFormat::ALL {
            assert_eq!(f.name().parse::<PixelFormat>().unwrap(), f);
        }
        assert!("YUY2".parse::<PixelFormat>().is_err());
    }

    #[test]
    fn planes_as_stored_only_for_one_component_per_plane() {
        use PixelFormat::*;
        for f in [I420, I420_10LE, Y42B, Y444, Y444_16LE, GRAY8, GRAY16_LE] {
            let order = f.info().planes_as_stored().unwrap_or_else(|| panic!("{f:?}"));
            assert_eq!(order, (0..order.len()).collect::<Vec<_>>(), "{f:?}");
        }
        // YV12 stores V before U: memory plane 1 holds the third component.
        assert_eq!(YV12.info().planes_as_stored(), Some(vec![0, 2, 1]));
        for f in [NV12, NV21, P010_10LE, RGBA, BGRA, RGBx, BGRx, RGB, BGR] {
            assert_eq!(f.info().planes_as_stored(), None, "{f:?}");
        }
    }

    #[test]
    fn row_bytes_of_odd_widths() {
        let i420 = PixelFormat::I420.info();
        assert_eq!(i420.memory_plane_row_bytes(0, 5), 5);
        assert_eq!(i420.memory_plane_row_bytes(1, 5), 3);
        assert_eq!(i420.memory_plane_rows(1, 5), 3);
        let nv12 = PixelFormat::NV12.info();
        assert_eq!(nv12.memory_plane_row_bytes(1, 5), 6);
        let p010 = PixelFormat::P010_10LE.info();
        assert_eq!(p010.memory_plane_row_bytes(1, 3), 8);
        assert_eq!(PixelFormat::RGB.info().memory_plane_row_bytes(0, 3), 9);
        assert_eq!(PixelFormat::BGRx.info().memory_plane_row_bytes(0, 3), 12);
    }
}
