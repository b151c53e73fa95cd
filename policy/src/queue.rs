//! An instance's queue and its batching rules (JigsawServe §3.3):
//!
//! * a batch starts as soon as `max_batch` rows wait;
//! * when the previous batch finishes and requests wait, the next starts at once with what is there;
//! * otherwise (the instance was idle) the first request of a new batch waits for the company that the recent
//!   arrival rate brings to fill the batch, at most `max_wait`, and not at all when none is expected within it.
//!
//! Requests are dropped early rather than served late: on arrival and again before each batch, a request is
//! dropped if even `min_service` (the instance's own fastest run plus the fastest downstream path) no longer
//! fits before its deadline, and a request that waited longer than `max_wait + staleness` is stale.
//!
//! A batch takes the oldest request and the following ones that can share a batch with it
//! ([`Request::can_share`]), up to `max_batch` rows.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::Time;

/// How an instance batches and drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPolicy {
    /// Rows per batch at most (b). A single request with more rows runs alone.
    pub max_batch: u64,
    /// The longest the first request of a batch waits for others when the instance was idle (L̂).
    pub max_wait: Duration,
    /// How much longer than `max_wait` a request may wait before it counts as stale.
    pub staleness: Duration,
    /// The least time a request still needs once picked up. Zero drops only what is already past its deadline.
    pub min_service: Duration,
}

impl Default for BatchPolicy {
    /// Batch 1, no waiting, 20 ms staleness, no early dropping.
    fn default() -> Self {
        BatchPolicy {
            max_batch: 1,
            max_wait: Duration::ZERO,
            staleness: Duration::from_millis(20),
            min_service: Duration::ZERO,
        }
    }
}

/// A queued request, as the policy sees it.
pub trait Request<T: Time> {
    /// Rows it adds to a batch.
    fn rows(&self) -> u64;
    /// When it joined the queue.
    fn enqueued(&self) -> T;
    /// When an answer stops being useful.
    fn deadline(&self) -> T;
    /// Whether it may run in one batch with `first` (e.g. tensors whose shapes agree but for the batch axis).
    fn can_share(&self, _first: &Self) -> bool {
        true
    }
}

/// Why a request was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Even the fastest service from here on would finish after the deadline.
    Late {
        /// The service time still ahead of it, at the fastest.
        needed: Duration,
        /// The time left before its deadline.
        left: Duration,
    },
    /// It waited longer than any batch would have made it wait.
    Stale {
        /// How long it waited.
        waited: Duration,
    },
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::Late { needed, left } => {
                write!(f, "it needs at least {needed:?} more but only {left:?} remain before its deadline")
            }
            DropReason::Stale { waited } => write!(f, "it waited {waited:?} without being picked up (stale)"),
        }
    }
}

impl BatchPolicy {
    /// How a deployed instance batches: up to `max_batch` rows, starting at once when idle (work-conserving),
    /// dropping only what is past its deadline, and clearing as stale only what waited longer than any
    /// `deadline` a caller may set.
    pub fn serving(max_batch: u64, deadline: Duration) -> Self {
        BatchPolicy { max_batch, max_wait: Duration::ZERO, staleness: deadline, min_service: Duration::ZERO }
    }

    /// How a planned instance batches and drops (§3.3): up to `max_batch` rows; when idle, the first request
    /// waits up to the task's `wait` bound L̂ for company; a request is dropped as soon as `min_service` (its
    /// task's drop budget, `jig_planner::Plan::drop_budget_ms`: this batch and the fastest later tasks) no longer
    /// fits before its deadline, and as stale once it has waited `stale_after` (the task's share of the SLO,
    /// `jig_planner::Plan::stale_after_ms`), and at least 20 ms beyond L̂ (the paper's staleness, so that
    /// scheduling jitter is not a drop).
    pub fn planned(max_batch: u64, wait: Duration, min_service: Duration, stale_after: Duration) -> Self {
        let staleness = stale_after.saturating_sub(wait).max(Self::MIN_STALENESS);
        BatchPolicy { max_batch, max_wait: wait, staleness, min_service }
    }

    /// The least a planned request may wait beyond its wait bound before it is stale: 20 ms, JigsawServe's
    /// staleness (§4.4) for SLOs of 650–700 ms.
    pub const MIN_STALENESS: Duration = Duration::from_millis(20);

    /// Whether a request arriving at `now` with `deadline` must be dropped at once.
    pub fn refuse<T: Time>(&self, now: T, deadline: T) -> Option<DropReason> {
        let left = deadline.since(now);
        (left < self.min_service || left.is_zero()).then_some(DropReason::Late { needed: self.min_service, left })
    }
}

/// The requests waiting at one instance, in arrival order, and how often they arrive.
#[derive(Debug)]
pub struct Queue<J, T> {
    policy: BatchPolicy,
    pending: VecDeque<J>,
    /// When the last request arrived.
    last_arrival: Option<T>,
    /// The mean gap between arrivals, recent ones weighing most; `None` before the second.
    gap: Option<Duration>,
}

impl<J: Request<T>, T: Time> Queue<J, T> {
    /// An empty queue under `policy`.
    pub fn new(policy: BatchPolicy) -> Self {
        Queue { policy, pending: VecDeque::new(), last_arrival: None, gap: None }
    }

    /// How it batches and drops.
    pub fn policy(&self) -> &BatchPolicy {
        &self.policy
    }

    /// Batch and drop under `policy` from now on (a re-plan's, for an instance it keeps); the requests waiting
    /// stay, and their next batch is formed under it.
    pub fn set_policy(&mut self, policy: BatchPolicy) {
        self.policy = policy;
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether none wait.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Queue `job` behind the others.
    pub fn push(&mut self, job: J) {
        let at = job.enqueued();
        if let Some(last) = self.last_arrival {
            let gap = at.since(last);
            // An exponentially weighted mean: the last few arrivals say whether company is coming.
            self.gap = Some(self.gap.map_or(gap, |mean| mean.mul_f64(0.75) + gap.mul_f64(0.25)));
        }
        self.last_arrival = Some(self.last_arrival.map_or(at, |last| last.max(at)));
        self.pending.push_back(job);
    }

    /// Rows waiting.
    pub fn rows(&self) -> u64 {
        self.pending.iter().map(Request::rows).sum()
    }

    /// When the next batch should start, `None` when nothing waits: at once after a batch (`after_batch`) or
    /// when the batch is full, else when arrivals at their recent rate would have filled it (the rows missing,
    /// counted from the last arrival), and at the latest once the oldest request has waited `max_wait` (L̂); at
    /// once when not even one more request is expected within `max_wait`: an idle instance does not hold a
    /// request for company that is not coming (at the planned demand, arrivals fill batches and L̂ bounds the
    /// wait as the paper's does).
    pub fn start_at(&self, now: T, after_batch: bool) -> Option<T> {
        let first = self.pending.front()?;
        let rows = self.rows();
        if after_batch || rows >= self.policy.max_batch {
            return Some(now);
        }
        let start = match (self.gap, self.last_arrival) {
            (Some(gap), Some(last)) if gap <= self.policy.max_wait => {
                let missing = u32::try_from(self.policy.max_batch - rows).unwrap_or(u32::MAX);
                last.after(gap.saturating_mul(missing)).min(first.enqueued().after(self.policy.max_wait))
            }
            _ => now,
        };
        Some(start.max(now))
    }

    /// Remove the requests that can no longer make their deadline or waited too long, with the reason.
    pub fn drop_hopeless(&mut self, now: T) -> Vec<(J, DropReason)> {
        let stale_after = self.policy.max_wait + self.policy.staleness;
        let mut dropped = Vec::new();
        let mut kept = VecDeque::with_capacity(self.pending.len());
        for job in self.pending.drain(..) {
            let waited = now.since(job.enqueued());
            let reason = if waited > stale_after {
                Some(DropReason::Stale { waited })
            } else {
                self.policy.refuse(now, job.deadline())
            };
            match reason {
                Some(reason) => dropped.push((job, reason)),
                None => kept.push_back(job),
            }
        }
        self.pending = kept;
        dropped
    }

    /// The oldest request and the following ones that can share its batch, up to `max_batch` rows; empty when
    /// nothing waits.
    pub fn take_batch(&mut self) -> Vec<J> {
        let Some(first) = self.pending.pop_front() else { return Vec::new() };
        let mut rows = first.rows();
        let mut batch = vec![first];
        let mut i = 0;
        while i < self.pending.len() && rows < self.policy.max_batch {
            let job = &self.pending[i];
            if rows + job.rows() <= self.policy.max_batch && job.can_share(&batch[0]) {
                let job = self.pending.remove(i).expect("index in range");
                rows += job.rows();
                batch.push(job);
            } else {
                i += 1;
            }
        }
        batch
    }
}

impl<J: Request<T>, T: Time> Extend<J> for Queue<J, T> {
    fn extend<I: IntoIterator<Item = J>>(&mut self, jobs: I) {
        jobs.into_iter().for_each(|job| self.push(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Job {
        id: u32,
        rows: u64,
        at: Duration,
        deadline: Duration,
        shape: u32,
    }

    impl Request<Duration> for Job {
        fn rows(&self) -> u64 {
            self.rows
        }
        fn enqueued(&self) -> Duration {
            self.at
        }
        fn deadline(&self) -> Duration {
            self.deadline
        }
        fn can_share(&self, first: &Self) -> bool {
            self.shape == first.shape
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn job(id: u32, rows: u64, at: u64, shape: u32) -> Job {
        Job { id, rows, at: ms(at), deadline: ms(at + 100), shape }
    }

    fn policy() -> BatchPolicy {
        BatchPolicy { max_batch: 4, max_wait: ms(5), staleness: ms(20), min_service: ms(10) }
    }

    #[test]
    fn an_idle_instance_waits_for_the_company_its_arrivals_bring_but_not_past_max_wait_or_a_full_batch() {
        let mut q = Queue::new(policy());
        assert_eq!(q.start_at(ms(0), false), None);
        q.push(job(1, 1, 0, 0));
        assert_eq!(q.start_at(ms(0), false), Some(ms(0)), "no arrival rate yet: at once");
        q.take_batch();
        // Arrivals 1 ms apart: three more rows fill the batch in 3 ms, within max_wait.
        q.push(job(2, 1, 1, 0));
        assert_eq!(q.start_at(ms(1), false), Some(ms(4)));
        assert_eq!(q.start_at(ms(1), true), Some(ms(1)), "after a batch it starts at once");
        q.push(job(3, 3, 2, 0));
        assert_eq!(q.start_at(ms(2), false), Some(ms(2)), "full");
        q.take_batch();
        // Arrivals 2 ms apart on average: three rows would take longer than max_wait, so it waits max_wait.
        q.push(job(4, 1, 6, 0));
        assert!(q.gap.is_some_and(|g| g > ms(1) && g < ms(2)), "{:?}", q.gap);
        q.take_batch();
        q.push(job(5, 1, 11, 0));
        assert_eq!(q.start_at(ms(11), false), Some(ms(16)), "bounded by max_wait");
        q.take_batch();
        // A lull: no company expected within max_wait, so the lone request starts at once.
        q.push(job(6, 1, 200, 0));
        assert_eq!(q.start_at(ms(200), false), Some(ms(200)));
    }

    /// The rows missing are counted from the last arrival: counted from the first, a batch whose company
    /// arrives at the expected rate started half full (at 5 of 8 rows here).
    #[test]
    fn company_arriving_at_the_expected_rate_fills_the_batch_before_it_starts() {
        let mut q = Queue::new(BatchPolicy { max_batch: 8, max_wait: ms(100), ..policy() });
        for at in 0..5 {
            q.push(job(at as u32, 1, at, 0));
        }
        assert_eq!(q.gap, Some(ms(1)));
        assert_eq!(q.start_at(ms(4), false), Some(ms(7)), "three more rows, 1 ms apart, fill it at 7 ms");
        for at in 5..7 {
            q.push(job(at as u32, 1, at, 0));
        }
        assert_eq!(q.start_at(ms(6), false), Some(ms(7)));
        assert_eq!(q.start_at(ms(9), false), Some(ms(9)), "company late: it starts now");
        q.push(job(7, 1, 7, 0));
        assert_eq!(q.start_at(ms(7), false), Some(ms(7)), "full");
        assert_eq!(q.take_batch().len(), 8);
        // Rows missing at a rate that would take past max_wait: it waits max_wait from the oldest.
        let mut slow = Queue::new(BatchPolicy { max_batch: 8, max_wait: ms(10), ..policy() });
        slow.push(job(1, 1, 0, 0));
        slow.push(job(2, 1, 4, 0));
        assert_eq!(slow.start_at(ms(4), false), Some(ms(10)));
    }

    #[test]
    fn a_batch_takes_the_oldest_and_what_shares_with_it_up_to_max_batch() {
        let mut q = Queue::new(policy());
        for j in [job(1, 2, 0, 0), job(2, 1, 0, 1), job(3, 3, 0, 0), job(4, 2, 0, 0), job(5, 1, 0, 0)] {
            q.push(j);
        }
        let ids: Vec<u32> = q.take_batch().iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![1, 4], "2 skips the other shape, 3 does not fit, 4 fills the batch");
        let ids: Vec<u32> = q.take_batch().iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![2]);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn late_and_stale_requests_are_dropped_with_the_reason() {
        let mut q = Queue::new(policy());
        q.push(Job { deadline: ms(190), ..job(1, 1, 170, 0) });
        q.push(job(2, 1, 0, 0)); // deadline 100
        q.push(Job { deadline: ms(200), ..job(3, 1, 0, 0) });
        q.push(job(4, 1, 180, 0)); // deadline 280
        let dropped = q.drop_hopeless(ms(185));
        let reasons: Vec<(u32, DropReason)> = dropped.iter().map(|(j, r)| (j.id, *r)).collect();
        assert_eq!(
            reasons,
            vec![
                (1, DropReason::Late { needed: ms(10), left: ms(5) }),
                (2, DropReason::Stale { waited: ms(185) }),
                (3, DropReason::Stale { waited: ms(185) }),
            ]
        );
        assert_eq!(q.take_batch().iter().map(|j| j.id).collect::<Vec<_>>(), vec![4]);
        assert!(policy().refuse(ms(0), ms(9)).is_some());
        assert!(policy().refuse(ms(0), ms(10)).is_none());
    }

    #[test]
    fn a_planned_instance_is_stale_past_its_share_of_the_slo_and_at_least_20_ms_past_its_wait_bound() {
        let long = BatchPolicy::planned(8, ms(100), ms(150), ms(200));
        assert_eq!((long.max_wait, long.max_wait + long.staleness, long.min_service), (ms(100), ms(200), ms(150)));
        let slack = BatchPolicy::planned(8, ms(100), ms(150), ms(4000));
        assert_eq!(slack.max_wait + slack.staleness, ms(4000), "a plan with slack spreads it");
        let short = BatchPolicy::planned(8, ms(2), ms(3), ms(4));
        assert_eq!(short.max_wait + short.staleness, ms(22));
    }
}
