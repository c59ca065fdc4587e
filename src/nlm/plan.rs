//! The NLM plan: which planes are averaged with which weights, the parameters resolved against a
//! stream's format. Every NLM implementation (reference, CPU, CUDA fused and multi-pass) follows
//! the same plan, so the rules for chroma modes and plane selection live here once.

use crate::error::{Error, Result};
use crate::format::ComponentKind;
use crate::params::{ChromaMode, Params, PlaneSelection, Weighting};
use crate::planar::Geometry;

/// Planes that share one set of weights.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightGroup {
    /// Planes whose samples are averaged with the group's weights (same size each).
    pub outputs: Vec<usize>,
    /// Planes the patch distance is measured on (same size each).
    pub guides: Vec<usize>,
    /// Position in a guide plane = position in an output plane times this step (2 for chroma
    /// guided by 4:2:0 luma); search offsets scale by it too.
    pub guide_step_x: usize,
    pub guide_step_y: usize,
    /// Filtering strength h, in 8-bit code values.
    pub h: f32,
}

/// The resolved plan for one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct NlmPlan {
    pub groups: Vec<WeightGroup>,
    /// Planes copied through unchanged (alpha, padding, planes not selected).
    pub passthrough: Vec<usize>,
    pub search_radius: u32,
    pub patch_radius: u32,
    /// Patch-wise aggregation radius ([`Params::aggregation_radius`]).
    pub aggregation_radius: u32,
    pub weighting: Weighting,
    pub wref: f32,
    /// Subtracted from every mean squared distance (2 sigma^2), 8-bit units squared.
    pub distance_offset: f32,
    /// Stored sample value per 8-bit code value.
    pub scale_to_8bit: f32,
    pub max_value: u32,
}

impl NlmPlan {
    pub fn new(geometry: &Geometry, params: &Params) -> Result<Self> {
        params.validate()?;
        let planes = &geometry.planes;
        let by_kind = |k: ComponentKind| -> Vec<usize> { (0..planes.len()).filter(|&i| planes[i].kind == k).collect() };
        let luma = by_kind(ComponentKind::Luma);
        let chroma = by_kind(ComponentKind::Chroma);
        let color = by_kind(ComponentKind::Color);
        let mut groups = Vec::new();
        let mut processed = Vec::new();
        let single = |i: usize, h: f32| WeightGroup { outputs: vec![i], guides: vec![i], guide_step_x: 1, guide_step_y: 1, h };

        if !color.is_empty() {
            if params.planes != PlaneSelection::All {
                return Err(Error::InvalidParameter(format!("planes={} needs a YUV format; RGB is denoised as three joint channels", params.planes)));
            }
            groups.push(WeightGroup { outputs: color.clone(), guides: color.clone(), guide_step_x: 1, guide_step_y: 1, h: params.strength });
            processed.extend(&color);
        } else {
            let want_luma = params.planes != PlaneSelection::Chroma;
            let want_chroma = params.planes != PlaneSelection::Luma;
            if want_chroma && !want_luma && chroma.is_empty() {
                return Err(Error::InvalidParameter("planes=chroma on a format without chroma".into()));
            }
            match params.chroma_mode {
                ChromaMode::Joint if !chroma.is_empty() => {
                    if planes.iter().any(|p| p.sub_x != 1 || p.sub_y != 1) {
                        return Err(Error::InvalidParameter("chroma-mode=joint needs a 4:4:4 or RGB format".into()));
                    }
                    if params.planes != PlaneSelection::All {
                        return Err(Error::InvalidParameter("chroma-mode=joint denoises all planes; planes must be 'all'".into()));
                    }
                    let all: Vec<usize> = luma.iter().chain(&chroma).copied().collect();
                    groups.push(WeightGroup { outputs: all.clone(), guides: all.clone(), guide_step_x: 1, guide_step_y: 1, h: params.strength });
                    processed.extend(all);
                }
                ChromaMode::LumaGuided if !chroma.is_empty() => {
                    if want_luma {
                        groups.extend(luma.iter().map(|&i| single(i, params.strength)));
                        processed.extend(&luma);
                    }
                    if want_chroma {
                        let g = planes[chroma[0]];
                        groups.push(WeightGroup { outputs: chroma.clone(), guides: luma.clone(), guide_step_x: g.sub_x, guide_step_y: g.sub_y, h: params.strength });
                        processed.extend(&chroma);
                    }
                }
                _ => {
                    if want_luma {
                        groups.extend(luma.iter().map(|&i| single(i, params.strength)));
                        processed.extend(&luma);
                    }
                    if want_chroma {
                        groups.extend(chroma.iter().map(|&i| single(i, params.chroma_strength)));
                        processed.extend(&chroma);
                    }
                }
            }
        }
        let passthrough = (0..planes.len()).filter(|i| !processed.contains(i)).collect();
        let sigma = params.sigma.unwrap_or(0.0);
        Ok(NlmPlan {
            groups,
            passthrough,
            search_radius: params.search_radius,
            patch_radius: params.patch_radius,
            aggregation_radius: params.aggregation_radius,
            weighting: params.weighting,
            wref: params.wref,
            distance_offset: 2.0 * sigma * sigma,
            scale_to_8bit: geometry.scale_to_8bit() as f32,
            max_value: geometry.max_value(),
        })
    }

    /// Weight of a mean squared patch distance `d2` (8-bit units squared) for strength `h`.
    /// The one definition every backend follows (the GPU kernels spell the same formula).
    #[inline]
    pub fn weight(&self, d2: f64, h: f64) -> f64 {
        let d = (d2 - self.distance_offset as f64).max(0.0);
        match self.weighting {
            Weighting::Welsch => (-d / (h * h)).exp(),
            Weighting::Bisquare => {
                let t = (1.0 - d / (h * h)).max(0.0);
                t * t
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::VideoInfo;

    fn geometry(f: PixelFormat) -> Geometry {
        Geometry::from_video_info(&VideoInfo::new(f, 8, 6).unwrap())
    }

    #[test]
    fn plans_follow_modes() {
        let p = Params::default();
        let i420 = NlmPlan::new(&geometry(PixelFormat::I420), &p).unwrap();
        assert_eq!(i420.groups.len(), 3);
        assert!(i420.passthrough.is_empty());
        let guided = NlmPlan::new(&geometry(PixelFormat::I420), &Params { chroma_mode: ChromaMode::LumaGuided, ..p }).unwrap();
        assert_eq!(guided.groups[1].guides, vec![0]);
        assert_eq!(guided.groups[1].outputs, vec![1, 2]);
        assert_eq!((guided.groups[1].guide_step_x, guided.groups[1].guide_step_y), (2, 2));
        assert!(NlmPlan::new(&geometry(PixelFormat::I420), &Params { chroma_mode: ChromaMode::Joint, ..p }).is_err());
        let joint = NlmPlan::new(&geometry(PixelFormat::Y444), &Params { chroma_mode: ChromaMode::Joint, ..p }).unwrap();
        assert_eq!(joint.groups.len(), 1);
        let rgba = NlmPlan::new(&geometry(PixelFormat::RGBA), &p).unwrap();
        assert_eq!(rgba.groups[0].outputs, vec![0, 1, 2]);
        assert_eq!(rgba.passthrough, vec![3]);
        let luma_only = NlmPlan::new(&geometry(PixelFormat::NV12), &Params { planes: PlaneSelection::Luma, ..p }).unwrap();
        assert_eq!(luma_only.passthrough, vec![1, 2]);
        assert!(NlmPlan::new(&geometry(PixelFormat::GRAY8), &Params { planes: PlaneSelection::Chroma, ..p }).is_err());
        assert!(NlmPlan::new(&geometry(PixelFormat::RGB), &Params { planes: PlaneSelection::Luma, ..p }).is_err());
    }
}
