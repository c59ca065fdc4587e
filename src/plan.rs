//! The plan: a stream's parameters resolved against its planes, for the algorithm the parameters
//! name. Every backend (the *where*, [`crate::device`]) receives it and hands it to the
//! algorithm's implementation for that device (the *what*: [`crate::nlm`], ...); the device layer
//! itself only asks which planes a job writes.

use crate::bm3d::Bm3dPlan;
use crate::error::{Error, Result};
use crate::nlm::NlmPlan;
use crate::params::{Algorithm, Params};
use crate::planar::Geometry;
use crate::sr::SrPlan;

/// The resolved plan of one stream, one variant per algorithm.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Nlm(NlmPlan),
    Bm3d(Bm3dPlan),
    NlmSr(SrPlan),
}

impl Plan {
    /// Resolves `params` for frames of `geometry` (validating both).
    pub fn new(geometry: &Geometry, params: &Params) -> Result<Plan> {
        match params.algorithm {
            Algorithm::Nlm => Ok(Plan::Nlm(NlmPlan::new(geometry, params)?)),
            Algorithm::Bm3d => Ok(Plan::Bm3d(Bm3dPlan::new(geometry, params)?)),
            Algorithm::NlmSr => Ok(Plan::NlmSr(SrPlan::new(geometry, params)?)),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        match self {
            Plan::Nlm(_) => Algorithm::Nlm,
            Plan::Bm3d(_) => Algorithm::Bm3d,
            Plan::NlmSr(_) => Algorithm::NlmSr,
        }
    }

    /// The planes of an output frame for input frames of `input`: the same, or scaled
    /// (super-resolution).
    pub fn output_geometry(&self, input: &Geometry) -> Geometry {
        match self {
            Plan::NlmSr(p) => p.output.clone(),
            _ => input.clone(),
        }
    }

    /// True when output frames have other planes than input frames (super-resolution): nothing
    /// is copied through, and no output goes back into its input frame.
    pub fn resizes(&self) -> bool {
        matches!(self, Plan::NlmSr(_))
    }

    /// Planes a job writes; the others of the output frame are the input's, bit for bit.
    pub fn output_planes(&self) -> Vec<usize> {
        match self {
            Plan::Nlm(p) => p.groups.iter().flat_map(|g| g.outputs.iter().copied()).collect(),
            Plan::Bm3d(p) => p.output_planes(),
            Plan::NlmSr(p) => (0..p.output.planes.len()).collect(),
        }
    }

    /// Planes copied through unchanged (alpha, padding, planes not selected).
    pub fn passthrough(&self) -> &[usize] {
        match self {
            Plan::Nlm(p) => &p.passthrough,
            Plan::Bm3d(p) => &p.passthrough,
            Plan::NlmSr(_) => &[],
        }
    }

    /// A text that differs between two plans exactly when a backend configured for one must be
    /// configured again for the other (per-launch values such as strengths are left out).
    pub fn structure_key(&self) -> String {
        match self {
            Plan::Nlm(p) => {
                let groups: Vec<_> = p.groups.iter().map(|g| (&g.outputs, &g.guides, g.guide_step_x, g.guide_step_y)).collect();
                format!("nlm {} {} {groups:?} {:?}", p.search_radius, p.patch_radius, p.passthrough)
            }
            Plan::Bm3d(p) => p.structure_key(),
            Plan::NlmSr(p) => p.structure_key(),
        }
    }

    /// The NLM plan, or an error naming what `what` cannot compute.
    pub fn nlm(&self, what: &str) -> Result<&NlmPlan> {
        match self {
            Plan::Nlm(p) => Ok(p),
            _ => Err(Error::Unsupported(format!("{what} computes NLM, not {}", self.algorithm()))),
        }
    }

    /// The super-resolution plan, or an error naming what `what` cannot compute.
    pub fn sr(&self, what: &str) -> Result<&SrPlan> {
        match self {
            Plan::NlmSr(p) => Ok(p),
            _ => Err(Error::Unsupported(format!("{what} computes NLM super-resolution, not {}", self.algorithm()))),
        }
    }

    /// The BM3D plan, or an error naming what `what` cannot compute.
    pub fn bm3d(&self, what: &str) -> Result<&Bm3dPlan> {
        match self {
            Plan::Bm3d(p) => Ok(p),
            _ => Err(Error::Unsupported(format!("{what} computes BM3D, not {}", self.algorithm()))),
        }
    }
}

impl From<NlmPlan> for Plan {
    fn from(p: NlmPlan) -> Self {
        Plan::Nlm(p)
    }
}
