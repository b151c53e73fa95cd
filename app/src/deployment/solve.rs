//! Solving the problem and turning the plan into a [`Deployment`]: each planned instance placed on cores, a
//! GPU share or a MIG instance of its own, the plan's query-class routes and pooled pipelines, and the entry
//! rate it serves at most. When nothing serves the whole demand, the plan serves the most the machine can.

use std::collections::HashMap;
use std::path::Path;

use jig_api::{
    ClassRoute, ClassRoutes, Deployment, InstancePlace, PipelinePool, PlannedInstances, PooledPipeline, RouteStep,
};
use jig_manifest::Bundle;
use jig_planner::plan::{PlanEntry, TaskPlan};
use jig_planner::solution::Assignment;
use jig_planner::spec::SegmentKind;
use jig_planner::{Features, PlanError, Problem, SolveOptions};

use super::capacity::{Capacity, take_places};
use super::deploy::fallback;
use super::error::PlanningError;
use super::graph::model_tasks;
use super::mig::{mig_layout_hint, mig_shortfall};
use super::observations::{MIN_FACTOR_SAMPLES, MIN_LATENCY_SAMPLES, Observations, planned_factors};
use super::problem::problem;

/// The planner's time limit when deploying: the best plan found by then is used.
const PLAN_TIME_LIMIT_S: f64 = 10.0;

/// Deploys and re-plans stop within 1% of the best objective, as `jig simulate`'s re-plans do: proving the last
/// 1% takes most of a large solve (traffic analysis on 840 slices: 0.03 s against the 30 s time limit, median
/// warm re-plan, `cargo bench -p jig-sim --bench solve`), while 1% of α·A − β·S is worth a tenth of a slice
/// on 28 slices and a few of 840.
const PLAN_GAP: f64 = 0.01;

/// How deploys and re-plans solve: within [`PLAN_TIME_LIMIT_S`] and [`PLAN_GAP`].
pub(super) fn plan_options() -> SolveOptions {
    SolveOptions { time_limit_s: PLAN_TIME_LIMIT_S, mip_rel_gap: PLAN_GAP, ..SolveOptions::default() }
}

/// [`plan_with_profiles`](super::deploy::plan_with_profiles) within `capacity`, which `pinned` (default
/// instances of slots no task names) are served beside.
pub(super) fn plan_within(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
    pinned: Vec<PlannedInstances>,
) -> Result<Deployment, PlanningError> {
    let (problem, refined) = problem(bundle, profiles, demand_windows, capacity, observed)?;
    let model_tasks = model_tasks(bundle);
    let options = plan_options();
    let previous = observed.current.as_ref().map(|d| assignments(&problem, &model_tasks, d)).unwrap_or_default();
    // When nothing serves the demand, serve the most the machine can, as the paper's baselines (§5) and
    // `jig simulate` do, and say so.
    let (plan, short) = match jig_planner::plan_from(&problem, Features::ALL, &options, &previous) {
        Ok(plan) => (plan, None),
        Err(e @ (PlanError::Infeasible(_) | PlanError::TimeLimit(_))) => {
            let max = jig_planner::max_demand::max_demand(&problem, Features::ALL, 0.01, PLAN_TIME_LIMIT_S)?;
            if max.demand_rps <= 0.0 {
                return Err(e.into());
            }
            let at_max = problem.clone().with_demand(max.demand_rps, problem.slices);
            let plan = jig_planner::plan_from(&at_max, Features::ALL, &options, &previous)?;
            (plan, Some((problem.demand_rps, e)))
        }
        Err(e) => return Err(e.into()),
    };

    let slot_of: HashMap<&str, &str> = model_tasks.iter().copied().collect();
    let mut free = capacity.clone();
    let mut entries = Vec::new();
    for task in &plan.tasks {
        for e in &task.entries {
            entries.push((task, e, SegmentKind::parse(&e.segment).map_err(PlanError::from)?));
        }
    }
    // gpu-lets planned with interference: each split GPU's gpu-lets go onto one GPU, beside the neighbours whose
    // slowdown the plan counted on.
    let mut together: HashMap<(&str, &str, &str, u32), Vec<InstancePlace>> = HashMap::new();
    for on_gpu in &plan.colocated {
        let kinds = on_gpu.iter().map(|s| SegmentKind::parse(&s.segment)).collect::<Result<Vec<_>, _>>();
        let places = free.take_together(&kinds.map_err(PlanError::from)?).ok_or_else(|| PlanningError::DoesNotFit {
            segment: on_gpu.iter().map(|s| s.segment.as_str()).collect::<Vec<_>>().join(" + "),
            needed: on_gpu.len() as u32,
            placed: 0,
            hint: "; gpu-lets planned these shares beside each other: they need one GPU with room for all of them"
                .into(),
        })?;
        for (s, place) in on_gpu.iter().zip(places) {
            together.entry((&s.task, &s.variant, &s.segment, s.batch)).or_default().push(place);
        }
    }
    fn key<'a>(task: &'a TaskPlan, e: &'a PlanEntry) -> (&'a str, &'a str, &'a str, u32) {
        (&task.task, &e.variant, &e.segment, e.batch)
    }
    let wanted: Vec<(SegmentKind, u32)> = entries
        .iter()
        .map(|&(task, e, kind)| {
            (kind, e.instances.saturating_sub(together.get(&key(task, e)).map_or(0, Vec::len) as u32))
        })
        .collect();
    let taken = take_places(&mut free, &wanted);
    let mut instances = Vec::new();
    for ((task, e, kind), taken) in entries.into_iter().zip(taken) {
        let mut places = together.remove(&key(task, e)).unwrap_or_default();
        places.extend(taken);
        if places.len() < e.instances as usize {
            let hint = match kind {
                SegmentKind::Mig { .. } => mig_layout_hint(&bundle.manifest.name, &plan, capacity),
                _ => String::new(),
            };
            return Err(PlanningError::DoesNotFit {
                segment: e.segment.clone(),
                needed: e.instances,
                placed: places.len() as u32,
                hint,
            });
        }
        instances.push(PlannedInstances {
            slot: slot_of[task.task.as_str()].to_string(),
            variant: e.variant.clone(),
            segment: e.segment.clone(),
            max_batch: e.batch,
            count: e.instances,
            rate_rps: e.rate_rps / e.instances.max(1) as f64,
            latency_ms: e.latency_ms,
            wait_ms: task.policy.wait_ms,
            drop_budget_ms: task.policy.drop_budget_ms,
            stale_ms: task.policy.stale_ms,
            places,
        });
    }
    // Slots no planned instance serves are served as by default: no task names them (on the core `pinned` holds
    // for each, where there was one), or no demand reaches their task (an observed factor of 0, an idle app),
    // and glue may still call them.
    let served: Vec<String> = instances.iter().map(|i: &PlannedInstances| i.slot.clone()).collect();
    let rest = fallback(bundle, &free, "");
    let mut defaults: Vec<PlannedInstances> = (rest.instances.into_iter().filter(|i| !served.contains(&i.slot)))
        .map(|i| match pinned.iter().find(|p| p.slot == i.slot) {
            Some(p) => p.clone(),
            None => i,
        })
        .collect();
    let planned_rps = capacity_rps(&plan, capacity.cores(), problem.unplanned_cpu_ms);
    size_defaults(&mut defaults, planned_rps, capacity.cores(), observed, problem.unplanned_cpu_ms);
    default_drop_budgets(&mut defaults, observed);
    let serves_rps = planned_rps.min(defaults_rps(&defaults, observed));
    instances.extend(defaults);
    Ok(Deployment {
        source: match short {
            None => format!(
                "planned from profiles.csv by {} ({}, {:.2} s)",
                plan.planner, plan.solve.status, plan.solve.seconds
            ),
            Some((wanted, why)) => format!(
                "planned from profiles.csv by {} for {:.1} req/s, the most this machine serves, short of the \
                 {wanted:.1} req/s predicted ({why}){}",
                plan.planner,
                plan.demand_rps,
                mig_shortfall(bundle, profiles, demand_windows, capacity, observed).unwrap_or_default()
            ),
        },
        demand_rps: Some(plan.demand_rps),
        accuracy: Some(plan.accuracy),
        capacity_rps: Some(serves_rps),
        factors: planned_factors(bundle, &observed.factors),
        refined: refined.latencies,
        glue: refined.glue,
        unplanned_cpu_ms: (problem.unplanned_cpu_ms > 0.0).then_some(problem.unplanned_cpu_ms),
        classes: plan
            .classes
            .iter()
            .map(|c| ClassRoutes {
                class: c.class.clone(),
                latency_ms: c.slo_latency_ms,
                demand_rps: c.demand_rps,
                served_rps: c.served_rps,
                routes: c
                    .routes
                    .iter()
                    .map(|r| ClassRoute {
                        rate_rps: r.rate_rps,
                        steps: r
                            .steps
                            .iter()
                            .map(|s| RouteStep {
                                slot: slot_of[s.task.as_str()].to_string(),
                                variant: s.variant.clone(),
                                segment: s.segment.clone(),
                                max_batch: s.batch,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
        pipelines: plan
            .pipelines
            .iter()
            .map(|p| PooledPipeline {
                rate_rps: p.rate_rps,
                batch: p.batch,
                pools: p
                    .pools
                    .iter()
                    .map(|q| PipelinePool {
                        slot: slot_of[q.task.as_str()].to_string(),
                        variant: q.variant.clone(),
                        segment: q.segment.clone(),
                        max_batch: p.batch,
                        members: q.members,
                    })
                    .collect(),
            })
            .collect(),
        instances,
    })
}

/// `deployment`'s planned instances as assignments of `problem` (whose tasks are `model_tasks`), leaving out
/// any it does not know (a variant or segment since removed, a default instance).
fn assignments(problem: &Problem, model_tasks: &[(&str, &str)], deployment: &Deployment) -> Vec<Assignment> {
    deployment
        .instances
        .iter()
        .filter_map(|i| {
            let (task_name, _) = model_tasks.iter().find(|(_, slot)| *slot == i.slot)?;
            let task = problem.tasks.iter().position(|t| t.name == *task_name)?;
            let variant = problem.tasks[task].variants.iter().position(|v| v.name == i.variant)?;
            let segment = problem.segments.iter().position(|s| s.name == i.segment)?;
            Some(Assignment {
                task,
                variant,
                segment,
                batch: i.max_batch,
                instances: i.count,
                rate_rps: i.rate_rps * f64::from(i.count),
            })
        })
        .collect()
}

/// The entry rate the plan serves at most: the planned demand scaled by the task with the least head-room (its
/// instances' profiled throughput over its planned demand), and no more than `cores` keep up with: each request
/// keeps them busy for its rows on `cpu:N` instances (N/H each) and the CPU it costs outside them, and shared
/// cores are busy [`SHARED_CORES_BUSY`](jig_planner::SHARED_CORES_BUSY) of the time at most.
fn capacity_rps(plan: &jig_planner::Plan, cores: u32, unplanned_cpu_ms: f64) -> f64 {
    let headroom = plan
        .tasks
        .iter()
        .filter(|t| t.demand_rps > 0.0)
        .map(|t| t.entries.iter().map(|e| e.throughput_rps * f64::from(e.instances)).sum::<f64>() / t.demand_rps)
        .fold(f64::INFINITY, f64::min);
    let instances = if headroom.is_finite() { plan.demand_rps * headroom } else { 0.0 };
    if plan.demand_rps <= 0.0 {
        return instances;
    }
    let on_cores: f64 = (plan.tasks.iter().flat_map(|t| &t.entries))
        .filter(|e| e.throughput_rps > 0.0)
        .filter_map(|e| match SegmentKind::parse(&e.segment) {
            Ok(SegmentKind::Cpu { cores }) => Some(e.rate_rps / plan.demand_rps * f64::from(cores) / e.throughput_rps),
            _ => None,
        })
        .sum();
    let busy_s = on_cores + unplanned_cpu_ms / 1000.0;
    if unplanned_cpu_ms > 0.0 && cores > 0 {
        instances.min(jig_planner::SHARED_CORES_BUSY * f64::from(cores) / busy_s)
    } else {
        instances
    }
}

/// The share of its time a default instance is sized to be busy ([`size_defaults`]). One that serves its requests
/// one after another queues them fast beyond it, the more so as the load stretches its batches: the sign reader's
/// voice on 2 cores, at 13 req/s (about 0.9 busy), queued to a p50 of 1.3 s where two instances answered in
/// 0.27 s (2026-11-28, BENCHMARKS.md).
const DEFAULT_BUSY: f64 = 0.8;

/// The entry rate the default instances (of slots no plan sizes, such as the sign reader's voice on two cores)
/// keep up with, once observed: each slot's `count` instances serve `count` times [`default_rate_rps`].
/// Unbounded until they are observed (their CPU time counts in [`capacity_rps`] either way).
fn defaults_rps(defaults: &[PlannedInstances], observed: &Observations) -> f64 {
    (defaults.iter())
        .filter_map(|d| Some(f64::from(d.count.max(1)) * default_rate_rps(d, observed)?))
        .fold(f64::INFINITY, f64::min)
}

/// The entry rate one of `default`'s instances keeps up with, once observed over [`MIN_FACTOR_SAMPLES`] requests:
/// it runs one batch after another, so it serves as many requests a second as a request costs its group of
/// batch time ([`ObservedLatency::busy_ms_per_request`](jig_api::ObservedLatency), batches of every size).
fn default_rate_rps(default: &PlannedInstances, observed: &Observations) -> Option<f64> {
    let key = (&default.slot, &default.variant, &default.segment);
    let seen = observed.latencies.iter().find(|o| (&o.slot, &o.variant, &o.segment) == key)?;
    if seen.requests < MIN_FACTOR_SAMPLES {
        return None;
    }
    Some(1000.0 / seen.busy_ms_per_request.filter(|&ms| ms > 0.0)?)
}

/// Whether some default instance of `deployment` that runs unpinned was sized without its observed rate (the
/// requests a second it serves, once it served [`MIN_FACTOR_SAMPLES`]): one, until then. The controller re-plans
/// once `observed` has them all, rather than wait for a demand window with a serial queue that may cap the app
/// (the sign reader's voice, two of which the first observed rate sizes, queued lines for 12 s at twice what two
/// cores serve).
pub fn defaults_unobserved(deployment: &Deployment, observed: &Observations) -> bool {
    let unplanned = |i: &&PlannedInstances| i.latency_ms <= 0.0 && i.places.is_empty();
    deployment.instances.iter().filter(unplanned).any(|d| default_rate_rps(d, observed).is_none())
}

/// Each default instance drops a request once its own median batch, as observed, no longer fits before the
/// deadline: a line spoken too late for its request holds the voice from the next ones.
fn default_drop_budgets(defaults: &mut [PlannedInstances], observed: &Observations) {
    for d in defaults {
        let key = (&d.slot, &d.variant, &d.segment);
        let seen = observed.latencies.iter().find(|o| (&o.slot, &o.variant, &o.segment) == key);
        if let Some(seen) = seen.filter(|o| o.batches >= MIN_LATENCY_SAMPLES && o.p50_ms > 0.0) {
            d.drop_budget_ms = seen.p50_ms;
        }
    }
}

/// A default instance that runs unpinned is one of as many as keep up with `planned_rps`, what the rest of the
/// plan serves, once observed ([`default_rate_rps`]), each [`DEFAULT_BUSY`] of the time at most: one per core of
/// the `cores` at most, as a pool of ONNX Runtime sessions would be, where one of them, speaking one line after
/// another, would cap the app (the sign reader's voice on two cores). Fewer than the running deployment has only
/// once 25% more than `planned_rps` would still be served, so that the count does not flap between re-plans as
/// contention moves the mean. One pinned to a core of its own stays one.
///
/// Until its rate is observed, an instance is taken to serve a core's worth of `unplanned_cpu_ms`, the CPU a
/// request costs outside the planned instances, which counts its own: as many start as that needs, rather than
/// one that caps the app until 20 requests are answered and another has loaded (the sign reader's first 10 s at
/// twice what two cores serve). The first observed re-plan sizes them again, and takes away those not needed.
fn size_defaults(
    defaults: &mut [PlannedInstances],
    planned_rps: f64,
    cores: u32,
    observed: &Observations,
    unplanned_cpu_ms: f64,
) {
    /// What fewer instances must serve beyond `planned_rps` before a re-plan takes one away.
    const SHRINK_MARGIN: f64 = 1.25;
    if !planned_rps.is_finite() || planned_rps <= 0.0 {
        return;
    }
    let most = cores.max(1);
    let declared = (unplanned_cpu_ms > 0.0).then(|| 1000.0 / unplanned_cpu_ms);
    for d in defaults.iter_mut().filter(|d| d.places.is_empty()) {
        let Some(each) = default_rate_rps(d, observed).or(declared) else { continue };
        let needed = |rps: f64| ((rps / (each * DEFAULT_BUSY)).ceil() as u32).clamp(1, most);
        let running = (observed.current.iter().flat_map(|c| &c.instances))
            .find(|i| (&i.slot, &i.variant, &i.segment) == (&d.slot, &d.variant, &d.segment) && i.places.is_empty())
            .map_or(1, |i| i.count);
        d.count = needed(planned_rps).max(running.min(needed(planned_rps * SHRINK_MARGIN)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::test_support::{bundle, glue_bundle, machine, places};
    use crate::deployment::{ObservedFactor, plan};
    use jig_manifest::Bundle;
    use jig_model_host::device::Devices;

    #[test]
    fn gpu_rows_are_planned_and_placed_on_the_gpu_that_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0), ("mps:0:50", 4, 40.0, 100.0)]);
        let d = plan(&bundle, &[], &Capacity::of(&machine(), 8, None), &Observations::default());
        assert!(d.source.starts_with("planned"), "{}", d.source);
        let placed = places(&d);
        assert_eq!(placed.len(), 1, "{d:?}");
        assert_eq!(placed[0].0, "mps:50");
        assert_eq!(placed[0].1.gpu, Some(1), "GPU 0 is in MIG mode");
        assert_eq!(placed[0].1.segment(&placed[0].0), "mps:1:50");
    }

    /// A share is a limit, not what a process uses: where four processes on the whole GPU together serve 3.3×
    /// one (each a little slower beside the others), the plan serves the demand with them on the one GPU it
    /// has, where one process a GPU could not.
    #[test]
    fn a_share_served_by_several_processes_is_planned_by_what_they_serve_together() {
        let dir = tempfile::tempdir().unwrap();
        let rows = [("mps:0:100", 4, 40.0, 100.0), ("mps:0:100x4", 4, 48.0, 333.0)];
        let bundle = bundle(dir.path(), &rows);
        let d = plan(&bundle, &[300.0], &Capacity::of(&machine(), 8, None), &Observations::default());
        assert!(d.source.starts_with("planned"), "{}", d.source);
        let placed = places(&d);
        assert_eq!(placed.len(), 1, "{d:?}");
        assert_eq!(placed[0].1.segment(&placed[0].0), "mps:1:100x4", "{d:?}");
        assert!(d.capacity_rps.unwrap() >= 300.0, "{d:?}");
        // The GPU is then wholly held: a second app has no share left on it.
        let left = Capacity::of(&machine(), 8, None).without(&d);
        assert!(!left.offers(&jig_planner::spec::SegmentKind::parse("mps:0:10").unwrap()), "{left}");
    }

    #[test]
    fn a_gpulet_app_is_planned_on_a_share_sized_by_gpu_lets() {
        let dir = tempfile::tempdir().unwrap();
        let rows = [("cpu:2", 1, 50.0, 10.0), ("mps:0:20", 4, 40.0, 100.0), ("mps:0:80", 4, 20.0, 200.0)];
        let bundle = bundle(dir.path(), &rows);
        let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
        std::fs::write(dir.path().join("jig.toml"), format!("planner = \"gpulet\"\n{manifest}")).unwrap();
        let bundle = Bundle::open(&bundle.dir).unwrap();
        let d = plan(&bundle, &[], &Capacity::of(&machine(), 8, None), &Observations::default());
        assert!(d.source.starts_with("planned from profiles.csv by gpulet"), "{}", d.source);
        // 31.5 req/s: the smallest share that serves them, on the whole GPU (GPU 0 is in MIG mode).
        let placed = places(&d);
        assert_eq!(placed.len(), 1, "{d:?}");
        assert_eq!(placed[0].1.segment(&placed[0].0), "mps:1:20");
        // On cores alone, gpu-lets has nothing to plan: the deploy says why and serves by default.
        let d = plan(&bundle, &[], &Capacity::cpu_only(8), &Observations::default());
        assert!(d.source.contains("planner `gpulet` plans MPS shares"), "{}", d.source);
    }

    #[test]
    fn a_gpulet_app_with_measured_interference_keeps_each_split_gpu_together() {
        // `detect → read`, each half a GPU's worth at 80 req/s: gpu-lets splits one GPU between them.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("jig.toml"),
            "name = \"signs\"\nplanner = \"gpulet\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 80\n\
             [[tasks]]\nname = \"detect\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
             [[tasks]]\nname = \"read\"\nglue = \"g.wasm\"\nslot = \"rec\"\n\
             [[edges]]\nfrom = \"detect.out\"\nto = \"read\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"rec\"\nname = \"rec\"\nmodel = \"m.onnx\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
        for slot in ["det", "rec"] {
            for (percent, ms) in [(25, 80.0), (50, 40.0), (100, 36.0)] {
                csv += &format!("{slot},{slot},mps:0:{percent},4,{ms},{ms},{},test\n", 4000.0 / ms);
            }
        }
        std::fs::write(dir.path().join("profiles.csv"), csv).unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        // Two GPUs; another app holds 40% of GPU 0.
        let two = Devices::from_nvidia_smi(
            Vec::new(),
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Disabled\n1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, Disabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n",
        );
        let mut capacity = Capacity::of(&two, 2, None);
        capacity.machines[0].gpus[0].mps_percent = 60;
        let gpus = |d: &Deployment| -> Vec<Option<u32>> {
            places(d).iter().filter(|(segment, _)| segment.starts_with("mps:")).map(|(_, p)| p.gpu).collect()
        };
        // Without measured interference, shares go by size: the second half lands in GPU 0's 60%.
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        assert!(d.source.starts_with("planned from profiles.csv by gpulet"), "{}", d.source);
        assert_eq!(gpus(&d), [Some(0), Some(1)], "{d:?}");
        // The tables `jig profile --counters` and `--pairs` write (the slots and two other models measured with
        // them): planned with each other's slowdown, the split GPU is placed whole, on GPU 1.
        let util = "model,batch,l2,dram\ndet,8,0.2,0.2\nrec,8,0.1,0.3\na,8,0.3,0.1\nb,8,0.4,0.4\n";
        std::fs::write(dir.path().join("util.csv"), util).unwrap();
        let mut pairs = String::from("model,neighbour,segment,batch,solo_ms,corun_ms,slowdown\n");
        for (model, neighbour, slowdown) in [
            ("det", "rec", 0.1),
            ("rec", "det", 0.08),
            ("a", "b", 0.05),
            ("b", "det", 0.15),
            ("rec", "a", 0.2),
            ("a", "b", 0.12),
        ] {
            pairs += &format!("{model},{neighbour},mps:0:50,8,10,11,{slowdown}\n");
        }
        std::fs::write(dir.path().join("pairs.csv"), pairs).unwrap();
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        assert!(d.source.starts_with("planned from profiles.csv by gpulet"), "{}", d.source);
        assert_eq!(gpus(&d), [Some(1), Some(1)], "{d:?}");
        // With one table of the two, the deploy says what is missing.
        std::fs::remove_file(dir.path().join("pairs.csv")).unwrap();
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        assert!(d.source.contains("the bundle has only util.csv") && d.source.contains("--pairs"), "{}", d.source);
    }

    #[test]
    fn without_a_gpu_the_same_bundle_plans_on_cores() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0), ("mps:0:50", 4, 40.0, 100.0)]);
        let d = plan(&bundle, &[], &Capacity::cpu_only(8), &Observations::default());
        let placed = places(&d);
        assert_eq!(placed.len(), 4, "31.5 req/s at 10 req/s an instance: {d:?}");
        assert_eq!(d.capacity_rps, Some(40.0), "four instances of 10 req/s");
        let mut cores: Vec<u32> = placed.iter().flat_map(|(_, p)| p.cores.clone()).collect();
        cores.sort();
        assert_eq!(cores, (0..8).collect::<Vec<_>>(), "each instance has cores of its own");
    }

    #[test]
    fn a_demand_beyond_the_machine_is_planned_at_the_most_it_serves_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0)]);
        // 4 cores hold two instances of 10 req/s; 31.5 req/s (30 and the 5% slack) is beyond them.
        let d = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert_eq!(d.instances.iter().map(|i| i.count).sum::<u32>(), 2, "{d:?}");
        let demand = d.demand_rps.expect("a plan, not the default");
        assert!((19.0..=20.0).contains(&demand), "planned for {demand}");
        assert!(d.source.contains("the most this machine serves") && d.source.contains("31.5"), "{}", d.source);
    }

    #[test]
    fn the_plan_keeps_the_instances_and_the_cpu_outside_them_within_the_cores() {
        let dir = tempfile::tempdir().unwrap();
        let deployed =
            |cpu_ms| plan(&glue_bundle(dir.path(), cpu_ms), &[], &Capacity::cpu_only(4), &Default::default());
        // Nothing outside: two instances of 20 req/s serve the 30 req/s, and could serve 40.
        let d = deployed((0.0, 0.0));
        assert_eq!((d.capacity_rps, d.unplanned_cpu_ms), (Some(40.0), None), "{}", d.source);
        // 100 ms outside, 50 ms on an instance: 0.15 s of a core a request, and 4 cores, busy 87% of the time
        // at most, serve 23.2 req/s.
        let d = deployed((40.0, 40.0));
        assert_eq!(d.unplanned_cpu_ms, Some(100.0));
        let most = jig_planner::SHARED_CORES_BUSY * 4.0 / 0.15;
        let capacity = d.capacity_rps.unwrap();
        assert!((capacity - most).abs() < 0.5, "serves up to {capacity}, not {most}: {}", d.source);
        assert!(d.source.contains("the most this machine serves"), "{}", d.source);
        assert!(d.demand_rps.unwrap() <= most + 0.5, "planned for {:?}", d.demand_rps);
    }

    #[test]
    fn a_slot_no_demand_reaches_keeps_an_instance_for_the_glue_that_may_still_call_it() {
        // Found in a re-plan: recognitions that found no text gave rec → speak an observed factor of 0, the plan
        // gave speak no instance, and the swapped-in copy answered "no model slot voice" to the next line read.
        let dir = tempfile::tempdir().unwrap();
        let manifest = "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 30\n\
            [[tasks]]\nname = \"det\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
            [[tasks]]\nname = \"rec\"\nglue = \"g.wasm\"\nslot = \"rec\"\n\
            [[edges]]\nfrom = \"det.boxes\"\nto = \"rec\"\n\
            [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
            [[variants]]\nslot = \"rec\"\nname = \"rec\"\nmodel = \"m.onnx\"\n";
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        std::fs::write(
            dir.path().join("profiles.csv"),
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
             det,det,cpu:1,1,20,20,50,test\nrec,rec,cpu:1,1,20,20,50,test\n",
        )
        .unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let none_reach = ObservedFactor { from: "det".into(), to: "rec".into(), factor: Some(0.0), samples: 100 };
        let observed = Observations { factors: vec![none_reach], ..Observations::default() };
        let d = plan(&bundle, &[30.0], &Capacity::cpu_only(8), &observed);
        assert!(d.source.starts_with("planned"), "{}", d.source);
        for slot in ["det", "rec"] {
            assert!(d.instances.iter().any(|i| i.slot == slot && i.count > 0), "{slot}: {:?}", d.instances);
        }
        // An idle app (demand 0) likewise keeps every slot served.
        let idle = plan(&bundle, &[0.0], &Capacity::cpu_only(8), &Observations::default());
        for slot in ["det", "rec"] {
            assert!(idle.instances.iter().any(|i| i.slot == slot && i.count > 0), "{slot}: {:?}", idle.instances);
        }
    }
}
