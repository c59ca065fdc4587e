//! Frames as callers hand them to the engine: a format, a size and up to four memory planes, each
//! with its own stride (row pitch in bytes, may exceed the row width).

use crate::error::{Error, Result};
use crate::format::{FormatInfo, PixelFormat};

pub const MAX_MEMORY_PLANES: usize = 4;

/// Format and size of the frames of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VideoInfo {
    pub format: PixelFormat,
    pub width: usize,
    pub height: usize,
}

impl VideoInfo {
    pub fn new(format: PixelFormat, width: usize, height: usize) -> Result<Self> {
        if width == 0 || height == 0 {
            return Err(Error::InvalidParameter(format!("frame size {width}x{height}: width and height must be at least 1")));
        }
        if width > 1 << 16 || height > 1 << 16 {
            return Err(Error::InvalidParameter(format!("frame size {width}x{height} exceeds 65536")));
        }
        Ok(Self { format, width, height })
    }

    /// Tightly packed strides (no padding) for each memory plane.
    pub fn packed_strides(&self) -> Vec<usize> {
        let info = self.format.info();
        (0..info.memory_planes).map(|p| info.memory_plane_row_bytes(p, self.width)).collect()
    }

    /// Bytes a memory plane needs with the given stride.
    pub fn plane_len(&self, info: &FormatInfo, plane: usize, stride: usize) -> usize {
        let rows = info.memory_plane_rows(plane, self.height);
        stride * (rows - 1) + info.memory_plane_row_bytes(plane, self.width)
    }

    fn check_planes(&self, lens: &[usize], strides: &[usize]) -> Result<()> {
        let info = self.format.info();
        if lens.len() != info.memory_planes || strides.len() != info.memory_planes {
            return Err(Error::InvalidFrame(format!("{} needs {} memory planes, got {} planes and {} strides", self.format, info.memory_planes, lens.len(), strides.len())));
        }
        for p in 0..info.memory_planes {
            let row = info.memory_plane_row_bytes(p, self.width);
            if strides[p] < row {
                return Err(Error::InvalidFrame(format!("plane {p}: stride {} is less than the row's {row} bytes", strides[p])));
            }
            let need = self.plane_len(info, p, strides[p]);
            if lens[p] < need {
                return Err(Error::InvalidFrame(format!("plane {p}: {} bytes given, {need} needed for {}x{} {}", lens[p], self.width, self.height, self.format)));
            }
        }
        Ok(())
    }
}

/// A borrowed input frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameRef<'a> {
    pub info: VideoInfo,
    planes: [&'a [u8]; MAX_MEMORY_PLANES],
    strides: [usize; MAX_MEMORY_PLANES],
}

impl<'a> FrameRef<'a> {
    /// Checks that every plane is large enough for its stride and the frame size.
    pub fn new(info: VideoInfo, planes: &[&'a [u8]], strides: &[usize]) -> Result<Self> {
        let lens: Vec<usize> = planes.iter().map(|p| p.len()).collect();
        info.check_planes(&lens, strides)?;
        let mut frame = FrameRef { info, planes: [&[]; MAX_MEMORY_PLANES], strides: [0; MAX_MEMORY_PLANES] };
        for (i, (p, s)) in planes.iter().zip(strides).enumerate() {
            frame.planes[i] = p;
            frame.strides[i] = *s;
        }
        Ok(frame)
    }

    pub fn plane(&self, i: usize) -> &'a [u8] {
        self.planes[i]
    }

    pub fn stride(&self, i: usize) -> usize {
        self.strides[i]
    }
}

/// A borrowed output frame.
#[derive(Debug)]
pub struct FrameMut<'a> {
    pub info: VideoInfo,
    planes: [&'a mut [u8]; MAX_MEMORY_PLANES],
    strides: [usize; MAX_MEMORY_PLANES],
}

impl<'a> FrameMut<'a> {
    pub fn new(info: VideoInfo, planes: Vec<&'a mut [u8]>, strides: &[usize]) -> Result<Self> {
        let lens: Vec<usize> = planes.iter().map(|p| p.len()).collect();
        info.check_planes(&lens, strides)?;
        let mut out: [&'a mut [u8]; MAX_MEMORY_PLANES] = Default::default();
        let mut st = [0; MAX_MEMORY_PLANES];
        for (i, (p, s)) in planes.into_iter().zip(strides).enumerate() {
            out[i] = p;
            st[i] = *s;
        }
        Ok(FrameMut { info, planes: out, strides: st })
    }

    pub fn plane_mut(&mut self, i: usize) -> &mut [u8] {
        self.planes[i]
    }

    pub fn stride(&self, i: usize) -> usize {
        self.strides[i]
    }
}

/// An owned frame with explicit strides; used by the command-line tool, tests and benchmarks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedFrame {
    pub info: VideoInfo,
    pub planes: Vec<Vec<u8>>,
    pub strides: Vec<usize>,
}

impl OwnedFrame {
    /// A zeroed frame with tightly packed rows.
    pub fn new(info: VideoInfo) -> Self {
        let strides = info.packed_strides();
        Self::with_strides(info, &strides).expect("packed strides are valid")
    }

    /// A zeroed frame whose rows are `stride[p]` bytes apart.
    pub fn with_strides(info: VideoInfo, strides: &[usize]) -> Result<Self> {
        let fi = info.format.info();
        if strides.len() != fi.memory_planes {
            return Err(Error::InvalidFrame(format!("{} needs {} strides", info.format, fi.memory_planes)));
        }
        let planes = (0..fi.memory_planes)
            .map(|p| {
                let rows = fi.memory_plane_rows(p, info.height);
                vec![0u8; strides[p] * rows]
            })
            .collect();
        let frame = OwnedFrame { info, planes, strides: strides.to_vec() };
        let lens: Vec<usize> = frame.planes.iter().map(|p| p.len()).collect();
        info.check_planes(&lens, strides)?;
        Ok(frame)
    }

    pub fn as_ref(&self) -> FrameRef<'_> {
        let planes: Vec<&[u8]> = self.planes.iter().map(|p| p.as_slice()).collect();
        FrameRef::new(self.info, &planes, &self.strides).expect("owned frame is consistent")
    }

    pub fn as_mut(&mut self) -> FrameMut<'_> {
        let planes: Vec<&mut [u8]> = self.planes.iter_mut().map(|p| p.as_mut_slice()).collect();
        FrameMut::new(self.info, planes, &self.strides).expect("owned frame is consistent")
    }
}
