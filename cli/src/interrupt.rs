//! Ctrl-C and SIGTERM: the first finishes the output with the frames done so far (the y4m path
//! stops reading and drains the engine; the GStreamer path sends end-of-stream through the
//! pipeline so that the muxer writes a playable file); a second aborts at once, removing an MP4
//! output, which cannot be valid without the index the muxer writes at the end.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

static SIGNALS: AtomicU32 = AtomicU32::new(0);
static REMOVE_ON_ABORT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Installs the handler; `remove_on_abort`: the output file a second signal removes.
pub fn install(remove_on_abort: Option<PathBuf>) {
    *REMOVE_ON_ABORT.lock().unwrap_or_else(|e| e.into_inner()) = remove_on_abort;
    let installed = ctrlc::set_handler(|| {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\nnlmdenoise: interrupted: finishing the output with the frames done (interrupt again to abort)");
            return;
        }
        if let Some(path) = REMOVE_ON_ABORT.lock().unwrap_or_else(|e| e.into_inner()).take() {
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
    SIGNALS.load(Ordering::SeqCst) > 0
}
