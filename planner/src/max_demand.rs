//! Analytical evaluation (paper §5, Figure 3): the largest demand each A/S/T space can serve, by bisection on
//! the MILP's feasibility.

use std::fmt::Write as _;

use crate::error::PlanError;
use crate::milp::{Relax, SolveOptions, solve_relaxed};
use crate::problem::Problem;
use crate::spec::Features;

/// The paper's Figure 3 (traffic analysis, 840 slices): maximum demand normalised to Unopt, in the order of
/// [`Features::combinations`] (Unopt, S, A, T, A+T, S+T, A+S, A+S+T).
pub const PAPER_FIGURE_3: [f64; 8] = [1.0, 5.25, 1.6, 1.1, 1.9, 7.8, 12.0, 21.6];

/// The largest demand found for one space.
#[derive(Debug, Clone, PartialEq)]
pub struct MaxDemand {
    /// The configuration space.
    pub features: Features,
    /// req/s at the roots (R, after slack).
    pub demand_rps: f64,
    /// Slices the feasible plan at that demand uses.
    pub slices_used: u32,
    /// Whether a solve hit its time limit without an answer (counted as infeasible).
    pub timed_out: bool,
}

/// Bisection to `rel_tol` on the demand at which `problem` stays feasible in `features`.
pub fn max_demand(
    problem: &Problem,
    features: Features,
    rel_tol: f64,
    time_limit_s: f64,
) -> Result<MaxDemand, PlanError> {
    let options = SolveOptions { time_limit_s, feasibility_only: true, ..SolveOptions::default() };
    let mut timed_out = false;
    let mut feasible = |r: f64| -> Result<Option<u32>, PlanError> {
        let p = problem.clone().with_demand(r, problem.slices);
        match solve_relaxed(&p, features, &options, Relax::default(), &[]) {
            Ok(s) => Ok(Some(s.assignments.iter().map(|a| a.instances * p.segments[a.segment].slices).sum())),
            Err(PlanError::Infeasible(_)) => Ok(None),
            Err(PlanError::TimeLimit(_)) => {
                timed_out = true;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    // Grow until infeasible, then halve the bracket; a space that cannot serve 1 req/s serves none (at
    // 840 slices that is a latency budget, not capacity).
    let (mut lo, mut lo_slices, mut hi) = (0.0, 0, 1.0);
    if feasible(hi)?.is_none() {
        return Ok(MaxDemand { features, demand_rps: 0.0, slices_used: 0, timed_out });
    }
    while let Some(s) = feasible(hi)? {
        (lo, lo_slices) = (hi, s);
        hi *= 4.0;
        if hi > 1e9 {
            return Err(PlanError::Input("demand grows without bound: check the profile throughputs".into()));
        }
    }
    while hi - lo > rel_tol * hi {
        let mid = 0.5 * (lo + hi);
        match feasible(mid)? {
            Some(s) => (lo, lo_slices) = (mid, s),
            None => hi = mid,
        }
    }
    Ok(MaxDemand { features, demand_rps: lo, slices_used: lo_slices, timed_out })
}

/// The eight spaces' maximum demand as a table normalised to Unopt, beside the paper's Figure 3.
pub fn table(problem: &Problem, rel_tol: f64, time_limit_s: f64) -> Result<(Vec<MaxDemand>, String), PlanError> {
    let rows = Features::combinations()
        .into_iter()
        .map(|f| max_demand(problem, f, rel_tol, time_limit_s))
        .collect::<Result<Vec<_>, _>>()?;
    let unopt = rows[0].demand_rps;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "max demand of `{}` on {} slices ({} H100s), profiles: {}",
        problem.app,
        problem.slices,
        problem.slices / 7,
        problem.profile_source
    );
    let _ = writeln!(
        s,
        "{:<8} {:>12} {:>9} {:>15} {:>12}",
        "space", "max req/s", "× Unopt", "paper (traffic)", "slices used"
    );
    for (r, paper) in rows.iter().zip(PAPER_FIGURE_3) {
        let ratio = if unopt > 0.0 { format!("{:.2}×", r.demand_rps / unopt) } else { "n/a".into() };
        let _ = writeln!(
            s,
            "{:<8} {:>12.1} {:>9} {:>14.2}× {:>7} ({:>3.0}%){}",
            r.features.to_string(),
            r.demand_rps,
            ratio,
            paper,
            r.slices_used,
            100.0 * f64::from(r.slices_used) / f64::from(problem.slices.max(1)),
            if r.timed_out { "  (a solve hit its time limit)" } else { "" }
        );
    }
    if unopt <= 0.0 {
        let _ = writeln!(
            s,
            "(Unopt serves no demand: Appendix B's static latency budgets leave a task below its fastest instance)"
        );
    }
    Ok((rows, s))
}
