//! How engine failures reach the user: the element error for each kind of engine error, the
//! report of the frames a failure lost, and, with `backend=auto`, the hand-over to the CPU backend
//! when the GPU fails mid-stream (the frames it had finished still go downstream).

use gst::prelude::*;

use nlmdenoise::{Denoiser, FrameRef};

use crate::core::Core;
use crate::logbridge::with_engine_logs;
use crate::state::{FrameMeta, State};

/// How many frames a failure lost, with their timestamps ("no frame lost" when none).
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

/// Whether the CPU backend can take over from a GPU engine after `err` (`backend=auto`): the
/// device failed or cannot be used (out of memory, a failed launch or compile, a lost device, no
/// usable driver); not a failure of the backend's host side, nor bad input or parameters, which
/// the CPU would meet just the same.
pub(crate) fn gpu_failed(err: &nlmdenoise::Error) -> bool {
    match err {
        nlmdenoise::Error::Backend(e) => e.is_device_failure(),
        nlmdenoise::Error::BackendUnavailable(_) => true,
        _ => false,
    }
}

impl Core {
    /// After an engine call failed: names the frames the failure lost, and with `backend=auto`
    /// on a GPU whose failure is the backend's (a kernel launch failing, a device fault or the
    /// device gone) goes on with the CPU backend: the frames the GPU had finished still come out,
    /// and `retry`, the frame whose push failed, is pushed again. Otherwise an element error.
    pub(crate) fn engine_failed(&self, state: &mut State, what: &str, err: nlmdenoise::Error, retry: Option<&FrameRef<'_>>) -> Result<(), gst::FlowError> {
        let mut lost = state.denoiser.take_lost();
        // A failed push always loses its own frame, the newest (Denoiser::take_lost).
        let current = retry.and_then(|f| lost.pop().map(|m| (f, m)));
        let fallback = if gpu_failed(&err) { state.fallback.take() } else { None };
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
}

#[cfg(test)]
mod tests {
    use super::gpu_failed;
    use nlmdenoise::{BackendError, Error};

    #[test]
    fn the_cpu_takes_over_from_device_failures_only() {
        for e in [BackendError::OutOfMemory("x".into()), BackendError::Launch("x".into()), BackendError::DeviceLost("x".into()), BackendError::Compile("x".into()), BackendError::Driver("x".into())] {
            assert!(gpu_failed(&Error::Backend(e.clone())), "{e:?}");
        }
        assert!(gpu_failed(&Error::BackendUnavailable("no driver".into())));
        assert!(!gpu_failed(&Error::Backend(BackendError::Host("chunk worker stopped".into()))), "a host-side failure is not the GPU's");
        assert!(!gpu_failed(&Error::InvalidFrame("bad".into())));
        assert!(!gpu_failed(&Error::InvalidParameter("bad".into())));
    }
}
