//! Configuring the processing element from the command line: `nlmdenoise` (or `nlmupscale` for
//! `--algorithm nlm-sr`) gets the parameters the y4m path would use, set as its properties, and
//! the caps its input is converted to ([`working_caps`]).

use anyhow::{bail, Context, Result};
use gst::prelude::*;

use gstnlmdenoise::{format_to_gst, gst_to_format, MAX_PIPELINE_DEPTH, MAX_THREADS};
use nlmdenoise::BackendKind;

use crate::{Cli, IntermediateArg, KernelArg};

/// The element for the command line's algorithm, its properties set.
pub fn make_element(cli: &Cli) -> Result<gst::Element> {
    let upscaling = cli.params().algorithm == nlmdenoise::Algorithm::NlmSr;
    let factory = if upscaling { "nlmupscale" } else { "nlmdenoise" };
    let element = gst::ElementFactory::make(factory).build().with_context(|| format!("creating the {factory} element"))?;
    if upscaling {
        configure_upscaler(&element, cli)?;
    } else {
        configure_denoiser(&element, cli)?;
    }
    Ok(element)
}

/// The `backend` property's value for `--backend`.
fn backend_nick(backend: BackendKind) -> Result<&'static str> {
    Ok(match backend {
        BackendKind::Auto => "auto",
        BackendKind::Cpu => "cpu",
        BackendKind::Cuda => "cuda",
        BackendKind::Reference => bail!("--backend reference is only available for y4m input and output"),
    })
}

/// Sets the `nlmdenoise` element's properties from the command line.
fn configure_denoiser(den: &gst::Element, cli: &Cli) -> Result<()> {
    let p = cli.params();
    p.validate()?;
    let backend = backend_nick(cli.backend)?;
    // The element's property ranges, checked here to name the option instead of a GLib critical.
    if cli.pipeline_depth > MAX_PIPELINE_DEPTH as usize {
        return Err(crate::invalid_parameter(&format!("pipeline depth {} out of range 0..={MAX_PIPELINE_DEPTH}", cli.pipeline_depth)));
    }
    if !(1..=4).contains(&cli.offsets_per_pass) {
        return Err(crate::invalid_parameter(&format!("offsets per pass {} out of range 1..=4", cli.offsets_per_pass)));
    }
    if cli.threads > MAX_THREADS as usize {
        return Err(crate::invalid_parameter(&format!("{} threads: expected 0..={MAX_THREADS} (0 = every core)", cli.threads)));
    }
    let options = cli.backend_options()?;
    den.set_property_from_str("backend", backend);
    den.set_property("device-id", gstnlmdenoise::devices_to_string(&options));
    den.set_property("chunk-frames", cli.chunk_frames);
    den.set_property("threads", cli.threads as u32);
    den.set_property_from_str(
        "kernel",
        match cli.kernel {
            KernelArg::Auto => "auto",
            KernelArg::Fused => "fused",
            KernelArg::Multipass => "multipass",
        },
    );
    den.set_property("offsets-per-pass", cli.offsets_per_pass);
    den.set_property_from_str(
        "intermediate",
        match cli.intermediate {
            IntermediateArg::F32 => "f32",
            IntermediateArg::F16 => "f16",
            IntermediateArg::Unorm10 => "unorm10",
        },
    );
    den.set_property("pipeline-depth", cli.pipeline_depth as u32);
    den.set_property_from_str("algorithm", p.algorithm.as_str());
    den.set_property_from_str("bm3d-profile", p.bm3d.profile.as_str());
    let profile_value = |v: Option<u32>| v.map(|v| v as i32).unwrap_or(-1);
    den.set_property("bm3d-steps", profile_value(p.bm3d.steps));
    den.set_property("bm3d-patch-size", profile_value(p.bm3d.patch_size));
    den.set_property("bm3d-search-radius", profile_value(p.bm3d.search_radius));
    den.set_property("bm3d-block-step", profile_value(p.bm3d.block_step));
    den.set_property("bm3d-hard-block-step", profile_value(p.bm3d.hard_block_step));
    den.set_property("bm3d-group-size", profile_value(p.bm3d.group_size));
    den.set_property("bm3d-wiener-group-size", profile_value(p.bm3d.wiener_group_size));
    den.set_property("bm3d-seeds", profile_value(p.bm3d.seeds));
    den.set_property("bm3d-wiener-seeds", profile_value(p.bm3d.wiener_seeds));
    den.set_property("bm3d-seed-radius", profile_value(p.bm3d.seed_radius));
    den.set_property("bm3d-window-references", profile_value(p.bm3d.window_references.map(u32::from)));
    den.set_property("bm3d-frame-groups", profile_value(p.bm3d.frame_groups.map(u32::from)));
    den.set_property("bm3d-motion", profile_value(p.bm3d.motion.map(u32::from)));
    den.set_property("bm3d-bayes", profile_value(p.bm3d.bayes.map(u32::from)));
    den.set_property("bm3d-threshold", p.bm3d.threshold.unwrap_or(-1.0));
    den.set_property("bm3d-wiener-threshold", p.bm3d.wiener_threshold.unwrap_or(-1.0));
    den.set_property("bm3d-lambda", p.bm3d.lambda.unwrap_or(-1.0));
    den.set_property("chroma-sigma", p.bm3d.chroma_sigma.unwrap_or(-1.0));
    den.set_property("search-radius", p.search_radius);
    den.set_property("patch-radius", p.patch_radius);
    den.set_property("temporal-past", p.temporal_past);
    den.set_property("temporal-future", p.temporal_future);
    den.set_property("scene-cut", p.scene_cut);
    den.set_property_from_str("weighting", p.weighting.as_str());
    den.set_property("wref", p.wref);
    den.set_property("aggregation-radius", p.aggregation_radius);
    den.set_property_from_str("chroma-mode", p.chroma_mode.as_str());
    den.set_property_from_str("planes", p.planes.as_str());
    // sigma first: with strengths not yet set explicitly the element derives them from it; the
    // computed strengths (explicit or derived, as in the y4m path) are then set on top.
    den.set_property("sigma", p.sigma.unwrap_or(-1.0));
    if !p.sigma_auto {
        // Setting a strength turns the element's automatic sigma off (sigma -1 then means none).
        set_f32(den, "strength", p.strength)?;
        set_f32(den, "chroma-strength", p.chroma_strength)?;
    }
    Ok(())
}

/// Sets the `nlmupscale` element's properties from the command line (--scale and the NLM
/// settings that apply to it).
fn configure_upscaler(up: &gst::Element, cli: &Cli) -> Result<()> {
    let p = cli.params();
    p.validate()?;
    let options = cli.backend_options()?;
    let backend = backend_nick(cli.backend)?;
    up.set_property_from_str("backend", backend);
    up.set_property("device-id", gstnlmdenoise::devices_to_string(&options));
    up.set_property("chunk-frames", cli.chunk_frames);
    up.set_property("threads", cli.threads.min(MAX_THREADS as usize) as u32);
    up.set_property("pipeline-depth", cli.pipeline_depth.min(MAX_PIPELINE_DEPTH as usize) as u32);
    up.set_property("scale", p.sr.scale);
    up.set_property("iterations", p.sr.iterations);
    up.set_property("deblur", p.sr.deblur);
    up.set_property("fusion", p.sr.fusion);
    up.set_property("novelty-gate", p.sr.novelty_gate);
    up.set_property("search-radius", p.search_radius);
    up.set_property("patch-radius", p.patch_radius);
    up.set_property("temporal-past", p.temporal_past);
    up.set_property("temporal-future", p.temporal_future);
    up.set_property("scene-cut", p.scene_cut);
    // sigma first (strengths follow it), then the strengths the command line resolved.
    up.set_property("sigma", p.sigma.filter(|s| *s > 0.0).unwrap_or(-1.0));
    set_f32(up, "strength", p.strength)?;
    set_f32(up, "chroma-strength", p.chroma_strength)?;
    Ok(())
}

/// Sets the float property `name`, or says that `value` is outside the element's range (which
/// can be narrower than the engine's; set_property would panic).
fn set_f32(element: &gst::Element, name: &str, value: f32) -> Result<()> {
    let spec = element.find_property(name).and_then(|p| p.downcast::<gst::glib::ParamSpecFloat>().ok());
    if let Some(spec) = spec.filter(|s| !(s.minimum()..=s.maximum()).contains(&value)) {
        return Err(crate::invalid_parameter(&format!("{name} {value} out of range [{}, {}] (the GStreamer path)", spec.minimum(), spec.maximum())));
    }
    element.set_property(name, value);
    Ok(())
}

/// Caps for the denoiser's input given the decoder's output: the decoder's own format when the
/// engine takes it (no conversion), else the engine formats of the same bit depth class
/// (videoconvert picks the closest one).
pub fn working_caps(decoded: &gst::CapsRef) -> gst::Caps {
    // Unfixed caps (a decoder that could not say what it outputs) have no VideoInfo.
    let info = decoded.is_fixed().then(|| gst_video::VideoInfo::from_caps(decoded).ok()).flatten();
    if let Some(f) = info.as_ref().and_then(|i| gst_to_format(i.format())) {
        return gst::Caps::builder("video/x-raw").field("format", format_to_gst(f).to_str()).build();
    }
    let deep = info.as_ref().is_some_and(|i| i.format_info().depth().first().copied().unwrap_or(8) > 8);
    let formats: Vec<&str> = nlmdenoise::PixelFormat::ALL.into_iter().filter(|f| (f.info().bytes_per_sample > 1) == deep).map(|f| format_to_gst(f).to_str()).map(|s| s.as_str()).collect();
    gst::Caps::builder("video/x-raw").field("format", gst::List::new(formats)).build()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn element_for(args: &[&str]) -> gst::Element {
        gst::init().unwrap();
        gstnlmdenoise::plugin_register_static().unwrap();
        let cli = Cli::try_parse_from([&["nlmdenoise", "-i", "in.mp4", "-o", "out.mp4"], args].concat()).unwrap();
        make_element(&cli).unwrap()
    }

    /// Settings the y4m path gives the engine reach the element on the GStreamer path too (before
    /// 2026-11-28 `--scene-cut` did not: the element kept its default).
    #[test]
    fn scene_cut_and_motion_seeds_reach_the_element() {
        let den = element_for(&["--scene-cut", "0.25", "--algorithm", "bm3d", "--bm3d-motion", "true"]);
        assert_eq!(den.property::<f32>("scene-cut"), 0.25);
        assert_eq!(den.property::<i32>("bm3d-motion"), 1);
        let up = element_for(&["--scale", "2", "--scene-cut", "0"]);
        assert_eq!(up.property::<u32>("scale"), 2, "the upscaler");
        assert_eq!(up.property::<f32>("scene-cut"), 0.0);
    }
}
