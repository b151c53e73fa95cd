//! Exhaustive search of the paper's model on small problems, to check the MILP against.
//!
//! It enumerates every multiset of instance types per task within the slice limit (no dominance pruning, only
//! the obviously valid cuts: a task's instances must be able to serve its least demand), routes each task's
//! demand greedily to its most accurate instances first, and scores the plan with the independent
//! [`crate::evaluate::evaluate`]. Greedy routing is optimal when a task's variants share their
//! multiplicative factors (demand is then fixed, and each Â(t) is best when the accurate instances are full);
//! otherwise it gives a lower bound on the optimum. Read literally ([`Weighting::Literal`]), routing is not a
//! choice: each type serves its capacity's share, and demand follows eq. (4) as printed.

use crate::baselines::{StaticBudgets, admits};
use crate::evaluate::{Assignment, evaluate_as};
use crate::problem::Problem;
use crate::spec::{Features, Weighting};

/// The best plans found.
#[derive(Debug, Clone, PartialEq)]
pub struct Best {
    /// Highest exact objective (14) over feasible plans.
    pub exact: Option<(f64, Vec<Assignment>)>,
    /// Highest objective under the MILP's linear accuracy bound, over plans whose bound meets SLO_a: what the
    /// MILP optimises, found without it.
    pub linear: Option<(f64, Vec<Assignment>)>,
    /// Plans enumerated.
    pub plans: usize,
}

/// Search every plan of `problem` in space `features`; gives up (returns `None`) past `limit` plans.
pub fn search(problem: &Problem, features: Features, limit: usize) -> Option<Best> {
    let n = problem.tasks.len();
    let budgets = (!features.graph_budgets).then(|| StaticBudgets::new(problem, features));
    let allowed = |t: usize, v: usize| features.accuracy_scaling || v == problem.tasks[t].best;
    let (demand_min, _) = problem.demand_bounds(allowed);
    let types: Vec<Vec<usize>> = (0..n)
        .map(|t| {
            (0..problem.configs.len())
                .filter(|&i| {
                    let c = &problem.configs[i];
                    c.task == t
                        && admits(problem, features, c)
                        && budgets.as_ref().is_none_or(|b| 2.0 * c.latency_ms <= b.latency_ms[t] + 1e-9)
                })
                .collect()
        })
        .collect();
    let mut best = Best { exact: None, linear: None, plans: 0 };
    let mut chosen: Chosen = vec![Vec::new(); n];
    let ok =
        enumerate_task(problem, &types, &demand_min, budgets.as_ref(), 0, problem.slices, &mut chosen, &mut |plan| {
            best.plans += 1;
            if best.plans > limit {
                return false;
            }
            score(problem, features, budgets.as_ref(), &demand_min, plan, &mut best);
            true
        });
    ok.then_some(best)
}

/// Chosen (instance type, count) pairs per task.
type Chosen = Vec<Vec<(usize, u32)>>;

/// Enumerate multisets of task `t`'s types (then the next task's) within `slices_left`.
#[allow(clippy::too_many_arguments)]
fn enumerate_task(
    problem: &Problem,
    types: &[Vec<usize>],
    demand_min: &[f64],
    budgets: Option<&StaticBudgets>,
    t: usize,
    slices_left: u32,
    chosen: &mut Chosen,
    visit: &mut dyn FnMut(&Chosen) -> bool,
) -> bool {
    if t == types.len() {
        return visit(chosen);
    }
    let cap = budgets.map_or(slices_left, |b| slices_left.min((b.slices[t] + 1e-9).floor() as u32));
    let mut counts = vec![0u32; types[t].len()];
    multisets(problem, &types[t], 0, cap, &mut counts, &mut |counts, used| {
        let capacity: f64 =
            types[t].iter().zip(counts).map(|(&i, &m)| f64::from(m) * problem.configs[i].throughput_rps).sum();
        if capacity + 1e-9 < demand_min[t] {
            return true;
        }
        chosen[t] = types[t].iter().zip(counts).filter(|(_, m)| **m > 0).map(|(&i, &m)| (i, m)).collect();
        enumerate_task(problem, types, demand_min, budgets, t + 1, slices_left - used, chosen, visit)
    })
}

fn multisets(
    problem: &Problem,
    types: &[usize],
    from: usize,
    cap: u32,
    counts: &mut Vec<u32>,
    visit: &mut dyn FnMut(&[u32], u32) -> bool,
) -> bool {
    let used: u32 =
        types.iter().zip(counts.iter()).map(|(&i, &m)| m * problem.segments[problem.configs[i].segment].slices).sum();
    if !visit(counts, used) {
        return false;
    }
    for k in from..types.len() {
        let cost = problem.segments[problem.configs[types[k]].segment].slices;
        if used + cost <= cap {
            counts[k] += 1;
            let go_on = multisets(problem, types, k, cap, counts, visit);
            counts[k] -= 1;
            if !go_on {
                return false;
            }
        }
    }
    true
}

/// Route greedily, evaluate exactly and under the linear bound, and keep the best of those within the static
/// accuracy budgets (a space without T, read as the paper writes it).
fn score(
    problem: &Problem,
    features: Features,
    budgets: Option<&StaticBudgets>,
    demand_min: &[f64],
    plan: &[Vec<(usize, u32)>],
    best: &mut Best,
) {
    let n = problem.tasks.len();
    let mut demand = vec![0.0; n];
    let mut assignments = Vec::new();
    for &t in &problem.topo {
        if problem.is_root(t) {
            demand[t] = problem.demand_rps;
        }
        let mut entries = plan[t].clone();
        entries.sort_by(|a, b| {
            let (ca, cb) = (&problem.configs[a.0], &problem.configs[b.0]);
            let acc = |c: &crate::problem::Config| problem.tasks[t].variants[c.variant].accuracy;
            acc(cb).total_cmp(&acc(ca)).then(a.0.cmp(&b.0))
        });
        let literal = features.weighting == Weighting::Literal;
        let capacity: f64 = entries.iter().map(|&(i, m)| f64::from(m) * problem.configs[i].throughput_rps).sum();
        let mut left = demand[t];
        let task = &problem.tasks[t];
        for (i, m) in entries {
            let c = &problem.configs[i];
            let held = f64::from(m) * c.throughput_rps;
            let rate = if literal { held.min(demand[t] * held / capacity) } else { left.min(held).max(0.0) };
            left -= rate;
            for (j, &s) in task.succs.iter().enumerate() {
                // (4): the average factor over what is served, or as printed, Σ F over the active types.
                demand[s] += if literal { demand[t] } else { rate } * task.variants[c.variant].factors[j];
            }
            assignments.push(Assignment {
                task: t,
                variant: c.variant,
                segment: c.segment,
                batch: c.batch,
                instances: m,
                rate_rps: rate,
            });
        }
    }
    let losses = linear_losses(problem, features, demand_min, &assignments);
    if budgets.is_some_and(|b| losses.iter().zip(&b.accuracy_loss).any(|(lost, budget)| lost > &(budget + 1e-9))) {
        return;
    }
    let eval = evaluate_as(problem, &assignments, features.weighting);
    if !eval.is_feasible() {
        return;
    }
    if best.exact.as_ref().is_none_or(|(o, _)| eval.objective > *o + 1e-12) {
        best.exact = Some((eval.objective, assignments.clone()));
    }
    let bound = linear_accuracy(problem, features, demand_min, &assignments);
    if bound >= problem.slo_accuracy - 1e-9 {
        let objective = problem.objective.alpha * bound - problem.objective.beta * f64::from(eval.slices);
        if best.linear.as_ref().is_none_or(|(o, _)| objective > *o + 1e-12) {
            best.linear = Some((objective, assignments));
        }
    }
}

/// The MILP's lower bound on A_obj, 1 − Σ_t G_t·ε_t, computed independently of the MILP: ε_t is the task's
/// routed accuracy loss over its least demand, or its worst active variant's loss where demand may vanish.
pub fn linear_accuracy(problem: &Problem, features: Features, demand_min: &[f64], plan: &[Assignment]) -> f64 {
    let loss = linear_losses(problem, features, demand_min, plan);
    let weight = |t: usize| problem.paths.iter().filter(|p| p.tasks.contains(&t)).map(|p| p.weight).sum::<f64>();
    1.0 - (0..loss.len()).map(|t| weight(t) * loss[t]).sum::<f64>()
}

/// Each task's ε_t as [`linear_accuracy`] counts it.
fn linear_losses(problem: &Problem, features: Features, demand_min: &[f64], plan: &[Assignment]) -> Vec<f64> {
    let n = problem.tasks.len();
    let mut loss = vec![0.0; n];
    for a in plan {
        let lost = 1.0 - problem.tasks[a.task].normalised_accuracy(a.variant);
        if demand_min[a.task] > 1e-9 || !features.accuracy_scaling {
            loss[a.task] += a.rate_rps * lost / demand_min[a.task].max(1e-9);
        } else if a.instances > 0 {
            loss[a.task] = f64::max(loss[a.task], lost);
        }
    }
    loss
}
