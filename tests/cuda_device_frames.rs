//! Frames in GPU memory (`Denoiser::push_device` / `pop_device`, what the GStreamer element does
//! with `memory:CUDAMemory`): the same bytes as the host path, for planar and interleaved formats,
//! every plane selection, the noise estimate, BM3D and super-resolution; device input with host
//! output; frames at a pitch wider than their rows (as GStreamer's CUDA pools allocate them), with
//! the output frames poisoned padding included (nothing written outside the rows); inputs let go
//! as soon as their copy is done; and the same in a CUDA context that is not the device's
//! primary one (a decoder's `GstCudaContext`), shared with the engine; scene cuts found in frames
//! pushed in device memory as on the host. Without a CUDA device every test prints "SKIPPED" and
//! passes.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{frame_path_cases as cases, gpu_or_skip, random_frames, shot};
use cudarc::driver::{result, CudaContext};
use nlmdenoise::device::cuda::shared::SharedContext;
use nlmdenoise::device::{DeviceFrame, DevicePlane};
use nlmdenoise::{BackendKind, BackendOptions, Denoiser, OwnedFrame, Params, PixelFormat, PlaneSelection, VideoInfo};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const POISON: u8 = 0xA7;

/// One frame's planes in one device allocation, each at a pitch wider than its rows.
struct DeviceAlloc {
    ctx: Arc<CudaContext>,
    ptr: u64,
    bytes: usize,
    planes: Vec<DevicePlane>,
    /// Counts live input allocations (the engine must let go of inputs early).
    live: Option<Arc<AtomicUsize>>,
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        self.ctx.bind_to_thread().unwrap();
        // SAFETY: allocated below in this context; the engine let go of it (it is the owner).
        unsafe { result::free_sync(self.ptr) }.unwrap();
        if let Some(l) = &self.live {
            l.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// (row bytes, rows) of each memory plane of `info`.
fn memory_planes(info: VideoInfo) -> Vec<(usize, usize)> {
    let fi = info.format.info();
    (0..fi.memory_planes).map(|p| (fi.memory_plane_row_bytes(p, info.width), fi.memory_plane_rows(p, info.height))).collect()
}

fn alloc(ctx: &Arc<CudaContext>, info: VideoInfo, live: Option<Arc<AtomicUsize>>) -> DeviceAlloc {
    let planes = memory_planes(info);
    let pitch = planes.iter().map(|p| p.0).max().unwrap().div_ceil(256) * 256 + 64;
    let bytes = planes.iter().map(|p| p.1 * pitch).sum::<usize>();
    ctx.bind_to_thread().unwrap();
    // SAFETY: a plain allocation in the bound context, filled before use.
    let ptr = unsafe { result::malloc_sync(bytes) }.unwrap();
    // SAFETY: the allocation just made.
    unsafe { result::memset_d8_sync(ptr, POISON, bytes) }.unwrap();
    // "Synchronous" memsets and pageable copies may still run after they return (CUDA's API
    // synchronisation rules); a producer hands over finished frames (GStreamer's elements
    // synchronise before they push), so the test waits too.
    ctx.synchronize().unwrap();
    let mut at = 0;
    let dp = planes
        .iter()
        .map(|&(_, rows)| {
            let p = DevicePlane { ptr: ptr + at as u64, pitch };
            at += rows * pitch;
            p
        })
        .collect();
    if let Some(l) = &live {
        l.fetch_add(1, Ordering::SeqCst);
    }
    DeviceAlloc { ctx: ctx.clone(), ptr, bytes, planes: dp, live }
}

fn upload(ctx: &Arc<CudaContext>, frame: &OwnedFrame, live: &Arc<AtomicUsize>) -> DeviceFrame {
    let a = alloc(ctx, frame.info, Some(live.clone()));
    let mut host = vec![POISON; a.bytes];
    for (p, ((row, rows), dp)) in memory_planes(frame.info).into_iter().zip(&a.planes).enumerate() {
        let (off, stride) = ((dp.ptr - a.ptr) as usize, frame.strides[p]);
        for r in 0..rows {
            host[off + r * dp.pitch..off + r * dp.pitch + row].copy_from_slice(&frame.planes[p][r * stride..r * stride + row]);
        }
    }
    // SAFETY: `host` has the allocation's size.
    unsafe { result::memcpy_htod_sync(a.ptr, &host) }.unwrap();
    ctx.synchronize().unwrap();
    let planes = a.planes.clone();
    // SAFETY: the planes lie in `a`, which the frame owns.
    unsafe { DeviceFrame::new(planes, Box::new(a)) }
}

fn output_frame(ctx: &Arc<CudaContext>, info: VideoInfo) -> DeviceFrame {
    let a = alloc(ctx, info, None);
    let planes = a.planes.clone();
    // SAFETY: as in `upload`.
    unsafe { DeviceFrame::new(planes, Box::new(a)) }
}

/// The rows of a returned output frame; asserts that the padding after each row is still poison.
fn download(frame: DeviceFrame, info: VideoInfo, what: &str) -> OwnedFrame {
    let owner = frame.into_owner().downcast::<DeviceAlloc>().expect("our allocation");
    owner.ctx.bind_to_thread().unwrap();
    let mut host = vec![0u8; owner.bytes];
    // SAFETY: the whole allocation, copied out.
    unsafe { result::memcpy_dtoh_sync(&mut host, owner.ptr) }.unwrap();
    let mut out = OwnedFrame::new(info);
    for (p, ((row, rows), dp)) in memory_planes(info).into_iter().zip(&owner.planes).enumerate() {
        let off = (dp.ptr - owner.ptr) as usize;
        for r in 0..rows {
            let line = &host[off + r * dp.pitch..off + (r + 1) * dp.pitch];
            out.planes[p][r * row..(r + 1) * row].copy_from_slice(&line[..row]);
            assert!(line[row..].iter().all(|&b| b == POISON), "{what}: plane {p} row {r}: written past the row");
        }
    }
    out
}

fn engine(info: VideoInfo, params: Params, depth: usize, shared: Option<SharedContext>) -> Denoiser<usize> {
    let opts = BackendOptions { kind: BackendKind::Cuda, pipeline_depth: depth, cuda_context: shared, ..Default::default() };
    let mut b = nlmdenoise::backends::cuda(&opts).unwrap();
    b.set_poison_outputs(true);
    Denoiser::with_backend(info, params, Box::new(b)).unwrap()
}

/// The host path: push / pop with host frames.
fn run_host(d: &mut Denoiser<usize>, inputs: &[OwnedFrame]) -> Vec<OwnedFrame> {
    let mut outs = Vec::new();
    for (i, f) in inputs.iter().enumerate() {
        d.push(&f.as_ref(), i).unwrap();
        pop_host(d, &mut outs);
    }
    d.finish_stream().unwrap();
    pop_host(d, &mut outs);
    outs
}

/// Pops every ready output on the host into `outs`, checking the order.
fn pop_host(d: &mut Denoiser<usize>, outs: &mut Vec<OwnedFrame>) {
    loop {
        let mut o = OwnedFrame::new(d.output_info());
        match d.pop(&mut o.as_mut()).unwrap() {
            Some(tag) => {
                assert_eq!(tag, outs.len());
                outs.push(o);
            }
            None => break,
        }
    }
}

/// The device path: inputs in device memory of `ctx`; outputs into device frames
/// (`device_out`) or on the host. Checks that inputs are let go early, and none is kept once the
/// engine is gone.
fn run_device(mut d: Denoiser<usize>, ctx: &Arc<CudaContext>, inputs: &[OwnedFrame], device_out: bool, what: &str) -> Vec<OwnedFrame> {
    let live = Arc::new(AtomicUsize::new(0));
    let outs = push_device_stream(&mut d, ctx, inputs, device_out, what, &live);
    drop(d);
    assert_eq!(live.load(Ordering::SeqCst), 0, "{what}: input frames kept after the engine is gone");
    outs
}

/// [`run_device`] on an engine the caller keeps; `live` counts the input frames held.
fn push_device_stream(d: &mut Denoiser<usize>, ctx: &Arc<CudaContext>, inputs: &[OwnedFrame], device_out: bool, what: &str, live: &Arc<AtomicUsize>) -> Vec<OwnedFrame> {
    assert!(d.takes_device_frames());
    let out_info = d.output_info();
    let mut outs = Vec::new();
    let pop = |d: &mut Denoiser<usize>, outs: &mut Vec<OwnedFrame>| loop {
        if device_out {
            let Some((tag, f)) = d.pop_device() else { break };
            assert_eq!(tag, outs.len());
            outs.push(download(f, out_info, what));
        } else {
            break pop_host(d, outs);
        }
    };
    let mut most_live = 0;
    for (i, f) in inputs.iter().enumerate() {
        let input = upload(ctx, f, live);
        let output = device_out.then(|| output_frame(ctx, out_info));
        d.push_device(input, output, i).unwrap();
        most_live = most_live.max(live.load(Ordering::SeqCst));
        pop(d, &mut outs);
    }
    d.finish_stream().unwrap();
    pop(d, &mut outs);
    // Whatever the window, at most the frames whose copies may still run are held.
    assert!(most_live <= 3, "{what}: {most_live} input frames held at once (the window keeps copies, not inputs)");
    outs
}

/// Per plane: bytes that differ from `reference`, and of those how many hold the poison.
fn describe(reference: &OwnedFrame, f: &OwnedFrame) -> String {
    reference
        .planes
        .iter()
        .zip(&f.planes)
        .enumerate()
        .map(|(p, (r, x))| {
            let diff: Vec<usize> = r.iter().zip(x).enumerate().filter(|(_, (a, b))| a != b).map(|(i, _)| i).collect();
            let poison = diff.iter().filter(|&&i| x[i] == POISON).count();
            format!("plane {p}: {} of {} differ ({} poison, first at {:?})", diff.len(), r.len(), poison, diff.first())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn check(ctx: &Arc<CudaContext>, shared: Option<SharedContext>, formats: &[PixelFormat], sizes: &[(usize, usize)], depths: &[usize], cases: &[(&str, Params)], seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for &format in formats {
        for &(w, h) in sizes {
            let info = VideoInfo::new(format, w, h).unwrap();
            let inputs = random_frames(info, 6, &mut rng);
            for &(name, params) in cases {
                if params.planes != PlaneSelection::All && format.info().is_rgb() {
                    continue;
                }
                for &depth in depths {
                    let what = format!("{format} {w}x{h} {name} depth {depth}{}", if shared.is_some() { " (shared context)" } else { "" });
                    let host = run_host(&mut engine(info, params, depth, None), &inputs);
                    let to_device = run_device(engine(info, params, depth, shared.clone()), ctx, &inputs, true, &what);
                    let to_host = run_device(engine(info, params, depth, shared.clone()), ctx, &inputs, false, &what);
                    assert_eq!(host.len(), inputs.len(), "{what}");
                    for (i, ((a, b), c)) in host.iter().zip(&to_device).zip(&to_host).enumerate() {
                        if a != b || a != c {
                            eprintln!("{what}: frame {i}: {} | device out: {} | host out: {}", describe(a, a), describe(a, b), describe(a, c));
                        }
                        assert!(a == b, "{what}: frame {i}: device in, device out differs from the host path");
                        assert!(a == c, "{what}: frame {i}: device in, host out differs from the host path");
                    }
                    eprintln!("{what}: {} frames identical", host.len());
                }
            }
        }
    }
}

#[test]
fn device_frames_match_the_host_path() {
    if !gpu_or_skip("device_frames_match_the_host_path") {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    use PixelFormat::*;
    check(&ctx, None, &[I420, NV12, P010_10LE, RGBA, Y444], &[(37, 21), (96, 54)], &[0, 2], &cases(), 0xDE71CE);
}

/// A context of its own (as nvh264dec creates with cuCtxCreate), shared with the engine: the
/// frames live there and the kernels run there; same bytes.
#[test]
fn a_shared_non_primary_context_gives_the_same_frames() {
    if !gpu_or_skip("a_shared_non_primary_context_gives_the_same_frames") {
        return;
    }
    let ctx = CudaContext::new_non_primary(0, 0).unwrap();
    // SAFETY: a live context of device 0, destroyed only when the owner (this Arc's last clone)
    // goes, which the SharedContext keeps.
    let shared = unsafe { SharedContext::new(ctx.cu_ctx() as usize, 0, Box::new(ctx.clone())) };
    use PixelFormat::*;
    let some: Vec<(&str, Params)> = cases().into_iter().filter(|(n, _)| ["nlm", "bm3d"].contains(n)).collect();
    check(&ctx, Some(shared), &[NV12, I420], &[(96, 54)], &[2], &some, 0x5A4ED);
}

/// Scene cuts in frames pushed in device memory (the rows the test reads come to the host): two
/// shots, the cut found once and the same bytes as the host path, device or host output, for a
/// planar, an interleaved-chroma and a packed RGB layout, with the noise estimated too (the
/// estimator's whole-frame copy serves the test); without the test the frames next to the cut
/// differ (they borrow across it).
#[test]
fn device_frames_find_scene_cuts_as_the_host_path() {
    if !gpu_or_skip("device_frames_find_scene_cuts_as_the_host_path") {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    let mut rng = SmallRng::seed_from_u64(0x5CE7E);
    let nlm = Params { search_radius: 2, patch_radius: 1, temporal_past: 2, temporal_future: 2, strength: 10.0, chroma_strength: 10.0, ..Params::default() };
    for (format, w, h) in [(PixelFormat::I420, 64, 64), (PixelFormat::NV12, 70, 66), (PixelFormat::RGBA, 64, 48)] {
        let info = VideoInfo::new(format, w, h).unwrap();
        let stream: Vec<OwnedFrame> = shot(info, 0, 4, &mut rng).into_iter().chain(shot(info, 1, 4, &mut rng)).collect();
        for (name, params) in [("nlm", nlm), ("nlm auto sigma", Params { sigma_auto: true, ..nlm })] {
            let what = format!("{format} {w}x{h} {name}");
            let mut d = engine(info, params, 2, None);
            let host = run_host(&mut d, &stream);
            assert_eq!(d.scene_cuts(), 1, "{what}: the host path finds the cut");
            for device_out in [true, false] {
                let mut d = engine(info, params, 2, None);
                let device = push_device_stream(&mut d, &ctx, &stream, device_out, &what, &Arc::new(AtomicUsize::new(0)));
                assert_eq!(d.scene_cuts(), 1, "{what}: device frames (device output {device_out}): one cut found");
                for (i, (a, b)) in host.iter().zip(&device).enumerate() {
                    assert!(a == b, "{what}: frame {i} (device output {device_out}): {}", describe(a, b));
                }
            }
            let mut d = engine(info, Params { scene_cut: 0.0, ..params }, 2, None);
            let blind = push_device_stream(&mut d, &ctx, &stream, true, &what, &Arc::new(AtomicUsize::new(0)));
            assert_eq!(d.scene_cuts(), 0, "{what}: scene-cut 0 finds none");
            assert!((3..5).all(|i| blind[i] != host[i]), "{what}: without the test the frames next to the cut borrow across it");
        }
    }
}

/// For compute-sanitizer (scripts/gpu.sh, part sanitizer): the device copies in and out, both
/// layouts, a pass-through plane and a resize.
#[test]
fn sanitizer_smoke_device_frames() {
    if !gpu_or_skip("sanitizer_smoke_device_frames") {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    use PixelFormat::*;
    let some: Vec<(&str, Params)> = cases().into_iter().filter(|(n, _)| ["nlm luma only", "sr x2"].contains(n)).collect();
    check(&ctx, None, &[NV12, I420], &[(37, 21)], &[2], &some, 0x5A17);
}
