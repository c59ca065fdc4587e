//! NLM on a CUDA device: two implementations of [`crate::device::cuda::CudaAlgorithm`].
//!
//! * [`fused::FusedNlm`] (default): one fused kernel per launch group and the exact f64 pass;
//! * [`multipass::MultipassNlm`] (`gpu-kernel=multipass`): simple passes per pack of search
//!   offsets with intermediates in device memory, and the same exact pass.
//!
//! Both take their launch geometry and argument blocks from [`launch`] and compile through
//! [`variant`] (the fused program) or [`multipass`] (its own program) with the shared NVRTC
//! caches; the device layer does the rest (ring, streams, host I/O).

pub mod fused;
pub mod launch;
pub mod multipass;
pub mod variant;

use launch::MAX_FRAMES;

use crate::device::cuda::{CudaAlgorithm, DeviceInfo};
use crate::error::{Error, Result};
use crate::nlm::{GpuKernel, NlmOptions};
use crate::planar::Geometry;
use crate::window::Job;

/// Launch groups per frame at most (one exact-path list part, with its count word, each).
pub const EXACT_PARTS: usize = 4;

/// Bytes of an output frame's exact-path list: per launch group a u64 count, then u64 entries,
/// room for every output sample.
pub fn output_scratch_bytes(geometry: &Geometry) -> usize {
    8 * (exact_capacity(geometry) + EXACT_PARTS)
}

/// Entries an output frame's exact list holds in all.
pub fn exact_capacity(geometry: &Geometry) -> usize {
    geometry.total_samples()
}

/// What the multi-pass kernels do not compute: patch-wise aggregation (the fused kernel and the
/// CPU backend do).
pub fn check_multipass_supported(plan: &crate::nlm::NlmPlan) -> Result<()> {
    if plan.aggregation_radius > 0 {
        return Err(Error::Unsupported(format!(
            "aggregation radius {} with the multi-pass kernel: not implemented there; use the fused kernel (kernel=fused or auto, --kernel fused or auto) or aggregation radius 0",
            plan.aggregation_radius
        )));
    }
    Ok(())
}

/// The NLM implementation `options.gpu_kernel` selects.
pub fn make(options: &NlmOptions, device: &DeviceInfo) -> Result<Box<dyn CudaAlgorithm>> {
    match options.gpu_kernel {
        GpuKernel::Auto | GpuKernel::Fused => Ok(Box::new(fused::FusedNlm::new(device, &options.tuning)?)),
        GpuKernel::Multipass => Ok(Box::new(multipass::MultipassNlm::new(device, options)?)),
    }
}

/// Slots of the job's frames in time order, the index of the target among them and their count,
/// as the kernels' argument blocks hold them.
pub fn window_slots(job: &Job, ring_slots: usize) -> Result<([i32; MAX_FRAMES], i32, i32)> {
    let window = job.frames_in_time_order();
    if window.len() > MAX_FRAMES {
        return Err(Error::InvalidParameter(format!("{} frames in the temporal window; at most {MAX_FRAMES}", window.len())));
    }
    let mut slot = [0i32; MAX_FRAMES];
    let mut target = 0;
    for (i, &(dt, s)) in window.iter().enumerate() {
        if s >= ring_slots {
            return Err(Error::State(format!("ring slot {s} out of range")));
        }
        slot[i] = s as i32;
        if dt == 0 {
            target = i as i32;
        }
    }
    Ok((slot, target, window.len() as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::VideoInfo;
    use crate::nlm::NlmPlan;
    use crate::params::Params;

    /// The multi-pass kernel refuses patch-wise aggregation with words that say where it runs,
    /// before any launch.
    #[test]
    fn aggregation_is_a_clear_error_in_the_multipass_kernel() {
        let geometry = Geometry::from_video_info(&VideoInfo::new(PixelFormat::I420, 16, 8).unwrap());
        check_multipass_supported(&NlmPlan::new(&geometry, &Params::default()).unwrap()).unwrap();
        let plan = NlmPlan::new(&geometry, &Params { aggregation_radius: 1, ..Params::default() }).unwrap();
        let e = check_multipass_supported(&plan).unwrap_err().to_string();
        assert!(e.contains("aggregation radius 1") && e.contains("fused kernel"), "{e}");
    }
}
