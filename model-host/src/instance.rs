//! A model instance: one variant on one segment with a maximum batch size, behind a queue.
//!
//! Each instance owns a thread that forms batches and runs them on its [`Executor`] (a model in this
//! process, or in a worker process). When a batch starts, which requests it takes and which are dropped early
//! is [`jig_policy::queue`]'s to decide (JigsawServe §3.3), the same code `jig simulate` runs on simulated time.
//! Requests share a batch only when their inputs agree in everything but the first dimension; the outputs
//! are split back along it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;

pub use jig_policy::{BatchPolicy, DropReason};
use jig_policy::{Queue, Request};

use crate::batch;
use crate::onnx::{self, Model, ModelError, TensorSpec};
use crate::{Tensor, TensorError};

/// Any error, boxed: what an [`Executor`] or an instance's loader fails with (a [`ModelError`], a
/// [`crate::worker::WorkerError`], a launch error), kept whole for callers that match on it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs batches for an instance.
pub trait Executor: Send + Sync {
    /// The model's declared inputs; requests are checked against them before they queue.
    fn inputs(&self) -> &[TensorSpec];
    /// The model's declared outputs, in the order [`Executor::execute`] returns them (none known: empty).
    fn outputs(&self) -> &[TensorSpec] {
        &[]
    }
    /// Run one batch.
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError>;
    /// Memory for `len` bytes of a batch's input that it reads with no copy (a worker's shared region), for
    /// the batcher to stack requests into; `None`: any memory will do.
    fn buffer(&self, _len: usize) -> Option<crate::worker::SharedBuffer> {
        None
    }
    /// How many times the executor's process was replaced after dying (a worker's); `None` in process.
    fn restarts(&self) -> Option<Arc<AtomicU64>> {
        None
    }
}

impl Executor for Model {
    fn inputs(&self) -> &[TensorSpec] {
        Model::inputs(self)
    }
    fn outputs(&self) -> &[TensorSpec] {
        Model::outputs(self)
    }
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
        Ok(self.run(inputs)?)
    }
}

/// How an instance batches and drops.
#[derive(Debug, Clone)]
pub struct InstanceConfig {
    /// Names the instance in errors, logs and metrics, e.g. `recognize/ppocr-v4@cpu:2#0`.
    pub name: String,
    /// Batching and early drops.
    pub policy: BatchPolicy,
    /// Pin the batch thread, and the ONNX Runtime threads it creates, to these CPU cores.
    pub cores: Option<Vec<usize>>,
    /// Bytes of memory the segment grants this instance; a model whose weights alone exceed it is refused.
    pub memory: Option<u64>,
}

impl InstanceConfig {
    /// Defaults for `name`: [`BatchPolicy::default`], no pinning.
    pub fn new(name: impl Into<String>) -> Self {
        InstanceConfig { name: name.into(), policy: BatchPolicy::default(), cores: None, memory: None }
    }
}

/// Why an instance did not answer a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstanceError {
    /// The batching policy dropped the request early, on arrival or in the queue, because it could no longer
    /// make its deadline or waited too long.
    #[error("instance `{instance}` dropped the request early: {reason}")]
    Dropped {
        /// The instance's name.
        instance: String,
        /// Why, with the times involved.
        reason: DropReason,
    },
    /// The inputs do not fit the model's declared inputs; checked before the request queues.
    #[error("instance `{instance}`: {source}")]
    Input {
        /// The instance's name.
        instance: String,
        /// What does not fit.
        source: ModelError,
    },
    /// The batch the request was in failed; every request in it gets this error.
    #[error("instance `{instance}` failed: {detail}")]
    Failed {
        /// The instance's name.
        instance: String,
        /// The executor's message, or why the requests could not be stacked into a batch or its outputs
        /// split back.
        detail: String,
    },
    /// The instance could not start: its thread, pinning or model load failed, or the weights exceed the
    /// segment's memory.
    #[error("instance `{instance}` could not start: {detail}")]
    Start {
        /// The instance's name.
        instance: String,
        /// What went wrong.
        detail: String,
    },
    /// The instance's thread has ended, so nothing answers its queue.
    #[error("instance `{instance}` has stopped")]
    Stopped {
        /// The instance's name.
        instance: String,
    },
}

/// Counters of an instance since it started.
#[derive(Debug, Default)]
pub struct Stats {
    /// Requests received by [`Instance::infer`], including those refused for their inputs or dropped.
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
    /// Requests waiting for a batch now (a gauge, unlike the counters above).
    pub queued: AtomicU64,
    /// Latencies of the batches that succeeded, by rows.
    latencies: std::sync::Mutex<std::collections::BTreeMap<u64, Recent>>,
}

/// Batch latencies recorded at one batch size: how many, and the most recent.
#[derive(Debug, Default, Clone)]
struct Recent {
    batches: u64,
    ms: std::collections::VecDeque<f64>,
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
}

impl Stats {
    fn record(&self, rows: u64, latency: std::time::Duration) {
        let mut latencies = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
        let recent = latencies.entry(rows).or_default();
        recent.batches += 1;
        if recent.ms.len() == RECENT_BATCHES {
            recent.ms.pop_front();
        }
        recent.ms.push_back(latency.as_secs_f64() * 1e3);
    }

    /// The latencies observed, per batch size.
    pub fn batch_latencies(&self) -> Vec<BatchLatency> {
        let latencies = self.latencies.lock().unwrap_or_else(|p| p.into_inner());
        latencies
            .iter()
            .map(|(&rows, r)| BatchLatency { rows, batches: r.batches, recent_ms: r.ms.iter().copied().collect() })
            .collect()
    }
}

/// Requests that queue as one: one for [`Instance::infer`], several that run in one batch for
/// [`Instance::infer_together`].
struct Job {
    /// Each request's inputs, in the order the reply answers them.
    requests: Vec<Vec<Tensor>>,
    rows: u64,
    deadline: Instant,
    enqueued: Instant,
    reply: tokio::sync::oneshot::Sender<Result<Vec<Vec<Tensor>>, InstanceError>>,
}

impl Request<Instant> for Job {
    fn rows(&self) -> u64 {
        self.rows
    }
    fn enqueued(&self) -> Instant {
        self.enqueued
    }
    fn deadline(&self) -> Instant {
        self.deadline
    }
    fn can_share(&self, first: &Self) -> bool {
        batch::batch_key(&self.requests[0]) == batch::batch_key(&first.requests[0])
    }
}

/// A running instance. Dropping it stops its thread once the queue is empty.
pub struct Instance {
    config: Arc<InstanceConfig>,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    queue: mpsc::Sender<Job>,
    stats: Arc<Stats>,
    restarts: Option<Arc<AtomicU64>>,
}

impl Instance {
    /// Start the instance's thread, which pins itself (if configured), then calls `load` for its executor:
    /// an ONNX Runtime session created there inherits the pinning. Returns once loading finished.
    pub fn start<E, F>(config: InstanceConfig, load: F) -> Result<Instance, InstanceError>
    where
        E: Executor + 'static,
        F: FnOnce() -> Result<E, BoxError> + Send + 'static,
    {
        let config = Arc::new(config);
        let stats = Arc::new(Stats::default());
        let (queue, jobs) = mpsc::channel::<Job>();
        type Ready = (Vec<TensorSpec>, Vec<TensorSpec>, Option<Arc<AtomicU64>>);
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Ready, String>>();
        let start_error = |detail: String| InstanceError::Start { instance: config.name.clone(), detail };
        {
            let (config, stats) = (config.clone(), stats.clone());
            std::thread::Builder::new()
                .name(format!("jig-instance {}", config.name))
                .spawn(move || {
                    if let Some(cores) = &config.cores
                        && let Err(e) = crate::device::pin_current_thread(cores)
                    {
                        let _ = ready_tx.send(Err(format!("cannot pin to cores {cores:?}: {e}")));
                        return;
                    }
                    let executor = match load() {
                        Ok(executor) => executor,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok((
                        executor.inputs().to_vec(),
                        executor.outputs().to_vec(),
                        executor.restarts(),
                    )));
                    // A model with an input that has no batch dimension (a Piper voice's `scales`) cannot stack
                    // requests: it runs them one at a time.
                    let batchable = executor.inputs().iter().all(TensorSpec::batchable);
                    let policy =
                        BatchPolicy { max_batch: if batchable { config.policy.max_batch } else { 1 }, ..config.policy };
                    Batcher { config, stats, executor, jobs, queue: Queue::new(policy), spare: Arc::default() }.run();
                    release_freed_memory();
                })
                .map_err(|e| start_error(e.to_string()))?;
        }
        let specs = ready_rx.recv().map_err(|_| start_error("the instance thread died while loading".into()))?;
        let (inputs, outputs, restarts) = specs.map_err(start_error)?;
        Ok(Instance { inputs, outputs, config, queue, stats, restarts })
    }

    /// The instance's name, from its [`InstanceConfig`].
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The configuration it was started with (`cores` is `None` when [`crate::launch::Launcher`] started
    /// it, since the launcher pins the thread itself).
    pub fn config(&self) -> &InstanceConfig {
        &self.config
    }

    /// The model's declared inputs.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    /// The model's declared outputs, in the order [`Instance::infer`] answers them.
    pub fn outputs(&self) -> &[TensorSpec] {
        &self.outputs
    }

    /// Its counters, updated as it runs.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// How many times its worker process was replaced after dying or misbehaving (0 in process).
    pub fn restarts(&self) -> u64 {
        self.restarts.as_ref().map_or(0, |r| r.load(Ordering::Relaxed))
    }

    /// Queue `inputs` for the next batch and wait for this request's outputs.
    pub async fn infer(&self, inputs: Vec<Tensor>, deadline: Instant) -> Result<Vec<Tensor>, InstanceError> {
        let mut outputs = self.enqueue(vec![inputs], deadline).await?;
        Ok(outputs.pop().unwrap_or_default())
    }

    /// Run `requests` as one batch (a batch booked by PPipe's scheduler, `jig_policy::reserve`), with no others
    /// in it, and wait for each one's outputs, in order. Requests whose inputs cannot share a batch (shapes that
    /// differ beyond the first dimension) run as consecutive batches, one per shape. The instance drops them
    /// only when even the latest `deadline` has passed.
    pub async fn infer_together(
        &self,
        requests: Vec<Vec<Tensor>>,
        deadline: Instant,
    ) -> Result<Vec<Vec<Tensor>>, InstanceError> {
        // Group by shape, keeping each request's place.
        let mut groups: Vec<(Vec<usize>, Vec<Vec<Tensor>>)> = Vec::new();
        for (k, inputs) in requests.into_iter().enumerate() {
            let key = batch::batch_key(&inputs);
            let same = groups.iter().position(|(_, g)| batch::batch_key(&g[0]) == key);
            match same {
                Some(g) => {
                    groups[g].0.push(k);
                    groups[g].1.push(inputs);
                }
                None => groups.push((vec![k], vec![inputs])),
            }
        }
        let n = groups.iter().map(|(places, _)| places.len()).sum();
        let (places, answers): (Vec<_>, Vec<_>) =
            groups.into_iter().map(|(places, group)| (places, self.enqueue(group, deadline))).unzip();
        // Every job was queued when `enqueue` was called: awaiting them in turn waits for none longer.
        let mut outputs = vec![Vec::new(); n];
        for (places, answer) in places.into_iter().zip(answers) {
            for (k, out) in places.into_iter().zip(answer.await?) {
                outputs[k] = out;
            }
        }
        Ok(outputs)
    }

    /// Queue `requests` as one job: checked, refused when already late, else answered by the batcher.
    fn enqueue(
        &self,
        requests: Vec<Vec<Tensor>>,
        deadline: Instant,
    ) -> impl std::future::Future<Output = Result<Vec<Vec<Tensor>>, InstanceError>> + use<'_> {
        let instance = || self.config.name.clone();
        self.stats.requests.fetch_add(requests.len() as u64, Ordering::Relaxed);
        // The batch dimension is free; everything else must match the model.
        let checked = requests
            .iter()
            .try_for_each(|inputs| onnx::check_inputs(instance().as_str(), &self.inputs, inputs))
            .map_err(|source| InstanceError::Input { instance: instance(), source });
        let now = Instant::now();
        let sent = checked.and_then(|()| {
            if let Some(reason) = self.config.policy.refuse(now, deadline) {
                self.stats.dropped_late.fetch_add(requests.len() as u64, Ordering::Relaxed);
                return Err(InstanceError::Dropped { instance: instance(), reason });
            }
            let (reply, answer) = tokio::sync::oneshot::channel();
            let (count, rows) = (requests.len() as u64, requests.iter().map(|r| batch::rows(r)).sum());
            let job = Job { requests, rows, deadline, enqueued: now, reply };
            self.stats.queued.fetch_add(count, Ordering::Relaxed);
            if self.queue.send(job).is_err() {
                self.stats.queued.fetch_sub(count, Ordering::Relaxed);
                return Err(InstanceError::Stopped { instance: instance() });
            }
            Ok(answer)
        });
        async move {
            match sent {
                Err(e) => Err(e),
                Ok(answer) => answer.await.unwrap_or_else(|_| Err(InstanceError::Stopped { instance: instance() })),
            }
        }
    }
}

/// Hand the memory a stopped instance freed (its session, its buffers) back to the OS. glibc keeps freed
/// memory in its arenas, so a gateway that re-plans or redeploys would otherwise keep each old deployment's.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The instance thread's state.
struct Batcher<E> {
    config: Arc<InstanceConfig>,
    stats: Arc<Stats>,
    executor: E,
    jobs: mpsc::Receiver<Job>,
    queue: Queue<Job>,
    /// Memory for stacked batches the executor does not provide (in process), reused from batch to batch.
    spare: Arc<jig_tensor::Spare>,
}

impl<E: Executor> Batcher<E> {
    fn run(mut self) {
        let mut after_batch = false;
        loop {
            self.queue.extend(self.jobs.try_iter());
            if self.queue.is_empty() {
                match self.jobs.recv() {
                    Ok(job) => self.queue.push(job),
                    Err(_) => return, // the instance was dropped and the queue is empty
                }
                after_batch = false;
            }
            // Wait for company until the policy says the batch starts.
            while let Some(start) = self.queue.start_at(Instant::now(), after_batch) {
                let wait = start.saturating_duration_since(Instant::now());
                if wait.is_zero() {
                    break;
                }
                match self.jobs.recv_timeout(wait) {
                    Ok(job) => self.queue.push(job),
                    Err(_) => break, // time to start, or disconnected: run what there is
                }
            }
            self.drop_hopeless(Instant::now());
            let batch = self.queue.take_batch();
            after_batch = !batch.is_empty();
            if after_batch {
                self.run_batch(batch);
            }
        }
    }

    /// Answer requests that can no longer make their deadline, or waited too long, with a drop.
    fn drop_hopeless(&mut self, now: Instant) {
        for (job, reason) in self.queue.drop_hopeless(now) {
            let counter = match reason {
                DropReason::Late { .. } => &self.stats.dropped_late,
                DropReason::Stale { .. } => &self.stats.dropped_stale,
            };
            let requests = job.requests.len() as u64;
            counter.fetch_add(requests, Ordering::Relaxed);
            self.stats.queued.fetch_sub(requests, Ordering::Relaxed);
            let _ = job.reply.send(Err(InstanceError::Dropped { instance: self.config.name.clone(), reason }));
        }
    }

    fn run_batch(&mut self, batch: Vec<Job>) {
        let name = &self.config.name;
        let requests: u64 = batch.iter().map(|j| j.requests.len() as u64).sum();
        self.stats.queued.fetch_sub(requests, Ordering::Relaxed);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        let rows: Vec<u64> = batch.iter().flat_map(|j| j.requests.iter().map(|r| batch::rows(r))).collect();
        self.stats.rows.fetch_add(rows.iter().sum(), Ordering::Relaxed);
        let started = Instant::now();
        let result = {
            let inputs: Vec<&[Tensor]> = batch.iter().flat_map(|j| j.requests.iter().map(Vec::as_slice)).collect();
            batch::stack(&inputs, |len| self.executor.buffer(len), &self.spare)
                .map_err(|e: TensorError| e.to_string())
                .and_then(|stacked| self.executor.execute(&stacked).map_err(|e| e.to_string()))
                .and_then(|outputs| batch::split(outputs, &rows))
        };
        let elapsed = started.elapsed();
        self.stats.busy_ns.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        match result {
            Ok(per_request) => {
                self.stats.record(rows.iter().sum(), elapsed);
                let mut per_request = per_request.into_iter();
                for job in batch {
                    let outputs = per_request.by_ref().take(job.requests.len()).collect();
                    let _ = job.reply.send(Ok(outputs));
                }
            }
            Err(detail) => {
                tracing::warn!(instance = %name, requests, "batch failed: {detail}");
                self.stats.failed.fetch_add(requests, Ordering::Relaxed);
                for job in batch {
                    let _ =
                        job.reply.send(Err(InstanceError::Failed { instance: name.clone(), detail: detail.clone() }));
                }
            }
        }
    }
}
