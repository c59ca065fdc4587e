//! Implementation of the `nlmdenoise` element.
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
//! frame, carried through the engine as the frame's tag ([`FrameMeta`]).

use std::sync::{LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_video::prelude::*;
use gst_base::subclass::base_transform::GenerateOutputSuccess;
use gst_base::subclass::prelude::*;

use nlmdenoise::device::chunked::MAX_CHUNK_FRAMES;
use nlmdenoise::device::{BackendKind, BackendOptions, ChunkFrames, Devices, GpuKernel, Intermediate as EngineIntermediate};
use nlmdenoise::params::{BM3D_MAX_GROUP, BM3D_MAX_SEARCH_RADIUS, BM3D_MAX_SEED_RADIUS, BM3D_MAX_SEEDS, MAX_PATCH_RADIUS, MAX_SEARCH_RADIUS, MAX_SIGMA, MAX_STRENGTH, MAX_TEMPORAL_FUTURE, MAX_TEMPORAL_PAST, MAX_WREF};
use nlmdenoise::{ChromaMode as EngineChromaMode, Denoiser, FrameMut, FrameRef, Params, PixelFormat, PlaneSelection, Weighting as EngineWeighting};

use super::logbridge::{with_engine_logs, GstLogSubscriber};
use super::{Algorithm, Backend, Bm3dProfile, ChromaMode, Intermediate, Kernel, Planes, Weighting};

pub(crate) static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new("nlmdenoise", gst::DebugColorFlags::empty(), Some("Temporal non-local means video denoiser"))
});

/// Largest frame side the engine accepts.
const MAX_SIDE: i32 = 1 << 16;
/// Upper bound of the `pipeline-depth` property.
pub const MAX_PIPELINE_DEPTH: u32 = 4;
/// Upper bound of the `threads` property.
pub const MAX_THREADS: u32 = 1024;
/// `sigma` value meaning "not set" (no noise-variance subtraction).
pub const SIGMA_UNSET: f32 = -1.0;

/// The GStreamer format of an engine format (every engine format has one).
pub fn format_to_gst(format: PixelFormat) -> gst_video::VideoFormat {
    gst_video::VideoFormat::from_string(format.name())
}

/// The engine format of a GStreamer format, if the engine supports it.
pub fn gst_to_format(format: gst_video::VideoFormat) -> Option<PixelFormat> {
    PixelFormat::ALL.into_iter().find(|f| format_to_gst(*f) == format && format != gst_video::VideoFormat::Unknown)
}

/// Sets `options.device_id` / `options.devices` from a `device-id` value: one ordinal ("0"), a
/// comma list ("0,1") or "all".
pub fn apply_devices(options: &mut BackendOptions, text: &str) -> Result<(), String> {
    let devices: Devices = text.parse().map_err(|e: nlmdenoise::Error| e.to_string())?;
    match devices {
        Devices::List(v) if v.len() == 1 => {
            options.device_id = v[0];
            options.devices = Devices::Default;
        }
        Devices::List(v) => {
            options.device_id = v[0];
            options.devices = Devices::List(v);
        }
        other => options.devices = other,
    }
    Ok(())
}

/// The `device-id` value of `options`.
pub fn devices_to_string(options: &BackendOptions) -> String {
    match &options.devices {
        Devices::Default => options.device_id.to_string(),
        other => other.to_string(),
    }
}

/// Locks a mutex even if a previous holder panicked: the data is plain settings and engine state,
/// and a panic must never turn into a second one here.
/// A `bm3d-*` integer property: -1 = the profile's value.
fn profile_value(value: &glib::Value) -> Option<u32> {
    let v: i32 = value.get().unwrap_or(-1);
    (v >= 0).then_some(v as u32)
}

/// A `bm3d-*` float property: negative = the profile's value.
fn profile_float(value: &glib::Value) -> Option<f32> {
    let v: f32 = value.get().unwrap_or(-1.0);
    (v >= 0.0).then_some(v)
}

fn profile_property(v: Option<u32>) -> glib::Value {
    v.map(|v| v as i32).unwrap_or(-1).to_value()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone)]
struct Settings {
    params: Params,
    options: BackendOptions,
    /// Bumped on every change of `params`; the streaming thread applies changes between frames.
    generation: u64,
    /// The strengths were set explicitly; otherwise setting `sigma` also sets them
    /// (Params::with_noise_sigma), and without `sigma` the noise level is estimated.
    strength_set: bool,
    /// A `device-id` value that names no device list, with the reason: the element refuses to
    /// start until it is replaced (a typo must not silently run on device 0).
    bad_device_id: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        // Neither sigma nor a strength set: the noise level is estimated (sigma = auto).
        Settings { params: Params { sigma_auto: true, ..Params::default() }, options: BackendOptions::default(), generation: 0, strength_set: false, bad_device_id: None }
    }
}

impl Settings {
    /// Re-derives what follows from the others after any change: `sigma` -1 (unset) means auto
    /// unless a strength was set; a set `sigma` without a set strength gives the strengths that
    /// suit it and the current window (which may just have changed).
    fn update_auto(&mut self) {
        self.params.sigma_auto = self.params.sigma.is_none() && !self.strength_set;
        self.params.strength_fixed = self.strength_set;
        if let (Some(sigma), false) = (self.params.sigma, self.strength_set) {
            self.params = self.params.with_noise_sigma(sigma);
        }
    }
}

/// What an output buffer inherits from its input frame.
#[derive(Debug, Clone, Copy)]
struct FrameMeta {
    pts: Option<gst::ClockTime>,
    dts: Option<gst::ClockTime>,
    duration: Option<gst::ClockTime>,
    offset: u64,
    offset_end: u64,
    flags: gst::BufferFlags,
}

impl FrameMeta {
    fn of(buf: &gst::BufferRef) -> Self {
        FrameMeta {
            pts: buf.pts(),
            dts: buf.dts(),
            duration: buf.duration(),
            offset: buf.offset(),
            offset_end: buf.offset_end(),
            flags: buf.flags() - gst::BufferFlags::TAG_MEMORY,
        }
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

struct State {
    info: gst_video::VideoInfo,
    engine_info: nlmdenoise::VideoInfo,
    denoiser: Denoiser<FrameMeta>,
    /// `Settings::generation` the denoiser's parameters correspond to.
    generation: u64,
    /// Duration of the last input buffer (latency for variable-framerate streams).
    last_duration: Option<gst::ClockTime>,
    /// Stream time of the last noise-estimate message (at most one a second).
    last_noise_message: Option<gst::ClockTime>,
}

#[derive(Default)]
pub struct NlmDenoise {
    settings: Mutex<Settings>,
    state: Mutex<Option<State>>,
    /// The caps and settings generation whose engine creation failed and was reported: base
    /// transform retries set_caps, and the user should see the error once.
    refused: Mutex<Option<(gst::Caps, u64)>>,
    /// Late-frame reports from downstream (QoS), for the "cannot keep up" warning.
    lateness: Mutex<Lateness>,
    dispatch: OnceLock<tracing::Dispatch>,
}

/// Seconds of stream time over which late frames are counted.
const LATE_WINDOW_S: u64 = 5;
/// Late-frame reports in one window that make the warning (about one frame in five at 30 fps).
const LATE_REPORTS: u32 = 30;

/// QoS reports from downstream that frames came late (each late frame is one the QoS machinery
/// then drops upstream of the transform): counted per window of stream time; a window with
/// [`LATE_REPORTS`] or more posts one warning per stream.
#[derive(Default)]
struct Lateness {
    window_start: Option<gst::ClockTime>,
    late: u32,
    warned: bool,
}

impl NlmDenoise {
    /// A downstream report that the frame at `ts` came late; warns once per stream when the
    /// reports persist (a live pipeline then loses frames to QoS).
    fn count_late_frame(&self, ts: gst::ClockTime) {
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
            gst::element_imp_warning!(
                self,
                gst::CoreError::Clock,
                ("The denoiser cannot keep up: {LATE_REPORTS} or more frames came late within {LATE_WINDOW_S} s and were dropped (QoS) on {backend}"),
                ["Use backend=cuda, a smaller search-radius or temporal window, algorithm=nlm, or a lower resolution or frame rate (docs/tuning.md)"]
            );
        }
    }
}

fn engine_error(imp: &NlmDenoise, what: &str, err: &nlmdenoise::Error) -> gst::FlowError {
    use nlmdenoise::Error as E;
    match err {
        E::InvalidFrame(_) => gst::element_imp_error!(imp, gst::StreamError::Format, ("{what}: {err}")),
        E::InvalidParameter(_) | E::Unsupported(_) => gst::element_imp_error!(imp, gst::LibraryError::Settings, ("{what}: {err}")),
        E::BackendUnavailable(_) => gst::element_imp_error!(imp, gst::LibraryError::Init, ("{what}: {err}")),
        E::Backend(_) | E::State(_) => gst::element_imp_error!(imp, gst::LibraryError::Failed, ("{what}: {err}")),
    }
    gst::FlowError::Error
}

fn engine_info_from_caps(caps: &gst::CapsRef) -> Result<(gst_video::VideoInfo, nlmdenoise::VideoInfo), String> {
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

impl NlmDenoise {
    fn dispatch(&self) -> Option<&tracing::Dispatch> {
        self.dispatch.get()
    }

    /// Delay the element adds: (`temporal-future` + the backend's pipeline depth) frames, a frame
    /// lasting 1/framerate, or the last buffer duration for variable-framerate streams (zero
    /// before the first buffer).
    fn added_latency(&self) -> gst::ClockTime {
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
        state.generation = generation;
        if params == *state.denoiser.params() {
            return Ok(false);
        }
        let before = state.denoiser.latency_frames();
        match with_engine_logs(self.dispatch(), || state.denoiser.set_params(params)) {
            Ok(()) => {
                gst::debug!(CAT, imp = self, "parameters changed to {params:?}");
                Ok(state.denoiser.latency_frames() != before)
            }
            Err(nlmdenoise::Error::InvalidParameter(msg)) | Err(nlmdenoise::Error::Unsupported(msg)) => {
                // The engine keeps the previous parameters.
                gst::element_imp_warning!(self, gst::LibraryError::Settings, ("Ignoring the new parameters: {msg}"));
                Ok(false)
            }
            Err(e) => Err(engine_error(self, "Changing parameters failed", &e)),
        }
    }

    /// Pushes one input frame into the engine; true where applying pending property changes
    /// changed the element's latency (see `apply_settings`).
    fn process_input(&self, state: &mut State, inbuf: &gst::Buffer) -> Result<bool, gst::FlowError> {
        let latency_changed = self.apply_settings(state)?;
        if inbuf.duration().is_some() {
            state.last_duration = inbuf.duration();
        }
        let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(inbuf.as_ref(), &state.info).map_err(|_| {
            gst::element_imp_error!(self, gst::StreamError::Format, ("Failed to map the input buffer as {:?}", state.info.format()));
            gst::FlowError::Error
        })?;
        let input = frame_ref(state.engine_info, &frame).map_err(|msg| {
            gst::element_imp_error!(self, gst::StreamError::Format, ("Bad input frame: {msg}"));
            gst::FlowError::Error
        })?;
        let meta = FrameMeta::of(inbuf);
        let denoiser = &mut state.denoiser;
        with_engine_logs(self.dispatch(), || denoiser.push(&input, meta)).map_err(|e| engine_error(self, "Denoising failed", &e))?;
        Ok(latency_changed)
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
        if let Some(pool) = self.obj().buffer_pool() {
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
                        gst::debug!(CAT, imp = self, "pool buffer does not fit the caps; allocating");
                    }
                    Err(gst::FlowError::Flushing) => return Err(gst::FlowError::Flushing),
                    Err(e) => gst::debug!(CAT, imp = self, "pool acquire failed ({e:?}); allocating"),
                }
            }
        }
        gst::Buffer::with_size(info.size()).map_err(|_| {
            gst::element_imp_error!(self, gst::ResourceError::NoSpaceLeft, ("Cannot allocate a {} byte output buffer", info.size()));
            gst::FlowError::Error
        })
    }

    /// Pops the oldest ready output into a new buffer; `None` when nothing is ready.
    ///
    /// The buffer is allocated without the state lock held: acquiring from a downstream pool can
    /// block until the sink releases a buffer, and the sink may first need an answer to a latency
    /// query, which takes the state lock.
    fn pop_output(&self) -> Result<Option<gst::Buffer>, gst::FlowError> {
        let info = match lock(&self.state).as_ref() {
            Some(state) if state.denoiser.ready() > 0 => state.info.clone(),
            _ => return Ok(None),
        };
        let mut outbuf = self.allocate_output(&info)?;
        let mut guard = lock(&self.state);
        let Some(state) = guard.as_mut() else { return Ok(None) };
        if state.info != info || state.denoiser.ready() == 0 {
            return Ok(None);
        }
        let buf = outbuf.make_mut();
        let meta = {
            let mut frame = gst_video::VideoFrameRef::from_buffer_ref_writable(&mut *buf, &state.info).map_err(|_| {
                gst::element_imp_error!(self, gst::CoreError::Failed, ("Failed to map the output buffer"));
                gst::FlowError::Error
            })?;
            let n = frame.n_planes() as usize;
            let mut strides = Vec::with_capacity(n);
            for (p, &s) in frame.plane_stride().iter().take(n).enumerate() {
                if s <= 0 {
                    gst::element_imp_error!(self, gst::CoreError::Negotiation, ("Output plane {p} has stride {s}"));
                    return Err(gst::FlowError::Error);
                }
                strides.push(s as usize);
            }
            let planes: Vec<&mut [u8]> = frame.planes_data_mut().into_iter().take(n).collect();
            let mut out = FrameMut::new(state.engine_info, planes, &strides).map_err(|e| engine_error(self, "Bad output buffer", &e))?;
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
    fn drain(&self, why: &str) -> Result<gst::FlowSuccess, gst::FlowError> {
        {
            let mut guard = lock(&self.state);
            let Some(state) = guard.as_mut() else { return Ok(gst::FlowSuccess::Ok) };
            if state.denoiser.queued() > 0 {
                gst::debug!(CAT, imp = self, "{why}: draining {} held frame(s)", state.denoiser.queued());
            }
            // Also when nothing is held: the next frame starts a new temporal window.
            with_engine_logs(self.dispatch(), || state.denoiser.finish_stream()).map_err(|e| engine_error(self, "Draining failed", &e))?;
        }
        let srcpad = self.obj().src_pad().clone();
        while let Some(buf) = self.pop_output()? {
            srcpad.push(buf)?;
        }
        Ok(gst::FlowSuccess::Ok)
    }

    /// Drops every held frame (flush).
    fn reset(&self) {
        if let Some(state) = lock(&self.state).as_mut() {
            gst::debug!(CAT, imp = self, "flush: dropping {} held frame(s)", state.denoiser.queued());
            state.denoiser.reset();
        }
    }

    fn params_changed(&self, settings: &mut Settings) {
        settings.generation = settings.generation.wrapping_add(1);
    }
}

#[glib::object_subclass]
impl ObjectSubclass for NlmDenoise {
    const NAME: &'static str = "GstNlmDenoise";
    type Type = super::NlmDenoise;
    type ParentType = gst_base::BaseTransform;
}

impl ObjectImpl for NlmDenoise {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let p = Params::default();
            let o = BackendOptions::default();
            vec![
                glib::ParamSpecEnum::builder_with_default("backend", Backend::Auto)
                    .nick("Backend")
                    .blurb("Compute backend: auto = CUDA when a usable GPU and NVRTC are present, else CPU; cuda = fail when unavailable")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("device-id")
                    .nick("CUDA devices")
                    .blurb("CUDA device ordinal (\"0\"), a comma list (\"0,1\") or \"all\"; with several devices chunks of frames go round-robin to one worker per device")
                    .default_value(Some("0"))
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("chunk-frames")
                    .nick("Chunk frames")
                    .blurb("Frames per batched launch (chunk along time): 1 = a frame at a time (no added latency), 0 = automatic from free device memory, N = N frames; chunks of N frames on D devices add (D+1)*N-1 frames of latency (D+1 chunks in flight). Several devices imply chunks (automatic when left at 1)")
                    .maximum(MAX_CHUNK_FRAMES as u32)
                    .default_value(1)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("threads")
                    .nick("CPU threads")
                    .blurb("Worker threads of the CPU backend (0 = all cores)")
                    .maximum(MAX_THREADS)
                    .default_value(o.threads as u32)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("algorithm", Algorithm::Nlm)
                    .nick("Algorithm")
                    .blurb("Denoising algorithm (changing it while playing finishes the held frames first); bm3d takes its noise level from sigma (or the estimate, sigma=-1)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("bm3d-profile", Bm3dProfile::Normal)
                    .nick("BM3D profile")
                    .blurb("BM3D settings chosen together (the bm3d-* properties below replace single values of it)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-steps")
                    .nick("BM3D steps")
                    .blurb("1: hard thresholding only; 2: then the Wiener step (with a temporal window, two steps read twice as many frames); -1: the profile's")
                    .minimum(-1)
                    .maximum(2)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-patch-size")
                    .nick("BM3D patch size")
                    .blurb("Side of the patches: 4 or 8; -1: the profile's")
                    .minimum(-1)
                    .maximum(8)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-search-radius")
                    .nick("BM3D search radius")
                    .blurb("Block matching searches offsets -r..r of the target frame; -1: the profile's")
                    .minimum(-1)
                    .maximum(BM3D_MAX_SEARCH_RADIUS as i32)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-block-step")
                    .nick("BM3D block step")
                    .blurb("Pixels between reference patches (1..patch size; smaller = better and slower); -1: the profile's")
                    .minimum(-1)
                    .maximum(8)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-group-size")
                    .nick("BM3D group size")
                    .blurb("Most patches per group, hard-thresholding step (power of two up to 32); -1: the profile's")
                    .minimum(-1)
                    .maximum(BM3D_MAX_GROUP as i32)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-wiener-group-size")
                    .nick("BM3D Wiener group size")
                    .blurb("Most patches per group, Wiener step (power of two up to 32); -1: the profile's")
                    .minimum(-1)
                    .maximum(BM3D_MAX_GROUP as i32)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-seeds")
                    .nick("BM3D seeds")
                    .blurb("Other frames of the window: patches around this many best matches of the neighbouring frame are searched (predictive search); -1: the profile's")
                    .minimum(-1)
                    .maximum(BM3D_MAX_SEEDS as i32)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecInt::builder("bm3d-seed-radius")
                    .nick("BM3D seed radius")
                    .blurb("Predictive search radius around each seed; -1: the profile's")
                    .minimum(-1)
                    .maximum(BM3D_MAX_SEED_RADIUS as i32)
                    .default_value(-1)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("bm3d-threshold")
                    .nick("BM3D grouping threshold")
                    .blurb("Hard-thresholding step: largest mean squared distance (8-bit units squared) of a grouped patch; -1: the profile's (2500)")
                    .minimum(-1.0)
                    .maximum(65025.0)
                    .default_value(-1.0)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("bm3d-wiener-threshold")
                    .nick("BM3D Wiener grouping threshold")
                    .blurb("Wiener step: largest mean squared distance on the basic estimate; -1: the profile's (400)")
                    .minimum(-1.0)
                    .maximum(65025.0)
                    .default_value(-1.0)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("bm3d-lambda")
                    .nick("BM3D hard threshold")
                    .blurb("Hard threshold in units of sigma; -1: the profile's (2.7)")
                    .minimum(-1.0)
                    .maximum(20.0)
                    .default_value(-1.0)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("chroma-sigma")
                    .nick("Chroma noise sigma")
                    .blurb("BM3D: noise sigma of the chroma planes in 8-bit code values; -1 = sigma")
                    .minimum(SIGMA_UNSET)
                    .maximum(MAX_SIGMA)
                    .default_value(SIGMA_UNSET)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("strength")
                    .nick("Strength")
                    .blurb("Filtering strength h for luma, RGB and shared weights, in 8-bit code values (higher = smoother)")
                    .minimum(0.01)
                    .maximum(MAX_STRENGTH)
                    .default_value(p.strength)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("chroma-strength")
                    .nick("Chroma strength")
                    .blurb("Filtering strength h for chroma planes with independent weights, in 8-bit code values")
                    .minimum(0.01)
                    .maximum(MAX_STRENGTH)
                    .default_value(p.chroma_strength)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("search-radius")
                    .nick("Search radius")
                    .blurb("Radius of the search window: offsets -r..r in x and y")
                    .maximum(MAX_SEARCH_RADIUS)
                    .default_value(p.search_radius)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("patch-radius")
                    .nick("Patch radius")
                    .blurb("Radius of the compared patches: (2r+1)^2 samples")
                    .maximum(MAX_PATCH_RADIUS)
                    .default_value(p.patch_radius)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("temporal-past")
                    .nick("Past frames")
                    .blurb("Past frames searched (no added latency)")
                    .maximum(MAX_TEMPORAL_PAST)
                    .default_value(p.temporal_past)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("temporal-future")
                    .nick("Future frames")
                    .blurb("Future frames searched; adds that many frames of latency")
                    .maximum(MAX_TEMPORAL_FUTURE)
                    .default_value(p.temporal_future)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("weighting", Weighting::Welsch)
                    .nick("Weighting")
                    .blurb("Weight function of the patch distance")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("wref")
                    .nick("Centre weight")
                    .blurb("Weight of the centre sample as a multiple of the largest other weight")
                    .minimum(0.0)
                    .maximum(MAX_WREF)
                    .default_value(p.wref)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("chroma-mode", ChromaMode::Independent)
                    .nick("Chroma mode")
                    .blurb("How chroma weights are obtained (joint needs a 4:4:4 or RGB format)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("planes", Planes::All)
                    .nick("Planes")
                    .blurb("Planes to denoise; the others are copied (luma/chroma need a YUV format)")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecFloat::builder("sigma")
                    .nick("Noise sigma")
                    .blurb("Noise standard deviation in 8-bit code values. NLM: 2*sigma^2 is subtracted from patch distances, and unless strength/chroma-strength were set they follow it (per sigma: 0.90 / 0.97 spatial, 0.71 / 0.85 with past frames, 0.68 / 0.81 with future frames); BM3D: its thresholds. -1 (default) = auto: estimated from the stream (sigma-estimate) unless strength or chroma-strength is set")
                    .minimum(SIGMA_UNSET)
                    .maximum(MAX_SIGMA)
                    .default_value(p.sigma.unwrap_or(SIGMA_UNSET))
                    .mutable_playing()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("kernel", Kernel::Auto)
                    .nick("CUDA kernel")
                    .blurb("GPU kernel: fused single pass or multi-pass (CUDA only)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("offsets-per-pass")
                    .nick("Offsets per pass")
                    .blurb("Search offsets per pass of the multi-pass kernel (CUDA only)")
                    .minimum(1)
                    .maximum(4)
                    .default_value(o.offsets_per_pass)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("intermediate", Intermediate::Unorm10)
                    .nick("Intermediate storage")
                    .blurb("Storage of the multi-pass kernel's distances and weights (CUDA only)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("pipeline-depth")
                    .nick("Pipeline depth")
                    .blurb("Frames in flight on the GPU (0 = synchronous); each adds one frame of latency. Ignored by the CPU backend")
                    .maximum(MAX_PIPELINE_DEPTH)
                    .default_value(o.pipeline_depth as u32)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecFloat::builder("sigma-estimate")
                    .nick("Estimated noise sigma")
                    .blurb("With sigma=-1 (auto): the noise sigma of luma (RGB: all planes) estimated from the stream, 8-bit code values; -1 before the first estimate or without auto")
                    .minimum(-1.0)
                    .maximum(MAX_SIGMA)
                    .default_value(-1.0)
                    .read_only()
                    .build(),
                glib::ParamSpecFloat::builder("chroma-sigma-estimate")
                    .nick("Estimated chroma noise sigma")
                    .blurb("With sigma=-1 (auto): the noise sigma of the chroma planes estimated from the stream, 8-bit code values; -1 when none")
                    .minimum(-1.0)
                    .maximum(MAX_SIGMA)
                    .default_value(-1.0)
                    .read_only()
                    .build(),
                glib::ParamSpecString::builder("backend-in-use")
                    .nick("Backend in use")
                    .blurb("The backend (and device, kernel) the running stream denoises on; empty before caps are negotiated")
                    .read_only()
                    .build(),
            ]
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let mut guard = lock(&self.settings);
        let s = &mut *guard;
        let old_future = s.params.latency_frames();
        // `value` has been validated against the pspec (type and range) by GObject.
        match pspec.name() {
            "backend" => {
                s.options.kind = match value.get::<Backend>().unwrap_or_default() {
                    Backend::Auto => BackendKind::Auto,
                    Backend::Cpu => BackendKind::Cpu,
                    Backend::Cuda => BackendKind::Cuda,
                }
            }
            "device-id" => {
                let text = value.get::<Option<String>>().ok().flatten().unwrap_or_else(|| "0".to_string());
                match apply_devices(&mut s.options, &text) {
                    Ok(()) => s.bad_device_id = None,
                    Err(e) => {
                        gst::error!(CAT, imp = self, "device-id: {e}");
                        s.bad_device_id = Some(format!("device-id '{text}': {e}"));
                        return;
                    }
                }
            }
            "chunk-frames" => {
                s.options.chunk_frames = match value.get::<u32>().unwrap_or(1) {
                    0 => ChunkFrames::Auto,
                    1 => ChunkFrames::Off,
                    n => ChunkFrames::Frames(n as usize),
                }
            }
            "threads" => s.options.threads = value.get::<u32>().unwrap_or(0) as usize,
            "kernel" => {
                s.options.gpu_kernel = match value.get::<Kernel>().unwrap_or_default() {
                    Kernel::Auto => GpuKernel::Auto,
                    Kernel::Fused => GpuKernel::Fused,
                    Kernel::Multipass => GpuKernel::Multipass,
                }
            }
            "offsets-per-pass" => s.options.offsets_per_pass = value.get::<u32>().unwrap_or(3),
            "intermediate" => {
                s.options.intermediate = match value.get::<Intermediate>().unwrap_or_default() {
                    Intermediate::F32 => EngineIntermediate::F32,
                    Intermediate::F16 => EngineIntermediate::F16,
                    Intermediate::Unorm10 => EngineIntermediate::Unorm10,
                }
            }
            "pipeline-depth" => s.options.pipeline_depth = value.get::<u32>().unwrap_or(0) as usize,
            name => {
                let p = &mut s.params;
                match name {
                    "algorithm" => p.algorithm = value.get::<Algorithm>().unwrap_or_default().to_engine(),
                    "bm3d-profile" => p.bm3d.profile = value.get::<Bm3dProfile>().unwrap_or_default().to_engine(),
                    "bm3d-steps" => p.bm3d.steps = profile_value(value),
                    "bm3d-patch-size" => p.bm3d.patch_size = profile_value(value),
                    "bm3d-search-radius" => p.bm3d.search_radius = profile_value(value),
                    "bm3d-block-step" => p.bm3d.block_step = profile_value(value),
                    "bm3d-group-size" => p.bm3d.group_size = profile_value(value),
                    "bm3d-wiener-group-size" => p.bm3d.wiener_group_size = profile_value(value),
                    "bm3d-seeds" => p.bm3d.seeds = profile_value(value),
                    "bm3d-seed-radius" => p.bm3d.seed_radius = profile_value(value),
                    "bm3d-threshold" => p.bm3d.threshold = profile_float(value),
                    "bm3d-wiener-threshold" => p.bm3d.wiener_threshold = profile_float(value),
                    "bm3d-lambda" => p.bm3d.lambda = profile_float(value),
                    "chroma-sigma" => {
                        let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                        p.bm3d.chroma_sigma = if v < 0.0 { None } else { Some(v) };
                    }
                    "strength" => {
                        p.strength = value.get().unwrap_or(p.strength);
                        s.strength_set = true;
                    }
                    "chroma-strength" => {
                        p.chroma_strength = value.get().unwrap_or(p.chroma_strength);
                        s.strength_set = true;
                    }
                    "search-radius" => p.search_radius = value.get().unwrap_or(p.search_radius),
                    "patch-radius" => p.patch_radius = value.get().unwrap_or(p.patch_radius),
                    "temporal-past" => p.temporal_past = value.get().unwrap_or(p.temporal_past),
                    "temporal-future" => p.temporal_future = value.get().unwrap_or(p.temporal_future),
                    "wref" => p.wref = value.get().unwrap_or(p.wref),
                    "weighting" => {
                        p.weighting = match value.get::<Weighting>().unwrap_or_default() {
                            Weighting::Welsch => EngineWeighting::Welsch,
                            Weighting::Bisquare => EngineWeighting::Bisquare,
                        }
                    }
                    "chroma-mode" => {
                        p.chroma_mode = match value.get::<ChromaMode>().unwrap_or_default() {
                            ChromaMode::Independent => EngineChromaMode::Independent,
                            ChromaMode::LumaGuided => EngineChromaMode::LumaGuided,
                            ChromaMode::Joint => EngineChromaMode::Joint,
                        }
                    }
                    "planes" => {
                        p.planes = match value.get::<Planes>().unwrap_or_default() {
                            Planes::All => PlaneSelection::All,
                            Planes::Luma => PlaneSelection::Luma,
                            Planes::Chroma => PlaneSelection::Chroma,
                        }
                    }
                    "sigma" => {
                        let v: f32 = value.get().unwrap_or(SIGMA_UNSET);
                        p.sigma = if v < 0.0 { None } else { Some(v) };
                    }
                    other => {
                        gst::warning!(CAT, imp = self, "unknown property {other}");
                        return;
                    }
                }
                s.update_auto();
                self.params_changed(s);
            }
        }
        gst::debug!(CAT, imp = self, "{} set", pspec.name());
        let latency_changed = s.params.latency_frames() != old_future;
        drop(guard);
        if latency_changed {
            // Let the pipeline query the new latency.
            let obj = self.obj();
            let _ = obj.post_message(gst::message::Latency::builder().src(&*obj).build());
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        if matches!(pspec.name(), "sigma-estimate" | "chroma-sigma-estimate") {
            let e = lock(&self.state).as_ref().and_then(|st| st.denoiser.noise_estimate());
            let v = match (pspec.name(), e) {
                ("sigma-estimate", Some(e)) => e.luma,
                (_, Some(e)) => e.chroma.unwrap_or(-1.0),
                _ => -1.0,
            };
            return v.to_value();
        }
        if pspec.name() == "backend-in-use" {
            return lock(&self.state).as_ref().map(|st| st.denoiser.backend_description()).to_value();
        }
        let s = lock(&self.settings);
        let p = &s.params;
        let o = &s.options;
        match pspec.name() {
            "backend" => match o.kind {
                BackendKind::Cpu => Backend::Cpu,
                BackendKind::Cuda => Backend::Cuda,
                BackendKind::Auto | BackendKind::Reference => Backend::Auto,
            }
            .to_value(),
            "device-id" => devices_to_string(o).to_value(),
            "chunk-frames" => match o.chunk_frames {
                ChunkFrames::Auto => 0u32,
                ChunkFrames::Off => 1,
                ChunkFrames::Frames(n) => n as u32,
            }
            .to_value(),
            "threads" => (o.threads as u32).to_value(),
            "kernel" => match o.gpu_kernel {
                GpuKernel::Auto => Kernel::Auto,
                GpuKernel::Fused => Kernel::Fused,
                GpuKernel::Multipass => Kernel::Multipass,
            }
            .to_value(),
            "offsets-per-pass" => o.offsets_per_pass.to_value(),
            "intermediate" => match o.intermediate {
                EngineIntermediate::F32 => Intermediate::F32,
                EngineIntermediate::F16 => Intermediate::F16,
                EngineIntermediate::Unorm10 => Intermediate::Unorm10,
            }
            .to_value(),
            "pipeline-depth" => (o.pipeline_depth as u32).to_value(),
            "algorithm" => Algorithm::from_engine(p.algorithm).to_value(),
            "bm3d-profile" => Bm3dProfile::from_engine(p.bm3d.profile).to_value(),
            "bm3d-steps" => profile_property(p.bm3d.steps),
            "bm3d-patch-size" => profile_property(p.bm3d.patch_size),
            "bm3d-search-radius" => profile_property(p.bm3d.search_radius),
            "bm3d-block-step" => profile_property(p.bm3d.block_step),
            "bm3d-group-size" => profile_property(p.bm3d.group_size),
            "bm3d-wiener-group-size" => profile_property(p.bm3d.wiener_group_size),
            "bm3d-seeds" => profile_property(p.bm3d.seeds),
            "bm3d-seed-radius" => profile_property(p.bm3d.seed_radius),
            "bm3d-threshold" => p.bm3d.threshold.unwrap_or(-1.0).to_value(),
            "bm3d-wiener-threshold" => p.bm3d.wiener_threshold.unwrap_or(-1.0).to_value(),
            "bm3d-lambda" => p.bm3d.lambda.unwrap_or(-1.0).to_value(),
            "chroma-sigma" => p.bm3d.chroma_sigma.unwrap_or(SIGMA_UNSET).to_value(),
            "strength" => p.strength.to_value(),
            "chroma-strength" => p.chroma_strength.to_value(),
            "search-radius" => p.search_radius.to_value(),
            "patch-radius" => p.patch_radius.to_value(),
            "temporal-past" => p.temporal_past.to_value(),
            "temporal-future" => p.temporal_future.to_value(),
            "wref" => p.wref.to_value(),
            "weighting" => match p.weighting {
                EngineWeighting::Welsch => Weighting::Welsch,
                EngineWeighting::Bisquare => Weighting::Bisquare,
            }
            .to_value(),
            "chroma-mode" => match p.chroma_mode {
                EngineChromaMode::Independent => ChromaMode::Independent,
                EngineChromaMode::LumaGuided => ChromaMode::LumaGuided,
                EngineChromaMode::Joint => ChromaMode::Joint,
            }
            .to_value(),
            "planes" => match p.planes {
                PlaneSelection::All => Planes::All,
                PlaneSelection::Luma => Planes::Luma,
                PlaneSelection::Chroma => Planes::Chroma,
            }
            .to_value(),
            "sigma" => p.sigma.unwrap_or(SIGMA_UNSET).to_value(),
            // Every installed property is handled above; GObject never asks for another.
            _ => pspec.default_value().clone(),
        }
    }

    fn constructed(&self) {
        self.parent_constructed();
        let obj = self.obj();
        obj.set_qos(true);
        let _ = self.dispatch.set(tracing::Dispatch::new(GstLogSubscriber::new(obj.upcast_ref(), *CAT)));
    }
}

impl GstObjectImpl for NlmDenoise {}

impl ElementImpl for NlmDenoise {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static ELEMENT_METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "Temporal NLM denoiser",
                "Filter/Effect/Video",
                "Temporal non-local means video denoising on CUDA or CPU",
                "nlmdenoise developers",
            )
        });
        Some(&*ELEMENT_METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static PAD_TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            let caps = gst_video::VideoCapsBuilder::new()
                .format_list(PixelFormat::ALL.into_iter().map(format_to_gst))
                .width_range(1..=MAX_SIDE)
                .height_range(1..=MAX_SIDE)
                .build();
            let src = gst::PadTemplate::new("src", gst::PadDirection::Src, gst::PadPresence::Always, &caps).expect("valid src template");
            let sink = gst::PadTemplate::new("sink", gst::PadDirection::Sink, gst::PadPresence::Always, &caps).expect("valid sink template");
            vec![src, sink]
        });
        PAD_TEMPLATES.as_ref()
    }
}

impl BaseTransformImpl for NlmDenoise {
    const MODE: gst_base::subclass::BaseTransformMode = gst_base::subclass::BaseTransformMode::NeverInPlace;
    const PASSTHROUGH_ON_SAME_CAPS: bool = false;
    const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

    fn start(&self) -> Result<(), gst::ErrorMessage> {
        *lock(&self.state) = None;
        let s = lock(&self.settings).clone();
        // Ranges are enforced by the property specs; this catches anything they cannot express.
        s.params.validate().map_err(|e| gst::error_msg!(gst::LibraryError::Settings, ("Invalid parameters: {e}")))?;
        if let Some(bad) = &s.bad_device_id {
            return Err(gst::error_msg!(gst::LibraryError::Settings, ("Invalid {bad}")));
        }
        *lock(&self.refused) = None;
        *lock(&self.lateness) = Lateness::default();
        gst::debug!(CAT, imp = self, "starting with {:?}, backend {:?}", s.params, s.options);
        Ok(())
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        *lock(&self.state) = None;
        gst::debug!(CAT, imp = self, "stopped");
        Ok(())
    }

    fn unit_size(&self, caps: &gst::Caps) -> Option<usize> {
        gst_video::VideoInfo::from_caps(caps).ok().map(|info| info.size())
    }

    fn set_caps(&self, incaps: &gst::Caps, outcaps: &gst::Caps) -> Result<(), gst::LoggableError> {
        let (info, engine_info) = engine_info_from_caps(incaps).map_err(|msg| gst::loggable_error!(CAT, "{msg}"))?;
        if incaps != outcaps {
            let out = gst_video::VideoInfo::from_caps(outcaps).map_err(|_| gst::loggable_error!(CAT, "invalid output caps {outcaps}"))?;
            if out.format() != info.format() || out.width() != info.width() || out.height() != info.height() {
                return Err(gst::loggable_error!(CAT, "input caps {incaps} and output caps {outcaps} differ"));
            }
        }
        {
            let mut guard = lock(&self.state);
            if let Some(state) = guard.as_mut() {
                if state.engine_info == engine_info {
                    gst::debug!(CAT, imp = self, "caps changed without a new frame layout: keeping the engine");
                    state.info = info;
                    return Ok(());
                }
                if state.denoiser.queued() > 0 {
                    gst::warning!(CAT, imp = self, "dropping {} frame(s) of the previous format", state.denoiser.queued());
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
                gst::element_imp_warning!(self, gst::LibraryError::Init, ("GPU backend failed ({e}); falling back to the CPU backend"));
                created = create(&BackendOptions { kind: BackendKind::Cpu, ..settings.options.clone() });
            }
        }
        let denoiser = match created {
            Ok(d) => d,
            Err(e) => {
                let key = (incaps.clone(), settings.generation);
                if lock(&self.refused).as_ref() != Some(&key) {
                    let _ = engine_error(self, &format!("Cannot denoise {}x{} {}", engine_info.width, engine_info.height, engine_info.format), &e);
                    *lock(&self.refused) = Some(key);
                }
                return Err(gst::loggable_error!(CAT, "engine creation failed: {e}"));
            }
        };
        gst::info!(
            CAT,
            imp = self,
            "denoising {}x{} {} on {} (latency {} frame(s))",
            engine_info.width,
            engine_info.height,
            engine_info.format,
            denoiser.backend_description(),
            denoiser.latency_frames()
        );
        let delayed = denoiser.latency_frames() > 0;
        let mut guard = lock(&self.state);
        *guard = Some(State { info, engine_info, denoiser, generation: settings.generation, last_duration: None, last_noise_message: None });
        drop(guard);
        if delayed {
            // A latency query answered before the caps were known reported no delay.
            let obj = self.obj();
            let _ = obj.post_message(gst::message::Latency::builder().src(&*obj).build());
        }
        Ok(())
    }

    fn query(&self, direction: gst::PadDirection, query: &mut gst::QueryRef) -> bool {
        let is_latency = matches!(query.view(), gst::QueryView::Latency(_));
        if direction != gst::PadDirection::Src || !is_latency {
            return BaseTransformImplExt::parent_query(self, direction, query);
        }
        if !BaseTransformImplExt::parent_query(self, direction, query) {
            return false;
        }
        let ours = self.added_latency();
        if let gst::QueryViewMut::Latency(q) = query.view_mut() {
            let (live, min, max) = q.result();
            gst::debug!(CAT, imp = self, "upstream latency min {min} max {}, adding {ours}", max.display());
            q.set(live, min.saturating_add(ours), max.map(|m| m.saturating_add(ours)));
        }
        true
    }

    fn src_event(&self, event: gst::Event) -> bool {
        if let gst::EventView::Qos(q) = event.view() {
            let (_, _, diff, timestamp) = q.get();
            if let (true, Some(ts)) = (diff > 0, timestamp) {
                self.count_late_frame(ts);
            }
        }
        self.parent_src_event(event)
    }

    fn sink_event(&self, event: gst::Event) -> bool {
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
                gst::debug!(CAT, imp = self, "pushing drained frames at {why}: {err:?}");
            }
        }
        self.parent_sink_event(event)
    }

    fn propose_allocation(&self, decide_query: Option<&gst::query::Allocation>, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        // Input frames are read through VideoMeta, so upstream may use any strides and offsets.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        if decide_query.is_none() {
            return self.parent_propose_allocation(decide_query, query);
        }
        Ok(())
    }

    fn decide_allocation(&self, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        let Some(caps) = query.get_owned().0 else {
            return Err(gst::loggable_error!(CAT, "allocation query without caps"));
        };
        let info = gst_video::VideoInfo::from_caps(&caps).map_err(|_| gst::loggable_error!(CAT, "invalid caps {caps}"))?;
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

        let (pool, min, max) = match offered {
            Some((pool, min, max)) if configure(&pool, min, max) => (pool, min, max),
            _ => {
                let pool = gst_video::VideoBufferPool::new().upcast::<gst::BufferPool>();
                if !configure(&pool, 0, 0) {
                    return Err(gst::loggable_error!(CAT, "cannot configure a buffer pool for {caps}"));
                }
                (pool, 0, 0)
            }
        };
        gst::debug!(CAT, imp = self, "output pool {:?}: size {size}, min {min}, max {max}, video meta {video_meta}", pool.name());
        if have_offer {
            query.set_nth_allocation_pool(0, Some(&pool), size, min, max);
        } else {
            query.add_allocation_pool(Some(&pool), size, min, max);
        }
        Ok(())
    }

    fn submit_input_buffer(&self, is_discont: bool, inbuf: gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
        // Only the buffer's own flag counts: the base class keeps `is_discont` set until it has
        // pushed an output, which with future frames is several inputs later.
        if inbuf.flags().contains(gst::BufferFlags::DISCONT) {
            // Held frames are finished with the frames they have and pushed before this one;
            // this frame starts a new temporal window.
            self.drain("discont")?;
        }
        // The base class does renegotiation and QoS (dropping late frames) and queues the buffer.
        self.parent_submit_input_buffer(is_discont, inbuf)
    }

    fn generate_output(&self) -> Result<GenerateOutputSuccess, gst::FlowError> {
        if let Some(inbuf) = self.take_queued_buffer() {
            let mut guard = lock(&self.state);
            let Some(state) = guard.as_mut() else {
                gst::element_imp_error!(self, gst::CoreError::Negotiation, ("Received a buffer before caps"));
                return Err(gst::FlowError::NotNegotiated);
            };
            if inbuf.flags().contains(gst::BufferFlags::GAP) && inbuf.size() < state.info.size() {
                // A gap without picture content: nothing to denoise or to use as a reference.
                drop(guard);
                gst::debug!(CAT, imp = self, "gap buffer without a frame at {}: new temporal window", inbuf.pts().display());
                self.drain("gap")?;
                // Tell downstream (sinks, aggregators) that this time range has no data.
                if let Some(pts) = inbuf.pts() {
                    let _ = self.obj().src_pad().push_event(gst::event::Gap::builder(pts).duration(inbuf.duration()).build());
                }
                return Ok(GenerateOutputSuccess::NoOutput);
            }
            let latency_changed = self.process_input(state, &inbuf)?;
            let noise = self.noise_message(state, inbuf.pts());
            // Messages after the state lock: a synchronous bus handler may read properties.
            drop(guard);
            let obj = self.obj();
            if let Some(s) = noise {
                let _ = obj.post_message(gst::message::Element::builder(s).src(&*obj).build());
            }
            if latency_changed {
                gst::debug!(CAT, imp = self, "latency now {}", self.added_latency());
                let _ = obj.post_message(gst::message::Latency::builder().src(&*obj).build());
            }
        }
        match self.pop_output()? {
            Some(buf) => Ok(GenerateOutputSuccess::Buffer(buf)),
            None => Ok(GenerateOutputSuccess::NoOutput),
        }
    }
}
