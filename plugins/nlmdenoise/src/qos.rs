//! QoS: late frames, counted per window of running time (downstream's reports of late frames,
//! QoS events, and the input frames the base class's QoS then drops before they reach the
//! engine), and the one warning per stream when they persist, naming what would help with the
//! settings and backend in use.

use gst_base::prelude::*;

use crate::core::Core;
use crate::lock;

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
    /// Running time of the input the base class was last given, until `generate_output` takes
    /// it: still there at the next input, the base class's QoS dropped it.
    submitted: Option<Option<gst::ClockTime>>,
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
            l.window_start = Some(ts);
            l.late = 0;
        }
        l.late += 1;
        if l.late >= LATE_REPORTS {
            l.warned = true;
            drop(l);
            let (backend, advice) = self.keep_up_advice();
            gst::element_warning!(
                self.element(),
                gst::CoreError::Clock,
                ("The {} cannot keep up: {LATE_REPORTS} or more frames came late within {LATE_WINDOW_S} s and were dropped (QoS) on {backend}", self.what),
                ["{advice} (docs/tuning.md)"]
            );
        }
    }

    /// What would make the element faster with its settings and backend: only what applies.
    fn keep_up_advice(&self) -> (String, String) {
        let (params, options) = {
            let s = lock(&self.settings);
            (s.params, s.options.clone())
        };
        let (backend, on_gpu) = lock(&self.state).as_ref().map(|st| (st.denoiser.backend_description(), st.denoiser.on_gpu())).unwrap_or_default();
        let mut tips: Vec<String> = Vec::new();
        if !on_gpu && nlmdenoise::device::cuda::available() {
            tips.push("backend=cuda (a usable GPU is present)".into());
        }
        match params.algorithm {
            nlmdenoise::Algorithm::Bm3d => {
                if params.bm3d.profile != nlmdenoise::Bm3dProfile::Fast {
                    tips.push("bm3d-profile=fast".into());
                }
                // A live window groups the frames of each output apart (no latency); per-frame
                // groups make each frame's groups once (`normal` at 1080p: 47 -> 123 frames/s on
                // an H200, docs/tuning.md "The default profile").
                if let Ok(s) = params.bm3d_settings() {
                    if !s.frame_groups && params.temporal_past > 0 && params.temporal_future == 0 {
                        tips.push(format!("bm3d-frame-groups=1 (each frame grouped once: faster, at {} frames of latency)", s.steps * params.temporal_past));
                    }
                }
                if params.bm3d.steps != Some(1) {
                    tips.push("bm3d-steps=1".into());
                }
                tips.push("algorithm=nlm".into());
            }
            _ => {
                if params.search_radius > 1 {
                    tips.push(format!("a smaller search-radius (now {})", params.search_radius));
                }
            }
        }
        if params.temporal_past + params.temporal_future > 0 {
            tips.push(format!("fewer temporal frames (now temporal-past={} temporal-future={})", params.temporal_past, params.temporal_future));
        }
        if options.kind == nlmdenoise::BackendKind::Cpu && options.threads > 0 {
            tips.push(format!("more threads (now {})", options.threads));
        }
        tips.push("a lower resolution or frame rate".into());
        (backend, format!("Try {}", tips.join(", or ")))
    }

    /// The base class is about to take `inbuf` (its QoS may drop it there). The input given
    /// before it that `generate_output` never took was dropped by the base class's QoS (which then
    /// does not call `generate_output`): it counts as a late frame.
    pub fn input_submitted(&self, inbuf: &gst::Buffer) {
        let running_time = inbuf.pts().and_then(|pts| self.element().segment().downcast::<gst::ClockTime>().ok()?.to_running_time(pts));
        let dropped = lock(&self.lateness).submitted.replace(running_time);
        if let Some(Some(ts)) = dropped {
            self.count_late_frame(ts);
        }
    }

    /// `generate_output` took the input last submitted.
    pub fn input_taken(&self) {
        lock(&self.lateness).submitted = None;
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
}
