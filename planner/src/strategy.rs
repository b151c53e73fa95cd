//! Which paper's planner decides a plan: the one place the deploy path, the controller and the simulator ask
//! for a plan of a [`Problem`] (its `strategy`, from the spec's `app.planner` or `--planner`). A strategy is
//! added here: a variant, its solver module, and the latency model [`crate::evaluate`] checks its plans with.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;
use crate::evaluate::Assignment;
use crate::milp::{self, SolveOptions, Solved};
use crate::problem::Problem;
use crate::spec::Features;

/// A planner strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// JigsawServe (§3.2): mixes of variants, segment types and batch sizes per task over a whole graph, each
    /// task's latency budgeted as 2·L (a batch waits at most one batch time, then runs).
    #[default]
    Jigsaw,
    /// IPA (§4): linear pipelines on CPU cores; per stage one variant on its base core allocation, one batch
    /// size and a replica count, for α·PAS − β·cores − δ·Σ batch; latency is the batch's plus the worst-case
    /// wait for a full batch, (b − 1)/λ ([`crate::ipa`]).
    Ipa,
}

impl Strategy {
    /// Every strategy, in the order `--help` lists them.
    pub const ALL: [Strategy; 2] = [Strategy::Jigsaw, Strategy::Ipa];

    /// The name `app.planner` and `--planner` take.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Jigsaw => "jigsaw",
            Strategy::Ipa => "ipa",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Strategy::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Strategy::ALL.iter().map(|p| p.name()).collect();
            format!("unknown planner `{s}`: expected one of {}", names.join(", "))
        })
    }
}

/// Solve `problem` with its strategy.
pub fn solve(problem: &Problem, features: Features, options: &SolveOptions) -> Result<Solved, PlanError> {
    solve_from(problem, features, options, &[])
}

/// Solve `problem` with its strategy, from `previous`, the assignments of the running plan (a re-plan).
/// `features` (the A/S/T switches) and `previous` are JigsawServe's: IPA solves its small program afresh at
/// every adaptation, as the paper does.
pub fn solve_from(
    problem: &Problem,
    features: Features,
    options: &SolveOptions,
    previous: &[Assignment],
) -> Result<Solved, PlanError> {
    match problem.strategy {
        Strategy::Jigsaw => milp::solve_from(problem, features, options, previous),
        Strategy::Ipa => crate::ipa::solve(problem, options),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_listed() {
        for s in Strategy::ALL {
            assert_eq!(s.name().parse::<Strategy>(), Ok(s));
        }
        let err = "compas".parse::<Strategy>().unwrap_err();
        assert!(err.contains("`compas`") && err.contains("jigsaw, ipa"), "{err}");
    }
}
