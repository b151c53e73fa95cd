//! Why a bundle could not be planned ([`PlanningError`]), which a running app falls back from, and why a
//! deploy is refused ([`Refused`]), which the gateway answers as the bundle's fault.

use std::path::PathBuf;

use jig_planner::PlanError;
use jig_planner::spec::SegmentKind;

/// Why a bundle could not be planned; a deployment then falls back to [`fallback`](super::fallback) and says why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanningError {
    /// The profile table cannot be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The profile table.
        path: PathBuf,
        /// The system's answer.
        source: std::io::Error,
    },
    /// The profile table is malformed.
    #[error("{}: {source}", .path.display())]
    Profiles {
        /// The profile table.
        path: PathBuf,
        /// The line and field at fault.
        source: jig_planner::ParseError,
    },
    /// The manifest states no latency objective.
    #[error("the manifest has no [slo] to plan for; add `slo.latency_ms`")]
    NoSlo,
    /// No task runs a model.
    #[error("no task names a `slot`; give each task that runs a model its slot")]
    NoModelTasks,
    /// The profile table measured no segment this machine offers.
    #[error("profiles.csv measures no segment this machine offers (free: {free}); {hint}")]
    NoSegments {
        /// What the machine has free.
        free: String,
        /// The segments the table measures for the app's model slots, none of which the machine offers.
        measured: Vec<SegmentKind>,
        /// What to do: profile a segment it offers, or create the MIG instances the table measures.
        hint: String,
    },
    /// The plan needs more of a segment than the machine has free (a GPU share that does not fit, MIG
    /// instances that do not exist).
    #[error("the plan needs {needed} instance(s) on `{segment}`, but this machine has room for {placed}{hint}")]
    DoesNotFit {
        /// The segment type.
        segment: String,
        /// Instances the plan asks for.
        needed: u32,
        /// Instances that found a place.
        placed: u32,
        /// What would make room, if anything.
        hint: String,
    },
    /// The planner found no plan.
    #[error(transparent)]
    Planner(#[from] PlanError),
}

impl PlanningError {
    /// Whether the profile table measures GPU segments only, none of which the machine offers.
    pub(super) fn needs_gpu_segments(&self) -> bool {
        match self {
            PlanningError::NoSegments { measured, .. } => {
                !measured.is_empty() && measured.iter().all(|kind| !matches!(kind, SegmentKind::Cpu { .. }))
            }
            _ => false,
        }
    }
}

/// A deploy refused by [`plan_for_deploy`](super::plan_for_deploy): the bundle's profile table measures only GPU
/// segments this machine does not offer. The message names the app, its slots and the segments each is measured
/// on, what the machine has free and what to do: for MIG instances, which ones and the `nvidia-mig-parted` config
/// that creates them.
#[derive(Debug, thiserror::Error)]
#[error(
    "app `{app}` cannot be deployed on this machine: {reason}. To serve it here, profile it on this machine's \
     CPU cores (`jig profile BUNDLE` measures cpu:1, cpu:2, … up to its cores) and deploy it again; or deploy it \
     on a machine with the GPU segments it measures{mig_config}"
)]
pub struct Refused {
    /// The app.
    pub app: String,
    /// Why: [`PlanningError::NoSegments`] (boxed: an error that stays small to pass around).
    pub reason: Box<PlanningError>,
    /// For a bundle measured on MIG instances the machine lacks, the instances its plan would need here and the
    /// config that creates them (see `mig_instances_to_create`); empty
    /// otherwise.
    pub mig_config: String,
}

/// A refused deploy is the bundle's fault on this machine: the gateway answers 400 (`invalid_bundle`) with the
/// message, and stores nothing; the app's previous deployment, if any, serves on.
impl From<Refused> for crate::StartError {
    fn from(refused: Refused) -> Self {
        crate::StartError::Bundle(jig_manifest::InvalidBundle(refused.to_string()))
    }
}
