//! # jig-policy
//!
//! The serving decisions that the runtime (`jig-model-host`'s instances and pools, on real time) and the
//! simulator (`jig simulate`, on simulated time) share, so that a simulated plan batches, drops and routes
//! exactly as a deployed one does:
//!
//! * [`route`]: which instance of a slot the next request goes to;
//! * [`queue`]: when an instance starts a batch, which waiting requests it takes, and which it drops early;
//! * [`reserve`]: PPipe's reservation-based batching over pooled pipelines: which pipeline, path and batch size;
//! * [`mig`]: the MIG profiles segments are made of, which both sides name and size alike;
//! * [`segment`]: the one grammar of segment names, for the planner's segment types and the runtime's placed
//!   segments alike;
//! * [`rng`]: the seeded generator every simulated draw (and `jig bench`'s arrivals, the synthetic weights) comes from;
//! * [`stats`]: the one quantile rule that simulated, benchmarked, observed and profiled latencies are reported by.
//!
//! Routing, queueing and reservations are generic over the clock ([`Time`]): `std::time::Instant` in the runtime, a
//! `Duration` since the start of the simulation in the simulator. Nothing here blocks or depends on any other
//! crate, and routing and queueing allocate nothing per decision beyond the queue itself.

#![deny(missing_docs)]

pub mod mig;
pub mod queue;
pub mod reserve;
pub mod rng;
pub mod route;
pub mod segment;
pub mod stats;

use std::time::{Duration, Instant};

pub use mig::{MigProfile, UnknownMigProfile};
pub use queue::{BatchPolicy, DropReason, Queue, Request};
pub use route::WeightedRoundRobin;

/// A point in time, real or simulated.
pub trait Time: Copy + Ord {
    /// How long after `earlier` this is; zero when it is not after.
    fn since(self, earlier: Self) -> Duration;
    /// This time plus `d`.
    fn after(self, d: Duration) -> Self;
}

impl Time for Instant {
    fn since(self, earlier: Self) -> Duration {
        self.saturating_duration_since(earlier)
    }
    fn after(self, d: Duration) -> Self {
        self + d
    }
}

/// Simulated time: the offset from the simulation's start.
impl Time for Duration {
    fn since(self, earlier: Self) -> Duration {
        self.saturating_sub(earlier)
    }
    fn after(self, d: Duration) -> Self {
        self + d
    }
}
