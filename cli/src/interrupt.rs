//! Ctrl-C and SIGTERM: the first finishes the output with the frames done so far (the y4m path
//! stops reading and drains the engine; the GStreamer path sends end-of-stream through the
//! pipeline so that the muxer writes a playable file); a second, at least [`SAME_REQUEST`] after
//! the first, aborts at once, removing an MP4 output, which cannot be valid without the index the
//! muxer writes at the end. Signals closer together are one request: GNU `timeout` signals the
//! process and then its process group, and a terminal's Ctrl-C reaches every process of a
//! pipeline, so one request often arrives twice.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Signals this close to the first are the same request as the first.
pub const SAME_REQUEST: Duration = Duration::from_millis(500);

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// When the first signal came.
static FIRST: Mutex<Option<Instant>> = Mutex::new(None);
static REMOVE_ON_ABORT: Mutex<Option<PathBuf>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Installs the handler; `remove_on_abort`: the output file a second signal removes.
pub fn install(remove_on_abort: Option<PathBuf>) {
    *lock(&REMOVE_ON_ABORT) = remove_on_abort;
    // ctrlc runs the handler on a thread of its own, one signal at a time.
    let installed = ctrlc::set_handler(|| {
        let now = Instant::now();
        let first = *lock(&FIRST).get_or_insert(now);
        if now.duration_since(first) < SAME_REQUEST {
            if !REQUESTED.swap(true, Ordering::SeqCst) {
                eprintln!("\nnlmdenoise: interrupted: finishing the output with the frames done (interrupt again, more than {} s later, to abort)", SAME_REQUEST.as_secs_f32());
            }
            return;
        }
        if let Some(path) = lock(&REMOVE_ON_ABORT).take() {
            let _ = std::fs::remove_file(&path);
        }
        eprintln!("\nnlmdenoise: aborted");
        std::process::exit(crate::exit_code::ABORTED);
    });
    if let Err(e) = installed {
        tracing::warn!("cannot handle Ctrl-C: {e}");
    }
}

/// Whether a first signal asked to finish early.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
