//! Engine behaviour through the public API (`Denoiser`): invariants of the algorithm, frame
//! ordering and latency, reset, and error paths. Sizes stay tiny: the reference backend is slow
//! on purpose. Properties that every backend must have run on both the reference and the CPU
//! backend.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{frame_from, gaussian, shot};

use nlmdenoise::convert;
use nlmdenoise::error::Error;
use nlmdenoise::planar::{Geometry, PlanarFrame};
use nlmdenoise::{BackendKind, BackendOptions, ChromaMode, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const HOST_BACKENDS: [BackendKind; 2] = [BackendKind::Reference, BackendKind::Cpu];

/// Byte written over every output buffer before `pop`, so that a sample the engine forgets to
/// write shows up.
const POISON: u8 = 0xA5;

fn options(kind: BackendKind) -> BackendOptions {
    BackendOptions { kind, threads: 2, ..BackendOptions::default() }
}

fn small_params() -> Params {
    Params { search_radius: 2, patch_radius: 1, temporal_past: 1, ..Params::default() }
}

fn planar_of(frame: &OwnedFrame) -> PlanarFrame {
    let mut planar = PlanarFrame::zeroed(&Geometry::from_video_info(&frame.info));
    convert::unpack(&frame.as_ref(), &mut planar).unwrap();
    planar
}

fn poisoned(info: VideoInfo) -> OwnedFrame {
    let mut f = OwnedFrame::new(info);
    f.planes.iter_mut().for_each(|p| p.fill(POISON));
    f
}

/// Pops one output into a poisoned frame.
fn pop<T>(d: &mut Denoiser<T>) -> Option<(T, OwnedFrame)> {
    let mut out = poisoned(d.info());
    let tag = d.pop(&mut out.as_mut()).unwrap()?;
    Some((tag, out))
}

/// Pushes every frame, drains at the end, and returns the outputs in order.
fn denoise_all(kind: BackendKind, params: Params, frames: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let mut d = Denoiser::new(frames[0].info, params, &options(kind)).unwrap();
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
        while let Some((tag, o)) = pop(&mut d) {
            assert_eq!(tag, out.len());
            out.push(o);
        }
    }
    d.finish_stream().unwrap();
    while let Some((tag, o)) = pop(&mut d) {
        assert_eq!(tag, out.len());
        out.push(o);
    }
    assert_eq!(out.len(), frames.len());
    out
}

fn psnr_8bit(a: &PlanarFrame, b: &PlanarFrame) -> f64 {
    let (mut sse, mut n) = (0.0, 0usize);
    for (pa, pb) in a.planes.iter().zip(&b.planes) {
        for i in 0..pa.samples.len() {
            let d = pa.samples.get(i) as f64 - pb.samples.get(i) as f64;
            sse += d * d;
            n += 1;
        }
    }
    10.0 * (255.0f64 * 255.0 / (sse / n as f64)).log10()
}

#[test]
fn constant_frames_stay_constant() {
    for kind in HOST_BACKENDS {
        for (format, values) in [(PixelFormat::I420, [100u32, 50, 200]), (PixelFormat::Y444_16LE, [40000, 123, 65535]), (PixelFormat::I420_10LE, [1023, 0, 512])] {
            let info = VideoInfo::new(format, 11, 7).unwrap();
            let frame = frame_from(info, |p, _, _| values[p]);
            for params in [small_params(), Params { temporal_past: 2, temporal_future: 1, wref: 0.0, ..small_params() }] {
                let outs = denoise_all(kind, params, &[frame.clone(), frame.clone(), frame.clone(), frame.clone()]);
                for (i, o) in outs.iter().enumerate() {
                    assert_eq!(o, &frame, "{kind} {format} frame {i} {params:?}");
                }
            }
        }
    }
}

#[test]
fn vanishing_strength_returns_the_input() {
    let mut rng = SmallRng::seed_from_u64(7);
    for kind in HOST_BACKENDS {
        let info = VideoInfo::new(PixelFormat::I420, 12, 10).unwrap();
        let frames: Vec<OwnedFrame> = (0..3).map(|_| frame_from(info, |_, _, _| rng.random_range(0..=255))).collect();
        let params = Params { strength: 1e-3, chroma_strength: 1e-3, temporal_past: 2, ..small_params() };
        let outs = denoise_all(kind, params, &frames);
        assert_eq!(outs, frames, "{kind}");
    }
}

/// The same clean picture in every frame with independent noise: searching more past frames
/// averages more good matches, so quality must rise strictly with `temporal_past`.
#[test]
fn more_past_frames_give_higher_psnr_on_a_static_scene() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 32, 32).unwrap();
    let clean = frame_from(info, |_, x, y| (40 + 4 * x + 2 * y + if (x / 4 + y / 4) % 2 == 0 { 30 } else { 0 }) as u32);
    let clean_planar = planar_of(&clean);
    let mut rng = SmallRng::seed_from_u64(2026);
    let noisy: Vec<OwnedFrame> = (0..6)
        .map(|_| {
            let mut f = clean.clone();
            for b in f.planes[0].iter_mut() {
                *b = (*b as f64 + 12.0 * gaussian(&mut rng)).round().clamp(0.0, 255.0) as u8;
            }
            f
        })
        .collect();
    let input_psnr = psnr_8bit(&planar_of(&noisy[5]), &clean_planar);
    for kind in HOST_BACKENDS {
        let mut last = input_psnr;
        let mut table = vec![format!("input {input_psnr:.2} dB")];
        for past in [0, 1, 3] {
            let params = Params { search_radius: 2, patch_radius: 1, temporal_past: past, strength: 15.0, ..Params::default() };
            let outs = denoise_all(kind, params, &noisy);
            // Frames 3.. have a full window for every tested depth.
            let psnr: f64 = outs[3..].iter().map(|o| psnr_8bit(&planar_of(o), &clean_planar)).sum::<f64>() / 3.0;
            table.push(format!("past {past}: {psnr:.2} dB"));
            assert!(psnr > last + 0.1, "{kind}: PSNR did not rise: {}", table.join(", "));
            last = psnr;
        }
        eprintln!("{kind}: {}", table.join(", "));
    }
}

#[test]
fn future_frames_delay_outputs_and_finish_stream_drains_them() {
    for kind in HOST_BACKENDS {
        let info = VideoInfo::new(PixelFormat::NV12, 6, 4).unwrap();
        let params = Params { temporal_past: 1, temporal_future: 2, ..small_params() };
        let mut d: Denoiser<u32> = Denoiser::new(info, params, &options(kind)).unwrap();
        let latency = d.latency_frames();
        assert_eq!(latency, 2, "{kind}: latency of a synchronous backend is temporal_future");
        let mut popped = Vec::new();
        for i in 0..5u32 {
            let f = frame_from(info, |p, x, y| (i * 10 + p as u32 * 3 + (x + y) as u32) % 256);
            d.push(&f.as_ref(), 100 + i).unwrap();
            let before = popped.len();
            while let Some((tag, _)) = pop(&mut d) {
                popped.push(tag);
            }
            // After pushing frame i, exactly the frames 0..=i-latency are out.
            let expect = (i as usize + 1).saturating_sub(latency);
            assert_eq!(popped.len(), expect, "{kind}: after push {i} (had {before})");
        }
        assert_eq!(d.queued(), latency);
        d.finish_stream().unwrap();
        assert_eq!(d.ready(), latency);
        while let Some((tag, _)) = pop(&mut d) {
            popped.push(tag);
        }
        assert_eq!(popped, vec![100, 101, 102, 103, 104], "{kind}");
        assert_eq!(d.queued(), 0);
        assert!(pop(&mut d).is_none());
        // Finishing an empty stream is fine, and a new window starts afterwards.
        d.finish_stream().unwrap();
        let f = frame_from(info, |_, _, _| 9);
        d.push(&f.as_ref(), 7).unwrap();
        assert!(pop(&mut d).is_none(), "{kind}: the new window waits for future frames again");
        d.finish_stream().unwrap();
        let (tag, out) = pop(&mut d).unwrap();
        assert_eq!((tag, out), (7, f));
    }
}

/// With future frames, the output of a frame uses them: it must differ from the past-only result
/// on changing content, except for the last frame, which has none.
#[test]
fn future_frames_are_used() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 8, 8).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let frames: Vec<OwnedFrame> = (0..4).map(|_| frame_from(info, |_, _, _| rng.random_range(100..140))).collect();
    let past_only = denoise_all(BackendKind::Reference, Params { temporal_past: 0, temporal_future: 0, strength: 30.0, ..small_params() }, &frames);
    let with_future = denoise_all(BackendKind::Reference, Params { temporal_past: 0, temporal_future: 1, strength: 30.0, ..small_params() }, &frames);
    for i in 0..3 {
        assert_ne!(past_only[i], with_future[i], "frame {i} has a future frame to use");
    }
    // The last frame, drained at the end of the stream, has no future frame: same as past-only.
    assert_eq!(past_only[3], with_future[3]);
}

#[test]
fn reset_drops_pending_frames_and_history() {
    for kind in HOST_BACKENDS {
        let info = VideoInfo::new(PixelFormat::I420, 8, 6).unwrap();
        let params = Params { temporal_past: 2, temporal_future: 1, ..small_params() };
        let mut rng = SmallRng::seed_from_u64(11);
        let mut random_frame = || frame_from(info, |_, _, _| rng.random_range(0..=255));
        let old: Vec<OwnedFrame> = (0..3).map(|_| random_frame()).collect();
        let new: Vec<OwnedFrame> = (0..3).map(|_| random_frame()).collect();

        let mut d: Denoiser<(bool, usize)> = Denoiser::new(info, params, &options(kind)).unwrap();
        for (i, f) in old.iter().enumerate() {
            d.push(&f.as_ref(), (false, i)).unwrap();
        }
        assert!(d.ready() > 0 && d.queued() == 3);
        d.reset();
        assert_eq!(d.queued(), 0);
        assert!(pop(&mut d).is_none(), "{kind}: reset must drop ready frames too");

        let mut got = Vec::new();
        for (i, f) in new.iter().enumerate() {
            d.push(&f.as_ref(), (true, i)).unwrap();
            while let Some(x) = pop(&mut d) {
                got.push(x);
            }
        }
        d.finish_stream().unwrap();
        while let Some(x) = pop(&mut d) {
            got.push(x);
        }
        let tags: Vec<_> = got.iter().map(|(t, _)| *t).collect();
        assert_eq!(tags, vec![(true, 0), (true, 1), (true, 2)], "{kind}");
        // No frame from before the reset may leak into the new window.
        let fresh = denoise_all(kind, params, &new);
        for (i, ((_, o), f)) in got.iter().zip(&fresh).enumerate() {
            assert_eq!(o, f, "{kind}: frame {i} after reset differs from a fresh stream");
        }
    }
}

#[test]
fn strength_changes_apply_without_losing_frames_and_structure_changes_drain() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 8, 8).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    let frames: Vec<OwnedFrame> = (0..4).map(|_| frame_from(info, |_, _, _| rng.random_range(0..=255))).collect();
    let params = Params { temporal_future: 1, ..small_params() };
    let mut d: Denoiser<usize> = Denoiser::new(info, params, &options(BackendKind::Reference)).unwrap();
    d.push(&frames[0].as_ref(), 0).unwrap();
    d.set_params(Params { strength: 1e-3, ..params }).unwrap();
    assert_eq!(d.queued(), 1, "a strength change keeps the pending frame");
    d.push(&frames[1].as_ref(), 1).unwrap();
    let (tag, out) = pop(&mut d).unwrap();
    assert_eq!((tag, &out), (0, &frames[0]), "the new (vanishing) strength applies to the next launch");
    // A structural change computes the pending frame first.
    d.set_params(Params { strength: 1e-3, temporal_future: 0, ..params }).unwrap();
    assert_eq!(d.ready(), 1);
    assert_eq!(pop(&mut d).unwrap().0, 1);
    assert_eq!(d.latency_frames(), 0);
    d.push(&frames[2].as_ref(), 2).unwrap();
    assert_eq!(pop(&mut d).unwrap(), (2, frames[2].clone()));
    // Bad parameters are refused and the old ones stay.
    let before = *d.params();
    assert!(matches!(d.set_params(Params { search_radius: 99, ..params }), Err(Error::InvalidParameter(_))));
    assert!(matches!(d.set_params(Params { planes: nlmdenoise::PlaneSelection::Chroma, ..params }), Err(Error::InvalidParameter(_))), "GRAY8 has no chroma");
    assert_eq!(*d.params(), before);
}

#[test]
fn bad_sizes_and_parameters_are_errors() {
    let zero = VideoInfo { format: PixelFormat::I420, width: 0, height: 4 };
    assert!(VideoInfo::new(PixelFormat::I420, 0, 4).is_err());
    assert!(VideoInfo::new(PixelFormat::I420, 4, 0).is_err());
    assert!(VideoInfo::new(PixelFormat::I420, 70000, 4).is_err());
    assert!(matches!(Denoiser::<()>::new(zero, Params::default(), &options(BackendKind::Reference)), Err(Error::InvalidParameter(_))));
    let info = VideoInfo::new(PixelFormat::I420, 8, 8).unwrap();
    let bad = [
        Params { strength: 0.0, ..Params::default() },
        Params { strength: -1.0, ..Params::default() },
        Params { chroma_strength: f32::INFINITY, ..Params::default() },
        Params { search_radius: 13, ..Params::default() },
        Params { patch_radius: 8, ..Params::default() },
        Params { temporal_past: 8, ..Params::default() },
        Params { temporal_future: 8, ..Params::default() },
        Params { wref: -0.5, ..Params::default() },
        Params { sigma: Some(f32::NAN), ..Params::default() },
        // Joint weights need 4:4:4.
        Params { chroma_mode: ChromaMode::Joint, ..Params::default() },
    ];
    for (i, p) in bad.iter().enumerate() {
        for kind in HOST_BACKENDS {
            assert!(matches!(Denoiser::<()>::new(info, *p, &options(kind)), Err(Error::InvalidParameter(_))), "bad params #{i} accepted by {kind}");
        }
    }
}

#[test]
fn mismatched_frames_are_refused_and_the_stream_goes_on() {
    for kind in HOST_BACKENDS {
        let info = VideoInfo::new(PixelFormat::I420, 8, 8).unwrap();
        let mut d: Denoiser<u8> = Denoiser::new(info, small_params(), &options(kind)).unwrap();
        let good = frame_from(info, |p, x, y| (p * 50 + x * 3 + y) as u32);
        d.push(&good.as_ref(), 0).unwrap();
        let other_size = frame_from(VideoInfo::new(PixelFormat::I420, 8, 10).unwrap(), |_, _, _| 0);
        let other_format = frame_from(VideoInfo::new(PixelFormat::NV12, 8, 8).unwrap(), |_, _, _| 0);
        assert!(matches!(d.push(&other_size.as_ref(), 1), Err(Error::InvalidFrame(_))));
        assert!(matches!(d.push(&other_format.as_ref(), 1), Err(Error::InvalidFrame(_))));
        // The frame pushed before is still there.
        let (tag, _) = pop(&mut d).unwrap();
        assert_eq!(tag, 0);
        d.push(&good.as_ref(), 2).unwrap();

        // pop into a frame of the wrong size fails without losing the output.
        let mut wrong = OwnedFrame::new(VideoInfo::new(PixelFormat::I420, 8, 10).unwrap());
        assert!(matches!(d.pop(&mut wrong.as_mut()), Err(Error::InvalidFrame(_))));
        let (tag, out) = pop(&mut d).unwrap();
        assert_eq!(tag, 2);
        assert!(out.planes.iter().flatten().any(|&b| b != POISON));
        assert!(pop(&mut d).is_none());
    }
}

#[test]
fn frames_with_short_planes_or_strides_cannot_be_built() {
    let info = VideoInfo::new(PixelFormat::I420, 8, 8).unwrap();
    let y = vec![0u8; 64];
    let c = vec![0u8; 16];
    assert!(nlmdenoise::FrameRef::new(info, &[&y, &c, &c], &[8, 4, 4]).is_ok());
    assert!(nlmdenoise::FrameRef::new(info, &[&y[..63], &c, &c], &[8, 4, 4]).is_err());
    assert!(nlmdenoise::FrameRef::new(info, &[&y, &c, &c], &[7, 4, 4]).is_err());
    assert!(nlmdenoise::FrameRef::new(info, &[&y, &c], &[8, 4]).is_err());
    assert!(nlmdenoise::FrameRef::new(info, &[&y, &c, &c], &[8, 4, 5]).is_err());
    let mut y2 = vec![0u8; 64];
    let (mut c1, mut c2) = (vec![0u8; 16], vec![0u8; 15]);
    assert!(nlmdenoise::FrameMut::new(info, vec![&mut y2, &mut c1, &mut c2], &[8, 4, 4]).is_err());
}

#[test]
fn cuda_without_a_usable_gpu_is_an_error_not_a_panic() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 16).unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| Denoiser::<u32>::new(info, small_params(), &options(BackendKind::Cuda))));
    let result = result.expect("asking for CUDA must not panic");
    match result {
        Err(e) => {
            assert!(matches!(e, Error::BackendUnavailable(_) | Error::Backend(_)), "unexpected error kind: {e}");
            eprintln!("CUDA unavailable here, as expected without a GPU: {e}");
            // Auto falls back to a host backend instead of failing.
            let mut d = Denoiser::<u32>::new(info, small_params(), &options(BackendKind::Auto)).expect("auto falls back to the CPU");
            let f = frame_from(info, |_, _, _| 77);
            d.push(&f.as_ref(), 1).unwrap();
            assert_eq!(pop(&mut d).unwrap(), (1, f));
        }
        Ok(mut d) => {
            // A machine with a GPU: the backend must actually work.
            let f = frame_from(info, |_, _, _| 77);
            d.push(&f.as_ref(), 1).unwrap();
            d.finish_stream().unwrap();
            assert_eq!(pop(&mut d).unwrap(), (1, f));
        }
    }
}

/// The reference backend with failures on demand, for the engine's error recovery.
struct FlakyBackend {
    inner: nlmdenoise::device::host::HostBackend,
    fail_next_launch: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// `configure` with this search radius fails after half-configuring the inner backend.
    refuse_search_radius: u32,
}

impl nlmdenoise::device::Backend for FlakyBackend {
    fn describe(&self) -> String {
        "flaky reference".into()
    }
    fn configure(&mut self, setup: &nlmdenoise::device::StreamSetup<'_>) -> nlmdenoise::Result<nlmdenoise::device::Configured> {
        if setup.plan.nlm("test")?.search_radius == self.refuse_search_radius {
            self.inner.configure(&nlmdenoise::device::StreamSetup { ring_slots: Some(1), ..*setup })?;
            return Err(Error::Unsupported("search radius refused by the test backend".into()));
        }
        self.inner.configure(setup)
    }
    fn pool(&mut self) -> &mut nlmdenoise::device::FramePool {
        self.inner.pool()
    }
    fn submit(&mut self, slot: usize, frame: std::sync::Arc<nlmdenoise::device::Frame>) -> nlmdenoise::Result<()> {
        self.inner.submit(slot, frame)
    }
    fn launch(&mut self, jobs: &[nlmdenoise::window::Job], plan: &nlmdenoise::plan::Plan) -> nlmdenoise::Result<()> {
        if self.fail_next_launch.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Backend(nlmdenoise::BackendError::Launch("injected launch failure".into())));
        }
        self.inner.launch(jobs, plan)
    }
    fn finish(&mut self) -> nlmdenoise::Result<nlmdenoise::device::Frame> {
        self.inner.finish()
    }
    fn memory(&mut self, g: &Geometry, plan: &nlmdenoise::plan::Plan) -> Option<nlmdenoise::device::DeviceMemory> {
        self.inner.memory(g, plan)
    }
}

#[test]
fn backend_errors_leave_the_engine_consistent() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 9, 7).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let frames: Vec<OwnedFrame> = (0..4).map(|_| frame_from(info, |_, _, _| rng.random_range(0..256))).collect();
    let params = small_params();
    let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backend = FlakyBackend { inner: nlmdenoise::backends::reference(), fail_next_launch: fail.clone(), refuse_search_radius: 5 };
    let mut d: Denoiser<usize> = Denoiser::with_backend(info, params, Box::new(backend)).unwrap();
    d.push(&frames[0].as_ref(), 0).unwrap();
    assert_eq!(pop(&mut d).unwrap().0, 0);

    // A failed launch loses that frame but not the stream: the next frame starts a new window
    // and comes out with its own tag and its own pixels.
    fail.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(d.push(&frames[1].as_ref(), 1).is_err());
    d.push(&frames[2].as_ref(), 2).unwrap();
    let (tag, out) = pop(&mut d).unwrap();
    assert_eq!(tag, 2);
    let fresh = denoise_all(BackendKind::Reference, params, &frames[2..3]);
    assert_eq!(out, fresh[0], "frame after the error is denoised as the first of a new window");
    assert!(pop(&mut d).is_none());

    // A backend that refuses new parameters keeps working with the old ones.
    assert!(d.set_params(Params { search_radius: 5, ..params }).is_err());
    assert_eq!(d.params().search_radius, params.search_radius);
    d.push(&frames[3].as_ref(), 3).unwrap();
    let (tag, out) = pop(&mut d).unwrap();
    assert_eq!(tag, 3);
    let fresh = denoise_all(BackendKind::Reference, params, &frames[3..4]);
    assert_eq!(out, fresh[0]);
}

/// A frame given back in the exchange form (`take_spare`, filled, `push_planar`, then
/// `pop_planar`) is denoised exactly as the same frame pushed and popped through the copying
/// API, with a backend that takes frames into its own memory (chunked) as well. Formats that
/// interleave components exchange stored frames (one plane per memory plane), unpacked and
/// packed by the engine on these backends. A frame of other planes is refused.
#[test]
fn push_planar_matches_push() {
    use nlmdenoise::planar::exchange_layout;
    let mut rng = SmallRng::seed_from_u64(9);
    for format in [PixelFormat::I420, PixelFormat::Y444_16LE, PixelFormat::GRAY8, PixelFormat::NV12, PixelFormat::P010_10LE, PixelFormat::RGBA, PixelFormat::BGR] {
        let info = VideoInfo::new(format, 23, 11).unwrap();
        let max = match format {
            PixelFormat::Y444_16LE => 1023,
            PixelFormat::P010_10LE => 65535,
            _ => 255,
        };
        let inputs: Vec<OwnedFrame> = (0..6).map(|_| frame_from(info, |_, _, _| rng.random_range(0..=max))).collect();
        let params = Params { temporal_past: 1, temporal_future: 1, strength: 20.0, chroma_strength: 20.0, ..small_params() };
        let stored = format.info().planes_as_stored().is_none();
        for chunked in [false, true] {
            let opts = BackendOptions { chunk_frames: if chunked { nlmdenoise::device::ChunkFrames::Frames(2) } else { Default::default() }, ..options(BackendKind::Cpu) };
            let run = |planar: bool| -> Vec<Vec<u8>> {
                let mut d: Denoiser<usize> = Denoiser::new(info, params, &opts).unwrap();
                assert_eq!(d.exchange_geometry().0, &exchange_layout(&info).0);
                let mut outs = Vec::new();
                let drain = |d: &mut Denoiser<usize>, outs: &mut Vec<Vec<u8>>| {
                    let mut o = OwnedFrame::new(info);
                    if planar {
                        while let Some((_, f)) = d.pop_planar() {
                            if stored {
                                convert::copy_frame(&convert::stored_ref(info, &f).unwrap(), &mut o.as_mut()).unwrap();
                            } else {
                                convert::pack(&f, &mut o.as_mut()).unwrap();
                            }
                            d.recycle(f);
                            outs.push(o.planes.concat());
                        }
                    } else {
                        while d.pop(&mut o.as_mut()).unwrap().is_some() {
                            outs.push(o.planes.concat());
                        }
                    }
                };
                for (i, f) in inputs.iter().enumerate() {
                    if planar {
                        let mut p = d.take_spare();
                        if stored {
                            convert::copy_frame(&f.as_ref(), &mut convert::stored_mut(info, &mut p).unwrap()).unwrap();
                        } else {
                            convert::unpack(&f.as_ref(), &mut p).unwrap();
                        }
                        d.push_planar(p, i).unwrap();
                    } else {
                        d.push(&f.as_ref(), i).unwrap();
                    }
                    drain(&mut d, &mut outs);
                }
                d.finish_stream().unwrap();
                drain(&mut d, &mut outs);
                outs
            };
            let (a, b) = (run(false), run(true));
            assert_eq!(a.len(), inputs.len(), "{format} chunked {chunked}");
            assert!(a == b, "{format} chunked {chunked}: push_planar differs from push");
        }
        let mut d: Denoiser<usize> = Denoiser::new(info, small_params(), &options(BackendKind::Cpu)).unwrap();
        let other = nlmdenoise::device::Frame::zeroed(&Geometry::from_video_info(&VideoInfo::new(format, 22, 11).unwrap()));
        assert!(matches!(d.push_planar(other, 0), Err(Error::InvalidFrame(_))));
    }
}

/// A scene cut: the frames after it take nothing from the frames before it, nor those before from
/// those after. Each shot comes out as it does on its own, on both host backends, for NLM and for
/// two-step V-BM3D (its basic estimates kept per frame; `fast` with per-frame groups, and the
/// default `normal` live, whose window references group every frame of the window); with the
/// detection off (`scene_cut` 0) the frames next to the cut differ from their shot's own output.
#[test]
fn no_frame_borrows_across_a_scene_cut() {
    let info = VideoInfo::new(PixelFormat::I420, 64, 64).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let (a, b) = (shot(info, 0, 4, &mut rng), shot(info, 1, 4, &mut rng));
    let stream: Vec<OwnedFrame> = a.iter().chain(&b).cloned().collect();
    let nlm = Params { search_radius: 2, patch_radius: 1, temporal_past: 2, temporal_future: 2, ..Params::default() };
    let bm3d = Params {
        algorithm: nlmdenoise::Algorithm::Bm3d,
        sigma: Some(10.0),
        temporal_past: 1,
        temporal_future: 1,
        bm3d: nlmdenoise::Bm3dParams { profile: nlmdenoise::Bm3dProfile::Fast, search_radius: Some(4), seed_radius: Some(2), ..Default::default() },
        ..Params::default()
    };
    let bm3d_live = Params { temporal_past: 2, temporal_future: 0, bm3d: nlmdenoise::Bm3dParams { search_radius: Some(4), seed_radius: Some(2), ..Default::default() }, ..bm3d };
    for (kind, params) in [(BackendKind::Reference, nlm), (BackendKind::Cpu, nlm), (BackendKind::Cpu, bm3d), (BackendKind::Cpu, bm3d_live)] {
        let what = format!("{kind:?} {:?} {:?} past {} future {}", params.algorithm, params.bm3d.profile, params.temporal_past, params.temporal_future);
        let mut d = Denoiser::new(info, params, &options(kind)).unwrap();
        for (i, f) in stream.iter().enumerate() {
            d.push(&f.as_ref(), i).unwrap();
        }
        d.finish_stream().unwrap();
        assert_eq!(d.scene_cuts(), 1, "{what}: one cut found");
        let together = denoise_all(kind, params, &stream);
        let alone: Vec<OwnedFrame> = denoise_all(kind, params, &a).into_iter().chain(denoise_all(kind, params, &b)).collect();
        for (i, (t, s)) in together.iter().zip(&alone).enumerate() {
            assert!(t.planes == s.planes, "{what}: frame {i} as in its own shot");
        }
        let blind = denoise_all(kind, Params { scene_cut: 0.0, ..params }, &stream);
        // The last frame before the cut reaches across it through future frames, the first after
        // it through past ones.
        let reach = [(3, params.temporal_future > 0), (4, params.temporal_past > 0)];
        for i in reach.iter().filter(|r| r.1).map(|r| r.0) {
            assert!(blind[i].planes != alone[i].planes, "{what}: without the detection frame {i} borrows across the cut");
        }
    }
}

/// Tests report skips from several threads into one log (scripts/test.sh counts its lines): each
/// line arrives whole.
#[test]
fn skip_lines_from_many_threads_stay_whole() {
    let dir = std::env::temp_dir().join(format!("nlm-skip-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("skips.txt");
    let _ = std::fs::remove_file(&path);
    let why = "no usable CUDA device/driver/NVRTC";
    std::thread::scope(|s| {
        for t in 0..8 {
            let path = &path;
            s.spawn(move || {
                for i in 0..400 {
                    common::append_skip_line(path, &format!("thread_{t}_test_{i}"), why);
                }
            });
        }
    });
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8 * 400);
    for line in lines {
        let (test, reason) = line.split_once(": ").unwrap_or_else(|| panic!("a broken line: {line:?}"));
        assert!(test.starts_with("thread_") && !test.contains(' ') && reason == why, "a broken line: {line:?}");
    }
}
