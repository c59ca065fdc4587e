//! BM3D on a CUDA device (kernels/bm3d/): not written yet.

use crate::device::cuda::{CudaAlgorithm, DeviceInfo, FrameLayout, Launch};
use crate::device::cuda::raw::Stream;
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::planar::Geometry;
use crate::window::Job;

pub struct CudaBm3d;

impl CudaBm3d {
    pub fn new(_device: &DeviceInfo) -> Result<Self> {
        Err(Error::Unsupported("BM3D on CUDA is not available yet".into()))
    }
}

impl CudaAlgorithm for CudaBm3d {
    fn describe(&self) -> String {
        "BM3D".into()
    }
    fn configure(&mut self, _device: &DeviceInfo, _geometry: &Geometry, _layout: &FrameLayout, _plan: &Plan) -> Result<()> {
        Ok(())
    }
    fn enqueue<'a>(&'a mut self, launch: &Launch<'a>, _jobs: &[Job], _plan: &Plan) -> Result<&'a Stream> {
        Ok(launch.compute)
    }
}
