//! QoS: downstream's reports of late frames (QoS events), counted per window of stream time,
//! and the one warning per stream when they persist (a live pipeline then loses frames to the
//! base class's QoS dropping upstream of the transform).

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
