//! The engine's records: a request in flight ([`Job`]), a simulated instance ([`Instance`]) and the PPipe head
//! ([`Head`]). They sit in a leaf of their own so that the engine and its PPipe data plane share them without
//! importing each other.

use std::collections::VecDeque;
use std::time::Duration;

use jig_policy::reserve::{Path, Scheduler};
use jig_policy::{Queue, Request};

/// Tasks as bits of a mask (the simulator takes apps of at most 64 tasks: [`simulate`](super::simulate) checks).
pub(super) fn task_bits(tasks: &[usize]) -> u64 {
    tasks.iter().fold(0, |bits, &t| bits | 1u64.checked_shl(t as u32).unwrap_or(0))
}

/// A request queued at an instance.
#[derive(Debug, Clone, Copy)]
pub(super) struct Job {
    pub(super) root: usize,
    pub(super) enqueued: Duration,
    pub(super) deadline: Duration,
    /// Product of the normalised accuracies of the variants so far.
    pub(super) accuracy: f64,
    /// The tasks it went through, one bit each: at a sink, the path it took.
    pub(super) tasks: u64,
    /// Whether its time outside the model at this task runs on a core of its own (else on a busy instance's).
    pub(super) own_core: bool,
    /// The route of its query class it runs on ([`Sim::class_routes`](super::engine::Sim::class_routes)), or
    /// [`NO_ROUTE`].
    pub(super) route: u32,
    /// The batch booked for it at the pipelines' head ([`Head::bookings`]), or [`NO_ROUTE`].
    pub(super) booking: u32,
}

/// A request of no query class's route: each task routes it over all its instances.
pub(super) const NO_ROUTE: u32 = u32::MAX;

impl Request<Duration> for Job {
    fn rows(&self) -> u64 {
        1
    }
    fn enqueued(&self) -> Duration {
        self.enqueued
    }
    fn deadline(&self) -> Duration {
        self.deadline
    }
}

/// A simulated instance of a plan: its type, its profiled latencies, and its queue.
pub(super) struct Instance {
    pub(super) task: usize,
    pub(super) variant: usize,
    pub(super) segment: usize,
    pub(super) batch: u32,
    /// (batch, p50 ms, p95 ms, mean ms of one server) profiled for this variant on this segment type, by batch;
    /// the mean is the batch over the row's throughput (per server), `None` without one.
    pub(super) profile: Vec<(u32, f64, f64, Option<f64>)>,
    /// Batches it runs at once: the MPS processes of a GPU segment, 1 on CPU cores.
    pub(super) servers: usize,
    /// A CPU segment: the machine's cores are the instances', so glue time is taken from them.
    pub(super) on_cpu: bool,
    /// The CPU cores it holds (0 on a GPU).
    pub(super) cores: u32,
    /// Time outside the models that found no free core and runs on this instance's: its next batch takes it.
    pub(super) debt_ms: f64,
    pub(super) busy: usize,
    pub(super) queue: Queue<Job, Duration>,
    /// The pending wake-up for a batch that waits for company.
    pub(super) timer: Option<Duration>,
    /// Batches booked on it by the pipelines' head, each run alone, in order, before anything queued.
    pub(super) booked: VecDeque<Vec<Job>>,
}

/// PPipe's data plane over a plan's pooled pipelines, as `jig_app`'s deployments run it.
pub(super) struct Head {
    pub(super) scheduler: Scheduler<Duration>,
    /// The requests waiting for a batch, oldest first.
    pub(super) queue: VecDeque<Job>,
    /// The simulated instance of each of the scheduler's.
    pub(super) instances: Vec<usize>,
    /// The pending wake-up of its wait rule.
    pub(super) timer: Option<Duration>,
    /// Each booked batch, by the `booking` its members carry.
    pub(super) bookings: Vec<Booking>,
}

/// A batch booked at the head: its path, and per stage the members still to come and those there.
pub(super) type Booking = (Path<Duration>, Vec<(usize, Vec<Job>)>);
