//! A model instance: one variant on one segment with a maximum batch size, behind a queue.
//!
//! Each instance owns a thread that forms batches and runs them on its [`Executor`] (a model in this
//! process, or in a worker process). Batching follows JigsawServe §3.3:
//!
//! * a batch starts as soon as `max_batch` rows wait; otherwise
//! * when the previous batch finishes and requests wait, it starts at once with what is there; otherwise
//! * the first request of a new batch waits at most `max_wait` (the task's bound L̂) for company.
//!
//! Requests are dropped early, with [`InstanceError::Dropped`], rather than served late: on arrival and again
//! when picked up, a request is dropped if even `min_service` (this instance's own fastest run plus the
//! fastest downstream path, with no batching delay) no longer fits before its deadline; and a request left
//! waiting longer than `max_wait + staleness` (all batches full, nobody picked it up) is stale.
//!
//! Requests share a batch only when their inputs agree in everything but the first dimension; the outputs
//! are split back along it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::batch;
use crate::onnx::{self, Model, ModelError, TensorSpec};
use crate::{Tensor, TensorError};

/// Runs batches for an instance.
pub trait Executor: Send + Sync {
    /// The model's declared inputs; requests are checked against them before they queue.
    fn inputs(&self) -> &[TensorSpec];
    /// Run one batch.
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, String>;
}

impl Executor for Model {
    fn inputs(&self) -> &[TensorSpec] {
        Model::inputs(self)
    }
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        self.run(inputs).map_err(|e| e.to_string())
    }
}

/// How an instance batches and drops.
#[derive(Debug, Clone)]
pub struct InstanceConfig {
    /// Names the instance in errors, logs and metrics, e.g. `recognize/ppocr-v4@cpu:2#0`.
    pub name: String,
    /// Rows per batch at most (b). A single request with more rows runs alone.
    pub max_batch: u64,
    /// The longest the first request of a batch waits for others (L̂).
    pub max_wait: Duration,
    /// How much longer than `max_wait` a request may wait before it counts as stale.
    pub staleness: Duration,
    /// The least time a request still needs once picked up: this instance's batch-1 latency plus the fastest
    /// downstream path. Zero never drops a request for lateness before its deadline.
    pub min_service: Duration,
    /// Pin the batch thread, and the ONNX Runtime threads it creates, to these CPU cores.
    pub cores: Option<Vec<usize>>,
    /// Bytes of memory the segment grants this instance; a model whose weights alone exceed it is refused.
    pub memory: Option<u64>,
}

impl InstanceConfig {
    /// Defaults for `name`: max batch 1, no waiting, 20 ms staleness, no early dropping, no pinning.
    pub fn new(name: impl Into<String>) -> Self {
        InstanceConfig {
            name: name.into(),
            max_batch: 1,
            max_wait: Duration::ZERO,
            staleness: Duration::from_millis(20),
            min_service: Duration::ZERO,
            cores: None,
            memory: None,
        }
    }
}

/// Why a request dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// Even the fastest service from here on would finish after the deadline.
    Late { needed: Duration, left: Duration },
    /// Nobody picked the request up in time.
    Stale { waited: Duration },
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DropReason::Late { needed, left } => {
                write!(f, "it needs at least {needed:?} more but only {left:?} remain before its deadline")
            }
            DropReason::Stale { waited } => write!(f, "it waited {waited:?} without being picked up (stale)"),
        }
    }
}

/// Why an instance did not answer a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstanceError {
    #[error("instance `{instance}` dropped the request early: {reason}")]
    Dropped { instance: String, reason: DropReason },
    #[error("instance `{instance}`: {source}")]
    Input { instance: String, source: ModelError },
    #[error("instance `{instance}` failed: {detail}")]
    Failed { instance: String, detail: String },
    #[error("instance `{instance}` could not start: {detail}")]
    Start { instance: String, detail: String },
    #[error("instance `{instance}` has stopped")]
    Stopped { instance: String },
}

/// Counters of an instance since it started.
#[derive(Debug, Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub batches: AtomicU64,
    pub rows: AtomicU64,
    pub dropped_late: AtomicU64,
    pub dropped_stale: AtomicU64,
    pub failed: AtomicU64,
    /// Nanoseconds spent running batches: its rate is the share of the segment in use.
    pub busy_ns: AtomicU64,
    /// Requests waiting for a batch now (a gauge, unlike the counters above).
    pub queued: AtomicU64,
}

struct Job {
    inputs: Vec<Tensor>,
    rows: u64,
    deadline: Instant,
    enqueued: Instant,
    reply: tokio::sync::oneshot::Sender<Result<Vec<Tensor>, InstanceError>>,
}

/// A running instance. Dropping it stops its thread once the queue is empty.
pub struct Instance {
    config: Arc<InstanceConfig>,
    inputs: Vec<TensorSpec>,
    queue: mpsc::Sender<Job>,
    stats: Arc<Stats>,
}

impl Instance {
    /// Start the instance's thread, which pins itself (if configured), then calls `load` for its executor:
    /// an ONNX Runtime session created there inherits the pinning. Returns once loading finished.
    pub fn start<E, F>(config: InstanceConfig, load: F) -> Result<Instance, InstanceError>
    where
        E: Executor + 'static,
        F: FnOnce() -> Result<E, String> + Send + 'static,
    {
        let config = Arc::new(config);
        let stats = Arc::new(Stats::default());
        let (queue, jobs) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Vec<TensorSpec>, String>>();
        let start_error = |detail: String| InstanceError::Start { instance: config.name.clone(), detail };
        {
            let (config, stats) = (config.clone(), stats.clone());
            std::thread::Builder::new()
                .name(format!("jig-instance {}", config.name))
                .spawn(move || {
                    if let Some(cores) = &config.cores {
                        if let Err(e) = crate::device::pin_current_thread(cores) {
                            let _ = ready_tx.send(Err(format!("cannot pin to cores {cores:?}: {e}")));
                            return;
                        }
                    }
                    let executor = match load() {
                        Ok(executor) => executor,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(executor.inputs().to_vec()));
                    let batchable = executor.inputs().iter().all(TensorSpec::batchable);
                    let max_batch = if batchable { config.max_batch } else { 1 };
                    Batcher { config, stats, executor, jobs, pending: VecDeque::new(), max_batch }.run();
                })
                .map_err(|e| start_error(e.to_string()))?;
        }
        let inputs = ready_rx.recv().map_err(|_| start_error("the instance thread died while loading".into()))?;
        Ok(Instance { inputs: inputs.map_err(start_error)?, config, queue, stats })
    }

    /// Start an instance running the ONNX model at `path` in this process, with one intra-op thread per pinned
    /// core (or `threads`).
    pub fn start_onnx(
        config: InstanceConfig,
        model_name: &str,
        path: &std::path::Path,
        options: onnx::SessionOptions,
    ) -> Result<Instance, InstanceError> {
        if let (Some(budget), Ok(meta)) = (config.memory, std::fs::metadata(path)) {
            if meta.len() > budget {
                return Err(InstanceError::Start {
                    instance: config.name,
                    detail: format!(
                        "model `{model_name}` ({}) needs at least {} MiB for its weights, but the segment grants \
                         {} MiB; place it on a larger segment",
                        path.display(),
                        meta.len() >> 20,
                        budget >> 20
                    ),
                });
            }
        }
        let (model_name, path) = (model_name.to_string(), path.to_path_buf());
        Instance::start(config, move || Model::load(&model_name, &path, &options).map_err(|e| e.to_string()))
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn config(&self) -> &InstanceConfig {
        &self.config
    }

    /// The model's declared inputs.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Queue `inputs` for the next batch and wait for this request's outputs.
    pub async fn infer(&self, inputs: Vec<Tensor>, deadline: Instant) -> Result<Vec<Tensor>, InstanceError> {
        let instance = || self.config.name.clone();
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        // The batch dimension is free; everything else must match the model.
        onnx::check_inputs(instance().as_str(), &self.inputs, &inputs)
            .map_err(|source| InstanceError::Input { instance: instance(), source })?;
        let now = Instant::now();
        if let Some(reason) = too_late(now, deadline, self.config.min_service) {
            self.stats.dropped_late.fetch_add(1, Ordering::Relaxed);
            return Err(InstanceError::Dropped { instance: instance(), reason });
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job { rows: batch::rows(&inputs), inputs, deadline, enqueued: now, reply };
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        if self.queue.send(job).is_err() {
            self.stats.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(InstanceError::Stopped { instance: instance() });
        }
        answer.await.unwrap_or_else(|_| Err(InstanceError::Stopped { instance: instance() }))
    }
}

fn too_late(now: Instant, deadline: Instant, needed: Duration) -> Option<DropReason> {
    let left = deadline.saturating_duration_since(now);
    (left < needed || left.is_zero()).then_some(DropReason::Late { needed, left })
}

/// The instance thread's state.
struct Batcher<E> {
    config: Arc<InstanceConfig>,
    stats: Arc<Stats>,
    executor: E,
    jobs: mpsc::Receiver<Job>,
    /// Requests received and not yet run, in arrival order.
    pending: VecDeque<Job>,
    /// Rows per batch: the configured maximum, or 1 for a model with an input that has no batch dimension
    /// (a Piper voice's `scales`), whose requests cannot be stacked.
    max_batch: u64,
}

impl<E: Executor> Batcher<E> {
    fn run(mut self) {
        loop {
            // Idle: wait for a first request, then up to `max_wait` for the batch to fill.
            if self.pending.is_empty() {
                match self.jobs.recv() {
                    Ok(job) => self.pending.push_back(job),
                    Err(_) => return, // the instance was dropped and the queue is empty
                }
                let until = self.pending[0].enqueued + self.config.max_wait;
                while self.pending_rows() < self.max_batch {
                    match self.jobs.recv_timeout(until.saturating_duration_since(Instant::now())) {
                        Ok(job) => self.pending.push_back(job),
                        Err(_) => break, // timed out, or disconnected: run what there is
                    }
                }
            }
            self.pending.extend(self.jobs.try_iter());
            self.drop_hopeless(Instant::now());
            if let Some(batch) = self.take_batch() {
                self.run_batch(batch);
            }
            // The batch finished: whatever arrived meanwhile starts at once, in the next turn.
            self.pending.extend(self.jobs.try_iter());
        }
    }

    fn pending_rows(&self) -> u64 {
        self.pending.iter().map(|j| j.rows).sum()
    }

    /// Answer requests that can no longer make their deadline, or waited too long, with a drop.
    fn drop_hopeless(&mut self, now: Instant) {
        let stale_after = self.config.max_wait + self.config.staleness;
        let (config, stats) = (&self.config, &self.stats);
        self.pending.retain_mut(|job| {
            let waited = now.saturating_duration_since(job.enqueued);
            let reason = if waited > stale_after {
                stats.dropped_stale.fetch_add(1, Ordering::Relaxed);
                DropReason::Stale { waited }
            } else if let Some(reason) = too_late(now, job.deadline, config.min_service) {
                stats.dropped_late.fetch_add(1, Ordering::Relaxed);
                reason
            } else {
                return true;
            };
            stats.queued.fetch_sub(1, Ordering::Relaxed);
            let (reply, _) = tokio::sync::oneshot::channel();
            let reply = std::mem::replace(&mut job.reply, reply);
            let _ = reply.send(Err(InstanceError::Dropped { instance: config.name.clone(), reason }));
            false
        });
    }

    /// The oldest request and the following ones that can share its batch, up to `max_batch` rows.
    fn take_batch(&mut self) -> Option<Vec<Job>> {
        let first = self.pending.pop_front()?;
        let mut rows = first.rows;
        let mut batch = vec![first];
        let mut i = 0;
        while i < self.pending.len() && rows < self.max_batch {
            let fits = rows + self.pending[i].rows <= self.max_batch
                && batch::batch_key(&self.pending[i].inputs) == batch::batch_key(&batch[0].inputs);
            if fits {
                let job = self.pending.remove(i).expect("index in range");
                rows += job.rows;
                batch.push(job);
            } else {
                i += 1;
            }
        }
        Some(batch)
    }

    fn run_batch(&mut self, batch: Vec<Job>) {
        let name = &self.config.name;
        self.stats.queued.fetch_sub(batch.len() as u64, Ordering::Relaxed);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        let rows: Vec<u64> = batch.iter().map(|j| j.rows).collect();
        self.stats.rows.fetch_add(rows.iter().sum(), Ordering::Relaxed);
        let started = Instant::now();
        let result = {
            let inputs: Vec<&[Tensor]> = batch.iter().map(|j| j.inputs.as_slice()).collect();
            batch::stack(&inputs)
                .map_err(|e: TensorError| e.to_string())
                .and_then(|stacked| self.executor.execute(&stacked))
                .and_then(|outputs| batch::split(outputs, &rows))
        };
        self.stats.busy_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match result {
            Ok(per_request) => {
                for (job, outputs) in batch.into_iter().zip(per_request) {
                    let _ = job.reply.send(Ok(outputs));
                }
            }
            Err(detail) => {
                tracing::warn!(instance = %name, requests = batch.len(), "batch failed: {detail}");
                self.stats.failed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                for job in batch {
                    let _ =
                        job.reply.send(Err(InstanceError::Failed { instance: name.clone(), detail: detail.clone() }));
                }
            }
        }
    }
}
