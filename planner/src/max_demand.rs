//! Analytical evaluation (paper §5, Figure 3): the largest demand each A/S/T space can serve, by bisection on
//! the MILP's feasibility, and the slices the space's own plan uses there.

use std::fmt::Write as _;

use crate::error::PlanError;
use crate::problem::Problem;
use crate::solution::{Assignment, SolveOptions};
use crate::spec::{Features, Strategy, Uninformed, Weighting};
use crate::strategy::solve_from;

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
    /// A plan at that demand: the first feasible one the bisection found, or, after [`MaxDemand::own_plan`],
    /// the space's own choice by its objective (14), as Figure 3 plots it.
    pub plan: Vec<Assignment>,
    /// Slices `plan` uses.
    pub slices_used: u32,
    /// Whether `plan` is the space's own choice, proven optimal.
    pub optimal: bool,
    /// The lowest demand at which a solve hit its time limit without an answer: the space may serve more than
    /// `demand_rps`, which is then a lower bound.
    pub timed_out_at: Option<f64>,
    /// Why the space serves no demand at all ([`solve_from`]'s diagnosis at 1 req/s), when it serves none.
    pub why_none: Option<String>,
}

impl MaxDemand {
    /// Re-solve at the demand found with the space's objective, starting from the bisection's plan: the slices
    /// the space itself would use there. A re-solve cut by `time_limit_s` keeps the best plan it found.
    pub fn own_plan(mut self, problem: &Problem, time_limit_s: f64) -> Result<Self, PlanError> {
        if self.demand_rps <= 0.0 {
            return Ok(self);
        }
        let at = problem.clone().with_demand(self.demand_rps, problem.slices);
        let options = SolveOptions { time_limit_s, ..SolveOptions::default() };
        match solve_from(&at, self.features, &options, &self.plan) {
            Ok(solved) => {
                self.slices_used = slices(problem, &solved.assignments);
                self.plan = solved.assignments;
                self.optimal = solved.optimal;
            }
            Err(PlanError::TimeLimit(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(self)
    }
}

/// What a Compass plan serves within its classes' SLOs, req/s.
fn served(solved: &crate::solution::Solved) -> f64 {
    solved.classes.iter().map(|c| c.served_rps).sum()
}

fn slices(problem: &Problem, plan: &[Assignment]) -> u32 {
    plan.iter().map(|a| a.instances * problem.segments[a.segment].slices).sum()
}

/// Bisection to `rel_tol` on the demand at which `problem` stays feasible in `features` (for Compass, which
/// always plans, the demand its plan serves in full within the classes' SLOs).
pub fn max_demand(
    problem: &Problem,
    features: Features,
    rel_tol: f64,
    time_limit_s: f64,
) -> Result<MaxDemand, PlanError> {
    let feasibility = SolveOptions { time_limit_s, feasibility_only: true, diagnose: false, ..SolveOptions::default() };
    let mut timed_out_at: Option<f64> = None;
    let mut feasible = |r: f64| -> Result<Option<Vec<Assignment>>, PlanError> {
        let p = problem.clone().with_demand(r, problem.slices);
        match solve_from(&p, features, &feasibility, &[]) {
            // Compass plans for the most goodput its slices serve: a demand is served when all of it is.
            Ok(s) if problem.strategy == Strategy::Compass && served(&s) < r * (1.0 - 1e-4) => Ok(None),
            Ok(s) => Ok(Some(s.assignments)),
            Err(PlanError::Infeasible(_)) => Ok(None),
            // Not shown infeasible, but no plan either: the bracket closes below `r`, which the table says.
            Err(PlanError::TimeLimit(_)) => {
                timed_out_at = Some(timed_out_at.map_or(r, |t| t.min(r)));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    // Grow until infeasible, then halve the bracket; a space that cannot serve 1 req/s serves none (at
    // 840 slices that is a latency budget, not capacity).
    let (mut lo, mut hi) = (1.0, 1.0);
    let Some(mut plan) = feasible(hi)? else {
        let diagnosed = SolveOptions { diagnose: true, ..feasibility };
        let why = match solve_from(&problem.clone().with_demand(hi, problem.slices), features, &diagnosed, &[]) {
            Err(PlanError::Infeasible(why)) => why,
            Ok(s) => format!("its plan at {hi} req/s serves {:.2} req/s within its classes' SLOs", served(&s)),
            _ => format!("a solve at {hi} req/s hit the {time_limit_s} s time limit"),
        };
        return Ok(MaxDemand {
            features,
            demand_rps: 0.0,
            plan: Vec::new(),
            slices_used: 0,
            optimal: true,
            timed_out_at,
            why_none: Some(why),
        });
    };
    loop {
        hi *= 4.0;
        if hi > 1e9 {
            return Err(PlanError::Input("demand grows without bound: check the profile throughputs".into()));
        }
        match feasible(hi)? {
            Some(p) => (lo, plan) = (hi, p),
            None => break,
        }
    }
    while hi - lo > rel_tol * hi {
        let mid = 0.5 * (lo + hi);
        match feasible(mid)? {
            Some(p) => (lo, plan) = (mid, p),
            None => hi = mid,
        }
    }
    let slices_used = slices(problem, &plan);
    Ok(MaxDemand { features, demand_rps: lo, plan, slices_used, optimal: false, timed_out_at, why_none: None })
}

/// The eight spaces' maximum demand as a table normalised to Unopt, beside the paper's Figure 3; the spaces
/// without T budget their tasks as `uninformed` says, and every space weights instance types as `weighting`
/// says.
pub fn table(
    problem: &Problem,
    (uninformed, weighting): (Uninformed, Weighting),
    rel_tol: f64,
    time_limit_s: f64,
) -> Result<(Vec<MaxDemand>, String), PlanError> {
    let rows = Features::combinations()
        .into_iter()
        .map(|f| {
            let f = f.with_uninformed(uninformed).with_weighting(weighting);
            max_demand(problem, f, rel_tol, time_limit_s)?.own_plan(problem, time_limit_s)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let unopt = rows[0].demand_rps;
    let w = rows.iter().map(|r| r.features.to_string().chars().count()).max().unwrap_or(0).max(13);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "max demand of `{}` on {} slices ({} H100s), profiles: {}; spaces without T budgeted {}; {}",
        problem.app,
        problem.slices,
        problem.slices / 7,
        problem.profile_source,
        match uninformed {
            Uninformed::Paper => "as Appendix B writes (latency and accuracy split along paths)",
            Uninformed::Strong => "strongly (latency split over types that fit the SLO, accuracy end-to-end)",
        },
        match weighting {
            Weighting::Served => "F̂ and Ĥ weighted by served rates",
            Weighting::Literal => "F̂ and Ĥ as printed (F summed over active types, Ĥ = M·H)",
        }
    );
    let _ = writeln!(
        s,
        "{:<w$} {:>12} {:>9} {:>15} {:>12}",
        "space", "max req/s", "× Unopt", "paper (traffic)", "slices used"
    );
    for (r, paper) in rows.iter().zip(PAPER_FIGURE_3) {
        let ratio = if unopt > 0.0 { format!("{:.2}×", r.demand_rps / unopt) } else { "n/a".into() };
        let at_least = if r.timed_out_at.is_some() { "≥ " } else { "" };
        let _ = writeln!(
            s,
            "{:<w$} {:>12} {:>9} {:>14.2}× {:>7} ({:>3.0}%){}",
            r.features.to_string(),
            format!("{at_least}{:.1}", r.demand_rps),
            ratio,
            paper,
            r.slices_used,
            100.0 * f64::from(r.slices_used) / f64::from(problem.slices.max(1)),
            if r.optimal { "" } else { "  (slices: best plan within the time limit)" }
        );
    }
    for r in &rows {
        if let Some(at) = r.timed_out_at {
            let _ = writeln!(s, "{}: a solve at {at:.1} req/s hit the {time_limit_s} s time limit", r.features);
        }
        if let Some(why) = &r.why_none {
            let _ = writeln!(s, "{} serves no demand: {why}", r.features);
        }
    }
    Ok((rows, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::milp::solve;
    use crate::profile::ProfileRow;
    use crate::spec::*;

    /// One task on `cpu:1` (100 req/s) and `cpu:2` (150 req/s), 10 ms a batch, on four cores.
    fn problem(slo_ms: f64) -> Problem {
        let row = |segment: &str, throughput_rps: f64| ProfileRow {
            slot: "t".into(),
            variant: "v".into(),
            segment: segment.into(),
            batch: 1,
            p50_ms: 10.0,
            p95_ms: 10.0,
            throughput_rps,
            device: "test".into(),
            cpu_ms: None,
        };
        let spec = PlanSpec {
            app: AppSpec {
                name: "one".into(),
                slo_latency_ms: slo_ms,
                slo_accuracy: 0.5,
                tasks: vec![TaskSpec {
                    name: "t".into(),
                    slot: None,
                    variants: vec![VariantSpec { name: "v".into(), accuracy: 1.0, factors: Default::default() }],
                }],
                edges: Vec::new(),
                paths: None,
                planner: Default::default(),
                classes: Vec::new(),
                staleness_ms: None,
            },
            segments: ["cpu:1", "cpu:2"].map(|name| SegmentSpec { name: name.into(), slices: None }).into(),
            resources: Resources { slices: 4, cores_per_host: Some(4), ..Resources::default() },
            demand: DemandSpec { windows: vec![1.0], slack: Some(0.0) },
            objective: Objective::default(),
            ipa: Default::default(),
            compass: Default::default(),
            batch_sizes: None,
        };
        Problem::new(&spec, &[row("cpu:1", 100.0), row("cpu:2", 150.0)], "test").unwrap()
    }

    #[test]
    fn the_largest_demand_is_found_and_its_slices_are_the_spaces_own_plan() {
        let problem = problem(100.0);
        let found = max_demand(&problem, Features::ALL, 0.01, 10.0).unwrap().own_plan(&problem, 10.0).unwrap();
        // Four `cpu:1` instances serve 400 req/s; the bisection stops within 1% below it.
        assert!((396.0..=400.0).contains(&found.demand_rps), "{found:?}");
        assert!(found.optimal && found.timed_out_at.is_none() && found.why_none.is_none(), "{found:?}");
        let own = solve(&problem.clone().with_demand(found.demand_rps, 4), Features::ALL, &SolveOptions::default());
        assert_eq!(found.slices_used, slices(&problem, &own.unwrap().assignments));
        assert_eq!(found.slices_used, 4);
    }

    #[test]
    fn a_space_that_serves_nothing_says_why() {
        let problem = problem(15.0);
        let found = max_demand(&problem, Features::ALL, 0.01, 10.0).unwrap();
        assert_eq!((found.demand_rps, found.slices_used), (0.0, 0));
        let why = found.why_none.unwrap();
        assert!(why.contains("latency SLO 15 ms is below the fastest path"), "{why}");
        let (_, table) = table(&problem, (Uninformed::Paper, Weighting::Served), 0.01, 10.0).unwrap();
        assert!(table.contains("A+S+T serves no demand: latency SLO 15 ms"), "{table}");
    }
}
