//! The tool's exit statuses (README.md, "Exit status").

/// Every frame was read, denoised and written.
pub const OK: i32 = 0;
/// An error: bad usage, an unreadable input, a failed pipeline. No output is left behind (a file
/// the run created is removed).
pub const ERROR: i32 = 1;
