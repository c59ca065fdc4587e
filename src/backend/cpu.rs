//! Fast multithreaded CPU backend (placeholder: delegates to the reference until implemented).

use crate::backend::reference::ReferenceBackend;
use crate::backend::Backend;
use crate::error::Result;
use crate::plan::DenoisePlan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::Job;

pub struct CpuBackend {
    inner: ReferenceBackend,
}

impl CpuBackend {
    pub fn new(_threads: usize) -> Result<Self> {
        Ok(CpuBackend { inner: ReferenceBackend::new() })
    }
}

impl Backend for CpuBackend {
    fn describe(&self) -> String {
        "cpu".into()
    }
    fn configure(&mut self, geometry: &Geometry, plan: &DenoisePlan, ring_slots: usize) -> Result<()> {
        self.inner.configure(geometry, plan, ring_slots)
    }
    fn upload(&mut self, slot: usize, frame: &PlanarFrame) -> Result<()> {
        self.inner.upload(slot, frame)
    }
    fn launch(&mut self, job: &Job, plan: &DenoisePlan) -> Result<()> {
        self.inner.launch(job, plan)
    }
    fn finish(&mut self, out: &mut PlanarFrame) -> Result<()> {
        self.inner.finish(out)
    }
}
