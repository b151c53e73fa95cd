//! Why a plan could not be made.

use thiserror::Error;

/// Why a plan could not be made: bad input, an objective no configuration meets, or the solver.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    /// The spec or profile table is malformed (unreadable file, bad number, unknown field…).
    #[error("bad input: {0}")]
    Input(String),
    /// The graph has a cycle; the message lists it.
    #[error("app `{app}`: the task graph has a cycle: {cycle}")]
    Cycle {
        /// The app's name.
        app: String,
        /// The tasks of one cycle joined by arrows, the first repeated at the end.
        cycle: String,
    },
    /// An edge, path or factor names a task the app does not have.
    #[error("app `{app}`: {place} names task `{task}`, which the app does not have")]
    UnknownTask {
        /// The app's name.
        app: String,
        /// Where the name appears: an edge, a path or a variant's factor.
        place: String,
        /// The name that matches no task.
        task: String,
    },
    /// A variant has no profile row on any declared segment type.
    #[error(
        "no profile rows for variant `{variant}` of task `{task}` (slot `{slot}`) on any of the declared segment types; profile it (`jig profile`) or drop the variant"
    )]
    MissingProfile {
        /// The task's name.
        task: String,
        /// The variant's name.
        variant: String,
        /// The slot the task's rows are looked up under.
        slot: String,
    },
    /// No configuration meets the objectives; the message names the binding constraint.
    #[error("infeasible: {0}")]
    Infeasible(String),
    /// The solver stopped at its time limit before finding any plan.
    #[error("no plan found within the solver time limit of {0} s")]
    TimeLimit(f64),
    /// HiGHS failed, or its plan failed the independent re-check by [`evaluate`](crate::evaluate) (a bug, not
    /// bad input).
    #[error("solver error: {0}")]
    Solver(String),
}

/// Text that does not parse: a segment type's name, a configuration space, a line of a profile table. The
/// message quotes it and says what is expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl From<ParseError> for PlanError {
    fn from(e: ParseError) -> Self {
        PlanError::Input(e.0)
    }
}

impl From<jig_policy::UnknownMigProfile> for ParseError {
    fn from(e: jig_policy::UnknownMigProfile) -> Self {
        ParseError(e.to_string())
    }
}

impl From<jig_policy::segment::ParseSegmentError> for PlanError {
    fn from(e: jig_policy::segment::ParseSegmentError) -> Self {
        PlanError::Input(e.to_string())
    }
}
