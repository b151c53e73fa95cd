//! What an instance counts of its requests and batches: the counters its metrics and the Open Inference
//! Protocol's statistics read, and the recent latencies per batch size that observed profiles are made of.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters of an instance since it started.
#[derive(Debug, Default)]
pub struct Stats {
    /// Requests received by [`Instance::infer`](super::Instance::infer), including those refused for their inputs
    /// or dropped.
    pub requests: AtomicU64,
    /// Batches run, successful or not.
    pub batches: AtomicU64,
    /// Rows (batch items) in the batches run.
    pub rows: AtomicU64,
    /// Requests dropped because they could no longer meet their deadline, on arrival or in the queue.
    pub dropped_late: AtomicU64,
    /// Requests dropped from the queue as stale: waiting longer than the policy's `max_wait + staleness`.
    pub dropped_stale: AtomicU64,
    /// Requests whose batch failed.
    pub failed: AtomicU64,
    /// Nanoseconds spent running batches: its rate is the share of the segment in use.
    pub busy_ns: AtomicU64,
    /// CPU time the instance's thread spent running batches, ns: less than `busy_ns` where the thread waited for
    /// a core (an unpinned instance on a busy machine) or for a worker process or GPU.
    pub cpu_ns: AtomicU64,
    /// Requests answered with their outputs.
    pub answered: AtomicU64,
    /// Summed over the requests answered, ns: how long each waited in the queue for its batch to start (none
    /// for one its caller ran at once).
    pub queue_ns: AtomicU64,
    /// Summed over the requests answered, ns: from arrival to answer.
    pub request_ns: AtomicU64,
    /// When the last request was answered, ms since the Unix epoch (0: none yet).
    pub last_answered_ms: AtomicU64,
    /// Summed over the requests answered, ns: their batch's time stacking the inputs, executing, and splitting
    /// the outputs. Each request counts its whole batch, as Triton's statistics do.
    pub input_ns: AtomicU64,
    /// See [`Stats::input_ns`].
    pub execute_ns: AtomicU64,
    /// See [`Stats::input_ns`].
    pub output_ns: AtomicU64,
    /// Requests waiting for a batch now (a gauge, unlike the counters above).
    pub queued: AtomicU64,
    /// Latencies of the batches that succeeded, by rows.
    latencies: Mutex<BTreeMap<u64, Recent>>,
}

/// Batch latencies recorded at one batch size: how many, and the most recent, each with the CPU time it took
/// (ms, where measured).
#[derive(Debug, Default, Clone)]
struct Recent {
    batches: u64,
    ms: VecDeque<(f64, Option<f64>)>,
    /// Every batch's time stacking, executing and splitting, ns, summed.
    phases_ns: [u64; 3],
}

/// Latencies kept per batch size: enough for a p95, recent enough to follow a change.
const RECENT_BATCHES: usize = 100;

/// What an instance observed of its batches of one size.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchLatency {
    /// Rows per batch.
    pub rows: u64,
    /// Batches of that size that succeeded.
    pub batches: u64,
    /// The latency of each of the last (up to) 100, ms, oldest first.
    pub recent_ms: Vec<f64>,
    /// The CPU time the instance's thread spent on each of them, ms, where the platform measures it: what the
    /// batch costs its cores, without the time it waited for one (or for a worker process or GPU).
    pub recent_cpu_ms: Vec<Option<f64>>,
    /// All of them together, ns: stacking the inputs, executing, splitting the outputs.
    pub phases_ns: [u64; 3],
}

impl Stats {
    /// Count the requests answered from one batch that ran from `started` to `ended`: (arrival, requests) of each
    /// job.
    pub(super) fn answered(&self, arrived: impl IntoIterator<Item = (Instant, u64)>, started: Instant, ended: Instant) {
        let epoch_ms = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_millis() as u64);
        self.last_answered_ms.fetch_max(epoch_ms, Ordering::Relaxed);
        let ns = |d: Duration| d.as_nanos() as u64;
        for (at, requests) in arrived {
            self.answered.fetch_add(requests, Ordering::Relaxed);
            self.queue_ns.fetch_add(requests * ns(started.saturating_duration_since(at)), Ordering::Relaxed);
            self.request_ns.fetch_add(requests * ns(ended.saturating_duration_since(at)), Ordering::Relaxed);
        }
    }

    /// Record a batch of `rows` that succeeded: its latency, CPU time and phases (stacking, executing, splitting).
    pub(super) fn record(&self, rows: u64, latency: Duration, cpu: Option<Duration>, phases: [Duration; 3]) {
        let mut latencies = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
        let recent = latencies.entry(rows).or_default();
        recent.batches += 1;
        for (sum, phase) in recent.phases_ns.iter_mut().zip(phases) {
            *sum += phase.as_nanos() as u64;
        }
        if recent.ms.len() == RECENT_BATCHES {
            recent.ms.pop_front();
        }
        recent.ms.push_back((latency.as_secs_f64() * 1e3, cpu.map(|cpu| cpu.as_secs_f64() * 1e3)));
    }

    /// The latency of the last batch of `rows` rows that succeeded.
    pub(super) fn last(&self, rows: u64) -> Option<Duration> {
        let latencies = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
        latencies.get(&rows).and_then(|r| r.ms.back()).map(|&(ms, _)| Duration::from_secs_f64(ms / 1e3))
    }

    /// The latencies observed, per batch size.
    pub fn batch_latencies(&self) -> Vec<BatchLatency> {
        let latencies = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
        latencies
            .iter()
            .map(|(&rows, r)| BatchLatency {
                rows,
                batches: r.batches,
                recent_ms: r.ms.iter().map(|&(ms, _)| ms).collect(),
                recent_cpu_ms: r.ms.iter().map(|&(_, cpu)| cpu).collect(),
                phases_ns: r.phases_ns,
            })
            .collect()
    }
}
