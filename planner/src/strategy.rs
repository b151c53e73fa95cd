//! Which paper's planner decides a plan: the one place the deploy path, the controller and the simulator ask
//! for a plan of a [`Problem`] (its `strategy`, from the spec's `app.planner` or `--planner`), and for how its
//! plans run ([`runtime_policies`]). A strategy is added as a variant of [`Strategy`] (in [`crate::spec`], beside
//! the spec that names it), here (its solver module, its runtime policy), in the latency model and objective
//! [`crate::evaluate`] checks its plans with, and in [`crate::max_demand`]'s bisection.

use serde::Serialize;

use crate::error::PlanError;
use crate::milp;
use crate::problem::Problem;
use crate::solution::{Assignment, SolveOptions, Solved};
use crate::spec::Features;

use crate::spec::Strategy;

/// How a plan's instances of one task batch and drop, as its strategy's latency model assumes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TaskPolicy {
    /// The longest the first request of a batch waits for more, ms.
    pub wait_ms: f64,
    /// A request with less time left before its deadline is dropped at once, ms (0: only one already late).
    pub drop_budget_ms: f64,
    /// A request that waited longer for a batch is dropped as stale, ms.
    pub stale_ms: f64,
}

/// Each task's [`TaskPolicy`] under `plan`, in task order: what deployments and `jig simulate` run.
///
/// * JigsawServe (§3.3): a batch waits up to L̂, the slowest planned batch latency of the task; a request is
///   dropped once less time is left than L̂ and then, on the slowest path on, the fastest planned type of
///   every later task; it is stale once it waited the problem's staleness beyond L̂ (the paper's 20 or 40 ms,
///   [`Problem::staleness_ms`]), or where none is set, after the task's share of the SLO on its tightest path,
///   in proportion to the 2·L̂ each task of the path is budgeted (2·L̂ where no path takes it).
/// * IPA (§4.3, §4.5): a batch waits for b rows up to the (b − 1)/λ its latency model counts; a request is
///   dropped only once it has passed its deadline, or after waiting twice the SLO.
/// * gpu-lets and PPipe: as JigsawServe (their batches take at most half the SLO: a batch may wait one batch
///   time).
/// * Compass: as JigsawServe, with the task's fastest planned type in place of its slowest: a task's types
///   serve classes of different SLOs, and a request of a tight class, routed to a fast type, must neither wait
///   nor be dropped by the slow type's budget.
pub fn runtime_policies(problem: &Problem, plan: &[Assignment]) -> Vec<TaskPolicy> {
    let n = problem.tasks.len();
    let latency = |a: &Assignment| problem.config(a.task, a.variant, a.segment, a.batch).map_or(0.0, |c| c.latency_ms);
    let active = || plan.iter().filter(|a| a.instances > 0);
    if problem.strategy == Strategy::Ipa {
        let least = problem.demand_bounds(|_, _| true).0;
        let mut wait_ms = vec![0.0f64; n];
        for a in active() {
            let wait = crate::evaluate::queueing_ms(a.batch, least[a.task]);
            wait_ms[a.task] = wait_ms[a.task].max(if wait.is_finite() { wait } else { 0.0 });
        }
        let stale_ms = 2.0 * problem.slo_latency_ms;
        return wait_ms.into_iter().map(|wait_ms| TaskPolicy { wait_ms, drop_budget_ms: 0.0, stale_ms }).collect();
    }
    let (mut wait_ms, mut fastest_ms) = (vec![0.0f64; n], vec![f64::INFINITY; n]);
    for a in active() {
        wait_ms[a.task] = wait_ms[a.task].max(latency(a));
        fastest_ms[a.task] = fastest_ms[a.task].min(latency(a));
    }
    if problem.strategy == Strategy::Compass {
        wait_ms = fastest_ms.iter().map(|&f| if f.is_finite() { f } else { 0.0 }).collect();
    }
    (0..n)
        .map(|t| {
            let after = problem
                .paths
                .iter()
                .filter_map(|p| p.tasks.iter().position(|&u| u == t).map(|i| &p.tasks[i + 1..]))
                .map(|rest| rest.iter().map(|&u| if fastest_ms[u].is_finite() { fastest_ms[u] } else { 0.0 }).sum())
                .fold(0.0, f64::max);
            let slo_share = || {
                problem
                    .paths
                    .iter()
                    .filter(|p| p.tasks.contains(&t))
                    .map(|p| p.tasks.iter().map(|&u| 2.0 * wait_ms[u]).sum::<f64>())
                    .filter(|&budget| budget > 0.0)
                    .map(|budget| problem.slo_latency_ms * 2.0 * wait_ms[t] / budget)
                    .reduce(f64::min)
                    .unwrap_or(2.0 * wait_ms[t])
            };
            let stale_ms = problem.staleness_ms.map_or_else(slo_share, |s| wait_ms[t] + s);
            TaskPolicy { wait_ms: wait_ms[t], drop_budget_ms: wait_ms[t] + after, stale_ms }
        })
        .collect()
}

/// Solve `problem` with its strategy.
pub fn solve(problem: &Problem, features: Features, options: &SolveOptions) -> Result<Solved, PlanError> {
    solve_from(problem, features, options, &[])
}

/// Solve `problem` with its strategy, from `previous`, the assignments of the running plan (a re-plan).
/// `features` (the A/S/T switches) are JigsawServe's; JigsawServe and Compass start from `previous`, IPA solves
/// its small program afresh at every adaptation, as the paper does.
pub fn solve_from(
    problem: &Problem,
    features: Features,
    options: &SolveOptions,
    previous: &[Assignment],
) -> Result<Solved, PlanError> {
    match problem.strategy {
        Strategy::Jigsaw => milp::solve_from(problem, features, options, previous),
        Strategy::Ipa => crate::ipa::solve(problem, options),
        Strategy::Compass => crate::compass::solve(problem, options, previous),
        Strategy::Gpulet => crate::gpulet::app::solve(problem),
        Strategy::Ppipe => crate::ppipe::app::solve(problem, options),
    }
}
