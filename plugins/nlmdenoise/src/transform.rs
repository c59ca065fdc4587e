//! The machinery both elements share (`nlmdenoise`, `nlmupscale`): settings, the engine state,
//! pushing input frames into the engine and output frames downstream, draining and flushing,
//! latency, QoS lateness, allocation. Each element's `imp.rs` holds a [`Core`] and forwards its
//! base-transform calls here; the element's own code is its properties and caps.
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

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use gst::glib;
use gst::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::base_transform::GenerateOutputSuccess;
use gst_video::prelude::*;

use nlmdenoise::device::{BackendKind, ChunkFrames};
use nlmdenoise::planar::{exchange_layout, PlanarFrame};
use nlmdenoise::BackendOptions;
use nlmdenoise::{Denoiser, FrameMut, FrameRef, Params};

use crate::lending::{self, PlanarPool, PlaneOrder, PlaneStore, PoolSetup};
use crate::logbridge::{with_engine_logs, GstLogSubscriber};
use crate::nlmdenoise::gst_to_format;

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub params: Params,
    pub options: BackendOptions,
    /// Bumped on every change of `params`; the streaming thread applies changes between frames.
    pub generation: u64,
    /// The strengths were set explicitly; otherwise setting `sigma` also sets them
    /// (Params::with_noise_sigma), and without `sigma` the noise level is estimated.
    pub strength_set: bool,
    /// A `device-id` value that names no device list, with the reason: the element refuses to
    /// start until it is replaced (a typo must not silently run on device 0).
    pub bad_device_id: Option<String>,
    /// Without `sigma` or a strength, estimate the noise level (nlmdenoise); nlmupscale keeps its
    /// clean-input strengths instead (`base_strength`).
    pub estimate: bool,
    /// Strengths when neither `sigma` nor a strength is set and nothing is estimated.
    pub base_strength: f32,
    /// Output frames go downstream in the engine's own planes, without a copy, where the format
    /// and downstream allow it (property `zero-copy`; `OutputPlanes`).
    pub zero_copy: bool,
}

impl Default for Settings {
    fn default() -> Self {
        // Neither sigma nor a strength set: the noise level is estimated (sigma = auto).
        Settings {
            params: Params { sigma_auto: true, ..Params::default() },
            options: BackendOptions::default(),
            generation: 0,
            strength_set: false,
            bad_device_id: None,
            estimate: true,
            base_strength: Params::default().strength,
            zero_copy: true,
        }
    }
}

impl Settings {
    /// Re-derives what follows from the others after any change: `sigma` -1 (unset) means auto
    /// unless a strength was set; a set `sigma` without a set strength gives the strengths that
    /// suit it and the current window (which may just have changed).
    pub fn update_auto(&mut self) {
        self.params.sigma_auto = self.estimate && self.params.sigma.is_none() && !self.strength_set;
        if !self.estimate && self.params.sigma.is_none() && !self.strength_set {
            self.params.strength = self.base_strength;
            self.params.chroma_strength = self.base_strength;
        }
        self.params.strength_fixed = self.strength_set;
        if let (Some(sigma), false) = (self.params.sigma, self.strength_set) {
            self.params = self.params.with_noise_sigma(sigma);
        }
    }
}

/// What an output buffer inherits from its input frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameMeta {
    pts: Option<gst::ClockTime>,
    dts: Option<gst::ClockTime>,
    duration: Option<gst::ClockTime>,
    offset: u64,
    offset_end: u64,
    flags: gst::BufferFlags,
}

impl FrameMeta {
    fn of(buf: &gst::BufferRef) -> Self {
        FrameMeta { pts: buf.pts(), dts: buf.dts(), duration: buf.duration(), offset: buf.offset(), offset_end: buf.offset_end(), flags: buf.flags() - gst::BufferFlags::TAG_MEMORY }
    }

    fn apply(&self, buf: &mut gst::BufferRef) {
        buf.set_pts(self.pts);
        buf.set_dts(self.dts);
        buf.set_duration(self.duration);
        buf.set_offset(self.offset);
        buf.set_offset_end(self.offset_end);
        let old = buf.flags() - gst::BufferFlags::TAG_MEMORY;
        buf.unset_flags(old);
        buf.set_flags(self.flags);
    }
}

pub struct State {
    pub info: gst_video::VideoInfo,
    pub engine_info: nlmdenoise::VideoInfo,
    /// The output caps' info (the input's, or scaled).
    pub out_info: gst_video::VideoInfo,
    pub denoiser: Denoiser<FrameMeta>,
    /// `Settings::generation` the denoiser's parameters correspond to.
    generation: u64,
    /// Duration of the last input buffer (latency for variable-framerate streams).
    last_duration: Option<gst::ClockTime>,
    /// Stream time of the last noise-estimate message (at most one a second).
    last_noise_message: Option<gst::ClockTime>,
    /// With `backend=auto` on a GPU: the CPU backend's options, to go on with if the GPU fails
    /// mid-stream (documented in docs/element.md); taken at the first such failure.
    fallback: Option<BackendOptions>,
    /// Frames lent without copies (`zero-copy`, src/lending.rs); declared after `denoiser`, so
    /// that the planes its stores hold are freed after the engine's backend.
    lending: Option<Lending>,
}

/// The state's frames lent to GStreamer: downstream as output buffers where `output` allows,
/// upstream through the proposed pool where the input caps allow, and the stores they come back
/// to (one store when input and output frames have the same planes).
struct Lending {
    output: Option<PlaneLayout>,
    out_store: PlaneStore,
    input: Option<PlaneOrder>,
    in_store: PlaneStore,
    /// The pool proposed upstream (created at the first allocation query of these caps).
    pool: Option<PlanarPool>,
}

impl Lending {
    fn new(denoiser: &Denoiser<FrameMeta>, in_info: &gst_video::VideoInfo, out_info: &gst_video::VideoInfo) -> Self {
        let (in_geometry, out_geometry) = denoiser.exchange_geometry();
        let in_store = PlaneStore::new(in_geometry);
        let out_store = if out_geometry == in_geometry { in_store.clone() } else { PlaneStore::new(out_geometry) };
        let output = PlaneLayout::new(denoiser.output_info(), out_info);
        // Upstream writes the caps' default layout into a pool's buffers: a pool is offered only
        // where that is the engine's.
        let input = PlaneLayout::new(denoiser.info(), in_info).filter(|l| l.default_layout).map(|l| l.order);
        Lending { output, out_store, input, in_store, pool: None }
    }
}

/// Most buffers of the proposed input pool upstream may hold at once. Bounded so that a source
/// running ahead (a deep queue) does not put ever new frames into circulation: the CUDA backend
/// keeps up to 64 planes page-locked (device::cuda), and the frames in circulation (these, the
/// temporal window and pipeline, what downstream holds) should stay within that.
const INPUT_POOL_MAX_BUFFERS: u32 = 8;

/// What downstream said in the allocation query.
#[derive(Debug, Default, Clone, Copy)]
struct Downstream {
    /// It handles `GstVideoMeta` (plane offsets and strides of the buffer's own).
    video_meta: bool,
    /// It offered a buffer pool (a sink's or hardware memory): outputs are written there.
    pool: bool,
}

/// The engine's exchange frames as GStreamer buffers (src/lending.rs): one memory per memory
/// plane of the format, each plane's rows at a stride of their own length. Planar formats lend
/// the engine's planar frames; formats that interleave components (NV12, P010, packed RGB) lend
/// stored frames (`planar::exchange_layout`), which the CUDA backend (de)interleaves on the GPU.
struct PlaneLayout {
    order: PlaneOrder,
    /// Byte offset of each memory plane in the buffer and its row stride.
    offsets: Vec<usize>,
    strides: Vec<i32>,
    /// The offsets and strides are the caps' default ones (no `GstVideoMeta` needed).
    default_layout: bool,
}

impl PlaneLayout {
    fn new(engine: nlmdenoise::VideoInfo, info: &gst_video::VideoInfo) -> Option<Self> {
        let (geometry, order) = exchange_layout(&engine);
        let mut offsets = Vec::with_capacity(order.len());
        let mut strides = Vec::with_capacity(order.len());
        let mut at = 0;
        for &c in &order {
            let plane = &geometry.planes[c];
            offsets.push(at);
            strides.push((plane.width * geometry.bytes_per_sample) as i32);
            at += plane.width * plane.height * geometry.bytes_per_sample;
        }
        let default_layout = info.offset().iter().zip(&offsets).all(|(a, b)| *a == *b) && info.stride().iter().zip(&strides).all(|(a, b)| a == b) && at == info.size();
        Some(PlaneLayout { order: PlaneOrder(order), offsets, strides, default_layout })
    }

    /// `frame` lent downstream as a buffer, with a `GstVideoMeta` where the layout is not the
    /// default one or downstream takes one (it then maps plane by plane; without the meta a
    /// whole-buffer map merges the planes into a copy).
    fn lend(&self, frame: PlanarFrame, store: &PlaneStore, info: &gst_video::VideoInfo, video_meta: bool) -> Result<gst::Buffer, gst::FlowError> {
        let mut buffer = lending::lend_output(frame, &self.order, store);
        if video_meta || !self.default_layout {
            let b = buffer.get_mut().expect("new buffer");
            gst_video::VideoMeta::add_full(b, gst_video::VideoFrameFlags::empty(), info.format(), info.width(), info.height(), &self.offsets, &self.strides).map_err(|_| gst::FlowError::Error)?;
        }
        Ok(buffer)
    }
}

#[derive(Default)]
pub struct Core {
    pub settings: Mutex<Settings>,
    pub state: Mutex<Option<State>>,
    /// The caps and settings generation whose engine creation failed and was reported: base
    /// transform retries set_caps, and the user should see the error once.
    pub refused: Mutex<Option<(gst::Caps, u64)>>,
    /// Late-frame reports from downstream (QoS), for the "cannot keep up" warning.
    pub lateness: Mutex<Lateness>,
    /// What downstream answered to the last allocation query.
    downstream: Mutex<Downstream>,
    /// Messages built while the state lock was held, posted once it is released: a synchronous
    /// bus handler may read properties, which take that lock.
    deferred: Mutex<Vec<gst::Message>>,
    dispatch: OnceLock<tracing::Dispatch>,
    element: OnceLock<glib::WeakRef<gst_base::BaseTransform>>,
    /// What the element is for (the words of its messages): a noun and a verb.
    pub what: &'static str,
    pub doing: &'static str,
    /// The element's debug category (set by `attach`).
    cat: OnceLock<gst::DebugCategory>,
}

/// Seconds of stream time over which late frames are counted.
const LATE_WINDOW_S: u64 = 5;
/// Late-frame reports in one window that make the warning (about one frame in five at 30 fps).
const LATE_REPORTS: u32 = 30;

/// QoS reports from downstream that frames came late (each late frame is one the QoS machinery
/// then drops upstream of the transform): counted per window of stream time; a window with
/// [`LATE_REPORTS`] or more posts one warning per stream.
#[derive(Default)]
pub struct Lateness {
    window_start: Option<gst::ClockTime>,
    late: u32,
    warned: bool,
}

impl Core {
    /// A downstream report that the frame at `ts` came late; warns once per stream when the
    /// reports persist (a live pipeline then loses frames to QoS).
    pub fn count_late_frame(&self, ts: gst::ClockTime) {
        let mut l = lock(&self.lateness);
        if l.warned {
            return;
        }
        let start = *l.window_start.get_or_insert(ts);
        if ts < start || ts >= start + gst::ClockTime::from_seconds(LATE_WINDOW_S) {
            *l = Lateness { window_start: Some(ts), late: 0, warned: false };
        }
        l.late += 1;
        if l.late >= LATE_REPORTS {
            l.warned = true;
            let backend = lock(&self.state).as_ref().map(|st| st.denoiser.backend_description()).unwrap_or_default();
            drop(l);
            gst::element_warning!(
                self.element(),
                gst::CoreError::Clock,
                ("The {} cannot keep up: {LATE_REPORTS} or more frames came late within {LATE_WINDOW_S} s and were dropped (QoS) on {backend}", self.what),
                ["Use backend=cuda, a smaller search-radius or temporal window, algorithm=nlm, or a lower resolution or frame rate (docs/tuning.md)"]
            );
        }
    }
}

/// Input frames the engine holds spare go back to the lending store, the one free list of
/// input frames while frames are lent (the pool's next buffers and the next copied-in inputs
/// take from it); so no list grows while the other allocates.
fn return_spares(denoiser: &mut Denoiser<FrameMeta>, store: &PlaneStore) {
    while let Some(frame) = denoiser.spare_frame() {
        store.give_frame(frame);
    }
}

/// How many frames a failure lost, with their timestamps ("frames lost: none" when none).
fn lost_report(lost: &[FrameMeta]) -> String {
    match (lost.first(), lost.last()) {
        (Some(first), Some(last)) => format!("{} frame(s) in flight lost (timestamps {} to {})", lost.len(), first.pts.display(), last.pts.display()),
        _ => "no frame lost".into(),
    }
}

/// Reports an engine error as an element error, posted once the state lock is released (the
/// caller's entry point calls `post_deferred`): a synchronous bus handler may read properties.
pub fn engine_error(imp: &Core, what: &str, err: &nlmdenoise::Error) -> gst::FlowError {
    use nlmdenoise::Error as E;
    let text = format!("{what}: {err}");
    gst::error!(imp.cat(), obj = &imp.element(), "{text}");
    let src = imp.element();
    imp.defer(match err {
        E::InvalidFrame(_) => gst::message::Error::builder(gst::StreamError::Format, &text).src(&src).build(),
        E::InvalidParameter(_) | E::Unsupported(_) => gst::message::Error::builder(gst::LibraryError::Settings, &text).src(&src).build(),
        E::BackendUnavailable(_) => gst::message::Error::builder(gst::LibraryError::Init, &text).src(&src).build(),
        E::Backend(_) | E::State(_) => gst::message::Error::builder(gst::LibraryError::Failed, &text).src(&src).build(),
    });
    gst::FlowError::Error
}

pub fn engine_info_from_caps(caps: &gst::CapsRef) -> Result<(gst_video::VideoInfo, nlmdenoise::VideoInfo), String> {
    let info = gst_video::VideoInfo::from_caps(caps).map_err(|e| format!("invalid video caps {caps}: {e}"))?;
    let format = gst_to_format(info.format()).ok_or_else(|| format!("format {} is not supported", info.format().to_str()))?;
    let engine_info = nlmdenoise::VideoInfo::new(format, info.width() as usize, info.height() as usize).map_err(|e| e.to_string())?;
    Ok((info, engine_info))
}

/// Builds the engine's view of a mapped input frame from its real plane pointers and strides.
fn frame_ref<'a>(info: nlmdenoise::VideoInfo, frame: &'a gst_video::VideoFrameRef<&gst::BufferRef>) -> Result<FrameRef<'a>, String> {
    let n = frame.n_planes() as usize;
    let strides = frame.plane_stride();
    let mut planes = Vec::with_capacity(n);
    let mut st = Vec::with_capacity(n);
    for (p, &s) in strides.iter().enumerate().take(n) {
        if s <= 0 {
            return Err(format!("plane {p} has stride {s}; only positive strides are supported"));
        }
        planes.push(frame.plane_data(p as u32).map_err(|e| e.to_string())?);
        st.push(s as usize);
    }
    FrameRef::new(info, &planes, &st).map_err(|e| e.to_string())
}

impl Core {
    /// A core for an element that `what` and `doing` describe ("denoiser", "denoising").
    pub fn new(what: &'static str, doing: &'static str) -> Self {
        Core { what, doing, ..Default::default() }
    }

    /// The element's debug category: the core's messages are the element's.
    fn cat(&self) -> gst::DebugCategory {
        self.cat.get().copied().unwrap_or_else(|| *crate::nlmdenoise::imp::CAT)
    }

    /// Binds the core to its element (from the element's `constructed`): messages and logs go
    /// there, engine logs into `cat`.
    pub fn attach(&self, obj: &gst_base::BaseTransform, cat: gst::DebugCategory) {
        let _ = self.element.set(obj.downgrade());
        let _ = self.cat.set(cat);
        let _ = self.dispatch.set(tracing::Dispatch::new(GstLogSubscriber::new(obj.upcast_ref(), cat)));
    }

    /// The element (alive whenever one of its calls runs).
    pub fn element(&self) -> gst_base::BaseTransform {
        self.element.get().and_then(|w| w.upgrade()).expect("the core is attached to a live element")
    }

    fn dispatch(&self) -> Option<&tracing::Dispatch> {
        self.dispatch.get()
    }

    /// Delay the element adds: (`temporal-future` + the backend's pipeline depth) frames, a frame
    /// lasting 1/framerate, or the last buffer duration for variable-framerate streams (zero
    /// before the first buffer).
    pub fn added_latency(&self) -> gst::ClockTime {
        let future = lock(&self.settings).params.latency_frames() as u64;
        let state = lock(&self.state);
        let Some(state) = state.as_ref() else {
            return gst::ClockTime::ZERO;
        };
        // The backend may ignore `pipeline-depth` (CPU): ask the engine for its real depth.
        let depth = (state.denoiser.latency_frames() as u64).saturating_sub(state.denoiser.params().latency_frames() as u64);
        let frames = future + depth;
        let fps = state.info.fps();
        let frame_duration = if fps.numer() > 0 && fps.denom() > 0 {
            gst::ClockTime::SECOND.mul_div_floor(fps.denom() as u64, fps.numer() as u64).unwrap_or(gst::ClockTime::ZERO)
        } else {
            state.last_duration.unwrap_or(gst::ClockTime::ZERO)
        };
        frame_duration.checked_mul(frames).unwrap_or(gst::ClockTime::MAX)
    }

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
        let meta = FrameMeta::of(&inbuf);
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

    /// After an engine call failed: names the frames the failure lost, and with `backend=auto`
    /// on a GPU whose failure is the backend's (a kernel launch failing, a device fault or the
    /// device gone) goes on with the CPU backend: the frames the GPU had finished still come out,
    /// and `retry`, the frame whose push failed, is pushed again. Otherwise an element error.
    fn engine_failed(&self, state: &mut State, what: &str, err: nlmdenoise::Error, retry: Option<&FrameRef<'_>>) -> Result<(), gst::FlowError> {
        let mut lost = state.denoiser.take_lost();
        // A failed push always loses its own frame, the newest (Denoiser::take_lost).
        let current = retry.and_then(|f| lost.pop().map(|m| (f, m)));
        let is_backend = matches!(err, nlmdenoise::Error::Backend(_));
        let fallback = if is_backend { state.fallback.take() } else { None };
        let Some(options) = fallback else {
            if let Some((_, m)) = current {
                lost.push(m);
            }
            // The frames finished before the failure still go downstream (generate_output).
            let report = format!("{}; {} frame(s) finished before the failure are delivered", lost_report(&lost), state.denoiser.ready());
            let text = format!("{what}: {err}");
            gst::error!(self.cat(), obj = &self.element(), "{text} ({report})");
            self.defer(gst::message::Error::builder(gst::LibraryError::Failed, &text).debug(&report).src(&self.element()).build());
            return Err(gst::FlowError::Error);
        };
        let mut cpu = match with_engine_logs(self.dispatch(), || Denoiser::new(state.engine_info, *state.denoiser.user_params(), &options)) {
            Ok(d) => d,
            Err(e) => return Err(engine_error(self, &format!("{what}: {err}; starting the CPU backend after it failed too"), &e)),
        };
        if let Err(e) = cpu.adopt_ready(&mut state.denoiser) {
            return Err(engine_error(self, "Keeping the GPU's finished frames failed", &e));
        }
        let text = format!("The GPU failed mid-stream ({err}); going on with the CPU backend (backend=auto)");
        let report = format!("{}; now on {}", lost_report(&lost), cpu.backend_description());
        gst::warning!(self.cat(), obj = &self.element(), "{text} ({report})");
        self.defer(gst::message::Warning::builder(gst::LibraryError::Failed, &text).debug(&report).src(&self.element()).build());
        state.denoiser = cpu;
        if let Some((frame, meta)) = current {
            let denoiser = &mut state.denoiser;
            with_engine_logs(self.dispatch(), || denoiser.push(frame, meta)).map_err(|e| engine_error(self, "Processing a frame on the CPU backend failed", &e))?;
        }
        Ok(())
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

    /// An output buffer from the negotiated pool, or a plain system-memory buffer.
    fn allocate_output(&self, info: &gst_video::VideoInfo) -> Result<gst::Buffer, gst::FlowError> {
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

    fn defer(&self, message: gst::Message) {
        lock(&self.deferred).push(message);
    }

    /// Posts the deferred messages (the state lock must not be held).
    fn post_deferred(&self) {
        let messages = std::mem::take(&mut *lock(&self.deferred));
        let obj = self.element();
        for m in messages {
            let _ = obj.post_message(m);
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

    pub fn params_changed(&self, settings: &mut Settings) {
        settings.generation = settings.generation.wrapping_add(1);
    }
}

/// The `zero-copy` property of every element of the plugin (`Settings::zero_copy`).
/// The `chunk-frames` property of both elements.
pub fn chunk_frames_property() -> glib::ParamSpec {
    glib::ParamSpecUInt::builder("chunk-frames")
        .nick("Chunk frames")
        .blurb("Frames per batched launch (chunk along time): 1 = a frame at a time (no added latency), 0 = automatic from free device memory, N = N frames; chunks of N frames on D devices add (D+1)*N-1 frames of latency (D+1 chunks in flight). Several devices imply chunks (automatic when left at 1)")
        .maximum(nlmdenoise::device::chunked::MAX_CHUNK_FRAMES as u32)
        .default_value(1)
        .mutable_ready()
        .build()
}

/// `chunk-frames` as the engine's option, and back.
pub fn chunk_frames_from_property(v: u32) -> ChunkFrames {
    match v {
        0 => ChunkFrames::Auto,
        1 => ChunkFrames::Off,
        n => ChunkFrames::Frames(n as usize),
    }
}

pub fn chunk_frames_to_property(c: ChunkFrames) -> u32 {
    match c {
        ChunkFrames::Auto => 0,
        ChunkFrames::Off => 1,
        ChunkFrames::Frames(n) => n as u32,
    }
}

pub fn zero_copy_property() -> glib::ParamSpec {
    glib::ParamSpecBoolean::builder("zero-copy")
        .nick("Zero-copy frames")
        .blurb("Propose upstream a pool of the engine's own frames, and hand output frames downstream in the engine's planes when downstream offers no pool of its own, so that frames cross without a copy (every format; NV12, NV21, P010 and packed RGB in their own layout, which the CUDA backend converts on the GPU); off: copy frames in and out")
        .default_value(true)
        .mutable_ready()
        .build()
}

/// The pad templates of every element of the plugin: every engine format, any size (the caps
/// each element accepts are then its own business).
pub fn pad_templates() -> Vec<gst::PadTemplate> {
    let caps = gst_video::VideoCapsBuilder::new()
        .format_list(nlmdenoise::PixelFormat::ALL.into_iter().map(crate::nlmdenoise::format_to_gst))
        .width_range(1..=crate::nlmdenoise::imp::MAX_SIDE)
        .height_range(1..=crate::nlmdenoise::imp::MAX_SIDE)
        .build();
    let src = gst::PadTemplate::new("src", gst::PadDirection::Src, gst::PadPresence::Always, &caps).expect("valid src template");
    let sink = gst::PadTemplate::new("sink", gst::PadDirection::Sink, gst::PadPresence::Always, &caps).expect("valid sink template");
    vec![src, sink]
}

impl Core {
    /// `start`: checks the settings and forgets any previous stream.
    pub fn start(&self) -> Result<(), gst::ErrorMessage> {
        *lock(&self.state) = None;
        let s = lock(&self.settings).clone();
        // Ranges are enforced by the property specs; this catches anything they cannot express.
        s.params.validate().map_err(|e| gst::error_msg!(gst::LibraryError::Settings, ("Invalid parameters: {e}")))?;
        if let Some(bad) = &s.bad_device_id {
            return Err(gst::error_msg!(gst::LibraryError::Settings, ("Invalid {bad}")));
        }
        *lock(&self.refused) = None;
        *lock(&self.lateness) = Lateness::default();
        gst::debug!(self.cat(), obj = &self.element(), "starting with {:?}, backend {:?}", s.params, s.options);
        Ok(())
    }

    pub fn stop(&self) {
        *lock(&self.state) = None;
        gst::debug!(self.cat(), obj = &self.element(), "stopped");
    }

    /// `set_caps`: an engine for the input caps (kept when only the caps' other fields changed);
    /// the output caps must have the engine's output format and size.
    pub fn set_caps(&self, incaps: &gst::Caps, outcaps: &gst::Caps) -> Result<(), gst::LoggableError> {
        let obj = self.element();
        let (info, engine_info) = engine_info_from_caps(incaps).map_err(|msg| gst::loggable_error!(self.cat(), "{msg}"))?;
        let out_info = gst_video::VideoInfo::from_caps(outcaps).map_err(|_| gst::loggable_error!(self.cat(), "invalid output caps {outcaps}"))?;
        let fits = |d: &Denoiser<FrameMeta>| {
            let o = d.output_info();
            out_info.format() == info.format() && out_info.width() as usize == o.width && out_info.height() as usize == o.height
        };
        let output_only = lock(&self.state).as_ref().is_some_and(|s| s.engine_info == engine_info && !fits(&s.denoiser) && s.denoiser.queued() > 0);
        if output_only {
            // Renegotiated from downstream's side (e.g. a new `scale`): the held frames are
            // finished and go out in the current caps first.
            if let Err(e) = self.drain("output renegotiation") {
                gst::debug!(self.cat(), obj = &obj, "pushing drained frames before renegotiating: {e:?}");
            }
        }
        {
            let mut guard = lock(&self.state);
            if let Some(state) = guard.as_mut() {
                if state.engine_info == engine_info && fits(&state.denoiser) {
                    gst::debug!(self.cat(), obj = &obj, "caps changed without a new frame layout: keeping the engine");
                    state.info = info;
                    state.out_info = out_info;
                    return Ok(());
                }
                if state.denoiser.queued() > 0 {
                    gst::warning!(self.cat(), obj = &obj, "dropping {} frame(s) of the previous format", state.denoiser.queued());
                }
            }
            // Release the previous engine (and its GPU memory) before creating the next one.
            *guard = None;
        }
        // Created without the state lock held: starting CUDA and compiling kernels takes a while,
        // and latency queries must not wait for it.
        let settings = lock(&self.settings).clone();
        let create = |options: &BackendOptions| with_engine_logs(self.dispatch(), || Denoiser::new(engine_info, settings.params, options));
        let mut created = create(&settings.options);
        if let Err(e @ (nlmdenoise::Error::Backend(_) | nlmdenoise::Error::BackendUnavailable(_))) = &created {
            if settings.options.kind == BackendKind::Auto {
                // `auto` already falls back when CUDA is absent; this covers a GPU that is present
                // but cannot take this stream (e.g. out of memory). Nothing was processed yet.
                gst::element_warning!(obj, gst::LibraryError::Init, ("GPU backend failed ({e}); falling back to the CPU backend"));
                created = create(&BackendOptions { kind: BackendKind::Cpu, ..settings.options.clone() });
            }
        }
        let denoiser = match created {
            Ok(d) => d,
            Err(e) => {
                let key = (incaps.clone(), settings.generation);
                if lock(&self.refused).as_ref() != Some(&key) {
                    let _ = engine_error(self, &format!("Cannot process {}x{} {}", engine_info.width, engine_info.height, engine_info.format), &e);
                    self.post_deferred();
                    *lock(&self.refused) = Some(key);
                }
                return Err(gst::loggable_error!(self.cat(), "engine creation failed: {e}"));
            }
        };
        if !fits(&denoiser) {
            let o = denoiser.output_info();
            return Err(gst::loggable_error!(self.cat(), "output caps {outcaps} do not match the {}x{} {} frames of input caps {incaps}", o.width, o.height, o.format));
        }
        gst::info!(
            self.cat(),
            obj = &obj,
            "{} {}x{} {} on {} (latency {} frame(s))",
            self.doing,
            engine_info.width,
            engine_info.height,
            engine_info.format,
            denoiser.backend_description(),
            denoiser.latency_frames()
        );
        let delayed = denoiser.latency_frames() > 0;
        let mut guard = lock(&self.state);
        let fallback = (settings.options.kind == BackendKind::Auto && !settings.options.chunked() && denoiser.on_gpu()).then(|| BackendOptions { kind: BackendKind::Cpu, ..settings.options.clone() });
        let lending = settings.zero_copy.then(|| Lending::new(&denoiser, &info, &out_info));
        *guard = Some(State { info, engine_info, out_info, denoiser, generation: settings.generation, last_duration: None, last_noise_message: None, fallback, lending });
        drop(guard);
        if delayed {
            // A latency query answered before the caps were known reported no delay.
            let _ = obj.post_message(gst::message::Latency::builder().src(&obj).build());
        }
        Ok(())
    }

    /// A latency query answered upstream: adds the element's delay.
    pub fn add_latency(&self, query: &mut gst::QueryRef) {
        let ours = self.added_latency();
        if let gst::QueryViewMut::Latency(q) = query.view_mut() {
            let (live, min, max) = q.result();
            gst::debug!(self.cat(), obj = &self.element(), "upstream latency min {min} max {}, adding {ours}", max.display());
            q.set(live, min.saturating_add(ours), max.map(|m| m.saturating_add(ours)));
        }
    }

    /// An event from downstream: counts QoS reports of late frames.
    pub fn src_event(&self, event: &gst::Event) {
        if let gst::EventView::Qos(q) = event.view() {
            let (_, _, diff, timestamp) = q.get();
            if let (true, Some(ts)) = (diff > 0, timestamp) {
                self.count_late_frame(ts);
            }
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

    /// `decide_allocation`: downstream's pool when it takes the caps, else a video pool.
    pub fn decide_allocation(&self, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        let Some(caps) = query.get_owned().0 else {
            return Err(gst::loggable_error!(self.cat(), "allocation query without caps"));
        };
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
    pub fn generate_output(&self, inbuf: Option<gst::Buffer>) -> Result<GenerateOutputSuccess, gst::FlowError> {
        if let Some(inbuf) = inbuf {
            let obj = self.element();
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

/// The base-transform calls every element of the plugin forwards to its `core` field unchanged,
/// written once: expand inside `impl BaseTransformImpl for ...` (the element keeps its own
/// `transform_caps` and `propose_allocation`).
macro_rules! base_transform_via_core {
    () => {
        const MODE: gst_base::subclass::BaseTransformMode = gst_base::subclass::BaseTransformMode::NeverInPlace;
        const PASSTHROUGH_ON_SAME_CAPS: bool = false;
        const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

        fn start(&self) -> Result<(), gst::ErrorMessage> {
            self.core.start()
        }

        fn stop(&self) -> Result<(), gst::ErrorMessage> {
            self.core.stop();
            Ok(())
        }

        fn unit_size(&self, caps: &gst::Caps) -> Option<usize> {
            gst_video::VideoInfo::from_caps(caps).ok().map(|info| info.size())
        }

        fn set_caps(&self, incaps: &gst::Caps, outcaps: &gst::Caps) -> Result<(), gst::LoggableError> {
            self.core.set_caps(incaps, outcaps)
        }

        fn query(&self, direction: gst::PadDirection, query: &mut gst::QueryRef) -> bool {
            let is_latency = matches!(query.view(), gst::QueryView::Latency(_));
            if direction != gst::PadDirection::Src || !is_latency {
                return BaseTransformImplExt::parent_query(self, direction, query);
            }
            if !BaseTransformImplExt::parent_query(self, direction, query) {
                return false;
            }
            self.core.add_latency(query);
            true
        }

        fn src_event(&self, event: gst::Event) -> bool {
            self.core.src_event(&event);
            self.parent_src_event(event)
        }

        fn sink_event(&self, event: gst::Event) -> bool {
            self.core.sink_event(&event);
            self.parent_sink_event(event)
        }

        fn decide_allocation(&self, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
            self.core.decide_allocation(query)
        }

        fn submit_input_buffer(&self, is_discont: bool, inbuf: gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
            self.core.before_submit(&inbuf)?;
            // The base class does renegotiation and QoS (dropping late frames) and queues the buffer.
            self.parent_submit_input_buffer(is_discont, inbuf)
        }

        fn generate_output(&self) -> Result<gst_base::subclass::base_transform::GenerateOutputSuccess, gst::FlowError> {
            self.core.generate_output(self.take_queued_buffer())
        }
    };
}
pub(crate) use base_transform_via_core;
