//! Where each plane lies in a device frame: the ring's slots and the output frames share it.

use crate::planar::Geometry;

/// Byte offsets of the planes of a frame in device memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameLayout {
    pub offsets: Vec<usize>,
    pub plane_bytes: Vec<usize>,
    pub frame_bytes: usize,
}

impl FrameLayout {
    /// Planes one after another, each starting on a 256-byte boundary.
    pub fn new(geometry: &Geometry) -> Self {
        let mut offsets = Vec::new();
        let mut plane_bytes = Vec::new();
        let mut at = 0;
        for p in &geometry.planes {
            offsets.push(at);
            let n = p.width * p.height * geometry.bytes_per_sample;
            plane_bytes.push(n);
            at += n.div_ceil(256) * 256;
        }
        FrameLayout { offsets, plane_bytes, frame_bytes: at.max(256) }
    }

    /// Byte offsets of `planes` inside a frame, as kernels' argument blocks hold them (unused
    /// entries 0).
    pub fn plane_offsets<const N: usize>(&self, planes: &[usize]) -> [u64; N] {
        assert!(planes.len() <= N, "{} planes in one argument block; at most {N}", planes.len());
        let mut out = [0u64; N];
        for (o, &p) in out.iter_mut().zip(planes) {
            *o = self.offsets[p] as u64;
        }
        out
    }
}
