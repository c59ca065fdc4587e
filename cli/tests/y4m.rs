//! The command-line tool's native y4m path on every y4m colour space it reads: byte-exact round
//! trips at vanishing strength, pipes, --frames, per-frame parameters, error messages. (Moved from
//! tests/formats.rs with the tool.)

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("formats-cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The tool, overwriting outputs left by earlier runs (-y).
fn cli() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nlmdenoise"));
    c.arg("-y");
    c
}

/// A y4m stream of `frames` noisy frames. `bits` > 8 writes 16-bit little-endian samples.
fn y4m_stream(colorspace: &str, w: usize, h: usize, frames: usize, bits: u32, seed: u64) -> Vec<u8> {
    let (cw, ch, nplanes) = match colorspace {
        c if c.starts_with("420") => (w.div_ceil(2), h.div_ceil(2), 3),
        c if c.starts_with("422") => (w.div_ceil(2), h, 3),
        c if c.starts_with("444") => (w, h, 3),
        _ => (0, 0, 1),
    };
    let max = (1u32 << bits) - 1;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut v = format!("YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C{colorspace}\n").into_bytes();
    for f in 0..frames {
        v.extend_from_slice(b"FRAME\n");
        for p in 0..nplanes {
            let (pw, ph) = if p == 0 { (w, h) } else { (cw, ch) };
            for y in 0..ph {
                for x in 0..pw {
                    let base = 0.25 + 0.03 * x as f64 + 0.02 * y as f64 + 0.01 * f as f64;
                    let s = ((base + rng.random_range(-0.1..0.1)).clamp(0.0, 1.0) * max as f64).round() as u32;
                    if bits > 8 {
                        v.extend_from_slice(&(s as u16).to_le_bytes());
                    } else {
                        v.push(s as u8);
                    }
                }
            }
        }
    }
    v
}

#[test]
fn cli_round_trips_every_y4m_colour_space() {
    let cases = [("420jpeg", 8), ("420mpeg2", 8), ("420paldv", 8), ("422", 8), ("444", 8), ("mono", 8), ("420p10", 10), ("444p10", 10), ("444p16", 16), ("mono16", 16), ("mono12", 12)];
    for (cs, bits) in cases {
        let input = y4m_stream(cs, 9, 7, 4, bits, 5);
        let (inp, out) = (tmp(&format!("in-{cs}.y4m")), tmp(&format!("out-{cs}.y4m")));
        std::fs::write(&inp, &input).unwrap();
        // Vanishing strength: the output file is the input file, byte for byte.
        let status = cli()
            .args(["-q", "--backend", "reference", "--strength", "0.001", "--chroma-strength", "0.001", "--temporal-future", "1", "--search-radius", "2", "--patch-radius", "1", "-i"])
            .arg(&inp)
            .arg("-o")
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success(), "{cs}");
        assert!(std::fs::read(&out).unwrap() == input, "C{cs}: vanishing strength must return the input file");
        // Real strength: same header and size, different samples, PSNR lines printed.
        let result =
            cli().args(["--backend", "reference", "--strength", "20", "--search-radius", "2", "--patch-radius", "1", "-i"]).arg(&inp).arg("-o").arg(&out).arg("--psnr-ref").arg(&inp).output().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(result.status.success(), "{cs}: {stderr}");
        let denoised = std::fs::read(&out).unwrap();
        assert_eq!(denoised.len(), input.len(), "{cs}");
        assert_eq!(denoised[..40], input[..40], "{cs}: header");
        assert_ne!(denoised, input, "{cs}: nothing denoised");
        assert!(stderr.contains("4 frames 9x7"), "{cs}: summary missing: {stderr}");
        assert!(stderr.contains("PSNR input  vs reference: Y inf dB"), "{cs}: {stderr}");
        assert!(stderr.contains("PSNR output vs reference: Y "), "{cs}: {stderr}");
    }
}

#[test]
fn cli_pipes_limits_frames_and_keeps_frame_parameters() {
    let mut input = y4m_stream("420jpeg", 6, 4, 3, 8, 9);
    // Give the second frame a frame-line parameter: it must be written back on that frame.
    let pos = input.windows(6).enumerate().filter(|(_, w)| w == b"FRAME\n").nth(1).unwrap().0;
    input.splice(pos..pos + 6, b"FRAME Ixyz\n".iter().copied());
    let mut child = cli()
        .args(["-i", "-", "-o", "-", "--backend", "reference", "--temporal-future", "2", "--search-radius", "1", "--patch-radius", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let result = child.wait_with_output().unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    assert_eq!(result.stdout.len(), input.len());
    assert_eq!(result.stdout.windows(11).filter(|w| w == b"FRAME Ixyz\n").count(), 1);
    assert_eq!(result.stdout.windows(6).filter(|w| w == b"FRAME\n").count(), 2);

    let (inp, out) = (tmp("limit-in.y4m"), tmp("limit-out.y4m"));
    std::fs::write(&inp, y4m_stream("mono", 5, 5, 6, 8, 1)).unwrap();
    let status = cli().args(["-q", "--backend", "reference", "--frames", "2", "-i"]).arg(&inp).arg("-o").arg(&out).status().unwrap();
    assert!(status.success());
    let written = std::fs::read(&out).unwrap();
    assert_eq!(written.windows(6).filter(|w| w == b"FRAME\n").count(), 2);
}

#[test]
fn cli_errors_are_reported_with_a_non_zero_exit() {
    let check = |args: &[&str], input: &[u8], expect: &str| {
        let inp = tmp(&format!("err-{}.y4m", expect.replace(' ', "_")));
        std::fs::write(&inp, input).unwrap();
        let result = cli().args(["-i"]).arg(&inp).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(!result.status.success(), "{expect}: exit status 0");
        assert!(stderr.contains(expect), "expected '{expect}' in: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    let good = y4m_stream("420jpeg", 4, 4, 2, 8, 2);
    check(&[], b"not a video\n", "YUV4MPEG2");
    check(&[], b"YUV4MPEG2 W4 H4 C411\nFRAME\n", "C411");
    check(&[], b"YUV4MPEG2 W0 H4\n", "0x4");
    check(&[], &good[..good.len() - 3], "ends inside frame 1");
    check(&["--strength", "0"], &good, "strength");
    check(&["--search-radius", "40"], &good, "search radius");
    check(&["--chroma-mode", "joint"], &good, "joint");
    check(&["--planes", "chroma", "--backend", "reference"], &y4m_stream("mono", 4, 4, 1, 8, 2), "chroma");
    check(&["--psnr-ref", "/nonexistent/clean.y4m"], &good, "clean.y4m");
    // The CUDA backend on a machine without one is an error with a reason (skip where a GPU works).
    let inp = tmp("cuda-in.y4m");
    std::fs::write(&inp, &good).unwrap();
    let result = cli().arg("-i").arg(&inp).args(["--backend", "cuda", "-q"]).output().unwrap();
    if !result.status.success() {
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(stderr.contains("cuda") && !stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn cli_chunks_and_device_lists_give_the_frame_at_a_time_output() {
    let inp = tmp("chunks-in.y4m");
    std::fs::write(&inp, y4m_stream("420jpeg", 12, 10, 13, 8, 4)).unwrap();
    let denoise = |extra: &[&str], name: &str| -> Vec<u8> {
        let out = tmp(name);
        let result = cli()
            .args(["-q", "--backend", "cpu", "--threads", "1", "--strength", "15", "--search-radius", "2", "--patch-radius", "1", "-i"])
            .arg(&inp)
            .arg("-o")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(result.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&result.stderr));
        std::fs::read(&out).unwrap()
    };
    let plain = denoise(&[], "chunks-plain.y4m");
    for extra in [&["--chunk-frames", "4"][..], &["--chunk-frames", "0"], &["--chunk-frames", "3", "--device-id", "0,0"], &["--device-id", "all"]] {
        assert!(denoise(extra, "chunks-out.y4m") == plain, "{extra:?}: output differs from a frame at a time");
    }
    let result = cli().arg("-i").arg(&inp).args(["--backend", "cpu", "--device-id", "0,x", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success() && stderr.contains("--device-id") && !stderr.contains("panicked"), "{stderr}");
}

/// --scale upscales a y4m stream: the output header has the scaled size and the other tokens of
/// the input, every frame comes out at the scaled size; combinations it cannot do are refused with
/// a one-line error before anything is written.
#[test]
fn cli_scale_upscales_y4m() {
    for (cs, bits, scale) in [("420mpeg2", 8, 2usize), ("mono", 8, 3), ("420p10", 10, 2)] {
        let (w, h, frames) = (13, 9, 4);
        let input = tmp(&format!("scale-in-{cs}.y4m"));
        let output = tmp(&format!("scale-out-{cs}.y4m"));
        std::fs::write(&input, y4m_stream(cs, w, h, frames, bits, 5)).unwrap();
        let r = cli().args([input.to_str().unwrap(), output.to_str().unwrap(), "--backend", "cpu", "--scale", &scale.to_string(), "--search-radius", "1", "--patch-radius", "1"]).output().unwrap();
        assert!(r.status.success(), "{cs}: {}", String::from_utf8_lossy(&r.stderr));
        let out = std::fs::read(&output).unwrap();
        let header = String::from_utf8_lossy(&out[..out.iter().position(|&b| b == b'\n').unwrap()]).to_string();
        assert!(header.contains(&format!(" W{} ", w * scale)) && header.contains(&format!(" H{} ", h * scale)) && header.contains(&format!("C{cs}")), "{cs}: header {header}");
        let (sw, sh) = (w * scale, h * scale);
        let bytes = if bits > 8 { 2 } else { 1 };
        let frame = bytes
            * match cs {
                "mono" => sw * sh,
                _ => sw * sh + 2 * sw.div_ceil(2) * sh.div_ceil(2),
            };
        assert_eq!(out.len(), header.len() + 1 + frames * (6 + frame), "{cs}: {frames} frames of {sw}x{sh}");
        assert!(String::from_utf8_lossy(&r.stderr).contains(&format!("-> {sw}x{sh}")), "{cs}: summary names the output size");
    }
    // In chunks along time and on two host workers: the same bytes.
    let input = tmp("scale-in-420mpeg2.y4m");
    let plain = tmp("scale-plain.y4m");
    let chunked = tmp("scale-chunked.y4m");
    let common = ["--backend", "cpu", "--scale", "2", "--search-radius", "1", "--patch-radius", "1", "--temporal-future", "1"];
    let r = cli().arg(&input).arg(&plain).args(common).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = cli().arg(&input).arg(&chunked).args(common).args(["--chunk-frames", "3", "--device-id", "0,1"]).output().unwrap();
    assert!(r.status.success(), "chunked: {}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(&plain).unwrap(), std::fs::read(&chunked).unwrap(), "--scale in chunks on two workers");
    for (args, says) in [
        (vec!["--scale", "5"], "scale 5 out of range"),
        (vec!["--scale", "2", "--algorithm", "bm3d"], "does not combine with --algorithm bm3d"),
        (vec!["--scale", "2", "--psnr-ref", input.to_str().unwrap()], "does not combine with --scale"),
    ] {
        let out = tmp("scale-refused.y4m");
        let _ = std::fs::remove_file(&out);
        let r = cli().arg(input.to_str().unwrap()).arg(out.to_str().unwrap()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success() && err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing written");
    }
}

/// --help states the default strengths the tool uses (the engine's factors for the tool's 2 + 2
/// window, not the live window's 0.71/0.85 nor "else 10"), and they are what it does: `--sigma 10`
/// gives the same output as `--sigma 10` with those strengths spelt out.
#[test]
fn cli_help_states_the_default_strengths_it_uses() {
    use nlmdenoise::params::{OFFLINE_CHROMA_STRENGTH_PER_SIGMA, OFFLINE_STRENGTH_PER_SIGMA};
    let help = cli().arg("--help").output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    let (k, kc) = (OFFLINE_STRENGTH_PER_SIGMA, OFFLINE_CHROMA_STRENGTH_PER_SIGMA);
    for line in ["--strength <STRENGTH>", "--chroma-strength <CHROMA_STRENGTH>"] {
        let at = help.find(line).unwrap_or_else(|| panic!("{line} in {help}"));
        let text = &help[at..at + help[at..].find("\n\n").unwrap()];
        let factor = if line.starts_with("--strength") { k } else { kc };
        assert!(text.contains(&format!("{factor:.2} * sigma")), "{line}: {text}");
        assert!(text.contains("estimated"), "{line}: says the noise is estimated without --sigma: {text}");
        assert!(!text.contains("when --sigma is given, else 10"), "{line}: {text}");
    }

    let inp = tmp("strength-default-in.y4m");
    std::fs::write(&inp, y4m_stream("420jpeg", 16, 12, 5, 8, 3)).unwrap();
    let denoise = |extra: &[String], name: &str| {
        let out = tmp(name);
        let r = cli().args(["-q", "--backend", "cpu", "--sigma", "10", "-i"]).arg(&inp).arg("-o").arg(&out).args(extra).output().unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        std::fs::read(&out).unwrap()
    };
    let default = denoise(&[], "strength-default.y4m");
    let spelt = denoise(&["--strength".into(), format!("{}", k * 10.0), "--chroma-strength".into(), format!("{}", kc * 10.0)], "strength-spelt.y4m");
    assert_eq!(default, spelt, "the stated default strengths are the ones used");
}

/// y4m `C422p10` (what ffmpeg writes for yuv422p10le) is read and written as it is: 4:2:2 at 10
/// bits in and out (the y4m path).
#[test]
fn c422p10_is_read_and_written() {
    let dir = std::env::temp_dir().join(format!("nlmdenoise-c422p10-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.y4m");
    let st = std::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=32x24:rate=25", "-frames:v", "3", "-pix_fmt", "yuv422p10le", "-f", "yuv4mpegpipe", "-strict", "-1"])
        .arg(&input)
        .status()
        .expect("ffmpeg runs");
    assert!(st.success());
    let data = std::fs::read(&input).unwrap();
    assert!(String::from_utf8_lossy(&data[..80]).contains("C422p10"), "ffmpeg wrote C422p10");
    let out = dir.join("out.y4m");
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_nlmdenoise")).args(["-y", "-q", "--backend", "cpu", "--sigma", "4"]).arg(&input).arg("-o").arg(&out).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let written = std::fs::read(&out).unwrap();
    assert!(String::from_utf8_lossy(&written[..80]).contains("C422p10"), "written as C422p10");
    assert_eq!(written.len(), data.len(), "same frames, same sizes");
    let _ = std::fs::remove_dir_all(&dir);
}

/// --segment-in-place: segments written into one file, in any order (the last first, over stale
/// bytes), give the whole run's file byte for byte, 8- and 10-bit; a failed in-place run leaves
/// the file (and the other segments' frames) alone.
#[test]
fn segments_written_in_place_assemble_the_whole_run() {
    for (colorspace, bits) in [("420jpeg", 8), ("420p10", 10)] {
        let inp = tmp(&format!("inplace-in-{bits}.y4m"));
        std::fs::write(&inp, y4m_stream(colorspace, 14, 10, 11, bits, 9)).unwrap();
        let opts = ["-q", "--backend", "cpu", "--threads", "1", "--strength", "15", "--temporal-past", "2", "--temporal-future", "1"];
        let whole = tmp(&format!("inplace-whole-{bits}.y4m"));
        assert!(cli().args(opts).arg(&inp).arg(&whole).status().unwrap().success());
        let whole = std::fs::read(&whole).unwrap();
        let out = tmp(&format!("inplace-out-{bits}.y4m"));
        // Stale bytes of another size: overwritten where frames go, never truncated away first.
        std::fs::write(&out, vec![0xAAu8; whole.len() + 7]).unwrap();
        for seg in ["8:11", "0:3", "3:8"] {
            let r = cli().args(opts).arg(&inp).arg(&out).args(["--segment", seg, "--segment-in-place"]).output().unwrap();
            assert!(r.status.success(), "{seg}: {}", String::from_utf8_lossy(&r.stderr));
        }
        let got = std::fs::read(&out).unwrap();
        assert!(got.len() == whole.len() + 7 && got[..whole.len()] == whole[..], "{colorspace}: segments in place differ from the whole run");
        // A segment past the input's end fails; the file is neither removed nor truncated.
        let r = cli().args(opts).arg(&inp).arg(&out).args(["--segment", "9:14", "--segment-in-place"]).output().unwrap();
        assert!(!r.status.success() && String::from_utf8_lossy(&r.stderr).contains("the segment ends at frame 14"), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(std::fs::read(&out).unwrap() == got, "a failed in-place segment changed the file");
    }
    // Standard output cannot be written in place.
    let r = cli().args(["-q", "--segment", "0:3", "--segment-in-place"]).arg(tmp("inplace-in-8.y4m")).arg("-").output().unwrap();
    assert!(!r.status.success() && String::from_utf8_lossy(&r.stderr).contains("--segment-in-place writes into an OUTPUT file"));
}
