//! Why a plan or a request cannot be scheduled ([`ReserveError`]), with messages that name the pipeline and
//! stage at fault and say what to do.

use std::fmt;

use super::table::Resource;

/// Why a plan or a request cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveError {
    /// The scheduler was given no pipeline.
    NoPipelines,
    /// A pipeline, or a batch size asked of it, that cannot be served.
    Invalid {
        /// The pipeline's index.
        pipeline: usize,
        /// Its name; empty when there is no such pipeline.
        name: String,
        /// The stage at fault, when one is.
        stage: Option<usize>,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// A path overlaps a booking made since it was probed.
    Taken {
        /// The resource booked twice.
        resource: Resource,
    },
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveError::NoPipelines => f.write_str("no pooled pipeline to schedule on; plan at least one"),
            ReserveError::Invalid { pipeline, name, stage, problem } => {
                write!(f, "pipeline {pipeline}")?;
                if !name.is_empty() {
                    write!(f, " (`{name}`)")?;
                }
                if let Some(stage) = stage {
                    write!(f, " stage {stage}")?;
                }
                write!(f, ": {problem}")
            }
            ReserveError::Taken { resource } => {
                write!(f, "{resource} was booked since the path was probed; probe again")
            }
        }
    }
}

impl std::error::Error for ReserveError {}
