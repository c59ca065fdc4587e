//! Soak: many frames through `appsrc ! nlmdenoise ! fakesink`, with the process's resident memory,
//! open file descriptors, threads and the GPU's memory in use sampled every 10,000 frames, and the
//! slope of each per 10,000 frames after the first sample (warm-up).
//!
//! usage: soak WIDTH HEIGHT FRAMES [ELEMENT PROPERTIES...]
//! e.g.   soak 64 48 100000 backend=cpu temporal-future=2
//!        soak 1920 1080 100000 backend=cuda pipeline-depth=2

use std::time::Instant;

use gst::prelude::*;

const EVERY: usize = 10_000;

fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| s.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())).unwrap_or(0)
}

fn fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0)
}

#[derive(Clone, Copy)]
struct Sample {
    frames: usize,
    rss_kib: u64,
    fds: u64,
    threads: u64,
    device_mib: Option<u64>,
}

fn sample(frames: usize) -> Sample {
    Sample { frames, rss_kib: status_field("VmRSS:"), fds: fds(), threads: status_field("Threads:"), device_mib: nlmdenoise::device::cuda::device_memory_in_use(0).map(|b| b >> 20) }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        anyhow::bail!("usage: soak WIDTH HEIGHT FRAMES [ELEMENT PROPERTIES...]");
    }
    let (width, height, frames): (usize, usize, usize) = (args[1].parse()?, args[2].parse()?, args[3].parse()?);
    let props = args[4..].join(" ");
    gst::init()?;
    gstnlmdenoise::plugin_register_static()?;
    let desc = format!("appsrc name=src format=time block=true max-buffers=8 ! nlmdenoise name=nlm {props} ! fakesink sync=false");
    let pipeline = gst::parse::launch(&desc)?.downcast::<gst::Pipeline>().map_err(|_| anyhow::anyhow!("not a pipeline"))?;
    let src = pipeline.by_name("src").unwrap().downcast::<gst_app::AppSrc>().map_err(|_| anyhow::anyhow!("not an appsrc"))?;
    let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, width as u32, height as u32).fps(gst::Fraction::new(60, 1)).build()?;
    src.set_caps(Some(&info.to_caps()?));
    let templates: Vec<gst::Buffer> = (0..8u32)
        .map(|k| {
            let mut s = k.wrapping_mul(2654435761) | 1;
            gst::Buffer::from_mut_slice(
                (0..info.size())
                    .map(|i| {
                        s ^= s << 13;
                        s ^= s >> 17;
                        s ^= s << 5;
                        ((i % width) * 200 / width.max(1) + (s % 41) as usize) as u8
                    })
                    .collect::<Vec<u8>>(),
            )
        })
        .collect();
    let duration = gst::ClockTime::from_nseconds(1_000_000_000 / 60);
    let bus = pipeline.bus().unwrap();
    pipeline.set_state(gst::State::Playing)?;
    let start = Instant::now();
    let mut samples = vec![sample(0)];
    println!("| frames | seconds | RSS MiB | fds | threads | GPU memory in use MiB |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for i in 0..frames {
        let mut buffer = templates[i % templates.len()].copy();
        {
            let b = buffer.get_mut().unwrap();
            b.set_pts(duration * i as u64);
            b.set_duration(duration);
        }
        if src.push_buffer(buffer).is_err() {
            break;
        }
        if (i + 1) % EVERY == 0 {
            let s = sample(i + 1);
            println!("| {} | {:.1} | {:.1} | {} | {} | {} |", s.frames, start.elapsed().as_secs_f64(), s.rss_kib as f64 / 1024.0, s.fds, s.threads, s.device_mib.map_or("-".into(), |m| m.to_string()));
            samples.push(s);
        }
        if let Some(msg) = bus.pop_filtered(&[gst::MessageType::Error]) {
            if let gst::MessageView::Error(e) = msg.view() {
                anyhow::bail!("pipeline error at frame {i}: {}", e.error());
            }
        }
    }
    src.end_of_stream()?;
    let msg = bus.timed_pop_filtered(gst::ClockTime::from_seconds(120), &[gst::MessageType::Eos, gst::MessageType::Error]);
    pipeline.set_state(gst::State::Null)?;
    if let Some(gst::MessageView::Error(e)) = msg.as_ref().map(|m| m.view()) {
        anyhow::bail!("pipeline error: {}", e.error());
    }
    let secs = start.elapsed().as_secs_f64();
    println!();
    println!("{frames} frames {width}x{height} in {secs:.1} s ({:.0} frames/s), {props}", frames as f64 / secs);
    if samples.len() >= 3 {
        // Least-squares slope per 10,000 frames over the samples after warm-up (the first one).
        let after = &samples[1..];
        let slope = |f: &dyn Fn(&Sample) -> f64| {
            let n = after.len() as f64;
            let mx = after.iter().map(|s| s.frames as f64).sum::<f64>() / n;
            let my = after.iter().map(f).sum::<f64>() / n;
            let num: f64 = after.iter().map(|s| (s.frames as f64 - mx) * (f(s) - my)).sum();
            let den: f64 = after.iter().map(|s| (s.frames as f64 - mx).powi(2)).sum();
            num / den * EVERY as f64
        };
        println!(
            "slope per {EVERY} frames after warm-up: RSS {:+.3} MiB, fds {:+.2}, threads {:+.2}, GPU memory {}",
            slope(&|s| s.rss_kib as f64 / 1024.0),
            slope(&|s| s.fds as f64),
            slope(&|s| s.threads as f64),
            if after.iter().all(|s| s.device_mib.is_some()) { format!("{:+.2} MiB", slope(&|s| s.device_mib.unwrap_or(0) as f64)) } else { "-".into() }
        );
    }
    Ok(())
}
