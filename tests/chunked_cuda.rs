//! Chunked processing on the GPU (`device::chunked` over the CUDA backend's batched `launch`):
//! chunk sizes 1, 2, 7, 64 and auto give bit-identical output, equal to the CPU backend within the
//! usual tolerance; two devices give the output of one; an explicit chunk that does not fit in
//! device memory is refused at creation. Device outputs are poisoned before every launch.
//! Without a CUDA device every test prints a visible "SKIPPED" line and passes; the two-device
//! test also skips on a machine with one GPU.

mod common;

use std::sync::Arc;

use common::{compare, denoise, gpu_or_skip, make_frame, seed, tolerance, Content, Waves};
use nlmdenoise::device::chunked::{cuda_device_count, BackendFactory, ChunkedBackend};
use nlmdenoise::device::{Backend, ChunkFrames, Devices};
use nlmdenoise::error::Error;
use nlmdenoise::{BackendKind, BackendOptions, Denoiser, OwnedFrame, Params, PixelFormat, VideoInfo};
use rand::rngs::SmallRng;
use rand::SeedableRng;

const POISON: u8 = 0x3C;
const WAVES: Waves = Waves { x: 0.23, y: 0.29, t: 0.35 };

fn inputs(format: PixelFormat, w: usize, h: usize, n: usize, rng: &mut SmallRng) -> Vec<OwnedFrame> {
    let info = VideoInfo::new(format, w, h).unwrap();
    (0..n).map(|i| make_frame(info, 0, Content::Smooth { amp: 12 }, WAVES, i, rng)).collect()
}

/// CUDA backends with poisoned outputs on `devices` (one worker each), chunks of `chunk`.
fn chunked_cuda(chunk: ChunkFrames, devices: &[usize]) -> Box<dyn Backend> {
    let devs = devices.to_vec();
    let factory: BackendFactory = Arc::new(move |w, depth| {
        let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, device_id: devs[w], pipeline_depth: depth, ..Default::default() })?;
        b.set_poison_outputs(true);
        Ok(Box::new(b) as Box<dyn Backend>)
    });
    Box::new(ChunkedBackend::with_factory(chunk, devices, factory).unwrap())
}

fn unchunked_cuda() -> Box<dyn Backend> {
    let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, pipeline_depth: 2, ..Default::default() }).unwrap();
    b.set_poison_outputs(true);
    Box::new(b)
}

fn run(backend: Box<dyn Backend>, params: Params, inputs: &[OwnedFrame], retune: Option<(usize, Params)>) -> Vec<OwnedFrame> {
    let d: Denoiser<usize> = Denoiser::with_backend(inputs[0].info, params, backend).unwrap();
    denoise(d, inputs, 0, POISON, retune)
}

fn cases() -> Vec<(PixelFormat, usize, usize, Params, usize)> {
    let base = Params { search_radius: 3, patch_radius: 2, strength: 10.0, chroma_strength: 14.0, ..Params::default() };
    vec![
        // R-live shape, a sequence longer than several chunks.
        (PixelFormat::I420, 96, 64, Params { temporal_past: 2, ..base }, 37),
        // Symmetric offline window, shorter than the largest chunk.
        (PixelFormat::I420, 64, 48, Params { temporal_past: 2, temporal_future: 2, ..base }, 23),
        // 16-bit samples, future only.
        (PixelFormat::P010_10LE, 40, 30, Params { temporal_future: 1, ..base }, 15),
    ]
}

#[test]
fn chunk_sizes_are_bit_identical_on_the_gpu_and_match_the_cpu() {
    if !gpu_or_skip("chunk_sizes_are_bit_identical_on_the_gpu_and_match_the_cpu") {
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, params, n) in cases() {
        let inputs = inputs(format, w, h, n, &mut rng);
        // A strength change mid-stream (inside a chunk for every size but 1).
        let retune = Some((n / 2 + 1, Params { strength: params.strength * 1.7, ..params }));
        let plain = run(unchunked_cuda(), params, &inputs, retune);
        let cpu = {
            let d = Denoiser::new(inputs[0].info, params, &BackendOptions { kind: BackendKind::Cpu, ..Default::default() }).unwrap();
            denoise(d, &inputs, 0, POISON, retune)
        };
        let label = format!("{format} {w}x{h} {params:?}");
        let diff = compare(&label, "cuda", &cpu, &plain, &inputs, tolerance(format), 0);
        eprintln!("{label}: unchunked GPU vs CPU: {}/{} differ, max {}", diff.differing, diff.total, diff.max);
        for chunk in [ChunkFrames::Frames(1), ChunkFrames::Frames(2), ChunkFrames::Frames(7), ChunkFrames::Frames(64), ChunkFrames::Auto] {
            let got = run(chunked_cuda(chunk, &[0]), params, &inputs, retune);
            for (i, (a, b)) in plain.iter().zip(&got).enumerate() {
                assert!(a == b, "{label} chunk {chunk}: frame {i} differs from unchunked GPU output");
            }
            compare(&label, "cuda chunked", &cpu, &got, &inputs, tolerance(format), 0);
        }
        // Through the options, as the CLI and the element get it.
        let d = Denoiser::new(inputs[0].info, params, &BackendOptions { kind: BackendKind::Cuda, chunk_frames: ChunkFrames::Frames(7), ..Default::default() }).unwrap();
        assert!(d.backend_description().contains("chunked"));
        let got = denoise(d, &inputs, 0, POISON, retune);
        assert!(got == plain, "{label}: chunk 7 through BackendOptions");
    }
}

#[test]
fn two_devices_give_the_output_of_one() {
    if !gpu_or_skip("two_devices_give_the_output_of_one") {
        return;
    }
    let n = cuda_device_count().unwrap_or(0);
    if n < 2 {
        common::skip("two_devices_give_the_output_of_one", &format!("{n} CUDA device(s)"));
        return;
    }
    let mut rng = SmallRng::seed_from_u64(seed());
    for (format, w, h, params, frames) in cases() {
        let inputs = inputs(format, w, h, frames, &mut rng);
        let one = run(chunked_cuda(ChunkFrames::Frames(4), &[0]), params, &inputs, None);
        for (chunk, devices) in [(ChunkFrames::Frames(4), vec![0, 1]), (ChunkFrames::Frames(1), vec![1, 0]), (ChunkFrames::Frames(7), vec![0, 1, 0, 1])] {
            let got = run(chunked_cuda(chunk, &devices), params, &inputs, None);
            assert!(got == one, "{format} {w}x{h}: chunk {chunk} on devices {devices:?} differs from one device");
        }
        let d = Denoiser::new(inputs[0].info, params, &BackendOptions { kind: BackendKind::Cuda, devices: Devices::All, ..Default::default() }).unwrap();
        eprintln!("devices all: {}", d.backend_description());
        assert!(denoise(d, &inputs, 0, POISON, None) == one, "{format}: devices=all");
    }
}

#[test]
fn chunks_are_sized_from_device_memory() {
    if !gpu_or_skip("chunks_are_sized_from_device_memory") {
        return;
    }
    let mut b = nlmdenoise::backends::cuda(&BackendOptions { kind: BackendKind::Cuda, ..Default::default() }).unwrap();
    let info = VideoInfo::new(PixelFormat::Y444_16LE, 3840, 2160).unwrap();
    let geometry = nlmdenoise::planar::Geometry::from_video_info(&info);
    let params = Params { temporal_past: 2, temporal_future: 2, ..Params::default() };
    let plan = nlmdenoise::plan::Plan::new(&geometry, &params).unwrap();
    let mem = b.memory(&geometry, &plan).expect("the CUDA backend reports its device memory");
    assert!(mem.free > 0 && mem.free <= mem.total, "{mem:?}");
    let per_frame = mem.per_frame;
    assert!(per_frame >= 3840 * 2160 * 3 * 2, "a 16-bit 4:4:4 4K frame costs at least its samples: {per_frame}");
    drop(b);
    // 1024 such frames (twice, for two chunks) cannot fit in any GPU of today.
    let opts = BackendOptions { kind: BackendKind::Cuda, chunk_frames: ChunkFrames::Frames(1024), ..Default::default() };
    match Denoiser::<usize>::new(info, params, &opts) {
        Err(Error::InvalidParameter(m)) => {
            eprintln!("refused as expected: {m}");
            assert!(m.contains("does not fit"), "{m}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a chunk of 1024 4K 16-bit frames must not fit"),
    }
    // Auto picks a size that fits, and it runs.
    let auto = Denoiser::<usize>::new(info, params, &BackendOptions { chunk_frames: ChunkFrames::Auto, ..opts }).unwrap();
    eprintln!("auto at 4K 16-bit: {} (latency {})", auto.backend_description(), auto.latency_frames());
    assert!(auto.latency_frames() > 2);
}

/// Super-resolution in chunks and on two devices gives the bytes of a frame at a time: output
/// frames of another size come back through the chunked pools (device outputs poisoned).
#[test]
fn upscaling_in_chunks_and_on_two_devices_matches_a_frame_at_a_time() {
    use common::sr::{sr, upscale};
    if !gpu_or_skip("upscaling_in_chunks_and_on_two_devices_matches_a_frame_at_a_time") {
        return;
    }
    let devices = cuda_device_count().unwrap_or(0);
    let mut rng = SmallRng::seed_from_u64(seed());
    for format in [PixelFormat::I420, PixelFormat::NV12, PixelFormat::P010_10LE] {
        let inputs = inputs(format, 48, 32, 13, &mut rng);
        let info = inputs[0].info;
        let params = sr(2, 1, 1, 1);
        let go = |b: Box<dyn Backend>| upscale(Denoiser::with_backend(info, params, b).unwrap(), &inputs, POISON);
        let plain = go(unchunked_cuda());
        for chunk in [ChunkFrames::Frames(1), ChunkFrames::Frames(4), ChunkFrames::Auto] {
            assert!(go(chunked_cuda(chunk, &[0])) == plain, "{format}: upscaling in chunks of {chunk} differs");
        }
        if devices >= 2 {
            assert!(go(chunked_cuda(ChunkFrames::Frames(3), &[0, 1])) == plain, "{format}: upscaling on two devices differs");
        } else {
            common::skip("upscaling on two devices", &format!("{devices} CUDA device(s)"));
        }
        eprintln!("{format}: upscaling chunked (and on {} device(s)) == a frame at a time", devices.min(2));
    }
}
