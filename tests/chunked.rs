//! Chunked processing and several workers (`device::chunked`) on the host backends: output is
//! bit-identical to unchunked processing for every chunk size, window shape, sequence length,
//! end of stream and reset point, parameter change and worker count; chunk sizes that do not fit
//! are refused; worker failures and panics come back as errors; dropping joins the workers.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{make_frame, Content, Waves};
use nlmdenoise::device::chunked::{host_threads_per_worker, BackendFactory, ChunkedBackend, AUTO_MAX_FRAMES, FREE_FRACTION, HOST_CHUNK_FRAMES};
use nlmdenoise::device::host::HostBackend;
use nlmdenoise::device::{Backend, ChunkFrames, Configured, DeviceMemory, Devices, Frame, FramePool, StreamSetup};
use nlmdenoise::error::{Error, Result};
use nlmdenoise::plan::Plan;
use nlmdenoise::planar::{Geometry, PlanarFrame};
use nlmdenoise::window::Job;
use nlmdenoise::{BackendKind, BackendOptions, ChromaMode, Denoiser, OwnedFrame, Params, PixelFormat, PlaneSelection, VideoInfo};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const HOST_BACKENDS: [BackendKind; 2] = [BackendKind::Reference, BackendKind::Cpu];
const CHUNKS: [usize; 4] = [1, 2, 7, 64];
const WAVES: Waves = Waves { x: 0.31, y: 0.17, t: 0.4 };

fn options(kind: BackendKind, chunk: ChunkFrames, workers: usize) -> BackendOptions {
    let devices = if workers > 1 { Devices::List(vec![0; workers]) } else { Devices::Default };
    BackendOptions { kind, threads: 1, chunk_frames: chunk, devices, ..BackendOptions::default() }
}

fn frames(info: VideoInfo, n: usize, seed: u64) -> Vec<OwnedFrame> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|i| make_frame(info, 0, Content::Smooth { amp: 14 }, WAVES, i, &mut rng)).collect()
}

fn base() -> Params {
    Params { search_radius: 2, patch_radius: 1, strength: 12.0, chroma_strength: 14.0, ..Params::default() }
}

/// Window shapes: past only (live), symmetric (offline), future only, wide past with luma-guided
/// chroma.
fn windows() -> Vec<Params> {
    vec![
        Params { temporal_past: 2, ..base() },
        Params { temporal_past: 2, temporal_future: 2, ..base() },
        Params { temporal_future: 1, ..base() },
        Params { temporal_past: 3, temporal_future: 1, chroma_mode: ChromaMode::LumaGuided, ..base() },
    ]
}

#[derive(Clone, Debug)]
enum Op {
    /// Push the next input frame (tag = its index).
    Push(usize),
    Finish,
    Reset,
    Retune(Params),
}

/// Runs a script of operations, popping after each; returns every output by tag.
fn run(d: &mut Denoiser<usize>, inputs: &[OwnedFrame], ops: &[Op]) -> Vec<Option<OwnedFrame>> {
    let info = inputs[0].info;
    let mut outs: Vec<Option<OwnedFrame>> = vec![None; inputs.len()];
    let mut next = 0;
    let pop_all = |d: &mut Denoiser<usize>, outs: &mut Vec<Option<OwnedFrame>>| loop {
        let mut o = OwnedFrame::new(info);
        o.planes.iter_mut().for_each(|p| p.fill(0xA5));
        match d.pop(&mut o.as_mut()).unwrap() {
            Some(tag) => {
                assert!(outs[tag].is_none(), "frame {tag} came out twice");
                outs[tag] = Some(o);
            }
            None => break,
        }
    };
    for op in ops {
        match op {
            Op::Push(k) => {
                for _ in 0..*k {
                    d.push(&inputs[next].as_ref(), next).unwrap();
                    next += 1;
                    pop_all(d, &mut outs);
                }
            }
            Op::Finish => d.finish_stream().unwrap(),
            Op::Reset => d.reset(),
            Op::Retune(p) => d.set_params(*p).unwrap(),
        }
        pop_all(d, &mut outs);
    }
    outs
}

fn denoiser(info: VideoInfo, params: Params, o: &BackendOptions) -> Denoiser<usize> {
    Denoiser::new(info, params, o).unwrap_or_else(|e| panic!("{o:?}: {e}"))
}

/// Asserts that every frame that came out of both runs is identical, and that `must` frames
/// came out of both.
fn assert_same(label: &str, expect: &[Option<OwnedFrame>], got: &[Option<OwnedFrame>], must: impl Fn(usize) -> bool) {
    for (i, (e, g)) in expect.iter().zip(got).enumerate() {
        if must(i) {
            assert!(e.is_some() && g.is_some(), "{label}: frame {i} missing (unchunked {}, chunked {})", e.is_some(), g.is_some());
        }
        if let (Some(e), Some(g)) = (e, g) {
            assert!(e == g, "{label}: frame {i} differs from unchunked output");
        }
    }
}

#[test]
fn every_chunk_size_gives_the_unchunked_output() {
    let info = VideoInfo::new(PixelFormat::I420, 24, 18).unwrap();
    for kind in HOST_BACKENDS {
        for params in windows() {
            // Shorter than most chunks, and longer than several.
            for len in [5usize, 23] {
                let inputs = frames(info, len, 11 + len as u64);
                let ops = vec![Op::Push(len), Op::Finish];
                let expect = run(&mut denoiser(info, params, &options(kind, ChunkFrames::Off, 1)), &inputs, &ops);
                assert!(expect.iter().all(|o| o.is_some()));
                for n in CHUNKS {
                    let o = options(kind, ChunkFrames::Frames(n), 1);
                    let mut d = denoiser(info, params, &o);
                    assert_eq!(d.latency_frames(), params.temporal_future as usize + 2 * n - 1, "{kind} chunk {n}: latency of one worker, two chunks in flight");
                    let got = run(&mut d, &inputs, &ops);
                    assert_same(&format!("{kind} chunk {n} len {len} {params:?}"), &expect, &got, |_| true);
                }
            }
        }
    }
}

#[test]
fn sixteen_bit_samples_and_auto_chunks_match() {
    let info = VideoInfo::new(PixelFormat::P010_10LE, 20, 14).unwrap();
    let inputs = frames(info, 19, 5);
    let params = Params { temporal_past: 2, temporal_future: 1, ..base() };
    let ops = vec![Op::Push(19), Op::Finish];
    let expect = run(&mut denoiser(info, params, &options(BackendKind::Cpu, ChunkFrames::Off, 1)), &inputs, &ops);
    let mut d = denoiser(info, params, &options(BackendKind::Cpu, ChunkFrames::Auto, 1));
    assert_eq!(d.latency_frames(), 1 + 2 * HOST_CHUNK_FRAMES - 1, "auto on a host backend is {HOST_CHUNK_FRAMES} frames");
    assert!(d.backend_description().contains("chunked"), "{}", d.backend_description());
    let got = run(&mut d, &inputs, &ops);
    assert_same("P010 auto", &expect, &got, |_| true);
}

#[test]
fn several_workers_give_the_output_of_one() {
    let info = VideoInfo::new(PixelFormat::NV12, 22, 16).unwrap();
    let inputs = frames(info, 31, 3);
    for params in [Params { temporal_past: 2, temporal_future: 2, ..base() }, Params { temporal_past: 2, ..base() }] {
        let ops = vec![Op::Push(31), Op::Finish];
        let expect = run(&mut denoiser(info, params, &options(BackendKind::Cpu, ChunkFrames::Off, 1)), &inputs, &ops);
        for (workers, n) in [(2, 1), (2, 3), (3, 2), (3, 7), (4, 64)] {
            let mut d = denoiser(info, params, &options(BackendKind::Cpu, ChunkFrames::Frames(n), workers));
            assert_eq!(d.latency_frames(), params.temporal_future as usize + (workers + 1) * n - 1, "{workers} workers, chunk {n}");
            let got = run(&mut d, &inputs, &ops);
            assert_same(&format!("{workers} workers chunk {n} {params:?}"), &expect, &got, |_| true);
        }
        // Several devices without a chunk size: automatic chunks.
        let mut d = denoiser(info, params, &options(BackendKind::Reference, ChunkFrames::Off, 2));
        assert_eq!(d.latency_frames(), params.temporal_future as usize + 3 * HOST_CHUNK_FRAMES - 1);
        let got = run(&mut d, &inputs, &ops);
        assert_same("2 reference workers, auto", &expect, &got, |_| true);
    }
}

#[test]
fn finish_stream_mid_chunk_then_a_new_window() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 12).unwrap();
    let inputs = frames(info, 30, 9);
    let ops = vec![Op::Push(10), Op::Finish, Op::Push(3), Op::Finish, Op::Finish, Op::Push(17), Op::Finish];
    for kind in HOST_BACKENDS {
        for params in windows() {
            let expect = run(&mut denoiser(info, params, &options(kind, ChunkFrames::Off, 1)), &inputs, &ops);
            assert!(expect.iter().all(|o| o.is_some()));
            for (n, workers) in [(1, 1), (2, 1), (7, 1), (64, 1), (4, 2)] {
                let got = run(&mut denoiser(info, params, &options(kind, ChunkFrames::Frames(n), workers)), &inputs, &ops);
                assert_same(&format!("{kind} chunk {n} x{workers} {params:?}"), &expect, &got, |_| true);
            }
        }
    }
}

#[test]
fn reset_mid_chunk_drops_pending_frames_and_leaks_no_history() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 12).unwrap();
    let inputs = frames(info, 30, 21);
    for kind in HOST_BACKENDS {
        for params in windows() {
            let ops = vec![Op::Push(11), Op::Reset, Op::Push(12), Op::Finish];
            let expect = run(&mut denoiser(info, params, &options(kind, ChunkFrames::Off, 1)), &inputs, &ops);
            for (n, workers) in [(1, 1), (2, 1), (7, 1), (64, 1), (3, 3)] {
                let mut d = denoiser(info, params, &options(kind, ChunkFrames::Frames(n), workers));
                let got = run(&mut d, &inputs, &ops);
                // Frames pushed after the reset must all come out, equal to unchunked (which
                // starts a new window there too); before it, whatever came out must be equal.
                assert_same(&format!("{kind} chunk {n} x{workers} {params:?}"), &expect, &got, |i| (11..23).contains(&i));
                // With a chunk longer than the latency of unchunked processing, frames were
                // really dropped: the reset did not wait for the partial chunk's outputs.
                if n == 64 {
                    assert!(got[..11].iter().all(|o| o.is_none()), "{kind}: reset must drop frames still in the chunk");
                    assert_eq!(d.queued(), 0);
                }
            }
        }
    }
}

#[test]
fn parameter_changes_mid_chunk_match() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 12).unwrap();
    let inputs = frames(info, 40, 33);
    let p = Params { temporal_past: 2, temporal_future: 1, ..base() };
    // Strength only (applies from the next job), then a structural change (drains first).
    let ops = vec![
        Op::Push(9),
        Op::Retune(Params { strength: 30.0, chroma_strength: 5.0, ..p }),
        Op::Push(5),
        Op::Retune(Params { strength: 3.0, wref: 2.0, ..p }),
        Op::Push(3),
        Op::Retune(Params { temporal_past: 1, temporal_future: 2, search_radius: 1, ..p }),
        Op::Push(13),
        Op::Finish,
    ];
    for kind in HOST_BACKENDS {
        let expect = run(&mut denoiser(info, p, &options(kind, ChunkFrames::Off, 1)), &inputs, &ops);
        assert!(expect[..30].iter().all(|o| o.is_some()));
        for (n, workers) in [(1, 1), (2, 1), (7, 1), (64, 1), (3, 2)] {
            let got = run(&mut denoiser(info, p, &options(kind, ChunkFrames::Frames(n), workers)), &inputs, &ops);
            assert_same(&format!("{kind} chunk {n} x{workers}"), &expect, &got, |i| i < 30);
        }
    }
}

#[test]
fn outputs_come_out_within_the_reported_latency() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 8, 8).unwrap();
    let inputs = frames(info, 40, 1);
    for (n, workers, future) in [(1, 1, 0), (3, 1, 1), (5, 2, 2), (2, 3, 0)] {
        let params = Params { temporal_past: 1, temporal_future: future, ..base() };
        let mut d = denoiser(info, params, &options(BackendKind::Cpu, ChunkFrames::Frames(n), workers));
        let latency = d.latency_frames();
        assert_eq!(latency, future as usize + (workers + 1) * n - 1);
        let mut out = OwnedFrame::new(info);
        let mut popped = 0usize;
        for (i, f) in inputs.iter().enumerate() {
            d.push(&f.as_ref(), i).unwrap();
            while let Some(tag) = d.pop(&mut out.as_mut()).unwrap() {
                assert_eq!(tag, popped, "in order");
                popped += 1;
            }
            // Every frame comes out exactly `latency` frames after it went in: the reported
            // latency is neither too small (a frame late) nor too large (a live pipeline would
            // buffer for nothing).
            assert_eq!(popped, (i + 1).saturating_sub(latency), "chunk {n} x{workers}: outputs after push {i} (latency {latency})");
        }
        d.finish_stream().unwrap();
        while d.pop(&mut out.as_mut()).unwrap().is_some() {
            popped += 1;
        }
        assert_eq!(popped, inputs.len());
    }
}

#[test]
fn options_parse_and_select_chunking() {
    assert_eq!("auto".parse::<ChunkFrames>().unwrap(), ChunkFrames::Auto);
    assert_eq!("off".parse::<ChunkFrames>().unwrap(), ChunkFrames::Off);
    assert_eq!("16".parse::<ChunkFrames>().unwrap(), ChunkFrames::Frames(16));
    assert!(matches!("100000".parse::<ChunkFrames>(), Err(Error::InvalidParameter(_))));
    assert!(matches!("-1".parse::<ChunkFrames>(), Err(Error::InvalidParameter(_))));
    assert_eq!("0,1".parse::<Devices>().unwrap(), Devices::List(vec![0, 1]));
    assert_eq!("ALL".parse::<Devices>().unwrap(), Devices::All);
    assert!(matches!("0,x".parse::<Devices>(), Err(Error::InvalidParameter(_))));
    assert!(matches!("".parse::<Devices>(), Err(Error::InvalidParameter(_))));
    assert!(!BackendOptions::default().chunked(), "default stays a frame at a time");
    assert!(!options(BackendKind::Cpu, ChunkFrames::Off, 1).chunked());
    assert!(!BackendOptions { devices: Devices::List(vec![3]), ..BackendOptions::default() }.chunked());
    assert!(options(BackendKind::Cpu, ChunkFrames::Off, 2).chunked());
    assert!(options(BackendKind::Cpu, ChunkFrames::Auto, 1).chunked());
    // Default options: today's behaviour (no latency added).
    let info = VideoInfo::new(PixelFormat::GRAY8, 8, 8).unwrap();
    let d: Denoiser<usize> = denoiser(info, Params { temporal_past: 2, ..base() }, &options(BackendKind::Cpu, ChunkFrames::Off, 1));
    assert_eq!(d.latency_frames(), 0);
    assert!(!d.backend_description().contains("chunked"));
    // An empty device list (only reachable through the API) is an error, chunked or not.
    for chunk in [ChunkFrames::Off, ChunkFrames::Frames(2)] {
        let r = Denoiser::<usize>::new(info, base(), &BackendOptions { kind: BackendKind::Cpu, chunk_frames: chunk, devices: Devices::List(vec![]), ..BackendOptions::default() });
        assert!(matches!(r, Err(Error::InvalidParameter(_))), "{chunk:?}");
    }
    for bad in [ChunkFrames::Frames(0), ChunkFrames::Frames(100_000)] {
        let r = Denoiser::<usize>::new(info, base(), &options(BackendKind::Cpu, bad, 1));
        assert!(matches!(r, Err(Error::InvalidParameter(_))), "{bad:?}");
    }
}

#[test]
fn host_workers_share_the_cores() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 8, 8).unwrap();
    // threads 0 (all cores) over two host workers: each gets half, not all of them.
    let d: Denoiser<usize> = denoiser(info, base(), &BackendOptions { threads: 0, ..options(BackendKind::Cpu, ChunkFrames::Frames(2), 2) });
    let each = format!("cpu ({} threads)", host_threads_per_worker(2));
    assert_eq!(d.backend_description().matches(&each).count(), 2, "{}", d.backend_description());
    assert!(host_threads_per_worker(2) >= 1);
    assert_eq!(host_threads_per_worker(2), (std::thread::available_parallelism().unwrap().get() / 2).max(1));
    // An explicit thread count is each worker's own.
    let d: Denoiser<usize> = denoiser(info, base(), &BackendOptions { threads: 3, ..options(BackendKind::Cpu, ChunkFrames::Frames(2), 2) });
    assert_eq!(d.backend_description().matches("cpu (3 threads)").count(), 2, "{}", d.backend_description());
}

// ---------------------------------------------------------------------------------------------
// Host backends dressed up as devices, or failing on purpose, through `with_factory`.

/// A CPU backend that reports device memory (and optionally fails or panics in `finish`).
struct Fake {
    inner: Box<dyn Backend>,
    free: u64,
    per_frame: u64,
    finishes: Arc<AtomicUsize>,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
    /// Ring slots allocated (their memory is no longer free, as on a real device).
    slots: usize,
    /// Fakes alive.
    live: Arc<AtomicUsize>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Backend for Fake {
    fn describe(&self) -> String {
        "fake device".into()
    }
    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Configured> {
        let c = self.inner.configure(setup)?;
        self.slots = c.ring_slots;
        Ok(c)
    }
    fn pool(&mut self) -> &mut FramePool {
        self.inner.pool()
    }
    fn submit(&mut self, slot: usize, f: Arc<Frame>) -> Result<()> {
        self.inner.submit(slot, f)
    }
    fn launch(&mut self, jobs: &[Job], p: &Plan) -> Result<()> {
        self.inner.launch(jobs, p)
    }
    fn finish(&mut self) -> Result<Frame> {
        let k = self.finishes.fetch_add(1, Ordering::SeqCst);
        if Some(k) == self.panic_at {
            panic!("injected panic");
        }
        if Some(k) == self.fail_at {
            let _ = self.inner.finish();
            return Err(Error::Backend(nlmdenoise::BackendError::Launch("injected failure".into())));
        }
        self.inner.finish()
    }
    fn memory(&mut self, _: &Geometry, _: &Plan) -> Option<DeviceMemory> {
        (self.per_frame > 0).then_some(DeviceMemory { free: self.free.saturating_sub(self.slots as u64 * self.per_frame), total: 2 * self.free, per_frame: self.per_frame })
    }
}

#[derive(Clone, Default)]
struct FakeSpec {
    free: u64,
    per_frame: u64,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
}

fn fake_factory(spec: FakeSpec, finishes: Arc<AtomicUsize>, live: Arc<AtomicUsize>) -> BackendFactory {
    Arc::new(move |_, _| {
        live.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(Fake {
            inner: Box::new(nlmdenoise::backends::cpu(1)?),
            free: spec.free,
            per_frame: spec.per_frame,
            finishes: finishes.clone(),
            fail_at: spec.fail_at,
            panic_at: spec.panic_at,
            slots: 0,
            live: live.clone(),
        }) as Box<dyn Backend>)
    })
}

fn chunked_denoiser(info: VideoInfo, params: Params, chunk: ChunkFrames, workers: usize, spec: FakeSpec) -> Result<Denoiser<usize>> {
    let b = ChunkedBackend::with_factory(chunk, &vec![0; workers], fake_factory(spec, Arc::default(), Arc::default()))?;
    Denoiser::with_backend(info, params, Box::new(b))
}

/// Issue 33 item 13: a CPU chunk larger than host memory allowed was allocated up front (the
/// process aborted under a memory limit, or ran out of memory); it is now refused at creation,
/// naming the host memory rule.
#[test]
fn host_chunk_larger_than_host_memory_is_refused() {
    assert!(nlmdenoise::device::chunked::available_host_memory().is_some(), "this test needs /proc/meminfo");
    // 8K I420 frames: 2 x (1024 + 4) of them need about a terabyte of host memory.
    let info = VideoInfo::new(PixelFormat::I420, 7680, 4320).unwrap();
    let params = Params { temporal_past: 2, temporal_future: 2, ..base() };
    let factory: BackendFactory = Arc::new(|_, _| Ok(Box::new(nlmdenoise::backends::cpu(1)?) as Box<dyn Backend>));
    let b = ChunkedBackend::with_factory(ChunkFrames::Frames(1024), &[0], factory.clone()).unwrap();
    match Denoiser::<usize>::with_backend(info, params, Box::new(b)) {
        Err(Error::InvalidParameter(m)) => assert!(m.contains("does not fit") && m.contains("host memory"), "{m}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a chunk of 1024 8K frames must not fit in host memory"),
    }
    // A small stream keeps its explicit chunk and the automatic size.
    let small = VideoInfo::new(PixelFormat::I420, 32, 16).unwrap();
    let b = ChunkedBackend::with_factory(ChunkFrames::Frames(64), &[0], factory.clone()).unwrap();
    let d = Denoiser::<usize>::with_backend(small, params, Box::new(b)).unwrap();
    assert_eq!(d.latency_frames(), 2 + 2 * 64 - 1);
    let b = ChunkedBackend::with_factory(ChunkFrames::Auto, &[0], factory).unwrap();
    let d = Denoiser::<usize>::with_backend(small, params, Box::new(b)).unwrap();
    assert_eq!(d.latency_frames(), 2 + 2 * HOST_CHUNK_FRAMES - 1);
}

#[test]
fn chunk_size_follows_device_memory() {
    let info = VideoInfo::new(PixelFormat::I420, 32, 16).unwrap();
    let params = Params { temporal_past: 2, temporal_future: 2, ..base() };
    let per_frame = 1 << 20;
    // 2 x (n + 4) frames must fit in FREE_FRACTION of the free memory.
    let free = 40u64 << 20;
    let fits = ((FREE_FRACTION * free as f64 / per_frame as f64) as usize) / 2 - 4;
    assert_eq!(fits, 6);
    let spec = FakeSpec { free, per_frame, ..Default::default() };
    let d = chunked_denoiser(info, params, ChunkFrames::Auto, 1, spec.clone()).unwrap();
    assert_eq!(d.latency_frames(), 2 + 2 * fits - 1, "{}", d.backend_description());
    // Plenty of memory: capped.
    let big = FakeSpec { free: 1 << 40, per_frame, ..Default::default() };
    let d = chunked_denoiser(info, params, ChunkFrames::Auto, 2, big).unwrap();
    assert_eq!(d.latency_frames(), 2 + 3 * AUTO_MAX_FRAMES - 1);
    // Explicit sizes: up to what fits; beyond, a clear error at creation.
    assert!(chunked_denoiser(info, params, ChunkFrames::Frames(fits), 1, spec.clone()).is_ok());
    match chunked_denoiser(info, params, ChunkFrames::Frames(fits + 1), 1, spec.clone()) {
        Err(Error::InvalidParameter(m)) => assert!(m.contains("does not fit") && m.contains("at most 6"), "{m}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a chunk of {} frames must not fit", fits + 1),
    }
    // Not even one frame.
    let tiny = FakeSpec { free: 4 << 20, per_frame, ..Default::default() };
    assert!(matches!(chunked_denoiser(info, params, ChunkFrames::Auto, 1, tiny), Err(Error::InvalidParameter(_))));
    // A structural change that no longer fits is refused and the old parameters stay.
    let mut d = chunked_denoiser(info, params, ChunkFrames::Frames(fits), 1, spec).unwrap();
    let wider = Params { temporal_past: 6, temporal_future: 2, ..base() };
    assert!(matches!(d.set_params(wider), Err(Error::InvalidParameter(_))));
    assert_eq!(d.params().temporal_past, 2);
    let inputs = frames(info, 3, 1);
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
    }
    d.finish_stream().unwrap();
    assert_eq!(d.ready(), 3);
}

#[test]
fn worker_errors_and_panics_surface_as_errors_and_the_stream_goes_on() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 12).unwrap();
    let inputs = frames(info, 40, 8);
    let params = Params { temporal_past: 1, temporal_future: 1, ..base() };
    for (workers, spec) in [
        (1, FakeSpec { fail_at: Some(5), ..Default::default() }),
        (2, FakeSpec { fail_at: Some(4), ..Default::default() }),
        (1, FakeSpec { panic_at: Some(3), ..Default::default() }),
        (3, FakeSpec { panic_at: Some(2), ..Default::default() }),
    ] {
        let label = format!("{workers} workers {:?} {:?}", spec.fail_at, spec.panic_at);
        let mut d = chunked_denoiser(info, params, ChunkFrames::Frames(3), workers, spec).unwrap();
        let mut errors = 0;
        let mut out = OwnedFrame::new(info);
        let mut tags = Vec::new();
        for (i, f) in inputs.iter().enumerate() {
            match d.push(&f.as_ref(), i) {
                Ok(()) => {}
                Err(Error::Backend(m)) => {
                    let m = m.to_string();
                    assert!(m.contains("injected") || m.contains("panicked") || m.contains("earlier error"), "{label}: {m}");
                    errors += 1;
                }
                Err(e) => panic!("{label}: unexpected error {e}"),
            }
            while let Some(t) = d.pop(&mut out.as_mut()).unwrap() {
                tags.push(t);
            }
        }
        d.finish_stream().unwrap();
        while let Some(t) = d.pop(&mut out.as_mut()).unwrap() {
            tags.push(t);
        }
        assert!(errors >= 1, "{label}: the failure must be reported");
        assert!(tags.windows(2).all(|w| w[0] < w[1]), "{label}: outputs in order: {tags:?}");
        assert!(tags.contains(&39) && tags.len() > 25, "{label}: the stream goes on after the error: {tags:?}");
    }
}

#[test]
fn dropping_the_denoiser_joins_its_workers() {
    let info = VideoInfo::new(PixelFormat::GRAY8, 8, 8).unwrap();
    let inputs = frames(info, 7, 2);
    let live = Arc::new(AtomicUsize::new(0));
    let b = ChunkedBackend::with_factory(ChunkFrames::Frames(4), &[0, 1], fake_factory(FakeSpec::default(), Arc::default(), live.clone())).unwrap();
    let mut d: Denoiser<usize> = Denoiser::with_backend(info, Params { temporal_past: 1, ..base() }, Box::new(b)).unwrap();
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
    }
    assert_eq!(live.load(Ordering::SeqCst), 2, "one backend per worker");
    // Chunks still in flight when dropped.
    drop(d);
    assert_eq!(live.load(Ordering::SeqCst), 0, "workers ended (and dropped their backends) before drop returned");
    // A backend that cannot be created is an error, not a hang.
    let failing: BackendFactory = Arc::new(|i, _| if i == 1 { Err(Error::BackendUnavailable("no such device".into())) } else { Ok(Box::new(nlmdenoise::backends::reference()) as Box<dyn Backend>) });
    assert!(matches!(ChunkedBackend::with_factory(ChunkFrames::Auto, &[0, 1], failing), Err(Error::BackendUnavailable(_))));
}

// ---------------------------------------------------------------------------------------------
// Pooled host frames.

/// A CPU backend that reads submitted frames late (as a DMA engine would): at the next finish,
/// checking that each frame still holds what it held when it was submitted. Were a frame reused
/// or written while a worker's chunk still holds it, the check or the outputs would fail.
struct Deferred {
    inner: HostBackend,
    ops: VecDeque<DeferredOp>,
    /// Frames read late.
    reads: Arc<AtomicUsize>,
}

enum DeferredOp {
    /// Slot, the frame and a checksum of it when it was given.
    Submit(usize, Arc<Frame>, u64),
    Launch(Vec<Job>, Plan),
}

impl Backend for Deferred {
    fn describe(&self) -> String {
        "deferred-read cpu".into()
    }
    fn configure(&mut self, setup: &StreamSetup<'_>) -> Result<Configured> {
        self.ops.clear();
        self.inner.configure(setup)
    }
    fn pool(&mut self) -> &mut FramePool {
        self.inner.pool()
    }
    fn submit(&mut self, slot: usize, f: Arc<Frame>) -> Result<()> {
        let sum = checksum(&f);
        self.ops.push_back(DeferredOp::Submit(slot, f, sum));
        Ok(())
    }
    fn launch(&mut self, jobs: &[Job], p: &Plan) -> Result<()> {
        self.ops.push_back(DeferredOp::Launch(jobs.to_vec(), p.clone()));
        Ok(())
    }
    fn finish(&mut self) -> Result<Frame> {
        if self.ops.iter().any(|o| matches!(o, DeferredOp::Submit(..))) {
            // A slow DMA engine: the caller's thread goes on meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(4));
        }
        while let Some(op) = self.ops.pop_front() {
            match op {
                DeferredOp::Submit(slot, f, sum) => {
                    assert_eq!(checksum(&f), sum, "a submitted frame changed before its job was finished");
                    self.reads.fetch_add(1, Ordering::SeqCst);
                    self.inner.submit(slot, f)?;
                }
                DeferredOp::Launch(j, p) => self.inner.launch(&j, &p)?,
            }
        }
        self.inner.finish()
    }
    fn memory(&mut self, _: &Geometry, _: &Plan) -> Option<DeviceMemory> {
        None
    }
}

fn checksum(f: &PlanarFrame) -> u64 {
    f.planes.iter().flat_map(|p| p.samples.as_bytes()).fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn deferred_factory(reads: Arc<AtomicUsize>) -> BackendFactory {
    Arc::new(move |_, _| Ok(Box::new(Deferred { inner: nlmdenoise::backends::cpu(1)?, ops: VecDeque::new(), reads: reads.clone() }) as Box<dyn Backend>))
}

#[test]
fn no_pooled_frame_is_reused_while_a_worker_may_still_read_it() {
    let info = VideoInfo::new(PixelFormat::I420, 24, 16).unwrap();
    let inputs = frames(info, 45, 21);
    let script = [Op::Push(20), Op::Reset, Op::Push(17), Op::Finish, Op::Push(8), Op::Finish];
    // Planes luma: the chroma planes come out as they went in (the engine unpacks into a pooled
    // frame, the worker writes every plane of the engine's frame).
    for params in [Params { temporal_past: 2, ..base() }, Params { temporal_past: 2, temporal_future: 2, ..base() }, Params { temporal_past: 1, planes: PlaneSelection::Luma, ..base() }] {
        let expect = run(&mut denoiser(info, params, &options(BackendKind::Cpu, ChunkFrames::Off, 1)), &inputs, &script);
        for (n, workers) in [(1, 1), (2, 1), (3, 2), (7, 3), (1, 2)] {
            let reads = Arc::new(AtomicUsize::new(0));
            let b = ChunkedBackend::with_factory(ChunkFrames::Frames(n), &vec![0; workers], deferred_factory(reads.clone())).unwrap();
            let mut d = Denoiser::with_backend(info, params, Box::new(b)).unwrap();
            let got = run(&mut d, &inputs, &script);
            let label = format!("chunk {n}, {workers} workers, past {} future {}", params.temporal_past, params.temporal_future);
            assert_same(&label, &expect, &got, |i| i >= 20);
            assert!(reads.load(Ordering::SeqCst) >= 45 - 7, "{label}: frames were read late");
        }
    }
}

#[test]
fn pooled_frames_are_reused_across_chunks() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 12).unwrap();
    let inputs = frames(info, 200, 5);
    for (n, workers, params) in [(3, 1, Params { temporal_past: 2, ..base() }), (4, 2, Params { temporal_past: 2, temporal_future: 2, ..base() }), (1, 3, Params { temporal_future: 1, ..base() })] {
        let b = ChunkedBackend::with_factory(ChunkFrames::Frames(n), &vec![0; workers], Arc::new(|_, _| Ok(Box::new(nlmdenoise::backends::reference()) as Box<dyn Backend>))).unwrap();
        let stats = b.stats();
        let mut d: Denoiser<usize> = Denoiser::with_backend(info, params, Box::new(b)).unwrap();
        let latency = d.latency_frames();
        let mut out = OwnedFrame::new(info);
        let mut after_warmup = 0;
        let mut popped = 0;
        for (i, f) in inputs.iter().enumerate() {
            d.push(&f.as_ref(), i).unwrap();
            while d.pop(&mut out.as_mut()).unwrap().is_some() {
                popped += 1;
            }
            if i == 4 * latency + 20 {
                after_warmup = stats.pool_frames.load(Ordering::SeqCst);
            }
        }
        d.finish_stream().unwrap();
        while d.pop(&mut out.as_mut()).unwrap().is_some() {
            popped += 1;
        }
        let label = format!("chunk {n}, {workers} workers");
        assert_eq!(popped, inputs.len(), "{label}");
        let total = stats.pool_frames.load(Ordering::SeqCst);
        assert!(after_warmup > 0, "{label}: frames are pooled");
        // The pool makes frames while the pipeline fills, and again only when the workers'
        // timing lets more frames be in flight at once than before; never one per frame: the
        // total stays within what can be in flight (measured on 2 and 16 cores, where the second
        // sees later peaks: 34 then 38 frames for chunk 4 on 2 workers).
        // Inputs: the engine's ring plus the chunks in flight; outputs: the chunks in flight.
        let window = (params.temporal_past + 1 + params.temporal_future) as usize;
        let bound = 2 * (window + latency + 1) + (workers + 1) * n;
        assert!((total as usize) <= bound, "{label}: {total} pooled frames, expected at most {bound}");
    }
}

/// Submits `planar` frames into slots 0.. of `b`, launches one job per frame (each reading the
/// frame before it) and returns the finished frames; `keep`: the caller keeps a reference to every
/// submitted frame (as chunked execution does), so the backend cannot write in place.
fn run_on(b: &mut dyn Backend, geometry: &Geometry, plan: &Plan, planar: &[PlanarFrame], keep: bool) -> Vec<Frame> {
    let mut kept = Vec::new();
    for (i, p) in planar.iter().enumerate() {
        let mut f = b.pool().take(geometry);
        f.planes.iter_mut().zip(&p.planes).for_each(|(to, from)| to.samples.as_bytes_mut().copy_from_slice(from.samples.as_bytes()));
        let f = Arc::new(f);
        if keep {
            kept.push(f.clone());
        }
        b.submit(i, f).unwrap();
        let references = if i > 0 { vec![nlmdenoise::window::Reference { slot: i - 1, dt: -1 }] } else { vec![] };
        b.launch(&[Job { epoch: 0, seq: i as u64, slot: i, references }], plan).unwrap();
    }
    let out = planar.iter().map(|_| b.finish().unwrap()).collect();
    assert!(b.finish().is_err(), "nothing left to finish");
    out
}

#[test]
fn finished_frames_carry_the_input_where_the_plan_does_not_write() {
    let info = VideoInfo::new(PixelFormat::I420, 16, 12).unwrap();
    let geometry = Geometry::from_video_info(&info);
    let params = Params { planes: PlaneSelection::Luma, temporal_past: 1, ..base() };
    let plan = Plan::new(&geometry, &params).unwrap();
    let planar: Vec<PlanarFrame> = frames(info, 3, 9)
        .iter()
        .map(|f| {
            let mut p = PlanarFrame::zeroed(&geometry);
            nlmdenoise::convert::unpack(&f.as_ref(), &mut p).unwrap();
            p
        })
        .collect();
    let setup = StreamSetup { geometry: &geometry, plan: &plan, past: 1, future: 0, stored: None, ring_slots: Some(4) };
    let mut r = nlmdenoise::backends::reference();
    r.configure(&setup).unwrap();
    let expect = run_on(&mut r, &geometry, &plan, &planar, false);
    assert!(expect[0].planes[0] != planar[0].planes[0], "the luma plane is denoised");
    // The same jobs where the caller keeps the frames (outputs into frames of the pool, whose
    // previous content must not show), and through chunks of 2 on 2 workers.
    let mut shared = nlmdenoise::backends::reference();
    shared.configure(&setup).unwrap();
    let spare: Vec<Frame> = (0..3).map(|_| shared.pool().take(&geometry)).collect();
    for mut f in spare {
        f.planes.iter_mut().for_each(|p| p.samples.as_bytes_mut().fill(0x5A));
        shared.pool().give(f);
    }
    let got = run_on(&mut shared, &geometry, &plan, &planar, true);
    let mut chunked = ChunkedBackend::with_factory(ChunkFrames::Frames(2), &[0, 0], Arc::new(|_, _| Ok(Box::new(nlmdenoise::backends::reference()) as Box<dyn Backend>))).unwrap();
    chunked.configure(&StreamSetup { ring_slots: Some(8), ..setup }).unwrap();
    let through_chunks = run_on(&mut chunked, &geometry, &plan, &planar, false);
    for (i, ((e, g), c)) in expect.iter().zip(&got).zip(&through_chunks).enumerate() {
        assert!(e.planes[1..] == planar[i].planes[1..], "frame {i}: chroma as it came in");
        assert!(g.planes == e.planes, "frame {i}: output into a pool frame == in place");
        assert!(c.planes == e.planes, "frame {i}: through chunks == in place");
    }
}

#[test]
fn a_new_geometry_keeps_the_worker_backends_and_drops_the_old_frames() {
    // Frames carry their own page-lock (released when dropped), so a new geometry needs no new
    // worker backends; the pool keeps no frame of the old planes.
    let created = Arc::new(AtomicUsize::new(0));
    let live = Arc::new(AtomicUsize::new(0));
    let (c, l) = (created.clone(), live.clone());
    let factory: BackendFactory = Arc::new(move |_, _| {
        c.fetch_add(1, Ordering::SeqCst);
        l.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(Fake { inner: Box::new(nlmdenoise::backends::reference()), free: 0, per_frame: 0, finishes: Arc::default(), fail_at: None, panic_at: None, slots: 0, live: l.clone() })
            as Box<dyn Backend>)
    });
    let mut b = ChunkedBackend::with_factory(ChunkFrames::Frames(2), &[0, 0], factory).unwrap();
    let params = Params { temporal_past: 1, ..base() };
    let mut outputs = Vec::new();
    let mut first = None;
    for (w, h) in [(16, 12), (16, 12), (20, 10)] {
        let info = VideoInfo::new(PixelFormat::I420, w, h).unwrap();
        let geometry = Geometry::from_video_info(&info);
        let plan = Plan::new(&geometry, &params).unwrap();
        b.configure(&StreamSetup { geometry: &geometry, plan: &plan, past: 1, future: 0, stored: None, ring_slots: Some(8) }).unwrap();
        let created_before = *first.get_or_insert(created.load(Ordering::SeqCst));
        let planar: Vec<PlanarFrame> = frames(info, 3, 4)
            .iter()
            .map(|f| {
                let mut p = PlanarFrame::zeroed(&geometry);
                nlmdenoise::convert::unpack(&f.as_ref(), &mut p).unwrap();
                p
            })
            .collect();
        let out = run_on(&mut b, &geometry, &plan, &planar, false);
        assert_eq!(created.load(Ordering::SeqCst), created_before, "no backend is made for a new stream or geometry");
        out.into_iter().for_each(|f| b.pool().give(f));
        assert!(b.pool().take_spare(&geometry).is_some(), "finished frames go back to the pool");
        outputs.push(planar);
    }
    let old = Geometry::from_video_info(&VideoInfo::new(PixelFormat::I420, 16, 12).unwrap());
    assert!(b.pool().take_spare(&old).is_none(), "no frame of the old planes is kept");
    assert_eq!(live.load(Ordering::SeqCst), 2);
    drop(b);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}
