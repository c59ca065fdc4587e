//! Progress bar on standard error: frames done, frames/s and ETA (hidden when quiet or when
//! standard error is not a terminal).

use std::io::{self, IsTerminal};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub fn bar(quiet: bool, total: Option<u64>) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    set_total(&bar, total);
    if quiet || !io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// Switches to a bar with a length and ETA once the number of frames is known.
pub fn set_total(bar: &ProgressBar, total: Option<u64>) {
    match total {
        Some(n) => {
            bar.set_length(n);
            bar.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} frames ({per_sec}, eta {eta})").expect("valid template"));
        }
        None => bar.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos} frames ({per_sec})").expect("valid template")),
    }
}

/// "1 frame", "2 frames": a count and its noun, plural unless one.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The engine's backend description for the summary, in the singular where it counts one
/// ("cpu (1 threads)" -> "cpu (1 thread)").
pub fn backend_words(description: &str) -> String {
    description.replace("(1 threads)", "(1 thread)")
}
