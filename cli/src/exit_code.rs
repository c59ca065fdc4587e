//! The tool's exit statuses (README.md, "Exit status").

/// Every frame was read, denoised and written.
pub const OK: i32 = 0;
/// An error: bad usage, an unreadable input, a failed pipeline. No output is left behind (a file
/// the run created is removed).
pub const ERROR: i32 = 1;
/// The input ended early or was damaged: every frame that could be read was denoised and
/// written, and the output is complete and playable.
pub const INCOMPLETE: i32 = 3;

/// Interrupted (Ctrl-C, SIGTERM): the output is complete and playable and holds the frames done
/// before the interruption.
pub const INTERRUPTED: i32 = 4;
/// A second interrupt, 0.5 s or more after the first ([`crate::interrupt::SAME_REQUEST`]),
/// aborted the run at once (an MP4 output is removed; others hold what was
/// written).
pub const ABORTED: i32 = 130;

/// The error of a run that was interrupted but finished its output ([`INTERRUPTED`]).
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted; the output holds the frames done before the interruption")
    }
}

impl std::error::Error for Interrupted {}

/// The error of a run whose output is valid but shorter than the input announced
/// ([`INCOMPLETE`]); its output file is kept.
#[derive(Debug)]
pub struct Incomplete(pub String);

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Incomplete {}

/// The exit status for the error `e`.
pub fn of_error(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<Incomplete>().is_some() {
        INCOMPLETE
    } else if e.downcast_ref::<Interrupted>().is_some() {
        INTERRUPTED
    } else {
        ERROR
    }
}

/// After a failed run: removes the output file at `path` (a regular file this run opened and
/// truncated), unless the run only ended early with a valid output ([`Incomplete`],
/// [`Interrupted`]).
pub fn remove_failed_output(e: &anyhow::Error, path: &str) {
    if e.downcast_ref::<Incomplete>().is_some() || e.downcast_ref::<Interrupted>().is_some() || path == "-" {
        return;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        let _ = std::fs::remove_file(path);
    }
}
