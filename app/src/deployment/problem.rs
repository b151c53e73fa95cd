//! The planner's problem for a bundle: its model tasks and their variants, the profiled segments this machine
//! offers, the cores and GPU slices it has free, the demand and the SLO, with the profile rows refined by what
//! the running app observed. A bundle whose profiles measure no segment the machine offers is told here what
//! it lacks and what to do.

use std::path::Path;

use jig_api::{ObservedGlue, ObservedLatency};
use jig_manifest::{Bundle, IpaSettings};
use jig_planner::interference::MeasuredInterference;
use jig_planner::profile::ProfileRow;
use jig_planner::spec::{
    AppSpec, ClassSpec, DemandSpec, IpaSpec, IpaVariants, Objective, Resources, SegmentKind, SegmentSpec, TaskSpec,
    VariantSpec,
};
use jig_planner::{PlanError, PlanSpec, Problem, Strategy};

use super::capacity::Capacity;
use super::error::PlanningError;
use super::graph::{model_edges, model_tasks};
use super::mig::unknown_mig_gpu;
use super::observations::{MIN_FACTOR_SAMPLES, Observations, refine, unplanned_cpu_ms};

/// The profile table at `path`.
pub fn read_profiles(path: &Path) -> Result<Vec<ProfileRow>, PlanningError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanningError::Read { path: path.to_owned(), source })?;
    jig_planner::profile::from_csv(&text).map_err(|source| PlanningError::Profiles { path: path.to_owned(), source })
}

/// The planning problem of `bundle` with its profile table, for `demand_windows` within `capacity`, refined by
/// what the running app `observed`. Returns what it refined the rows with.
pub fn problem(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<(Problem, Refinements), PlanningError> {
    let m = &bundle.manifest;
    let mut rows = read_profiles(profiles)?;
    let refined = refine(&mut rows, &observed.latencies);
    let glue: Vec<ObservedGlue> =
        observed.glue.iter().filter(|g| g.invocations >= MIN_FACTOR_SAMPLES && g.mean_ms > 0.0).cloned().collect();
    let (unplanned_cpu_ms, unplanned_from) = unplanned_cpu_ms(bundle, observed);
    let slo = m.slo.ok_or(PlanningError::NoSlo)?;

    let model_tasks = model_tasks(bundle);
    if model_tasks.is_empty() {
        return Err(PlanningError::NoModelTasks);
    }
    let tasks = model_tasks
        .iter()
        .map(|&(task, slot)| TaskSpec {
            name: task.into(),
            slot: Some(slot.into()),
            variants: m
                .variants
                .iter()
                .filter(|v| v.slot == slot)
                .map(|v| {
                    // The planner's graph has the model tasks only; a factor for a glue-only task counts the
                    // CPU it costs (`unplanned_cpu_ms`).
                    let mut factors = v.factors.clone();
                    factors.retain(|to, _| model_tasks.iter().any(|&(t, _)| t == to));
                    for o in observed.factors.iter().filter(|o| o.from == task && o.samples >= MIN_FACTOR_SAMPLES) {
                        if let Some(f) = o.factor {
                            factors.insert(o.to.clone(), f);
                        }
                    }
                    VariantSpec { name: v.name.clone(), accuracy: v.accuracy.unwrap_or(1.0), factors }
                })
                .collect(),
        })
        .collect();
    let (segments, missing): (Vec<SegmentKind>, Vec<SegmentKind>) = rows
        .iter()
        .filter(|r| model_tasks.iter().any(|&(_, slot)| slot == r.slot))
        .filter_map(|r| SegmentKind::parse(&r.segment).ok())
        .partition(|kind| capacity.offers(kind));
    let mut segments: Vec<String> = segments.iter().map(SegmentKind::name).collect();
    segments.sort();
    segments.dedup();
    if segments.is_empty() {
        let mut measured = missing;
        measured.sort_by_key(SegmentKind::name);
        measured.dedup();
        let mig = measured.iter().any(|kind| matches!(kind, SegmentKind::Mig { .. }));
        let gpu_only = measured.iter().all(|kind| !matches!(kind, SegmentKind::Cpu { .. }));
        // Each slot with the segments it is measured on: `slot `detect` on mig:2g.20gb:1, mps:50`.
        let names = model_tasks
            .iter()
            .map(|&(_, slot)| {
                let mut kinds: Vec<String> = rows
                    .iter()
                    .filter(|r| r.slot == slot)
                    .filter_map(|r| SegmentKind::parse(&r.segment).ok())
                    .map(|kind| kind.name())
                    .collect();
                kinds.sort();
                kinds.dedup();
                let kinds = if kinds.is_empty() { "no segment".to_string() } else { kinds.join(", ") };
                format!("slot `{slot}` on {kinds}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        let hint = if measured.is_empty() {
            "profile one with `jig profile --segment`".to_string()
        } else if gpu_only && capacity.gpus().next().is_none() {
            format!(
                "it measures {names}; the gateway has no GPU (none on this machine, or none given to `jig up --gpus`)"
            )
        } else if mig {
            let create = unknown_mig_gpu(capacity).unwrap_or_else(|| {
                "create them with nvidia-mig-parted (`jig plan BUNDLE --mig-config FILE` writes a layout)".into()
            });
            format!("it measures {names}; MIG instances must exist before they serve: {create}")
        } else {
            format!("it measures {names}; give the gateway those devices (`jig up --cores`, `--gpus`) or free them")
        };
        return Err(PlanningError::NoSegments { free: capacity.to_string(), measured, hint });
    }
    let demand = if demand_windows.is_empty() { vec![m.demand.rps] } else { demand_windows.to_vec() };
    let cores = capacity.cores();
    let gpu_slices = capacity.gpu_slices();
    let planner = match &m.planner {
        Some(name) => {
            name.parse().map_err(|e: String| PlanError::Input(format!("app `{}`, jig.toml `planner`: {e}", m.name)))?
        }
        None => Default::default(),
    };
    let spec = PlanSpec {
        app: AppSpec {
            name: m.name.clone(),
            slo_latency_ms: slo.latency_ms as f64,
            slo_accuracy: slo.accuracy.unwrap_or(0.9),
            tasks,
            edges: model_edges(bundle),
            paths: None,
            planner,
            classes: m
                .classes
                .iter()
                .map(|c| ClassSpec {
                    name: c.name.clone(),
                    slo_latency_ms: c.latency_ms as f64,
                    slo_accuracy: c.accuracy,
                    share: c.share,
                })
                .collect(),
            staleness_ms: None,
        },
        segments: segments.into_iter().map(|name| SegmentSpec { name, slices: None }).collect(),
        resources: Resources {
            slices: cores + gpu_slices,
            cores_per_host: Some(capacity.cores_per_machine().max(1)),
            cpu_cores: Some(cores),
            gpu_slices: Some(gpu_slices),
            mig_instances: capacity.mig_instances(),
        },
        demand: DemandSpec { windows: demand, slack: None },
        objective: Objective::default(),
        ipa: ipa_spec(m.ipa.as_ref().cloned().unwrap_or_default()),
        compass: Default::default(),
        batch_sizes: None,
    };
    let mut source = profiles.display().to_string();
    if !refined.is_empty() {
        source += &format!(", {} refined by observed latencies", refined.len());
    }
    if unplanned_cpu_ms > 0.0 {
        source += &format!(", {unplanned_cpu_ms:.1} ms of CPU a request outside the instances ({unplanned_from})");
    }
    let mut problem = Problem::new(&spec, &rows, &source)?;
    problem.unplanned_cpu_ms = unplanned_cpu_ms;
    if planner == Strategy::Gpulet {
        problem.interference = gpulet_interference(bundle, &model_tasks)?.map(std::sync::Arc::new);
        if problem.interference.is_some() {
            problem.profile_source += "; interference fitted to util.csv and pairs.csv";
        }
    }
    Ok((problem, Refinements { latencies: refined, glue }))
}

/// gpu-lets' interference between the model tasks' slots, fitted to the bundle's `util.csv` (`jig profile
/// --counters`) and `pairs.csv` (`jig profile --pairs`); `None` when it has neither.
fn gpulet_interference(
    bundle: &Bundle,
    model_tasks: &[(&str, &str)],
) -> Result<Option<MeasuredInterference>, PlanningError> {
    let (util, pairs) = (bundle.dir.join("util.csv"), bundle.dir.join("pairs.csv"));
    match (util.is_file(), pairs.is_file()) {
        (false, false) => Ok(None),
        (true, true) => {
            let slots: Vec<&str> = model_tasks.iter().map(|&(_, slot)| slot).collect();
            Ok(Some(MeasuredInterference::read(&util, &pairs, &slots)?))
        }
        (has_util, _) => Err(PlanError::Input(format!(
            "app `{}`: planner `gpulet` fits interference to util.csv and pairs.csv together, and the bundle has only \
             {}; measure the other with `jig profile BUNDLE {}`, or remove it to plan without interference",
            bundle.manifest.name,
            if has_util { "util.csv" } else { "pairs.csv" },
            if has_util { "--pairs --segment mps:0:50" } else { "--counters" },
        ))
        .into()),
    }
}

/// IPA's settings from a bundle's `[ipa]`, each absent key at the planner's default.
fn ipa_spec(settings: IpaSettings) -> IpaSpec {
    let default = IpaSpec::default();
    IpaSpec {
        alpha: settings.alpha.unwrap_or(default.alpha),
        beta: settings.beta.unwrap_or(default.beta),
        delta: settings.delta.unwrap_or(default.delta),
        threshold_rps: settings.threshold_rps.unwrap_or(default.threshold_rps),
        variants: match settings.variants.as_deref() {
            Some("lightest") => IpaVariants::Lightest,
            Some("heaviest") => IpaVariants::Heaviest,
            _ => IpaVariants::Switch,
        },
        replicas: settings.replicas.unwrap_or(default.replicas),
    }
}

/// What a plan's profile rows were refined with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Refinements {
    /// Observed batch latencies ([`refine`]).
    pub latencies: Vec<ObservedLatency>,
    /// Observed glue times, of tasks that ran [`MIN_FACTOR_SAMPLES`] times: a pooled pipeline's stages count
    /// them.
    pub glue: Vec<ObservedGlue>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::plan_for_deploy;
    use crate::deployment::test_support::bundle;

    #[test]
    fn a_bundle_may_ask_for_ipa_and_a_planner_jig_lacks_is_named() {
        let dir = tempfile::tempdir().unwrap();
        // Batches of 4 take 250 ms: beyond JigsawServe's 2·L within the 400 ms SLO, but within IPA's L plus the
        // wait for a full batch at 31.5 req/s (95 ms).
        bundle(dir.path(), &[("cpu:1", 1, 50.0, 10.0), ("cpu:1", 4, 250.0, 30.0)]);
        let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
        let batches_with = |planner: &str, ipa: &str| {
            let text = format!("planner = \"{planner}\"\n{manifest}\n{ipa}");
            std::fs::write(dir.path().join("jig.toml"), text).unwrap();
            let bundle = Bundle::open(dir.path()).unwrap();
            plan_for_deploy(&bundle, &[], &Capacity::cpu_only(8), &Observations::default())
                .map(|d| (d.source.clone(), d.instances.iter().map(|i| (i.max_batch, i.count)).collect::<Vec<_>>()))
        };
        let batches = |planner: &str| batches_with(planner, "");
        let (source, ipa) = batches("ipa").unwrap();
        assert!(source.contains("by ipa"), "{source}");
        assert_eq!(ipa, [(4, 2)], "two replicas of batch 4 serve 31.5 req/s on two cores");
        let (source, jigsaw) = batches("jigsaw").unwrap();
        assert!(source.contains("by jigsaw"), "{source}");
        assert!(jigsaw.iter().all(|&(b, _)| b == 1), "{jigsaw:?}");
        // `[ipa]` reaches the planner: RIM's fixed replicas.
        let (_, rim) = batches_with("ipa", "[ipa]\nreplicas = 3\n").unwrap();
        assert_eq!(rim.iter().map(|&(_, n)| n).sum::<u32>(), 3, "{rim:?}");
        // The manifest refuses a planner jig lacks, and Compass without query classes; each it takes is a
        // strategy.
        assert!(jig_manifest::PLANNERS.iter().all(|p| p.parse::<jig_planner::Strategy>().is_ok()));
        for (planner, says) in [("simple", "jig's planners are jigsaw, ipa, compass"), ("compass", "declare them")] {
            std::fs::write(dir.path().join("jig.toml"), format!("planner = \"{planner}\"\n{manifest}")).unwrap();
            let refused = Bundle::open(dir.path()).unwrap_err().to_string();
            assert!(refused.contains("jig.toml") && refused.contains(says), "{refused}");
        }
    }
}
