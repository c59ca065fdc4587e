//! Property-based tests (proptest, a fixed budget of cases so CI time stays bounded): the y4m
//! reader and writer on every colour space they take, sizes 1..=64, whole and truncated streams;
//! frame geometry on every format, sizes 1..=64 and random row padding, the CPU backend against
//! the f64 reference with padding left untouched. A failure prints the shrunk case; rerun with
//! `PROPTEST_CASES` / the persisted seed as proptest says.

mod common;

use common::{assert_padding_kept, compare, denoise, tolerance};
use nlmdenoise::y4m::{Y4mHeader, Y4mReader, Y4mWriter};
use nlmdenoise::{BackendKind, BackendOptions, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use proptest::prelude::*;

const CASES: u32 = 48;
const COLORSPACES: &[(&str, u32)] = &[("420jpeg", 8), ("420mpeg2", 8), ("422", 8), ("444", 8), ("mono", 8), ("420p10", 10), ("444p12", 12), ("444p16", 16), ("mono10", 10), ("mono16", 16)];

/// A y4m byte stream: header and `frames` frames of random samples below 2^bits.
fn y4m_bytes(cs: &str, bits: u32, w: usize, h: usize, frames: usize, seed: u64) -> (Vec<u8>, usize, usize) {
    let (cw, ch, planes) = match cs {
        c if c.starts_with("420") => (w.div_ceil(2), h.div_ceil(2), 3),
        c if c.starts_with("422") => (w.div_ceil(2), h, 3),
        c if c.starts_with("444") => (w, h, 3),
        _ => (0, 0, 1),
    };
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut v = format!("YUV4MPEG2 W{w} H{h} F30000:1001 It A1:1 C{cs}\n").into_bytes();
    let header = v.len();
    let bytes = if bits > 8 { 2 } else { 1 };
    for _ in 0..frames {
        v.extend_from_slice(b"FRAME\n");
        for p in 0..planes {
            let n = if p == 0 { w * h } else { cw * ch };
            for _ in 0..n {
                let x = (next() % (1u64 << bits)) as u16;
                if bytes == 2 {
                    v.extend_from_slice(&x.to_le_bytes());
                } else {
                    v.push(x as u8);
                }
            }
        }
    }
    let frame = (v.len() - header) / frames.max(1);
    (v, header, frame)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    /// Reading then writing gives the stream back byte for byte.
    #[test]
    fn y4m_round_trips(cs in 0..COLORSPACES.len(), w in 1usize..=64, h in 1usize..=64, frames in 1usize..4, seed in any::<u64>()) {
        let (cs, bits) = COLORSPACES[cs];
        let (bytes, _, _) = y4m_bytes(cs, bits, w, h, frames, seed);
        let mut reader = Y4mReader::new(&bytes[..]).unwrap();
        let header: Y4mHeader = reader.header().clone();
        let mut frame = OwnedFrame::new(header.video_info());
        let mut out = Vec::new();
        let mut writer = Y4mWriter::new(&mut out, header.clone());
        let mut n = 0;
        while let Some(params) = reader.read_frame(&mut frame).unwrap() {
            writer.write_frame(&frame, &params).unwrap();
            n += 1;
        }
        writer.finish().unwrap();
        prop_assert_eq!(n, frames);
        prop_assert!(out == bytes, "C{} {}x{}: the written stream differs", cs, w, h);
    }

    /// A stream cut anywhere yields exactly its complete frames, then a clear error (or the end,
    /// when the cut falls between frames); never a panic.
    #[test]
    fn truncated_y4m_gives_its_complete_frames(cs in 0..COLORSPACES.len(), w in 1usize..=32, h in 1usize..=32, cut in 0.0f64..1.0, seed in any::<u64>()) {
        let (cs, bits) = COLORSPACES[cs];
        let (bytes, header, frame_len) = y4m_bytes(cs, bits, w, h, 3, seed);
        let at = header + ((bytes.len() - header) as f64 * cut) as usize;
        let mut reader = Y4mReader::new(&bytes[..at]).unwrap();
        let mut frame = OwnedFrame::new(reader.header().video_info());
        let mut n = 0;
        let end = loop {
            match reader.read_frame(&mut frame) {
                Ok(Some(_)) => n += 1,
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        let complete = (at - header) / frame_len;
        prop_assert_eq!(n, complete);
        let on_boundary = (at - header) % frame_len == 0;
        prop_assert_eq!(end.is_none(), on_boundary, "{:?}", end);
        if let Some(e) = end {
            prop_assert!(e.contains(&format!("frame {complete}")), "{}", e);
        }
    }

    /// Any format, size and row padding: the CPU backend matches the reference within the usual
    /// tolerance, and neither touches the output's padding.
    #[test]
    fn geometry_cpu_matches_reference(fmt in 0..PixelFormat::ALL.len(), w in 1usize..=40, h in 1usize..=40, pad_in in 0usize..=9, pad_out in 0usize..=9, seed in any::<u64>()) {
        let format = PixelFormat::ALL[fmt];
        let info = VideoInfo::new(format, w, h).unwrap();
        let params = Params { search_radius: 2, patch_radius: 1, temporal_past: 1, temporal_future: 1, strength: 12.0, chroma_strength: 12.0, ..Params::default() };
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
        let inputs: Vec<OwnedFrame> = (0..3)
            .map(|i| common::make_frame(info, pad_in, common::Content::Smooth { amp: 12 }, common::Waves { x: 0.3, y: 0.2, t: 0.1 }, i, &mut rng))
            .collect();
        let run = |kind| {
            let d: Denoiser<usize> = Denoiser::new(info, params, &BackendOptions { kind, ..Default::default() }).unwrap();
            denoise(d, &inputs, pad_out, 0xA5, None)
        };
        let (reference, cpu) = (run(BackendKind::Reference), run(BackendKind::Cpu));
        let tol = tolerance(format);
        compare(&(format, w, h, pad_in, pad_out), "cpu", &reference, &cpu, &inputs, tol, if tol <= 4 { 0 } else { tol / 32 });
        assert_padding_kept(&(format, w, h), &reference, &cpu, 0xA5);
    }
}
