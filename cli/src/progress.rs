//! Progress on standard error: a bar with frames done, frames/s and ETA on a terminal; elsewhere
//! (a log file, a pipe) a plain line every `--stats-period` seconds; nothing when quiet.

use std::io::{self, IsTerminal};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub fn bar(quiet: bool, total: Option<u64>, stats_period: f64) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    set_total(&bar, total);
    if quiet || !io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        if !quiet && stats_period > 0.0 {
            lines(bar.clone(), Duration::from_secs_f64(stats_period));
        }
    } else {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// Off a terminal: one line per `period` until the bar is finished, so that a slow run written to
/// a log still says how far it got.
fn lines(bar: ProgressBar, period: Duration) {
    std::thread::spawn(move || loop {
        std::thread::sleep(period);
        if bar.is_finished() {
            return;
        }
        let done = bar.position();
        let rate = bar.per_sec();
        let line = match bar.length().filter(|&n| n > 0) {
            Some(n) if rate > 0.0 => format!("{done}/{n} frames, {rate:.2} frames/s, {}s left", ((n.saturating_sub(done)) as f64 / rate).round()),
            Some(n) => format!("{done}/{n} frames"),
            None if rate > 0.0 => format!("{done} frames, {rate:.2} frames/s"),
            None => format!("{done} frames"),
        };
        eprintln!("nlmdenoise: {line} ({}s)", bar.elapsed().as_secs());
    });
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

/// The summary's line on scene cuts, the same on both paths: none where no cut was found.
pub fn report_scene_cuts(cuts: u64) {
    if cuts > 0 {
        eprintln!("  scene cuts: {cuts} (no frame takes anything from a frame across one; --scene-cut)");
    }
}
