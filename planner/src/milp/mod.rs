//! The JigsawServe MILP (§3.2), linearised for HiGHS; the formulation is written out in the crate docs.
//! `formulation.rs` builds and solves it; `infeasible.rs` names the binding constraint when no plan exists.

mod formulation;
mod infeasible;

use crate::error::PlanError;
use crate::problem::Problem;
use crate::solution::Assignment;
use crate::spec::Features;
use formulation::{Relax, solve_relaxed};

// Kept while `jig-sim` still names them here; their home is `crate::solution`.
use crate::solution::{SolveOptions, Solved};

/// Solve the MILP for `problem` in the configuration space `features`.
pub fn solve(problem: &Problem, features: Features, options: &SolveOptions) -> Result<Solved, PlanError> {
    solve_from(problem, features, options, &[])
}

/// [`solve`], starting from `previous`, the assignments of a plan of the same problem at another demand (a
/// re-plan): its instance types, their rates scaled to this demand and their counts to serve them, are
/// HiGHS's first incumbent, so its search only has to improve on them. A start that cannot be feasible here
/// (a type pruned away, more slices than there are) is left out.
pub fn solve_from(
    problem: &Problem,
    features: Features,
    options: &SolveOptions,
    previous: &[Assignment],
) -> Result<Solved, PlanError> {
    match solve_relaxed(problem, features, options, Relax::default(), previous) {
        Err(PlanError::Infeasible(_)) if options.diagnose => {
            Err(PlanError::Infeasible(infeasible::explain(problem, features, options)))
        }
        other => other,
    }
}
