//! What a user meets when things go wrong: damaged and truncated inputs keep every complete
//! frame (exit 3) or fail without leaving an output behind (exit 1); Ctrl-C and SIGTERM finish a
//! playable output (exit 4) and a second signal aborts (exit 130); --frames cuts audio and video
//! together; existing outputs are not overwritten without -y; usage errors exit 1; no GStreamer
//! critical reaches the terminal. (README.md, "Exit status".)
//!
//! Needs ffmpeg/ffprobe and the GStreamer plugins scripts/install-deps.sh installs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-robustness");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nlmdenoise"))
}

/// The tool started on `input` into `out` with `args` (stdin closed, stdout and stderr piped), to
/// signal or watch while it runs.
fn spawn(args: &[&str], input: &Path, out: &Path) -> Child {
    bin().args(args).arg(input).arg(out).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn run(args: &[&str]) -> Output {
    let out = bin().args(args).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(!stderr.contains("CRITICAL"), "{args:?}: a GStreamer critical reached the user: {stderr}");
    out
}

fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg").args(["-v", "error", "-y"]).args(args).output().expect("ffmpeg runs");
    assert!(out.status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// "codec_type,frames,duration" per stream, from ffprobe (counting decoded frames); Err when
/// ffprobe rejects the file.
fn probe(file: &Path) -> Result<Vec<(String, u64, f64)>, String> {
    let out = Command::new("ffprobe").args(["-v", "error", "-count_frames", "-show_entries", "stream=codec_type,nb_read_frames,duration", "-of", "csv=p=0"]).arg(file).output().expect("ffprobe runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[0].to_string(), c.get(2).and_then(|v| v.parse().ok()).unwrap_or(0), c.get(1).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN))
        })
        .collect())
}

fn frames_of(file: &Path, kind: &str) -> u64 {
    probe(file).unwrap().iter().find(|s| s.0 == kind).map(|s| s.1).unwrap_or(0)
}

/// A 4 s H.264 + AAC MP4 with its index at the front (so that a cut file still starts right),
/// 160x120 at 25 frames/s, and the same picture as y4m.
struct Clips {
    mp4: PathBuf,
    y4m: PathBuf,
}

fn clips() -> &'static Clips {
    static C: OnceLock<Clips> = OnceLock::new();
    C.get_or_init(|| {
        let (mp4, y4m) = (tmp("clip.mp4"), tmp("clip.y4m"));
        ffmpeg(&[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=160x120:rate=25",
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=440:sample_rate=48000",
            "-t",
            "4",
            "-c:v",
            "libx264",
            "-g",
            "25",
            "-pix_fmt",
            "yuv420p",
            "-c:a",
            "aac",
            "-movflags",
            "+faststart",
            mp4.to_str().unwrap(),
        ]);
        ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-frames:v", "100", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m.to_str().unwrap()]);
        Clips { mp4, y4m }
    })
}

fn cut(src: &Path, bytes: usize, name: &str) -> PathBuf {
    let data = std::fs::read(src).unwrap();
    let dst = tmp(name);
    std::fs::write(&dst, &data[..bytes.min(data.len())]).unwrap();
    dst
}

#[test]
fn a_truncated_y4m_keeps_every_complete_frame() {
    let c = clips();
    let frame = 160 * 120 * 3 / 2 + 6;
    let header = std::fs::read(&c.y4m).unwrap().iter().position(|&b| b == b'\n').unwrap() + 1;
    // Cut inside frame 5: frames 0-4 complete, two of them held for the future window.
    let cut5 = cut(&c.y4m, header + 5 * frame + 1000, "cut5.y4m");
    for ext in ["y4m", "mp4"] {
        let out = tmp(&format!("cut5-out.{ext}"));
        let r = run(&["-y", "-q", cut5.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu"]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(3), "{ext}: {stderr}");
        assert!(stderr.contains("frame 5") && stderr.contains(&format!("byte {}", header + 5 * frame)), "{ext}: names the frame and byte: {stderr}");
        assert_eq!(frames_of(&out, "video"), 5, "{ext}: every complete frame written");
    }
    // Cut inside frame 0: nothing to write, an error, and no output left behind.
    let cut0 = cut(&c.y4m, header + 500, "cut0.y4m");
    for ext in ["y4m", "mp4"] {
        let out = tmp(&format!("cut0-out.{ext}"));
        let _ = std::fs::remove_file(&out);
        let r = run(&["-q", cut0.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu"]);
        assert_eq!(r.status.code(), Some(1), "{ext}: {}", String::from_utf8_lossy(&r.stderr));
        assert!(String::from_utf8_lossy(&r.stderr).contains("no complete frame"), "{ext}");
        assert!(!out.exists(), "{ext}: no empty output left behind");
    }
}

#[test]
fn a_truncated_mp4_keeps_its_decodable_frames_and_one_without_any_fails_cleanly() {
    let c = clips();
    let len = std::fs::metadata(&c.mp4).unwrap().len() as usize;
    let half = cut(&c.mp4, len / 2, "half.mp4");
    let out = tmp("half-out.mp4");
    let r = run(&["-y", "-q", half.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("of the 100 frames"), "{stderr}");
    let n = frames_of(&out, "video");
    assert!(n > 10 && n < 100, "{n} frames written of a half file");

    // The index and no picture: an error, exit 1, no output file (it used to exit 0 with a
    // 965-byte file and a GStreamer critical).
    let head = cut(&c.mp4, 6000, "head.mp4");
    let out = tmp("head-out.mp4");
    let _ = std::fs::remove_file(&out);
    let r = run(&["-q", head.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu"]);
    assert_eq!(r.status.code(), Some(1), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(!out.exists());
}

#[test]
fn frames_cuts_audio_with_the_video() {
    let c = clips();
    for ext in ["mp4", "mkv"] {
        let out = tmp(&format!("ten.{ext}"));
        let r = run(&["-y", "-q", c.mp4.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--frames", "10", "--preset", "ultrafast"]);
        assert!(r.status.success(), "{ext}: {}", String::from_utf8_lossy(&r.stderr));
        let (video, audio) = (frames_of(&out, "video"), frames_of(&out, "audio"));
        assert_eq!(video, 10, "{ext}");
        // 0.4 s of video; AAC frames are 1024 samples (21.3 ms), Opus 20 ms: the audio ends
        // within two packets of the video (the encoders' own delay), not 0.2 s later as before.
        let packet = if ext == "mp4" { 1024.0 / 48000.0 } else { 0.02 };
        let audio_s = audio as f64 * packet;
        assert!((audio_s - 0.4).abs() <= 2.0 * packet + 1e-9, "{ext}: {audio} audio packets = {audio_s:.3} s for 0.4 s of video");
    }
}

/// Runs the tool on a long input and sends `signals` SIGINT/SIGTERM `gap` apart once it has
/// written output.
fn interrupted(input: &Path, out: &Path, signal: &str, signals: usize, gap: Duration) -> Output {
    interrupted_with(input, out, signal, signals, gap, &["--search-radius", "5", "--temporal-past", "3", "--temporal-future", "3"], (20_000, Duration::ZERO))
}

/// [`interrupted`] with the tool's `window` options; the first signal `start.1` after the output
/// holds `start.0` bytes (or after 30 s).
fn interrupted_with(input: &Path, out: &Path, signal: &str, signals: usize, gap: Duration, window: &[&str], start: (u64, Duration)) -> Output {
    let (bytes, settle) = start;
    let _ = std::fs::remove_file(out);
    let child = spawn(&[&["-y", "-q", "--backend", "cpu"], window].concat(), input, out);
    let t = Instant::now();
    while !std::fs::metadata(out).is_ok_and(|m| m.len() >= bytes) && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(settle);
    for i in 0..signals {
        if i > 0 {
            std::thread::sleep(gap);
        }
        Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_interrupt_finishes_a_playable_output_and_a_second_aborts() {
    // A long input: 30 s of 160x120 video with audio.
    let long = tmp("long.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25",
        "-f",
        "lavfi",
        "-i",
        "sine=frequency=440:sample_rate=48000",
        "-t",
        "30",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "libopus",
        long.to_str().unwrap(),
    ]);
    for (signal, ext) in [("-INT", "mp4"), ("-TERM", "mkv")] {
        let out = tmp(&format!("stopped.{ext}"));
        let r = interrupted(&long, &out, signal, 1, Duration::ZERO);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(4), "{signal} {ext}: {stderr}");
        assert!(stderr.contains("interrupted"), "{stderr}");
        let streams = probe(&out).unwrap_or_else(|e| panic!("{ext}: the interrupted output is not playable: {e}"));
        let video = streams.iter().find(|s| s.0 == "video").map(|s| s.1).unwrap();
        assert!(video > 0 && video < 750, "{ext}: {video} frames of 750");
    }
    // The y4m path drains the engine too.
    let y4m_long = tmp("long.y4m");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-frames:v", "750", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m_long.to_str().unwrap()]);
    let out = tmp("stopped.y4m");
    let r = interrupted(&y4m_long, &out, "-INT", 1, Duration::ZERO);
    assert_eq!(r.status.code(), Some(4), "{}", String::from_utf8_lossy(&r.stderr));
    let n = frames_of(&out, "video");
    assert!(n > 0 && n < 750, "{n}");

    // Two signals a moment apart: one request (GNU timeout signals the process, then its
    // group); the output is finished and kept, as for one.
    let out = tmp("twice-at-once.mp4");
    let r = interrupted(&long, &out, "-INT", 2, Duration::from_millis(5));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "two signals together are one request: {stderr}");
    let streams = probe(&out).unwrap_or_else(|e| panic!("the output is kept and playable: {e}"));
    let video = streams.iter().find(|s| s.0 == "video").map(|s| s.1).unwrap();
    assert!(video > 0 && video < 750, "{video} frames of 750");

    // A second signal a second later, while the output is still being finished (a slow window):
    // abort at once; an MP4 that cannot be finished is removed.
    let out = tmp("aborted.mp4");
    let slow = ["--search-radius", "12", "--temporal-past", "7", "--temporal-future", "7"];
    let r = interrupted_with(&long, &out, "-INT", 2, Duration::from_secs(1), &slow, (0, Duration::from_secs(1)));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("aborted"), "{stderr}");
    assert!(!out.exists(), "the unfinishable MP4 is removed");
}

#[test]
fn existing_outputs_need_y_and_dev_null_discards() {
    let c = clips();
    let out = tmp("exists.y4m");
    std::fs::write(&out, b"keep me").unwrap();
    // No terminal to ask on: refused, the file untouched.
    let r = run(&["-q", c.y4m.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--frames", "2"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("pass -y"), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    let r = run(&["-n", "-q", c.y4m.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--frames", "2"]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    let r = run(&["-y", "-q", c.y4m.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--frames", "2"]);
    assert!(r.status.success());
    assert_eq!(frames_of(&out, "video"), 2);
    // -o /dev/null: the usual way to time a run.
    for input in [&c.y4m, &c.mp4] {
        let r = run(&["-q", "-i", input.to_str().unwrap(), "-o", "/dev/null", "--backend", "cpu", "--frames", "3"]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    }
}

#[test]
fn usage_errors_exit_1_and_negative_values_reach_the_range_check() {
    let c = clips();
    let r = run(&["--no-such-flag"]);
    assert_eq!(r.status.code(), Some(1));
    let r = run(&[c.y4m.to_str().unwrap(), "--strength", "-3"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("strength -3 out of range"), "{stderr}");
    assert!(!stderr.contains("bad parameters"), "one message, not a chain: {stderr}");
    let r = run(&["--help"]);
    assert_eq!(r.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&r.stdout).contains("Exit status"), "--help documents the exit codes");
}

/// scripts/install-deps.sh installs a recent Rust when the one on PATH is missing or older than
/// the project's rust-version (Debian bookworm's own cargo is 1.63).
#[test]
fn install_deps_replaces_a_too_old_rust() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-deps.sh");
    let fake = tmp("fake-cargo");
    std::fs::create_dir_all(&fake).unwrap();
    let check = |cargo_version: Option<&str>| {
        let _ = std::fs::remove_file(fake.join("cargo"));
        if let Some(v) = cargo_version {
            std::fs::write(fake.join("cargo"), format!("#!/bin/sh\necho 'cargo {v} (Debian)'\n")).unwrap();
            Command::new("chmod").arg("+x").arg(fake.join("cargo")).status().unwrap();
        }
        let out = Command::new("bash").arg(&script).arg("--rust-check").env("PATH", format!("{}:/usr/bin:/bin", fake.display())).env("HOME", tmp("no-home")).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(check(Some("1.63.0")).contains("older than 1.85; would install"), "{}", check(Some("1.63.0")));
    assert!(check(None).contains("not found; would install"));
    assert!(check(Some("1.90.0")).contains("new enough"));
}

fn pix_fmt(file: &Path) -> String {
    let out = Command::new("ffprobe").args(["-v", "error", "-select_streams", "v", "-show_entries", "stream=pix_fmt", "-of", "csv=p=0"]).arg(file).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A 10-bit input stays 10-bit (it used to be written as 8-bit without a word); --bit-depth 8
/// asks for 8 and says so; 8-bit 4:2:0 stays 8-bit 4:2:0.
#[test]
fn encoded_output_keeps_the_bit_depth_and_subsampling() {
    let in10 = tmp("in10.mkv");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-frames:v", "6", "-c:v", "libx264", "-pix_fmt", "yuv444p10le", in10.to_str().unwrap()]);
    let out = tmp("out10.mp4");
    let r = run(&["-y", in10.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert_eq!(pix_fmt(&out), "yuv444p10le");
    assert!(stderr.contains("H.264 10-bit 4:4:4"), "{stderr}");
    let out8 = tmp("out8.mkv");
    let r = run(&["-y", in10.to_str().unwrap(), out8.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast", "--bit-depth", "8"]);
    assert!(r.status.success());
    assert_eq!(pix_fmt(&out8), "yuv444p");
    assert!(String::from_utf8_lossy(&r.stderr).contains("the input has 10 bits per sample"));
    let out420 = tmp("out420.mp4");
    let r = run(&["-y", "-q", clips().mp4.to_str().unwrap(), out420.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast", "--frames", "3"]);
    assert!(r.status.success());
    assert_eq!(pix_fmt(&out420), "yuv420p");
}

/// Without a GPU, --backend cuda fails with one short line that names the first missing piece.
#[test]
fn cuda_without_a_gpu_is_one_clear_line() {
    let c = clips();
    let r = run(&["-q", "-i", c.y4m.to_str().unwrap(), "-o", "/dev/null", "--backend", "cuda", "--frames", "2"]);
    if r.status.success() {
        eprintln!("a usable CUDA device is present: nothing to check");
        return;
    }
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.len() < 300, "{stderr}");
    assert!(stderr.contains("NVIDIA driver") || stderr.contains("CUDA device") || stderr.contains("NVRTC"), "{stderr}");
    assert!(!stderr.contains("libnvrtc.so.13: libnvrtc.so.13"), "{stderr}");
}

/// -v means something in file mode (the element's decisions and the per-second estimate), and no
/// colour codes reach a stderr that is not a terminal.
#[test]
fn verbose_in_file_mode_without_colour_codes() {
    let c = clips();
    let out = tmp("verbose.mkv");
    let r = run(&["-y", "-v", c.mp4.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast", "--frames", "30"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert!(stderr.contains("denoising 160x120 I420 on cpu"), "-v shows what the element decided: {stderr}");
    assert!(stderr.contains("noise sigma estimate"), "-v prints the estimate once per second: {stderr}");
    assert!(!stderr.contains('\x1b'), "colour codes on a pipe: {stderr:?}");
}

/// Release binaries carry no debug info (they were 30 MB); the `profiling` profile keeps symbols.
#[test]
fn release_binary_is_stripped() {
    if cfg!(debug_assertions) {
        eprintln!("a debug build: nothing to check");
        return;
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_nlmdenoise"));
    let len = std::fs::metadata(&exe).unwrap().len();
    assert!(len < 15 << 20, "{} is {} MiB", exe.display(), len >> 20);
    let sections = Command::new("readelf").arg("-S").arg(&exe).output();
    if let Ok(s) = sections {
        assert!(!String::from_utf8_lossy(&s.stdout).contains(".debug_info"), "debug info in the release binary");
    }
}

/// --frames 0 is one clear error on both paths, before any output exists (it used to write a
/// header-only y4m, and fail with another message on the MP4 path).
#[test]
fn frames_zero_is_the_same_error_on_both_paths() {
    let c = clips();
    for (input, ext) in [(&c.y4m, "y4m"), (&c.mp4, "mp4"), (&c.y4m, "mkv"), (&c.mp4, "y4m")] {
        let out = tmp(&format!("zero-frames.{ext}"));
        let _ = std::fs::remove_file(&out);
        let r = run(&["-q", input.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--frames", "0"]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{ext}: {stderr}");
        assert_eq!(stderr.trim(), "nlmdenoise: error: --frames must be at least 1", "{ext}");
        assert!(!out.exists(), "{ext}: no output file");
    }
    let r = run(&["--help"]);
    assert!(String::from_utf8_lossy(&r.stdout).contains("at least 1"), "--help states the rule");
}

/// The summary reads right and the same on both paths (#24): singular counts ("1 frame", "1
/// thread"), a discarded output said once, and up front when no output was named; the noise
/// estimates of -v labelled from 0 s on both paths; the summary gives the first and the last
/// estimate, not only the last.
#[test]
fn summaries_read_right_and_the_same_on_both_paths() {
    let (y4m, mp4) = (tmp("noisy3s.y4m"), tmp("noisy3s.mp4"));
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "3", "-vf", "noise=alls=30:allf=t", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m.to_str().unwrap()]);
    ffmpeg(&["-i", y4m.to_str().unwrap(), "-c:v", "libx264", "-crf", "8", "-pix_fmt", "yuv420p", mp4.to_str().unwrap()]);
    for input in [&y4m, &mp4] {
        let r = run(&["-v", input.to_str().unwrap(), "--backend", "cpu"]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{stderr}");
        let summary = stderr.find("nlmdenoise: 75 frames").unwrap_or_else(|| panic!("{stderr}"));
        let notice = stderr.find("no output named: the denoised video is discarded").unwrap_or_else(|| panic!("says that the output is discarded: {stderr}"));
        assert!(notice < summary, "up front: {stderr}");
        assert!(stderr.contains("  output: discarded\n") && !stderr.contains("(discarded)"), "{stderr}");
        let estimates: Vec<(&str, &str)> = stderr.lines().filter_map(|l| l.trim().split_once(" s: noise sigma estimate ")).collect();
        let labels: Vec<&str> = estimates.iter().map(|e| e.0).collect();
        assert_eq!(labels, ["0", "1", "2"], "one estimate per second of video from 0 s: {stderr}");
        let line = stderr.lines().find(|l| l.contains("noise sigma (estimated, 8-bit units): ")).unwrap_or_else(|| panic!("{stderr}"));
        let shown = line.split_once("units): ").unwrap().1;
        match shown.strip_prefix("first ").and_then(|s| s.split_once("; last ")) {
            Some((first, _last)) => assert_eq!(first, estimates[0].1, "{stderr}"),
            None => assert_eq!(shown, estimates[0].1, "one value only when the first and the last agree: {stderr}"),
        }

        let r = run(&["-q", input.to_str().unwrap(), "--backend", "cpu"]);
        assert!(r.status.success() && r.stderr.is_empty(), "-q stays quiet: {}", String::from_utf8_lossy(&r.stderr));
        let r = run(&[input.to_str().unwrap(), "-o", "/dev/null", "--backend", "cpu", "--threads", "1", "--frames", "1"]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(stderr.contains("nlmdenoise: 1 frame 160x120") && stderr.contains("cpu (1 thread)"), "{stderr}");
        assert!(!stderr.contains("1 frames") && !stderr.contains("1 threads"), "{stderr}");
        assert!(!stderr.contains("no output named"), "-o /dev/null asks for it: {stderr}");
    }
}

/// A parameter error is one line with one "invalid parameter:" prefix, first, the same on both
/// paths (#10): not "Invalid parameters: invalid parameter:", "denoising failed: Cannot process
/// ...: invalid parameter:" or "--device-id: invalid parameter:".
#[test]
fn parameter_errors_have_one_prefix_on_both_paths() {
    let c = clips();
    for input in [&c.y4m, &c.mp4] {
        for (args, what) in [
            (&["--chroma-mode", "joint"][..], "chroma-mode=joint needs a 4:4:4 or RGB format"),
            (&["--device-id", "x"][..], "devices 'x'"),
            (&["--threads", "9999"][..], "9999"),
            (&["--search-radius", "99"][..], "search radius 99 out of range"),
        ] {
            let r = run(&[&["-q", input.to_str().unwrap(), "-o", "/dev/null", "--backend", "cpu", "--frames", "2"][..], args].concat());
            let stderr = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(1), "{args:?}: {stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.starts_with("nlmdenoise: error: invalid parameter: "), "{args:?}: {stderr}");
            assert_eq!(stderr.to_lowercase().matches("invalid parameter").count(), 1, "{args:?}: one prefix: {stderr}");
            assert!(stderr.contains(what), "{args:?}: {stderr}");
        }
    }
}

/// A valid file whose audio outlasts its video (by 0.1 s here), or whose frame rate varies
/// (frames dropped), is complete: exit 0 with every frame written, not "incomplete input" with
/// exit 3 (#2). A cut file still is incomplete (a_truncated_mp4_...).
#[test]
fn longer_audio_and_variable_frame_rate_are_complete_inputs() {
    let (longer, vfr) = (tmp("audio-longer.mp4"), tmp("vfr.mp4"));
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25:duration=2",
        "-f",
        "lavfi",
        "-i",
        "sine=frequency=440:sample_rate=48000:duration=2.1",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "aac",
        longer.to_str().unwrap(),
    ]);
    // Frames 20..=40 dropped, the others keep their time stamps: 79 frames over 4 s.
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25:duration=4",
        "-vf",
        "select='not(between(n,20,40))'",
        "-fps_mode",
        "vfr",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        vfr.to_str().unwrap(),
    ]);
    for (input, frames) in [(&longer, 50), (&vfr, 79)] {
        assert_eq!(frames_of(input, "video"), frames);
        for ext in ["mp4", "mkv"] {
            let out = tmp(&format!("complete-out.{ext}"));
            let r = run(&["-y", "-q", input.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast"]);
            let stderr = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(0), "{}: {stderr}", input.display());
            assert_eq!(frames_of(&out, "video"), frames, "{}", input.display());
        }
    }
}

/// A strength the engine takes but the element's property range does not (below 0.01) is an
/// error on the GStreamer path, not a panic in set_property.
#[test]
fn a_strength_below_the_element_range_is_an_error_not_a_panic() {
    let c = clips();
    // The element's `strength` starts at 0 (0 = pass through), `chroma-strength` at 0.01.
    for args in [&["--chroma-strength", "0.001"][..], &["--scale", "2", "--chroma-strength", "0.001"][..]] {
        let r = run(&[&["-q", c.mp4.to_str().unwrap(), "-o", "/dev/null", "--backend", "cpu", "--frames", "2"][..], args].concat());
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("nlmdenoise: error: invalid parameter: ") && stderr.contains("0.001 out of range"), "{args:?}: {stderr}");
    }
}

/// An interrupt on the GStreamer path stops after the frame in progress: the frames queued in
/// front of the element (about a second of video) are not denoised first. With a window slow
/// enough that those frames would take seconds, the tool ends soon after the signal, and the
/// output is finished and plays.
#[test]
fn an_interrupt_does_not_denoise_the_queued_frames_first() {
    let long = tmp("long-queue.mkv");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "20", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", long.to_str().unwrap()]);
    let out = tmp("stopped-quickly.mkv");
    let _ = std::fs::remove_file(&out);
    // About 0.2 s a frame on 2 cores: the queued second of video would take about 5 s.
    let child = spawn(&["-y", "-q", "--backend", "cpu", "--sigma", "10", "--search-radius", "12", "--patch-radius", "4", "--temporal-past", "7"], &long, &out);
    let t = Instant::now();
    while !std::fs::metadata(&out).is_ok_and(|m| m.len() >= 2_000) && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let signalled = Instant::now();
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let r = child.wait_with_output().unwrap();
    let after = signalled.elapsed();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "{stderr}");
    assert!(after < Duration::from_millis(2500), "ended {after:?} after the signal: queued frames were denoised first");
    let streams = probe(&out).unwrap_or_else(|e| panic!("the interrupted output plays: {e}"));
    assert!(streams.iter().any(|s| s.0 == "video" && s.1 > 0), "{streams:?}");
}

/// With standard error not a terminal (a log, a pipe), a slow run prints a progress line every
/// `--stats-period` seconds on both paths (frames done, frames/s, time left); `-q` prints none.
#[test]
fn progress_lines_off_a_terminal() {
    let y4m = tmp("progress.y4m");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-frames:v", "24", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m.to_str().unwrap()]);
    let mkv = tmp("progress.mkv");
    ffmpeg(&["-i", y4m.to_str().unwrap(), "-c:v", "libx264", "-preset", "ultrafast", "-qp", "10", mkv.to_str().unwrap()]);
    let slow = ["--backend", "cpu", "--sigma", "10", "--search-radius", "12", "--patch-radius", "4", "--temporal-past", "7", "--stats-period", "0.3"];
    for input in [&y4m, &mkv] {
        let r = bin().arg("-y").args(slow).arg(input).args(["-o", "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{stderr}");
        let lines = stderr.lines().filter(|l| l.starts_with("nlmdenoise: ") && l.contains("/24 frames")).count();
        assert!(lines >= 2, "{}: progress lines in a log: {stderr}", input.display());
        let q = bin().arg("-y").arg("-q").args(slow).arg(input).args(["-o", "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        assert!(!String::from_utf8_lossy(&q.stderr).contains("/24 frames"), "quiet: no progress");
    }
}

/// Issue 33 item 8: an odd-sized 4:2:0 input to MP4 failed with "cannot decode the input: Can not
/// initialize x264 encoder"; now the size is named before anything runs, on both paths, and no
/// output is left. 4:4:4 takes odd sizes, and an upscaled output of an odd input is even.
#[test]
fn odd_sizes_to_h264_are_named_and_leave_no_output() {
    let y4m = tmp("odd420.y4m");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-vf", "scale=161:121", "-frames:v", "4", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m.to_str().unwrap()]);
    let mkv = tmp("odd420.mkv");
    ffmpeg(&["-i", y4m.to_str().unwrap(), "-c:v", "ffv1", mkv.to_str().unwrap()]);
    for input in [&y4m, &mkv] {
        let out = tmp("odd420-out.mp4");
        let _ = std::fs::remove_file(&out);
        let r = bin().args(["-y", "--backend", "cpu"]).arg(input).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{}: {stderr}", input.display());
        assert!(stderr.contains("needs an even width and height") && stderr.contains("161x121"), "{}: {stderr}", input.display());
        assert!(!stderr.contains("cannot decode"), "{stderr}");
        assert!(!out.exists(), "no output is left");
        let up = bin().args(["-y", "--backend", "cpu", "--scale", "2"]).arg(input).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
        assert!(up.status.success(), "x2 gives 322x242: {}", String::from_utf8_lossy(&up.stderr));
    }
    let y444 = tmp("odd444.y4m");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-vf", "scale=161:121", "-frames:v", "4", "-pix_fmt", "yuv444p", "-f", "yuv4mpegpipe", y444.to_str().unwrap()]);
    let out = tmp("odd444-out.mp4");
    let r = bin().args(["-y", "--backend", "cpu"]).arg(&y444).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(pix_fmt(&out), "yuv444p");
}

fn size_of(file: &Path) -> String {
    let out = Command::new("ffprobe").args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0"]).arg(file).output().expect("ffprobe runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Luma PSNR (dB) of two videos of the same size, frame by frame, from ffmpeg.
fn psnr_y(a: &Path, b: &Path) -> f64 {
    let out = Command::new("ffmpeg").args(["-v", "info", "-i"]).arg(a).arg("-i").arg(b).args(["-lavfi", "psnr", "-f", "null", "-"]).output().expect("ffmpeg runs");
    let text = String::from_utf8_lossy(&out.stderr);
    let y = text.split("PSNR y:").nth(1).unwrap_or_else(|| panic!("no PSNR in {text}"));
    y.split_whitespace().next().unwrap().parse().unwrap_or(f64::INFINITY)
}

/// Issue 33 item 6: a phone video (orientation tag) came out sideways. Encoded outputs are now
/// turned upright as ffmpeg does by default (the same picture as ffmpeg's autorotation), and
/// `--no-autorotate` keeps the frames as stored; the summary says which.
#[test]
fn rotated_inputs_come_out_upright_as_ffmpeg_does() {
    let plain = tmp("rot-plain.mp4");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=160x96:rate=25", "-frames:v", "6", "-c:v", "libx264", "-pix_fmt", "yuv420p", plain.to_str().unwrap()]);
    let rotated = tmp("rot-tagged.mp4");
    ffmpeg(&["-i", plain.to_str().unwrap(), "-c", "copy", "-metadata:s:v:0", "rotate=90", rotated.to_str().unwrap()]);
    let upright = tmp("rot-ffmpeg.y4m");
    ffmpeg(&["-i", rotated.to_str().unwrap(), "-pix_fmt", "yuv420p", upright.to_str().unwrap()]);
    assert_eq!(size_of(&upright), "96,160", "ffmpeg turns it upright");
    for ext in ["mp4", "mkv"] {
        let out = tmp(&format!("rot-out.{ext}"));
        let r = bin().args(["-y", "--backend", "cpu", "--strength", "0.01"]).arg(&rotated).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{stderr}");
        assert_eq!(size_of(&out), "96,160", "{ext}: upright");
        let psnr = psnr_y(&upright, &out);
        assert!(psnr > 35.0, "{ext}: turned the way ffmpeg turns it ({psnr:.1} dB)");
        assert!(stderr.contains("orientation tag says rotate-") && stderr.contains("turned upright"), "{stderr}");
    }
    let out = tmp("rot-stored.mp4");
    let r = bin().args(["-y", "--backend", "cpu", "--no-autorotate"]).arg(&rotated).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
    assert!(r.status.success());
    assert_eq!(size_of(&out), "160,96", "--no-autorotate: as stored");
    assert!(String::from_utf8_lossy(&r.stderr).contains("--no-autorotate: the frames are as stored"));
    // No tag, no note and no change.
    let out = tmp("rot-none.mp4");
    let r = bin().args(["-y", "--backend", "cpu"]).arg(&plain).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
    assert!(r.status.success() && !String::from_utf8_lossy(&r.stderr).contains("orientation"));
    assert_eq!(size_of(&out), "160,96");
}

/// Issue 33 item 11: options the algorithm does not read were silent, and `--algorithm nlm-sr
/// --scale 1` upscaled x2. Now: a note per unused option, once, on both paths (the element's own
/// warning is not repeated), none with -q; contradictions are usage errors.
#[test]
fn unused_options_get_a_note_and_contradictions_an_error() {
    let y4m = tmp("notes.y4m");
    ffmpeg(&["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-frames:v", "3", "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m.to_str().unwrap()]);
    let mkv = tmp("notes.mkv");
    ffmpeg(&["-i", y4m.to_str().unwrap(), "-c:v", "ffv1", mkv.to_str().unwrap()]);
    for input in [&y4m, &mkv] {
        let r = bin().args(["-y", "--backend", "cpu", "--bm3d-profile", "high", "--sr-iterations", "2", "--wref", "0.5"]).arg(input).args(["-o", "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{stderr}");
        assert_eq!(stderr.matches("does nothing with algorithm").count(), 2, "{stderr}");
        assert!(stderr.contains("note: --bm3d-profile does nothing with algorithm nlm"), "{stderr}");
        assert!(stderr.contains("note: --sr-iterations does nothing with algorithm nlm"), "{stderr}");
        let r = bin()
            .args(["-y", "--backend", "cpu", "--algorithm", "bm3d", "--search-radius", "4", "--weighting", "bisquare"])
            .arg(input)
            .args(["-o", "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{stderr}");
        assert_eq!(stderr.matches("does nothing with algorithm bm3d").count(), 2, "{stderr}");
        let q = bin().args(["-y", "-q", "--backend", "cpu", "--bm3d-profile", "high"]).arg(input).args(["-o", "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        assert!(q.status.success() && !String::from_utf8_lossy(&q.stderr).contains("does nothing"));
    }
    for contradiction in [&["--algorithm", "nlm-sr", "--scale", "1"][..], &["--algorithm", "bm3d", "--scale", "2"], &["--algorithm", "nlm", "--scale", "3"]] {
        let r = bin().args(["-y", "--backend", "cpu"]).args(contradiction).arg(&y4m).args(["-o", "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{contradiction:?}: {stderr}");
        assert!(stderr.contains("--scale") && stderr.contains("--algorithm"), "{stderr}");
    }
    // The ways that agree still work.
    for fine in [&["--algorithm", "nlm-sr"][..], &["--scale", "2"], &["--algorithm", "nlm-sr", "--scale", "2"], &["--algorithm", "bm3d", "--scale", "1"]] {
        let r = bin().args(["-y", "--backend", "cpu"]).args(fine).arg(&y4m).args(["-o", "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        assert!(r.status.success(), "{fine:?}: {}", String::from_utf8_lossy(&r.stderr));
    }
}

/// The video frames ffprobe decodes from `file`, as a player counts them (an MP4 edit list
/// applies); None when it cannot open it.
fn video_samples(file: &Path) -> Option<u64> {
    let out =
        Command::new("ffprobe").args(["-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"]).arg(file).output().expect("ffprobe runs");
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Issue 34's first check: an MP4 cut so that only its first frame decodes left an output no
/// player opens (a track the muxer never got data for) while the tool said it held every frame.
/// Now, cut every 2 KB: either no output and an error, or an output that ffprobe opens whose
/// video samples are the count the message gives.
#[test]
fn a_cut_input_leaves_no_output_or_one_that_plays_with_the_frames_it_says() {
    // The same clip three ways: MP4 with its index in front (cut every 2 KB), MP4 with its index
    // at the end (every cut loses it) and Matroska (cut every 4 KB).
    let (tail, mkv) = (tmp("clip-index-at-end.mp4"), tmp("clip.mkv"));
    ffmpeg(&["-i", clips().mp4.to_str().unwrap(), "-c", "copy", tail.to_str().unwrap()]);
    ffmpeg(&["-i", clips().mp4.to_str().unwrap(), "-c", "copy", mkv.to_str().unwrap()]);
    for (src, step, ext, some_kept) in [(&clips().mp4, 2048, "mp4", true), (&tail, 8192, "mp4", false), (&mkv, 4096, "mkv", true)] {
        let len = std::fs::metadata(src).unwrap().len() as usize;
        let (mut kept, mut removed) = (0, 0);
        for bytes in (2048..len).step_by(step) {
            let what = format!("{} cut at {bytes} bytes", src.display());
            let input = cut(src, bytes, &format!("cut-any.{ext}"));
            let out = tmp("cut-any-out.mp4");
            let _ = std::fs::remove_file(&out);
            let r = bin().args(["-y", "--backend", "cpu"]).arg(&input).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
            let stderr = String::from_utf8_lossy(&r.stderr);
            if !out.exists() {
                assert_ne!(r.status.code(), Some(0), "{what}: no output, yet success: {stderr}");
                removed += 1;
                continue;
            }
            kept += 1;
            let samples = video_samples(&out).unwrap_or_else(|| panic!("{what}: the kept output does not open: {stderr}"));
            let said: u64 = match r.status.code() {
                Some(3) => stderr.split("the output holds ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{what}: {stderr}")),
                Some(0) => stderr.split("nlmdenoise: ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{what}: {stderr}")),
                c => panic!("{what}: exit {c:?} with an output kept: {stderr}"),
            };
            assert_eq!(samples, said, "{what}: frames in the output against the message: {stderr}");
        }
        eprintln!("{}: {kept} kept, {removed} removed", src.display());
        assert!(removed > 0 && (kept > 0) == some_kept, "{}: {kept} kept, {removed} removed", src.display());
    }
}

/// Issue 34's check at 640x360 (scripts/cut_check) found a cut whose decoder lost the frame
/// before the last one it gave: the output's last sample then lies past the end of the MP4's
/// edit list (mp4mux ends it one B-frame delay early when the times have a gap), so players show
/// one frame fewer than the file holds, while the tool counted samples and said 30. The count the
/// tool gives is now the frames that play (the demuxer's segment applied).
#[test]
fn a_frame_past_the_edit_list_is_not_counted_as_kept() {
    let (src, out) = (tmp("cut640.mp4"), tmp("cut640-out.mp4"));
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=640x360:r=25:d=4",
        "-f",
        "lavfi",
        "-i",
        "sine=f=440:d=4",
        "-c:v",
        "libx264",
        "-preset",
        "medium",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "aac",
        "-movflags",
        "+faststart",
        src.to_str().unwrap(),
    ]);
    let input = cut(&src, 131072, "cut640-131072.mp4");
    let _ = std::fs::remove_file(&out);
    let r = bin().args(["-y", "--backend", "cpu", "--sigma", "10"]).arg(&input).arg("-o").arg(&out).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{stderr}");
    let samples = {
        let o = Command::new("ffprobe").args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=nb_frames", "-of", "csv=p=0"]).arg(&out).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse::<u64>().unwrap()
    };
    let plays = video_samples(&out).expect("the output opens");
    // The case itself: one sample more than a player shows (if this fails, the encoder's output
    // changed and the cut no longer makes the case: find another cut with scripts/cut_check).
    assert_eq!(samples, plays + 1, "{stderr}");
    let said: u64 = stderr.split("the output holds ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(said, plays, "{stderr}");
}

/// A damaged input can stall GStreamer's demuxer before its first picture without posting an
/// error: scripts/fuzz_media found an MP4 cut inside its index that hung the tool (now and then,
/// under load), and an interrupt could not end it (the end of stream waits for a frame). A pipe
/// that delivers the head of an MP4 and then nothing stalls the same way, every time: the tool
/// gives up after --stall-timeout (exit 1, no output), and an interrupt ends a stalled run within
/// seconds (before: both waited until the pipe closed, 40 s here).
#[test]
fn a_stalled_input_ends_the_run() {
    use std::io::Write;
    let head = std::fs::read(&clips().mp4).unwrap()[..321].to_vec();
    for interrupt in [false, true] {
        let fifo = tmp(if interrupt { "stalled-int.mp4" } else { "stalled.mp4" });
        let out = tmp(if interrupt { "stalled-int-out.mp4" } else { "stalled-out.mp4" });
        let _ = std::fs::remove_file(&fifo);
        let _ = std::fs::remove_file(&out);
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (path, data) = (fifo.clone(), head.clone());
        // Writes the head and holds the pipe open (detached: the test does not wait for it).
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            // The tool may close the pipe first (a refused format): not this thread's concern.
            let _ = f.write_all(&data);
            std::thread::sleep(Duration::from_secs(40));
        });
        let stall = if interrupt { "60" } else { "2" };
        let t = Instant::now();
        let mut child = spawn(&["-y", "-q", "--backend", "cpu", "--sigma", "10", "--stall-timeout", stall], &fifo, &out);
        if interrupt {
            std::thread::sleep(Duration::from_millis(1500));
            Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
        }
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("interrupt {interrupt}: still running after 20 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!("interrupt {interrupt}: {:.1} s, {:?}: {err}", t.elapsed().as_secs_f64(), o.status.code());
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!out.exists(), "an output holding no frame was left");
        if !interrupt {
            // The demuxer stalls on the head and the stall timeout ends the run; or, now that the
            // pipe reaches GStreamer from its first byte (the y4m check no longer reads it),
            // typefinding in push mode sometimes refuses the cut header at once. Either way: exit 1,
            // a message, no output.
            assert!((err.contains("no picture came out") && err.contains("--stall-timeout")) || err.contains("cannot decode"), "{err}");
        }
    }
}

/// A named pipe (a FIFO, or a shell's process substitution) is read as y4m without peeking: the
/// check for the y4m signature used to read its first 9 bytes and lose them.
#[test]
fn a_fifo_input_loses_no_byte() {
    use std::io::Write;
    let data = std::fs::read(&clips().y4m).unwrap();
    let (fifo, out, reference) = (tmp("whole-pipe"), tmp("whole-fifo-out.y4m"), tmp("whole-file-out.y4m"));
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let path = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let _ = f.write_all(&data);
    });
    let args = ["-y", "-q", "--backend", "cpu", "--sigma", "10"];
    let o = spawn(&args, &fifo, &out).wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = spawn(&args, &clips().y4m, &reference).wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap());
}

/// An interrupt that comes before the first frame leaves nothing behind (exit 1, "nothing
/// usable"), and is not held back by a pipe that sends nothing: before, the run waited for the
/// pipe to close and kept a y4m file of a header only (exit 4).
#[test]
fn an_interrupt_before_the_first_frame_leaves_no_output() {
    use std::io::Write;
    let header = std::fs::read(&clips().y4m).unwrap().split(|&b| b == b'\n').next().unwrap().to_vec();
    let (fifo, out) = (tmp("header-only-pipe.y4m"), tmp("header-only-out.y4m"));
    let _ = std::fs::remove_file(&fifo);
    let _ = std::fs::remove_file(&out);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let path = fifo.clone();
    // The header, then a pipe held open with nothing more for 30 s (detached).
    std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(&header).unwrap();
        f.write_all(b"\n").unwrap();
        std::thread::sleep(Duration::from_secs(30));
    });
    let t = Instant::now();
    let child = spawn(&["-y", "--backend", "cpu", "--sigma", "10"], &fifo, &out);
    std::thread::sleep(Duration::from_millis(1000));
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(t.elapsed() < Duration::from_secs(10), "the interrupt waited for the pipe: {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing usable"), "{err}");
    assert!(!out.exists(), "an output of no frame was left");
}

/// A cut in the input (testsrc2, then mandelbrot): the summary counts it on both paths, and says
/// nothing of cuts with the test off (`--scene-cut 0`) or where there is none.
#[test]
fn the_summary_counts_scene_cuts_on_both_paths() {
    let (y4m, mp4) = (tmp("cut2s.y4m"), tmp("cut2s.mp4"));
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25:duration=1",
        "-f",
        "lavfi",
        "-i",
        "mandelbrot=size=160x120:rate=25",
        "-filter_complex",
        "[1]trim=duration=1,setpts=PTS-STARTPTS[m];[0][m]concat=n=2:v=1",
        "-pix_fmt",
        "yuv420p",
        "-f",
        "yuv4mpegpipe",
        y4m.to_str().unwrap(),
    ]);
    ffmpeg(&["-i", y4m.to_str().unwrap(), "-c:v", "libx264", "-crf", "8", "-pix_fmt", "yuv420p", mp4.to_str().unwrap()]);
    for input in [&y4m, &mp4] {
        let stderr_of = |extra: &[&str]| {
            let r = run(&[&[input.to_str().unwrap(), "-o", "/dev/null", "--backend", "cpu", "--temporal-future", "0"][..], extra].concat());
            let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
            assert!(r.status.success(), "{stderr}");
            stderr
        };
        let on = stderr_of(&[]);
        assert!(on.contains("\n  scene cuts: 1 (no frame takes anything from a frame across one; --scene-cut)\n"), "{}: {on}", input.display());
        let off = stderr_of(&["--scene-cut", "0"]);
        assert!(!off.contains("scene cuts"), "{}: {off}", input.display());
    }
}
