//! An independent evaluator of the paper's model, equations (1)–(14), on a concrete plan.
//!
//! It shares nothing with the MILP but the validated [`Problem`]: it looks every instance type up in the profile
//! table again, propagates demand through the graph in topological order, and computes the exact (non-linear)
//! accuracies. Tests re-check every plan the MILP returns with it, and exhaustive search scores plans with it.
//!
//! Requests of a task are split among its instance types by the rates the plan states (the router's weights),
//! so Ĥ in (9)–(10) and the weights of the average factor F̂ in (4) are the served rates; a served rate may not
//! exceed M·H. [`evaluate_as`] with [`Weighting::Literal`] reads (4) and (9)–(10) as printed instead.

use crate::problem::Problem;
use crate::spec::{Strategy, Weighting};

// Kept while `jig-sim` still names it here; its home is `crate::solution`.
use crate::solution::Assignment;

/// The model's quantities on one plan, and the constraints it breaks. Per-task vectors follow
/// [`Problem::tasks`], per-path ones [`Problem::paths`].
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// L̂(t) (2), ms.
    pub task_latency_ms: Vec<f64>,
    /// R̂(t) (5), req/s.
    pub task_demand_rps: Vec<f64>,
    /// Â(t) (10) normalised by the task's best variant.
    pub task_accuracy: Vec<f64>,
    /// Σ 2·L̂(t) along each path (3), ms; for IPA, Σ of each task's batch latency and wait for a full batch.
    pub path_latency_ms: Vec<f64>,
    /// A_p (11), in accuracy units.
    pub path_accuracy: Vec<f64>,
    /// A_obj (12): the end-to-end accuracy, normalised so that the best variants score 1.
    pub accuracy: f64,
    /// Σ Ŝ(t) (7)–(8): the slices (GPU slices or CPU cores) the instances take.
    pub slices: u32,
    /// Objective (14): α·A_obj − β·slices; for IPA, its (9): α·100·A_obj − β·cores − δ·Σ batch; for Compass,
    /// the goodput: req/s served within their classes' SLOs.
    pub objective: f64,
    /// Every constraint the plan breaks, in words; empty when feasible.
    pub violations: Vec<String>,
}

impl Evaluation {
    /// Whether the plan breaks none of the constraints.
    pub fn is_feasible(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Relative tolerance on rates, latencies and accuracies (solver round-off).
const TOL: f64 = 1e-6;

fn close_enough(lhs: f64, rhs: f64) -> bool {
    lhs <= rhs + TOL * rhs.abs().max(1.0)
}

/// The worst-case wait of a request for a full batch of `batch` at `demand_rps` (Eq. 7), ms: the first
/// request of a batch waits for b − 1 more. Infinite where no demand can arrive.
pub fn queueing_ms(batch: u32, demand_rps: f64) -> f64 {
    if batch <= 1 {
        0.0
    } else if demand_rps > 0.0 {
        1e3 * f64::from(batch - 1) / demand_rps
    } else {
        f64::INFINITY
    }
}

/// Evaluate equations (1)–(14) for `plan` on `problem`, weighting instance types by their served rates.
pub fn evaluate(problem: &Problem, plan: &[Assignment]) -> Evaluation {
    evaluate_as(problem, plan, Weighting::Served)
}

/// Evaluate equations (1)–(14) for `plan` on `problem`, with (4) and (9)–(10) read as `weighting` says. Read
/// literally, F̂(t,t′) sums F over the task's active types, Â(t) weights each type by its capacity M·H, and
/// each task's requests must be routed in proportion to those capacities (else what is served would not have
/// the accuracy (10) computes).
pub fn evaluate_as(problem: &Problem, plan: &[Assignment], weighting: Weighting) -> Evaluation {
    let literal = weighting == Weighting::Literal;
    let n = problem.tasks.len();
    let mut violations = Vec::new();
    let mut latency = vec![0.0_f64; n];
    // What (3) sums along a path per task: 2·L̂ (a batch waits at most one batch time), or for IPA the batch's
    // latency plus the wait for a full batch at the least demand the task can see (Eq. 7).
    let mut budget = vec![0.0_f64; n];
    let least_demand = match problem.strategy {
        Strategy::Ipa => problem.demand_bounds(|_, _| true).0,
        Strategy::Jigsaw | Strategy::Compass | Strategy::Gpulet | Strategy::Ppipe => Vec::new(),
    };
    // Compass serves part of the demand, each class within SLOs of its own: `compass::check` checks those.
    let whole_app = problem.strategy != Strategy::Compass;
    let mut capacity_ok = true;
    let mut slices = 0u32;
    let mut served = vec![0.0_f64; n];
    let mut accuracy_mass = vec![0.0_f64; n];
    let mut emitted = vec![0.0_f64; n]; // requests each task receives from its predecessors: Σ R̂(t)·F̂(t,t′)
    // Literally: each task's capacity Σ M·H, and per successor Σ F over its active types.
    let mut capacity = vec![0.0_f64; n];
    let mut active_factors: Vec<Vec<f64>> = problem.tasks.iter().map(|t| vec![0.0; t.succs.len()]).collect();

    for a in plan.iter().filter(|a| a.instances > 0 || a.rate_rps > 0.0) {
        let task = &problem.tasks[a.task];
        let Some(c) = problem.config(a.task, a.variant, a.segment, a.batch) else {
            violations.push(format!(
                "task `{}`: no profile for variant `{}` on `{}` batch {}",
                task.name, task.variants[a.variant].name, problem.segments[a.segment].name, a.batch
            ));
            continue;
        };
        if a.instances > 0 {
            latency[a.task] = latency[a.task].max(c.latency_ms); // (1)–(2)
            let own = match problem.strategy {
                Strategy::Ipa => c.latency_ms + queueing_ms(a.batch, least_demand[a.task]),
                Strategy::Jigsaw | Strategy::Compass | Strategy::Gpulet | Strategy::Ppipe => 2.0 * c.latency_ms,
            };
            budget[a.task] = budget[a.task].max(own);
        }
        if !(a.rate_rps >= 0.0 && close_enough(a.rate_rps, f64::from(a.instances) * c.throughput_rps)) {
            capacity_ok = false;
            violations.push(format!(
                "task `{}`: {:.3} req/s routed to {} × {} on `{}` batch {}, which serve {:.3} req/s",
                task.name,
                a.rate_rps,
                a.instances,
                task.variants[a.variant].name,
                problem.segments[a.segment].name,
                a.batch,
                f64::from(a.instances) * c.throughput_rps
            ));
        }
        slices += a.instances * problem.segments[a.segment].slices; // (7)
        served[a.task] += a.rate_rps;
        let held = f64::from(a.instances) * c.throughput_rps;
        capacity[a.task] += held;
        // (9): Ĥ is the served rate, or literally the capacity M·H.
        accuracy_mass[a.task] += if literal { held } else { a.rate_rps } * task.variants[a.variant].accuracy;
        for (i, &s) in task.succs.iter().enumerate() {
            let factor = task.variants[a.variant].factors[i];
            if literal {
                if a.instances > 0 {
                    active_factors[a.task][i] += factor;
                }
            } else {
                emitted[s] += a.rate_rps * factor; // (4)–(5)
            }
        }
    }

    // (5)–(6): demand reaching each task, served in full.
    let mut demand = vec![0.0; n];
    for &t in &problem.topo {
        demand[t] = if problem.is_root(t) { problem.demand_rps } else { emitted[t] };
        if literal {
            for (i, &s) in problem.tasks[t].succs.iter().enumerate() {
                emitted[s] += demand[t] * active_factors[t][i]; // (4) as printed, then (5)
            }
        }
        if whole_app && (served[t] - demand[t]).abs() > TOL * demand[t].max(1.0) && capacity_ok {
            violations.push(format!(
                "task `{}`: demand {:.3} req/s but {:.3} req/s routed to its instances",
                problem.tasks[t].name, demand[t], served[t]
            ));
        }
    }
    if literal && capacity_ok {
        for a in plan.iter().filter(|a| a.instances > 0 && capacity[a.task] > 0.0) {
            let Some(c) = problem.config(a.task, a.variant, a.segment, a.batch) else { continue };
            let share = demand[a.task] * f64::from(a.instances) * c.throughput_rps / capacity[a.task];
            if (a.rate_rps - share).abs() > TOL * demand[a.task].max(1.0) {
                violations.push(format!(
                    "task `{}`: {:.3} req/s routed to {} on `{}` batch {}, not its share {share:.3} of the capacity",
                    problem.tasks[a.task].name,
                    a.rate_rps,
                    problem.tasks[a.task].variants[a.variant].name,
                    problem.segments[a.segment].name,
                    a.batch
                ));
            }
        }
    }

    // (3)
    let path_latency: Vec<f64> = problem.paths.iter().map(|p| p.tasks.iter().map(|&t| budget[t]).sum()).collect();
    for (p, &l) in problem.paths.iter().zip(&path_latency) {
        if whole_app && !close_enough(l, problem.slo_latency_ms) {
            violations.push(format!(
                "path {}: {l:.1} ms exceeds the latency SLO of {} ms",
                problem.path_name(&p.tasks),
                problem.slo_latency_ms
            ));
        }
    }
    // A GPU that MIG instances priced 8 slices fill holds 7 (`jig_policy::mig::Layout::slices`).
    let kinds = plan.iter().flat_map(|a| std::iter::repeat_n(&problem.segments[a.segment].kind, a.instances as usize));
    let counts = crate::placement::mig_counts(kinds);
    if let Some(existing) = problem.mig_instances {
        for ((profile, &n), &free) in crate::spec::MigProfile::ALL.iter().zip(&counts).zip(&existing) {
            if n > free {
                violations.push(format!("{n} MIG instances of {profile} used, {free} exist"));
            }
        }
    }
    let priced: u32 = crate::spec::MigProfile::ALL.iter().zip(&counts).map(|(p, n)| p.effective_slices() * n).sum();
    slices = slices.saturating_sub(priced - crate::placement::mig_slices(&counts));
    // gpu-lets and PPipe split whole GPUs into shares whose percents sum to 100 (20/80, 50/50, four 25%): their
    // shares are priced by their sum, seven slices a GPU, where each share alone rounds up (50% is 4 of 7).
    if matches!(problem.strategy, Strategy::Gpulet | Strategy::Ppipe) {
        let (each, percent) = plan.iter().fold((0, 0), |(each, percent), a| match problem.segments[a.segment].kind {
            crate::spec::SegmentKind::Mps { percent: p, .. } => {
                (each + a.instances * problem.segments[a.segment].slices, percent + a.instances * u32::from(p))
            }
            _ => (each, percent),
        });
        slices = slices - each + (percent * 7).div_ceil(100);
    }
    // (8)
    if slices > problem.slices {
        violations.push(format!("{slices} slices used, {} available", problem.slices));
    }
    // (10)–(12)
    let task_accuracy: Vec<f64> = (0..n)
        .map(|t| {
            let best = problem.tasks[t].best_accuracy();
            let weight = if literal { capacity[t] } else { served[t] };
            if weight > 0.0 { accuracy_mass[t] / weight / best } else { 1.0 }
        })
        .collect();
    let path_accuracy: Vec<f64> = problem
        .paths
        .iter()
        .map(|p| p.tasks.iter().map(|&t| task_accuracy[t] * problem.tasks[t].best_accuracy()).product())
        .collect();
    let accuracy: f64 =
        problem.paths.iter().map(|p| p.weight * p.tasks.iter().map(|&t| task_accuracy[t]).product::<f64>()).sum();
    // (13)
    if whole_app && accuracy < problem.slo_accuracy - TOL {
        violations.push(format!(
            "accuracy {:.4} of the best is below the accuracy SLO of {}",
            accuracy, problem.slo_accuracy
        ));
    }
    let objective = match problem.strategy {
        Strategy::Jigsaw | Strategy::Gpulet | Strategy::Ppipe => {
            problem.objective.alpha * accuracy - problem.objective.beta * f64::from(slices)
        }
        Strategy::Ipa => {
            let batches: u32 = plan.iter().filter(|a| a.instances > 0).map(|a| a.batch).sum();
            let w = problem.ipa;
            w.alpha * 100.0 * accuracy - w.beta * f64::from(slices) - w.delta * f64::from(batches)
        }
        Strategy::Compass => (0..n).filter(|&t| problem.is_root(t)).map(|t| served[t]).sum(),
    };
    Evaluation {
        task_latency_ms: latency,
        task_demand_rps: demand,
        task_accuracy,
        path_latency_ms: path_latency,
        path_accuracy,
        accuracy,
        slices,
        objective,
        violations,
    }
}
