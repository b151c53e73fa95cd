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

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::Time;

/// How closely the wait rule finds its last moment.
const RESOLUTION: Duration = Duration::from_micros(1);

/// An instance of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    /// Its id in the reservation tables: one id in several pools is one instance, booked once at a time.
    pub id: usize,
    /// The node whose uplink and downlink its transfers use; `None` when its transfers contend for nothing.
    pub node: Option<usize>,
}

impl From<usize> for Instance {
    /// An instance on no node.
    fn from(id: usize) -> Self {
        Instance { id, node: None }
    }
}

/// One partition of a pooled pipeline, and its pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// The instances that run it.
    pub pool: Vec<Instance>,
    /// `latency[b - 1]`: how long a batch of `b` runs on an instance of the pool.
    pub latency: Vec<Duration>,
    /// `transfer[b - 1]`: how long a batch of `b`'s input takes to come from the previous stage; empty when it
    /// takes no time. Empty for the first stage, which has none before it.
    pub transfer: Vec<Duration>,
}

/// A pooled pipeline, as the planner made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Its name, for messages.
    pub name: String,
    /// The planned batch size (the MILP's unified `bs_i`): the largest batch it runs.
    pub batch: usize,
    /// Its partitions, in order.
    pub stages: Vec<Stage>,
}

/// What a reservation table is kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// An instance, by id.
    Instance(usize),
    /// A node's outgoing link, by node.
    Uplink(usize),
    /// A node's incoming link, by node.
    Downlink(usize),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Instance(id) => write!(f, "instance {id}"),
            Resource::Uplink(node) => write!(f, "node {node}'s uplink"),
            Resource::Downlink(node) => write!(f, "node {node}'s downlink"),
        }
    }
}

/// A batch's input on its way from the previous stage's instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer<T> {
    /// When it starts.
    pub start: T,
    /// When it has arrived.
    pub end: T,
    /// The sender's and the receiver's nodes, when it books their links.
    pub links: Option<(usize, usize)>,
}

/// One stage of a path: the transfer into its instance, and its run there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop<T> {
    /// The instance, by id.
    pub instance: usize,
    /// The transfer from the previous hop; `None` for the first.
    pub transfer: Option<Transfer<T>>,
    /// When the batch starts on the instance.
    pub start: T,
    /// When it ends there.
    pub end: T,
}

/// Where and when a batch would run: a probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path<T> {
    /// The pipeline, by index.
    pub pipeline: usize,
    /// The batch size.
    pub batch: usize,
    /// One hop per stage.
    pub hops: Vec<Hop<T>>,
    /// When the last stage ends.
    pub finish: T,
    /// How long the batch waits for resources along the way (step 1's measure of a pipeline's load).
    pub wait: Duration,
}

/// What to do with the queue now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<T> {
    /// Send the oldest `path.batch` requests as one batch along `path`, whose resources are now booked.
    Dispatch(Path<T>),
    /// Too few requests for the batch a pipeline could run: decide again at the next arrival, or at `until`.
    Wait {
        /// The last moment at which the queue still makes the oldest deadline, less the timer slack.
        until: T,
    },
    /// Not even the oldest request alone can finish by its deadline: drop it, then decide again.
    DropOldest,
    /// Nothing is pending.
    Idle,
}

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

/// A latency per batch size from 1 up to the largest profiled, from a profile of some sizes (`(batch, latency)`,
/// any order): a size not profiled takes the next larger profiled size's latency, which bounds it (a partial
/// batch runs no longer than a full one).
pub fn per_batch(profiled: &[(usize, Duration)]) -> Vec<Duration> {
    let largest = profiled.iter().map(|&(b, _)| b).max().unwrap_or(0);
    (1..=largest)
        .filter_map(|b| profiled.iter().filter(|&&(p, _)| p >= b).min_by_key(|&&(p, _)| p).map(|&(_, l)| l))
        .collect()
}

/// A booked interval, `[start, end)`.
#[derive(Debug, Clone, Copy)]
struct Busy<T> {
    /// The start it was booked at: its name for feedback, even after an overrun pushed it back.
    booked: T,
    start: T,
    end: T,
}

/// The best way found to a pool member (probe's table).
#[derive(Debug, Clone, Copy)]
struct Reach<T> {
    /// The previous stage's member it came from.
    from: usize,
    transfer: Option<Transfer<T>>,
    start: T,
    end: T,
    wait: Duration,
}

/// PPipe's central scheduler: the pooled pipelines and the reservation tables of their resources.
#[derive(Debug, Clone)]
pub struct Scheduler<T> {
    pipelines: Vec<Pipeline>,
    timer_slack: Duration,
    tables: BTreeMap<Resource, Vec<Busy<T>>>,
}

impl<T: Time> Scheduler<T> {
    /// A scheduler over `pipelines`, with empty tables. Each must plan a batch of at least 1, have stages, and
    /// give every stage a pool and a latency (and, past the first, a transfer latency or none) for every batch
    /// size up to the planned one; an instance in several pools must be on one node.
    pub fn new(mut pipelines: Vec<Pipeline>) -> Result<Self, ReserveError> {
        if pipelines.is_empty() {
            return Err(ReserveError::NoPipelines);
        }
        let mut nodes = BTreeMap::new();
        for (i, p) in pipelines.iter().enumerate() {
            let invalid =
                |stage, problem: String| ReserveError::Invalid { pipeline: i, name: p.name.clone(), stage, problem };
            if p.batch == 0 {
                return Err(invalid(None, "its planned batch size is 0; plan at least 1".into()));
            }
            if p.stages.is_empty() {
                return Err(invalid(None, "it has no stages; give it at least one partition and its pool".into()));
            }
            if !p.stages[0].transfer.is_empty() {
                return Err(invalid(
                    Some(0),
                    "the first stage has a transfer latency but no stage before it; leave it empty".into(),
                ));
            }
            for (k, stage) in p.stages.iter().enumerate() {
                if stage.pool.is_empty() {
                    return Err(invalid(Some(k), "its pool is empty; give it at least one instance".into()));
                }
                if let Some(problem) = missing(stage, k, p.batch) {
                    return Err(invalid(Some(k), problem));
                }
                for inst in &stage.pool {
                    if let Some(&node) = nodes.get(&inst.id)
                        && node != inst.node
                    {
                        return Err(invalid(
                            Some(k),
                            format!(
                                "instance {} is on {} here but on {} in another pool; an instance is on one node",
                                inst.id,
                                node_name(inst.node),
                                node_name(node)
                            ),
                        ));
                    }
                    nodes.insert(inst.id, inst.node);
                }
            }
        }
        // Never predict a smaller batch slower than a larger one (profiles are noisy).
        for stage in pipelines.iter_mut().flat_map(|p| &mut p.stages) {
            for table in [&mut stage.latency, &mut stage.transfer] {
                for b in 1..table.len() {
                    table[b] = table[b].max(table[b - 1]);
                }
            }
        }
        Ok(Scheduler { pipelines, timer_slack: Duration::ZERO, tables: BTreeMap::new() })
    }

    /// Wake this much before the last moment a wait allows, for a timer that may fire late (the runtime's);
    /// zero (the default) for an exact clock (the simulator's).
    pub fn with_timer_slack(mut self, slack: Duration) -> Self {
        self.timer_slack = slack;
        self
    }

    /// The pipelines, their latency tables made non-decreasing in the batch size.
    pub fn pipelines(&self) -> &[Pipeline] {
        &self.pipelines
    }

    /// The intervals booked on `resource`, `[start, end)`, in order.
    pub fn reserved(&self, resource: Resource) -> impl Iterator<Item = (T, T)> + '_ {
        self.tables.get(&resource).into_iter().flatten().map(|b| (b.start, b.end))
    }

    /// The path on which a batch of `batch` given to `pipeline` at `now` would finish first under the
    /// current bookings, booking nothing.
    pub fn probe(&self, pipeline: usize, batch: usize, now: T) -> Result<Path<T>, ReserveError> {
        let Some(p) = self.pipelines.get(pipeline) else {
            let problem = format!("there is no such pipeline; the scheduler has {}", self.pipelines.len());
            return Err(ReserveError::Invalid { pipeline, name: String::new(), stage: None, problem });
        };
        let invalid = |stage, problem: String| ReserveError::Invalid { pipeline, name: p.name.clone(), stage, problem };
        if batch == 0 {
            return Err(invalid(None, "a batch of 0; probe at least 1".into()));
        }
        if let Some((k, problem)) = p.stages.iter().enumerate().find_map(|(k, s)| Some((k, missing(s, k, batch)?))) {
            return Err(invalid(Some(k), problem));
        }
        Ok(self.path(pipeline, batch, now))
    }

    /// Book `path`'s transfers and runs. A path probed before another booking took part of it is refused.
    pub fn reserve(&mut self, path: &Path<T>) -> Result<(), ReserveError> {
        let bookings = bookings(path);
        for (i, &(resource, start, end)) in bookings.iter().enumerate() {
            let clash = |&(r, s, e): &(Resource, T, T)| r == resource && s < end && start < e;
            if self.overlaps(resource, start, end) || bookings[..i].iter().any(clash) {
                return Err(ReserveError::Taken { resource });
            }
        }
        self.book(bookings);
        Ok(())
    }

    /// Feedback: the use of `resource` booked to start at `booked` (a hop's or transfer's `start`) actually ended
    /// at `actual_end`. An early end frees the rest of the booking; a late one pushes back the later bookings on
    /// `resource` that it now overlaps. False when no such booking is left (it was pruned, or never made).
    pub fn correct(&mut self, resource: Resource, booked: T, actual_end: T) -> bool {
        let Some(table) = self.tables.get_mut(&resource) else { return false };
        let Some(i) = table.iter().position(|b| b.booked == booked) else { return false };
        if actual_end <= table[i].start {
            table.remove(i);
            return true;
        }
        table[i].end = actual_end;
        for k in i + 1..table.len() {
            let free = table[k - 1].end;
            if table[k].start >= free {
                break;
            }
            let length = table[k].end.since(table[k].start);
            table[k].start = free;
            table[k].end = free.after(length);
        }
        true
    }

    /// Forget the bookings that ended by `now`: no probe from `now` on can meet them.
    pub fn prune(&mut self, now: T) {
        self.tables.retain(|_, table| {
            // Disjoint and sorted by start, so sorted by end too.
            let ended = table.partition_point(|b| b.end <= now);
            table.drain(..ended);
            !table.is_empty()
        });
    }

    /// Algorithm 1 for a FIFO queue of `pending` requests whose oldest must finish by `oldest_deadline`. A
    /// dispatched path is booked; the caller takes the oldest `path.batch` requests (or pops the dropped one)
    /// and asks again until told to wait, then again at the next arrival or at the wait's end.
    pub fn decide(&mut self, now: T, pending: usize, oldest_deadline: T) -> Decision<T> {
        self.prune(now);
        if pending == 0 {
            return Decision::Idle;
        }
        // Step 1: the pipelines by how long their planned batch would wait.
        let mut ranked: Vec<Path<T>> =
            (0..self.pipelines.len()).map(|p| self.path(p, self.pipelines[p].batch, now)).collect();
        ranked.sort_by_key(|a| (a.wait, a.finish, a.pipeline));
        for planned in ranked {
            // Step 2: the largest batch that makes the oldest deadline.
            let p = planned.pipeline;
            let batch = self.pipelines[p].batch;
            // Overload (module docs): a batch under half the planned one is booked at once only where nothing waits.
            let worth = |path: &Path<T>| 2 * path.batch >= batch || path.wait.is_zero();
            let fit = std::iter::once(planned)
                .chain((1..batch).rev().map(|b| self.path(p, b, now)))
                .find(|path| path.finish <= oldest_deadline);
            let Some(fit) = fit else { continue };
            if pending >= fit.batch {
                if worth(&fit) {
                    return self.dispatch(fit);
                }
                continue;
            }
            // Too few: wait for company while the whole queue still makes it as one batch.
            let spare = self.latest_start(p, pending, now, oldest_deadline).saturating_sub(self.timer_slack);
            if spare >= RESOLUTION {
                return Decision::Wait { until: now.after(spare) };
            }
            // Finish times are monotone in the batch size, so the smaller queue fits where `fit` does.
            return self.dispatch(self.path(p, pending, now));
        }
        Decision::DropOldest
    }

    fn dispatch(&mut self, path: Path<T>) -> Decision<T> {
        self.book(bookings(&path));
        Decision::Dispatch(path)
    }

    /// How long after `now` a batch of `batch` may start on `pipeline` and still finish by `deadline`, to within
    /// [`RESOLUTION`], given that it fits at `now`: a bisection, as the finish is monotone in the start.
    fn latest_start(&self, pipeline: usize, batch: usize, now: T, deadline: T) -> Duration {
        let fits = |d: Duration| self.path(pipeline, batch, now.after(d)).finish <= deadline;
        let (mut lo, mut hi) = (Duration::ZERO, deadline.since(now));
        if fits(hi) {
            return hi;
        }
        while hi - lo > RESOLUTION {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// probe() on a validated pipeline and batch: per stage, the earliest finish at each member of the pool.
    fn path(&self, pipeline: usize, batch: usize, now: T) -> Path<T> {
        let p = &self.pipelines[pipeline];
        let mut reached: Vec<Vec<Reach<T>>> = Vec::with_capacity(p.stages.len());
        for (k, stage) in p.stages.iter().enumerate() {
            let run = stage.latency[batch - 1];
            let send = stage.transfer.get(batch - 1).copied().unwrap_or_default();
            let layer = stage
                .pool
                .iter()
                .map(|&to| {
                    let (from, transfer, ready, wait) = match reached.last() {
                        None => (0, None, now, Duration::ZERO),
                        Some(prev) => {
                            let (from, t, wait) = self.best_sender(&p.stages[k - 1].pool, prev, to, send);
                            (from, Some(t), t.end, wait)
                        }
                    };
                    let start = self.earliest(&[Resource::Instance(to.id)], ready, run);
                    Reach { from, transfer, start, end: start.after(run), wait: wait + start.since(ready) }
                })
                .collect();
            reached.push(layer);
        }
        let last = reached.last().expect("validated: every pipeline has a stage");
        let (mut at, best) = last
            .iter()
            .enumerate()
            .min_by_key(|(_, r)| (r.end, r.wait))
            .expect("validated: every pool has an instance");
        let (finish, wait) = (best.end, best.wait);
        let mut hops = Vec::with_capacity(reached.len());
        for (stage, layer) in p.stages.iter().zip(&reached).rev() {
            let r = layer[at];
            hops.push(Hop { instance: stage.pool[at].id, transfer: r.transfer, start: r.start, end: r.end });
            at = r.from;
        }
        hops.reverse();
        Path { pipeline, batch, hops, finish, wait }
    }

    /// Which member of the previous stage's pool (`senders`, reached as `reached` says) gets a batch's input to
    /// `to` first, then with the least wait: its index, the transfer, and the wait so far.
    fn best_sender(
        &self,
        senders: &[Instance],
        reached: &[Reach<T>],
        to: Instance,
        send: Duration,
    ) -> (usize, Transfer<T>, Duration) {
        let transfers = senders.iter().zip(reached).map(|(sender, r)| {
            // Links are booked only across nodes, and only for a transfer that takes time.
            let links = match (sender.node, to.node) {
                (Some(a), Some(b)) if a != b && !send.is_zero() => Some((a, b)),
                _ => None,
            };
            let start =
                links.map_or(r.end, |(a, b)| self.earliest(&[Resource::Uplink(a), Resource::Downlink(b)], r.end, send));
            (Transfer { start, end: start.after(send), links }, r.wait + start.since(r.end))
        });
        let (i, (transfer, wait)) = transfers
            .enumerate()
            .min_by_key(|(_, (t, wait))| (t.end, *wait))
            .expect("validated: every pool has an instance");
        (i, transfer, wait)
    }

    /// earliestSlot(): the earliest time from `from` at which all of `resources` are free for `length`.
    fn earliest(&self, resources: &[Resource], from: T, length: Duration) -> T {
        let mut at = from;
        'search: loop {
            for resource in resources {
                let Some(table) = self.tables.get(resource) else { continue };
                let next = table.partition_point(|b| b.end <= at);
                if let Some(b) = table.get(next)
                    && b.start < at.after(length)
                {
                    at = b.end;
                    continue 'search;
                }
            }
            return at;
        }
    }

    fn overlaps(&self, resource: Resource, start: T, end: T) -> bool {
        let Some(table) = self.tables.get(&resource) else { return false };
        table.get(table.partition_point(|b| b.end <= start)).is_some_and(|b| b.start < end)
    }

    fn book(&mut self, bookings: Vec<(Resource, T, T)>) {
        for (resource, start, end) in bookings {
            let table = self.tables.entry(resource).or_default();
            let at = table.partition_point(|b| b.start < start);
            table.insert(at, Busy { booked: start, start, end });
        }
    }
}

fn node_name(node: Option<usize>) -> String {
    node.map_or_else(|| "no node".into(), |n| format!("node {n}"))
}

/// What `stage` (the `k`th) lacks to run a batch of `batch`, if anything.
fn missing(stage: &Stage, k: usize, batch: usize) -> Option<String> {
    if stage.latency.len() < batch {
        return Some(format!(
            "no latency for batch {} (profiled up to {}); give one per batch size (`per_batch` fills gaps)",
            batch,
            stage.latency.len()
        ));
    }
    if k > 0 && !stage.transfer.is_empty() && stage.transfer.len() < batch {
        return Some(format!(
            "no transfer latency for batch {} (given up to {}); give one per batch size, or none for no transfer time",
            batch,
            stage.transfer.len()
        ));
    }
    None
}

/// The intervals a path books: links for its transfers, instances for its runs; nothing for what takes no time.
fn bookings<T: Time>(path: &Path<T>) -> Vec<(Resource, T, T)> {
    let mut out = Vec::with_capacity(3 * path.hops.len());
    for hop in &path.hops {
        if let Some(Transfer { start, end, links: Some((from, to)) }) = hop.transfer
            && start < end
        {
            out.push((Resource::Uplink(from), start, end));
            out.push((Resource::Downlink(to), start, end));
        }
        if hop.start < hop.end {
            out.push((Resource::Instance(hop.instance), hop.start, hop.end));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn stage(pool: &[usize], latency_ms: &[u64]) -> Stage {
        Stage {
            pool: pool.iter().map(|&i| i.into()).collect(),
            latency: latency_ms.iter().map(|&l| ms(l)).collect(),
            transfer: vec![],
        }
    }

    fn pipeline(name: &str, batch: usize, stages: Vec<Stage>) -> Pipeline {
        Pipeline { name: name.into(), batch, stages }
    }

    fn scheduler(pipelines: Vec<Pipeline>) -> Scheduler<Duration> {
        Scheduler::new(pipelines).unwrap()
    }

    fn dispatched(d: Decision<Duration>) -> Path<Duration> {
        match d {
            Decision::Dispatch(path) => path,
            other => panic!("expected a dispatch, got {other:?}"),
        }
    }

    fn waited(d: Decision<Duration>) -> Duration {
        match d {
            Decision::Wait { until } => until,
            other => panic!("expected a wait, got {other:?}"),
        }
    }

    fn reserved(s: &Scheduler<Duration>, r: Resource) -> Vec<(u64, u64)> {
        s.reserved(r).map(|(a, b)| (a.as_millis() as u64, b.as_millis() as u64)).collect()
    }

    #[test]
    fn step_one_sends_each_batch_to_the_pipeline_that_would_wait_least() {
        let mut s = scheduler(vec![
            pipeline("slow", 2, vec![stage(&[1], &[20, 30])]),
            pipeline("fast", 2, vec![stage(&[0], &[10, 15])]),
        ]);
        // Both idle: neither waits, so the earlier finish.
        let first = dispatched(s.decide(ms(0), 2, ms(100)));
        assert_eq!((first.pipeline, first.batch, first.finish, first.wait), (1, 2, ms(15), ms(0)));
        // The fast one would now wait 15 ms, the slow one not at all.
        let second = dispatched(s.decide(ms(0), 2, ms(100)));
        assert_eq!((second.pipeline, second.hops[0].start, second.finish), (0, ms(0), ms(30)));
        let third = dispatched(s.decide(ms(0), 2, ms(100)));
        assert_eq!((third.pipeline, third.hops[0].start, third.wait), (1, ms(15), ms(15)));
        assert_eq!(reserved(&s, Resource::Instance(0)), vec![(0, 15), (15, 30)]);
    }

    #[test]
    fn a_busy_instance_sends_the_batch_to_another_of_its_pool() {
        let mut s = scheduler(vec![
            pipeline("two", 1, vec![stage(&[0], &[10]), stage(&[1, 2], &[10])]),
            pipeline("hog", 1, vec![stage(&[1], &[50])]),
        ]);
        let hog = s.probe(1, 1, ms(0)).unwrap();
        s.reserve(&hog).unwrap();
        let path = s.probe(0, 1, ms(0)).unwrap();
        let hops: Vec<(usize, Duration, Duration)> = path.hops.iter().map(|h| (h.instance, h.start, h.end)).collect();
        assert_eq!(hops, vec![(0, ms(0), ms(10)), (2, ms(10), ms(20))]);
        assert_eq!(path.wait, ms(0));
        s.reserve(&path).unwrap();
        // Again: the batch waits 10 ms for instance 0, then 2 (free at 20) still beats 1 (busy until 50).
        let again = s.probe(0, 1, ms(0)).unwrap();
        assert_eq!((again.hops[1].instance, again.finish, again.wait), (2, ms(30), ms(10)));
    }

    fn linked(pool: Vec<Instance>, latency_ms: u64, transfer_ms: u64) -> Stage {
        let transfer = if transfer_ms == 0 { vec![] } else { vec![ms(transfer_ms)] };
        Stage { pool, latency: vec![ms(latency_ms)], transfer }
    }

    fn on(id: usize, node: usize) -> Instance {
        Instance { id, node: Some(node) }
    }

    #[test]
    fn transfers_book_the_senders_uplink_and_the_receivers_downlink_at_once() {
        // Figure 5: one instance, then a pool of two, each on its own node.
        let mut s = scheduler(vec![
            pipeline("fig5", 1, vec![linked(vec![on(0, 0)], 10, 0), linked(vec![on(1, 1), on(2, 2)], 10, 5)]),
            pipeline("other", 1, vec![linked(vec![on(3, 3)], 10, 0), linked(vec![on(4, 1)], 1, 20)]),
        ]);
        let other = s.probe(1, 1, ms(0)).unwrap();
        s.reserve(&other).unwrap();
        assert_eq!(reserved(&s, Resource::Uplink(3)), vec![(10, 30)]);
        assert_eq!(reserved(&s, Resource::Downlink(1)), vec![(10, 30)]);
        let path = s.probe(0, 1, ms(0)).unwrap();
        // Through node 1 the transfer waits for its downlink until 30 and the batch ends at 45; through 2, at 25.
        assert_eq!(path.hops[1].instance, 2);
        assert_eq!(path.hops[1].transfer, Some(Transfer { start: ms(10), end: ms(15), links: Some((0, 2)) }));
        assert_eq!(path.finish, ms(25));
        s.reserve(&path).unwrap();
        assert_eq!(reserved(&s, Resource::Uplink(0)), vec![(10, 15)]);
        assert_eq!(reserved(&s, Resource::Downlink(2)), vec![(10, 15)]);
        assert_eq!(reserved(&s, Resource::Instance(2)), vec![(15, 25)]);
        // Node 0's uplink is now busy: the next batch's transfer waits for it, and the wait counts.
        let next = s.probe(0, 1, ms(5)).unwrap();
        assert_eq!(next.hops[0].end, ms(20));
        assert_eq!(next.hops[1].transfer.map(|t| t.start), Some(ms(20)));
        assert_eq!(next.wait, ms(5));
    }

    #[test]
    fn transfers_within_a_node_or_without_nodes_book_no_link() {
        let mut s = scheduler(vec![
            pipeline("same node", 1, vec![linked(vec![on(0, 7)], 10, 0), linked(vec![on(1, 7)], 10, 4)]),
            pipeline("no node", 1, vec![linked(vec![2.into()], 10, 0), linked(vec![on(3, 8)], 10, 4)]),
        ]);
        for p in 0..2 {
            let path = s.probe(p, 1, ms(0)).unwrap();
            assert_eq!(path.hops[1].transfer, Some(Transfer { start: ms(10), end: ms(14), links: None }));
            assert_eq!(path.finish, ms(24), "the transfer still takes its time");
            s.reserve(&path).unwrap();
        }
        assert!(s.tables.keys().all(|r| matches!(r, Resource::Instance(_))), "{:?}", s.tables.keys());
    }

    #[test]
    fn a_smaller_batch_is_chosen_when_the_planned_one_would_miss() {
        let mut s = scheduler(vec![pipeline("p", 4, vec![stage(&[0], &[10, 20, 30, 40])])]);
        let path = dispatched(s.decide(ms(0), 5, ms(25)));
        assert_eq!((path.batch, path.finish), (2, ms(20)));
        // The next batch would queue behind it: only one request still makes 35, and a batch under half the
        // planned one is not booked behind others (overload), so the oldest goes.
        assert_eq!(s.decide(ms(0), 3, ms(35)), Decision::DropOldest);
        // Two make 45: half the planned batch, booked behind.
        let path = dispatched(s.decide(ms(0), 3, ms(45)));
        assert_eq!((path.batch, path.hops[0].start, path.finish), (2, ms(20), ms(40)));
    }

    #[test]
    fn the_oldest_is_dropped_when_not_even_one_request_fits() {
        let mut s = scheduler(vec![pipeline("p", 2, vec![stage(&[0], &[10, 12])])]);
        assert_eq!(s.decide(ms(0), 3, ms(9)), Decision::DropOldest);
        dispatched(s.decide(ms(0), 2, ms(100)));
        // Idle, one request would make 15; but the instance is busy until 12.
        assert_eq!(s.decide(ms(0), 1, ms(15)), Decision::DropOldest);
        let path = dispatched(s.decide(ms(0), 1, ms(22)));
        assert_eq!((path.batch, path.finish), (1, ms(22)));
    }

    #[test]
    fn too_few_requests_wait_until_the_last_moment_the_queue_still_fits() {
        let s = scheduler(vec![pipeline("p", 4, vec![stage(&[0], &[10, 20, 30, 40])])]);
        // Two requests: the planned 4 fits, so wait; two still make 100 if they start by 80.
        let until = waited(s.clone().decide(ms(0), 2, ms(100)));
        assert!(until <= ms(80) && ms(80) - until <= RESOLUTION, "{until:?}");
        let path = dispatched(s.clone().decide(until, 2, ms(100)));
        assert_eq!((path.batch, path.hops[0].start), (2, until));
        assert!(path.finish <= ms(100));
        // A third arrives at 50: four still fit, so wait again, now for three (by 70).
        let until = waited(s.clone().decide(ms(50), 3, ms(100)));
        assert!(ms(70) - until <= RESOLUTION, "{until:?}");
        // At 75 only two fit: they go, and the third stays queued.
        assert_eq!(dispatched(s.clone().decide(ms(75), 3, ms(100))).batch, 2);
    }

    #[test]
    fn waiting_that_cannot_help_dispatches_at_once() {
        let s = scheduler(vec![pipeline("p", 2, vec![stage(&[0], &[10, 11])])]);
        // Two would make 12, but one is queued, and it must start within 2 ms.
        assert!(ms(2) - waited(s.clone().decide(ms(0), 1, ms(12))) <= RESOLUTION);
        let slack = s.clone().with_timer_slack(ms(1));
        assert!(ms(1) - waited(slack.clone().decide(ms(0), 1, ms(12))) <= RESOLUTION);
        // A timer 2 ms late could not wake in time: go now.
        let mut late = s.with_timer_slack(ms(2));
        let path = dispatched(late.decide(ms(0), 1, ms(12)));
        assert_eq!((path.batch, path.hops[0].start, path.finish), (1, ms(0), ms(10)));
    }

    #[test]
    fn a_faster_busier_pipeline_serves_what_the_least_waiting_one_cannot() {
        let mut s = scheduler(vec![
            pipeline("slow", 1, vec![stage(&[0], &[50])]),
            pipeline("fast", 1, vec![stage(&[1], &[10])]),
        ]);
        assert_eq!(dispatched(s.decide(ms(0), 1, ms(100))).pipeline, 1);
        // Step 1 ranks the idle slow one first, but it would finish at 50; the fast one, busy, at 20.
        assert!(s.probe(0, 1, ms(0)).unwrap().wait < s.probe(1, 1, ms(0)).unwrap().wait);
        let path = dispatched(s.decide(ms(0), 1, ms(30)));
        assert_eq!((path.pipeline, path.finish), (1, ms(20)));
    }

    #[test]
    fn feedback_frees_an_early_end_and_pushes_back_what_an_overrun_delays() {
        let mut s = scheduler(vec![pipeline("p", 1, vec![stage(&[0], &[10])])]);
        for _ in 0..3 {
            dispatched(s.decide(ms(0), 1, ms(100)));
        }
        let instance = Resource::Instance(0);
        assert_eq!(reserved(&s, instance), vec![(0, 10), (10, 20), (20, 30)]);
        assert!(s.correct(instance, ms(20), ms(24)));
        assert_eq!(s.probe(0, 1, ms(0)).unwrap().hops[0].start, ms(24), "the early end is free");
        assert!(s.correct(instance, ms(0), ms(15)));
        assert_eq!(reserved(&s, instance), vec![(0, 15), (15, 25), (25, 29)]);
        // A pushed booking keeps the start it was booked at as its name.
        assert!(s.correct(instance, ms(10), ms(27)));
        assert_eq!(reserved(&s, instance), vec![(0, 15), (15, 27), (27, 31)]);
        assert!(!s.correct(instance, ms(3), ms(5)), "no booking started at 3");
        assert!(!s.correct(Resource::Uplink(0), ms(0), ms(5)), "nothing booked on the link");
        // Done before its (pushed) start: the booking goes.
        assert!(s.correct(instance, ms(20), ms(26)));
        assert_eq!(reserved(&s, instance), vec![(0, 15), (15, 27)]);
    }

    #[test]
    fn ended_bookings_are_pruned_and_an_empty_queue_is_idle() {
        let mut s = scheduler(vec![pipeline("p", 1, vec![stage(&[0], &[10])])]);
        dispatched(s.decide(ms(0), 1, ms(100)));
        dispatched(s.decide(ms(0), 1, ms(100)));
        assert_eq!(s.decide(ms(15), 0, ms(100)), Decision::Idle);
        assert_eq!(reserved(&s, Resource::Instance(0)), vec![(10, 20)]);
        s.prune(ms(20));
        assert!(s.tables.is_empty(), "{:?}", s.tables);
    }

    #[test]
    fn reserve_refuses_a_path_another_booking_overtook() {
        let mut s = scheduler(vec![pipeline("p", 1, vec![stage(&[0], &[10])])]);
        let (a, b) = (s.probe(0, 1, ms(0)).unwrap(), s.probe(0, 1, ms(5)).unwrap());
        s.reserve(&a).unwrap();
        let error = s.reserve(&b).unwrap_err();
        assert_eq!(error, ReserveError::Taken { resource: Resource::Instance(0) });
        assert!(error.to_string().contains("probe again"), "{error}");
        // A path that overlaps itself books nothing.
        let hop = |start, end| Hop { instance: 5, transfer: None, start: ms(start), end: ms(end) };
        let twice = Path { pipeline: 0, batch: 1, hops: vec![hop(0, 10), hop(5, 15)], finish: ms(15), wait: ms(0) };
        assert_eq!(s.reserve(&twice), Err(ReserveError::Taken { resource: Resource::Instance(5) }));
        assert_eq!(s.reserved(Resource::Instance(5)).count(), 0);
    }

    #[test]
    fn bad_pipelines_and_probes_are_named_with_their_stage() {
        let ok = || pipeline("ok", 1, vec![stage(&[0], &[10])]);
        let error = |pipelines: Vec<Pipeline>| Scheduler::<Duration>::new(pipelines).unwrap_err().to_string();
        assert_eq!(error(vec![]), "no pooled pipeline to schedule on; plan at least one");
        let cases = [
            (pipeline("zero", 0, vec![stage(&[0], &[10])]), "pipeline 1 (`zero`): its planned batch size is 0"),
            (pipeline("bare", 1, vec![]), "pipeline 1 (`bare`): it has no stages"),
            (
                pipeline("dry", 1, vec![stage(&[0], &[10]), stage(&[], &[10])]),
                "pipeline 1 (`dry`) stage 1: its pool is empty",
            ),
            (
                pipeline("short", 3, vec![stage(&[0], &[10, 20])]),
                "pipeline 1 (`short`) stage 0: no latency for batch 3 (profiled up to 2)",
            ),
            (
                pipeline(
                    "wire",
                    2,
                    vec![stage(&[0], &[10, 20]), Stage { transfer: vec![ms(1)], ..stage(&[1], &[10, 20]) }],
                ),
                "pipeline 1 (`wire`) stage 1: no transfer latency for batch 2",
            ),
            (
                pipeline("head", 1, vec![Stage { transfer: vec![ms(1)], ..stage(&[0], &[10]) }]),
                "pipeline 1 (`head`) stage 0: the first stage has a transfer latency",
            ),
            (
                pipeline("moved", 1, vec![stage(&[1], &[10]), linked(vec![on(0, 3)], 10, 0)]),
                "pipeline 1 (`moved`) stage 1: instance 0 is on node 3 here but on no node in another pool",
            ),
        ];
        for (bad, expected) in cases {
            let message = error(vec![ok(), bad]);
            assert!(message.starts_with(expected), "{message}");
        }
        let s = scheduler(vec![ok()]);
        let probe = |p, b| s.probe(p, b, ms(0)).unwrap_err().to_string();
        assert!(probe(1, 1).starts_with("pipeline 1: there is no such pipeline"), "{}", probe(1, 1));
        assert!(probe(0, 0).starts_with("pipeline 0 (`ok`): a batch of 0"), "{}", probe(0, 0));
        assert!(probe(0, 2).starts_with("pipeline 0 (`ok`) stage 0: no latency for batch 2"), "{}", probe(0, 2));
    }

    #[test]
    fn profiles_fill_gaps_from_larger_sizes_and_never_shrink_with_the_batch() {
        assert_eq!(per_batch(&[(4, ms(9)), (1, ms(5)), (2, ms(7))]), vec![ms(5), ms(7), ms(9), ms(9)]);
        assert!(per_batch(&[]).is_empty());
        let s = scheduler(vec![pipeline("noisy", 3, vec![stage(&[0], &[10, 8, 12])])]);
        assert_eq!(s.pipelines()[0].stages[0].latency, vec![ms(10), ms(10), ms(12)]);
        assert_eq!(s.probe(0, 2, ms(0)).unwrap().finish, ms(10));
    }

    /// Up to three pipelines of up to three stages over five instances, some on nodes (of three), latencies in µs.
    fn cluster() -> impl Strategy<Value = Vec<Pipeline>> {
        let stage = (
            prop::collection::vec(0usize..5, 1..=3),
            prop::collection::vec(1_000u64..=20_000, 4),
            prop::option::of(prop::collection::vec(0u64..=6_000, 4)),
        );
        let pipeline = (1usize..=4, prop::collection::vec(stage, 1..=3));
        (prop::collection::vec(prop::option::of(0usize..3), 5), prop::collection::vec(pipeline, 1..=3)).prop_map(
            |(nodes, pipelines)| {
                let pipelines = pipelines.into_iter().enumerate();
                pipelines
                    .map(|(i, (batch, stages))| Pipeline {
                        name: format!("p{i}"),
                        batch,
                        stages: (stages.into_iter().enumerate())
                            .map(|(k, (pool, latency, transfer))| Stage {
                                pool: pool.into_iter().map(|id| Instance { id, node: nodes[id] }).collect(),
                                latency: latency.into_iter().map(us).collect(),
                                transfer: match transfer {
                                    Some(t) if k > 0 => t.into_iter().map(us).collect(),
                                    _ => vec![],
                                },
                            })
                            .collect(),
                    })
                    .collect()
            },
        )
    }

    fn shift(t: Duration, by_us: i64) -> Duration {
        if by_us >= 0 { t + us(by_us as u64) } else { t.saturating_sub(us(by_us.unsigned_abs())) }
    }

    fn disjoint(s: &Scheduler<Duration>) -> Result<(), TestCaseError> {
        for (resource, table) in &s.tables {
            prop_assert!(table.iter().all(|b| b.start < b.end), "{}: {:?}", resource, table);
            for w in table.windows(2) {
                prop_assert!(w[0].end <= w[1].start, "{}: {:?} overlaps {:?}", resource, w[0], w[1]);
            }
        }
        Ok(())
    }

    /// A fixed path's finish, transfer by transfer and stage by stage at the earliest free slot: the spec probe
    /// must meet.
    fn finish_along(s: &Scheduler<Duration>, p: &Pipeline, batch: usize, members: &[usize], now: Duration) -> Duration {
        let mut t = now;
        let mut sender: Option<Instance> = None;
        for (stage, &m) in p.stages.iter().zip(members) {
            let to = stage.pool[m];
            if let Some(from) = sender {
                let send = stage.transfer.get(batch - 1).copied().unwrap_or_default();
                if let (Some(a), Some(b)) = (from.node, to.node)
                    && a != b
                    && !send.is_zero()
                {
                    t = s.earliest(&[Resource::Uplink(a), Resource::Downlink(b)], t, send);
                }
                t += send;
            }
            let run = stage.latency[batch - 1];
            t = s.earliest(&[Resource::Instance(to.id)], t, run) + run;
            sender = Some(to);
        }
        t
    }

    /// A drop of the oldest of `pending`: no batch fits its deadline on any pipeline, or the largest that does is
    /// under half the planned one and would wait behind other bookings (overload).
    fn rightly_dropped(
        s: &Scheduler<Duration>,
        now: Duration,
        pending: usize,
        deadline: Duration,
    ) -> Result<(), TestCaseError> {
        for p in 0..s.pipelines().len() {
            let planned = s.pipelines()[p].batch;
            let probe = |b| s.probe(p, b, now).unwrap();
            if let Some(fit) = (1..=planned).rev().map(probe).find(|f| f.finish <= deadline) {
                let small_behind = fit.batch <= pending && 2 * fit.batch < planned && !fit.wait.is_zero();
                prop_assert!(small_behind, "pipeline {p} fits {fit:?}");
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn dispatches_meet_the_oldest_deadline_and_bookings_never_overlap(
            pipelines in cluster(),
            slack in 0u64..=3_000,
            events in prop::collection::vec(
                (0u64..=15_000, 0usize..=6, -20_000i64..=150_000, 0u8..4, 0usize..64, -5_000i64..=10_000),
                1..=40,
            ),
        ) {
            let mut s = Scheduler::new(pipelines).unwrap().with_timer_slack(us(slack));
            let mut now = Duration::ZERO;
            let mut hops: Vec<Hop<Duration>> = Vec::new();
            for (dt, pending, deadline, kind, pick, delta) in events {
                now += us(dt);
                if kind == 3 {
                    // A report, early or late, of a booked run.
                    if !hops.is_empty() {
                        let hop = hops[pick % hops.len()];
                        s.correct(Resource::Instance(hop.instance), hop.start, shift(hop.end, delta));
                    }
                    disjoint(&s)?;
                    continue;
                }
                let deadline = shift(now, deadline);
                match s.decide(now, pending, deadline) {
                    Decision::Dispatch(path) => {
                        prop_assert!(path.finish <= deadline, "{:?} misses {:?}", path, deadline);
                        let planned = &s.pipelines()[path.pipeline];
                        prop_assert!(path.batch >= 1 && path.batch <= pending && path.batch <= planned.batch);
                        prop_assert_eq!(path.hops.len(), planned.stages.len());
                        let mut ready = now;
                        for (hop, stage) in path.hops.iter().zip(&planned.stages) {
                            prop_assert!(stage.pool.iter().any(|i| i.id == hop.instance));
                            let arrived = hop.transfer.map_or(ready, |t| t.end);
                            prop_assert!(hop.transfer.is_none_or(|t| ready <= t.start) && arrived <= hop.start);
                            let booked = (hop.start, hop.end);
                            prop_assert!(s.reserved(Resource::Instance(hop.instance)).any(|b| b == booked));
                            ready = hop.end;
                        }
                        prop_assert_eq!(ready, path.finish);
                        hops.extend(path.hops);
                    }
                    Decision::Wait { until } => {
                        prop_assert!(now < until && until <= deadline, "{:?} after {:?}", until, deadline);
                        // At that moment, with nothing else booked meanwhile, the queue is still served (unless
                        // only as a small batch behind a backlog: overload).
                        let mut later = s.clone();
                        if later.decide(until, pending, deadline) == Decision::DropOldest {
                            rightly_dropped(&later, until, pending, deadline)?;
                        }
                    }
                    Decision::DropOldest => rightly_dropped(&s, now, pending, deadline)?,
                    Decision::Idle => prop_assert_eq!(pending, 0),
                }
                disjoint(&s)?;
            }
        }

        #[test]
        fn probe_finds_the_earliest_finishing_path(
            pipelines in cluster(),
            events in prop::collection::vec((0u64..=15_000, 1usize..=6), 0..=20),
        ) {
            let mut s = Scheduler::new(pipelines).unwrap();
            let mut now = Duration::ZERO;
            for (dt, pending) in events {
                now += us(dt);
                s.decide(now, pending, now + ms(200));
            }
            for (i, p) in s.pipelines().iter().enumerate() {
                let mut choices = vec![vec![]];
                for stage in &p.stages {
                    choices = choices
                        .into_iter()
                        .flat_map(|c: Vec<usize>| (0..stage.pool.len()).map(move |m| [c.clone(), vec![m]].concat()))
                        .collect();
                }
                for batch in 1..=p.batch {
                    let path = s.probe(i, batch, now).unwrap();
                    let taken: Vec<usize> = path
                        .hops
                        .iter()
                        .zip(&p.stages)
                        .map(|(h, stage)| stage.pool.iter().position(|m| m.id == h.instance).unwrap())
                        .collect();
                    prop_assert_eq!(finish_along(&s, p, batch, &taken, now), path.finish);
                    let best = choices.iter().map(|c| finish_along(&s, p, batch, c, now)).min().unwrap();
                    prop_assert_eq!(path.finish, best);
                }
            }
        }
    }
}
