//! Cost of the noise estimate (`sigma = auto`, src/noise.rs): milliseconds per estimated frame
//! and per frame of the stream (one estimate every `noise::INTERVAL` frames), on the caller's
//! thread, for 720p, 1080p and 2160p I420: the benchmark pattern, the pattern brightened until
//! most blocks touch 255 (left out: the grid gets denser) and a white frame (every block left
//! out: the densest grid allowed, then no estimate). Then the scene-cut test (src/scene.rs, on
//! every frame of a temporal window): milliseconds per frame for the cell means and the
//! comparison with the previous frame's, a frame after the other as the engine runs it.
//!
//!   cargo run --release -p nlmdenoise-bench --bin bench_noise

use std::time::Instant;

use nlmdenoise::noise::{estimate_frame, INTERVAL};
use nlmdenoise::planar::{Geometry, PlanarFrame};
use nlmdenoise::scene::{changed_fraction, signature, CutDetector, DEFAULT_SCENE_CUT};
use nlmdenoise::{convert, PixelFormat, VideoInfo};
use nlmdenoise_bench::bench_frames::frame;

const COLD_FRAMES: usize = 24;

/// A content's name and how it changes the pattern's samples.
type Content = (&'static str, fn(u8) -> u8);

/// The pattern as it is, brightened by 140 (clipped at 255), white.
const CONTENTS: [Content; 3] = [("pattern", |v| v), ("bright: most blocks clipped", |v| v.saturating_add(140)), ("white: every block clipped", |_| 255)];

fn main() {
    println!("| size | content | ms per estimate | ms per frame (1 in {INTERVAL}) | estimate (luma, chroma) |");
    println!("| --- | --- | ---: | ---: | --- |");
    for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
        let info = VideoInfo::new(PixelFormat::I420, w, h).expect("size");
        let g = Geometry::from_video_info(&info);
        for (content, change) in CONTENTS {
            // Distinct frames, more than the last-level cache holds: each estimate reads a frame
            // from memory, as in a stream (a frame the caller just unpacked may still be cached).
            let frames: Vec<PlanarFrame> = (0..COLD_FRAMES)
                .map(|i| {
                    let mut f = frame(info, i, 5);
                    for p in f.planes.iter_mut() {
                        p.iter_mut().for_each(|v| *v = change(*v));
                    }
                    let mut p = PlanarFrame::zeroed(&g);
                    convert::unpack(&f.as_ref(), &mut p).expect("unpack");
                    p
                })
                .collect();
            // The fastest of several batches: the machine may be shared.
            let (batches, reps) = (6, 2 * COLD_FRAMES);
            let mut ms = f64::INFINITY;
            let mut e = None;
            for _ in 0..batches {
                let t = Instant::now();
                for r in 0..reps {
                    e = estimate_frame(&frames[r % COLD_FRAMES], &g);
                }
                ms = ms.min(t.elapsed().as_secs_f64() * 1e3 / reps as f64);
            }
            println!("| {w}x{h} | {content} | {ms:.3} | {:.3} | {e:?} |", ms / INTERVAL as f64);
        }
    }
    println!();
    println!("| size | ms per frame: scene-cut test | changed fraction between consecutive pattern frames |");
    println!("| --- | ---: | ---: |");
    for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
        let info = VideoInfo::new(PixelFormat::I420, w, h).expect("size");
        let g = Geometry::from_video_info(&info);
        let frames: Vec<PlanarFrame> = (0..COLD_FRAMES)
            .map(|i| {
                let mut p = PlanarFrame::zeroed(&g);
                convert::unpack(&frame(info, i, 5).as_ref(), &mut p).expect("unpack");
                p
            })
            .collect();
        let (batches, reps) = (6, 2 * COLD_FRAMES);
        let mut ms = f64::INFINITY;
        // Consecutive frames of the moving pattern: no cut.
        let changed = changed_fraction(&signature(&frames[0], &info, &g, false).expect("signature"), &signature(&frames[1], &info, &g, false).expect("signature"));
        for _ in 0..batches {
            // As the engine runs it: memory reused from frame to frame.
            let mut detector = CutDetector::default();
            let t = Instant::now();
            for r in 0..reps {
                std::hint::black_box(detector.observe_frame(&frames[r % COLD_FRAMES], &info, &g, false, DEFAULT_SCENE_CUT));
            }
            ms = ms.min(t.elapsed().as_secs_f64() * 1e3 / reps as f64);
        }
        println!("| {w}x{h} | {ms:.3} | {changed:.3} |");
    }
}
