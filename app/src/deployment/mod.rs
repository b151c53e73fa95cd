//! How an app's model slots are served: which variants, on which segments, with which batch sizes, how many
//! instances, and where each runs — chosen by the planner from the bundle's profile table, the app's demand
//! and the machine's [`Capacity`].
//!
//! The planner sees the app's graph through its model tasks: every task that names a `slot` in the manifest
//! is a planner task with that slot's variants, and an edge joins two model tasks when glue-only tasks (crop,
//! select) lead from one to the other; a slot no task names (glue calls it) gets a default instance on a core of
//! its own, taken out of the capacity before the tasks are planned on the rest. Segments are the profiled ones
//! this machine offers: `cpu:N` up to its free cores, `mps:PERCENT` shares of GPUs without MIG, `mig:PROFILE:K`
//! where a free MIG instance of the profile exists (jig never creates MIG instances). Cores and GPU slices are
//! budgeted separately, and the planner's cost counts a core like a GPU slice. Each planned instance is then
//! given its own cores, GPU share or MIG instance, so that no two apps hold the same. Without a profile table,
//! or when the planner finds no plan, each slot gets one unpinned instance of its most accurate variant, and the
//! deployment says why. A deploy of a bundle whose profile table measures only GPU segments this machine does
//! not offer is refused instead, naming them ([`plan_for_deploy`]).
//!
//! A running app's observations refine what the next plan assumes (JigsawServe §3.1): the multiplicative
//! factor of each edge once its upstream task ran [`MIN_FACTOR_SAMPLES`] times, each planned group's batch
//! latency once it ran [`MIN_LATENCY_SAMPLES`] batches of one size (see [`refine`]), and the CPU time a
//! request costs outside the planned instances once the app ran [`MIN_FACTOR_SAMPLES`] requests (see
//! [`unplanned_cpu_ms`]): the plan keeps the instances' time on cores and that work within the cores.
//!
//! The files, in the order a plan is made:
//!
//! * `capacity`: what the machines offer ([`Capacity`], [`Machine`], [`GpuCapacity`]) and how planned instances
//!   take their cores, GPU shares and MIG instances out of it.
//! * `observations`: what a running app observed ([`Observations`]) and how it refines the next plan's profile
//!   rows, factors and CPU outside the instances.
//! * `graph`: the app's graph as the planner sees it, model tasks and the edges between them.
//! * `problem`: the planner's [`problem()`] built from a bundle, its profile table and the capacity.
//! * `deploy`: the entry points, [`plan`] and [`plan_for_deploy`], and the default deployment ([`fallback`]).
//! * `untasked`: the default instances of slots no task names, each on a core of its own.
//! * `solve`: solving the problem and placing the plan's instances into a [`Deployment`].
//! * `mig`: which MIG instances a plan lacks, and the `nvidia-mig-parted` layout that would provide them.
//! * `error`: why planning failed ([`PlanningError`]) and why a deploy is refused ([`Refused`]).

mod capacity;
mod deploy;
mod error;
mod graph;
mod mig;
mod observations;
mod problem;
mod solve;
mod untasked;

#[cfg(test)]
mod test_support;

pub use jig_api::{
    ClassRoute, ClassRoutes, Deployment, InstancePlace, ObservedFactor, ObservedGlue, ObservedLatency, PipelinePool,
    PlannedFactor, PlannedInstances, PooledPipeline, RouteStep,
};

pub use capacity::{Capacity, GpuCapacity, Machine};
pub use deploy::{fallback, plan, plan_for_deploy};
pub use error::{PlanningError, Refused};
pub(crate) use graph::model_edges;
pub use observations::{
    FAR_FROM_PROFILE, MAX_REFINEMENT, MIN_FACTOR_SAMPLES, MIN_LATENCY_SAMPLES, Observations, Refinement,
    far_from_profile, latencies_drifted, latest_latencies, observed_cpu_ms, planned_factors, refine, refinement,
    unplanned_cpu_ms,
};
pub use problem::{Refinements, problem, read_profiles};
pub use solve::defaults_unobserved;
