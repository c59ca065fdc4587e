//! The engine: one stream of frames in, denoised frames out, in order.
//!
//! Data flow per frame: unpack the caller's frame into planes ([`crate::convert`]) -> store it in
//! the backend's ring at the slot the temporal window assigns ([`crate::window`]) -> launch every
//! job whose window is complete -> finish jobs in order into the frame's own planar copy (planes
//! that are not denoised stay as they came) -> pack into the caller's output frame. An algorithm
//! whose output frames are larger (super-resolution, `Plan::resizes`) finishes into a frame of
//! the output geometry instead, from a pool of its own.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::device::{self, Backend, BackendOptions};
use crate::convert;
use crate::error::{Error, Result};
use crate::frame::{FrameMut, FrameRef, VideoInfo};
use crate::noise::{NoiseEstimate, NoiseEstimator, FALLBACK_SIGMA};
use crate::params::Params;
use crate::plan::Plan;
use crate::planar::{Geometry, PlanarFrame};
use crate::window::TemporalWindow;

/// Caller-thread time in the engine's own per-frame host work, summed over the process
/// (nanoseconds: unpacking input frames, noise estimates, packing output frames; and frames
/// pushed): the benchmarks print it per frame beside the backends' counters
/// (`device::cuda::HOST_NS`), to show where each microsecond of a frame goes.
pub static ENGINE_NS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// Indices of [`ENGINE_NS`].
pub const UNPACK: usize = 0;
pub const ESTIMATE: usize = 1;
pub const PACK: usize = 2;
pub const PUSHED: usize = 3;

fn count_ns(i: usize, since: Instant) {
    ENGINE_NS[i].fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// A frame waiting for its output, with the caller's tag (timestamps, buffer flags, index...).
struct Pending<T> {
    tag: T,
    /// The input in planar form; becomes the output once its job finishes.
    frame: PlanarFrame,
}

/// The denoiser of one stream (the algorithm its parameters name). `T` is whatever the caller wants back with each output frame.
pub struct Denoiser<T> {
    info: VideoInfo,
    geometry: Geometry,
    /// Output frames: `info` and `geometry`, or scaled (super-resolution).
    out_info: VideoInfo,
    out_geometry: Geometry,
    /// The parameters as the caller set them.
    user_params: Params,
    /// The parameters frames are denoised with: `user_params` with the noise estimate applied
    /// (`Params::sigma_auto`).
    params: Params,
    estimator: NoiseEstimator,
    /// The newest smoothed estimate (kept across the estimator's resets, for reports).
    last_noise: Option<NoiseEstimate>,
    plan: Plan,
    /// Declared before `pending`, so dropped first: an asynchronous backend waits for its copies
    /// while the frames they read and write still exist (Backend::upload / launch).
    backend: Box<dyn Backend>,
    window: TemporalWindow,
    /// Frames pushed and not yet finished, oldest first.
    pending: VecDeque<Pending<T>>,
    /// How many of the oldest `pending` frames have been launched.
    launched: usize,
    ready: VecDeque<Pending<T>>,
    /// Tags of pushed frames that will never come out because a backend call failed, oldest
    /// first, until the caller takes them ([`Self::take_lost`]).
    lost: Vec<T>,
    /// Planar buffers of frames already handed out, reused for new frames.
    spare: Vec<PlanarFrame>,
    /// The same for output frames when they differ from input frames.
    spare_out: Vec<PlanarFrame>,
    /// Frames of planes the engine no longer uses (the output geometry changed, a caller gave
    /// back a frame of other planes), kept until the engine goes: the CUDA backend may have
    /// page-locked them (device::cuda::hostio), and a freed frame's address coming back for a
    /// new allocation while the backend lives would be taken for page-locked memory. Declared
    /// after `backend`, so freed after it.
    retired: Vec<PlanarFrame>,
}

impl<T> Denoiser<T> {
    /// A denoiser for frames of `info`, on the backend `options` select.
    pub fn new(info: VideoInfo, params: Params, options: &BackendOptions) -> Result<Self> {
        let backend = device::create(options)?;
        Self::with_backend(info, params, backend)
    }

    /// A denoiser on an existing backend.
    pub fn with_backend(info: VideoInfo, params: Params, mut backend: Box<dyn Backend>) -> Result<Self> {
        let info = VideoInfo::new(info.format, info.width, info.height)?;
        let geometry = Geometry::from_video_info(&info);
        params.validate()?;
        let user_params = params;
        let params = params.with_estimate(FALLBACK_SIGMA, None);
        let plan = Plan::new(&geometry, &params)?;
        let window = configure_backend(backend.as_mut(), &geometry, &plan, &params)?;
        tracing::debug!("denoiser for {}x{} {} on {}", info.width, info.height, info.format, backend.describe());
        let (out_info, out_geometry) = output_of(&info, &geometry, &plan)?;
        Ok(Denoiser {
            info,
            geometry,
            out_info,
            out_geometry,
            user_params,
            params,
            estimator: NoiseEstimator::new(),
            last_noise: None,
            plan,
            backend,
            window,
            pending: VecDeque::new(),
            launched: 0,
            ready: VecDeque::new(),
            lost: Vec::new(),
            spare: Vec::new(),
            spare_out: Vec::new(),
            retired: Vec::new(),
        })
    }

    /// The input frames' format and size.
    pub fn info(&self) -> VideoInfo {
        self.info
    }

    /// The output frames' format and size: the input's, or scaled (super-resolution).
    pub fn output_info(&self) -> VideoInfo {
        self.out_info
    }

    /// The output frames' format and size `params` would give (super-resolution: scaled), so
    /// that a caller can tell a change of parameters that needs a new output format from one
    /// [`Self::set_params`] applies in place.
    pub fn output_info_for(&self, params: &Params) -> Result<VideoInfo> {
        let plan = Plan::new(&self.geometry, &params.with_estimate(FALLBACK_SIGMA, None))?;
        Ok(output_of(&self.info, &self.geometry, &plan)?.0)
    }

    /// The parameters frames are denoised with now (with `sigma_auto`: the estimate applied).
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The parameters as the caller set them.
    pub fn user_params(&self) -> &Params {
        &self.user_params
    }

    /// The newest smoothed noise estimate of the stream (`sigma_auto` only; None before the first
    /// frame that could be estimated). It stays after the end of the stream.
    pub fn noise_estimate(&self) -> Option<NoiseEstimate> {
        self.estimator.current().or(self.last_noise)
    }

    fn apply_noise_update(&mut self, update: Option<(Params, Plan)>) {
        if let Some((p, plan)) = update {
            self.params = p;
            self.plan = plan;
            self.last_noise = self.estimator.current();
        }
    }

    pub fn backend_description(&self) -> String {
        self.backend.describe()
    }

    /// True when frames are computed on a GPU (a backend that reports device memory).
    pub fn on_gpu(&self) -> bool {
        self.backend.device_memory().is_some()
    }

    /// Frames between pushing a frame and being able to pop it: the future frames a job reads
    /// (`Params::frames_needed`) plus the backend's pipeline depth.
    pub fn latency_frames(&self) -> usize {
        self.params.latency_frames() as usize + self.backend.pipeline_depth()
    }

    /// Frames pushed whose output has not been popped yet.
    pub fn queued(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    /// Outputs ready to pop.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Adds a frame. Outputs that became ready are available through [`Self::pop`].
    pub fn push(&mut self, frame: &FrameRef<'_>, tag: T) -> Result<()> {
        if frame.info != self.info {
            return Err(Error::InvalidFrame(format!(
                "frame is {}x{} {} but the stream is {}x{} {}; reconfigure first",
                frame.info.width, frame.info.height, frame.info.format, self.info.width, self.info.height, self.info.format
            )));
        }
        let planar = self.spare.pop().unwrap_or_else(|| PlanarFrame::zeroed(&self.geometry));
        self.push_filled(planar, tag, Some(frame))
    }

    /// Adds a frame that is already in the engine's planar form (one this engine handed out, e.g.
    /// through [`Self::pop_planar`], and the caller filled with the next input), without a copy.
    pub fn push_planar(&mut self, frame: PlanarFrame, tag: T) -> Result<()> {
        if !frame.matches(&self.geometry) {
            self.retired.push(frame);
            return Err(Error::InvalidFrame("planar frame does not match the stream's planes".into()));
        }
        self.push_filled(frame, tag, None)
    }

    /// A spare planar frame of the input's planes (one popped and recycled, or a new one), for a
    /// caller that fills it and gives it back with [`Self::push_planar`].
    pub fn take_spare(&mut self) -> PlanarFrame {
        self.spare.pop().unwrap_or_else(|| PlanarFrame::zeroed(&self.geometry))
    }

    /// A spare planar frame of the input's planes if the engine holds one (a caller lending
    /// frames gives these back to its own store: with output frames of other planes,
    /// super-resolution, finished inputs become spare here).
    pub fn spare_frame(&mut self) -> Option<PlanarFrame> {
        self.spare.pop()
    }

    /// Stores the input (`source`, unpacked into `planar`; without it `planar` holds the input),
    /// estimates the noise, uploads and launches what became ready.
    fn push_filled(&mut self, mut planar: PlanarFrame, tag: T, source: Option<&FrameRef<'_>>) -> Result<()> {
        let auto = self.user_params.sigma_auto;
        ENGINE_NS[PUSHED].fetch_add(1, Ordering::Relaxed);
        let uploaded = if self.backend.input_frame().is_some() {
            // Straight into the backend's own frame (chunked execution: no copy from the
            // caller); `planar` only receives the output (Backend::upload_filled).
            let own = self.backend.input_frame().expect("checked");
            let t = Instant::now();
            let filled = match source {
                Some(frame) => convert::unpack(frame, own),
                None => {
                    for (to, from) in own.planes.iter_mut().zip(&planar.planes) {
                        to.samples.as_bytes_mut().copy_from_slice(from.samples.as_bytes());
                    }
                    Ok(())
                }
            };
            if let Err(e) = filled {
                self.spare.push(planar);
                return Err(e);
            }
            count_ns(UNPACK, t);
            let t = Instant::now();
            let update = if auto { noise_update(&mut self.estimator, &self.user_params, &self.geometry, own) } else { Ok(None) };
            count_ns(ESTIMATE, t);
            match update {
                Ok(u) => self.apply_noise_update(u),
                Err(e) => {
                    self.spare.push(planar);
                    return Err(e);
                }
            }
            let slot = self.window.push();
            self.backend.upload_filled(slot, &planar)
        } else {
            if let Some(frame) = source {
                let t = Instant::now();
                if let Err(e) = convert::unpack(frame, &mut planar) {
                    self.spare.push(planar);
                    return Err(e);
                }
                count_ns(UNPACK, t);
            }
            let t = Instant::now();
            let update = if auto { noise_update(&mut self.estimator, &self.user_params, &self.geometry, &planar) } else { Ok(None) };
            count_ns(ESTIMATE, t);
            match update {
                Ok(u) => self.apply_noise_update(u),
                Err(e) => {
                    self.spare.push(planar);
                    return Err(e);
                }
            }
            let slot = self.window.push();
            self.backend.upload(slot, &planar)
        };
        if let Err(e) = uploaded {
            // The window counted a frame the ring does not hold: start over from the next frame.
            self.spare.push(planar);
            self.recover_from_backend_error();
            self.lost.push(tag);
            return Err(e);
        }
        self.pending.push_back(Pending { tag, frame: planar });
        let r = self.run_ready_jobs();
        if r.is_err() {
            self.recover_from_backend_error();
        }
        r
    }

    /// After a backend error the window, the pending frames and the backend's queue of launched
    /// jobs no longer agree: forget all three (frames already ready stay), so that the next frame
    /// starts a new window instead of being paired with a stale job.
    fn recover_from_backend_error(&mut self) {
        let discarded = self.discard_pending();
        self.lost.extend(discarded);
        self.reconfigure_backend();
    }

    /// A new window on a backend configured again (nothing pending).
    fn reconfigure_backend(&mut self) {
        self.window.reset();
        match configure_backend(self.backend.as_mut(), &self.geometry, &self.plan, &self.params) {
            Ok(w) => self.window = w,
            Err(e) => tracing::warn!("reconfiguring the backend after an error failed: {e}"),
        }
    }

    /// Launches every job whose window is complete and finishes jobs beyond the pipeline depth.
    fn run_ready_jobs(&mut self) -> Result<()> {
        let depth = self.backend.pipeline_depth();
        while let Some(job) = self.window.next_job() {
            self.backend.launch(&job, &self.plan)?;
            self.launched += 1;
            while self.launched > depth {
                self.finish_oldest()?;
            }
        }
        Ok(())
    }

    fn finish_oldest(&mut self) -> Result<()> {
        let mut p = self.pending.pop_front().ok_or_else(|| Error::State("no launched frame to finish".into()))?;
        self.launched -= 1;
        if self.plan.resizes() {
            // The input frame is done with (its upload preceded this job's launch); the output
            // goes into a frame of the output geometry.
            let mut out = self.spare_out.pop().unwrap_or_else(|| PlanarFrame::zeroed(&self.out_geometry));
            let r = self.backend.finish(&mut out);
            let input = std::mem::replace(&mut p.frame, out);
            self.spare.push(input);
            return match r {
                Ok(()) => {
                    self.ready.push_back(p);
                    Ok(())
                }
                Err(e) => {
                    self.spare_out.push(p.frame);
                    self.lost.push(p.tag);
                    Err(e)
                }
            };
        }
        match self.backend.finish(&mut p.frame) {
            Ok(()) => {
                self.ready.push_back(p);
                Ok(())
            }
            Err(e) => {
                // Its output is unknown: the frame is lost, and this error reports it.
                self.spare.push(p.frame);
                self.lost.push(p.tag);
                Err(e)
            }
        }
    }

    /// Writes the oldest ready output into `out` and returns its tag; `None` when nothing is ready.
    pub fn pop(&mut self, out: &mut FrameMut<'_>) -> Result<Option<T>> {
        if out.info != self.out_info {
            return Err(Error::InvalidFrame("output frame does not match the stream".into()));
        }
        let Some(p) = self.ready.pop_front() else { return Ok(None) };
        let t = Instant::now();
        let r = convert::pack(&p.frame, out);
        count_ns(PACK, t);
        self.recycle(p.frame);
        r.map(|_| Some(p.tag))
    }

    /// The oldest ready output in planar form, with its tag; give the frame back with
    /// [`Self::recycle`] to avoid an allocation.
    pub fn pop_planar(&mut self) -> Option<(T, PlanarFrame)> {
        self.ready.pop_front().map(|p| (p.tag, p.frame))
    }

    /// Gives back a frame handed out ([`Self::pop_planar`], [`Self::take_spare`]) for reuse; one
    /// of planes the engine no longer uses is kept, unused, until the engine goes.
    pub fn recycle(&mut self, frame: PlanarFrame) {
        if frame.matches(&self.geometry) {
            self.spare.push(frame);
        } else if frame.matches(&self.out_geometry) {
            self.spare_out.push(frame);
        } else {
            self.retired.push(frame);
        }
    }

    /// End of stream (or a discontinuity): computes every pending frame with the frames that
    /// exist, so that all of them become ready, then starts a new window (and, with
    /// `sigma_auto`, a new noise estimate).
    pub fn finish_stream(&mut self) -> Result<()> {
        self.estimator.reset();
        self.window.drain();
        let r = self.run_ready_jobs().and_then(|_| {
            while self.launched > 0 {
                self.finish_oldest()?;
            }
            Ok(())
        });
        self.window.reset();
        if r.is_err() {
            self.recover_from_backend_error();
        }
        r
    }

    /// Drops every pending and ready frame (flush, seek) and starts a new window (and noise
    /// estimate).
    pub fn reset(&mut self) {
        self.estimator.reset();
        while self.launched > 0 {
            // Completing in-flight work keeps an asynchronous backend's queue consistent.
            if self.finish_oldest().is_err() {
                self.recover_from_backend_error();
                break;
            }
        }
        if self.pending.is_empty() {
            self.window.reset();
        } else {
            // Frames no launched job has read: an asynchronous backend may still be copying from
            // them (Backend::upload), so it is configured again before they are reused.
            self.discard_pending();
            self.reconfigure_backend();
        }
        self.discard_pending();
        let ready: Vec<_> = self.ready.drain(..).collect();
        for p in ready {
            self.recycle(p.frame);
        }
        // A flush drops frames by definition; what a failure lost before it was reported then.
        self.lost.clear();
    }

    /// Forgets the pending frames; returns their tags, oldest first.
    fn discard_pending(&mut self) -> Vec<T> {
        self.launched = 0;
        let mut tags = Vec::with_capacity(self.pending.len());
        for p in std::mem::take(&mut self.pending) {
            self.spare.push(p.frame);
            tags.push(p.tag);
        }
        tags
    }

    /// The tags of frames lost to backend errors since the last call, in push order: each
    /// failing call's frames are reported by its error, and here by name. When a `push` fails,
    /// the frame it was given is always among them, the newest.
    pub fn take_lost(&mut self) -> Vec<T> {
        std::mem::take(&mut self.lost)
    }

    /// Moves every finished frame of `other` (same output geometry) behind this denoiser's own,
    /// so that they still come out, in order, from here: a caller replacing a failed backend
    /// with another keeps what the first one computed.
    pub fn adopt_ready(&mut self, other: &mut Denoiser<T>) -> Result<()> {
        if other.out_info != self.out_info {
            return Err(Error::InvalidFrame("adopting frames of another output format".into()));
        }
        self.ready.extend(other.ready.drain(..));
        Ok(())
    }

    /// Changes parameters. Strengths, wref, weighting and sigma apply from the next launched job;
    /// structural changes (radii, temporal window, chroma mode, planes) first finish the pending
    /// frames (they become ready) and then reconfigure the backend.
    pub fn set_params(&mut self, params: Params) -> Result<()> {
        params.validate()?;
        let user = params;
        let params = match self.estimator.current() {
            Some(e) => user.with_estimate(e.luma, e.chroma),
            None => user.with_estimate(FALLBACK_SIGMA, None),
        };
        let plan = Plan::new(&self.geometry, &params)?;
        if self.params.same_structure(&params) {
            self.user_params = user;
            self.params = params;
            self.plan = plan;
            return Ok(());
        }
        self.finish_stream()?;
        let window = match configure_backend(self.backend.as_mut(), &self.geometry, &plan, &params) {
            Ok(w) => w,
            Err(e) => {
                // Keep running with the previous parameters.
                self.window = configure_backend(self.backend.as_mut(), &self.geometry, &self.plan, &self.params)?;
                return Err(e);
            }
        };
        let (out_info, out_geometry) = output_of(&self.info, &self.geometry, &plan)?;
        self.window = window;
        self.user_params = user;
        self.params = params;
        self.plan = plan;
        if out_geometry != self.out_geometry {
            let old = std::mem::take(&mut self.spare_out);
            self.retired.extend(old);
        }
        self.out_info = out_info;
        self.out_geometry = out_geometry;
        Ok(())
    }
}

/// The output frames' format, size and planes under `plan`.
fn output_of(info: &VideoInfo, geometry: &Geometry, plan: &Plan) -> Result<(VideoInfo, Geometry)> {
    let out_geometry = plan.output_geometry(geometry);
    let out_info = match plan {
        Plan::NlmSr(p) => VideoInfo::new(info.format, info.width * p.scale, info.height * p.scale)?,
        _ => *info,
    };
    Ok((out_info, out_geometry))
}

/// Feeds the noise estimator with the frame just unpacked; when the estimate changed, the
/// parameters and plan to use from now on (only sigma and strengths change: no reconfiguration).
fn noise_update(estimator: &mut NoiseEstimator, user: &Params, geometry: &Geometry, frame: &PlanarFrame) -> Result<Option<(Params, Plan)>> {
    if !estimator.observe(frame, geometry) {
        return Ok(None);
    }
    let e = estimator.current().expect("just observed");
    let p = user.with_estimate(e.luma, e.chroma);
    Ok(Some((p, Plan::new(geometry, &p)?)))
}

/// Configures `backend` for a stream and returns the temporal window that goes with it. The
/// window's ring holds `past + 1 + future + pipeline_depth` slots (`Params::frames_needed`); a backend may
/// only know its pipeline depth once configured (chunked execution with an automatic chunk size
/// sizes chunks from the frame size), so when the depth changed the window is rebuilt and the
/// backend configured again with the final slot count.
fn configure_backend(backend: &mut dyn Backend, geometry: &Geometry, plan: &Plan, params: &Params) -> Result<TemporalWindow> {
    let (past, future) = params.frames_needed();
    backend.set_window(past, future);
    let window = TemporalWindow::new(past, future, backend.pipeline_depth());
    backend.configure(geometry, plan, window.slots())?;
    let depth = backend.pipeline_depth();
    let expected = TemporalWindow::new(past, future, depth);
    if expected.slots() == window.slots() {
        return Ok(window);
    }
    backend.configure(geometry, plan, expected.slots())?;
    if backend.pipeline_depth() != depth {
        return Err(Error::State("backend changed its pipeline depth on a second configure".into()));
    }
    Ok(expected)
}
