//! PPipe's data plane (Kong, Xu and Hu, "PPipe: Efficient Video Analytics Serving on Heterogeneous GPU
//! Clusters via Pool-Based Pipeline Parallelism", USENIX ATC 2025, §5.4 and Appendix A.3): *resource
//! reservation-based adaptive batching* over pooled pipelines.
//!
//! A pooled pipeline ([`Pipeline`]) is a model cut into partitions ([`Stage`]s), each served by a pool of
//! instances; any batch may take any instance of each pool, and every stage runs the pipeline's one batch size
//! (batch-size unification). A central [`Scheduler`] keeps, per resource ([`Resource`]: an instance, a node's
//! uplink, a node's downlink), the intervals booked so far. [`Scheduler::probe`] finds, without booking, the
//! path (one instance per stage) on which a batch would finish first; [`Scheduler::reserve`] books it;
//! [`Scheduler::decide`] runs Algorithm 1: pick the pipeline that would wait least at its planned batch (step 1),
//! then the largest batch that finishes by the oldest request's deadline (step 2), and dispatch, wait or drop;
//! [`Scheduler::correct`] takes the nodes' reports of when a booked use actually ended (feedback correction).
//!
//! What the paper leaves open (notes `ppipe.md` §8), decided here:
//!
//! * **probe** (19): exact rather than greedy. Per stage it keeps the earliest finish at *every* instance of the
//!   pool and where it came from; without links this is the paper's greedy (each stage's earliest instance),
//!   with links it also weighs each sender's uplink, which the greedy commits to before looking. It costs a slot
//!   search per pair of instances in adjacent pools instead of one per instance. Exactness makes the finish
//!   monotone in the start and the batch size, which step 2 and the wait rule rely on. Ties go to the lower
//!   pool index.
//! * **Waiting time** (16): the sum, along the path, of the time each transfer waits for its links and each stage
//!   for its instance once its input is there. Step 1 breaks ties by the earlier finish, then the lower index.
//! * **Step 2 on another pipeline**: when not even batch 1 fits on step 1's pipeline, step 2 tries the others in
//!   step 1's order before dropping; the paper drops at once, losing requests that a busier but faster pipeline
//!   would still serve in time. When one pipeline fits, the decision is the paper's.
//! * **Overload**: a batch smaller than half the pipeline's planned one is booked only on a path where it waits
//!   for nothing; where it would queue behind other bookings, the oldest request is dropped instead. The paper
//!   books the largest batch that makes the oldest deadline, so under sustained overload, with the bottleneck pool
//!   booked to the deadline's horizon, every arrival is booked alone at the horizon's end: batches of one fill the
//!   tables and goodput falls far below the plan's (in `jig_sim`'s test, a plan for 105 req/s served 37 req/s at
//!   300). Refusing small batches behind a backlog lets requests gather while it drains, so batches stay large.
//!   Without a backlog, or with a batch of half the planned size or more, the decision is the paper's.
//! * **Wait rule** (17): with fewer requests than the chosen batch, wait until the last moment (to 1 µs) at which
//!   all of them still finish by the oldest deadline as one batch, less the caller's timer slack; the caller
//!   decides again at every arrival and at that moment. If that moment is not after now, waiting cannot help:
//!   the queue goes at once as one batch. An empty queue is [`Decision::Idle`].
//! * **Deadline** (18): only the oldest request's, as in the paper: a queue is FIFO with one SLO, so the oldest
//!   has the earliest deadline. A caller mixing SLOs keeps a queue per SLO.
//! * **Tables** (20): sorted, disjoint intervals per resource; a slot may fill a gap before later bookings, so an
//!   instance runs its batches in the order of their booked starts. Intervals that ended are pruned at every
//!   decision.
//! * **Links** (21): a node's uplink and downlink each carry one transfer at a time; a transfer books the sender
//!   node's uplink and the receiver node's downlink for the same interval. A transfer within one node, or to or
//!   from an instance without a node, takes its time but books no link; a transfer of zero takes nothing.
//! * **Feedback** (22): a report sets the booking's end. An early end frees the rest; a late one pushes back, on
//!   that resource only, the later bookings it now overlaps (the instance runs them after it). A booking keeps
//!   the start it was booked at as its name, so later reports still find it; the delayed batches' other stages
//!   are corrected by their own reports.
//! * **Latencies** (8): one per batch size from 1 (Algorithm 1 steps down by one); [`per_batch`] fills a
//!   profile's gaps from the next larger size. Tables are made non-decreasing in the batch size (a running
//!   maximum), so that a smaller batch is never predicted slower than a larger one.
//! * **Input and misses**: the batch's transfer to its first stage is not booked (the paper books none). A batch
//!   that runs late despite its booking is the caller's to finish or drop (23); its reports keep later probes true.
//!
//! The files, by concept: `pipeline.rs` (what the scheduler is given, and [`per_batch`]), `scheduler.rs` (the
//! [`Scheduler`] and its checks), `table.rs` (the reservation tables: [`Resource`], booking, feedback, pruning),
//! `probe.rs` (the earliest-finishing [`Path`]), `decide.rs` (Algorithm 1's [`Decision`]), `error.rs`
//! ([`ReserveError`]).

mod decide;
mod error;
mod pipeline;
mod probe;
mod scheduler;
mod table;
#[cfg(test)]
mod testing;

pub use decide::Decision;
pub use error::ReserveError;
pub use pipeline::{Instance, Pipeline, Stage, per_batch};
pub use probe::{Hop, Path, Transfer};
pub use scheduler::Scheduler;
pub use table::Resource;
