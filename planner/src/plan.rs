//! From a problem to a placed plan: solve the MILP, re-check the answer with the independent evaluator, place
//! the instances, and report.

use std::fmt::Write as _;

use crate::error::PlanError;
use crate::evaluate::evaluate_as;
use crate::placement::{Item, Placement, mig_counts, pack_layouts, place_on};
use crate::problem::Problem;
use crate::solution::{Assignment, SolveOptions};
use crate::spec::Features;
use crate::strategy::{TaskPolicy, runtime_policies, solve_from};
use serde::Serialize;

/// Plan `problem` in configuration space `features`.
pub fn plan(problem: &Problem, features: Features, options: &SolveOptions) -> Result<Plan, PlanError> {
    plan_from(problem, features, options, &[])
}

/// [`plan`], with the solver starting from `previous`, the assignments of a plan at another demand
/// ([`crate::solve_from`]).
pub fn plan_from(
    problem: &Problem,
    features: Features,
    options: &SolveOptions,
    previous: &[Assignment],
) -> Result<Plan, PlanError> {
    let solved = solve_from(problem, features, options, previous)?;
    let eval = evaluate_as(problem, &solved.assignments, features.weighting);
    let mut violations = eval.violations.clone();
    if problem.strategy == crate::spec::Strategy::Compass {
        violations.extend(crate::compass::check(problem, &solved));
    }
    if !violations.is_empty() {
        // The formulation is conservative, so this is a bug, not bad input: say so rather than hand out the plan.
        return Err(PlanError::Solver(format!(
            "the solver's plan fails the independent check: {}",
            violations.join("; ")
        )));
    }
    let mut items = Vec::new();
    for a in &solved.assignments {
        let task = &problem.tasks[a.task];
        for i in 0..a.instances {
            items.push(Item {
                label: format!("{}/{}/b{}#{i}", task.name, task.variants[a.variant].name, a.batch),
                kind: problem.segments[a.segment].kind,
            });
        }
    }
    // The solver's layouts hold the fewest slices but may spread them over more GPUs than needed (its
    // objective does not count GPUs): the exact packing, where it is found, uses the fewest of both.
    let packing = pack_layouts(&mig_counts(items.iter().map(|it| &it.kind)));
    let placement = place_on(&items, problem.cores_per_host, packing.as_deref().unwrap_or(&solved.gpu_layouts));
    let policies = runtime_policies(problem, &solved.assignments);
    let tasks = problem
        .tasks
        .iter()
        .enumerate()
        .map(|(t, task)| TaskPlan {
            task: task.name.clone(),
            demand_rps: eval.task_demand_rps[t],
            latency_ms: eval.task_latency_ms[t],
            accuracy: eval.task_accuracy[t],
            policy: policies[t],
            entries: solved
                .assignments
                .iter()
                .filter(|a| a.task == t)
                .filter_map(|a| {
                    let c = problem.config(a.task, a.variant, a.segment, a.batch)?;
                    Some(PlanEntry {
                        variant: task.variants[a.variant].name.clone(),
                        segment: problem.segments[a.segment].name.clone(),
                        batch: a.batch,
                        instances: a.instances,
                        rate_rps: a.rate_rps,
                        latency_ms: c.latency_ms,
                        throughput_rps: c.throughput_rps,
                    })
                })
                .collect(),
        })
        .collect();
    let paths = problem
        .paths
        .iter()
        .zip(eval.path_latency_ms.iter().zip(&eval.path_accuracy))
        .map(|(p, (&latency_ms, &accuracy))| PathPlan {
            tasks: p.tasks.iter().map(|&t| problem.tasks[t].name.clone()).collect(),
            fraction: p.fraction,
            latency_ms,
            accuracy,
            accuracy_of_best: p.tasks.iter().map(|&t| eval.task_accuracy[t]).product(),
        })
        .collect();
    Ok(Plan {
        app: problem.app.clone(),
        planner: problem.strategy,
        classes: solved.classes.iter().map(|c| ClassReport::of(problem, c)).collect(),
        pipelines: solved.pipelines.iter().map(|p| PipelineReport::of(problem, p)).collect(),
        colocated: solved
            .colocated
            .iter()
            .map(|on_gpu| {
                let step = |&(t, v, s, batch): &(usize, usize, usize, u32)| RouteStep {
                    task: problem.tasks[t].name.clone(),
                    variant: problem.tasks[t].variants[v].name.clone(),
                    segment: problem.segments[s].name.clone(),
                    batch,
                };
                on_gpu.iter().map(step).collect()
            })
            .collect(),
        features: features.to_string(),
        demand_rps: problem.demand_rps,
        slo_latency_ms: problem.slo_latency_ms,
        tasks,
        paths,
        accuracy: eval.accuracy,
        accuracy_bound: solved.accuracy_bound.min(eval.accuracy),
        slices_used: eval.slices,
        slices_available: problem.slices,
        objective: eval.objective,
        placement,
        solve: SolveInfo {
            // gpu-lets' Algorithm 1 is a heuristic: it finishes, but finds no optimum to speak of.
            status: match (problem.strategy, solved.optimal) {
                (crate::spec::Strategy::Gpulet, _) => "heuristic",
                (_, true) => "optimal",
                (_, false) => "time limit",
            }
            .into(),
            seconds: solved.seconds,
            instance_types: solved.instance_types,
            instance_types_profiled: solved.instance_types_profiled,
            profiles: problem.profile_source.clone(),
        },
    })
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The app's name.
    pub app: String,
    /// The configuration space planned in, as [`Features`] displays it: `A+S+T`, `S`, `Unopt`…
    pub features: String,
    /// The strategy that planned it (`features` are JigsawServe's switches, which IPA does not read).
    pub planner: crate::spec::Strategy,
    /// Compass's plan of each query class; empty for the other strategies.
    pub classes: Vec<ClassReport>,
    /// PPipe's pooled pipelines, which a deployment books batches along; empty for the other strategies.
    pub pipelines: Vec<PipelineReport>,
    /// gpu-lets' split GPUs planned with interference: the instance types (one instance each) that must share one
    /// GPU, slowed by each other as planned; empty otherwise.
    pub colocated: Vec<Vec<RouteStep>>,
    /// R, the demand at the roots (req/s).
    pub demand_rps: f64,
    /// SLO_l: the latency bound on every path, ms.
    pub slo_latency_ms: f64,
    /// Each task's demand, latency, accuracy and instances, in the spec's task order.
    pub tasks: Vec<TaskPlan>,
    /// Each path's latency and accuracy, in the order of [`Problem::paths`].
    pub paths: Vec<PathPlan>,
    /// A_obj (12), evaluated exactly on the plan.
    pub accuracy: f64,
    /// The MILP's linear lower bound on A_obj (see the crate docs); never above `accuracy`.
    pub accuracy_bound: f64,
    /// Σ s_k·M_k: the slices (GPU slices and CPU cores) the plan's instances take.
    pub slices_used: u32,
    /// S_avail: GPU slices (or CPU cores) available in all.
    pub slices_available: u32,
    /// Objective (14), α·A_obj − β·slices, on the exact accuracy.
    pub objective: f64,
    /// Where the instances run: GPUs with MIG start slots, CPU hosts with core ranges.
    pub placement: Placement,
    /// How the solver ran.
    pub solve: SolveInfo,
}

/// What a Compass plan does for one query class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassReport {
    /// The class's name.
    pub class: String,
    /// Its demand, req/s.
    pub demand_rps: f64,
    /// What the plan serves of it within its SLOs, req/s.
    pub served_rps: f64,
    /// Its latency SLO, ms.
    pub slo_latency_ms: f64,
    /// Its accuracy SLO, a fraction of the best.
    pub slo_accuracy: f64,
    /// Its routes, most used first.
    pub routes: Vec<RouteReport>,
}

/// One route of a class in a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteReport {
    /// The class's requests on it, req/s.
    pub rate_rps: f64,
    /// Σ 2·L of its types, ms.
    pub latency_ms: f64,
    /// The product of its types' normalised accuracies.
    pub accuracy: f64,
    /// Per task, `variant on segment batch b`.
    pub types: Vec<String>,
    /// Per task, the instance type its requests go to: what a deployment routes them by.
    pub steps: Vec<RouteStep>,
}

/// An instance type: the one a Compass route takes at a task, or a gpu-let of a split GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteStep {
    /// The task.
    pub task: String,
    /// Its variant.
    pub variant: String,
    /// The segment type.
    pub segment: String,
    /// The batch size.
    pub batch: u32,
}

impl ClassReport {
    fn of(problem: &Problem, plan: &crate::solution::ClassPlan) -> Self {
        let class = problem.classes.iter().find(|c| c.name == plan.class);
        let routes = plan
            .routes
            .iter()
            .map(|route| {
                let (latency_ms, accuracy) = crate::compass::route_totals(problem, &route.types);
                let (mut types, mut steps) = (Vec::new(), Vec::new());
                for &(t, v, s, b) in &route.types {
                    let task = &problem.tasks[t];
                    let (variant, segment) = (task.variants[v].name.clone(), problem.segments[s].name.clone());
                    types.push(format!("{variant} on {segment} batch {b}"));
                    steps.push(RouteStep { task: task.name.clone(), variant, segment, batch: b });
                }
                RouteReport { rate_rps: route.rate_rps, latency_ms, accuracy, types, steps }
            })
            .collect();
        ClassReport {
            class: plan.class.clone(),
            demand_rps: plan.demand_rps,
            served_rps: plan.served_rps,
            slo_latency_ms: class.map_or(0.0, |c| c.slo_latency_ms),
            slo_accuracy: class.map_or(0.0, |c| c.slo_accuracy),
            routes,
        }
    }
}

/// One pooled pipeline of a PPipe plan: a pool of instances per task, all running one batch size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineReport {
    /// The requests it takes, req/s.
    pub rate_rps: f64,
    /// The batch size its pools run.
    pub batch: u32,
    /// Per task, in chain order, its pool.
    pub pools: Vec<PoolReport>,
}

/// A pipeline's pool at one task: `members` instances of one type, of the task's plan entry of that type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolReport {
    /// The task.
    pub task: String,
    /// Its variant.
    pub variant: String,
    /// The segment type.
    pub segment: String,
    /// How many instances.
    pub members: u32,
}

impl PipelineReport {
    fn of(problem: &Problem, plan: &crate::solution::PipelinePlan) -> Self {
        let pools = plan
            .pools
            .iter()
            .enumerate()
            .map(|(t, &(v, s, members))| PoolReport {
                task: problem.tasks[t].name.clone(),
                variant: problem.tasks[t].variants[v].name.clone(),
                segment: problem.segments[s].name.clone(),
                members,
            })
            .collect();
        PipelineReport { rate_rps: plan.rate_rps, batch: plan.batch, pools }
    }
}

/// One task's part of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskPlan {
    /// The task's name.
    pub task: String,
    /// R̂(t), req/s.
    pub demand_rps: f64,
    /// L̂(t): the slowest active instance's batch latency, ms.
    pub latency_ms: f64,
    /// Â(t) normalised to the task's best variant.
    pub accuracy: f64,
    /// How its instances batch and drop ([`runtime_policies`]).
    pub policy: TaskPolicy,
    /// The instance types serving the task; it may mix variants, segment types and batch sizes.
    pub entries: Vec<PlanEntry>,
}

/// M(t,v,s,b) instances of one instance type, and the share of the task's requests they serve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEntry {
    /// The variant's name.
    pub variant: String,
    /// The segment type's canonical name, `mig:PROFILE:MPS` or `cpu:N`.
    pub segment: String,
    /// The maximum batch size, requests.
    pub batch: u32,
    /// M(t,v,s,b), at least 1.
    pub instances: u32,
    /// Requests per second routed to these instances together (the router splits traffic in these proportions).
    pub rate_rps: f64,
    /// L(t,v,s,b), ms.
    pub latency_ms: f64,
    /// H(t,v,s,b) of one instance, req/s.
    pub throughput_rps: f64,
}

/// One path of a plan: its end-to-end latency and accuracy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathPlan {
    /// Task names along the path.
    pub tasks: Vec<String>,
    /// f_p: the share of requests that take the path (the paths' shares sum to 1).
    pub fraction: f64,
    /// Σ 2·L̂(t) along the path (3), ms.
    pub latency_ms: f64,
    /// A_p (11), in the tasks' accuracy units.
    pub accuracy: f64,
    /// A_p as a fraction of the path's best: every task on its most accurate variant.
    pub accuracy_of_best: f64,
}

/// How the solver ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SolveInfo {
    /// `optimal`, `time limit` when the best plan found before the limit is returned, or `heuristic` (gpu-lets).
    pub status: String,
    /// Wall-clock time of the solve, building the model included, seconds.
    pub seconds: f64,
    /// Instance types the MILP considered, after pruning.
    pub instance_types: usize,
    /// Profiled instance types the configuration space admits, before pruning.
    pub instance_types_profiled: usize,
    /// Where the profiles came from (a file, or the analytic model).
    pub profiles: String,
}

impl Plan {
    /// How long a request may have left at `task` before it is dropped at once, ms ([`runtime_policies`]):
    /// for JigsawServe, the time it still needs at the least (§3.3). `None` for a task the plan lacks.
    pub fn drop_budget_ms(&self, task: &str) -> Option<f64> {
        self.tasks.iter().find(|t| t.task == task).map(|t| t.policy.drop_budget_ms)
    }

    /// How long a request may wait at `task` before it is stale, ms ([`runtime_policies`]). `None` for a task
    /// the plan lacks.
    pub fn stale_after_ms(&self, task: &str) -> Option<f64> {
        self.tasks.iter().find(|t| t.task == task).map(|t| t.policy.stale_ms)
    }

    /// A human-readable summary.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "plan for `{}` [{}] at {:.1} req/s: {} of {} slices, accuracy {:.4} of the best (linear bound {:.4}), objective {:.4}",
            self.app,
            if self.planner == crate::spec::Strategy::Jigsaw {
                self.features.clone()
            } else {
                self.planner.to_string()
            },
            self.demand_rps,
            self.slices_used,
            self.slices_available,
            self.accuracy,
            self.accuracy_bound,
            self.objective
        );
        let _ = writeln!(
            s,
            "solver: {} in {:.3} s over {} instance types ({} profiled); profiles: {}",
            self.solve.status,
            self.solve.seconds,
            self.solve.instance_types,
            self.solve.instance_types_profiled,
            self.solve.profiles
        );
        for t in &self.tasks {
            let _ = writeln!(
                s,
                "  task {}: {:.1} req/s, slowest batch {:.1} ms, accuracy {:.4}",
                t.task, t.demand_rps, t.latency_ms, t.accuracy
            );
            for e in &t.entries {
                let _ = writeln!(
                    s,
                    "    {} × {} on {} batch {}: {:.1} req/s routed (capacity {:.1}), {:.1} ms",
                    e.instances,
                    e.variant,
                    e.segment,
                    e.batch,
                    e.rate_rps,
                    f64::from(e.instances) * e.throughput_rps,
                    e.latency_ms
                );
            }
        }
        for p in &self.paths {
            let _ = writeln!(
                s,
                "  path {} (f = {:.3}): {:.1} ms, accuracy {:.4} ({:.1}% of the path's best)",
                p.tasks.join(" → "),
                p.fraction,
                p.latency_ms,
                p.accuracy,
                p.accuracy_of_best * 100.0
            );
        }
        for c in &self.classes {
            let _ = writeln!(
                s,
                "  class {} (SLOs {} ms, accuracy {}): {:.1} of {:.1} req/s served",
                c.class, c.slo_latency_ms, c.slo_accuracy, c.served_rps, c.demand_rps
            );
            for r in &c.routes {
                let _ = writeln!(
                    s,
                    "    {:.1} req/s: {} ({:.1} ms, accuracy {:.4})",
                    r.rate_rps,
                    r.types.join(" → "),
                    r.latency_ms,
                    r.accuracy
                );
            }
        }
        for on_gpu in &self.colocated {
            let shares: Vec<String> =
                on_gpu.iter().map(|s| format!("{}/{} on {} batch {}", s.task, s.variant, s.segment, s.batch)).collect();
            let _ = writeln!(s, "  one GPU, with their interference: {}", shares.join(" + "));
        }
        for p in &self.pipelines {
            let pools: Vec<String> =
                p.pools.iter().map(|q| format!("{} × {} on {}", q.members, q.variant, q.segment)).collect();
            let _ = writeln!(s, "  pipeline at batch {}, {:.1} req/s: {}", p.batch, p.rate_rps, pools.join(" → "));
        }
        let pl = &self.placement;
        let _ = writeln!(
            s,
            "  placement: {} GPUs (at least {}), {} stranded slices; {} CPU hosts, {} stranded cores",
            pl.gpus, pl.gpus_lower_bound, pl.stranded_slices, pl.hosts, pl.stranded_cores
        );
        for u in &pl.unplaced {
            let _ = writeln!(s, "  unplaced: {u}");
        }
        s
    }
}
