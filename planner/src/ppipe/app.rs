//! PPipe as a planner strategy (`planner = "ppipe"`): an app that is one model cut into a chain of sub-models,
//! a task each (`scripts/partition_model.py --bundle`, or the cut recognizer of `make test-gpu`), planned as
//! PPipe's pooled pipelines over the segments a deployment may use.
//!
//! The cuts are the bundle's: every task is a partition of its own ([`Scheme::EveryBlock`]), since a deployed
//! task serves its own sub-model (PPipe's choice of cut points is made where the model is cut: `[ppipe]` specs plan
//! over every cut of its blocks, and `partition_model.py --partitions` joins blocks into the partitions chosen).
//! The program then picks, per candidate pipeline, each partition's class, share and pool size and one batch size
//! for all, for the most throughput ([`super::solve`]). The app is read this way:
//! - each task is served by its most accurate variant (a block's sub-model has one);
//! - classes are the GPUs (units: the whole GPUs among the plan's GPU slices, seven a GPU; a `1/v` share is the
//!   profiled `mps:P` segment with P = 100/v rounded: 100, 50, 33, 25, 20…) and the cores (a unit is the largest
//!   `cpu:N` profiled; a `1/v` share is `cpu:N/v` where profiled);
//! - the budget is half the latency SLO (a margin of 0.5): a batch may wait one batch time, the 2·L every task is
//!   budgeted in JigsawServe's latency model, which checks the plan. A deployment routes each task's requests
//!   over all its instances, so that a request may take one pipeline's head and another's tail: each partition
//!   keeps to its part of the budget (split in proportion to the tasks' fastest batch-1 latencies), where PPipe
//!   holds each pipeline to the whole;
//! - nothing is charged between partitions: a deployed chain passes each tensor through the gateway's host;
//! - a profiled batch whose measured throughput H is below b / L(b) is read as taking b / H.
//!
//! PPipe plans for the most throughput its units give; a deployment serves its demand with the fewest of them: the
//! demand fills the pipelines of most throughput first, and each pool keeps the members that serve its part. The
//! pipelines kept ([`PipelinePlan`], `Plan::pipelines`) are what a deployment's head books each batch along, by
//! PPipe's reservation-based batching (`jig_app`'s `pipelines`, on `jig_policy::reserve`, which `jig simulate`
//! runs on `[ppipe]` specs too).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::PlanError;
use crate::problem::Problem;
use crate::solution::{Assignment, SolveOptions, Solved};
use crate::spec::SegmentKind;

// Kept while `jig-sim` still names it here; its home is `crate::solution`.
use crate::solution::PipelinePlan;

use super::{BlockedModel, Class, PpipeProblem, Scheme};

/// Plan `problem` as PPipe's pooled pipelines (module docs).
pub(crate) fn solve(problem: &Problem, options: &SolveOptions) -> Result<Solved, PlanError> {
    let started = Instant::now();
    let pools = to_ppipe(problem)?;
    let plan = super::solve(&pools.problem, options).map_err(|e| match e {
        PlanError::Infeasible(why) => PlanError::Infeasible(format!("app `{}`, planner `ppipe`: {why}", problem.app)),
        other => other,
    })?;
    let demand = problem.demand_rps;
    if plan.throughput_rps < demand * (1.0 - 1e-9) {
        return Err(PlanError::Infeasible(format!(
            "app `{}`, planner `ppipe`: its pooled pipelines serve at most {:.1} req/s on the units there are, short \
             of the {demand:.1} req/s demanded",
            problem.app, plan.throughput_rps
        )));
    }
    // The demand fills the fastest pipelines first: the fewest pipelines, and members, serve it.
    let mut pipelines: Vec<_> = plan.pipelines.iter().filter(|p| p.throughput_rps > 0.0).collect();
    pipelines.sort_by(|a, b| b.throughput_rps.total_cmp(&a.throughput_rps));
    let mut left = demand;
    let mut types: BTreeMap<(usize, usize, u32), Assignment> = BTreeMap::new();
    let mut deployed = Vec::new();
    for pipeline in pipelines {
        let rate = left.min(pipeline.throughput_rps);
        left -= rate;
        if rate <= 0.0 {
            break;
        }
        let mut kept = PipelinePlan { rate_rps: rate, batch: pipeline.batch, pools: Vec::new() };
        for (task, partition) in pipeline.partitions.iter().enumerate() {
            let segment = pools.segments[&(partition.class, partition.share)];
            let members = (f64::from(partition.count) * rate / pipeline.throughput_rps - 1e-9).ceil().max(1.0);
            kept.pools.push((problem.tasks[task].best, segment, members as u32));
            let a = types.entry((task, segment, pipeline.batch)).or_insert(Assignment {
                task,
                variant: problem.tasks[task].best,
                segment,
                batch: pipeline.batch,
                instances: 0,
                rate_rps: 0.0,
            });
            a.instances += members as u32;
            a.rate_rps += rate;
        }
        deployed.push(kept);
    }
    Ok(Solved {
        instance_types: pools.problem.model.latency_ms.len(),
        instance_types_profiled: problem.configs.len(),
        assignments: types.into_values().collect(),
        accuracy_bound: 1.0,
        optimal: plan.optimal,
        seconds: started.elapsed().as_secs_f64(),
        gpu_layouts: Vec::new(),
        classes: Vec::new(),
        pipelines: deployed,
        colocated: Vec::new(),
    })
}

/// An app's problem as PPipe reads it.
pub struct AppPools {
    /// Tasks as blocks, in chain order (task order).
    pub problem: PpipeProblem,
    /// The segment type of each class's share: (class, v) → index into [`Problem::segments`].
    pub segments: BTreeMap<(usize, u32), usize>,
}

/// Read `problem` as PPipe's blocks and classes (module docs); an error names what the app lacks.
pub fn to_ppipe(problem: &Problem) -> Result<AppPools, PlanError> {
    let app = &problem.app;
    let n = problem.tasks.len();
    // A chain in task order, each request passing every task once.
    for (t, task) in problem.tasks.iter().enumerate() {
        let next: &[usize] = if t + 1 < n { &[t + 1] } else { &[] };
        if task.succs != next || (t > 0 && task.preds != [t - 1]) {
            return Err(PlanError::Input(format!(
                "app `{app}`, task `{}`: planner `ppipe` plans one model cut into a chain of tasks, each sending its \
                 requests to the next in the manifest's order",
                task.name
            )));
        }
        let factor = task.factor(task.best, t + 1);
        if t + 1 < n && (factor - 1.0).abs() > 1e-9 {
            return Err(PlanError::Input(format!(
                "app `{app}`, task `{}`: planner `ppipe` passes each request through every partition once; this task \
                 sends {factor} requests on for each",
                task.name
            )));
        }
    }
    let mut classes = Vec::new();
    let mut segments = BTreeMap::new();
    let gpus = problem.gpu_slices.unwrap_or(problem.slices) / 7;
    let shares: Vec<(usize, u32)> = problem
        .segments
        .iter()
        .enumerate()
        .filter_map(|(s, seg)| match seg.kind {
            SegmentKind::Mps { percent, processes: 1 } => {
                let v = (100.0 / f64::from(percent)).round() as u32;
                ((100.0 / f64::from(v)).round() as u8 == percent).then_some((s, v))
            }
            _ => None,
        })
        .collect();
    if gpus > 0 && !shares.is_empty() {
        for &(s, v) in &shares {
            segments.insert((classes.len(), v), s);
        }
        classes.push(Class { name: "gpu".into(), units: gpus, shares: shares.iter().map(|&(_, v)| v).collect() });
    }
    let cores: Vec<(usize, u32)> = problem
        .segments
        .iter()
        .enumerate()
        .filter_map(|(s, seg)| match seg.kind {
            SegmentKind::Cpu { cores } => Some((s, cores)),
            _ => None,
        })
        .collect();
    let free = problem.cpu_cores.unwrap_or(problem.slices.saturating_sub(problem.gpu_slices.unwrap_or(0)));
    if let Some(unit) = cores.iter().map(|&(_, c)| c).max().filter(|&unit| free >= unit) {
        let mut offered = Vec::new();
        for &(s, c) in cores.iter().filter(|&&(_, c)| unit % c == 0) {
            segments.insert((classes.len(), unit / c), s);
            offered.push(unit / c);
        }
        classes.push(Class { name: format!("cpu:{unit}"), units: free / unit, shares: offered });
    }
    if classes.is_empty() {
        return Err(PlanError::Infeasible(format!(
            "app `{app}`: planner `ppipe` pools whole GPUs (shares `mps:100`, `mps:50`, `mps:33`, `mps:25`…) and \
             cores (`cpu:N`), and the plan may use none it has profiles for"
        )));
    }
    let mut latency_ms = std::collections::HashMap::new();
    let mut batches = Vec::new();
    for c in &problem.configs {
        if c.variant != problem.tasks[c.task].best {
            continue;
        }
        if let Some((&(class, v), _)) = segments.iter().find(|&(_, &s)| s == c.segment) {
            latency_ms.insert((class, v, c.batch, c.task), c.paced_ms());
            batches.push(c.batch);
        }
    }
    batches.sort_unstable();
    batches.dedup();
    // A deployment routes each task's requests over all its instances, so a request may take one pipeline's
    // head and another's tail: each partition keeps to its part of the budget, the budget split among the tasks
    // in proportion to their fastest batch-1 latencies, so that any mix of pipelines keeps to the whole.
    let budget = problem.slo_latency_ms * 0.5;
    let fastest: Vec<f64> = (0..n)
        .map(|t| {
            let smallest = latency_ms.keys().filter(|k| k.3 == t).map(|k| k.2).min();
            latency_ms
                .iter()
                .filter(|(k, _)| k.3 == t && Some(k.2) == smallest)
                .map(|(_, &ms)| ms)
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let total: f64 = fastest.iter().filter(|ms| ms.is_finite()).sum();
    latency_ms.retain(|&(_, _, _, t), ms| *ms <= budget * fastest[t] / total * (1.0 + 1e-9));
    let model = BlockedModel { name: app.clone(), blocks: n, latency_ms, output_bytes: vec![0; n] };
    let problem = PpipeProblem {
        model,
        classes,
        slo_ms: problem.slo_latency_ms,
        margin: 0.5,
        batches,
        max_partitions: n,
        bandwidth_bytes_per_s: 1.0,
        scheme: Scheme::EveryBlock,
    };
    Ok(AppPools { problem, segments })
}

#[cfg(test)]
mod tests {
    use crate::error::PlanError;
    use crate::placement::Device;
    use crate::profile::ProfileRow;
    use crate::solution::SolveOptions;
    use crate::spec::{Features, PlanSpec};
    use crate::{Problem, Strategy, plan};

    /// A model cut in two, `head → tail` (`factor` requests on per request), on one GPU's MPS shares and four
    /// cores: the head is light (cores serve it nearly as well), the tail heavy.
    fn problem(demand_rps: f64, factor: f64) -> Result<Problem, PlanError> {
        let segments: String = ["mps:100", "mps:50", "mps:25", "cpu:1", "cpu:2"]
            .iter()
            .map(|s| format!("[[segments]]\nname = \"{s}\"\n"))
            .collect();
        let spec = PlanSpec::from_toml(&format!(
            "[app]\nname = \"cut\"\nslo_latency_ms = 200\nslo_accuracy = 0.5\nplanner = \"ppipe\"\n\
             tasks = [{{ name = \"head\", variants = [{{ name = \"head\", accuracy = 1, factors = {{ tail = {factor} }} }}] }}, \
             {{ name = \"tail\", variants = [{{ name = \"tail\", accuracy = 1 }}] }}]\n\
             edges = [{{ from = \"head\", to = \"tail\" }}]\n{segments}\
             [resources]\nslices = 11\ncpu_cores = 4\ngpu_slices = 7\n[demand]\nwindows = [{demand_rps}]\n"
        ))?;
        let mut rows = Vec::new();
        for (slot, gpu_ms, cpu_ms) in [("head", 2.0, 6.0), ("tail", 8.0, 80.0)] {
            for batch in [1u32, 4, 8] {
                let grow = f64::from(batch).powf(0.8);
                for (segment, ms) in [
                    ("mps:0:100", gpu_ms * grow),
                    ("mps:0:50", 1.6 * gpu_ms * grow),
                    ("mps:0:25", 2.8 * gpu_ms * grow),
                    ("cpu:2", cpu_ms * grow),
                    ("cpu:1", 1.8 * cpu_ms * grow),
                ] {
                    rows.push(row(slot, segment, batch, ms));
                }
            }
        }
        Problem::new(&spec, &rows, "test")
    }

    /// A profile row of `slot`'s one variant (named as the slot) running batches back to back.
    fn row(slot: &str, segment: &str, batch: u32, ms: f64) -> ProfileRow {
        let (slot, variant, segment, device) = (slot.into(), slot.into(), segment.into(), "test".into());
        let throughput_rps = f64::from(batch) * 1e3 / ms;
        ProfileRow { slot, variant, segment, batch, p50_ms: ms, p95_ms: ms, throughput_rps, device, cpu_ms: None }
    }

    #[test]
    fn a_cut_model_is_planned_as_pooled_pipelines_serving_its_demand() {
        let p = problem(200.0, 1.0).unwrap();
        assert_eq!(p.strategy, Strategy::Ppipe);
        let plan = plan(&p, Features::ALL, &SolveOptions::default()).unwrap();
        assert_eq!(plan.planner, Strategy::Ppipe);
        for task in &plan.tasks {
            let served: f64 = task.entries.iter().map(|e| e.rate_rps).sum();
            assert!((served - task.demand_rps).abs() < 1e-6, "{}: {}", task.task, plan.to_text());
        }
        // One batch size a pipeline: every batch the head runs, the tail runs too.
        let batches = |t: usize| {
            let mut b: Vec<u32> = plan.tasks[t].entries.iter().map(|e| e.batch).collect();
            b.dedup();
            b
        };
        assert_eq!(batches(0), batches(1), "{}", plan.to_text());
        // The pipelines a deployment books along: their pools share out every task's instances, each type's
        // members to pipelines of its batch size, and together they take the demand.
        assert!(!plan.pipelines.is_empty(), "{}", plan.to_text());
        let taken: f64 = plan.pipelines.iter().map(|q| q.rate_rps).sum();
        assert!((taken - plan.demand_rps).abs() < 1e-6, "{}", plan.to_text());
        for (t, task) in plan.tasks.iter().enumerate() {
            for e in &task.entries {
                let members: u32 = plan
                    .pipelines
                    .iter()
                    .filter(|q| {
                        q.batch == e.batch && q.pools[t].variant == e.variant && q.pools[t].segment == e.segment
                    })
                    .map(|q| q.pools[t].members)
                    .sum();
                assert_eq!(members, e.instances, "{}: {}", task.task, plan.to_text());
            }
        }
        assert!(plan.to_text().contains("pipeline at batch"), "{}", plan.to_text());
        // Within one GPU and four cores, and the SLO with every batch doubled.
        let (mut percent, mut cores) = (0u32, 0u32);
        for placed in &plan.placement.instances {
            match placed.device {
                Device::GpuShare { gpu, percent: p } => {
                    assert_eq!(gpu, 0, "{}", plan.to_text());
                    percent += u32::from(p);
                }
                Device::Cpu { cores: c, .. } => cores += c,
                ref other => panic!("{other:?}"),
            }
        }
        assert!(percent <= 100 && cores <= 4, "{percent}% of the GPU, {cores} cores: {}", plan.to_text());
        assert!(plan.paths[0].latency_ms <= 200.0 + 1e-9, "{}", plan.to_text());
        // Fewer requests, fewer members.
        let small = plan_members(&problem(30.0, 1.0).unwrap());
        assert!(small < plan_members(&p), "{small} members for 30 req/s");
    }

    fn plan_members(p: &Problem) -> u32 {
        let plan = plan(p, Features::ALL, &SolveOptions::default()).unwrap();
        plan.tasks.iter().flat_map(|t| &t.entries).map(|e| e.instances).sum()
    }

    /// Four blocks on three GPUs' shares and six cores, at a demand that takes a GPU pipeline and a CPU one: a
    /// request may take either pipeline's instances at every task, and every mix keeps to the SLO.
    #[test]
    fn pipelines_mixed_task_by_task_keep_to_the_slo() {
        let n = 4;
        let tasks: Vec<String> = (0..n)
            .map(|t| {
                let on = if t + 1 < n { format!(", factors = {{ b{} = 1 }}", t + 1) } else { String::new() };
                format!("{{ name = \"b{t}\", variants = [{{ name = \"b{t}\", accuracy = 1{on} }}] }}")
            })
            .collect();
        let edges: Vec<String> = (1..n).map(|t| format!("{{ from = \"b{}\", to = \"b{t}\" }}", t - 1)).collect();
        let segments: String = ["mps:100", "mps:50", "mps:25", "cpu:1", "cpu:2"]
            .iter()
            .map(|s| format!("[[segments]]\nname = \"{s}\"\n"))
            .collect();
        let spec = PlanSpec::from_toml(&format!(
            "[app]\nname = \"chain\"\nplanner = \"ppipe\"\nslo_latency_ms = 400\nslo_accuracy = 0.5\n\
             tasks = [{}]\nedges = [{}]\n{segments}\
             [resources]\nslices = 27\ncpu_cores = 6\ngpu_slices = 21\n[demand]\nwindows = [320]\n",
            tasks.join(", "),
            edges.join(", ")
        ))
        .unwrap();
        let mut rows = Vec::new();
        for t in 0..n {
            for batch in [1u32, 2, 4, 8, 16] {
                for (segment, slower) in
                    [("mps:0:100", 1.0), ("mps:0:50", 1.6), ("mps:0:25", 2.8), ("cpu:2", 8.0), ("cpu:1", 14.0)]
                {
                    let ms = (2.0 + t as f64) * slower * f64::from(batch).powf(0.8);
                    rows.push(row(&format!("b{t}"), segment, batch, ms));
                }
            }
        }
        let p = Problem::new(&spec, &rows, "test").unwrap();
        // `plan` checks every task's slowest planned type along the path against the SLO.
        let plan = plan(&p, Features::ALL, &SolveOptions::default()).unwrap();
        for task in &plan.tasks {
            let kinds: Vec<&str> = task.entries.iter().map(|e| &e.segment[..3]).collect();
            assert!(kinds.contains(&"mps") && kinds.contains(&"cpu"), "{}", plan.to_text());
        }
        assert!(plan.paths[0].latency_ms <= 400.0 + 1e-9, "{}", plan.to_text());
    }

    #[test]
    fn what_ppipe_cannot_plan_is_said() {
        let err = plan(&problem(10.0, 2.0).unwrap(), Features::ALL, &SolveOptions::default()).unwrap_err();
        assert!(err.to_string().contains("app `cut`, task `head`: planner `ppipe` passes each request"), "{err}");
        let err = plan(&problem(1e5, 1.0).unwrap(), Features::ALL, &SolveOptions::default()).unwrap_err();
        assert!(matches!(err, PlanError::Infeasible(_)), "{err}");
        assert!(err.to_string().contains("app `cut`, planner `ppipe`: its pooled pipelines serve at most"), "{err}");
    }
}
