//! Every pixel format through the whole engine (unpack -> window -> backend -> pack), strided and
//! padded frames, tiny and odd sizes, plane selection and pass-through components. (The
//! command-line tool's y4m tests are in cli/tests/y4m.rs.)

use nlmdenoise::convert;
use nlmdenoise::format::ComponentKind;
use nlmdenoise::planar::{Geometry, PlanarFrame};
use nlmdenoise::{BackendKind, BackendOptions, Denoiser, OwnedFrame, Params, PixelFormat, PlaneSelection, VideoInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const HOST_BACKENDS: [BackendKind; 2] = [BackendKind::Reference, BackendKind::Cpu];
const POISON: u8 = 0xA5;

fn options(kind: BackendKind) -> BackendOptions {
    BackendOptions { kind, threads: 2, ..BackendOptions::default() }
}

/// Largest meaningful sample of a format (10-bit I420 holds 0..=1023 in 16-bit words).
fn max_sample(format: PixelFormat) -> u32 {
    let fi = format.info();
    if fi.bytes_per_sample == 1 {
        255
    } else {
        (1u32 << fi.bits) - 1
    }
}

fn planar_from(info: VideoInfo, mut f: impl FnMut(usize, usize, usize) -> u32) -> PlanarFrame {
    let mut planar = PlanarFrame::zeroed(&Geometry::from_video_info(&info));
    for (p, plane) in planar.planes.iter_mut().enumerate() {
        for y in 0..plane.height {
            for x in 0..plane.width {
                plane.samples.set(y * plane.width + x, f(p, x, y));
            }
        }
    }
    planar
}

/// A frame with the given extra bytes at the end of each row, padding filled with `pad`.
fn frame_with_padding(planar: &PlanarFrame, info: VideoInfo, extra: usize, pad: u8) -> OwnedFrame {
    let strides: Vec<usize> = info.packed_strides().iter().map(|s| s + extra).collect();
    let mut frame = OwnedFrame::with_strides(info, &strides).unwrap();
    frame.planes.iter_mut().for_each(|p| p.fill(pad));
    convert::pack(planar, &mut frame.as_mut()).unwrap();
    frame
}

fn planar_of(frame: &OwnedFrame) -> PlanarFrame {
    let mut planar = PlanarFrame::zeroed(&Geometry::from_video_info(&frame.info));
    convert::unpack(&frame.as_ref(), &mut planar).unwrap();
    planar
}

/// Noisy smooth content, scaled to the format's range.
fn noisy_planar(info: VideoInfo, rng: &mut SmallRng) -> PlanarFrame {
    let max = max_sample(info.format) as f64;
    planar_from(info, |p, x, y| {
        let base = 0.3 + 0.02 * x as f64 + 0.015 * y as f64 + 0.05 * p as f64;
        let v = (base + rng.random_range(-0.08..0.08)).clamp(0.0, 1.0);
        (v * max).round() as u32
    })
}

/// Runs the frames through a denoiser, output into frames with `out_extra` bytes of row padding
/// pre-filled with POISON. Returns the outputs in order.
fn run(kind: BackendKind, params: Params, frames: &[OwnedFrame], out_extra: usize) -> Vec<OwnedFrame> {
    let info = frames[0].info;
    let mut d: Denoiser<usize> = Denoiser::new(info, params, &options(kind)).unwrap();
    let strides: Vec<usize> = info.packed_strides().iter().map(|s| s + out_extra).collect();
    let mut outs = Vec::new();
    let take = |d: &mut Denoiser<usize>, outs: &mut Vec<OwnedFrame>| loop {
        let mut out = OwnedFrame::with_strides(info, &strides).unwrap();
        out.planes.iter_mut().for_each(|p| p.fill(POISON));
        match d.pop(&mut out.as_mut()).unwrap() {
            Some(tag) => {
                assert_eq!(tag, outs.len());
                outs.push(out);
            }
            None => break,
        }
    };
    for (i, f) in frames.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
        take(&mut d, &mut outs);
    }
    d.finish_stream().unwrap();
    take(&mut d, &mut outs);
    assert_eq!(outs.len(), frames.len());
    outs
}

/// True for bytes of a memory plane that belong to no component (row padding beyond the packed
/// row), given the frame's strides.
fn padding_bytes(frame: &OwnedFrame) -> Vec<(usize, usize)> {
    let fi = frame.info.format.info();
    let mut v = Vec::new();
    for p in 0..fi.memory_planes {
        let row = fi.memory_plane_row_bytes(p, frame.info.width);
        for (i, _) in frame.planes[p].iter().enumerate() {
            if i % frame.strides[p] >= row {
                v.push((p, i));
            }
        }
    }
    v
}

#[test]
fn every_format_is_returned_unchanged_at_vanishing_strength_with_any_strides() {
    let mut rng = SmallRng::seed_from_u64(17);
    for format in PixelFormat::ALL {
        let info = VideoInfo::new(format, 7, 5).unwrap();
        let max = max_sample(format);
        let planars: Vec<PlanarFrame> = (0..3).map(|_| planar_from(info, |_, _, _| rng.random_range(0..=max))).collect();
        // Input rows padded with junk, output rows padded differently and poisoned.
        let frames: Vec<OwnedFrame> = planars.iter().map(|p| frame_with_padding(p, info, 5, 0x3C)).collect();
        let params = Params { strength: 1e-3, chroma_strength: 1e-3, temporal_past: 1, temporal_future: 1, search_radius: 2, patch_radius: 1, ..Params::default() };
        for kind in HOST_BACKENDS {
            let outs = run(kind, params, &frames, 3);
            for (i, out) in outs.iter().enumerate() {
                assert_eq!(planar_of(out), planars[i], "{kind} {format} frame {i}");
                for (p, b) in padding_bytes(out) {
                    assert_eq!(out.planes[p][b], POISON, "{kind} {format}: padding byte {b} of plane {p} written");
                }
            }
        }
    }
}

#[test]
fn strided_and_packed_frames_give_the_same_result() {
    let mut rng = SmallRng::seed_from_u64(23);
    for format in [PixelFormat::NV21, PixelFormat::P010_10LE, PixelFormat::BGRx, PixelFormat::Y42B] {
        let info = VideoInfo::new(format, 9, 6).unwrap();
        let planars: Vec<PlanarFrame> = (0..3).map(|_| noisy_planar(info, &mut rng)).collect();
        let packed: Vec<OwnedFrame> = planars.iter().map(|p| frame_with_padding(p, info, 0, 0)).collect();
        let padded: Vec<OwnedFrame> = planars.iter().map(|p| frame_with_padding(p, info, 13, 0xEE)).collect();
        let params = Params { search_radius: 2, patch_radius: 1, temporal_past: 2, strength: 20.0, chroma_strength: 20.0, ..Params::default() };
        let a = run(BackendKind::Reference, params, &packed, 0);
        let b = run(BackendKind::Reference, params, &padded, 8);
        for i in 0..3 {
            assert_eq!(planar_of(&a[i]), planar_of(&b[i]), "{format} frame {i}");
            assert_ne!(planar_of(&a[i]), planars[i], "{format} frame {i} was not denoised at all");
            assert!(padding_bytes(&b[i]).iter().all(|&(p, o)| b[i].planes[p][o] == POISON), "{format}: padding written");
        }
    }
}

/// Indices of the planar planes of each kind.
fn planes_of(format: PixelFormat, kind: ComponentKind) -> Vec<usize> {
    format.info().components.iter().enumerate().filter(|(_, c)| c.kind == kind).map(|(i, _)| i).collect()
}

#[test]
fn plane_selection_and_pass_through_components_are_bit_exact() {
    let mut rng = SmallRng::seed_from_u64(31);
    for format in PixelFormat::ALL {
        let info = VideoInfo::new(format, 10, 8).unwrap();
        let planars: Vec<PlanarFrame> = (0..3)
            .map(|_| {
                let mut p = noisy_planar(info, &mut rng);
                // Alpha / padding components get random bytes: they must come back as they were.
                for i in planes_of(format, ComponentKind::PassThrough) {
                    for j in 0..p.planes[i].samples.len() {
                        p.planes[i].samples.set(j, rng.random_range(0..=255));
                    }
                }
                p
            })
            .collect();
        let frames: Vec<OwnedFrame> = planars.iter().map(|p| frame_with_padding(p, info, 2, 0x11)).collect();
        let luma = planes_of(format, ComponentKind::Luma);
        let chroma = planes_of(format, ComponentKind::Chroma);
        let color = planes_of(format, ComponentKind::Color);
        let pass = planes_of(format, ComponentKind::PassThrough);
        let mut selections = vec![PlaneSelection::All];
        if !color.is_empty() {
            assert!(Denoiser::<()>::new(info, Params { planes: PlaneSelection::Luma, ..Params::default() }, &options(BackendKind::Reference)).is_err(), "{format}");
        } else {
            selections.push(PlaneSelection::Luma);
            if !chroma.is_empty() {
                selections.push(PlaneSelection::Chroma);
            }
        }
        for planes in selections {
            let params = Params { search_radius: 2, patch_radius: 1, temporal_past: 2, strength: 25.0, chroma_strength: 25.0, planes, ..Params::default() };
            let (changed, kept): (Vec<usize>, Vec<usize>) = match planes {
                PlaneSelection::All => (luma.iter().chain(&chroma).chain(&color).copied().collect(), pass.clone()),
                PlaneSelection::Luma => (luma.clone(), chroma.iter().chain(&pass).copied().collect()),
                PlaneSelection::Chroma => (chroma.clone(), luma.iter().chain(&pass).copied().collect()),
            };
            for kind in HOST_BACKENDS {
                let outs = run(kind, params, &frames, 1);
                for (i, out) in outs.iter().enumerate() {
                    let got = planar_of(out);
                    for &p in &kept {
                        assert_eq!(got.planes[p], planars[i].planes[p], "{kind} {format} planes={planes}: plane {p} of frame {i} must be untouched");
                    }
                    for &p in &changed {
                        assert_ne!(got.planes[p], planars[i].planes[p], "{kind} {format} planes={planes}: plane {p} of frame {i} was not denoised");
                    }
                }
            }
        }
    }
}

/// Every output sample is a weighted mean of samples of the same plane in the window, so it lies
/// within their range; constant frames stay constant. Checked on frames smaller than the patch
/// and the search window, where every coordinate is mirrored many times.
#[test]
fn tiny_and_odd_sizes_work_in_every_format() {
    let mut rng = SmallRng::seed_from_u64(41);
    let params = Params { search_radius: 4, patch_radius: 3, temporal_past: 1, temporal_future: 1, strength: 30.0, chroma_strength: 30.0, ..Params::default() };
    for format in PixelFormat::ALL {
        let max = max_sample(format);
        for (w, h) in [(1, 1), (3, 5), (2, 2), (5, 1)] {
            let info = VideoInfo::new(format, w, h).unwrap();
            let constant = frame_with_padding(&planar_from(info, |p, _, _| (max / 3 + 7 * p as u32) % (max + 1)), info, 1, 0);
            for kind in HOST_BACKENDS {
                let outs = run(kind, params, &[constant.clone(), constant.clone(), constant.clone()], 0);
                for out in &outs {
                    assert_eq!(planar_of(out), planar_of(&constant), "{kind} {format} {w}x{h}");
                }
            }
            let planars: Vec<PlanarFrame> = (0..3).map(|_| planar_from(info, |_, _, _| rng.random_range(0..=max))).collect();
            let frames: Vec<OwnedFrame> = planars.iter().map(|p| frame_with_padding(p, info, 0, 0)).collect();
            let outs = run(BackendKind::Reference, params, &frames, 0);
            for (i, out) in outs.iter().enumerate() {
                let got = planar_of(out);
                let window = &planars[i.saturating_sub(1)..(i + 2).min(3)];
                for (p, plane) in got.planes.iter().enumerate() {
                    let values = window.iter().flat_map(|f| (0..f.planes[p].samples.len()).map(move |j| f.planes[p].samples.get(j)));
                    let (lo, hi) = values.fold((u32::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
                    for j in 0..plane.samples.len() {
                        let v = plane.samples.get(j);
                        assert!((lo..=hi).contains(&v), "{format} {w}x{h} frame {i} plane {p}: {v} outside [{lo}, {hi}]");
                    }
                }
            }
        }
    }
}
