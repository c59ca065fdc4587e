//! Allocation: the engine-frame pool proposed upstream (`propose_allocation`, see
//! [`crate::lending`]), the output pool chosen from downstream's offer (`decide_allocation`), and
//! output buffers from it when the engine's frames cannot be lent downstream.

use gst::prelude::*;
use gst_base::prelude::*;

use crate::core::Core;
use crate::lending::{PlanarPool, PoolSetup};
use crate::lock;

/// Most buffers of the proposed input pool upstream may hold at once. Bounded so that a source
/// running ahead (a deep queue) does not put ever new frames into circulation: each is a frame
/// of the engine's (page-locked when made, on CUDA), and the frames in circulation (these, the
/// temporal window and pipeline, what downstream holds) stay a handful.
const INPUT_POOL_MAX_BUFFERS: u32 = 8;

/// What downstream said in the allocation query.
#[derive(Debug, Default, Clone, Copy)]
pub struct Downstream {
    /// It handles `GstVideoMeta` (plane offsets and strides of the buffer's own).
    pub video_meta: bool,
    /// It offered a buffer pool (a sink's or hardware memory): outputs are written there.
    pub pool: bool,
}

impl Core {
    /// An output buffer from the negotiated pool, or a plain system-memory buffer.
    pub(crate) fn allocate_output(&self, info: &gst_video::VideoInfo) -> Result<gst::Buffer, gst::FlowError> {
        if let Some(pool) = self.element().buffer_pool() {
            if pool.is_active() || pool.set_active(true).is_ok() {
                match pool.acquire_buffer(None) {
                    Ok(buf) => {
                        let fits = match buf.meta::<gst_video::VideoMeta>() {
                            Some(m) => m.format() == info.format() && m.width() == info.width() && m.height() == info.height(),
                            None => buf.size() >= info.size(),
                        };
                        if fits {
                            return Ok(buf);
                        }
                        gst::debug!(self.cat(), obj = &self.element(), "pool buffer does not fit the caps; allocating");
                    }
                    Err(gst::FlowError::Flushing) => return Err(gst::FlowError::Flushing),
                    Err(e) => gst::debug!(self.cat(), obj = &self.element(), "pool acquire failed ({e:?}); allocating"),
                }
            }
        }
        gst::Buffer::with_size(info.size()).map_err(|_| {
            gst::element_error!(self.element(), gst::ResourceError::NoSpaceLeft, ("Cannot allocate a {} byte output buffer", info.size()));
            gst::FlowError::Error
        })
    }

    /// `propose_allocation`: where the state lends input frames (`zero-copy`, a format with one
    /// component per plane in the caps' default layout), offers upstream a pool whose buffers
    /// are the engine's frames, so that what upstream writes is denoised without a copy (and, on
    /// the CUDA backend, DMA'd from memory the backend has page-locked). Upstream may decline
    /// it; its buffers are then copied in as before. The pool goes with the state (caps change,
    /// stop); its buffers come back to the state's store until then.
    pub fn propose_input_pool(&self, query: &mut gst::query::Allocation) {
        let (Some(caps), _) = query.get_owned() else { return };
        let mut guard = lock(&self.state);
        let Some(state) = guard.as_mut() else { return };
        if gst_video::VideoInfo::from_caps(&caps).ok().as_ref() != Some(&state.info) {
            return;
        }
        let Some(l) = state.lending.as_mut() else { return };
        let Some(order) = l.input.as_ref() else { return };
        let size = state.info.size() as u32;
        let info = state.info.clone();
        let pool = l.pool.get_or_insert_with(|| PlanarPool::new(PoolSetup { store: l.in_store.clone(), order: order.clone(), info })).clone();
        if !pool.is_active() {
            let mut config = pool.config();
            config.set_params(Some(&caps), size, 0, INPUT_POOL_MAX_BUFFERS);
            if pool.set_config(config).is_err() {
                gst::debug!(self.cat(), obj = &self.element(), "the input pool refused its configuration");
                return;
            }
        }
        gst::debug!(self.cat(), obj = &self.element(), "proposing the engine-frame pool upstream ({size} bytes per buffer)");
        query.add_allocation_pool(Some(pool.upcast_ref::<gst::BufferPool>()), size, 0, INPUT_POOL_MAX_BUFFERS);
    }

    /// `propose_allocation`: the metas downstream accepts that stay valid through this element
    /// (`MetaPolicy`), offered upstream in turn: overlay compositions, so that subtitles are left
    /// for downstream to render instead of being burnt in (and denoised); crop and regions of
    /// interest where the frame keeps its geometry.
    pub fn offer_downstream_metas(&self, decide_query: Option<&gst::query::Allocation>, query: &mut gst::query::Allocation) {
        let Some(downstream) = decide_query else { return };
        for (api, params) in downstream.allocation_metas() {
            if !self.metas.keeps(api) {
                continue;
            }
            if api == gst_video::VideoOverlayCompositionMeta::meta_api() {
                query.add_allocation_meta::<gst_video::VideoOverlayCompositionMeta>(params);
            } else if api == gst_video::VideoCropMeta::meta_api() {
                query.add_allocation_meta::<gst_video::VideoCropMeta>(params);
            } else if api == gst_video::VideoRegionOfInterestMeta::meta_api() {
                query.add_allocation_meta::<gst_video::VideoRegionOfInterestMeta>(params);
            }
        }
    }

    /// `decide_allocation`: downstream's pool when it takes the caps, else a video pool.
    pub fn decide_allocation(&self, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        let Some(caps) = query.get_owned().0 else {
            return Err(gst::loggable_error!(self.cat(), "allocation query without caps"));
        };
        if crate::cudamem::caps_in_cuda(&caps) {
            *lock(&self.downstream) = Downstream { video_meta: true, pool: true };
            return self.decide_cuda_allocation(query, &caps);
        }
        let info = gst_video::VideoInfo::from_caps(&caps).map_err(|_| gst::loggable_error!(self.cat(), "invalid caps {caps}"))?;
        let size = info.size() as u32;
        let video_meta = query.find_allocation_meta::<gst_video::VideoMeta>().is_some();
        let offered = query.allocation_pools().next().and_then(|(pool, _size, min, max)| pool.map(|p| (p, min, max)));
        let have_offer = query.allocation_pools().next().is_some();

        let configure = |pool: &gst::BufferPool, min: u32, max: u32| -> bool {
            let mut config = pool.config();
            config.set_params(Some(&caps), size, min, max);
            if video_meta && pool.has_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META) {
                config.add_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META);
            }
            if pool.set_config(config).is_ok() {
                return true;
            }
            // The pool may have adjusted the parameters; accept them if they still fit.
            let config = pool.config();
            config.validate_params(Some(&caps), size, min, max).is_ok() && pool.set_config(config).is_ok()
        };

        let (pool, min, max, theirs) = match offered {
            Some((pool, min, max)) if configure(&pool, min, max) => (pool, min, max, true),
            _ => {
                let pool = gst_video::VideoBufferPool::new().upcast::<gst::BufferPool>();
                if !configure(&pool, 0, 0) {
                    return Err(gst::loggable_error!(self.cat(), "cannot configure a buffer pool for {caps}"));
                }
                (pool, 0, 0, false)
            }
        };
        *lock(&self.downstream) = Downstream { video_meta, pool: theirs };
        gst::debug!(self.cat(), obj = &self.element(), "output pool {:?}: size {size}, min {min}, max {max}, video meta {video_meta}", pool.name());
        if have_offer {
            query.set_nth_allocation_pool(0, Some(&pool), size, min, max);
        } else {
            query.add_allocation_pool(Some(&pool), size, min, max);
        }
        Ok(())
    }
}
