//! Frames of formats that interleave components (NV12, NV21, P010, packed RGB) on the CUDA
//! backend: crossing as they are stored and (de)interleaved on the device (the default) gives
//! the same bytes as unpacking and packing on the host (`HostIo::device_layout` off), for NLM
//! (all planes; luma only, where the chroma planes pass through from the input; RGBA's alpha
//! always passes through), BM3D and
//! super-resolution, through the copying API and through frames exchanged without copies
//! (`push_planar` / `pop_planar`), with output frames poisoned on the device and host output rows
//! padded and poisoned. Without a CUDA device every test prints "SKIPPED" and passes.

mod common;

use common::{frame_path_cases as cases, gpu_or_skip, random_frames};
use nlmdenoise::BackendOptions;
use nlmdenoise::{convert, BackendKind, Denoiser, OwnedFrame, Params, PixelFormat, PlaneSelection, VideoInfo};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const POISON: u8 = 0x3D;

fn engine(info: VideoInfo, params: Params, device_layout: bool, depth: usize) -> Denoiser<usize> {
    let mut opts = BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, ..Default::default() };
    opts.host_io.device_layout = device_layout;
    let mut b = nlmdenoise::backends::cuda(&opts).unwrap();
    b.set_poison_outputs(true);
    let d = Denoiser::with_backend(info, params, Box::new(b)).unwrap();
    assert_eq!(d.converts_on_backend(), device_layout, "{info:?}");
    d
}

/// Every output of `inputs`, in order: copied out into frames with 3 bytes of poisoned padding
/// per row, or (`exchange`) pushed and popped as stored frames and copied out of them.
fn run(mut d: Denoiser<usize>, inputs: &[OwnedFrame], exchange: bool) -> Vec<OwnedFrame> {
    let (info, out_info) = (d.info(), d.output_info());
    let strides: Vec<usize> = out_info.packed_strides().iter().map(|s| s + 3).collect();
    let mut outs = Vec::new();
    let pop_all = |d: &mut Denoiser<usize>, outs: &mut Vec<OwnedFrame>| loop {
        let mut o = OwnedFrame::with_strides(out_info, &strides).unwrap();
        for p in &mut o.planes {
            p.fill(POISON);
        }
        let tag = if exchange {
            let Some((tag, f)) = d.pop_planar() else { break };
            convert::copy_frame(&convert::stored_ref(out_info, &f).unwrap(), &mut o.as_mut()).unwrap();
            d.recycle(f);
            tag
        } else {
            match d.pop(&mut o.as_mut()).unwrap() {
                Some(tag) => tag,
                None => break,
            }
        };
        assert_eq!(tag, outs.len(), "frames out of order");
        outs.push(o);
    };
    for (i, f) in inputs.iter().enumerate() {
        if exchange {
            let mut s = d.take_spare();
            convert::copy_frame(&f.as_ref(), &mut convert::stored_mut(info, &mut s).unwrap()).unwrap();
            d.push_planar(s, i).unwrap();
        } else {
            d.push(&f.as_ref(), i).unwrap();
        }
        pop_all(&mut d, &mut outs);
    }
    d.finish_stream().unwrap();
    pop_all(&mut d, &mut outs);
    assert_eq!(outs.len(), inputs.len());
    outs
}

/// Runs every case on `formats` at `sizes`, with pipeline depths `depths`.
fn check(formats: &[PixelFormat], sizes: &[(usize, usize)], depths: &[usize], cases: &[(&str, Params)], seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for &format in formats {
        for &(w, h) in sizes {
            let info = VideoInfo::new(format, w, h).unwrap();
            let inputs = random_frames(info, 5, &mut rng);
            for &(name, params) in cases {
                if params.planes != PlaneSelection::All && format.info().is_rgb() {
                    continue; // RGB is denoised as three joint channels: no plane selection
                }
                for &depth in depths {
                    let what = format!("{format} {w}x{h} {name} depth {depth}");
                    let host = run(engine(info, params, false, depth), &inputs, false);
                    let device = run(engine(info, params, true, depth), &inputs, false);
                    let exchanged = run(engine(info, params, true, depth), &inputs, true);
                    for (i, ((a, b), c)) in host.iter().zip(&device).zip(&exchanged).enumerate() {
                        assert!(a == b, "{what}: frame {i} differs between host and device conversion");
                        assert!(a == c, "{what}: frame {i} differs when exchanged as stored frames");
                    }
                    eprintln!("{what}: {} frames identical", host.len());
                }
            }
        }
    }
}

#[test]
fn stored_frames_on_the_device_match_host_conversion() {
    if !gpu_or_skip("stored_frames_on_the_device_match_host_conversion") {
        return;
    }
    use PixelFormat::*;
    check(&[NV12, NV21, P010_10LE, RGBA, BGRx, RGB, BGR], &[(37, 21), (96, 54)], &[0, 2], &cases(), 0x5707ED);
}

/// A small subset for compute-sanitizer (scripts/gpu.sh, part sanitizer): both sample sizes,
/// packed and semi-planar, a pass-through plane and a resizing job.
#[test]
fn sanitizer_smoke_stored() {
    if !gpu_or_skip("sanitizer_smoke_stored") {
        return;
    }
    use PixelFormat::*;
    let all = cases();
    let some: Vec<(&str, Params)> = all.into_iter().filter(|(n, _)| ["nlm luma only", "sr x2"].contains(n)).collect();
    check(&[NV12, P010_10LE, RGBA], &[(37, 21)], &[2], &some, 0x5A17);
}

/// A 1080p NV12 stream through the device conversion, then a change to a parameter set that
/// computes luma only (reconfiguration), then a reset mid-stream: every frame still matches the
/// host conversion.
#[test]
fn stored_frames_survive_reconfiguration_and_reset() {
    if !gpu_or_skip("stored_frames_survive_reconfiguration_and_reset") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(0x1080);
    let info = VideoInfo::new(PixelFormat::NV12, 1920, 1080).unwrap();
    let inputs = random_frames(info, 8, &mut rng);
    let (_, nlm) = cases()[0];
    let luma = Params { planes: PlaneSelection::Luma, temporal_past: 2, temporal_future: 0, ..nlm };
    let go = |device_layout: bool| -> Vec<OwnedFrame> {
        let mut d = engine(info, nlm, device_layout, 2);
        let mut outs = Vec::new();
        let pop = |d: &mut Denoiser<usize>, outs: &mut Vec<OwnedFrame>| {
            let mut o = OwnedFrame::new(info);
            while d.pop(&mut o.as_mut()).unwrap().is_some() {
                outs.push(o.clone());
            }
        };
        for (i, f) in inputs.iter().enumerate() {
            if i == 3 {
                d.set_params(luma).unwrap();
            }
            if i == 6 {
                d.reset();
            }
            d.push(&f.as_ref(), i).unwrap();
            pop(&mut d, &mut outs);
        }
        d.finish_stream().unwrap();
        pop(&mut d, &mut outs);
        outs
    };
    let (a, b) = (go(false), go(true));
    assert!(!a.is_empty());
    assert!(a == b, "1080p NV12: device conversion differs after reconfiguration or reset");
}
