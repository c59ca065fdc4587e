//! The engine: one stream of frames in, denoised frames out, in order.
//!
//! Data flow per frame: take a frame from the backend's pool and unpack the caller's frame into it
//! ([`crate::convert`]) -> move it into the backend's ring at the slot the temporal window assigns
//! ([`crate::window`]) -> launch every job whose window is complete -> finish jobs in order: the
//! backend moves each output frame back (planes that are not denoised as they came) -> pack it
//! into the caller's output frame, or hand it over as it is ([`Denoiser::pop_planar`]), and give
//! it back to the pool. Frames move by value ([`crate::device::frames`]): the engine never holds a
//! frame the backend may still be copying.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::backends::{self, BackendOptions};
use crate::convert;
use crate::device::{Backend, DeviceFrame, Frame, StreamSetup};
use crate::error::{Error, Result};
use crate::frame::{FrameMut, FrameRef, VideoInfo};
use crate::noise::{NoiseEstimate, NoiseEstimator, FALLBACK_SIGMA};
use crate::params::Params;
use crate::plan::Plan;
use crate::planar::{exchange_layout, Geometry, PlanarFrame};
use crate::scene::CutDetector;
use crate::window::TemporalWindow;

/// Caller-thread time in the engine's own per-frame host work, summed over the process
/// (nanoseconds: unpacking input frames, noise estimates, packing output frames, scene-cut tests;
/// and frames pushed): the benchmarks print it per frame beside the backends' counters
/// (`device::cuda::HOST_NS`), to show where each microsecond of a frame goes.
pub static ENGINE_NS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
/// Indices of [`ENGINE_NS`].
pub const UNPACK: usize = 0;
pub const ESTIMATE: usize = 1;
pub const PACK: usize = 2;
pub const PUSHED: usize = 3;
pub const SCENE: usize = 4;

fn count_ns(i: usize, since: Instant) {
    ENGINE_NS[i].fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// A frame pushed and not finished: the backend holds it; the engine keeps the caller's tag.
struct Pending<T> {
    tag: T,
    /// The caller's stored frame ([`Denoiser::push_planar`]) whose content was unpacked on the
    /// host into the frame the backend holds: the output is packed back into it when popped.
    target: Option<Frame>,
    /// The output goes into a device frame of the caller's ([`Denoiser::push_device`]).
    device_output: bool,
}

/// A finished frame, in the form the backend gives it (planar, or stored where the backend
/// converts layouts itself).
struct Finished<T> {
    tag: T,
    frame: Output,
    target: Option<Frame>,
}

/// A finished frame on the host, taken out of the ready queue.
struct HostOut<T> {
    tag: T,
    frame: Frame,
    target: Option<Frame>,
}

/// A finished frame: on the host, or written into the caller's device frame.
enum Output {
    Host(Frame),
    Device(DeviceFrame),
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
    noise: NoiseState,
    /// Scene cuts of the stream (`Params::scene_cut`).
    cuts: CutDetector,
    /// Scene cuts found since the engine was made.
    scene_cuts: u64,
    /// Frames pushed since the engine was made.
    pushed: u64,
    /// The newest smoothed estimate (kept across the estimator's resets, for reports).
    last_noise: Option<NoiseEstimate>,
    plan: Plan,
    backend: Box<dyn Backend>,
    window: TemporalWindow,
    /// Frames pushed and not yet finished, oldest first.
    pending: VecDeque<Pending<T>>,
    /// How many of the oldest `pending` frames have been launched.
    launched: usize,
    ready: VecDeque<Finished<T>>,
    /// Tags of pushed frames that will never come out because a backend call failed, oldest
    /// first, until the caller takes them ([`Self::take_lost`]).
    lost: Vec<T>,
    /// The frames callers exchange without copies (`push_planar`, `pop_planar`), input and
    /// output: planar frames, or stored frames for formats that interleave components
    /// (`planar::exchange_layout`).
    lent_in: Geometry,
    lent_out: Geometry,
    /// The backend takes stored frames and converts layouts itself (`Configured::stored`):
    /// submitted frames are `lent_in` frames, no host unpacking.
    stored_on_backend: bool,
    /// The backend computes on a device of its own (a GPU).
    on_device: bool,
    /// Jobs the backend may have in flight beyond the one being finished.
    depth: usize,
}

impl<T> Denoiser<T> {
    /// A denoiser for frames of `info`, on the backend `options` select.
    pub fn new(info: VideoInfo, params: Params, options: &BackendOptions) -> Result<Self> {
        let backend = backends::create(options)?;
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
        let (out_info, out_geometry) = output_of(&info, &geometry, &plan)?;
        let lent_in = exchange_layout(&info).0;
        let lent_out = exchange_layout(&out_info).0;
        let stream = configure_backend(backend.as_mut(), &info, &out_info, &geometry, &plan, &params)?;
        backend.pool().keep_only(&[&geometry, &out_geometry, &lent_in, &lent_out]);
        tracing::debug!("denoiser for {}x{} {} on {}", info.width, info.height, info.format, backend.describe());
        Ok(Denoiser {
            info,
            geometry,
            out_info,
            out_geometry,
            user_params,
            params,
            noise: NoiseState::default(),
            cuts: CutDetector::default(),
            scene_cuts: 0,
            pushed: 0,
            last_noise: None,
            plan,
            backend,
            window: stream.window,
            pending: VecDeque::new(),
            launched: 0,
            ready: VecDeque::new(),
            lost: Vec::new(),
            lent_in,
            lent_out,
            stored_on_backend: stream.stored,
            on_device: stream.on_device,
            depth: stream.depth,
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
        self.noise.estimator.current().or(self.last_noise)
    }

    fn apply_noise_update(&mut self, update: Option<(Params, Plan)>) {
        if let Some((p, plan)) = update {
            self.params = p;
            self.plan = plan;
            self.last_noise = self.noise.estimator.current();
        }
    }

    pub fn backend_description(&self) -> String {
        self.backend.describe()
    }

    /// True when frames are computed on a GPU (a device of the backend's own).
    pub fn on_gpu(&self) -> bool {
        self.on_device
    }

    /// Frames between pushing a frame and being able to pop it: the future frames a job reads
    /// (`Params::frames_needed`) plus the backend's pipeline depth.
    pub fn latency_frames(&self) -> usize {
        self.params.latency_frames() as usize + self.depth
    }

    /// Frames pushed whose output has not been popped yet.
    pub fn queued(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    /// Outputs ready to pop.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// The planes of the frames the backend takes: stored frames where it converts layouts
    /// itself, planar ones otherwise.
    fn work_geometry(&self) -> &Geometry {
        if self.stored_on_backend {
            &self.lent_in
        } else {
            &self.geometry
        }
    }

    /// Adds a frame. Outputs that became ready are available through [`Self::pop`].
    pub fn push(&mut self, frame: &FrameRef<'_>, tag: T) -> Result<()> {
        if frame.info != self.info {
            return Err(Error::InvalidFrame(format!(
                "frame is {}x{} {} but the stream is {}x{} {}; reconfigure first",
                frame.info.width, frame.info.height, frame.info.format, self.info.width, self.info.height, self.info.format
            )));
        }
        let work = self.work_geometry().clone();
        let mut into = self.backend.pool().take(&work);
        let t = Instant::now();
        let filled = if self.stored_on_backend {
            // The backend converts layouts: the frame's rows are copied as they are.
            convert::stored_mut(self.info, &mut into).and_then(|mut to| convert::copy_frame(frame, &mut to))
        } else {
            convert::unpack(frame, &mut into)
        };
        count_ns(UNPACK, t);
        if let Err(e) = filled {
            self.recycle(into);
            return Err(e);
        }
        self.push_filled(into, None, tag)
    }

    /// Adds a frame that is already in the form callers exchange without copies (one this engine
    /// handed out through [`Self::take_spare`] or [`Self::pop_planar`], filled with the next
    /// input; its planes are [`Self::exchange_geometry`]'s). Planar frames, and stored frames on a
    /// backend that converts layouts itself, are taken without a copy; stored frames on other
    /// backends are unpacked on the host, and the output is packed back into the same frame.
    pub fn push_planar(&mut self, frame: Frame, tag: T) -> Result<()> {
        if frame.matches(self.work_geometry()) {
            return self.push_filled(frame, None, tag);
        }
        if !frame.matches(&self.lent_in) {
            return Err(Error::InvalidFrame("planar frame does not match the stream's planes".into()));
        }
        let geometry = self.geometry.clone();
        let mut planar = self.backend.pool().take(&geometry);
        let t = Instant::now();
        let unpacked = convert::stored_ref(self.info, &frame).and_then(|from| convert::unpack(&from, &mut planar));
        count_ns(UNPACK, t);
        if let Err(e) = unpacked {
            self.recycle(planar);
            self.recycle(frame);
            return Err(e);
        }
        self.push_filled(planar, Some(frame), tag)
    }

    /// True when the backend takes frames as they are stored and converts layouts itself (CUDA,
    /// for NV12, NV21, P010 and packed RGB): no host thread unpacks or packs their samples.
    pub fn converts_on_backend(&self) -> bool {
        self.stored_on_backend
    }

    /// The planes of the frames [`Self::push_planar`] takes and [`Self::pop_planar`] gives, input
    /// and output (`planar::exchange_layout`).
    pub fn exchange_geometry(&self) -> (&Geometry, &Geometry) {
        (&self.lent_in, &self.lent_out)
    }

    /// A frame of the input's exchange planes from the backend's pool (a recycled one, or a new
    /// one: page-locked on CUDA), for a caller that fills it and gives it back with
    /// [`Self::push_planar`].
    pub fn take_spare(&mut self) -> Frame {
        let g = self.lent_in.clone();
        self.backend.pool().take(&g)
    }

    /// What makes the backend's frames (page-locked on CUDA), for a caller that keeps a free list
    /// of frames of its own (the element's lending store) and must not make ordinary ones.
    pub fn frame_maker(&mut self) -> std::sync::Arc<dyn crate::device::frames::FrameMaker> {
        self.backend.pool().maker()
    }

    /// A spare frame of the input's exchange planes if the pool holds one (a caller lending
    /// frames gives these back to its own store: with output frames of other planes,
    /// super-resolution, finished inputs become spare here).
    pub fn spare_frame(&mut self) -> Option<Frame> {
        let g = self.lent_in.clone();
        self.backend.pool().take_spare(&g)
    }

    /// Estimates the noise on `frame` (the input, in the backend's form), moves it into the
    /// backend's ring and launches what became ready. `target`: the caller's stored frame the
    /// output goes back into ([`Pending::target`]).
    fn push_filled(&mut self, frame: Frame, target: Option<Frame>, tag: T) -> Result<()> {
        ENGINE_NS[PUSHED].fetch_add(1, Ordering::Relaxed);
        self.pushed += 1;
        let update = self.noise.update(&self.user_params, &self.geometry, self.info, self.stored_on_backend, &frame);
        if let Err(e) = update.map(|u| self.apply_noise_update(u)) {
            self.recycle(frame);
            if let Some(t) = target {
                self.recycle(t);
            }
            return Err(e);
        }
        let cut = self.detect_cut(&frame, self.stored_on_backend);
        let slot = self.window.push(cut);
        if let Err(e) = self.backend.submit(slot, Arc::new(frame)) {
            // The window counted a frame the ring does not hold: start over from the next frame.
            if let Some(t) = target {
                self.recycle(t);
            }
            self.recover_from_backend_error();
            self.lost.push(tag);
            return Err(e);
        }
        self.pending.push_back(Pending { tag, target, device_output: false });
        let r = self.run_ready_jobs();
        if r.is_err() {
            self.recover_from_backend_error();
        }
        r
    }

    /// Whether the scene-cut test runs: the window holds other frames and `scene_cut` is set.
    fn tests_cuts(&self) -> bool {
        let (past, future) = self.params.frames_needed();
        self.params.scene_cut > 0.0 && past + future > 0
    }

    /// Whether `frame` (the input, as stored with `stored`, or as planes) starts a new shot
    /// (`crate::scene`). Only tested where the window holds other frames.
    fn detect_cut(&mut self, frame: &PlanarFrame, stored: bool) -> bool {
        if !self.tests_cuts() {
            self.cuts.reset();
            return false;
        }
        let t = Instant::now();
        let cut = self.cuts.observe_frame(frame, &self.info, &self.geometry, stored, self.params.scene_cut);
        count_ns(SCENE, t);
        if cut {
            self.scene_cuts += 1;
            tracing::info!("scene cut before input frame {} (counted from 0): no frame borrows across it", self.pushed - 1);
        }
        cut
    }

    /// Scene cuts found since the engine was made (`Params::scene_cut`).
    pub fn scene_cuts(&self) -> u64 {
        self.scene_cuts
    }

    /// After a backend error the window, the pending frames and the backend's queue of launched
    /// jobs no longer agree: forget all three (frames already ready stay), so that the next frame
    /// starts a new window instead of being paired with a stale job.
    fn recover_from_backend_error(&mut self) {
        let discarded = self.discard_pending();
        self.lost.extend(discarded);
        self.reconfigure_backend();
    }

    /// A new window on a backend configured again (nothing pending; the backend lets go of the
    /// frames it held).
    fn reconfigure_backend(&mut self) {
        self.window.reset();
        match configure_backend(self.backend.as_mut(), &self.info, &self.out_info, &self.geometry, &self.plan, &self.params) {
            Ok(s) => self.window = s.window,
            Err(e) => tracing::warn!("reconfiguring the backend after an error failed: {e}"),
        }
    }

    /// Launches every job whose window is complete and finishes jobs beyond the pipeline depth.
    fn run_ready_jobs(&mut self) -> Result<()> {
        while let Some(job) = self.window.next_job() {
            self.backend.launch(std::slice::from_ref(&job), &self.plan)?;
            self.launched += 1;
            while self.launched > self.depth {
                self.finish_oldest()?;
            }
        }
        Ok(())
    }

    fn finish_oldest(&mut self) -> Result<()> {
        let p = self.pending.pop_front().ok_or_else(|| Error::State("no launched frame to finish".into()))?;
        self.launched -= 1;
        if p.device_output {
            return match self.backend.finish_device() {
                Ok(frame) => {
                    self.ready.push_back(Finished { tag: p.tag, frame: Output::Device(frame), target: None });
                    Ok(())
                }
                Err(e) => {
                    self.lost.push(p.tag);
                    Err(e)
                }
            };
        }
        match self.backend.finish() {
            Ok(frame) => {
                let mut target = p.target;
                if self.plan.resizes() {
                    // A stored input frame cannot take the larger output.
                    if let Some(t) = target.take() {
                        self.recycle(t);
                    }
                }
                if !frame.matches(&self.out_geometry) && !frame.matches(&self.lent_out) {
                    // Never from a backend keeping the protocol; reported rather than packed.
                    self.lost.push(p.tag);
                    return Err(Error::State("the backend finished a frame of other planes".into()));
                }
                self.ready.push_back(Finished { tag: p.tag, frame: Output::Host(frame), target });
                Ok(())
            }
            Err(e) => {
                // Its output is unknown: the frame is lost, and this error reports it.
                if let Some(t) = p.target {
                    self.recycle(t);
                }
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
        if self.next_on_device() {
            return Err(Error::State("the next output is in a device frame (pop_device)".into()));
        }
        let Some(p) = self.take_host() else { return Ok(None) };
        let t = Instant::now();
        let r = if p.frame.matches(&self.out_geometry) {
            convert::pack(&p.frame, out)
        } else {
            // A stored frame (the backend converted it): its rows as they are.
            convert::stored_ref(self.out_info, &p.frame).and_then(|from| convert::copy_frame(&from, out))
        };
        count_ns(PACK, t);
        self.recycle(p.frame);
        if let Some(t) = p.target {
            self.recycle(t);
        }
        r.map(|_| Some(p.tag))
    }

    /// The oldest ready output as callers exchange frames without copies (the planes of
    /// [`Self::exchange_geometry`]), with its tag; give the frame back with [`Self::recycle`] to
    /// avoid an allocation. Where the output was computed in planar form for a stored frame, it
    /// is packed into it here.
    pub fn pop_planar(&mut self) -> Option<(T, Frame)> {
        let p = self.take_host()?;
        if p.frame.matches(&self.lent_out) {
            if let Some(t) = p.target {
                self.recycle(t);
            }
            return Some((p.tag, p.frame));
        }
        let mut stored = match p.target {
            Some(t) if t.matches(&self.lent_out) => t,
            other => {
                if let Some(t) = other {
                    self.recycle(t);
                }
                let g = self.lent_out.clone();
                self.backend.pool().take(&g)
            }
        };
        let t = Instant::now();
        let packed = convert::stored_mut(self.out_info, &mut stored).and_then(|mut to| convert::pack(&p.frame, &mut to));
        count_ns(PACK, t);
        // Both frames have the stream's planes (checked above and by the frames' geometry).
        debug_assert!(packed.is_ok(), "packing into a stored frame: {packed:?}");
        self.recycle(p.frame);
        Some((p.tag, stored))
    }

    /// True when frames in device memory can be pushed ([`Self::push_device`]): a CUDA backend on
    /// one device, without chunks.
    pub fn takes_device_frames(&self) -> bool {
        self.on_device && self.backend.takes_device_frames()
    }

    /// Adds a frame in GPU memory (the input format's stored layout, see [`DeviceFrame`]),
    /// copied into the backend's ring on the device; its owner is let go as soon as that copy is
    /// done. With `output`, the denoised frame is written into that device frame (the output
    /// format's stored layout) and comes back by [`Self::pop_device`], the copy complete; without,
    /// it comes back on the host ([`Self::pop`], [`Self::pop_planar`]). With the noise estimated
    /// (`sigma_auto`), the frames the estimator looks at (one in `noise::INTERVAL`) are copied to
    /// the host for it; with the scene-cut test, the rows it reads (one in `scene::SUBSAMPLE`) of
    /// every frame.
    pub fn push_device(&mut self, input: DeviceFrame, output: Option<DeviceFrame>, tag: T) -> Result<()> {
        if !self.takes_device_frames() {
            return Err(Error::Unsupported(format!("{} does not take frames in device memory", self.backend.describe())));
        }
        ENGINE_NS[PUSHED].fetch_add(1, Ordering::Relaxed);
        self.pushed += 1;
        let estimate = self.user_params.sigma_auto && self.noise.estimator.due();
        if self.user_params.sigma_auto && !estimate {
            self.noise.estimator.skip();
        }
        let mut cut = false;
        if estimate || self.tests_cuts() {
            // The frame on the host in its stored layout: whole for the estimator, or the rows
            // the cut test reads (`NoiseState::update` counts the estimate, the cut test its own
            // time; the copy is counted here).
            let g = self.lent_in.clone();
            let stored = !g.eq(&self.geometry);
            let mut host = self.backend.pool().take(&g);
            let t = Instant::now();
            let read = self.backend.read_device(&input, &mut host, if estimate { 1 } else { crate::scene::SUBSAMPLE });
            count_ns(if estimate { ESTIMATE } else { SCENE }, t);
            let update = match read {
                Ok(()) if estimate => self.noise.update(&self.user_params, &self.geometry, self.info, stored, &host),
                Ok(()) => Ok(None),
                Err(e) => Err(e),
            };
            if update.is_ok() {
                cut = self.detect_cut(&host, stored);
            }
            self.recycle(host);
            let update = update?;
            if estimate {
                self.apply_noise_update(update);
            }
        }
        if !self.tests_cuts() {
            self.cuts.reset();
        }
        let slot = self.window.push(cut);
        let device_output = output.is_some();
        if let Err(e) = self.backend.submit_device(slot, input, output) {
            self.recover_from_backend_error();
            self.lost.push(tag);
            return Err(e);
        }
        self.pending.push_back(Pending { tag, target: None, device_output });
        let r = self.run_ready_jobs();
        if r.is_err() {
            self.recover_from_backend_error();
        }
        r
    }

    /// The oldest ready output if it went into a device frame ([`Self::push_device`] with an
    /// output), with its tag: written, the copy into it complete.
    pub fn pop_device(&mut self) -> Option<(T, DeviceFrame)> {
        if !self.next_on_device() {
            return None;
        }
        match self.ready.pop_front()? {
            Finished { tag, frame: Output::Device(f), .. } => Some((tag, f)),
            Finished { .. } => None,
        }
    }

    fn next_on_device(&self) -> bool {
        matches!(self.ready.front(), Some(Finished { frame: Output::Device(_), .. }))
    }

    /// The oldest ready output if it is on the host (a device output stays first in line).
    fn take_host(&mut self) -> Option<HostOut<T>> {
        if self.next_on_device() {
            return None;
        }
        match self.ready.pop_front()? {
            Finished { tag, frame: Output::Host(frame), target } => Some(HostOut { tag, frame, target }),
            Finished { .. } => None,
        }
    }

    /// Gives back a frame handed out ([`Self::pop_planar`], [`Self::take_spare`]) for reuse; a
    /// frame of planes the engine no longer uses is dropped.
    pub fn recycle(&mut self, frame: Frame) {
        self.backend.pool().give(frame);
    }

    /// End of stream (or a discontinuity): computes every pending frame with the frames that
    /// exist, so that all of them become ready, then starts a new window (and, with
    /// `sigma_auto`, a new noise estimate).
    pub fn finish_stream(&mut self) -> Result<()> {
        self.noise.estimator.reset();
        self.cuts.reset();
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
        self.noise.estimator.reset();
        self.cuts.reset();
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
            // Frames no launched job has read: the backend holds them; configured again, it
            // lets go of them once their copies are done.
            self.discard_pending();
            self.reconfigure_backend();
        }
        let ready: Vec<_> = self.ready.drain(..).collect();
        for p in ready {
            if let Output::Host(f) = p.frame {
                self.recycle(f);
            }
            if let Some(t) = p.target {
                self.recycle(t);
            }
        }
        // A flush drops frames by definition; what a failure lost before it was reported then.
        self.lost.clear();
    }

    /// Forgets the pending frames; returns their tags, oldest first.
    fn discard_pending(&mut self) -> Vec<T> {
        self.launched = 0;
        let mut tags = Vec::with_capacity(self.pending.len());
        for p in std::mem::take(&mut self.pending) {
            if let Some(t) = p.target {
                self.recycle(t);
            }
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
    /// frames (they become ready) and then reconfigure the backend. A change of the output size
    /// (super-resolution's scale) needs an empty engine (`finish_stream`, then pop every frame):
    /// otherwise it is refused and nothing changes.
    pub fn set_params(&mut self, params: Params) -> Result<()> {
        params.validate()?;
        let user = params;
        let params = match self.noise.estimator.current() {
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
        let (out_info, out_geometry) = output_of(&self.info, &self.geometry, &plan)?;
        if out_info != self.out_info && self.queued() > 0 {
            // Frames held now would come out at the old size after the change.
            return Err(Error::State(format!(
                "changing the output size from {}x{} to {}x{} with {} frame(s) held: finish the stream and pop them first",
                self.out_info.width,
                self.out_info.height,
                out_info.width,
                out_info.height,
                self.queued()
            )));
        }
        self.finish_stream()?;
        let stream = match configure_backend(self.backend.as_mut(), &self.info, &out_info, &self.geometry, &plan, &params) {
            Ok(s) => s,
            Err(e) => {
                // Keep running with the previous parameters.
                let s = configure_backend(self.backend.as_mut(), &self.info, &self.out_info, &self.geometry, &self.plan, &self.params)?;
                self.window = s.window;
                return Err(e);
            }
        };
        self.window = stream.window;
        self.stored_on_backend = stream.stored;
        self.depth = stream.depth;
        self.user_params = user;
        self.params = params;
        self.plan = plan;
        self.lent_out = exchange_layout(&out_info).0;
        self.out_info = out_info;
        self.out_geometry = out_geometry;
        let keep = [&self.geometry, &self.out_geometry, &self.lent_in, &self.lent_out];
        self.backend.pool().keep_only(&keep);
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

/// The stream's noise estimate (`Params::sigma_auto`).
#[derive(Default)]
struct NoiseState {
    estimator: NoiseEstimator,
}

impl NoiseState {
    /// Feeds the estimator with the next input (`stored`: a stored frame of `info`, read as it is
    /// stored); when the estimate changed, the parameters and plan to use from now on (only
    /// sigma and strengths change: no reconfiguration).
    fn update(&mut self, user: &Params, geometry: &Geometry, info: VideoInfo, stored: bool, frame: &PlanarFrame) -> Result<Option<(Params, Plan)>> {
        if !user.sigma_auto {
            return Ok(None);
        }
        let t = Instant::now();
        let observed = if stored { self.estimator.observe_stored(frame, &info) } else { self.estimator.observe(frame, geometry) };
        count_ns(ESTIMATE, t);
        if !observed {
            return Ok(None);
        }
        let e = self.estimator.current().expect("just observed");
        let p = user.with_estimate(e.luma, e.chroma);
        Ok(Some((p, Plan::new(geometry, &p)?)))
    }
}

/// A backend configured for a stream, and the temporal window that goes with it.
struct StreamState {
    window: TemporalWindow,
    depth: usize,
    /// The backend takes stored frames.
    stored: bool,
    on_device: bool,
}

/// Configures `backend` for a stream of `info` frames (output `out_info`) under `plan` and
/// returns the temporal window that goes with it: `past + 1 + future + pipeline_depth` slots
/// (`Params::frames_needed`), the ring the backend allocated. Stored frames are offered where
/// the format interleaves components (NV12, P010, packed RGB).
fn configure_backend(backend: &mut dyn Backend, info: &VideoInfo, out_info: &VideoInfo, geometry: &Geometry, plan: &Plan, params: &Params) -> Result<StreamState> {
    let (past, future) = params.frames_needed();
    let planar = info.format.info().planes_as_stored().is_some();
    let stored = if planar { None } else { Some((*info, *out_info)) };
    let c = backend.configure(&StreamSetup { geometry, plan, past, future, stored, ring_slots: None })?;
    let window = TemporalWindow::new(past, future, c.pipeline_depth);
    if window.slots() != c.ring_slots {
        return Err(Error::State(format!("the backend's ring has {} slots; the window needs {}", c.ring_slots, window.slots())));
    }
    Ok(StreamState { window, depth: c.pipeline_depth, stored: c.stored, on_device: c.on_device })
}
