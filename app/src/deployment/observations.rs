//! What a running app observed, and how it refines what its next plan assumes (JigsawServe §3.1): the factor
//! of each edge, each planned group's batch latency (and on a GPU, the host CPU a batch costs its workers), and
//! the CPU time a request costs outside the planned instances. Each observation counts only once it rests on
//! enough samples, and latencies move a profile row by at most [`MAX_REFINEMENT`], so that a few odd batches
//! cannot make a plan forget what was measured.

use jig_api::{Deployment, ObservedFactor, ObservedGlue, ObservedLatency, PlannedFactor};
use jig_manifest::Bundle;
use jig_planner::profile::ProfileRow;
use jig_planner::spec::SegmentKind;

use super::graph::model_edges;

/// Invocations of an edge's upstream task before its observed factor replaces the manifest's.
pub const MIN_FACTOR_SAMPLES: u64 = 20;

/// Batches of one size a planned group must run before its observed latency refines its profile rows.
pub const MIN_LATENCY_SAMPLES: u64 = 20;

/// How far refinement may move a profile row from what `jig profile` measured: at most this factor either
/// way, so that a few slow batches (a noisy neighbour, a cold cache) cannot make a plan forget its profile.
/// Wide enough for a profile measured on another machine: per core, one generation of server CPU runs a model
/// up to about 3× as fast as another (the sign reader's profile, from a newer AMD EPYC, ran 2.6–2.7× slower on
/// a first-generation one at 2 GHz), and a bound of 2× left such a plan promising 1.2× what it served.
pub const MAX_REFINEMENT: f64 = 4.0;

/// What a running app observed, for its next plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    /// The factor on each edge between model tasks.
    pub factors: Vec<ObservedFactor>,
    /// Each planned group's batch latency; those of earlier deployments where this one has too few batches.
    pub latencies: Vec<ObservedLatency>,
    /// Each task's glue time per invocation.
    pub glue: Vec<ObservedGlue>,
    /// The CPU time of model instances running unpinned on this machine's cores (default instances without a
    /// core of their own), ms in all.
    pub unpinned_ms: f64,
    /// Requests whose graph ran to its end.
    pub answered: u64,
    /// The deployment running now: a re-plan's search starts from it (`jig_planner::solve_from`).
    pub current: Option<Deployment>,
}

impl Observations {
    /// What a deployed app had observed when `status` (its `jig status --json`) was taken: what its controller
    /// would re-plan with then (see `App::observations`), without the running deployment to start from.
    pub fn from_status(status: &jig_api::AppStatus) -> Self {
        Observations {
            factors: status.observed_factors.clone(),
            latencies: latest_latencies(&status.deployment.refined, &status.observed_latencies),
            glue: status.observed_glue.clone(),
            unpinned_ms: status.observed_unpinned_ms,
            answered: status.answered,
            current: None,
        }
    }
}

/// The CPU time a request cost outside the planned instances, as observed, ms: every task's `glue` and the
/// `unpinned_ms` of instances running unpinned, over the requests `answered`; once [`MIN_FACTOR_SAMPLES`]
/// were. Work on requests still running or dropped counts against those answered: under overload a request
/// answered costs what the ones given up cost too.
pub fn observed_cpu_ms(answered: u64, glue: &[ObservedGlue], unpinned_ms: f64) -> Option<f64> {
    let spent: f64 = glue.iter().map(|g| g.mean_ms * g.invocations as f64).sum();
    (answered >= MIN_FACTOR_SAMPLES).then(|| (spent + unpinned_ms) / answered as f64)
}

/// The CPU time a request at the entry costs on the cores outside the planned instances, ms, and what it rests
/// on. Observed ([`observed_cpu_ms`]) once the app answered [`MIN_FACTOR_SAMPLES`] requests. Before that,
/// declared: each task's `cpu_ms` times the invocations a request makes of it (by the manifest's factors, 1 where
/// none is declared).
pub fn unplanned_cpu_ms(bundle: &Bundle, observed: &Observations) -> (f64, &'static str) {
    let m = &bundle.manifest;
    if let Some(ms) = observed_cpu_ms(observed.answered, &observed.glue, observed.unpinned_ms) {
        return (ms, "observed");
    }
    // Invocations per request: 1 at the entry, and along each edge its upstream task's times the factor its
    // first variant declares for the downstream one.
    fn invocations(bundle: &Bundle, task: &str, depth: usize) -> f64 {
        let m = &bundle.manifest;
        let into = m.edges.iter().filter(|e| e.to == task).filter_map(|e| e.source()).collect::<Vec<_>>();
        if into.is_empty() || depth > m.tasks.len() {
            return 1.0;
        }
        into.iter()
            .map(|&(from, _)| {
                let slot = m.tasks.iter().find(|t| t.name == from).and_then(|t| t.slot.as_deref());
                let variant = slot.and_then(|slot| m.variants.iter().find(|v| v.slot == slot));
                let factor = variant.and_then(|v| v.factors.get(task).copied()).unwrap_or(1.0);
                invocations(bundle, from, depth + 1) * factor
            })
            .sum()
    }
    let declared = m.tasks.iter().map(|t| t.cpu_ms.unwrap_or(0.0) * invocations(bundle, &t.name, 0)).sum();
    (declared, "declared")
}

/// How an observation scales its variant's profile rows on its segment: the median by observed over profiled
/// p50, the tail by observed over profiled p95 — a busy machine stretches the tail more than the median — and
/// the throughput by observed over profiled mean: of the batches' CPU time on this gateway's cores (what a batch
/// costs them, as `jig profile` measured it on idle cores; the time it waited for a core that glue or an unpinned
/// instance held is the plan's CPU-time row's to count, not the instance's), else of their latency. Each within
/// [`MAX_REFINEMENT`] either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refinement {
    /// The scale of p50 latencies.
    pub p50: f64,
    /// The scale of p95 latencies.
    pub p95: f64,
    /// The scale of the mean batch, by which throughputs are divided: what a batch holds its segment for on
    /// average, slow ones included (a busy machine's tail makes the mean grow faster than the median).
    pub mean: f64,
}

/// The [`Refinement`] of `observed`; `None` before [`MIN_LATENCY_SAMPLES`] batches or without a profile row.
/// An observation without a p50 (from an older gateway) scales the median as its p95, and one without a mean
/// the mean as its median.
pub fn refinement(observed: &ObservedLatency) -> Option<Refinement> {
    let profiled = observed.profiled_ms.filter(|&p| p > 0.0)?;
    if observed.batches < MIN_LATENCY_SAMPLES || observed.p95_ms <= 0.0 {
        return None;
    }
    let bounded = |scale: f64| scale.clamp(1.0 / MAX_REFINEMENT, MAX_REFINEMENT);
    let p95 = bounded(observed.p95_ms / profiled);
    let p50 = match observed.profiled_p50_ms.filter(|&p| p > 0.0) {
        Some(profiled) if observed.p50_ms > 0.0 => bounded(observed.p50_ms / profiled),
        _ => p95,
    };
    let mean_ms = observed.cpu_mean_ms.filter(|&cpu| cpu > 0.0).unwrap_or(observed.mean_ms);
    let mean = match observed.profiled_mean_ms.filter(|&p| p > 0.0) {
        Some(profiled) if mean_ms > 0.0 => bounded(mean_ms / profiled),
        _ => p50,
    };
    Some(Refinement { p50, p95, mean })
}

/// How far from its profile a group's batches must cost for [`far_from_profile`] to name it.
pub const FAR_FROM_PROFILE: f64 = 2.0;

/// The observations among `refined` whose batches cost more than [`FAR_FROM_PROFILE`] times or less than its
/// inverse what their profile rows say, with that scale (the throughput's, [`Refinement::mean`]). On every batch
/// a group ran, that is most likely a profile measured on another kind of machine, which `jig status` says.
pub fn far_from_profile(refined: &[ObservedLatency]) -> Vec<(&ObservedLatency, f64)> {
    let near = 1.0 / FAR_FROM_PROFILE..=FAR_FROM_PROFILE;
    refined.iter().filter_map(|o| Some((o, refinement(o)?.mean))).filter(|(_, scale)| !near.contains(scale)).collect()
}

/// The host CPU a batch of `observed`'s group cost its worker processes, once it rests on enough batches.
fn host_cpu(observed: &ObservedLatency) -> Option<f64> {
    observed.host_cpu_ms.filter(|&ms| ms.is_finite() && ms >= 0.0 && observed.batches >= MIN_LATENCY_SAMPLES)
}

/// Refine profile `rows` with `observed` latencies: every row of an observed variant on its segment, at every
/// batch size, is scaled by the observation's [`refinement`], and on a GPU takes the host CPU its workers were
/// observed to spend a batch: as observed where the profile has no `cpu_ms` at the observed batch size (a GPU
/// batch's host work, launches and copies, taken as the same at every size), else each row's scaled by observed
/// over profiled. Returns the observations used.
pub fn refine(rows: &mut [ProfileRow], observed: &[ObservedLatency]) -> Vec<ObservedLatency> {
    let mut used = Vec::new();
    for o in observed {
        let (scale, host) = (refinement(o), host_cpu(o));
        let mut matched = false;
        let of_group = |r: &ProfileRow| r.slot == o.slot && r.variant == o.variant && r.is_on(&o.segment);
        let profiled_host = rows.iter().find(|r| of_group(r) && r.batch == o.batch).and_then(|r| r.cpu_ms);
        for row in rows.iter_mut().filter(|r| of_group(r)) {
            if let Some(scale) = scale {
                row.p50_ms *= scale.p50;
                row.p95_ms = (row.p95_ms * scale.p95).max(row.p50_ms);
                row.throughput_rps /= scale.mean;
                matched = true;
            }
            let on_gpu = !matches!(SegmentKind::parse(&row.segment), Ok(SegmentKind::Cpu { .. }));
            if let Some(host) = host.filter(|_| on_gpu) {
                row.cpu_ms = match (row.cpu_ms, profiled_host.filter(|&p| p > 0.0)) {
                    (Some(own), Some(profiled)) => Some(own * host / profiled),
                    _ => Some(host),
                };
                matched = true;
            }
        }
        if matched {
            used.push(o.clone());
        }
    }
    used
}

/// The latencies to plan with: each of `fresh` that is enough to refine with, else the one `previous` (the
/// running deployment's [`Deployment::refined`]) used for the same variant and segment.
pub fn latest_latencies(previous: &[ObservedLatency], fresh: &[ObservedLatency]) -> Vec<ObservedLatency> {
    let same = |a: &ObservedLatency, b: &ObservedLatency| {
        (&a.slot, &a.variant, &a.segment) == (&b.slot, &b.variant, &b.segment)
    };
    let mut latest: Vec<ObservedLatency> =
        fresh.iter().filter(|o| refinement(o).is_some() || host_cpu(o).is_some()).cloned().collect();
    for p in previous {
        if !latest.iter().any(|o| same(o, p)) {
            latest.push(p.clone());
        }
    }
    latest
}

/// Whether a `fresh` observation refines its rows by more than `threshold` (relative) beyond what the last
/// plan `refined` them with (1 where it refined nothing), or its workers' host CPU a batch differs by as much
/// (a millisecond at least) from what that plan took: a reason to re-plan.
pub fn latencies_drifted(refined: &[ObservedLatency], fresh: &[ObservedLatency], threshold: f64) -> bool {
    fresh.iter().any(|o| {
        let before = refined.iter().find(|r| (&r.slot, &r.variant, &r.segment) == (&o.slot, &o.variant, &o.segment));
        let host_moved = host_cpu(o).is_some_and(|now| {
            let then = before.and_then(host_cpu).unwrap_or(0.0);
            (now - then).abs() > (threshold * then).max(1.0)
        });
        let Some(scale) = refinement(o) else { return host_moved };
        let planned = before.and_then(refinement).unwrap_or(Refinement { p50: 1.0, p95: 1.0, mean: 1.0 });
        host_moved
            || [(scale.p50, planned.p50), (scale.p95, planned.p95), (scale.mean, planned.mean)]
                .iter()
                .any(|(now, then)| (now / then - 1.0).abs() > threshold)
    })
}

/// The factor of each edge between model tasks that planning uses: the observed one when it rests on enough
/// invocations, else the largest the upstream task's variants declare (1 when none does).
pub fn planned_factors(bundle: &Bundle, observed: &[ObservedFactor]) -> Vec<PlannedFactor> {
    let m = &bundle.manifest;
    model_edges(bundle)
        .into_iter()
        .map(|e| {
            let seen = observed.iter().find(|o| o.from == e.from && o.to == e.to && o.samples >= MIN_FACTOR_SAMPLES);
            let declared = || {
                let slot = m.tasks.iter().find(|t| t.name == e.from).and_then(|t| t.slot.as_deref());
                let variants = m.variants.iter().filter(|v| Some(v.slot.as_str()) == slot);
                variants.filter_map(|v| v.factors.get(&e.to).copied()).reduce(f64::max).unwrap_or(1.0)
            };
            let factor = seen.and_then(|o| o.factor).unwrap_or_else(declared);
            PlannedFactor { from: e.from, to: e.to, factor }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::test_support::{bundle, glue_bundle};
    use crate::deployment::{Capacity, plan, read_profiles};

    fn observed(p95_ms: f64, batches: u64) -> ObservedLatency {
        ObservedLatency {
            slot: "det".into(),
            variant: "det".into(),
            segment: "cpu:2".into(),
            batch: 1,
            batches,
            p95_ms,
            profiled_ms: Some(50.0),
            p50_ms: 0.0,
            profiled_p50_ms: None,
            mean_ms: 0.0,
            profiled_mean_ms: None,
            cpu_mean_ms: None,
            busy_ms_per_request: None,
            requests: 0,
            host_cpu_ms: None,
        }
    }

    /// A GPU group's host CPU a batch (its workers') reaches every row of its variant on its share once it rests
    /// on enough batches: as observed where the profile measured none at that size, else scaling what it
    /// measured; a CPU row takes none, and a change of it is a reason to re-plan.
    #[test]
    fn a_gpu_group_s_host_cpu_refines_its_rows_and_its_change_re_plans() {
        let row = |segment: &str, batch: u32, cpu_ms: Option<f64>| ProfileRow {
            slot: "det".into(),
            variant: "det".into(),
            segment: segment.into(),
            batch,
            p50_ms: 10.0,
            p95_ms: 12.0,
            throughput_rps: 100.0,
            device: "d".into(),
            cpu_ms,
        };
        // No profiled latency: only the host CPU refines.
        let seen = |host: f64, batches: u64| ObservedLatency {
            segment: "mps:50".into(),
            profiled_ms: None,
            host_cpu_ms: Some(host),
            ..observed(12.0, batches)
        };
        let cpu_of = |rows: &[ProfileRow]| rows.iter().map(|r| r.cpu_ms).collect::<Vec<_>>();

        let unmeasured = || vec![row("mps:0:50", 1, None), row("mps:0:50", 4, None), row("cpu:2", 1, None)];
        let mut rows = unmeasured();
        assert_eq!(refine(&mut rows, &[seen(30.0, MIN_LATENCY_SAMPLES)]).len(), 1);
        assert_eq!(cpu_of(&rows), [Some(30.0), Some(30.0), None]);
        assert_eq!(rows[0].p95_ms, 12.0, "its latencies stay");
        let mut rows = unmeasured();
        assert!(refine(&mut rows, &[seen(30.0, MIN_LATENCY_SAMPLES - 1)]).is_empty(), "too few batches");
        assert_eq!(cpu_of(&rows), [None, None, None]);

        let mut rows = vec![row("mps:0:50", 1, Some(10.0)), row("mps:0:50", 4, Some(16.0))];
        refine(&mut rows, &[seen(30.0, MIN_LATENCY_SAMPLES)]);
        assert_eq!(cpu_of(&rows), [Some(30.0), Some(48.0)], "each row scaled by 30 over the 10 profiled at b = 1");

        let at = |host: f64| vec![seen(host, MIN_LATENCY_SAMPLES)];
        assert!(latencies_drifted(&[], &at(30.0), 0.2), "planned without it");
        assert!(!latencies_drifted(&at(30.0), &at(33.0), 0.2));
        assert!(latencies_drifted(&at(30.0), &at(40.0), 0.2));
        assert!(!latencies_drifted(&at(0.3), &at(0.9), 0.2), "under a millisecond either way");
        assert_eq!(latest_latencies(&[], &at(30.0)).len(), 1, "kept to plan with, though no latency refines");
    }

    #[test]
    fn observed_latencies_scale_every_row_of_their_variant_and_segment_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let bundle =
            bundle(dir.path(), &[("cpu:2", 1, 50.0, 20.0), ("cpu:2", 4, 120.0, 33.0), ("cpu:1", 1, 90.0, 11.0)]);
        let rows = || read_profiles(&bundle.profiles_path().unwrap()).unwrap();
        let p95 = |rows: &[ProfileRow], segment: &str, batch: u32| {
            rows.iter().find(|r| r.segment == segment && r.batch == batch).map(|r| (r.p95_ms, r.throughput_rps))
        };

        let mut slower = rows();
        assert_eq!(refine(&mut slower, &[observed(75.0, MIN_LATENCY_SAMPLES)]).len(), 1);
        assert_eq!(p95(&slower, "cpu:2", 1), Some((75.0, 20.0 / 1.5)));
        assert_eq!(p95(&slower, "cpu:2", 4), Some((180.0, 22.0)), "every batch size of the segment");
        assert_eq!(p95(&slower, "cpu:1", 1), Some((90.0, 11.0)), "other segments keep their rows");

        // A GPU row names its GPU, the planned segment type none: an observation on `mps:50` refines `mps:0:50`.
        let mut on_gpu = rows();
        on_gpu[0].segment = "mps:0:50".into();
        let on_share = ObservedLatency { segment: "mps:50".into(), ..observed(75.0, MIN_LATENCY_SAMPLES) };
        assert_eq!(refine(&mut on_gpu, &[on_share]).len(), 1);
        assert_eq!(p95(&on_gpu, "mps:0:50", 1), Some((75.0, 20.0 / 1.5)));

        let mut bounded = rows();
        refine(&mut bounded, &[observed(1000.0, 100)]);
        assert_eq!(p95(&bounded, "cpu:2", 1), Some((50.0 * MAX_REFINEMENT, 20.0 / MAX_REFINEMENT)), "within bounds");
        let mut faster = rows();
        refine(&mut faster, &[observed(1.0, 100)]);
        assert_eq!(p95(&faster, "cpu:2", 1), Some((50.0 / MAX_REFINEMENT, 20.0 * MAX_REFINEMENT)), "either way");
        // Two and a half times the profile on every batch is named as far from it; a fifth more is not.
        let (slow, near) = (observed(125.0, 100), observed(60.0, 100));
        let seen = [slow.clone(), near, observed(125.0, 3)];
        assert_eq!(far_from_profile(&seen), vec![(&slow, 2.5)], "too few batches say nothing");

        // With its median observed too, an observation scales the median and throughput by the median's ratio
        // and the tail by the tail's.
        let mut split = rows();
        let split_observation = || ObservedLatency { p50_ms: 55.0, profiled_p50_ms: Some(50.0), ..observed(100.0, 40) };
        refine(&mut split, &[split_observation()]);
        let row = split.iter().find(|r| r.segment == "cpu:2" && r.batch == 1).unwrap();
        assert!((row.p50_ms - 55.0).abs() < 1e-9 && (row.p95_ms - 100.0).abs() < 1e-9, "{row:?}");
        assert!((row.throughput_rps - 20.0 / 1.1).abs() < 1e-9, "{row:?}");

        // With its mean observed too, the throughput follows the mean: a slow tail at the same median costs
        // throughput (here 60 ms on average where the profile's 20 req/s at batch 1 means 50).
        let mut tailed = rows();
        let tail = ObservedLatency { mean_ms: 60.0, profiled_mean_ms: Some(50.0), ..split_observation() };
        refine(&mut tailed, std::slice::from_ref(&tail));
        let row = tailed.iter().find(|r| r.segment == "cpu:2" && r.batch == 1).unwrap();
        assert!((row.p50_ms - 55.0).abs() < 1e-9, "the median as before: {row:?}");
        assert!((row.throughput_rps - 20.0 / 1.2).abs() < 1e-9, "{row:?}");

        // With its CPU time observed on cores, the throughput follows that: 60 ms a batch of which 45 ran and
        // 15 waited for a core that other work held, which the plan's CPU-time row counts as that work's.
        let mut waited = rows();
        refine(&mut waited, &[ObservedLatency { cpu_mean_ms: Some(45.0), ..tail.clone() }]);
        let row = waited.iter().find(|r| r.segment == "cpu:2" && r.batch == 1).unwrap();
        assert!((row.p50_ms - 55.0).abs() < 1e-9, "latencies as observed: {row:?}");
        assert!((row.throughput_rps - 20.0 / 0.9).abs() < 1e-9, "{row:?}");

        let mut unchanged = rows();
        assert!(refine(&mut unchanged, &[observed(75.0, MIN_LATENCY_SAMPLES - 1)]).is_empty(), "too few batches");
        assert_eq!(unchanged, rows());

        // A slower segment than profiled buys more instances for the same demand.
        let planned = |latencies: Vec<ObservedLatency>| {
            let observations = Observations { latencies, ..Observations::default() };
            let d = plan(&bundle, &[], &Capacity::cpu_only(8), &observations);
            (d.instances.iter().map(|i| i.count).sum::<u32>(), d.refined.len(), d.source)
        };
        let (before, _, _) = planned(Vec::new());
        let (after, refined, source) = planned(vec![observed(100.0, 40)]);
        assert!(after > before, "{before} instances before, {after} after");
        assert_eq!(refined, 1);
        assert!(source.starts_with("planned"), "{source}");
    }

    #[test]
    fn the_cpu_a_request_costs_outside_the_instances_is_declared_until_observed() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = glue_bundle(dir.path(), (10.0, 20.0));
        let glue = |requests: u64| {
            vec![
                ObservedGlue { task: "detect".into(), invocations: requests, mean_ms: 12.0 },
                ObservedGlue { task: "speak".into(), invocations: requests * 3 / 2, mean_ms: 18.0 },
            ]
        };
        let observed = |requests, answered| Observations {
            glue: glue(requests),
            unpinned_ms: 400.0,
            answered,
            ..Default::default()
        };
        // 10 ms at the entry, and 1.5 invocations of speak at 20 ms each.
        assert_eq!(unplanned_cpu_ms(&bundle, &Observations::default()), (40.0, "declared"));
        assert_eq!(unplanned_cpu_ms(&bundle, &observed(40, MIN_FACTOR_SAMPLES - 1)), (40.0, "declared"));
        // 40 requests answered: 40 × 12 ms and 60 × 18 ms of glue, and 400 ms on unpinned instances.
        assert_eq!(unplanned_cpu_ms(&bundle, &observed(40, 40)), ((480.0 + 1080.0 + 400.0) / 40.0, "observed"));
        // Work on requests given up counts against those answered.
        assert_eq!(unplanned_cpu_ms(&bundle, &observed(40, 20)), ((480.0 + 1080.0 + 400.0) / 20.0, "observed"));
    }

    #[test]
    fn latencies_carry_over_re_plans_and_drift_counts_beyond_the_last_refinement() {
        let fresh_enough = [observed(75.0, 30)];
        let too_few = [observed(500.0, 3)];
        let earlier = [observed(60.0, 50)];
        assert_eq!(latest_latencies(&[], &fresh_enough), fresh_enough);
        assert_eq!(latest_latencies(&earlier, &too_few), earlier, "kept until enough");
        assert_eq!(latest_latencies(&earlier, &fresh_enough), fresh_enough);

        assert!(latencies_drifted(&[], &fresh_enough, 0.2), "1.5× the profile, planned with 1×");
        assert!(!latencies_drifted(&[observed(70.0, 20)], &fresh_enough, 0.2), "1.5 against 1.4");
        assert!(!latencies_drifted(&[], &too_few, 0.2), "too few batches to tell");
        let clamped = observed(400.0, 30);
        assert!(!latencies_drifted(&[observed(300.0, 30)], &[clamped], 0.2), "both at the bound: nothing to gain");
    }

    #[test]
    fn an_observed_factor_replaces_the_declared_one_once_it_rests_on_enough_invocations() {
        let dir = tempfile::tempdir().unwrap();
        // det → crop (glue only) → rec: one edge between model tasks.
        let manifest = r#"
name = "signs"
[[tasks]]
name = "det"
glue = "g.wasm"
slot = "det"
[[tasks]]
name = "crop"
glue = "g.wasm"
[[tasks]]
name = "rec"
glue = "g.wasm"
slot = "rec"
[[edges]]
from = "det.boxes"
to = "crop"
[[edges]]
from = "crop.lines"
to = "rec"
[[variants]]
slot = "det"
name = "det"
model = "m.onnx"
factors = { rec = 2.0 }
[[variants]]
slot = "rec"
name = "rec"
model = "m.onnx"
"#;
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let seen = |samples| vec![ObservedFactor { from: "det".into(), to: "rec".into(), factor: Some(3.5), samples }];
        let factor = |observed: &[ObservedFactor]| planned_factors(&bundle, observed)[0].factor;
        assert_eq!(factor(&[]), 2.0, "declared: through the glue-only crop task");
        assert_eq!(factor(&seen(MIN_FACTOR_SAMPLES - 1)), 2.0, "too few invocations");
        assert_eq!(factor(&seen(MIN_FACTOR_SAMPLES)), 3.5);
    }
}
