//! A model instance: one variant on one segment with a maximum batch size, behind a queue.
//!
//! Each instance owns a thread that forms batches and runs them on its [`Executor`] (a model in this
//! process, or in a worker process). When a batch starts, which requests it takes and which are dropped early
//! is [`jig_policy::queue`]'s to decide (JigsawServe §3.3), the same code `jig simulate` runs on simulated time.
//! Requests share a batch only when their inputs agree in everything but the first dimension; the outputs
//! are split back along it.
//!
//! A request that would run alone at once on an idle in-process instance, in a batch that took under
//! [`CALLER_RUNS_BELOW`] last time, is run by the caller on its own thread when that thread is on one of the
//! instance's cores: handing a short batch to the instance's thread and back costs up to a tenth of it. It is
//! the batch the instance's thread would have run, at the same moment, on the same cores, and counts the same.
//!
//! An instance that ran no batch for [`RELEASE_WHEN_IDLE_FOR`] after running some hands the memory the process
//! freed back to the OS, so that a gateway's memory falls back after a burst.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, mpsc};
use std::time::{Duration, Instant};

pub use jig_policy::{BatchPolicy, DropReason};
use jig_policy::{Queue, Request};
use jig_wire::Bytes;

use crate::batch;
use crate::onnx::{self, Model, ModelError, TensorSpec};
use crate::rows::{Memory, Rows};
use crate::{Tensor, TensorError};

pub use crate::executor::{BoxError, Executor};
pub use stats::{BatchLatency, Stats};

mod stats;

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
    fn caller_may_run(&self) -> bool {
        true
    }
    fn release_memory(&self) {
        if let Err(err) = Model::release_memory(self) {
            tracing::debug!(%err, "an idle instance's release run failed");
        }
    }
}

/// A batch that took less than this at its size last time is run by its caller when the instance is idle and
/// would start it at once, if the caller's thread is on one of the instance's cores. Handed to the instance's
/// thread, such a batch cost 5–15% more on a 2-vCPU machine (two thread wake-ups, and ONNX Runtime's threads
/// woken apart: BENCHMARKS.md, "The tensor path"); from about a millisecond the difference is lost in the
/// noise. Longer batches go through the thread, which keeps the caller's (async) thread free while they run.
pub const CALLER_RUNS_BELOW: Duration = Duration::from_millis(1);

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
    /// Declared before `queue`, so that the instance's thread, which stops when `queue` drops, holds the last
    /// reference and frees the executor there.
    engine: Arc<Engine>,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    queue: mpsc::Sender<Job>,
    restarts: Option<Arc<AtomicU64>>,
}

/// What runs an instance's batches, one at a time: its thread, or a caller running its own short batch.
struct Engine {
    config: Arc<InstanceConfig>,
    /// The policy now: the configured one, or the last [`Instance::set_policy`]'s, at batch 1 for a model that
    /// cannot stack requests.
    policy: Mutex<BatchPolicy>,
    /// Whether the model can stack requests into one batch (every input has a batch dimension).
    batchable: bool,
    executor: Box<dyn Executor>,
    stats: Arc<Stats>,
    /// Held while a batch is formed and run.
    running: Mutex<()>,
    /// Memory for stacked batches the executor does not provide (in process), reused from batch to batch.
    spare: Arc<jig_wire::Spare>,
    /// Where requests' inputs are placed in turn ([`Instance::place`]), so that a batch of them is no copy.
    rows: Rows,
}

impl Engine {
    /// The policy its batches follow now.
    fn policy(&self) -> BatchPolicy {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follow `policy` from the next batch on, at batch 1 for a model that cannot stack requests.
    fn set_policy(&self, policy: BatchPolicy) {
        let policy = BatchPolicy { max_batch: if self.batchable { policy.max_batch } else { 1 }, ..policy };
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// What a load that ended leaves, back to the OS: the blocks its requests were placed in, the buffers its
    /// batches were stacked in and what the executor keeps (all sized for its largest batches), then every page
    /// the allocator holds free.
    fn release_memory(&self) {
        self.rows.close();
        self.spare.clear();
        {
            let _held = self.hold();
            self.executor.release_memory();
        }
        release_freed_memory();
    }

    /// Hold the engine for one batch (a batch that panicked leaves nothing to repair).
    fn hold(&self) -> MutexGuard<'_, ()> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`Engine::hold`] if no batch is running, else `None`.
    fn try_hold(&self) -> Option<MutexGuard<'_, ()>> {
        match self.running.try_lock() {
            Ok(held) => Some(held),
            Err(TryLockError::Poisoned(held)) => Some(held.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Run `requests` as one batch, with the engine held: stack, execute, split, count. `arrived`: when each job
    /// of them arrived, and how many requests it holds. One list of outputs per request, or why the batch failed.
    fn run(
        &self,
        requests: &[&[Tensor]],
        arrived: impl IntoIterator<Item = (Instant, u64)>,
    ) -> Result<Vec<Vec<Tensor>>, String> {
        let stats = &self.stats;
        stats.batches.fetch_add(1, Ordering::Relaxed);
        let rows: Vec<u64> = requests.iter().map(|r| batch::rows(r)).collect();
        let total = rows.iter().sum();
        stats.rows.fetch_add(total, Ordering::Relaxed);
        let (started, cpu) = (Instant::now(), cpu_time::ThreadTime::try_now());
        let mut marks = [started; 3]; // when stacking ended, executing ended, splitting ended
        let result = batch::stack(requests, |len| self.executor.buffer(len), &self.spare, &self.rows)
            .map_err(|e: TensorError| e.to_string())
            .and_then(|stacked| {
                marks[0] = Instant::now();
                self.executor.execute(&stacked).map_err(|e| e.to_string())
            })
            .and_then(|outputs| {
                marks[1] = Instant::now();
                batch::split(outputs, &rows)
            });
        marks[2] = Instant::now();
        let elapsed = marks[2] - started;
        stats.busy_ns.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        let cpu = cpu.and_then(|cpu| cpu.try_elapsed()).ok();
        if let Some(cpu) = cpu {
            stats.cpu_ns.fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
        }
        match &result {
            Ok(_) => {
                let phases = [marks[0] - started, marks[1] - marks[0], marks[2] - marks[1]];
                stats.record(total, elapsed, cpu, phases);
                let n = requests.len() as u64;
                let counters = [&stats.input_ns, &stats.execute_ns, &stats.output_ns];
                for (counter, phase) in counters.into_iter().zip(phases) {
                    counter.fetch_add(n * phase.as_nanos() as u64, Ordering::Relaxed);
                }
                stats.answered(arrived, started, marks[2]);
            }
            Err(detail) => {
                tracing::warn!(instance = %self.config.name, requests = requests.len(), "batch failed: {detail}");
                stats.failed.fetch_add(requests.len() as u64, Ordering::Relaxed);
            }
        }
        result
    }
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
        let (queue, jobs) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Arc<Engine>, String>>();
        let start_error = |detail: String| InstanceError::Start { instance: config.name.clone(), detail };
        {
            let config = config.clone();
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
                    // A model with an input that has no batch dimension (a Piper voice's `scales`) cannot stack
                    // requests: it runs them one at a time.
                    let batchable = executor.inputs().iter().all(TensorSpec::batchable);
                    let engine = Arc::new(Engine {
                        policy: Mutex::new(config.policy),
                        batchable,
                        config,
                        executor: Box::new(executor),
                        stats: Arc::default(),
                        running: Mutex::new(()),
                        spare: Arc::default(),
                        rows: Rows::default(),
                    });
                    engine.set_policy(engine.config.policy); // at batch 1 if it cannot stack
                    let _ = ready_tx.send(Ok(engine.clone()));
                    let idle = IdleRelease::new(RELEASE_WHEN_IDLE_FOR);
                    Batcher { queue: Queue::new(engine.policy()), engine, jobs, idle }.run();
                    release_freed_memory();
                })
                .map_err(|e| start_error(e.to_string()))?;
        }
        let engine = ready_rx.recv().map_err(|_| start_error("the instance thread died while loading".into()))?;
        let engine = engine.map_err(start_error)?;
        let executor = &engine.executor;
        let (inputs, outputs, restarts) =
            (executor.inputs().to_vec(), executor.outputs().to_vec(), executor.restarts());
        Ok(Instance { engine, inputs, outputs, queue, restarts })
    }

    /// The instance's name, from its [`InstanceConfig`].
    pub fn name(&self) -> &str {
        &self.engine.config.name
    }

    /// The configuration it was started with (`cores`: those of its placement when
    /// [`crate::launch::Launcher`] started it).
    pub fn config(&self) -> &InstanceConfig {
        &self.engine.config
    }

    /// The batch policy it follows now: the configured one ([`InstanceConfig::policy`]) until
    /// [`Instance::set_policy`], at batch 1 for a model that cannot stack requests.
    pub fn policy(&self) -> BatchPolicy {
        self.engine.policy()
    }

    /// Batch and drop under `policy` from now on, without a restart: what a re-plan that keeps the instance but
    /// changes its batch size or wait bound does. Requests queued stay, and form their next batch under it.
    pub fn set_policy(&self, policy: BatchPolicy) {
        self.engine.set_policy(policy);
    }

    /// Copies of a request's `inputs` (each one's bytes, in declared order) where the instance reads them in
    /// place (a worker's shared region, or this process's memory), each right after the last request's: a batch
    /// of requests placed in turn is a view over them, not a copy (see `rows.rs`). `None` when no memory is left.
    pub fn place(&self, inputs: &[&[u8]]) -> Option<Vec<Bytes>> {
        let engine = &self.engine;
        engine.rows.place(inputs, engine.policy().max_batch, |len| match engine.executor.buffer(len) {
            Some(shared) => Some(Memory::Shared(shared)),
            None => Some(Memory::Heap(engine.spare.take(len), Arc::downgrade(&engine.spare))),
        })
    }

    /// Whether `bytes` lie in memory it placed them in ([`Instance::place`]) or its executor lent.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        self.engine.rows.holds(bytes) || self.engine.executor.holds(bytes)
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
        &self.engine.stats
    }

    /// The CPU time of its worker process on this machine ([`Executor::process_cpu`]); `None` in process.
    pub fn process_cpu(&self) -> Option<Duration> {
        self.engine.executor.process_cpu()
    }

    /// How many times its worker process was replaced after dying or misbehaving (0 in process).
    pub fn restarts(&self) -> u64 {
        self.restarts.as_ref().map_or(0, |r| r.load(Ordering::Relaxed))
    }

    /// Queue `inputs` for the next batch and wait for this request's outputs (or run it here: see the module
    /// docs).
    pub async fn infer(&self, inputs: Vec<Tensor>, deadline: Instant) -> Result<Vec<Tensor>, InstanceError> {
        let requests = vec![inputs];
        let now = Instant::now();
        self.admit(&requests, now, deadline)?;
        if let Some(outputs) = self.run_here(&requests, now) {
            return Ok(outputs?.pop().unwrap_or_default());
        }
        let mut outputs = self.enqueue(requests, now, deadline).await?;
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
        let now = Instant::now();
        self.admit(&requests, now, deadline)?;
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
            groups.into_iter().map(|(places, group)| (places, self.enqueue(group, now, deadline))).unzip();
        // Every job was queued when `enqueue` was called: awaiting them in turn waits for none longer.
        let mut outputs = vec![Vec::new(); n];
        for (places, answer) in places.into_iter().zip(answers) {
            for (k, out) in places.into_iter().zip(answer.await?) {
                outputs[k] = out;
            }
        }
        Ok(outputs)
    }

    /// Count `requests` and check them: inputs that fit the model (the batch dimension is free), a deadline
    /// the policy does not refuse.
    fn admit(&self, requests: &[Vec<Tensor>], now: Instant, deadline: Instant) -> Result<(), InstanceError> {
        let (stats, instance) = (&self.engine.stats, || self.engine.config.name.clone());
        stats.requests.fetch_add(requests.len() as u64, Ordering::Relaxed);
        requests
            .iter()
            .try_for_each(|inputs| onnx::check_inputs(instance().as_str(), &self.inputs, inputs))
            .map_err(|source| InstanceError::Input { instance: instance(), source })?;
        if let Some(reason) = self.engine.policy().refuse(now, deadline) {
            stats.dropped_late.fetch_add(requests.len() as u64, Ordering::Relaxed);
            return Err(InstanceError::Dropped { instance: instance(), reason });
        }
        Ok(())
    }

    /// Run `requests` (one) on this thread when the instance's thread would run them alone at once, the batch
    /// is short ([`CALLER_RUNS_BELOW`]) and this thread is on the instance's cores; `None`: queue them.
    fn run_here(&self, requests: &[Vec<Tensor>], arrived: Instant) -> Option<Result<Vec<Vec<Tensor>>, InstanceError>> {
        let engine = &self.engine;
        let [inputs] = requests else { return None };
        let rows = batch::rows(inputs);
        let policy = engine.policy();
        let at_once = rows >= policy.max_batch || policy.max_wait.is_zero();
        let short = || engine.stats.last(rows).is_some_and(|last| last < CALLER_RUNS_BELOW);
        let on_its_cores = || {
            let cores = engine.config.cores.as_ref();
            cores.is_none_or(|cores| crate::device::current_core().is_some_and(|core| cores.contains(&core)))
        };
        if !(at_once && engine.executor.caller_may_run() && short() && on_its_cores()) {
            return None;
        }
        let _held = engine.try_hold()?;
        // Requests queued before this one, waiting for their batch to start, go first.
        if engine.stats.queued.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let name = &engine.config.name;
        let result = engine.run(&[inputs], [(arrived, 1)]);
        Some(result.map_err(|detail| InstanceError::Failed { instance: name.clone(), detail }))
    }

    /// Queue `requests` as one job for the instance's thread and wait for its answer.
    fn enqueue(
        &self,
        requests: Vec<Vec<Tensor>>,
        now: Instant,
        deadline: Instant,
    ) -> impl std::future::Future<Output = Result<Vec<Vec<Tensor>>, InstanceError>> + use<'_> {
        let (stats, instance) = (&self.engine.stats, || self.engine.config.name.clone());
        let (reply, answer) = tokio::sync::oneshot::channel();
        let (count, rows) = (requests.len() as u64, requests.iter().map(|r| batch::rows(r)).sum());
        let job = Job { requests, rows, deadline, enqueued: now, reply };
        stats.queued.fetch_add(count, Ordering::Relaxed);
        let sent = self.queue.send(job);
        if sent.is_err() {
            stats.queued.fetch_sub(count, Ordering::Relaxed);
        }
        async move {
            match sent {
                Err(_) => Err(InstanceError::Stopped { instance: instance() }),
                Ok(()) => answer.await.unwrap_or_else(|_| Err(InstanceError::Stopped { instance: instance() })),
            }
        }
    }
}

/// Hand the memory a stopped or idle instance freed (its session, its buffers) back to the OS. glibc keeps freed
/// memory in its arenas, so a gateway that re-plans or redeploys would otherwise keep each old deployment's, and
/// after a burst what its batches and the requests around them freed: glibc trims on its own only the free
/// memory at the top of an arena, which a few allocations still live above it pin. This returns every free page.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How long an instance runs no batch before it hands back what the load before grew (`Engine::release_memory`:
/// its arena, its batches' buffers, glibc's free pages): long enough that a steady load, however light, never pays
/// for it (the next batch faults in what it takes from the OS again), short enough that memory falls back soon
/// after a burst.
pub const RELEASE_WHEN_IDLE_FOR: Duration = Duration::from_secs(10);

/// When an idle instance releases freed memory: once no batch ran for `after`, if any ran since the last time.
struct IdleRelease {
    after: Duration,
    /// The instance's batch count when it last released memory.
    released_at: u64,
}

impl IdleRelease {
    fn new(after: Duration) -> Self {
        IdleRelease { after, released_at: 0 }
    }
}

/// The instance thread's state.
struct Batcher {
    engine: Arc<Engine>,
    jobs: mpsc::Receiver<Job>,
    queue: Queue<Job, Instant>,
    idle: IdleRelease,
}

impl Batcher {
    fn run(mut self) {
        let mut after_batch = false;
        loop {
            self.queue.extend(self.jobs.try_iter());
            if self.queue.is_empty() {
                match self.next_job() {
                    Some(job) => self.queue.push(job),
                    None => return, // the instance was dropped and the queue is empty
                }
                after_batch = false;
            }
            // A re-plan may have changed the policy since the last batch (`Instance::set_policy`).
            self.queue.set_policy(self.engine.policy());
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
            // A caller may be running its own batch: the next one starts after it, with whoever came meanwhile.
            let engine = self.engine.clone();
            let held = engine.hold();
            self.queue.extend(self.jobs.try_iter());
            self.drop_hopeless(Instant::now());
            let batch = self.queue.take_batch();
            after_batch = !batch.is_empty();
            if after_batch {
                self.run_batch(batch, held);
            }
        }
    }

    /// Wait for the next job; `None` once the instance was dropped. Batches (the instance's, or callers' own) that
    /// stopped for [`IdleRelease::after`] are a load that ended: the memory they freed goes back to the OS then.
    fn next_job(&mut self) -> Option<Job> {
        let batches = |engine: &Engine| engine.stats.batches.load(Ordering::Relaxed);
        let mut seen = batches(&self.engine);
        loop {
            match self.jobs.recv_timeout(self.idle.after) {
                Ok(job) => return Some(job),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = batches(&self.engine);
                    if now == seen && now != self.idle.released_at {
                        self.engine.release_memory();
                        self.idle.released_at = now;
                    }
                    seen = now;
                }
            }
        }
    }

    /// Answer requests that can no longer make their deadline, or waited too long, with a drop.
    fn drop_hopeless(&mut self, now: Instant) {
        let stats = &self.engine.stats;
        for (job, reason) in self.queue.drop_hopeless(now) {
            let counter = match reason {
                DropReason::Late { .. } => &stats.dropped_late,
                DropReason::Stale { .. } => &stats.dropped_stale,
            };
            let requests = job.requests.len() as u64;
            counter.fetch_add(requests, Ordering::Relaxed);
            stats.queued.fetch_sub(requests, Ordering::Relaxed);
            let _ = job.reply.send(Err(InstanceError::Dropped { instance: self.engine.config.name.clone(), reason }));
        }
    }

    /// Run `batch` with the engine `held`, which is let go before the replies go out: a caller answered may
    /// run its next batch itself at once.
    fn run_batch(&mut self, mut batch: Vec<Job>, held: MutexGuard<'_, ()>) {
        // In the order their inputs lie: requests placed in turn but queued out of it (two callers between their
        // placing and queueing) still lie end to end, and their batch is a view of them, not a copy. The order of
        // a batch's requests changes nothing else: each answer goes back to its own.
        batch.sort_by_key(|job| job.requests.first().and_then(|r| r.first()).map(|t| t.data().as_ptr() as usize));
        let requests: u64 = batch.iter().map(|j| j.requests.len() as u64).sum();
        self.engine.stats.queued.fetch_sub(requests, Ordering::Relaxed);
        let inputs: Vec<&[Tensor]> = batch.iter().flat_map(|j| j.requests.iter().map(Vec::as_slice)).collect();
        let result = self.engine.run(&inputs, batch.iter().map(|j| (j.enqueued, j.requests.len() as u64)));
        drop((inputs, held));
        // The inputs go back (a worker's regions, free for the next request placed there) before any caller hears.
        let replies: Vec<_> = batch.into_iter().map(|job| (job.reply, job.requests.len())).collect();
        match result {
            Ok(per_request) => {
                let mut per_request = per_request.into_iter();
                for (reply, requests) in replies {
                    let _ = reply.send(Ok(per_request.by_ref().take(requests).collect()));
                }
            }
            Err(detail) => {
                let instance = &self.engine.config.name;
                for (reply, _) in replies {
                    let _ =
                        reply.send(Err(InstanceError::Failed { instance: instance.clone(), detail: detail.clone() }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Answers each batch with its inputs; counts the times it was asked to release memory.
    struct Identity(Arc<AtomicUsize>);

    impl Executor for Identity {
        fn inputs(&self) -> &[TensorSpec] {
            &[]
        }
        fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
            Ok(inputs.to_vec())
        }
        fn release_memory(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_instance_idle_after_batches_releases_its_memory_once_and_not_under_a_steady_load() {
        let after = Duration::from_millis(200);
        let released = Arc::new(AtomicUsize::new(0));
        let engine = Arc::new(Engine {
            config: Arc::new(InstanceConfig::new("test")),
            policy: Mutex::new(BatchPolicy::default()),
            batchable: true,
            executor: Box::new(Identity(released.clone())),
            stats: Arc::default(),
            running: Mutex::new(()),
            spare: Arc::default(),
            rows: Rows::default(),
        });
        let (queue, jobs) = mpsc::channel();
        let batcher = {
            let engine = engine.clone();
            let idle = IdleRelease::new(after);
            std::thread::spawn(move || Batcher { queue: Queue::new(engine.policy()), engine, jobs, idle }.run())
        };
        let ask = || {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let now = Instant::now();
            let requests = vec![vec![Tensor::from_f32(vec![1], &[1.0]).unwrap()]];
            engine.stats.queued.fetch_add(1, Ordering::Relaxed);
            queue
                .send(Job { requests, rows: 1, deadline: now + Duration::from_secs(60), enqueued: now, reply })
                .unwrap();
            answer.blocking_recv().unwrap().unwrap();
        };
        let releases = || released.load(Ordering::SeqCst);

        std::thread::sleep(after * 3);
        assert_eq!(releases(), 0, "no batch ran: nothing freed to release");
        ask();
        ask();
        engine.spare.give_back(vec![0; 4096]); // what a stacked batch leaves
        std::thread::sleep(after * 3);
        assert_eq!(releases(), 1, "idle after batches: released once");
        assert_eq!(engine.spare.held(), 0, "the buffers kept for batches were let go");
        std::thread::sleep(after * 3);
        assert_eq!(releases(), 1, "no batches since: not again");
        // A steady load, a batch every 10 ms, never idles that long.
        let steady = Instant::now();
        while steady.elapsed() < after * 3 {
            ask();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(releases(), 1, "released under a steady load");
        std::thread::sleep(after * 3);
        assert_eq!(releases(), 2, "the load ended: released again");

        drop(queue);
        batcher.join().unwrap();
    }
}
