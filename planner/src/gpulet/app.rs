//! gpu-lets as a planner strategy (`planner = "gpulet"`): an app's tasks planned as gpu-lets' models on the
//! GPUs a deployment may use, each gpu-let an instance of its task on an `mps:SIZE` segment.
//!
//! gpu-lets plans independent models, each with a rate and an SLO of its own; an app is a graph with one SLO.
//! The graph is read as models this way:
//! - a task is served by its most accurate variant profiled on `mps:` segments (gpu-lets picks no variants);
//! - its rate is the demand reaching it through those variants' factors;
//! - its SLO is its part of the app's: each path's SLO split among its tasks in proportion to their batch-1
//!   latencies on the largest share profiled, a task taking its smallest part over the paths through it, so that
//!   the SLOs along any path sum to at most the app's. gpu-lets serves a model within its SLO when its batch
//!   takes at most half of it, the 2·L every task is budgeted in JigsawServe's latency model, which checks the
//!   plan;
//! - the GPUs are the whole ones among the GPU slices the plan may use (seven a GPU), and the gpu-let sizes the
//!   shares profiled (a whole GPU split into a profiled size and its complement).
//!
//! Algorithm 1 then runs without temporal sharing (a jig instance holds its segment alone, so a gpu-let serves one
//! task): [`super::elastic_spatial`]. With the tasks' measured interference ([`Problem::interference`]: a bundle's
//! `util.csv` and `pairs.csv`, from `jig profile --counters` and `--pairs`) it plans as `gpulet+int`, each gpu-let
//! slowed by its neighbour's interference, and the plan names the gpu-lets of each split GPU
//! ([`Solved::colocated`]), which a deployment places on one GPU so that the neighbours are those planned for;
//! without it, as `gpulet`, and shares are placed by size (largest first). A profiled
//! batch whose measured throughput H is below b / L(b) is read as taking b / H, so that what a gpu-let is
//! planned to serve, its instance serves.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::PlanError;
use crate::problem::Problem;
use crate::solution::{Assignment, Solved};
use crate::spec::SegmentKind;

use super::{GpuletModel, GpuletProblem, elastic_spatial, no_interference};

/// Plan `problem` with gpu-lets' Algorithm 1 (module docs).
pub(crate) fn solve(problem: &Problem) -> Result<Solved, PlanError> {
    let started = Instant::now();
    let mut gpulets = to_gpulets(problem)?;
    gpulets.problem.interference = problem.interference.as_deref().cloned();
    let (variants, shares) = (&gpulets.variants, &gpulets.shares);
    let planned = match &problem.interference {
        Some(i) => elastic_spatial(&gpulets.problem, &|m, _, neighbour| i.slowdown(m, neighbour)),
        None => elastic_spatial(&gpulets.problem, &no_interference),
    };
    let plan = planned.map_err(|e| match e {
        PlanError::Infeasible(why) => PlanError::Infeasible(format!("app `{}`, planner `gpulet`: {why}", problem.app)),
        other => other,
    })?;
    // One instance per gpu-let, grouped by instance type; and per GPU, the instance types it holds.
    let mut types: BTreeMap<(usize, usize, u32), Assignment> = BTreeMap::new();
    let mut by_gpu: BTreeMap<u32, Vec<(usize, usize, usize, u32)>> = BTreeMap::new();
    for gpulet in &plan.gpulets {
        let segment = shares.iter().find(|&&(_, size)| size == gpulet.size).map(|&(s, _)| s).ok_or_else(|| {
            PlanError::Solver(format!("gpu-lets allocated a {}% share, which the profile lacks", gpulet.size))
        })?;
        for load in &gpulet.loads {
            let a = types.entry((load.model, segment, load.batch)).or_insert(Assignment {
                task: load.model,
                variant: variants[load.model],
                segment,
                batch: load.batch,
                instances: 0,
                rate_rps: 0.0,
            });
            a.instances += 1;
            a.rate_rps += load.rate_rps;
            by_gpu.entry(gpulet.gpu).or_default().push((load.model, variants[load.model], segment, load.batch));
        }
    }
    // Planned beside each other's interference, a split GPU's gpu-lets hold only as placed together.
    let colocated = match problem.interference {
        Some(_) => by_gpu.into_values().filter(|on_gpu| on_gpu.len() > 1).collect(),
        None => Vec::new(),
    };
    Ok(Solved {
        instance_types: gpulets.problem.models.iter().map(|m| m.latency_ms.len()).sum(),
        instance_types_profiled: problem.configs.len(),
        assignments: types.into_values().collect(),
        accuracy_bound: gpulets.accuracy,
        // Algorithm 1 always runs to its end (the plan reports it as a heuristic's).
        optimal: true,
        seconds: started.elapsed().as_secs_f64(),
        gpu_layouts: Vec::new(),
        classes: Vec::new(),
        pipelines: Vec::new(),
        colocated,
    })
}

/// An app's problem as gpu-lets reads it.
pub struct AppGpulets {
    /// One model per task, in task order.
    pub problem: GpuletProblem,
    /// The variant serving each task.
    pub variants: Vec<usize>,
    /// The `mps:` segment types: (index into [`Problem::segments`], percent).
    pub shares: Vec<(usize, u32)>,
    /// A_obj of serving each task by its variant.
    pub accuracy: f64,
}

/// Read `problem` as gpu-lets' models (module docs); an error names what the app lacks.
pub fn to_gpulets(problem: &Problem) -> Result<AppGpulets, PlanError> {
    let app = &problem.app;
    let shares: Vec<(usize, u32)> = problem
        .segments
        .iter()
        .enumerate()
        .filter_map(|(s, seg)| match seg.kind {
            // A gpu-let is one process on its share.
            SegmentKind::Mps { percent, processes: 1 } => Some((s, u32::from(percent))),
            _ => None,
        })
        .collect();
    if shares.is_empty() {
        return Err(PlanError::Input(format!(
            "app `{app}`: planner `gpulet` plans MPS shares of GPUs, one process each, and no such `mps:` segment \
             (`mps:50`, not `mps:50x2`) is profiled and offered; \
             profile the bundle on some (`jig profile BUNDLE --segment mps:0:50 --segment mps:0:100`) on a machine \
             with a GPU"
        )));
    }
    let gpus = problem.gpu_slices.unwrap_or(problem.slices) / 7;
    if gpus == 0 {
        return Err(PlanError::Infeasible(format!(
            "app `{app}`: planner `gpulet` splits whole GPUs, and the plan may use {} GPU slices (a GPU is 7)",
            problem.gpu_slices.unwrap_or(problem.slices)
        )));
    }
    let size_of = |segment: usize| shares.iter().find(|&&(s, _)| s == segment).map(|&(_, size)| size);
    // Each task's variant: the most accurate one profiled on a share, the first on ties.
    let variants = problem
        .tasks
        .iter()
        .enumerate()
        .map(|(t, task)| {
            (0..task.variants.len())
                .filter(|&v| {
                    problem.configs.iter().any(|c| c.task == t && c.variant == v && size_of(c.segment).is_some())
                })
                .max_by(|&a, &b| task.variants[a].accuracy.total_cmp(&task.variants[b].accuracy).then(b.cmp(&a)))
                .ok_or_else(|| {
                    PlanError::Input(format!(
                        "app `{app}`, task `{}`: no variant is profiled on an `mps:` segment, which planner `gpulet` \
                         plans; profile the bundle on one",
                        task.name
                    ))
                })
        })
        .collect::<Result<Vec<usize>, PlanError>>()?;
    let accuracy: f64 = problem
        .paths
        .iter()
        .map(|p| p.weight * p.tasks.iter().map(|&t| problem.tasks[t].normalised_accuracy(variants[t])).product::<f64>())
        .sum();
    if accuracy < problem.slo_accuracy - 1e-6 {
        return Err(PlanError::Infeasible(format!(
            "app `{app}`: planner `gpulet` serves each task's most accurate variant profiled on `mps:` segments, \
             {accuracy:.4} of the best, below the accuracy SLO of {}",
            problem.slo_accuracy
        )));
    }
    // (size, batch) → ms, each batch no faster than its measured throughput.
    let latency: Vec<BTreeMap<(u32, u32), f64>> = (0..problem.tasks.len())
        .map(|t| {
            problem
                .configs
                .iter()
                .filter(|c| c.task == t && c.variant == variants[t])
                .filter_map(|c| size_of(c.segment).map(|size| ((size, c.batch), c.paced_ms())))
                .collect()
        })
        .collect();
    // A task's weight in the SLO split: its smallest batch on its largest share.
    let weight: Vec<f64> = latency
        .iter()
        .map(|rows| {
            let largest = rows.keys().map(|&(size, _)| size).max().unwrap_or(100);
            rows.range((largest, 0)..=(largest, u32::MAX)).next().map_or(1.0, |(_, &ms)| ms)
        })
        .collect();
    let rates = problem.propagate(|t, i| problem.tasks[t].variants[variants[t]].factors[i]);
    let models = problem
        .tasks
        .iter()
        .enumerate()
        .map(|(t, task)| {
            let slo_ms = problem
                .paths
                .iter()
                .filter(|p| p.tasks.contains(&t))
                .map(|p| problem.slo_latency_ms * weight[t] / p.tasks.iter().map(|&u| weight[u]).sum::<f64>())
                .fold(problem.slo_latency_ms, f64::min);
            GpuletModel { name: task.name.clone(), rate_rps: rates[t], slo_ms, latency_ms: latency[t].clone() }
        })
        .collect();
    let mut splits: Vec<u32> = shares.iter().map(|&(_, size)| size).filter(|&size| size < 100).collect();
    splits.sort_unstable();
    splits.dedup();
    Ok(AppGpulets { problem: GpuletProblem { models, gpus, splits, interference: None }, variants, shares, accuracy })
}

#[cfg(test)]
mod tests {
    use crate::error::PlanError;
    use crate::placement::Device;
    use crate::profile::ProfileRow;
    use crate::solution::SolveOptions;
    use crate::spec::{Features, PlanSpec};
    use crate::{Problem, Strategy, plan};

    /// `det → rec` on `gpus` H100s' MPS shares (and one core): det's `small` variant is faster and less
    /// accurate, its `huge` one the most accurate but profiled only on the core.
    fn problem(demand_rps: f64, gpus: u32, segments: &[&str]) -> Result<Problem, PlanError> {
        let listed: String = segments.iter().map(|s| format!("[[segments]]\nname = \"{s}\"\n")).collect();
        let spec = PlanSpec::from_toml(&format!(
            "[app]\nname = \"reader\"\nslo_latency_ms = 100\nslo_accuracy = 0.9\nplanner = \"gpulet\"\n\
             tasks = [{{ name = \"det\", variants = [{{ name = \"det\", accuracy = 0.9 }}, \
             {{ name = \"small\", accuracy = 0.8 }}, {{ name = \"huge\", accuracy = 0.95 }}] }}, \
             {{ name = \"rec\", variants = [{{ name = \"rec\", accuracy = 1 }}] }}]\n\
             edges = [{{ from = \"det\", to = \"rec\" }}]\n{listed}\
             [resources]\nslices = {}\ncpu_cores = 1\ngpu_slices = {}\n[demand]\nwindows = [{demand_rps}]\n",
            1 + 7 * gpus,
            7 * gpus
        ))?;
        let mut rows = Vec::new();
        // Latency ∝ b^0.7 / share^0.8: larger shares and batches serve more, with diminishing returns.
        for (slot, variant, base) in [("det", "det", 6.0), ("det", "small", 3.0), ("rec", "rec", 2.0)] {
            for percent in [25u32, 50, 75, 100] {
                for batch in [1u32, 2, 4, 8, 16] {
                    let ms = base * f64::from(batch).powf(0.7) * (100.0 / f64::from(percent)).powf(0.8);
                    rows.push(row(slot, variant, &format!("mps:0:{percent}"), batch, ms));
                }
            }
        }
        for (slot, variant) in [("det", "det"), ("det", "small"), ("det", "huge"), ("rec", "rec")] {
            rows.push(row(slot, variant, "cpu:1", 1, 40.0));
        }
        Problem::new(&spec, &rows, "test")
    }

    fn row(slot: &str, variant: &str, segment: &str, batch: u32, ms: f64) -> ProfileRow {
        let throughput_rps = f64::from(batch) * 1e3 / ms;
        let device = "test".into();
        ProfileRow {
            slot: slot.into(),
            variant: variant.into(),
            segment: segment.into(),
            batch,
            p50_ms: ms,
            p95_ms: ms,
            throughput_rps,
            device,
            cpu_ms: None,
        }
    }

    const SHARES: [&str; 5] = ["mps:25", "mps:50", "mps:75", "mps:100", "cpu:1"];

    #[test]
    fn an_app_is_planned_on_gpu_lets_of_whole_gpus() {
        let p = problem(250.0, 2, &SHARES).unwrap();
        assert_eq!(p.strategy, Strategy::Gpulet);
        let plan = plan(&p, Features::ALL, &SolveOptions::default()).unwrap();
        assert_eq!((plan.planner, plan.solve.status.as_str()), (Strategy::Gpulet, "heuristic"));
        let mut percent_per_gpu = std::collections::BTreeMap::new();
        for task in &plan.tasks {
            assert!(!task.entries.is_empty(), "{} is not served: {}", task.task, plan.to_text());
            for e in &task.entries {
                assert!(e.segment.starts_with("mps:"), "{}", plan.to_text());
                // The most accurate variant on a share, not the core-only `huge` nor the faster `small`.
                assert_eq!(e.variant, task.task, "{}", plan.to_text());
                assert!(e.rate_rps <= f64::from(e.instances) * e.throughput_rps + 1e-6, "{}", plan.to_text());
            }
            let served: f64 = task.entries.iter().map(|e| e.rate_rps).sum();
            assert!((served - task.demand_rps).abs() < 1e-6, "{}: {served} of {} req/s", task.task, task.demand_rps);
        }
        for placed in &plan.placement.instances {
            let Device::GpuShare { gpu, percent } = placed.device else { panic!("{placed:?} is not on a share") };
            *percent_per_gpu.entry(gpu).or_insert(0) += u32::from(percent);
        }
        assert!(percent_per_gpu.len() <= 2 && percent_per_gpu.values().all(|&p| p <= 100), "{percent_per_gpu:?}");
        // Shares priced by their sum: no more than the two GPUs' 14 slices.
        assert!(plan.slices_used <= 14, "{}", plan.to_text());
        // Each task's batch takes at most half of its part of the SLO, the parts summing to the SLO.
        assert!(plan.paths.iter().all(|path| path.latency_ms <= 100.0 + 1e-9), "{}", plan.to_text());
    }

    /// det and rec beside each other slow each other by 30%, by the interference model fitted to their measured
    /// utilisations: (c1 … c5) = (0, 0, 0, 0, 0.3) for every pair.
    fn interfering(p: &mut Problem) {
        use crate::interference::{InterferenceModel, MeasuredInterference, Utilisation};
        let utilisation = vec![Utilisation { l2: 0.2, dram: 0.2 }; p.tasks.len()];
        let model = InterferenceModel { coefficients: [0.0, 0.0, 0.0, 0.0, 0.3] };
        let measured = MeasuredInterference { model, utilisation, fit_error: 0.0, samples: 5 };
        p.interference = Some(std::sync::Arc::new(measured));
    }

    #[test]
    fn with_measured_interference_split_gpus_are_planned_slowed_and_placed_together() {
        let options = SolveOptions::default();
        let alone = plan(&problem(250.0, 2, &SHARES).unwrap(), Features::ALL, &options).unwrap();
        assert!(alone.colocated.is_empty(), "without interference, shares are placed by size: {}", alone.to_text());
        let mut p = problem(250.0, 2, &SHARES).unwrap();
        interfering(&mut p);
        let slowed = plan(&p, Features::ALL, &options).unwrap();
        // Every split GPU of the plan is named with the gpu-lets it holds: one instance each, of a planned entry.
        assert!(!slowed.colocated.is_empty(), "{}", slowed.to_text());
        for on_gpu in &slowed.colocated {
            let percent: u32 = on_gpu.iter().map(|s| s.segment["mps:".len()..].parse::<u32>().unwrap()).sum();
            assert!(on_gpu.len() == 2 && percent <= 100, "{on_gpu:?}");
            for step in on_gpu {
                let task = slowed.tasks.iter().find(|t| t.task == step.task).unwrap();
                assert!(
                    task.entries.iter().any(|e| (e.segment.as_str(), e.batch) == (step.segment.as_str(), step.batch))
                );
            }
        }
        assert!(slowed.to_text().contains("one GPU, with their interference: "), "{}", slowed.to_text());
        // A neighbour's 30% costs capacity: a slowed plan holds more of the GPUs, or smaller batches.
        let share = |plan: &crate::Plan| -> u32 {
            plan.tasks
                .iter()
                .flat_map(|t| &t.entries)
                .map(|e| e.instances * e.segment[4..].parse::<u32>().unwrap())
                .sum()
        };
        let batches = |plan: &crate::Plan| -> u32 { plan.tasks.iter().flat_map(|t| &t.entries).map(|e| e.batch).sum() };
        assert!(
            share(&slowed) > share(&alone) || batches(&slowed) < batches(&alone),
            "{}\n{}",
            alone.to_text(),
            slowed.to_text()
        );
    }

    #[test]
    fn what_gpu_lets_cannot_plan_is_said() {
        let err = plan(&problem(1e6, 2, &SHARES).unwrap(), Features::ALL, &SolveOptions::default()).unwrap_err();
        assert!(matches!(err, PlanError::Infeasible(_)), "{err}");
        assert!(err.to_string().contains("app `reader`, planner `gpulet`: model `"), "{err}");
        let err =
            crate::solve(&problem(10.0, 0, &SHARES).unwrap(), Features::ALL, &SolveOptions::default()).unwrap_err();
        assert!(err.to_string().contains("splits whole GPUs") && err.to_string().contains("0 GPU slices"), "{err}");
        let err =
            crate::solve(&problem(10.0, 1, &["cpu:1"]).unwrap(), Features::ALL, &SolveOptions::default()).unwrap_err();
        assert!(err.to_string().contains("app `reader`: planner `gpulet` plans MPS shares"), "{err}");
        // Offered one share size, gpu-lets plans with it (whole GPUs are split into it and its complement, which
        // the profile lacks: one 50% gpu-let a GPU).
        let plan = plan(&problem(100.0, 1, &["mps:50", "cpu:1"]).unwrap(), Features::ALL, &SolveOptions::default());
        assert!(plan.as_ref().is_ok_and(|p| p.placement.instances.len() == 2), "{plan:?}");
    }
}
