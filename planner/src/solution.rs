//! What every planner strategy returns, and how they run HiGHS: the one place the strategies' output types
//! ([`Solved`] and what it holds) and solver options live, so that the strategies, the evaluator and the MILP share
//! them without importing one another.

use good_lp::solvers::highs::HighsProblem;
use serde::Serialize;

/// How to run the solver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolveOptions {
    /// HiGHS `time_limit`, seconds; the best plan found by then is returned.
    pub time_limit_s: f64,
    /// The time limit of a re-plan from a running plan ([`solve_from`](crate::milp::solve_from) with a start), seconds, when lower. HiGHS
    /// finds its last plan early and spends the rest proving it: on a day of traffic analysis at 28 slices, a
    /// 1 s budget left the slices and the accuracy as they were and halved the time (BENCHMARKS.md, "Re-plans").
    pub replan_time_limit_s: f64,
    /// HiGHS `mip_rel_gap`.
    pub mip_rel_gap: f64,
    /// HiGHS `mip_abs_gap`, in slices' worth of objective (β each): the search stops once no plan can be better
    /// by this much. Half a slice still tells plans apart by their slice count (an integer) and spares the
    /// solver proving tie-breaks worth a fraction of a slice, which is most of its search.
    pub abs_gap_slices: f64,
    /// HiGHS `random_seed`: branch-and-bound times vary severalfold between seeds on the same problem.
    pub random_seed: u32,
    /// Stop at the first plan that meets the constraints (the max-demand bisection only asks "is there one?").
    pub feasibility_only: bool,
    /// Say why an infeasible JigsawServe problem is so (which constraint to relax): solves of its own, which
    /// the max-demand bisection, probing many infeasible demands, goes without.
    pub diagnose: bool,
}

impl Default for SolveOptions {
    fn default() -> Self {
        Self {
            time_limit_s: 30.0,
            replan_time_limit_s: 1.0,
            mip_rel_gap: 1e-4,
            abs_gap_slices: 0.5,
            random_seed: 0,
            feasibility_only: false,
            diagnose: true,
        }
    }
}

/// HiGHS with `options`' time limit and random seed; `JIG_HIGHS_LOG=1` prints its log, to see where a slow
/// solve spends its time.
pub(crate) fn highs_with(model: HighsProblem, options: &SolveOptions) -> HighsProblem {
    let log = std::env::var_os("JIG_HIGHS_LOG").is_some();
    model
        .set_time_limit(options.time_limit_s)
        .set_option("output_flag", log)
        .set_option("log_to_console", log)
        .set_option("random_seed", options.random_seed as i32)
}

/// What the solver returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    /// The instance types with at least one instance: their counts M and served rates x.
    pub assignments: Vec<Assignment>,
    /// The linear lower bound on A_obj the MILP worked with.
    pub accuracy_bound: f64,
    /// False when the time limit cut the search short.
    pub optimal: bool,
    /// Wall-clock time of the solve, building the model included, seconds.
    pub seconds: f64,
    /// The MIG layout of each GPU the plan uses: (index into `jig_policy::mig::layouts()`, GPUs).
    pub gpu_layouts: Vec<(usize, u32)>,
    /// Instance types in the MILP, after pruning.
    pub instance_types: usize,
    /// Profiled instance types the configuration space admits, before pruning.
    pub instance_types_profiled: usize,
    /// Compass's plan per query class; empty for the other strategies.
    pub classes: Vec<ClassPlan>,
    /// PPipe's pooled pipelines of an app; empty for the other strategies.
    pub pipelines: Vec<PipelinePlan>,
    /// Instance types `(task, variant, segment, batch)`, one instance each, that must share one GPU: gpu-lets
    /// planned them beside each other, slowed by each other's interference. Empty for the other strategies.
    pub colocated: Vec<Vec<(usize, usize, usize, u32)>>,
}

/// M(t,v,s,b) instances of one instance type and the rate routed to them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Assignment {
    /// t, an index into [`Problem::tasks`](crate::Problem::tasks).
    pub task: usize,
    /// v, an index into the task's variants.
    pub variant: usize,
    /// s, an index into [`Problem::segments`](crate::Problem::segments).
    pub segment: usize,
    /// b, the maximum batch size, requests.
    pub batch: u32,
    /// M(t,v,s,b): instances of this variant, segment type and batch size.
    pub instances: u32,
    /// x: req/s routed to these instances together; at most `instances` × H(t,v,s,b).
    pub rate_rps: f64,
}

/// What one class was planned: its demand, and the routes that serve it within its SLOs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassPlan {
    /// The class's name.
    pub class: String,
    /// R_c, req/s.
    pub demand_rps: f64,
    /// R_c·Σ_p u_cp: what the plan serves of it within its SLOs, req/s.
    pub served_rps: f64,
    /// The routes its requests take, most used first.
    pub routes: Vec<Route>,
}

/// One route of a class: a type per task, and the class's requests it takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Route {
    /// Per task in pipeline order, the type (task, variant, segment, batch).
    pub types: Vec<(usize, usize, usize, u32)>,
    /// Requests of the class on it, req/s (at the first task).
    pub rate_rps: f64,
}

/// One of an app's pooled pipelines as planned: what a deployment's scheduler books batches along.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelinePlan {
    /// The requests it takes, req/s.
    pub rate_rps: f64,
    /// The one batch size its stages run.
    pub batch: u32,
    /// Per task, in chain order, its pool: (variant, segment type, members); the members are instances of the
    /// plan's assignment of that type, which pipelines of the same type share out in plan order.
    pub pools: Vec<(usize, usize, u32)>,
}
