//! Each bin's plan: the MILP re-plan, started from the last plan that met its demand, or, when no plan meets the
//! prediction, the plan for the largest demand the space serves (as the paper's baselines run, §5).

use std::collections::BTreeMap;

use jig_planner::error::PlanError;
use jig_planner::max_demand::max_demand;
use jig_planner::problem::Problem;
use jig_planner::solution::Assignment;
use jig_planner::solution::ClassPlan;
use jig_planner::solution::PipelinePlan;
use jig_planner::solution::Solved;
use jig_planner::{solve, solve_from};

use super::options::SimOptions;

/// A plan as a bin runs it.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    /// Its instances.
    pub(super) assignments: Vec<Assignment>,
    /// Its query classes' routes (Compass's plans).
    pub(super) classes: Vec<ClassPlan>,
    /// Its pooled pipelines (PPipe's plans).
    pub(super) pipelines: Vec<PipelinePlan>,
    /// The demand it was made for.
    pub(super) demand_rps: f64,
    /// Whether it meets the demand predicted.
    pub(super) replanned: bool,
}

/// Plans per bin, falling back to the plan for the largest serviceable demand when none meets the prediction.
pub(super) struct Replanner<'a> {
    problem: &'a Problem,
    options: &'a SimOptions,
    /// Per slice budget, the plan for the largest demand it serves, once a plan fell short.
    largest: BTreeMap<u32, Planned>,
    /// The last plan that met its demand: the next solve starts from it, as the controller's re-plans do.
    last: Vec<Assignment>,
    /// Why the space serves no demand at all, once a fallback found that.
    pub(super) serves_nothing: Option<String>,
}

impl<'a> Replanner<'a> {
    /// A re-planner of `problem` under `options`, with no plan made yet.
    pub(super) fn new(problem: &'a Problem, options: &'a SimOptions) -> Self {
        Replanner { problem, options, largest: BTreeMap::new(), last: Vec::new(), serves_nothing: None }
    }

    /// The plan's instances, its query classes' routes (Compass's plans), the demand it was made for, and
    /// whether it meets `demand`.
    pub(super) fn plan(&mut self, demand: f64, slices: u32) -> Result<Planned, PlanError> {
        let (problem, options) = (self.problem, self.options);
        let at = |demand: f64| problem.clone().with_demand(demand, slices);
        match solve_from(&at(demand), options.features, &options.solve, &self.last) {
            Ok(solved) => {
                self.last.clone_from(&solved.assignments);
                let Solved { assignments, classes, pipelines, .. } = solved;
                Ok(Planned { assignments, classes, pipelines, demand_rps: demand, replanned: true })
            }
            Err(PlanError::Infeasible(_) | PlanError::TimeLimit(_)) => {
                if !self.largest.contains_key(&slices) {
                    let within = at(problem.demand_rps);
                    let found = max_demand(&within, options.features, 0.01, options.solve.time_limit_s)?;
                    let max = found.demand_rps;
                    // A space that serves nothing runs no instances, and every request is refused.
                    let (assignments, pipelines) = if max <= 0.0 {
                        self.serves_nothing = Some(found.why_none.unwrap_or_else(|| "no plan at any demand".into()));
                        (Vec::new(), Vec::new())
                    } else {
                        let solved = solve(&at(max), options.features, &options.solve)?;
                        (solved.assignments, solved.pipelines)
                    };
                    let largest =
                        Planned { assignments, classes: Vec::new(), pipelines, demand_rps: max, replanned: false };
                    self.largest.insert(slices, largest);
                }
                Ok(self.largest[&slices].clone())
            }
            Err(e) => Err(e),
        }
    }
}
