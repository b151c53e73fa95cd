//! How an app's model slots are served: which variants, on which segments, with which batch sizes, how many
//! instances — chosen by the planner from the bundle's profile table and the app's demand.
//!
//! The planner sees the app's graph through its model tasks: every task that names a `slot` in the manifest
//! is a planner task with that slot's variants, and an edge joins two model tasks when glue-only tasks (crop,
//! select) lead from one to the other. Segments are the CPU core sets the profile table measured that fit on
//! this machine, and the slices available are its cores. Without a profile table, or when the planner finds
//! no plan, each slot gets one instance of its most accurate variant, and the deployment says why.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub use jig_api::{Deployment, PlannedInstances};

use jig_planner::placement::Device;
use jig_planner::spec::{AppSpec, DemandSpec, EdgeSpec, Objective, Resources, SegmentSpec, TaskSpec, VariantSpec};
use jig_planner::{Features, PlanError, PlanSpec, Problem, SolveOptions};

use jig_manifest::{Bundle, Variant};

/// The planner's time limit when deploying: the best plan found by then is used.
const PLAN_TIME_LIMIT_S: f64 = 10.0;

/// Why a bundle could not be planned; a deployment then falls back to [`fallback`] and says why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanningError {
    /// The profile table cannot be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The profile table.
        path: PathBuf,
        /// The system's answer.
        source: std::io::Error,
    },
    /// The profile table is malformed.
    #[error("{}: {source}", .path.display())]
    Profiles {
        /// The profile table.
        path: PathBuf,
        /// The line and field at fault.
        source: jig_planner::ParseError,
    },
    /// The manifest states no latency objective.
    #[error("the manifest has no [slo] to plan for; add `slo.latency_ms`")]
    NoSlo,
    /// No task runs a model.
    #[error("no task names a `slot`; give each task that runs a model its slot")]
    NoModelTasks,
    /// The profile table measured no segment this machine offers.
    #[error("profiles.csv measures no CPU segment of at most {cores} cores")]
    NoSegments {
        /// The cores available.
        cores: u32,
    },
    /// The planner found no plan.
    #[error(transparent)]
    Planner(#[from] PlanError),
}

/// Plan `bundle` for `demand_windows` (recent req/s at the entry, oldest first) on `cores` CPU cores; without
/// a profile table, or when the planner finds no plan, each slot's [`fallback`].
pub fn plan(bundle: &Bundle, demand_windows: &[f64], cores: u32) -> Deployment {
    if bundle.manifest.variants.is_empty() {
        return fallback(bundle, cores, "no model slots");
    }
    let Some(profiles) = bundle.profiles_path() else {
        return fallback(bundle, cores, "default: no profiles.csv in the bundle (run `jig profile`)");
    };
    match plan_with_profiles(bundle, &profiles, demand_windows, cores) {
        Ok(deployment) => deployment,
        Err(e) => {
            tracing::warn!(app = %bundle.manifest.name, "planning failed: {e}");
            fallback(bundle, cores, &format!("default: the planner found no plan: {e}"))
        }
    }
}

/// Each slot's most accurate variant (the first declared among equals), one instance on `cores` cores,
/// batching up to 8 requests that arrive while it is busy.
pub fn fallback(bundle: &Bundle, cores: u32, why: &str) -> Deployment {
    let mut best: Vec<&Variant> = Vec::new();
    for v in &bundle.manifest.variants {
        match best.iter_mut().find(|b| b.slot == v.slot) {
            Some(b) if v.accuracy.unwrap_or(0.0) > b.accuracy.unwrap_or(0.0) => *b = v,
            Some(_) => {}
            None => best.push(v),
        }
    }
    Deployment {
        source: why.into(),
        demand_rps: None,
        accuracy: None,
        instances: best
            .into_iter()
            .map(|v| PlannedInstances {
                slot: v.slot.clone(),
                variant: v.name.clone(),
                segment: format!("cpu:{cores}"),
                max_batch: 8,
                count: 1,
                rate_rps: 1.0,
                latency_ms: 0.0,
                cores: Vec::new(),
            })
            .collect(),
    }
}

/// The model tasks of a bundle: (task, slot) for every task that names a slot.
fn model_tasks(bundle: &Bundle) -> Vec<(&str, &str)> {
    bundle.manifest.tasks.iter().filter_map(|t| Some((t.name.as_str(), t.slot.as_deref()?))).collect()
}

/// The planning problem of `bundle` with its profile table, for `demand_windows` on `cores` CPU cores.
pub fn problem(bundle: &Bundle, profiles: &Path, demand_windows: &[f64], cores: u32) -> Result<Problem, PlanningError> {
    let m = &bundle.manifest;
    let text = std::fs::read_to_string(profiles)
        .map_err(|source| PlanningError::Read { path: profiles.to_owned(), source })?;
    let rows = jig_planner::profile::from_csv(&text)
        .map_err(|source| PlanningError::Profiles { path: profiles.to_owned(), source })?;
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
                .map(|v| VariantSpec {
                    name: v.name.clone(),
                    accuracy: v.accuracy.unwrap_or(1.0),
                    factors: v.factors.clone(),
                })
                .collect(),
        })
        .collect();
    let mut segments: Vec<String> = rows
        .iter()
        .filter(|r| model_tasks.iter().any(|&(_, slot)| slot == r.slot))
        .filter(|r| r.segment.strip_prefix("cpu:").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n <= cores))
        .map(|r| r.segment.clone())
        .collect();
    segments.sort();
    segments.dedup();
    if segments.is_empty() {
        return Err(PlanningError::NoSegments { cores });
    }
    let demand = if demand_windows.is_empty() { vec![m.demand.rps] } else { demand_windows.to_vec() };
    let spec = PlanSpec {
        app: AppSpec {
            name: m.name.clone(),
            slo_latency_ms: slo.latency_ms as f64,
            slo_accuracy: slo.accuracy.unwrap_or(0.9),
            tasks,
            edges: model_edges(bundle),
            paths: None,
        },
        segments: segments.into_iter().map(|name| SegmentSpec { name, slices: None }).collect(),
        resources: Resources { slices: cores, cores_per_host: Some(cores) },
        demand: DemandSpec { windows: demand, slack: None },
        objective: Objective::default(),
        batch_sizes: None,
    };
    Ok(Problem::new(&spec, &rows, &profiles.display().to_string())?)
}

fn plan_with_profiles(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    cores: u32,
) -> Result<Deployment, PlanningError> {
    let problem = problem(bundle, profiles, demand_windows, cores)?;
    let model_tasks = model_tasks(bundle);
    let options = SolveOptions { time_limit_s: PLAN_TIME_LIMIT_S, ..SolveOptions::default() };
    let plan = jig_planner::plan(&problem, Features::ALL, &options)?;

    let slot_of: HashMap<&str, &str> = model_tasks.iter().copied().collect();
    let mut instances = Vec::new();
    for task in &plan.tasks {
        for e in &task.entries {
            // The placement labels each instance `task/variant/bBATCH#i`.
            let label = format!("{}/{}/b{}#", task.task, e.variant, e.batch);
            let cores: Vec<Vec<u32>> = plan
                .placement
                .instances
                .iter()
                .filter(|p| p.label.starts_with(&label) && p.segment == e.segment)
                .filter_map(|p| match p.device {
                    Device::Cpu { host: 0, first_core, cores } => Some((first_core..first_core + cores).collect()),
                    _ => None,
                })
                .collect();
            instances.push(PlannedInstances {
                slot: slot_of[task.task.as_str()].to_string(),
                variant: e.variant.clone(),
                segment: e.segment.clone(),
                max_batch: e.batch,
                count: e.instances,
                rate_rps: e.rate_rps / e.instances.max(1) as f64,
                latency_ms: e.latency_ms,
                // Pinned only when every instance was placed.
                cores: if cores.len() == e.instances as usize { cores } else { Vec::new() },
            });
        }
    }
    // Slots no task names are served as by default.
    let planned: Vec<&str> = model_tasks.iter().map(|&(_, slot)| slot).collect();
    let rest = fallback(bundle, cores, "");
    instances.extend(rest.instances.into_iter().filter(|i| !planned.contains(&i.slot.as_str())));
    Ok(Deployment {
        source: format!("planned from profiles.csv ({}, {:.2} s)", plan.solve.status, plan.solve.seconds),
        demand_rps: Some(plan.demand_rps),
        accuracy: Some(plan.accuracy),
        instances,
    })
}

/// Edges between model tasks: `a → b` when a path of glue edges leads from `a` to `b` through tasks without a
/// slot only.
fn model_edges(bundle: &Bundle) -> Vec<EdgeSpec> {
    let m = &bundle.manifest;
    let slotted: HashMap<&str, bool> = m.tasks.iter().map(|t| (t.name.as_str(), t.slot.is_some())).collect();
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in &m.edges {
        if let Some((from, _)) = e.source() {
            next.entry(from).or_default().push(&e.to);
        }
    }
    let mut edges = Vec::new();
    for t in m.tasks.iter().filter(|t| t.slot.is_some()) {
        let mut stack: Vec<&str> = next.get(t.name.as_str()).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        while let Some(task) = stack.pop() {
            if !seen.insert(task) {
                continue;
            }
            if slotted.get(task).copied().unwrap_or(false) {
                edges.push(EdgeSpec { from: t.name.clone(), to: task.into() });
            } else {
                stack.extend(next.get(task).cloned().unwrap_or_default());
            }
        }
    }
    edges
}
