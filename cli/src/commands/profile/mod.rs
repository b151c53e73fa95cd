//! `jig profile BUNDLE`: measure each model variant of a bundle on segments (CPU cores in this process, GPU
//! segments in bound worker processes, as they serve) over batch sizes 1, 2, 4, … and write the profile table
//! (see `jig_planner::profile`) to BUNDLE/profiles.csv; with `--pairs`, measure instead how much each slot's
//! model slows beside each other (gpu-lets' co-run table, BUNDLE/pairs.csv); with `--counters`, each one's L2
//! and DRAM utilisation on a GPU under Nsight Compute (gpu-lets' utilisation table, BUNDLE/util.csv,
//! [`counters`]).

mod counters;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
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
    /// Measure only this slot's variants (repeatable), and keep the rest of the table: its rows of what is
    /// measured now are replaced, the others stay (the voice on more segments, say, beside what det and rec
    /// measured). Without it, every slot's, into a new table.
    #[arg(long = "slot", value_name = "SLOT", conflicts_with_all = ["pairs", "counters"])]
    slots: Vec<String>,
    /// Compass's SLO profiler: measure each point until the verdict "its p95 is within the latency budget" is
    /// 99% certain, either way (at least 50 runs, at most --max-runs), instead of --runs times; stop growing
    /// the batch at the first over the budget; and skip the CPU segments smaller than the smallest on which
    /// batch 1 is within it (a binary search down the core counts). The budget is half the manifest's
    /// `slo.latency_ms` (a type slower serves no path of JigsawServe's plans), the whole of it with `planner =
    /// "ipa"`.
    #[arg(long)]
    adaptive: bool,
    /// With --adaptive, the most runs a point takes.
    #[arg(long, default_value_t = 400, requires = "adaptive")]
    max_runs: usize,
    /// gpu-lets' co-location measurement instead of the sweep: on the one --segment given, each slot's model
    /// alone and then every pair of them (a model with itself too) at once, each in a segment of that size of
    /// its own (an MPS share of the same size on the same GPU; the next cores for `cpu:`), batches of --batch
    /// back to back for --seconds; writes `model,neighbour,segment,batch,solo_ms,corun_ms,slowdown` (to -o,
    /// default BUNDLE/pairs.csv), the `interference` table of a `[gpulet]` spec.
    #[arg(long, conflicts_with = "adaptive")]
    pairs: bool,
    /// gpu-lets' solo utilisations instead of the sweep: each slot's model alone on the whole GPU --gpu, one
    /// batch of --batch measured by Nsight Compute (`ncu` on PATH; no MPS daemon may run on that GPU), written
    /// as `model,batch,l2,dram` (to -o, default BUNDLE/util.csv), the `utilisation` table of a `[gpulet]` spec.
    #[arg(long, conflicts_with_all = ["adaptive", "pairs", "segments"])]
    counters: bool,
    /// With --counters, the GPU, as nvidia-smi numbers it.
    #[arg(long, default_value_t = 0, requires = "counters")]
    gpu: u32,
    /// With --pairs or --counters, the batch size (default 8).
    #[arg(long)]
    batch: Option<u32>,
    /// The process --counters runs under Nsight Compute: the slot's model on CUDA device 0, one batch inside a
    /// profiler range.
    #[arg(long, hide = true)]
    kernels_of: Option<String>,
    /// With --pairs, how long each measurement runs.
    #[arg(long, default_value_t = 3.0, requires = "pairs")]
    seconds: f64,
}

impl ProfileCommand {
    /// Measure every variant on every segment and write the table.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        profile(self).map(|()| ExitCode::SUCCESS)
    }
}

fn profile(args: ProfileCommand) -> anyhow::Result<()> {
    let bundle = crate::input::open_bundle(&args.bundle)?;
    let batch = match args.batch {
        Some(_) if !(args.pairs || args.counters || args.kernels_of.is_some()) => {
            bail!("--batch is the batch of --pairs and --counters; the sweep grows batches up to --max-batch")
        }
        Some(0) => bail!("--batch must be at least 1"),
        batch => batch.unwrap_or(8),
    };
    if let Some(slot) = &args.kernels_of {
        return counters::kernels_of(&bundle, slot, batch);
    }
    if args.counters {
        let output = args.output.clone().unwrap_or_else(|| bundle.dir.join("util.csv"));
        return counters::counters(&bundle, args.gpu, batch, &output);
    }
    if let Some(slot) = args.slots.iter().find(|slot| !bundle.manifest.variants.iter().any(|v| &v.slot == *slot)) {
        let mut known: Vec<&str> = Vec::new();
        for variant in &bundle.manifest.variants {
            if !known.contains(&variant.slot.as_str()) {
                known.push(&variant.slot);
            }
        }
        bail!("--slot {slot}: {} has no variant of that slot (its slots: {})", args.bundle.display(), known.join(", "));
    }
    let variants: Vec<&jig_manifest::Variant> =
        (bundle.manifest.variants.iter()).filter(|v| args.slots.is_empty() || args.slots.contains(&v.slot)).collect();
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
        warn_of_overcharge(segment);
        launcher.check(&placement(*segment))?;
    }
    if args.pairs {
        return pairs(&args, batch, &bundle, &launcher, &segments, &machine_cores);
    }
    let adaptive = match (args.adaptive, bundle.manifest.slo) {
        (false, _) => None,
        (true, None) => bail!("--adaptive measures against the latency SLO: add `[slo] latency_ms` to jig.toml"),
        (true, Some(slo)) => {
            let ipa = bundle.manifest.planner.as_deref() == Some("ipa");
            let slo = Duration::from_millis(slo.latency_ms);
            let budget = if ipa { slo } else { slo / 2 };
            Some(sweep::Adaptive { max_runs: args.max_runs.max(50), ..sweep::Adaptive::compass(budget) })
        }
    };
    let settings = sweep::Settings {
        max_batch: args.max_batch,
        runs: args.runs,
        max_latency: Duration::from_millis(args.max_latency_ms),
        adaptive,
        ..sweep::Settings::default()
    };
    let mut rows = Vec::new();
    // Batches double from 1 up to --max-batch: the points one variant on one segment measures at most.
    let sweep_points = u64::from(args.max_batch.max(1).ilog2() + 1);
    let steps = Arc::new(Steps::new("profile", variants.len() as u64 * segments.len() as u64 * sweep_points));
    // Adaptive sampling's account: timed runs taken, points measured, and segments trimmed away.
    let (mut runs, mut points_measured, mut trimmed) = (0usize, 0usize, Vec::new());
    for variant in &variants {
        let measure = |segment: &Segment, settings: &sweep::Settings, quiet: bool| {
            let label = format!("{}/{} on {segment}", variant.slot, variant.name);
            let samples = samples_for(variant);
            let adaptive = settings.adaptive.is_some();
            let report = {
                let (label, steps) = (label.clone(), steps.clone());
                move |p: &sweep::Point| {
                    let verdict = match p.within_budget {
                        Some(true) => ", within the budget",
                        Some(false) => ", over the budget",
                        None if adaptive => ", budget undecided",
                        None => "",
                    };
                    let host = p.cpu.map(|cpu| format!(", {:.2} ms of host CPU", cpu.as_secs_f64() * 1e3));
                    steps.println(&format!(
                        "profile: {label}: batch {:>3}: p50 {:>8.2} ms, p95 {:>8.2} ms, {:>9.1} rows/s{} ({} runs{verdict})",
                        p.batch,
                        p.p50.as_secs_f64() * 1e3,
                        p.p95.as_secs_f64() * 1e3,
                        p.throughput,
                        host.unwrap_or_default(),
                        p.runs,
                    ));
                    if !quiet {
                        steps.advance(1);
                    }
                }
            };
            let (settings, name, placement) = (settings.clone(), variant.name.clone(), placement(*segment));
            let sweep_name = name.clone();
            launcher
                .run_on(&label, &name, &bundle.model_path(variant), &placement, move |executors| {
                    let samples = samples(executors.first().map_or(&[][..], |e| e.inputs()));
                    sweep::sweep(executors, &sweep_name, &samples, &settings, report)
                })?
                .map_err(|e| anyhow::anyhow!("profiling {label}: {e}"))
        };
        // With --adaptive, the CPU segments below the smallest on which batch 1 is within the budget are skipped.
        let mut chosen: Vec<Segment> = segments.clone();
        if settings.adaptive.is_some() {
            let mut cpus: Vec<Segment> =
                segments.iter().copied().filter(|s| matches!(s, Segment::Cpu { .. })).collect();
            cpus.sort_by_key(|s| match s {
                Segment::Cpu { cores } => *cores,
                _ => 0,
            });
            let probe = sweep::Settings { max_batch: 1, ..settings.clone() };
            let lo = smallest_within(cpus.len(), |i| {
                steps.println(&format!("profile: {}/{}: trimming: batch 1 on {}", variant.slot, variant.name, cpus[i]));
                let (points, _) = measure(&cpus[i], &probe, true)?;
                runs += points.iter().map(|p| p.runs).sum::<usize>();
                points_measured += points.len();
                Ok(points.first().is_some_and(|p| p.within_budget == Some(true)))
            })?;
            let skipped: Vec<Segment> = cpus[..lo].to_vec();
            chosen.retain(|s| !skipped.contains(s));
            for segment in &skipped {
                steps.println(&format!(
                    "profile: {}/{} on {segment}: trimmed (batch 1 is not within the budget on fewer cores than {})",
                    variant.slot, variant.name, cpus[lo]
                ));
                steps.advance(sweep_points);
                trimmed.push(format!("{}/{} on {segment}", variant.slot, variant.name));
            }
        }
        for segment in &chosen {
            let label = format!("{}/{} on {segment}", variant.slot, variant.name);
            steps.println(&format!("profile: {label}"));
            steps.set_message(label.clone());
            let (points, stop) = measure(segment, &settings, false)?;
            let placement = placement(*segment);
            let device = launcher.device_name(&placement);
            match stop {
                Some(sweep::Stop::Latency { batch, p95 }) => steps.println(&format!(
                    "profile: {label}: stopped after batch {batch}: p95 {p95:?} exceeds {}",
                    if settings.adaptive.is_some() { "the budget" } else { "--max-latency-ms" }
                )),
                Some(sweep::Stop::Failed { batch, detail }) => {
                    steps.println(&format!("profile: {label}: stopped at batch {batch}: {detail}"))
                }
                None => {}
            }
            // A sweep that stopped early skips the points it did not measure.
            steps.advance(sweep_points.saturating_sub(points.len() as u64));
            runs += points.iter().map(|p| p.runs).sum::<usize>();
            points_measured += points.len();
            rows.extend(points.into_iter().map(|p| ProfileRow {
                slot: variant.slot.clone(),
                variant: variant.name.clone(),
                segment: segment.to_string(),
                batch: p.batch,
                p50_ms: p.p50.as_secs_f64() * 1e3,
                p95_ms: p.p95.as_secs_f64() * 1e3,
                throughput_rps: p.throughput,
                device: device.clone(),
                cpu_ms: p.cpu.map(|cpu| cpu.as_secs_f64() * 1e3),
            }));
        }
    }
    if let Some(adaptive) = &settings.adaptive {
        let fixed = points_measured * adaptive.max_runs;
        steps.println(&format!(
            "profile: adaptive: {runs} timed runs for {points_measured} points, {:.0}% fewer than {fixed} at a fixed {} \
             a point; trimmed {} segment(s){}",
            100.0 * (1.0 - runs as f64 / fixed.max(1) as f64),
            adaptive.max_runs,
            trimmed.len(),
            if trimmed.is_empty() { String::new() } else { format!(": {}", trimmed.join(", ")) }
        ));
    }
    steps.finish();
    let output = args.output.unwrap_or_else(|| bundle.dir.join("profiles.csv"));
    let measured = rows.len();
    if !args.slots.is_empty() && output.exists() {
        let text = std::fs::read_to_string(&output).with_context(|| format!("reading {}", output.display()))?;
        let kept = jig_planner::profile::from_csv(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a profile table, so --slot cannot keep its other rows ({e}); mend or remove it",
                output.display()
            )
        })?;
        let remeasured = |r: &ProfileRow| {
            variants.iter().any(|v| v.slot == r.slot && v.name == r.variant)
                && segments.iter().any(|s| s.to_string() == r.segment)
        };
        rows = kept.into_iter().filter(|r| !remeasured(r)).chain(rows).collect();
    }
    std::fs::write(&output, jig_planner::profile::to_csv(&rows))
        .with_context(|| format!("writing the profile table to {}", output.display()))?;
    let kept = match rows.len() - measured {
        0 => String::new(),
        kept => format!(" ({measured} measured now, {kept} kept)"),
    };
    eprintln!("profile: wrote {} rows{kept} to {}", rows.len(), output.display());
    note_packed(&rows);
    Ok(())
}

/// Say which shares measured alone run slower beside processes of their size measured together, which the planner
/// reads instead ([`jig_planner::profile::as_packed`]): a user who profiled `mps:0:14` and `mps:0:57x4` learns why
/// the plan's 14% shares serve less than their own rows say.
fn note_packed(rows: &[ProfileRow]) {
    let mut slowest: std::collections::BTreeMap<(&str, &str, &str), f64> = Default::default();
    for (alone, packed) in rows.iter().zip(jig_planner::profile::as_packed(rows)) {
        let slower = packed.p95_ms / alone.p95_ms;
        if slower > 1.005 {
            let at = slowest.entry((&alone.slot, &alone.variant, &alone.segment)).or_default();
            *at = at.max(slower);
        }
    }
    for ((slot, variant, segment), slower) in slowest {
        eprintln!(
            "profile: note: {slot}/{variant} on {segment} runs batches up to {slower:.2}× as long (p95) beside other \
             processes of its share's size, as measured together, as alone; the planner plans it as they ran together"
        );
    }
}

/// Say when the planner will charge an `mps:` share for more of the GPU than the share itself: shares cost sevenths
/// of a GPU, rounded up, and a user who profiles 25% shares would otherwise find four of them never fit one GPU.
fn warn_of_overcharge(segment: &Segment) {
    let Ok(kind) = jig_policy::segment::SegmentKind::parse(&segment.to_string()) else { return };
    let (over, Some(charged)) = (kind.overcharged_percent(), kind.charged_percent()) else { return };
    if over >= 1.0 {
        eprintln!(
            "profile: note: the planner charges {segment} {} of a GPU's 7 slices ({charged:.1}%, {over:.1} points more \
             than the share), so shares like it fill a GPU only partly; shares in sevenths (14, 28, 42, 57, 71, 85 or \
             100%) fill one together",
            kind.default_slices(),
        );
    }
}

/// What a variant's manifest says to feed its inputs when profiling (`shapes`, `values`), per input of the model.
fn samples_for(
    variant: &jig_manifest::Variant,
) -> impl Fn(&[jig_model_host::onnx::TensorSpec]) -> Vec<sweep::SampleInput> + Send + 'static {
    let (shapes, values) = (variant.shapes.clone(), variant.values.clone());
    move |inputs| {
        inputs
            .iter()
            .map(|i| sweep::SampleInput { shape: shapes.get(&i.name).cloned(), values: values.get(&i.name).cloned() })
            .collect()
    }
}

/// One model per slot (the planner's unit, and the name a `[gpulet]` spec gives): its first variant; `what`
/// (`--pairs`, `--counters`) says which measurement leaves the others out.
fn one_per_slot<'a>(bundle: &'a Bundle, what: &str) -> Vec<&'a jig_manifest::Variant> {
    let mut models: Vec<&jig_manifest::Variant> = Vec::new();
    for v in &bundle.manifest.variants {
        if models.iter().any(|m| m.slot == v.slot) {
            eprintln!("profile: {what} measures slot `{}` by its first variant; `{}` is left out", v.slot, v.name);
        } else {
            models.push(v);
        }
    }
    models
}

/// `--pairs`: each slot's model alone on `segment`, then every pair of them at once (gpu-lets §4.4's co-run
/// measurement), written as the `interference` table a `[gpulet]` spec reads.
fn pairs(
    args: &ProfileCommand,
    batch: u32,
    bundle: &Bundle,
    launcher: &Launcher,
    segments: &[Segment],
    machine_cores: &[usize],
) -> anyhow::Result<()> {
    use std::sync::atomic::AtomicUsize;
    let &[segment] = segments else {
        bail!("--pairs measures on one segment size: give one --segment, e.g. --segment mps:0:50")
    };
    if segment.processes() > 1 {
        bail!(
            "--pairs measures one process beside one other: give a segment of one process (e.g. mps:0:50, not {segment})"
        )
    }
    // Two of the segment at once: the same share twice on a GPU, disjoint cores on the CPU.
    let placements: Vec<Placement> = match segment {
        Segment::Cpu { cores } => {
            let cores = cores as usize;
            if machine_cores.len() < 2 * cores {
                bail!(
                    "--pairs on {segment} runs two at once on {} cores; this machine offers {}",
                    2 * cores,
                    machine_cores.len()
                );
            }
            machine_cores
                .chunks(cores)
                .take(2)
                .map(|c| Placement { cores: Some(c.to_vec()), ..Placement::new(segment) })
                .collect()
        }
        _ => vec![Placement::new(segment); 2],
    };
    let models = one_per_slot(bundle, "--pairs");
    let duration = Duration::from_secs_f64(args.seconds.max(0.1));
    // The median batch latency of each of `group` running at once, each on a placement of its own.
    let together = |group: &[&jig_manifest::Variant]| -> anyhow::Result<Vec<Duration>> {
        let ready = Arc::new(AtomicUsize::new(0));
        let runs: Vec<anyhow::Result<Vec<(std::time::Instant, std::time::Instant)>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = group
                .iter()
                .zip(&placements)
                .map(|(v, placement)| {
                    let (ready, n, batch) = (ready.clone(), group.len(), u64::from(batch));
                    let label = format!("{}/{} on {segment}", v.slot, v.name);
                    let (samples, name) = (samples_for(v), v.name.clone());
                    scope.spawn(move || {
                        launcher
                            .run_on(&label, &v.name, &bundle.model_path(v), placement, move |executors| {
                                let executor = executors[0];
                                let samples = samples(executor.inputs());
                                let inputs = sweep::sample_inputs(&name, executor.inputs(), &samples, batch)?;
                                sweep::run_beside(executor, &inputs, 3, &ready, n, duration)
                            })?
                            .map_err(|e| anyhow::anyhow!("measuring {label}: {e}"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a measuring thread panicked"))))
                .collect()
        });
        let runs = runs.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        sweep::medians_together(&runs)
            .into_iter()
            .zip(group)
            .map(|(m, v)| {
                m.with_context(|| format!("{}: fewer than three runs beside the others; give more --seconds", v.slot))
            })
            .collect()
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut solo = Vec::new();
    for v in &models {
        let [alone] = together(&[v])?[..] else { unreachable!("one model, one median") };
        eprintln!("profile: {} alone on {segment}: {:.3} ms at batch {}", v.slot, ms(alone), batch);
        solo.push(alone);
    }
    let mut csv = String::from("model,neighbour,segment,batch,solo_ms,corun_ms,slowdown\n");
    for i in 0..models.len() {
        for j in i..models.len() {
            let both = together(&[models[i], models[j]])?;
            for (k, n, corun) in [(i, j, both[0]), (j, i, both[1])].into_iter().take(if i == j { 1 } else { 2 }) {
                let slowdown = corun.as_secs_f64() / solo[k].as_secs_f64() - 1.0;
                eprintln!(
                    "profile: {} beside {} on {segment}: {:.3} -> {:.3} ms ({:+.1}%)",
                    models[k].slot,
                    models[n].slot,
                    ms(solo[k]),
                    ms(corun),
                    100.0 * slowdown
                );
                csv.push_str(&format!(
                    "{},{},{segment},{},{:.6},{:.6},{slowdown:.4}\n",
                    models[k].slot,
                    models[n].slot,
                    batch,
                    ms(solo[k]),
                    ms(corun)
                ));
            }
        }
    }
    let output = args.output.clone().unwrap_or_else(|| bundle.dir.join("pairs.csv"));
    std::fs::write(&output, &csv).with_context(|| format!("writing the co-run table to {}", output.display()))?;
    eprintln!("profile: wrote {} co-runs to {}", csv.lines().count() - 1, output.display());
    Ok(())
}

/// Resource trimming (Compass §4.2): of `n` segments ordered by size, the index of the smallest on which
/// `within(i)` holds, by binary search, assuming more resources are never slower; the largest when none does,
/// so that the table still measures the variant somewhere. `within` runs about log₂ n times.
fn smallest_within(n: usize, mut within: impl FnMut(usize) -> anyhow::Result<bool>) -> anyhow::Result<usize> {
    let (mut lo, mut hi) = (0, n.saturating_sub(1));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if within(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_finds_the_smallest_segment_within_the_budget_in_few_probes() {
        for n in 1..=6 {
            for first in 0..=n {
                let mut probes = 0;
                let found = smallest_within(n, |i| {
                    probes += 1;
                    Ok(i >= first)
                })
                .unwrap();
                // None within: the largest.
                assert_eq!(found, first.min(n - 1), "{n} segments, within from {first}");
                assert!(probes <= n.next_power_of_two().ilog2() as usize, "{probes} probes for {n}");
            }
        }
        assert!(smallest_within(4, |_| anyhow::bail!("no such segment")).is_err());
    }
}
