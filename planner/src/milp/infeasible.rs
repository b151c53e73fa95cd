//! Naming the binding constraint when no plan exists: simple necessary conditions first, each checked on its
//! own, then a re-solve without the accuracy SLO to tell the accuracy SLO from the slice limit.

use super::formulation::{Relax, solve_relaxed};
use crate::baselines::{StaticBudgets, admits};
use crate::problem::{Config, Problem};
use crate::solution::SolveOptions;
use crate::spec::Features;

/// Why `problem` has no plan in space `features`, in one sentence.
pub fn explain(problem: &Problem, features: Features, options: &SolveOptions) -> String {
    let n = problem.tasks.len();
    let space = format!("in the {features} space");
    if problem.slo_accuracy > 1.0 + 1e-9 {
        return format!(
            "accuracy SLO {} is above 1, the accuracy of the most accurate variants (it is a fraction of the best)",
            problem.slo_accuracy
        );
    }
    let admitted = |t: usize| problem.configs.iter().filter(move |c| c.task == t && admits(problem, features, c));
    if let Some(t) = (0..n).find(|&t| admitted(t).next().is_none()) {
        let what = if features.spatial { "" } else { " on a whole device (7g.80gb with one process, or a whole host)" };
        return format!("task `{}` has no profiled instance type{what} {space}", problem.tasks[t].name);
    }
    let fastest = |t: usize| admitted(t).map(|c| c.latency_ms).fold(f64::INFINITY, f64::min);
    // Latency: the fastest path.
    if let Some((p, l)) = problem
        .paths
        .iter()
        .map(|p| (p, p.tasks.iter().map(|&t| 2.0 * fastest(t)).sum::<f64>()))
        .filter(|(_, l)| *l > problem.slo_latency_ms)
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        return format!(
            "latency SLO {} ms is below the fastest path, {:.0} ms (twice each task's fastest batch latency), through {}",
            fmt_ms(problem.slo_latency_ms),
            l,
            problem.path_name(&p.tasks)
        );
    }
    let budgets = (!features.graph_budgets).then(|| StaticBudgets::new(problem, features));
    if let Some(b) = &budgets
        && let Some(t) = (0..n).find(|&t| 2.0 * fastest(t) > b.latency_ms[t])
    {
        // Appendix B splits the SLO by each task's slowest type of its most accurate variant (read strongly:
        // that fits the SLO, so a task whose most accurate variant has none gets no share at all).
        let name = &problem.tasks[t].name;
        let what = if b.latency_ms[t] <= 0.0 {
            "is 0 ms: its most accurate variant has no instance type within the latency SLO, and Appendix B splits \
             the SLO by those"
                .to_string()
        } else {
            format!("is {:.0} ms, below twice its fastest batch latency, {:.0} ms", b.latency_ms[t], 2.0 * fastest(t))
        };
        return format!(
            "the static latency budget of task `{name}` (Appendix B) {what}; T (task-graph-informed budgets) would lift it"
        );
    }
    if let Some(b) = &budgets {
        let smallest = |t: usize| admitted(t).map(|c| problem.segments[c.segment].slices).min().unwrap_or(0);
        if let Some(t) = (0..n).find(|&t| f64::from(smallest(t)) > b.slices[t] + 1e-9) {
            return format!(
                "the static slice budget of task `{}` (Appendix B), {:.1} slices, is below its smallest segment, {} slices {space}; T (task-graph-informed budgets) would lift it",
                problem.tasks[t].name,
                b.slices[t],
                smallest(t)
            );
        }
    }
    // Slices: the fewest each task needs for its least demand with types that fit the latency SLO.
    let allowed = |t: usize, v: usize| features.accuracy_scaling || v == problem.tasks[t].best;
    let (demand_min, _) = problem.demand_bounds(allowed);
    let latency_room = |c: &Config| {
        let others: f64 = problem
            .paths
            .iter()
            .filter(|p| p.tasks.contains(&c.task))
            .map(|p| p.tasks.iter().filter(|&&t| t != c.task).map(|&t| 2.0 * fastest(t)).sum::<f64>())
            .fold(0.0, f64::max);
        let budget = budgets.as_ref().map_or(f64::INFINITY, |b| b.latency_ms[c.task]);
        2.0 * c.latency_ms + others <= problem.slo_latency_ms && 2.0 * c.latency_ms <= budget
    };
    let need: Vec<f64> = (0..n)
        .map(|t| {
            let per_rps = admitted(t)
                .filter(|c| latency_room(c))
                .map(|c| f64::from(problem.segments[c.segment].slices) / c.throughput_rps)
                .fold(f64::INFINITY, f64::min);
            if demand_min[t] > 0.0 { (demand_min[t] * per_rps - 1e-9).ceil() } else { 0.0 }
        })
        .collect();
    if let Some(b) = &budgets
        && let Some(t) = (0..n).find(|&t| need[t] > b.slices[t] + 1e-9)
    {
        return format!(
            "task `{}` needs at least {} slices for {:.1} req/s within its latency budget, but its static slice budget (Appendix B) is {:.1}",
            problem.tasks[t].name, need[t], demand_min[t], b.slices[t]
        );
    }
    let total: f64 = need.iter().sum();
    if total > f64::from(problem.slices) {
        return format!(
            "demand {:.1} req/s needs at least {total} slices within the latency SLO {space}, but only {} are available",
            problem.demand_rps, problem.slices
        );
    }
    let relaxed = solve_relaxed(problem, features, options, Relax { accuracy: true }, &[]);
    let static_accuracy = budgets.as_ref().is_some_and(StaticBudgets::budgets_accuracy);
    if features.accuracy_scaling && relaxed.is_ok() && static_accuracy {
        return format!(
            "the tasks cannot all stay within their static accuracy budgets (the allowed loss {:.3} split along \
             each path, as Appendix B splits latency) within {} slices at {:.1} req/s {space}; T \
             (task-graph-informed budgets) would lift them",
            1.0 - problem.slo_accuracy,
            problem.slices,
            problem.demand_rps
        );
    }
    if features.accuracy_scaling && relaxed.is_ok() {
        return format!(
            "the accuracy SLO of {} cannot be met within {} slices at {:.1} req/s (less accurate variants would fit)",
            problem.slo_accuracy, problem.slices, problem.demand_rps
        );
    }
    format!(
        "no plan meets the latency SLO of {} ms with {:.1} req/s within {} slices {space} (the slice limit and the latency SLO bind together)",
        fmt_ms(problem.slo_latency_ms),
        problem.demand_rps,
        problem.slices
    )
}

fn fmt_ms(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x}") }
}
