//! Injected backend faults, the engine's side: a kernel launch, an upload or a finish failing
//! once (a transient fault), and a device that stops answering for good (lost device). Whatever
//! the fault, no panic, every pushed frame is either delivered (bit-identical to a run without
//! the fault) or reported lost by the error of the call that lost it (`Denoiser::queued`
//! accounts for it), frames come out in push order, and after a transient fault the next frames
//! are denoised again from a new temporal window. The GPU faults that can be made for real
//! (device memory taken, NVRTC missing) run in scripts/gpu.sh's `faults` part
//! (docs/reliability.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nlmdenoise::device::{Backend, BackendKind, Configured, DeviceMemory, Frame, FramePool, StreamSetup};
use nlmdenoise::plan::Plan;
use nlmdenoise::planar::Geometry;
use nlmdenoise::window::Job;
use nlmdenoise::BackendOptions;
use nlmdenoise::{Denoiser, Error, OwnedFrame, Params, PixelFormat, Result, VideoInfo};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Upload,
    Launch,
    Finish,
}

/// Wraps a real backend and fails the `nth` call of `op` (counting from 0); with `forever`, that
/// call and every later call of any kind fail (the device is gone).
struct Faulty {
    inner: Box<dyn Backend>,
    op: Op,
    nth: usize,
    forever: bool,
    calls: Arc<AtomicUsize>,
    dead: bool,
}

impl Faulty {
    fn check(&mut self, op: Op) -> Result<()> {
        if self.dead {
            return Err(Error::Backend(nlmdenoise::BackendError::DeviceLost("device lost (injected)".into())));
        }
        if op == self.op && self.calls.fetch_add(1, Ordering::SeqCst) == self.nth {
            self.dead = self.forever;
            return Err(Error::Backend(nlmdenoise::BackendError::Launch(format!("{op:?} failed (injected)"))));
        }
        Ok(())
    }
}

impl Backend for Faulty {
    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }
    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Configured> {
        if self.dead {
            return Err(Error::Backend(nlmdenoise::BackendError::DeviceLost("device lost (injected)".into())));
        }
        self.inner.configure(setup)
    }
    fn pool(&mut self) -> &mut FramePool {
        self.inner.pool()
    }
    fn submit(&mut self, slot: usize, frame: Arc<Frame>) -> Result<()> {
        self.check(Op::Upload)?;
        self.inner.submit(slot, frame)
    }
    fn launch(&mut self, jobs: &[Job], plan: &Plan) -> Result<()> {
        self.check(Op::Launch)?;
        self.inner.launch(jobs, plan)
    }
    fn finish(&mut self) -> Result<Frame> {
        self.check(Op::Finish)?;
        self.inner.finish()
    }
    fn memory(&mut self, geometry: &Geometry, plan: &Plan) -> Option<DeviceMemory> {
        self.inner.memory(geometry, plan)
    }
}

fn frames(info: VideoInfo, n: usize) -> Vec<OwnedFrame> {
    (0..n)
        .map(|t| {
            let mut f = OwnedFrame::new(info);
            for (p, plane) in f.planes.iter_mut().enumerate() {
                for (i, v) in plane.iter_mut().enumerate() {
                    let base = (i % 37) as u64 * 5 + (i / 37) as u64 * 3 + t as u64 * 7 + p as u64 * 11;
                    *v = ((base * 2654435761) >> 7) as u8 % 200 + 20;
                }
            }
            f
        })
        .collect()
}

/// Pushes every frame, popping whatever is ready after each call; returns (index, output) of
/// the delivered frames and the indices each failing call reported lost.
fn run(d: &mut Denoiser<usize>, inputs: &[OwnedFrame]) -> (Vec<(usize, OwnedFrame)>, Vec<usize>, usize) {
    let info = inputs[0].info;
    let mut delivered = Vec::new();
    let mut lost = Vec::new();
    let mut errors = 0;
    let mut in_engine: Vec<usize> = Vec::new(); // pushed, not yet popped, in order
    let pop_all = |d: &mut Denoiser<usize>, delivered: &mut Vec<(usize, OwnedFrame)>, in_engine: &mut Vec<usize>| loop {
        let mut out = OwnedFrame::new(info);
        match d.pop(&mut out.as_mut()) {
            Ok(Some(i)) => {
                assert_eq!(in_engine.first(), Some(&i), "frames come out in push order");
                in_engine.remove(0);
                delivered.push((i, out));
            }
            Ok(None) => break,
            Err(e) => panic!("pop failed: {e}"),
        }
    };
    for (i, f) in inputs.iter().enumerate() {
        let before = d.queued();
        in_engine.push(i);
        match d.push(&f.as_ref(), i) {
            Ok(()) => {}
            Err(e) => {
                errors += 1;
                assert!(matches!(e, Error::Backend(_)), "{e}");
                // What the engine still holds are its finished frames, the oldest; the frames
                // after them were lost, and the error of this call is their report.
                let kept = d.queued();
                assert!(kept <= before + 1, "queued grew on an error");
                let gone: Vec<usize> = in_engine.drain(kept..).collect();
                // The engine names them too, the frame of this call last.
                let named = d.take_lost();
                assert_eq!(named, gone, "frames the engine names as lost");
                assert_eq!(named.last(), Some(&i), "the pushed frame is among the lost");
                lost.extend(gone);
            }
        }
        pop_all(d, &mut delivered, &mut in_engine);
    }
    match d.finish_stream() {
        Ok(()) => {}
        Err(e) => {
            errors += 1;
            assert!(matches!(e, Error::Backend(_)), "{e}");
            let kept = d.queued();
            let gone: Vec<usize> = in_engine.drain(kept..).collect();
            assert_eq!(d.take_lost(), gone, "frames the engine names as lost at the end");
            lost.extend(gone);
        }
    }
    assert!(d.take_lost().is_empty(), "every loss was named by the call that caused it");
    pop_all(d, &mut delivered, &mut in_engine);
    assert!(in_engine.is_empty(), "frames neither delivered nor reported: {in_engine:?}");
    (delivered, lost, errors)
}

fn params() -> Params {
    Params { search_radius: 2, patch_radius: 1, temporal_past: 2, temporal_future: 1, strength: 12.0, chroma_strength: 12.0, ..Params::default() }
}

#[test]
fn every_frame_is_delivered_or_reported_lost() {
    let info = VideoInfo::new(PixelFormat::I420, 40, 30).unwrap();
    let inputs = frames(info, 16);
    let options = BackendOptions { kind: BackendKind::Cpu, ..Default::default() };
    // The outputs without a fault, to compare delivered frames with.
    let mut clean: Denoiser<usize> = Denoiser::new(info, params(), &options).unwrap();
    let (reference, lost, errors) = run(&mut clean, &inputs);
    assert!(lost.is_empty() && errors == 0 && reference.len() == inputs.len());

    for depth in [0, 2] {
        for op in [Op::Upload, Op::Launch, Op::Finish] {
            for forever in [false, true] {
                for nth in [0, 5] {
                    let calls = Arc::new(AtomicUsize::new(0));
                    let inner = nlmdenoise::backends::create(&BackendOptions { pipeline_depth: depth, ..options.clone() }).unwrap();
                    let faulty = Faulty { inner, op, nth, forever, calls: calls.clone(), dead: false };
                    let mut d: Denoiser<usize> = Denoiser::with_backend(info, params(), Box::new(faulty)).unwrap();
                    let case = format!("{op:?} #{nth}, forever {forever}, depth {depth}");
                    let (delivered, lost, errors) = run(&mut d, &inputs);
                    assert!(errors >= 1, "{case}: the fault was reported");
                    let mut seen: Vec<usize> = delivered.iter().map(|(i, _)| *i).chain(lost.iter().copied()).collect();
                    seen.sort();
                    assert_eq!(seen, (0..inputs.len()).collect::<Vec<_>>(), "{case}: every frame delivered or lost, once");
                    if forever {
                        // Nothing is computed after the device is gone.
                        assert!(lost.len() >= inputs.len() - delivered.len(), "{case}");
                    } else {
                        // A transient fault loses at most the frames in flight at that moment
                        // (the window plus the pipeline), and the stream goes on.
                        assert!(lost.len() <= 2 + 1 + 1 + depth, "{case}: lost {lost:?}");
                        assert!(delivered.iter().any(|(i, _)| *i > lost.iter().copied().max().unwrap_or(0)), "{case}: no frame after the fault");
                    }
                    // Delivered frames before the fault match the clean run exactly; after a
                    // transient fault the new window starts afresh, so later frames may differ
                    // from the clean run (fewer references) but must still be denoised frames
                    // of the right index: compare those whose window was not cut.
                    let first_lost = lost.iter().copied().min().unwrap_or(usize::MAX);
                    for (i, out) in &delivered {
                        // Never a frame whose computation failed: that would come out as its
                        // input, unfiltered.
                        assert!(out.planes != inputs[*i].planes, "{case}: frame {i} delivered without being denoised");
                        if *i + 2 < first_lost {
                            assert!(out.planes == reference[*i].1.planes, "{case}: frame {i} differs from the run without the fault");
                        }
                    }
                }
            }
        }
    }
}

/// What the element does with `backend=auto` when the GPU fails for good mid-stream: the frames
/// the failure lost are named, the finished ones move to a new denoiser on another backend
/// (`adopt_ready`), the frame whose push failed is pushed again there, and the stream goes on.
#[test]
fn a_second_backend_takes_over_after_a_lost_device() {
    let info = VideoInfo::new(PixelFormat::I420, 40, 30).unwrap();
    let inputs = frames(info, 16);
    let options = BackendOptions { kind: BackendKind::Cpu, pipeline_depth: 2, ..Default::default() };
    for op in [Op::Upload, Op::Launch, Op::Finish] {
        let inner = nlmdenoise::backends::create(&options).unwrap();
        let faulty = Faulty { inner, op, nth: 5, forever: true, calls: Arc::new(AtomicUsize::new(0)), dead: false };
        let mut d: Denoiser<usize> = Denoiser::with_backend(info, params(), Box::new(faulty)).unwrap();
        let mut delivered = Vec::new();
        let mut lost = Vec::new();
        let mut took_over = false;
        let pop_all = |d: &mut Denoiser<usize>, delivered: &mut Vec<usize>| {
            let mut out = OwnedFrame::new(info);
            while let Some(i) = d.pop(&mut out.as_mut()).unwrap() {
                assert!(out.planes != inputs[i].planes, "{op:?}: frame {i} delivered without being denoised");
                delivered.push(i);
            }
        };
        for (i, f) in inputs.iter().enumerate() {
            if let Err(e) = d.push(&f.as_ref(), i) {
                assert!(matches!(e, Error::Backend(_)) && !took_over, "{op:?}: {e}");
                let mut named = d.take_lost();
                assert_eq!(named.pop(), Some(i), "{op:?}: the failed push's frame is named last");
                lost.extend(named);
                let mut next: Denoiser<usize> = Denoiser::new(info, params(), &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap();
                next.adopt_ready(&mut d).unwrap();
                assert_eq!(d.ready(), 0, "{op:?}: finished frames moved");
                d = next;
                d.push(&f.as_ref(), i).unwrap();
                took_over = true;
            }
            pop_all(&mut d, &mut delivered);
        }
        d.finish_stream().unwrap();
        pop_all(&mut d, &mut delivered);
        assert!(took_over, "{op:?}: the fault happened");
        assert!(delivered.windows(2).all(|w| w[0] < w[1]), "{op:?}: in order: {delivered:?}");
        let mut seen: Vec<usize> = delivered.iter().chain(lost.iter()).copied().collect();
        seen.sort();
        assert_eq!(seen, (0..inputs.len()).collect::<Vec<_>>(), "{op:?}: every frame delivered or named lost, once");
        // Lost: at most the frames in flight (window and pipeline), never the re-pushed one.
        assert!(lost.len() <= 2 + 1 + 2, "{op:?}: lost {lost:?}");
    }
}
