//! The frame flow both elements share: pushing input frames into the engine and output frames
//! downstream, draining and flushing, and applying property changes between frames.
//!
//! Data flow: `submit_input_buffer` (base class: QoS, renegotiation; we note DISCONT) ->
//! `generate_output`, called by the base class until it returns no buffer: the first call pushes
//! the queued input frame into the engine, every call pops at most one ready output frame. With
//! `temporal-future` = 0 (and a synchronous backend) the frame pushed is ready at once, so its
//! output leaves in the same chain call. With `temporal-future` = N the output of frame k leaves
//! with input k+N; EOS, SEGMENT, STREAM_START, DISCONT and format changes drain the held frames
//! (`Denoiser::finish_stream`), FLUSH_STOP drops them (`Denoiser::reset`).
//!
//! Each output buffer gets the PTS, DTS, duration, offset, offset-end and flags of its own input
//! frame, carried through the engine as the frame's tag ([`FrameMeta`]). Output frames have the
//! engine's output size (`Denoiser::output_info`): the input's, or scaled by `nlmupscale`.

use gst::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::base_transform::GenerateOutputSuccess;
use gst_video::prelude::*;

use nlmdenoise::FrameMut;

use crate::caps::{engine_info_from_caps, frame_ref};
use crate::core::Core;
use crate::cudamem::{self, DeviceMap};
use crate::errors::engine_error;
use crate::lending::{self, return_spares};
use crate::lock;
use crate::logbridge::with_engine_logs;
use crate::state::{FrameMeta, MetaPolicy, State};

impl Core {
    /// Applies property changes made since the last frame. True where the frames of delay the
    /// engine adds changed (future frames, or an automatic chunk size sized from the new window):
    /// the caller posts a latency message once the state lock is released.
    fn apply_settings(&self, state: &mut State) -> Result<bool, gst::FlowError> {
        let (params, generation) = {
            let s = lock(&self.settings);
            if s.generation == state.generation {
                return Ok(false);
            }
            (s.params, s.generation)
        };
        if state.denoiser.output_info_for(&params).is_ok_and(|o| o != state.denoiser.output_info()) {
            // The output format is in the caps (a new `scale`): such changes come with
            // renegotiation, which creates a new engine from the settings at set_caps; the
            // running engine keeps its parameters until then.
            self.element().reconfigure_src();
            return Ok(false);
        }
        state.generation = generation;
        if params == *state.denoiser.params() {
            return Ok(false);
        }
        let before = state.denoiser.latency_frames();
        match with_engine_logs(self.dispatch(), || state.denoiser.set_params(params)) {
            Ok(()) => {
                gst::debug!(self.cat(), obj = &self.element(), "parameters changed to {params:?}");
                Ok(state.denoiser.latency_frames() != before)
            }
            Err(nlmdenoise::Error::InvalidParameter(msg)) | Err(nlmdenoise::Error::Unsupported(msg)) => {
                // The engine keeps the previous parameters. Posted once the state lock is
                // released (generate_output): a synchronous bus handler may read properties.
                let text = format!("Ignoring the new parameters: {msg}");
                gst::warning!(self.cat(), obj = &self.element(), "{text}");
                self.defer(gst::message::Warning::builder(gst::LibraryError::Settings, &text).src(&self.element()).build());
                Ok(false)
            }
            Err(e) => Err(engine_error(self, "Changing parameters failed", &e)),
        }
    }

    /// Pushes one input frame into the engine; true where applying pending property changes
    /// changed the element's latency (see `apply_settings`).
    fn process_input(&self, state: &mut State, inbuf: gst::Buffer) -> Result<bool, gst::FlowError> {
        let latency_changed = self.apply_settings(state)?;
        if inbuf.duration().is_some() {
            state.last_duration = inbuf.duration();
        }
        let meta = FrameMeta::of(&inbuf, self.metas);
        let mut inbuf = inbuf;
        if state.cuda_in && state.denoiser.takes_device_frames() && cudamem::buffer_in_cuda(&inbuf) {
            match DeviceMap::map(inbuf, &state.info, false) {
                Ok(input) => {
                    // Copied into the engine's ring on the GPU (crate::cuda); the output goes
                    // into a buffer of the element's CUDA pool where the output caps are CUDA.
                    let output = if state.cuda_out { self.device_output(state) } else { None };
                    let input = cudamem::device_frame(input);
                    let denoiser = &mut state.denoiser;
                    let pushed = with_engine_logs(self.dispatch(), || denoiser.push_device(input, output, meta));
                    if let Err(e) = pushed {
                        self.engine_failed(state, "Processing a frame failed", e, None)?;
                    }
                    return Ok(latency_changed);
                }
                // Not mappable on the device: through its host mapping, below.
                Err(b) => {
                    gst::debug!(self.cat(), obj = &self.element(), "a CUDA buffer that cannot be mapped for its device pointers ({} memories): through the host", b.n_memory());
                    inbuf = b
                }
            }
        }
        let inbuf = match state.lending.as_ref() {
            Some(l) => {
                let taken = match l.input.as_ref() {
                    Some(order) => lending::take_input(inbuf, order, &l.in_store),
                    None => Err(inbuf),
                };
                match taken {
                    Ok(frame) => {
                        // A frame of the proposed pool, filled upstream: no copy. (If the push
                        // fails, this frame is among the lost ones even with the CPU hand-over:
                        // its planes may hold part of an output by then.)
                        let denoiser = &mut state.denoiser;
                        let pushed = with_engine_logs(self.dispatch(), || denoiser.push_planar(frame, meta));
                        return_spares(&mut state.denoiser, &l.in_store);
                        if let Err(e) = pushed {
                            self.engine_failed(state, "Processing a frame failed", e, None)?;
                        }
                        return Ok(latency_changed);
                    }
                    Err(inbuf) => {
                        // Unpacked into a frame that came back from downstream, if one did.
                        if let Some(frame) = l.in_store.take_frame() {
                            state.denoiser.recycle(frame);
                        }
                        inbuf
                    }
                }
            }
            None => inbuf,
        };
        let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(inbuf.as_ref(), &state.info).map_err(|_| {
            self.defer(gst::message::Error::builder(gst::StreamError::Format, &format!("Failed to map the input buffer as {:?}", state.info.format())).src(&self.element()).build());
            gst::FlowError::Error
        })?;
        let input = frame_ref(state.engine_info, &frame).map_err(|msg| {
            self.defer(gst::message::Error::builder(gst::StreamError::Format, &format!("Bad input frame: {msg}")).src(&self.element()).build());
            gst::FlowError::Error
        })?;
        let denoiser = &mut state.denoiser;
        let pushed = with_engine_logs(self.dispatch(), || denoiser.push(&input, meta));
        if let Some(l) = state.lending.as_ref() {
            return_spares(&mut state.denoiser, &l.in_store);
        }
        if let Err(e) = pushed {
            self.engine_failed(state, "Processing a frame failed", e, Some(&input))?;
        }
        Ok(latency_changed)
    }

    /// A buffer of the element's CUDA output pool mapped for the engine to write on the GPU;
    /// `None` (the output then comes through the host) where the pool gives none.
    fn device_output(&self, state: &State) -> Option<nlmdenoise::device::DeviceFrame> {
        let pool = self.element().buffer_pool()?;
        if !pool.is_active() && pool.set_active(true).is_err() {
            return None;
        }
        let buffer = pool.acquire_buffer(None).ok()?;
        match DeviceMap::map(buffer, &state.out_info, true) {
            Ok(map) => Some(cudamem::device_frame(map)),
            Err(_) => {
                gst::debug!(self.cat(), obj = &self.element(), "the output pool's buffer is not writable CUDA memory; output through the host");
                None
            }
        }
    }

    /// With sigma auto: the structure of an element message "nlmdenoise-noise" (fields sigma,
    /// chroma-sigma, timestamp) when a second of stream time has passed since the last one.
    fn noise_message(&self, state: &mut State, pts: Option<gst::ClockTime>) -> Option<gst::Structure> {
        let (Some(e), Some(pts)) = (state.denoiser.noise_estimate(), pts) else { return None };
        if state.last_noise_message.is_some_and(|t| pts < t + gst::ClockTime::SECOND && pts >= t) {
            return None;
        }
        state.last_noise_message = Some(pts);
        Some(gst::Structure::builder("nlmdenoise-noise").field("sigma", e.luma).field("chroma-sigma", e.chroma.unwrap_or(-1.0)).field("timestamp", pts).build())
    }

    /// Pops the oldest ready output into a new buffer; `None` when nothing is ready.
    ///
    /// The buffer is allocated without the state lock held: acquiring from a downstream pool can
    /// block until the sink releases a buffer, and the sink may first need an answer to a latency
    /// query, which takes the state lock.
    pub fn pop_output(&self) -> Result<Option<gst::Buffer>, gst::FlowError> {
        let downstream = *lock(&self.downstream);
        let info = {
            let mut guard = lock(&self.state);
            let Some(state) = guard.as_mut() else { return Ok(None) };
            if let Some((meta, frame)) = state.denoiser.pop_device() {
                // Written on the GPU and synchronised (Denoiser::pop_device).
                let map = frame.into_owner().downcast::<DeviceMap>().map_err(|_| {
                    self.defer(gst::message::Error::builder(gst::CoreError::Failed, "An output frame in device memory that is not the element's").src(&self.element()).build());
                    gst::FlowError::Error
                })?;
                let mut buffer = map.into_buffer();
                meta.apply(buffer.make_mut());
                return Ok(Some(buffer));
            }
            if let Some(l) = state.lending.as_ref().filter(|l| !l.out_store.same(&l.in_store)) {
                // Output frames of their own planes (upscaling) go back to the engine here; with
                // the input's planes they go on to the next input (`process_input`).
                while let Some(frame) = l.out_store.take_frame() {
                    state.denoiser.recycle(frame);
                }
            }
            if state.denoiser.ready() == 0 {
                return Ok(None);
            }
            let lend = state.lending.as_ref().and_then(|l| l.output.as_ref().filter(|p| !downstream.pool && (p.default_layout || downstream.video_meta)).map(|p| (p, &l.out_store)));
            if let Some((layout, store)) = lend {
                let (meta, frame) = state.denoiser.pop_planar().expect("a ready frame");
                let mut buffer = layout.lend(frame, store, &state.out_info, downstream.video_meta).inspect_err(|_| {
                    self.defer(gst::message::Error::builder(gst::CoreError::Failed, "Failed to describe the output planes").src(&self.element()).build());
                })?;
                meta.apply(buffer.get_mut().expect("new buffer"));
                return Ok(Some(buffer));
            }
            state.out_info.clone()
        };
        let mut outbuf = self.allocate_output(&info)?;
        let mut guard = lock(&self.state);
        let Some(state) = guard.as_mut() else { return Ok(None) };
        if state.out_info != info || state.denoiser.ready() == 0 {
            return Ok(None);
        }
        let buf = outbuf.make_mut();
        let meta = {
            let mut frame = gst_video::VideoFrameRef::from_buffer_ref_writable(&mut *buf, &state.out_info).map_err(|_| {
                self.defer(gst::message::Error::builder(gst::CoreError::Failed, "Failed to map the output buffer").src(&self.element()).build());
                gst::FlowError::Error
            })?;
            let n = frame.n_planes() as usize;
            let mut strides = Vec::with_capacity(n);
            for (p, &s) in frame.plane_stride().iter().take(n).enumerate() {
                if s <= 0 {
                    self.defer(gst::message::Error::builder(gst::CoreError::Negotiation, &format!("Output plane {p} has stride {s}")).src(&self.element()).build());
                    return Err(gst::FlowError::Error);
                }
                strides.push(s as usize);
            }
            let planes: Vec<&mut [u8]> = frame.planes_data_mut().into_iter().take(n).collect();
            let mut out = FrameMut::new(state.denoiser.output_info(), planes, &strides).map_err(|e| engine_error(self, "Bad output buffer", &e))?;
            let denoiser = &mut state.denoiser;
            match with_engine_logs(self.dispatch(), || denoiser.pop(&mut out)) {
                Ok(Some(meta)) => meta,
                Ok(None) => return Ok(None),
                Err(e) => return Err(engine_error(self, "Writing the output frame failed", &e)),
            }
        };
        meta.apply(buf);
        Ok(Some(outbuf))
    }

    /// Finishes every held frame and pushes the outputs downstream (EOS, new segment, new stream,
    /// format change). Outputs keep their own timestamps.
    pub fn drain(&self, why: &str) -> Result<gst::FlowSuccess, gst::FlowError> {
        {
            let mut guard = lock(&self.state);
            let Some(state) = guard.as_mut() else { return Ok(gst::FlowSuccess::Ok) };
            if state.denoiser.queued() > 0 {
                gst::debug!(self.cat(), obj = &self.element(), "{why}: draining {} held frame(s)", state.denoiser.queued());
            }
            // Also when nothing is held: the next frame starts a new temporal window.
            let denoiser = &mut state.denoiser;
            if let Err(e) = with_engine_logs(self.dispatch(), || denoiser.finish_stream()) {
                let failed = self.engine_failed(state, "Draining failed", e, None);
                if failed.is_err() {
                    drop(guard);
                    self.deliver_finished();
                    self.post_deferred();
                    return failed.map(|_| gst::FlowSuccess::Ok);
                }
            }
        }
        self.post_deferred();
        let srcpad = self.element().src_pad().clone();
        loop {
            let popped = self.pop_output();
            self.post_deferred();
            match popped? {
                Some(buf) => srcpad.push(buf)?,
                None => return Ok(gst::FlowSuccess::Ok),
            };
        }
    }

    /// Pushes out every finished frame the engine holds, ignoring downstream's answer: after a
    /// failure, so that frames computed before it are not lost with the stream.
    fn deliver_finished(&self) {
        let srcpad = self.element().src_pad().clone();
        while let Ok(Some(buf)) = self.pop_output() {
            if srcpad.push(buf).is_err() {
                break;
            }
        }
    }

    /// Drops every held frame (flush).
    pub fn reset(&self) {
        if let Some(state) = lock(&self.state).as_mut() {
            gst::debug!(self.cat(), obj = &self.element(), "flush: dropping {} held frame(s)", state.denoiser.queued());
            state.denoiser.reset();
        }
    }

    /// An event from upstream, before the base class handles it: drains or drops held frames.
    pub fn sink_event(&self, event: &gst::Event) {
        use gst::EventView;
        let drain = match event.view() {
            EventView::FlushStop(_) => {
                self.reset();
                None
            }
            EventView::Eos(_) => Some("eos"),
            // A gap must not overtake the frames held back for future references.
            EventView::Gap(_) => Some("gap event"),
            EventView::Segment(_) => Some("new segment"),
            EventView::StreamStart(_) => Some("stream start"),
            EventView::Caps(c) => {
                let new = engine_info_from_caps(c.caps()).ok().map(|(_, e)| e);
                let old = lock(&self.state).as_ref().map(|s| s.engine_info);
                match (old, new) {
                    (Some(old), Some(new)) if old != new => Some("format change"),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(why) = drain {
            if let Err(err) = self.drain(why) {
                // Flushing or not-linked downstream is not fatal for the event; errors have
                // been posted already.
                gst::debug!(self.cat(), obj = &self.element(), "pushing drained frames at {why}: {err:?}");
            }
        }
    }

    /// Before the base class queues `inbuf`: a DISCONT buffer first drains the held frames.
    pub fn before_submit(&self, inbuf: &gst::Buffer) -> Result<(), gst::FlowError> {
        // Only the buffer's own flag counts: the base class keeps `is_discont` set until it has
        // pushed an output, which with future frames is several inputs later.
        if inbuf.flags().contains(gst::BufferFlags::DISCONT) {
            // Held frames are finished with the frames they have and pushed before this one;
            // this frame starts a new temporal window.
            self.drain("discont")?;
        }
        Ok(())
    }

    /// `generate_output` with the buffer the base class queued (if any).
    /// `strength=0` or `sigma=0` (`nlmdenoise`): the input goes out as it came, after the frames
    /// the engine held (drained first, in order), without GPU work; the latency drops to 0
    /// (posted). When filtering resumes, the next frame starts a new window and the latency comes
    /// back (posted). `Err(inbuf)`: filter this frame (the buffer given back untouched, so that a
    /// buffer of the element's own pool is still taken back without a copy).
    fn pass_through(&self, inbuf: gst::Buffer) -> Result<Result<GenerateOutputSuccess, gst::Buffer>, gst::FlowError> {
        let wanted = self.metas == MetaPolicy::KeepsGeometry && lock(&self.settings).passthrough();
        let was = lock(&self.state).as_ref().is_some_and(|s| s.passthrough);
        if wanted != was {
            if wanted {
                self.drain("strength 0: passing frames through")?;
            }
            if let Some(state) = lock(&self.state).as_mut() {
                state.passthrough = wanted;
            }
            let obj = self.element();
            gst::debug!(self.cat(), obj = &obj, "{}; latency now {}", if wanted { "passing frames through" } else { "filtering again" }, self.added_latency());
            let _ = obj.post_message(gst::message::Latency::builder().src(&obj).build());
        }
        Ok(if wanted { Ok(GenerateOutputSuccess::Buffer(inbuf)) } else { Err(inbuf) })
    }

    pub fn generate_output(&self, inbuf: Option<gst::Buffer>) -> Result<GenerateOutputSuccess, gst::FlowError> {
        if let Some(inbuf) = inbuf {
            let obj = self.element();
            // Controlled properties (GstController) take their values for this frame's stream
            // time before it is processed; they set properties, so before the state lock.
            if let Some(t) = inbuf.pts().and_then(|pts| obj.segment().downcast::<gst::ClockTime>().ok()?.to_stream_time(pts)) {
                let _ = obj.sync_values(t);
            }
            let inbuf = match self.pass_through(inbuf)? {
                Ok(out) => return Ok(out),
                Err(inbuf) => inbuf,
            };
            self.adopt_buffer_context(&inbuf)?;
            let mut guard = lock(&self.state);
            let Some(state) = guard.as_mut() else {
                gst::element_error!(obj, gst::CoreError::Negotiation, ("Received a buffer before caps"));
                return Err(gst::FlowError::NotNegotiated);
            };
            if inbuf.flags().contains(gst::BufferFlags::GAP) && inbuf.size() < state.info.size() {
                // A gap without picture content: nothing to process or to use as a reference.
                drop(guard);
                gst::debug!(self.cat(), obj = &obj, "gap buffer without a frame at {}: new temporal window", inbuf.pts().display());
                self.drain("gap")?;
                // Tell downstream (sinks, aggregators) that this time range has no data.
                if let Some(pts) = inbuf.pts() {
                    let _ = obj.src_pad().push_event(gst::event::Gap::builder(pts).duration(inbuf.duration()).build());
                }
                return Ok(GenerateOutputSuccess::NoOutput);
            }
            let pts = inbuf.pts();
            let latency_changed = match self.process_input(state, inbuf) {
                Ok(changed) => changed,
                Err(e) => {
                    drop(guard);
                    self.deliver_finished();
                    self.post_deferred();
                    return Err(e);
                }
            };
            let noise = self.noise_message(state, pts);
            // Messages after the state lock: a synchronous bus handler may read properties.
            drop(guard);
            self.post_deferred();
            if let Some(s) = noise {
                let _ = obj.post_message(gst::message::Element::builder(s).src(&obj).build());
            }
            if latency_changed {
                gst::debug!(self.cat(), obj = &obj, "latency now {}", self.added_latency());
                let _ = obj.post_message(gst::message::Latency::builder().src(&obj).build());
            }
        }
        let popped = self.pop_output();
        self.post_deferred();
        match popped? {
            Some(buf) => Ok(GenerateOutputSuccess::Buffer(buf)),
            None => Ok(GenerateOutputSuccess::NoOutput),
        }
    }
}
