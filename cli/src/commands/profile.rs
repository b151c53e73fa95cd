//! `jig profile BUNDLE`: measure each model variant of a bundle on segments (CPU cores in this process, GPU
//! segments in bound worker processes, as they serve) over batch sizes 1, 2, 4, … and write the profile table
//! (see `jig_planner::profile`) to BUNDLE/profiles.csv.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use jig_manifest::Bundle;
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::segment::Segment;
use jig_model_host::sweep;
use jig_planner::profile::ProfileRow;

use crate::progress::Steps;

/// Measure each model variant of a bundle on segments over batch sizes 1, 2, 4, … and write the profile
/// table the planner reads.
#[derive(clap::Args)]
pub struct ProfileCommand {
    /// The bundle directory (with its jig.toml).
    bundle: PathBuf,
    /// A segment to measure on, e.g. cpu:2, mps:0:30 or mig:0:3g.40gb:2; repeatable. Default: cpu:1, cpu:2,
    /// cpu:4, … up to this machine's cores.
    #[arg(long = "segment", value_name = "SEGMENT")]
    segments: Vec<Segment>,
    /// The largest batch size tried.
    #[arg(long, default_value_t = 128)]
    max_batch: u32,
    /// Timed runs per batch size (after 3 warm-up runs).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Stop growing the batch once a batch's p95 latency exceeds this many milliseconds.
    #[arg(long, default_value_t = 2000)]
    max_latency_ms: u64,
    /// Where to write the table; default BUNDLE/profiles.csv.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

impl ProfileCommand {
    /// Measure every variant on every segment and write the table.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        profile(self).map(|()| ExitCode::SUCCESS)
    }
}

fn profile(args: ProfileCommand) -> anyhow::Result<()> {
    let bundle = Bundle::open(&args.bundle)?;
    let launcher = Launcher::discover();
    let machine_cores = launcher.devices().cpu_cores.clone();
    let segments = if args.segments.is_empty() {
        std::iter::successors(Some(1u32), |n| Some(n * 2))
            .take_while(|&n| n as usize <= machine_cores.len())
            .map(|cores| Segment::Cpu { cores })
            .collect()
    } else {
        args.segments.clone()
    };
    // Measured as served: CPU segments pinned to this machine's first cores, GPU segments in a bound worker.
    let placement = |segment: Segment| Placement {
        cores: match segment {
            Segment::Cpu { cores } => Some(machine_cores.iter().copied().take(cores as usize).collect()),
            _ => None,
        },
        ..Placement::new(segment)
    };
    for segment in &segments {
        launcher.check(&placement(*segment))?;
    }
    let settings = sweep::Settings {
        max_batch: args.max_batch,
        runs: args.runs,
        max_latency: Duration::from_millis(args.max_latency_ms),
        ..sweep::Settings::default()
    };
    let mut rows = Vec::new();
    // Batches double from 1 up to --max-batch: the points one variant on one segment measures at most.
    let sweep_points = u64::from(args.max_batch.max(1).ilog2() + 1);
    let steps =
        Arc::new(Steps::new("profile", bundle.manifest.variants.len() as u64 * segments.len() as u64 * sweep_points));
    for variant in &bundle.manifest.variants {
        for segment in &segments {
            let label = format!("{}/{} on {segment}", variant.slot, variant.name);
            steps.println(&format!("profile: {label}"));
            steps.set_message(label.clone());
            let (shapes, values) = (variant.shapes.clone(), variant.values.clone());
            let samples = move |inputs: &[jig_model_host::onnx::TensorSpec]| -> Vec<sweep::SampleInput> {
                inputs
                    .iter()
                    .map(|i| sweep::SampleInput {
                        shape: shapes.get(&i.name).cloned(),
                        values: values.get(&i.name).cloned(),
                    })
                    .collect()
            };
            let report = {
                let (label, steps) = (label.clone(), steps.clone());
                move |p: &sweep::Point| {
                    steps.println(&format!(
                        "profile: {label}: batch {:>3}: p50 {:>8.2} ms, p95 {:>8.2} ms, {:>9.1} rows/s",
                        p.batch,
                        p.p50.as_secs_f64() * 1e3,
                        p.p95.as_secs_f64() * 1e3,
                        p.throughput
                    ));
                    steps.advance(1);
                }
            };
            let (settings, name, placement) = (settings.clone(), variant.name.clone(), placement(*segment));
            let sweep_name = name.clone();
            let (points, stop) = launcher
                .run_on(&label, &name, &bundle.model_path(variant), &placement, move |executors| {
                    let samples = samples(executors.first().map_or(&[][..], |e| e.inputs()));
                    sweep::sweep(executors, &sweep_name, &samples, &settings, report)
                })?
                .map_err(|e| anyhow::anyhow!("profiling {label}: {e}"))?;
            let device = launcher.device_name(&placement);
            match stop {
                Some(sweep::Stop::Latency { batch, p95 }) => steps.println(&format!(
                    "profile: {label}: stopped after batch {batch}: p95 {p95:?} exceeds --max-latency-ms"
                )),
                Some(sweep::Stop::Failed { batch, detail }) => {
                    steps.println(&format!("profile: {label}: stopped at batch {batch}: {detail}"))
                }
                None => {}
            }
            // A sweep that stopped early skips the points it did not measure.
            steps.advance(sweep_points.saturating_sub(points.len() as u64));
            rows.extend(points.into_iter().map(|p| ProfileRow {
                slot: variant.slot.clone(),
                variant: variant.name.clone(),
                segment: segment.to_string(),
                batch: p.batch,
                p50_ms: p.p50.as_secs_f64() * 1e3,
                p95_ms: p.p95.as_secs_f64() * 1e3,
                throughput_rps: p.throughput,
                device: device.clone(),
            }));
        }
    }
    steps.finish();
    let output = args.output.unwrap_or_else(|| bundle.dir.join("profiles.csv"));
    std::fs::write(&output, jig_planner::profile::to_csv(&rows))
        .with_context(|| format!("writing the profile table to {}", output.display()))?;
    eprintln!("profile: wrote {} rows to {}", rows.len(), output.display());
    Ok(())
}
