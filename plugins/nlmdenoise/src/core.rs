//! The element core both elements hold ([`Core`]): their settings and stream state, the binding
//! to the element (messages, logs, debug category), the stream's life (`start`, `set_caps` with
//! the engine's creation, `stop`), the latency it adds, and the base-transform calls forwarded
//! to it unchanged ([`base_transform_via_core`]). Each element's `imp.rs` holds a `Core`; what is
//! its own is its properties and caps.
//!
//! The core's other calls live by concept: the frame flow in [`crate::flow`], allocation in
//! [`crate::allocation`], QoS in [`crate::qos`], error reports and the CPU fallback in
//! [`crate::errors`].

use std::sync::{Mutex, OnceLock};

use gst::glib;
use gst::prelude::*;
use gst_base::prelude::*;

use nlmdenoise::device::BackendKind;
use nlmdenoise::BackendOptions;
use nlmdenoise::Denoiser;
use nlmdenoise::Params;

use crate::allocation::Downstream;
use crate::caps::engine_info_from_caps;
use crate::errors::engine_error;
use crate::lending::Lending;
use crate::logbridge::{with_engine_logs, GstLogSubscriber};
use crate::qos::Lateness;
use crate::settings::Settings;
use crate::state::{FrameMeta, MetaPolicy, State};
use crate::{lock, CAT};

/// What an element of the plugin holds besides its own code: settings (written by properties),
/// the stream's state (written by the streaming thread), and the binding to the element.
pub struct Core {
    pub settings: Mutex<Settings>,
    pub state: Mutex<Option<State>>,
    /// The caps and settings generation whose engine creation failed and was reported: base
    /// transform retries set_caps, and the user should see the error once.
    pub refused: Mutex<Option<(gst::Caps, u64)>>,
    /// Late-frame reports from downstream (QoS), for the "cannot keep up" warning.
    pub lateness: Mutex<Lateness>,
    /// What downstream answered to the last allocation query.
    pub(crate) downstream: Mutex<Downstream>,
    /// Messages built while the state lock was held, posted once it is released: a synchronous
    /// bus handler may read properties, which take that lock.
    deferred: Mutex<Vec<gst::Message>>,
    dispatch: OnceLock<tracing::Dispatch>,
    element: OnceLock<glib::WeakRef<gst_base::BaseTransform>>,
    /// The pipeline's CUDA context ([`crate::cuda`]), from READY to NULL.
    pub(crate) cuda: Mutex<Option<crate::cudamem::CudaContext>>,
    /// What the element is for (the words of its messages): a noun and a verb.
    pub what: &'static str,
    pub doing: &'static str,
    /// Which input metas the output frames carry.
    pub metas: MetaPolicy,
    /// The element's debug category (set by `attach`).
    cat: OnceLock<gst::DebugCategory>,
}

impl Core {
    /// A core for an element that `what` and `doing` describe ("denoiser", "denoising"), whose
    /// output frames carry the input metas `metas` keeps.
    pub fn new(what: &'static str, doing: &'static str, metas: MetaPolicy) -> Self {
        Core {
            what,
            doing,
            metas,
            settings: Default::default(),
            state: Default::default(),
            refused: Default::default(),
            lateness: Default::default(),
            downstream: Default::default(),
            cuda: Default::default(),
            deferred: Default::default(),
            dispatch: Default::default(),
            element: Default::default(),
            cat: Default::default(),
        }
    }

    /// The element's debug category: the core's messages are the element's.
    pub(crate) fn cat(&self) -> gst::DebugCategory {
        self.cat.get().copied().unwrap_or_else(|| *CAT)
    }

    /// Binds the core to its element (from the element's `constructed`): messages and logs go
    /// there, engine logs into `cat`. Turns QoS on, as `GstVideoFilter` does (the base class's
    /// default is off): late frames are then dropped before they cost a denoise.
    pub fn attach(&self, obj: &gst_base::BaseTransform, cat: gst::DebugCategory) {
        obj.set_qos(true);
        let _ = self.element.set(obj.downgrade());
        let _ = self.cat.set(cat);
        let _ = self.dispatch.set(tracing::Dispatch::new(GstLogSubscriber::new(obj.upcast_ref(), cat)));
    }

    /// The element (alive whenever one of its calls runs).
    pub fn element(&self) -> gst_base::BaseTransform {
        self.element.get().and_then(|w| w.upgrade()).expect("the core is attached to a live element")
    }

    pub(crate) fn dispatch(&self) -> Option<&tracing::Dispatch> {
        self.dispatch.get()
    }

    /// Delay the element adds: (`temporal-future` + the backend's pipeline depth) frames, a frame
    /// lasting 1/framerate, or the last buffer duration for variable-framerate streams (zero
    /// before the first buffer).
    pub fn added_latency(&self) -> gst::ClockTime {
        let future = lock(&self.settings).params.latency_frames() as u64;
        let state = lock(&self.state);
        let Some(state) = state.as_ref().filter(|s| !s.passthrough) else {
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

    pub(crate) fn defer(&self, message: gst::Message) {
        lock(&self.deferred).push(message);
    }

    /// Posts the deferred messages (the state lock must not be held).
    pub(crate) fn post_deferred(&self) {
        let messages = std::mem::take(&mut *lock(&self.deferred));
        let obj = self.element();
        for m in messages {
            let _ = obj.post_message(m);
        }
    }

    /// `start`: checks the settings and forgets any previous stream.
    pub fn start(&self) -> Result<(), gst::ErrorMessage> {
        *lock(&self.state) = None;
        let s = lock(&self.settings).clone();
        // Ranges are enforced by the property specs; this catches anything they cannot express.
        s.params.validate().map_err(|e| gst::error_msg!(gst::LibraryError::Settings, ("{}", sentence(&e.to_string()))))?;
        if let Some(bad) = &s.bad_device_id {
            return Err(gst::error_msg!(gst::LibraryError::Settings, ("Invalid {bad}")));
        }
        let obj = self.element();
        for note in unused_property_notes(obj.upcast_ref(), s.params.algorithm) {
            // Said, not refused: a warning message (gst-launch prints it), the stream runs. The
            // details name the kind, so that an application that says it itself can tell it.
            gst::warning!(self.cat(), obj = &obj, "{note}");
            let details = gst::Structure::new_empty(UNUSED_SETTING_WARNING);
            let _ = obj.post_message(gst::message::Warning::builder(gst::LibraryError::Settings, &sentence(&note)).src(&obj).details(details).build());
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
        // The parameters the running engine uses: a new engine for new caps keeps them where the
        // settings changed since are refused, as a change while playing does (flow.rs,
        // `apply_settings`), instead of ending the stream.
        let mut running = None;
        {
            let mut guard = lock(&self.state);
            if let Some(state) = guard.as_mut() {
                running = Some(*state.denoiser.user_params());
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
        let mut settings = lock(&self.settings).clone();
        let (cuda_in, cuda_out) = (crate::cudamem::caps_in_cuda(incaps), crate::cudamem::caps_in_cuda(outcaps));
        if (cuda_in || cuda_out) && !settings.options.chunked() {
            // Frames in CUDA memory: the engine computes in the pipeline's context.
            settings.options.cuda_context = self.engine_cuda_context();
        }
        let create = |options: &BackendOptions, params: Params| with_engine_logs(self.dispatch(), || Denoiser::new(engine_info, params, options));
        let mut params = settings.params;
        let mut created = create(&settings.options, params);
        if let (Err(nlmdenoise::Error::InvalidParameter(msg) | nlmdenoise::Error::Unsupported(msg)), Some(running)) = (&created, running) {
            if running != params {
                let text = format!("Ignoring the new parameters: {msg}");
                gst::warning!(self.cat(), obj = &obj, "{text}");
                self.defer(gst::message::Warning::builder(gst::LibraryError::Settings, &text).src(&obj).build());
                params = running;
                created = create(&settings.options, params);
            }
        }
        let gpu_error = created.as_ref().err().filter(|e| crate::errors::gpu_failed(e)).map(|e| e.to_string());
        if let Some(e) = gpu_error {
            if settings.options.kind == BackendKind::Auto {
                // `auto` already falls back when CUDA is absent; this covers a GPU that is present
                // but cannot take this stream (e.g. out of memory). Nothing was processed yet.
                gst::element_warning!(obj, gst::LibraryError::Init, ("GPU backend failed ({e}); falling back to the CPU backend"));
                created = create(&BackendOptions { kind: BackendKind::Cpu, ..settings.options.clone() }, params);
            }
        }
        let mut denoiser = match created {
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
        // Engine frames lent as buffers are system memory: not for output caps in CUDA memory (an
        // input in CUDA memory is copied on the GPU, or lent frames are not proposed upstream).
        let lending = (settings.zero_copy && !cuda_out).then(|| Lending::new(&mut denoiser, &info, &out_info));
        let fallback = fallback.map(|f| BackendOptions { cuda_context: None, ..f });
        *guard = Some(State {
            info,
            engine_info,
            out_info,
            denoiser,
            generation: settings.generation,
            last_duration: None,
            last_noise_message: None,
            fallback,
            lending,
            passthrough: false,
            cuda_in,
            cuda_out,
        });
        drop(guard);
        self.post_deferred();
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
            if self.core.answer_context_query(query) {
                return true;
            }
            if matches!(query.view(), gst::QueryView::Caps(_)) {
                let answered = BaseTransformImplExt::parent_query(self, direction, query);
                self.core.filter_caps_query(query);
                return answered;
            }
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

        fn accept_caps(&self, direction: gst::PadDirection, caps: &gst::Caps) -> bool {
            // CUDA memory only where it is available (crate::cuda); the base class checks the
            // templates, which list it everywhere.
            if crate::cudamem::caps_in_cuda(caps) && !crate::cudamem::available() {
                return false;
            }
            self.parent_accept_caps(direction, caps)
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
            self.core.input_submitted(&inbuf);
            // The base class does renegotiation and QoS (dropping late frames) and queues the buffer.
            self.parent_submit_input_buffer(is_discont, inbuf)
        }

        fn generate_output(&self) -> Result<gst_base::subclass::base_transform::GenerateOutputSuccess, gst::FlowError> {
            let inbuf = self.take_queued_buffer();
            if inbuf.is_some() {
                self.core.input_taken();
            }
            self.core.generate_output(inbuf)
        }
    };
}
pub(crate) use base_transform_via_core;

/// The element calls every element of the plugin forwards to its `core` for the pipeline's CUDA
/// context ([`crate::cuda`]): expand inside `impl ElementImpl for ...`.
macro_rules! element_via_core {
    () => {
        fn set_context(&self, context: &gst::Context) {
            self.core.set_cuda_context(context);
            self.parent_set_context(context)
        }

        fn change_state(&self, transition: gst::StateChange) -> Result<gst::StateChangeSuccess, gst::StateChangeError> {
            if transition == gst::StateChange::NullToReady {
                self.core.ensure_cuda_context();
            }
            let r = self.parent_change_state(transition);
            if transition == gst::StateChange::ReadyToNull {
                self.core.release_cuda_context();
            }
            r
        }
    };
}
pub(crate) use element_via_core;

/// `text` as a sentence of a GStreamer message: its first letter upper case.
fn sentence(text: &str) -> String {
    let mut c = text.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// Name of the details structure of the warning about a property the algorithm does not read.
pub const UNUSED_SETTING_WARNING: &str = "nlmdenoise-unused-setting";

/// A note for each property of `obj` off its default that `algorithm` does not read (values
/// compared as text: every property here is a number or an enum).
fn unused_property_notes(obj: &gst::Element, algorithm: nlmdenoise::Algorithm) -> Vec<String> {
    let text = |v: &glib::Value| v.transform::<String>().ok().and_then(|t| t.get::<Option<String>>().ok().flatten());
    crate::settings::ALGORITHM_PROPERTIES
        .iter()
        .filter_map(|&(name, used)| {
            let pspec = obj.find_property(name)?;
            let changed = text(&obj.property_value(name)) != text(pspec.default_value());
            changed.then(|| nlmdenoise::unused_setting_note(&format!("property {name}"), used, algorithm)).flatten()
        })
        .collect()
}
