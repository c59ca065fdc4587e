//! The elements in GPU pipelines: frames in CUDA memory (`memory:CUDAMemory`) in and out, and the
//! pipeline's CUDA context shared the way GStreamer's nvcodec elements share it.
//!
//! Context: the element finds the pipeline's `GstCudaContext` when it goes to READY (before the
//! decoder upstream, as sinks change state first): it asks its neighbours (a context query
//! downstream, then upstream), then the application (a need-context message); where nobody has
//! one, it wraps the GPU's primary context (the one the engine computes in anyway) and offers it
//! to the pipeline (a have-context message), so that a decoder started after it decodes into
//! that context. It answers context queries and takes a context set on it. A buffer whose memory
//! belongs to another context on the same device makes the element adopt that context (as
//! GStreamer's CUDA filters do): the held frames are finished, and the engine and the output pool
//! are made again in the buffer's context.
//!
//! Frames: with CUDA caps on the sink pad and an engine that takes device frames (the CUDA
//! backend on one device), an input buffer is mapped for its device pointers and copied into the
//! engine's ring on the GPU; the buffer goes back to its pool as soon as that copy is done, so a
//! window of frames does not hold the decoder's surfaces. With CUDA caps on the source pad the
//! output is written on the GPU into a buffer of the element's CUDA pool, synchronised before it
//! is pushed. Otherwise (the CPU backend, chunks, several devices) CUDA memory is read and written
//! through its host mapping: GStreamer's CUDA memory downloads and uploads by itself. Where CUDA
//! memory is unavailable (no plugins-bad, no driver, no GPU), the caps queries leave it out, so
//! that negotiation picks system memory or fails with not-negotiated.

use gst::prelude::*;
use gst_base::prelude::*;

use crate::core::Core;
use crate::cudamem::{self, CudaContext};
use crate::lock;

/// Buffers of the element's CUDA output pool kept ready (the pool grows as needed: an output
/// buffer is taken at each input, while the frame is in the engine's window).
const OUTPUT_POOL_MIN_BUFFERS: u32 = 2;

impl Core {
    /// `set_context`: takes a CUDA context set by the application or a neighbour, keeping one it
    /// already has.
    pub fn set_cuda_context(&self, context: &gst::Context) {
        let mut held = lock(&self.cuda);
        if held.is_none() {
            if let Some(ctx) = CudaContext::from_gst_context(context, self.wanted_device()) {
                gst::debug!(self.cat(), obj = &self.element(), "using the CUDA context set on the element (device {})", ctx.device_id());
                *held = Some(ctx);
            }
        }
    }

    /// The CUDA device the settings name (the first of a list), `None` for any.
    fn wanted_device(&self) -> Option<u32> {
        let s = lock(&self.settings);
        match &s.options.devices {
            nlmdenoise::device::Devices::List(v) => v.first().map(|&d| d as u32),
            nlmdenoise::device::Devices::All => None,
            nlmdenoise::device::Devices::Default => Some(s.options.device_id as u32),
        }
    }

    /// NULL -> READY: finds or makes the pipeline's CUDA context (see the module doc). Nothing
    /// where CUDA memory is unavailable; on the host backends (`backend=cpu`) the element does
    /// not make a context of its own (it would start the GPU for nothing): it takes the one its
    /// neighbours, the application or its first CUDA buffer bring (or, at the first allocation
    /// in CUDA memory, makes one after all).
    pub fn ensure_cuda_context(&self) {
        let make_own = !matches!(lock(&self.settings).options.kind, nlmdenoise::BackendKind::Cpu | nlmdenoise::BackendKind::Reference);
        self.find_cuda_context(make_own);
    }

    /// [`Self::ensure_cuda_context`]; `make_own`: where nobody has a context, wrap the GPU's
    /// primary context and offer it.
    fn find_cuda_context(&self, make_own: bool) {
        if !cudamem::available() || lock(&self.cuda).is_some() {
            return;
        }
        let obj = self.element();
        let device = self.wanted_device();
        for pad in [obj.src_pad(), obj.sink_pad()] {
            let mut q = gst::query::Context::new(cudamem::CONTEXT_TYPE);
            if pad.peer_query(&mut q) {
                if let Some(c) = q.context_owned() {
                    self.set_cuda_context(&c);
                }
            }
            if lock(&self.cuda).is_some() {
                gst::debug!(self.cat(), obj = &obj, "found the CUDA context on {}'s peer", pad.name());
                return;
            }
        }
        // The application may answer synchronously by setting a context on the element.
        let _ = obj.post_message(gst::message::NeedContext::builder(cudamem::CONTEXT_TYPE).src(&obj).build());
        if lock(&self.cuda).is_some() || !make_own {
            return;
        }
        match CudaContext::wrap_primary(device.unwrap_or(0)) {
            Ok(ctx) => {
                gst::info!(self.cat(), obj = &obj, "offering the primary CUDA context of device {} to the pipeline", ctx.device_id());
                let context = ctx.to_gst_context();
                *lock(&self.cuda) = Some(ctx);
                obj.set_context(&context);
                let _ = obj.post_message(gst::message::HaveContext::builder(context).src(&obj).build());
            }
            Err(e) => gst::info!(self.cat(), obj = &obj, "no CUDA context for the pipeline: {e}"),
        }
    }

    /// READY -> NULL.
    pub fn release_cuda_context(&self) {
        *lock(&self.cuda) = None;
    }

    /// Answers a context query for the CUDA context; false for other queries or without one.
    pub fn answer_context_query(&self, query: &mut gst::QueryRef) -> bool {
        let gst::QueryViewMut::Context(q) = query.view_mut() else { return false };
        if q.context_type() != cudamem::CONTEXT_TYPE {
            return false;
        }
        let Some(ctx) = lock(&self.cuda).clone() else { return false };
        q.set_context(&ctx.to_gst_context());
        true
    }

    /// The engine's context for caps in CUDA memory: the element's.
    pub(crate) fn engine_cuda_context(&self) -> Option<nlmdenoise::device::cuda::shared::SharedContext> {
        lock(&self.cuda).as_ref().map(|c| c.shared())
    }

    /// Before an input buffer is processed: a buffer of CUDA memory of another context on the
    /// same device makes the element adopt that context (held frames finished first, engine and
    /// output pool made again). Returns an error only where the new engine cannot be made.
    pub(crate) fn adopt_buffer_context(&self, inbuf: &gst::Buffer) -> Result<(), gst::FlowError> {
        if !cudamem::buffer_in_cuda(inbuf) {
            return Ok(());
        }
        let Some(theirs) = CudaContext::of_memory(inbuf.peek_memory(0)) else { return Ok(()) };
        let ours = lock(&self.cuda).clone();
        if ours.as_ref().is_some_and(|o| o.same(&theirs)) || ours.as_ref().is_some_and(|o| o.device_id() != theirs.device_id()) {
            return Ok(());
        }
        let uses_device = lock(&self.state).as_ref().is_some_and(|s| s.cuda_in && s.denoiser.takes_device_frames());
        *lock(&self.cuda) = Some(theirs.clone());
        if !uses_device {
            return Ok(());
        }
        let obj = self.element();
        gst::info!(self.cat(), obj = &obj, "input buffers are in another CUDA context (device {}): adopting it", theirs.device_id());
        let _ = self.drain("CUDA context change");
        let (Some(incaps), Some(outcaps)) = (obj.sink_pad().current_caps(), obj.src_pad().current_caps()) else { return Ok(()) };
        *lock(&self.state) = None;
        self.set_caps(&incaps, &outcaps).map_err(|e| {
            gst::error!(self.cat(), obj = &obj, "a new engine in the adopted CUDA context: {e}");
            gst::FlowError::NotNegotiated
        })?;
        // The output pool is of the previous context: decided again before the next output.
        obj.reconfigure_src();
        Ok(())
    }

    /// A CUDA buffer pool of the element's context for `caps`, configured (min `min`, unbounded).
    pub(crate) fn cuda_pool(&self, caps: &gst::Caps, min: u32) -> Option<gst::BufferPool> {
        if lock(&self.cuda).is_none() {
            // The host backends find the context late: the CUDA neighbours have theirs by now.
            self.find_cuda_context(true);
        }
        let ctx = lock(&self.cuda).clone()?;
        let info = gst_video::VideoInfo::from_caps(caps).ok()?;
        let pool = ctx.buffer_pool();
        let mut config = pool.config();
        config.set_params(Some(caps), info.size() as u32, min, 0);
        config.add_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META);
        pool.set_config(config).ok()?;
        Some(pool)
    }

    /// `decide_allocation` for output caps in CUDA memory: a pool of the element's context (the
    /// engine writes there on the GPU; a downstream pool of another context would not be).
    pub(crate) fn decide_cuda_allocation(&self, query: &mut gst::query::Allocation, caps: &gst::Caps) -> Result<(), gst::LoggableError> {
        let pool = self.cuda_pool(caps, OUTPUT_POOL_MIN_BUFFERS).ok_or_else(|| gst::loggable_error!(self.cat(), "no CUDA buffer pool for {caps} (no CUDA context)"))?;
        let size = gst_video::VideoInfo::from_caps(caps).map(|i| i.size() as u32).unwrap_or(0);
        gst::debug!(self.cat(), obj = &self.element(), "output pool: CUDA memory of the element's context");
        if query.allocation_pools().next().is_some() {
            query.set_nth_allocation_pool(0, Some(&pool), size, OUTPUT_POOL_MIN_BUFFERS, 0);
        } else {
            query.add_allocation_pool(Some(&pool), size, OUTPUT_POOL_MIN_BUFFERS, 0);
        }
        Ok(())
    }

    /// `propose_allocation` for input caps in CUDA memory: a pool of the element's context (a
    /// decoder then writes its frames there), with video metas.
    pub(crate) fn propose_cuda_pool(&self, query: &mut gst::query::Allocation) -> bool {
        let (Some(caps), _) = query.get_owned() else { return false };
        if !cudamem::caps_in_cuda(&caps) {
            return false;
        }
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        if let Some(pool) = self.cuda_pool(&caps, 0) {
            let size = gst_video::VideoInfo::from_caps(&caps).map(|i| i.size() as u32).unwrap_or(0);
            query.add_allocation_pool(Some(&pool), size, 0, 0);
        }
        true
    }

    /// A caps query's answer without CUDA memory where it is unavailable here.
    pub(crate) fn filter_caps_query(&self, query: &mut gst::QueryRef) {
        if cudamem::available() {
            return;
        }
        if let gst::QueryViewMut::Caps(q) = query.view_mut() {
            if let Some(caps) = q.result_owned() {
                q.set_result(&cudamem::without_cuda(&caps));
            }
        }
    }
}
