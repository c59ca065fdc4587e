//! The command-line tool on encoded files (the GStreamer path): a short H.264 + AAC clip made
//! with gst-launch-1.0 from a noisy test pattern, denoised to MP4, Matroska and y4m; error
//! messages for bad input.
//!
//! Needs gst-launch-1.0 with x264enc (gstreamer1.0-plugins-ugly), avenc_aac (gstreamer1.0-libav),
//! opusenc and the base/good plugins (scripts/install-deps.sh installs them).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-media");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The tool, overwriting outputs left by earlier runs (-y).
fn cli() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nlmdenoise"));
    c.arg("-y");
    c
}

const W: usize = 128;
const H: usize = 96;
const FRAMES: usize = 12;

fn gst_launch(desc: &str) {
    let out = Command::new("gst-launch-1.0").arg("-q").args(desc.split_whitespace()).output().expect("gst-launch-1.0 runs");
    assert!(out.status.success(), "gst-launch-1.0 {desc}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The clean clip (y4m: the reference) and the same frames with seeded Gaussian noise, as y4m and
/// encoded almost losslessly (x264 quantizer 8) into MP4 with a sine audio track.
struct Clips {
    clean: PathBuf,
    noisy_mp4: PathBuf,
    noisy_y4m: PathBuf,
}

fn clips() -> &'static Clips {
    static CLIPS: OnceLock<Clips> = OnceLock::new();
    CLIPS.get_or_init(|| {
        let clean = tmp("clean.y4m");
        gst_launch(&format!(
            "videotestsrc num-buffers={FRAMES} pattern=ball motion=sweep ! video/x-raw,format=I420,width={W},height={H},framerate=25/1 ! y4menc ! filesink location={}",
            clean.display()
        ));
        let noisy_y4m = tmp("noisy.y4m");
        add_noise(&clean, &noisy_y4m, 12.0, 7);
        // base/good have no y4m demuxer: rawvideoparse reads the bare frames.
        let raw = tmp("noisy.yuv");
        std::fs::write(&raw, strip_y4m(&std::fs::read(&noisy_y4m).unwrap())).unwrap();
        let noisy_mp4 = tmp("noisy.mp4");
        gst_launch(&format!(
            "filesrc location={} ! rawvideoparse width={W} height={H} format=i420 framerate=25/1 ! x264enc pass=quant quantizer=8 speed-preset=ultrafast ! queue ! mp4mux name=m ! filesink location={} \
             audiotestsrc num-buffers=24 samplesperbuffer=1000 ! audio/x-raw,rate=48000,channels=2 ! audioconvert ! avenc_aac ! queue ! m.",
            raw.display(),
            noisy_mp4.display()
        ));
        Clips { clean, noisy_mp4, noisy_y4m }
    })
}

/// Deterministic Gaussian-ish noise (sum of uniforms) on every sample of an 8-bit y4m file.
fn add_noise(src: &Path, dst: &Path, sigma: f64, seed: u64) {
    let data = std::fs::read(src).unwrap();
    let header_end = data.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut out = data[..header_end].to_vec();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut uniform = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 11) as f64) / ((1u64 << 53) as f64)
    };
    let frame = W * H * 3 / 2;
    let mut pos = header_end;
    while pos < data.len() {
        let line_end = pos + data[pos..].iter().position(|&b| b == b'\n').unwrap() + 1;
        out.extend_from_slice(&data[pos..line_end]);
        for &v in &data[line_end..line_end + frame] {
            // Irwin-Hall with 12 terms: mean 6, variance 1.
            let g: f64 = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
            out.push((v as f64 + sigma * g).round().clamp(0.0, 255.0) as u8);
        }
        pos = line_end + frame;
    }
    std::fs::write(dst, out).unwrap();
}

/// The planes of an 8-bit 4:2:0 y4m stream without header and FRAME lines.
fn strip_y4m(data: &[u8]) -> Vec<u8> {
    let frame = W * H * 3 / 2;
    let mut pos = data.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut out = Vec::new();
    while pos < data.len() {
        pos += data[pos..].iter().position(|&b| b == b'\n').unwrap() + 1;
        out.extend_from_slice(&data[pos..pos + frame]);
        pos += frame;
    }
    out
}

/// Decodes a file's video to raw I420 frames (ffmpeg: independent of the tool under test).
fn decode_to_i420(file: &Path) -> Vec<u8> {
    let out = Command::new("ffmpeg").args(["-v", "error", "-i"]).arg(file).args(["-map", "0:v", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]).output().expect("ffmpeg runs");
    assert!(out.status.success(), "ffmpeg -i {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// PSNR of the luma planes of two I420 sequences (same length).
fn psnr_y(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len(), "sequences differ in length");
    let frame = W * H * 3 / 2;
    let (mut sse, mut n) = (0f64, 0usize);
    for (fa, fb) in a.chunks_exact(frame).zip(b.chunks_exact(frame)) {
        for (x, y) in fa[..W * H].iter().zip(&fb[..W * H]) {
            sse += (*x as f64 - *y as f64).powi(2);
            n += 1;
        }
    }
    10.0 * (255.0f64 * 255.0 / (sse / n as f64)).log10()
}

/// Codec names of the streams in a file ("h264,aac"), from ffprobe.
fn streams(file: &Path) -> String {
    let out = Command::new("ffprobe").args(["-v", "error", "-show_entries", "stream=codec_type,codec_name", "-of", "csv=p=0"]).arg(file).output().expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(";")
}

fn run(args: &[&str]) -> Output {
    let out = cli().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

#[test]
fn mp4_in_mp4_out_keeps_audio_frames_and_size_and_denoises() {
    let c = clips();
    let out = tmp("denoised.mp4");
    let result = run(&[c.noisy_mp4.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu", "--sigma", "12", "--crf", "10", "--preset", "ultrafast"]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    // Summary: frames, size, backend, input and output.
    assert!(stderr.contains(&format!("nlmdenoise: {FRAMES} frames {W}x{H} I420")), "{stderr}");
    assert!(stderr.contains("backend: cpu"), "{stderr}");
    assert!(stderr.contains("audio 48000 Hz 2 ch, re-encoded"), "{stderr}");
    assert!(stderr.contains("AAC 128 kbit/s in MP4"), "{stderr}");

    // One H.264 video and one AAC audio stream.
    assert_eq!(streams(&out), "h264,video;aac,audio");

    let clean = strip_y4m(&std::fs::read(&c.clean).unwrap());
    let noisy = decode_to_i420(&c.noisy_mp4);
    let denoised = decode_to_i420(&out);
    assert_eq!(denoised.len(), clean.len(), "frame count or size changed");
    let (before, after) = (psnr_y(&noisy, &clean), psnr_y(&denoised, &clean));
    eprintln!("PSNR-Y against the clean clip: noisy {before:.2} dB, denoised {after:.2} dB");
    assert!(after > before + 3.0, "no denoising: {before:.2} -> {after:.2} dB");
}

#[test]
fn mkv_and_y4m_outputs() {
    let c = clips();
    let mkv = tmp("denoised.mkv");
    let result = run(&[c.noisy_mp4.to_str().unwrap(), mkv.to_str().unwrap(), "--backend", "cpu", "-q", "--preset", "ultrafast"]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    assert_eq!(streams(&mkv), "h264,video;opus,audio");
    assert_eq!(decode_to_i420(&mkv).len(), W * H * 3 / 2 * FRAMES);

    // Encoded input, y4m output: the audio is dropped, every frame is written.
    let y4m = tmp("decoded-denoised.y4m");
    let result = run(&["-i", c.noisy_mp4.to_str().unwrap(), "-o", y4m.to_str().unwrap(), "--backend", "cpu", "--frames", "5"]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(stderr.contains("dropped"), "{stderr}");
    let data = std::fs::read(&y4m).unwrap();
    let header = String::from_utf8_lossy(&data[..data.iter().position(|&b| b == b'\n').unwrap()]).to_string();
    assert!(header.starts_with("YUV4MPEG2 ") && header.contains(&format!(" W{W} H{H} ")), "{header}");
    assert_eq!(data.windows(6).filter(|w| w == b"FRAME\n").count(), 5, "--frames 5");

    // y4m input, MP4 output (appsrc path): no audio, every frame.
    let mp4 = tmp("from-y4m.mp4");
    let result = run(&[c.noisy_y4m.to_str().unwrap(), mp4.to_str().unwrap(), "--backend", "cpu", "--sigma", "12", "--crf", "10"]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(stderr.contains("no audio"), "{stderr}");
    let clean = strip_y4m(&std::fs::read(&c.clean).unwrap());
    let denoised = decode_to_i420(&mp4);
    assert_eq!(denoised.len(), clean.len());
    let noisy = strip_y4m(&std::fs::read(&c.noisy_y4m).unwrap());
    assert!(psnr_y(&denoised, &clean) > psnr_y(&noisy, &clean) + 3.0);
}

/// --scale on an encoded file: the GStreamer path with the nlmupscale element; audio kept, every
/// frame at twice the size, the summary names both sizes.
#[test]
fn scale_upscales_an_encoded_file() {
    let c = clips();
    let out = tmp("upscaled.mp4");
    let result = run(&[
        c.noisy_mp4.to_str().unwrap(),
        out.to_str().unwrap(),
        "--backend",
        "cpu",
        "--scale",
        "2",
        "--temporal-future",
        "0",
        "--search-radius",
        "1",
        "--patch-radius",
        "1",
        "--preset",
        "ultrafast",
    ]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("{FRAMES} frames {W}x{H} -> {}x{}", 2 * W, 2 * H)), "{stderr}");
    assert_eq!(streams(&out), "h264,video;aac,audio");
    assert_eq!(decode_to_i420(&out).len(), 4 * W * H * 3 / 2 * FRAMES, "{FRAMES} frames of {}x{}", 2 * W, 2 * H);
}

#[test]
fn bad_inputs_fail_with_a_message_and_exit_code() {
    let check = |args: &[&str], expect: &str| {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: expected '{expect}' in: {stderr}");
    };
    let junk = tmp("junk.mp4");
    std::fs::write(&junk, vec![0x5Au8; 4096]).unwrap();
    let out = tmp("never.mp4");
    let _ = std::fs::remove_file(&out);
    check(&[junk.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu"], "cannot decode");
    assert!(!out.exists(), "a failed run leaves no output file behind");
    check(&["/nonexistent/in.mp4", out.to_str().unwrap()], "cannot open input '/nonexistent/in.mp4'");
    check(&[clips().noisy_mp4.to_str().unwrap(), tmp("out.avi").to_str().unwrap()], "name it .mp4, .mkv or .y4m");
    check(&[clips().noisy_mp4.to_str().unwrap(), out.to_str().unwrap(), "--backend", "reference"], "reference");
    // A container without an output is refused (it used to panic for mp4/mkv and write y4m to
    // standard output).
    check(&[clips().noisy_mp4.to_str().unwrap(), "--container", "mp4"], "--container needs an output");
    check(&[clips().noisy_mp4.to_str().unwrap(), "--container", "y4m"], "--container needs an output");

    // Audio only: no video stream.
    let audio = tmp("audio-only.mka");
    gst_launch(&format!("audiotestsrc num-buffers=10 ! audioconvert ! opusenc ! matroskamux ! filesink location={}", audio.display()));
    check(&[audio.to_str().unwrap(), out.to_str().unwrap(), "--backend", "cpu"], "no video stream");
}

/// `-o -` with an encoded container writes to standard output (a pipe: fragmented MP4, Matroska)
/// and never a file named `-` (it used to write `./-` while the summary said standard output).
#[test]
fn encoded_containers_stream_to_standard_output() {
    let c = clips();
    let dir = tmp("stdout-cwd");
    std::fs::create_dir_all(&dir).unwrap();
    for (container, audio) in [("mp4", "aac"), ("mkv", "opus")] {
        let _ = std::fs::remove_file(dir.join("-"));
        let result = cli()
            .current_dir(&dir)
            .args([c.noisy_mp4.to_str().unwrap(), "-o", "-", "--container", container, "--backend", "cpu", "--preset", "ultrafast"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(result.status.success(), "{container}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!dir.join("-").exists(), "{container}: a file named '-' was written");
        assert!(stderr.contains("output: standard output"), "{container}: {stderr}");
        let file = tmp(&format!("from-stdout.{container}"));
        std::fs::write(&file, &result.stdout).unwrap();
        assert_eq!(streams(&file), format!("h264,video;{audio},audio"), "{container}");
        assert_eq!(decode_to_i420(&file).len(), W * H * 3 / 2 * FRAMES, "{container}: every frame");
    }
}

/// y4m on standard input with an encoded output goes through the appsrc path like a y4m file
/// (it was refused: "standard input must be y4m"); every frame, no audio.
#[test]
fn y4m_on_standard_input_into_encoded_containers() {
    use std::io::Write;
    let c = clips();
    let data = std::fs::read(&c.noisy_y4m).unwrap();
    for ext in ["mp4", "mkv"] {
        let out = tmp(&format!("from-stdin.{ext}"));
        let _ = std::fs::remove_file(&out);
        let mut child =
            cli().args(["-i", "-", "-o", out.to_str().unwrap(), "--backend", "cpu", "--preset", "ultrafast"]).stdin(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feed = {
            let data = data.clone();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&data);
            })
        };
        let result = child.wait_with_output().unwrap();
        feed.join().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(result.status.success(), "{ext}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains("input:  standard input"), "{ext}: {stderr}");
        assert_eq!(streams(&out), "h264,video", "{ext}");
        assert_eq!(decode_to_i420(&out).len(), W * H * 3 / 2 * FRAMES, "{ext}: every frame");
    }
}

/// MPEG transport streams and raw H.264 elementary streams decode after the install script (it
/// installs the plugins they need: tsdemux and h264parse are in gstreamer1.0-plugins-bad), with
/// every frame out.
#[test]
fn transport_streams_and_raw_h264_inputs() {
    let c = clips();
    for (ext, args) in [("ts", &["-c:v", "libx264", "-qp", "8", "-preset", "ultrafast", "-f", "mpegts"][..]), ("h264", &["-c:v", "libx264", "-qp", "8", "-preset", "ultrafast", "-f", "h264"][..])] {
        let input = tmp(&format!("noisy.{ext}"));
        let st = Command::new("ffmpeg").args(["-hide_banner", "-loglevel", "error", "-y", "-i"]).arg(&c.noisy_y4m).args(args).arg(&input).status().unwrap();
        assert!(st.success(), "ffmpeg made the {ext} input");
        let out = tmp(&format!("from-{ext}.y4m"));
        let r = run(&[input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--backend", "cpu", "--sigma", "12"]);
        assert!(r.status.success(), "{ext}: {}", String::from_utf8_lossy(&r.stderr));
        let frames = std::fs::read(&out).unwrap().windows(6).filter(|w| w == b"FRAME\n" || w == b"FRAME ").count();
        assert_eq!(frames, FRAMES, "{ext}: every frame out");
    }
}

/// An input with two audio tracks: the output keeps the first, and the summary says that the
/// other was dropped (it used to go without a word).
#[test]
fn extra_audio_tracks_are_named_when_dropped() {
    let c = clips();
    let input = tmp("two-audio.mkv");
    let st = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-i"])
        .arg(&c.noisy_mp4)
        .args(["-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=0.5", "-map", "0:v", "-map", "0:a", "-map", "1:a", "-c:v", "copy", "-c:a", "libopus", "-shortest"])
        .arg(&input)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(streams(&input).matches("audio").count(), 2, "the input has two audio tracks");
    let out = tmp("one-audio.mkv");
    let r = run(&[input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--backend", "cpu", "--sigma", "12"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert_eq!(streams(&out).matches("audio").count(), 1, "one audio track kept");
    assert!(stderr.contains("1 more audio track dropped: only the first is kept"), "{stderr}");
    assert!(stderr.contains("Opus"), "the kept track is described as encoded: {stderr}");
}

/// A 10-bit input written to y4m through the GStreamer path keeps its depth (`C420p10`, samples
/// beyond 8 bits) and an 8-bit 4:2:2 one its subsampling (`C422`); both as the input's frames
/// decoded by ffmpeg, denoised (close to them, not a different scale).
#[test]
fn y4m_output_keeps_depth_and_subsampling() {
    for (pix, tag, bytes_per_frame) in [("yuv420p10le", "C420p10", 64 * 48 * 3), ("yuv422p", "C422", 64 * 48 * 2)] {
        let input = tmp(&format!("depth-{pix}.mkv"));
        let st = Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-frames:v", "4", "-c:v", "libx264", "-qp", "0", "-pix_fmt", pix])
            .arg(&input)
            .status()
            .unwrap();
        assert!(st.success());
        let out = tmp(&format!("depth-{pix}.y4m"));
        let r = run(&[input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--backend", "cpu", "--sigma", "2"]);
        assert!(r.status.success(), "{pix}: {}", String::from_utf8_lossy(&r.stderr));
        let data = std::fs::read(&out).unwrap();
        let header = String::from_utf8_lossy(&data[..data.iter().position(|&b| b == b'\n').unwrap()]).to_string();
        assert!(header.split(' ').any(|t| t == tag), "{pix}: header {header}");
        // The frames: after the header, each "FRAME\n" and `bytes_per_frame` bytes.
        let mut pos = header.len() + 1;
        let mut frames = Vec::new();
        while pos < data.len() {
            assert_eq!(&data[pos..pos + 6], b"FRAME\n", "{pix}: a frame line at byte {pos}");
            frames.extend_from_slice(&data[pos + 6..pos + 6 + bytes_per_frame]);
            pos += 6 + bytes_per_frame;
        }
        assert_eq!(frames.len(), 4 * bytes_per_frame, "{pix}: four frames of the input's size");
        if pix.ends_with("10le") {
            let max = frames.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).max().unwrap();
            assert!(max > 255 && max < 1024, "{pix}: 10-bit samples (max {max})");
        }
    }
}
