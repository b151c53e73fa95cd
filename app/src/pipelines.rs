//! PPipe's data plane in a deployment (§5.4): reservation-based batching over an app's pooled pipelines, by
//! `jig_policy::reserve`'s scheduler on real time — the scheduler `jig simulate` runs on simulated time.
//!
//! * **The head.** A request's call to the chain's first slot queues at the head. At every arrival, and at the
//!   moment the wait rule names, the scheduler decides: send the oldest requests as one batch along a path it
//!   books (one pool member per slot, [`jig_policy::reserve::Scheduler::decide`]), wait for company, or drop the
//!   oldest: when not even it alone can finish by its deadline, or, under overload, only a small batch behind
//!   others could. The batch goes to the booked first instance at once, to run alone
//!   ([`Instance::infer_together`]).
//! * **The seat.** Each member then carries its seat in the booked batch through its glue: its call at every later
//!   slot joins the other members on the instance booked there, where they run as one batch once every member
//!   still on the path has come — or one booked run time after the first came, when stragglers run on their own
//!   on that instance. A member whose request ends, or that skips a slot, is no longer waited for there.
//! * **Feedback.** Each batch's actual end corrects its booking, so later bookings start when the instance is
//!   really free.
//!
//! Booked instances run only what the head sends them: their own queues start each batch at once and drop
//! only what is past its deadline. The glue between two slots is booked as the transfer into the second, at
//! its task's observed mean glue time (none before any is observed; the plan keeps half the SLO in reserve).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jig_model_host::instance::Instance;
use jig_policy::reserve::{self, Decision, Path, Resource, Scheduler};
use jig_runtime::models::{BoxFuture, Bytes, InferError, InferRequest, ModelHost, Tensor};
use tokio::sync::{oneshot, watch};

use crate::slots::{ModelSlots, infer_error};

/// How early the head wakes before the last moment its wait rule allows: Tokio's timers round up to the next
/// millisecond, and the waking task may wait its turn on a busy executor.
const TIMER_SLACK: Duration = Duration::from_millis(5);

/// One pipeline's stage as [`Pipelines::new`] takes it: the pool's instances and their latency per batch size.
pub(crate) struct StageSpec {
    /// The model slot it serves.
    pub slot: String,
    /// Its pool.
    pub instances: Vec<Arc<Instance>>,
    /// Profiled latency by batch size (any sizes; the scheduler fills the gaps from larger ones).
    pub latency: Vec<(usize, Duration)>,
    /// The glue time before it: the booked transfer into it (zero for the first).
    pub glue: Duration,
}

/// What an app's head has done since it started: its gauges and counters, read at a scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeadStats {
    /// Requests waiting at the head for a batch now.
    pub queued: u64,
    /// Requests the head dropped: nothing could finish them by their deadlines (or only a small batch behind a
    /// backlog, under overload).
    pub dropped: u64,
    /// Per pipeline, in plan order: what was booked along it.
    pub booked: Vec<Booked>,
}

/// The batches a head booked along one pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Booked {
    /// Batches.
    pub batches: u64,
    /// Requests in them.
    pub requests: u64,
}

/// An app's pooled pipelines and the scheduler that books their batches.
pub(crate) struct Pipelines {
    app: String,
    /// Each slot's place in the chain.
    stages: HashMap<String, usize>,
    /// The instances, by the scheduler's id.
    instances: Vec<Arc<Instance>>,
    head: Mutex<Head>,
    /// When the head next decides without an arrival; requests waiting there watch it.
    wake: watch::Sender<Option<Instant>>,
}

/// The scheduler, the requests waiting for a batch (oldest first), and what it did.
struct Head {
    scheduler: Scheduler<Instant>,
    queue: VecDeque<Waiting>,
    dropped: u64,
    booked: Vec<Booked>,
}

/// A request at the head.
struct Waiting {
    inputs: Vec<Tensor>,
    deadline: Instant,
    /// Its seat and its first slot's outputs, once its batch ran; or why it was dropped.
    reply: oneshot::Sender<Result<(Seat, Vec<Tensor>), InferError>>,
}

impl Pipelines {
    /// `pipelines` of `app`, each a name, its batch size and its stages in chain order (every pipeline
    /// serving the same slots in the same order); an error names the pipeline or stage at fault.
    pub(crate) fn new(app: &str, pipelines: Vec<(String, usize, Vec<StageSpec>)>) -> Result<Arc<Pipelines>, String> {
        let mut instances: Vec<Arc<Instance>> = Vec::new();
        let mut stages: HashMap<String, usize> = HashMap::new();
        let mut planned = Vec::with_capacity(pipelines.len());
        for (name, batch, specs) in pipelines {
            let mut reserved = Vec::with_capacity(specs.len());
            for (d, spec) in specs.into_iter().enumerate() {
                if *stages.entry(spec.slot.clone()).or_insert(d) != d {
                    return Err(format!("pipeline `{name}` serves slot `{}` at another place in the chain", spec.slot));
                }
                let pool = spec
                    .instances
                    .into_iter()
                    .map(|instance| {
                        let id = match instances.iter().position(|i| Arc::ptr_eq(i, &instance)) {
                            Some(id) => id,
                            None => {
                                instances.push(instance);
                                instances.len() - 1
                            }
                        };
                        reserve::Instance::from(id)
                    })
                    .collect();
                let latency = reserve::per_batch(&spec.latency);
                let transfer = if d == 0 || spec.glue.is_zero() { Vec::new() } else { vec![spec.glue; batch] };
                reserved.push(reserve::Stage { pool, latency, transfer });
            }
            planned.push(reserve::Pipeline { name, batch, stages: reserved });
        }
        let booked = vec![Booked::default(); planned.len()];
        let scheduler = Scheduler::new(planned).map_err(|e| e.to_string())?.with_timer_slack(TIMER_SLACK);
        Ok(Arc::new(Pipelines {
            app: app.to_string(),
            stages,
            instances,
            head: Mutex::new(Head { scheduler, queue: VecDeque::new(), dropped: 0, booked }),
            wake: watch::Sender::new(None),
        }))
    }

    /// A model host for one request: its calls to the pipelines' slots go through the head and its seat, the
    /// others to `slots`.
    pub(crate) fn host(self: &Arc<Self>, slots: Arc<ModelSlots>) -> Arc<dyn ModelHost> {
        Arc::new(RequestHost { pipelines: self.clone(), slots, seat: Mutex::new(None) })
    }

    /// What the head has done so far, and what waits there now.
    pub(crate) fn stats(&self) -> HeadStats {
        let head = self.head();
        HeadStats { queued: head.queue.len() as u64, dropped: head.dropped, booked: head.booked.clone() }
    }

    fn head(&self) -> MutexGuard<'_, Head> {
        self.head.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue a request's first-slot inputs at the head and wait until its batch has run there.
    async fn enter(
        self: &Arc<Self>,
        inputs: Vec<Tensor>,
        deadline: Instant,
    ) -> Result<(Seat, Vec<Tensor>), InferError> {
        let (reply, mut answer) = oneshot::channel();
        let mut wake = self.wake.subscribe();
        {
            let mut head = self.head();
            head.queue.push_back(Waiting { inputs, deadline, reply });
            self.decide(&mut head);
        }
        loop {
            let until = *wake.borrow_and_update();
            let sleep = async {
                match until {
                    Some(until) => tokio::time::sleep_until(until.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                answer = &mut answer => {
                    return answer.unwrap_or_else(|_| Err(InferError::Failed(format!(
                        "app `{}`: the pipelines' scheduler stopped before the request's batch ran", self.app
                    ))));
                }
                () = sleep => self.decide(&mut self.head()),
                changed = wake.changed() => {
                    if changed.is_err() {
                        return Err(InferError::Failed(format!("app `{}`: the pipelines stopped", self.app)));
                    }
                }
            }
        }
    }

    /// Algorithm 1 until it waits: dispatch the batches that go now, drop what cannot make its deadline.
    fn decide(self: &Arc<Self>, head: &mut Head) {
        let now = Instant::now();
        let wake = loop {
            // Requests whose callers gave up (their deadline passed, or the client went away) wait no more.
            head.queue.retain(|w| !w.reply.is_closed());
            let Some(oldest) = head.queue.front().map(|w| w.deadline) else { break None };
            match head.scheduler.decide(now, head.queue.len(), oldest) {
                Decision::Dispatch(path) => {
                    let members: Vec<Waiting> = head.queue.drain(..path.batch.min(head.queue.len())).collect();
                    let booked = &mut head.booked[path.pipeline];
                    booked.batches += 1;
                    booked.requests += members.len() as u64;
                    self.dispatch(path, members);
                }
                Decision::DropOldest => {
                    if let Some(w) = head.queue.pop_front() {
                        head.dropped += 1;
                        let _ = w.reply.send(Err(InferError::Dropped(format!(
                            "app `{}`: no pooled pipeline finishes the request by its deadline (or only in a small \
                             batch behind others' batches, which an overloaded app does not book)",
                            self.app
                        ))));
                    }
                }
                Decision::Wait { until } => break Some(until),
                Decision::Idle => break None,
            }
        };
        self.wake.send_if_modified(|w| std::mem::replace(w, wake) != wake);
    }

    /// Run a booked batch on its first instance; each member then gets its seat and outputs.
    fn dispatch(self: &Arc<Self>, path: Path<Instant>, members: Vec<Waiting>) {
        let booking = Arc::new(Booking::new(self.clone(), path, members.len()));
        let deadline = members.iter().map(|w| w.deadline).max().unwrap_or_else(Instant::now);
        let (inputs, replies): (Vec<_>, Vec<_>) = members.into_iter().map(|w| (w.inputs, w.reply)).unzip();
        tokio::spawn(async move {
            let ran = booking.run(0, inputs, deadline).await;
            // A member whose caller is gone drops its seat when the reply fails, and is waited for nowhere.
            let seated = ran.map(|outputs| {
                let seat = |member| Seat { booking: booking.clone(), member, next: 1 };
                outputs.into_iter().enumerate().map(|(member, outputs)| (seat(member), outputs)).collect()
            });
            reply_each(replies, seated);
        });
    }

    /// Feedback: the batch booked to start on `instance` at `booked` ended now.
    fn ended(self: &Arc<Self>, instance: usize, booked: Instant) {
        let mut head = self.head();
        head.scheduler.correct(Resource::Instance(instance), booked, Instant::now());
        // A late end may leave less time than the head's wait assumed.
        self.decide(&mut head);
    }
}

/// A batch booked along a path: where each stage runs, and the members gathering for the stages to come.
struct Booking {
    pipelines: Arc<Pipelines>,
    path: Path<Instant>,
    /// Per stage (the first unused: its batch runs as dispatched).
    gathers: Vec<Mutex<Gather>>,
}

/// The members of a booked batch gathering at one stage.
#[derive(Default)]
struct Gather {
    /// Members neither here nor gone.
    expected: usize,
    /// The members here.
    here: Vec<Arrival>,
    /// When the first came.
    first: Option<Instant>,
    /// The batch has started: later members run on their own.
    started: bool,
}

/// A member at a stage: its inputs, its deadline, and where its outputs go.
struct Arrival {
    inputs: Vec<Tensor>,
    deadline: Instant,
    reply: oneshot::Sender<Result<Vec<Tensor>, InferError>>,
}

impl Booking {
    fn new(pipelines: Arc<Pipelines>, path: Path<Instant>, members: usize) -> Booking {
        let gathers = path.hops.iter().map(|_| Mutex::new(Gather { expected: members, ..Gather::default() })).collect();
        Booking { pipelines, path, gathers }
    }

    fn gather(&self, stage: usize) -> MutexGuard<'_, Gather> {
        self.gathers[stage].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `requests` as one batch on the instance booked for `stage`, then correct the booking.
    async fn run(
        &self,
        stage: usize,
        requests: Vec<Vec<Tensor>>,
        deadline: Instant,
    ) -> Result<Vec<Vec<Tensor>>, InferError> {
        let hop = &self.path.hops[stage];
        let instance = &self.pipelines.instances[hop.instance];
        let result = instance.infer_together(requests, deadline).await;
        self.pipelines.ended(hop.instance, hop.start);
        result.map_err(infer_error)
    }

    /// Run one member's `inputs` alone on the instance booked for `stage` (a call the batch did not wait for).
    async fn run_alone(&self, stage: usize, inputs: Vec<Tensor>, deadline: Instant) -> Result<Vec<Tensor>, InferError> {
        let instance = &self.pipelines.instances[self.path.hops[stage].instance];
        instance.infer(inputs, deadline).await.map_err(infer_error)
    }

    /// Start `stage`'s batch with the members there, unless it started.
    fn start(self: &Arc<Self>, stage: usize, gather: &mut Gather) {
        if gather.started || gather.here.is_empty() {
            return;
        }
        gather.started = true;
        let here = std::mem::take(&mut gather.here);
        let deadline = here.iter().map(|a| a.deadline).max().unwrap_or_else(Instant::now);
        let (inputs, replies): (Vec<_>, Vec<_>) = here.into_iter().map(|a| (a.inputs, a.reply)).unzip();
        let booking = self.clone();
        // Spawned, so that a member whose request is cancelled does not take the others' batch with it.
        tokio::spawn(async move { reply_each(replies, booking.run(stage, inputs, deadline).await) });
    }

    /// A member will not come to `stage`: start it if everyone else is there.
    fn leave(self: &Arc<Self>, stage: usize) {
        let mut gather = self.gather(stage);
        gather.expected = gather.expected.saturating_sub(1);
        if gather.expected == 0 {
            self.start(stage, &mut gather);
        }
    }
}

/// A request's place in a booked batch.
struct Seat {
    booking: Arc<Booking>,
    /// Its index in the batch (for messages).
    member: usize,
    /// The next stage it may come to.
    next: usize,
}

impl Seat {
    /// Run the request's call at `stage` with the batch's other members, on the booked instance.
    async fn run(&mut self, stage: usize, inputs: Vec<Tensor>, deadline: Instant) -> Result<Vec<Tensor>, InferError> {
        let booking = self.booking.clone();
        if stage < self.next {
            // A second call to a slot it passed: not booked, so it runs on its own on the booked instance.
            return booking.run_alone(stage, inputs, deadline).await;
        }
        // Having come here, it will not come to the stages it skipped.
        for skipped in self.next..stage {
            booking.leave(skipped);
        }
        self.next = stage + 1;
        let hop = booking.path.hops[stage];
        let (reply, mut answer) = oneshot::channel();
        // The batch has started without it (it came more than a run late): it runs on its own.
        let give_up = {
            let mut gather = booking.gather(stage);
            if gather.started {
                Err(inputs)
            } else {
                let first = *gather.first.get_or_insert_with(Instant::now);
                gather.here.push(Arrival { inputs, deadline, reply });
                gather.expected = gather.expected.saturating_sub(1);
                if gather.expected == 0 {
                    booking.start(stage, &mut gather);
                }
                // Waiting longer than one run for a straggler costs the others more than its own run would.
                Ok(first + hop.end.saturating_duration_since(hop.start))
            }
        };
        let give_up = match give_up {
            Ok(give_up) => give_up,
            Err(inputs) => return booking.run_alone(stage, inputs, deadline).await,
        };
        let answer = tokio::select! {
            answer = &mut answer => answer,
            () = tokio::time::sleep_until(give_up.into()) => {
                booking.start(stage, &mut booking.gather(stage));
                answer.await
            }
        };
        answer.unwrap_or_else(|_| {
            Err(InferError::Failed(format!(
                "app `{}`: member {} of a booked batch lost its stage-{stage} batch",
                booking.pipelines.app, self.member
            )))
        })
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        for stage in self.next..self.booking.gathers.len() {
            self.booking.leave(stage);
        }
    }
}

/// Answer each of a batch's members: its own outputs, or the batch's error.
fn reply_each<T>(replies: Vec<oneshot::Sender<Result<T, InferError>>>, result: Result<Vec<T>, InferError>) {
    match result {
        Ok(outputs) => {
            for (reply, outputs) in replies.into_iter().zip(outputs) {
                let _ = reply.send(Ok(outputs));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// The model host of one request of an app served by pooled pipelines.
struct RequestHost {
    pipelines: Arc<Pipelines>,
    slots: Arc<ModelSlots>,
    /// Its seat in the batch booked for it at the head, once it has one.
    seat: Mutex<Option<Seat>>,
}

impl RequestHost {
    fn seat(&self) -> MutexGuard<'_, Option<Seat>> {
        self.seat.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ModelHost for RequestHost {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        Box::pin(async move {
            match self.pipelines.stages.get(&request.slot) {
                Some(0) => {
                    let (seat, outputs) = self.pipelines.enter(request.inputs, request.deadline).await?;
                    *self.seat() = Some(seat);
                    Ok(outputs)
                }
                Some(&stage) => {
                    let seat = self.seat().take();
                    match seat {
                        Some(mut seat) => {
                            let outputs = seat.run(stage, request.inputs, request.deadline).await;
                            *self.seat() = Some(seat);
                            outputs
                        }
                        // Not through the head: nothing was booked for it.
                        None => self.slots.infer(request).await,
                    }
                }
                None => self.slots.infer(request).await,
            }
        })
    }

    /// A slot of the pipelines' own goes where its booked seat runs it; others are placed as anywhere.
    fn place(&self, slot: &str, inputs: &[&[u8]]) -> Option<Vec<Bytes>> {
        if self.pipelines.stages.contains_key(slot) {
            return None;
        }
        self.slots.place(slot, inputs)
    }
}

#[cfg(test)]
mod tests {
    use jig_model_host::instance::{BatchPolicy, BoxError, Executor, InstanceConfig};
    use jig_model_host::onnx::TensorSpec;
    use jig_runtime::models::DType;

    use super::*;

    /// Adds `add` to its input after `delay`.
    struct Adder {
        delay: Duration,
        add: f32,
        spec: Vec<TensorSpec>,
    }

    impl Executor for Adder {
        fn inputs(&self) -> &[TensorSpec] {
            &self.spec
        }
        fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
            std::thread::sleep(self.delay);
            let values: Vec<f32> = values(&inputs[0]).iter().map(|v| v + self.add).collect();
            Ok(vec![Tensor::from_f32(inputs[0].shape().to_vec(), &values)?])
        }
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// An instance adding `add` in `delay_ms`, configured as a pipeline's are.
    fn adder(name: &str, delay_ms: u64, add: f32) -> Arc<Instance> {
        let config =
            InstanceConfig { policy: BatchPolicy::serving(1, Duration::from_secs(30)), ..InstanceConfig::new(name) };
        let spec = vec![TensorSpec { name: "x".into(), dtype: DType::F32, shape: vec![None, Some(1)] }];
        let delay = Duration::from_millis(delay_ms);
        Arc::new(Instance::start(config, move || Ok(Adder { delay, add, spec })).unwrap())
    }

    /// One pipeline of batch `batch` over `stages` (slot `s0`, `s1`…), every batch size taking `ms`.
    fn pipeline(batch: usize, stages: &[Arc<Instance>], ms: u64) -> Arc<Pipelines> {
        let specs = stages
            .iter()
            .enumerate()
            .map(|(d, i)| StageSpec {
                slot: format!("s{d}"),
                instances: vec![i.clone()],
                latency: vec![(batch, Duration::from_millis(ms))],
                glue: Duration::ZERO,
            })
            .collect();
        Pipelines::new("app", vec![("p".into(), batch, specs)]).unwrap()
    }

    async fn call(host: &Arc<dyn ModelHost>, slot: &str, x: f32, deadline: Instant) -> Result<f32, InferError> {
        let inputs = vec![Tensor::from_f32(vec![1, 1], &[x]).unwrap()];
        let request = InferRequest { function: "app/t".into(), slot: slot.into(), inputs, deadline };
        Ok(values(&host.infer(request).await?[0])[0])
    }

    fn batches(i: &Instance) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (i.stats().batches.load(Relaxed), i.stats().rows.load(Relaxed))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_run_as_one_booked_batch_through_every_stage() {
        let (first, second) = (adder("s0#0", 10, 1.0), adder("s1#0", 10, 10.0));
        let pipelines = pipeline(4, &[first.clone(), second.clone()], 20);
        let slots = Arc::new(ModelSlots::new());
        let deadline = Instant::now() + Duration::from_secs(10);
        let requests: Vec<_> = (0..4)
            .map(|k| {
                let host = pipelines.host(slots.clone());
                tokio::spawn(async move {
                    let y = call(&host, "s0", k as f32, deadline).await?;
                    call(&host, "s1", y, deadline).await
                })
            })
            .collect();
        for (k, request) in requests.into_iter().enumerate() {
            assert_eq!(request.await.unwrap().unwrap(), k as f32 + 11.0, "request {k} got another's rows");
        }
        // Four requests wait at the head for the planned batch of 4 (their deadline is far), which then runs as
        // one batch at each stage, on the instances booked.
        assert_eq!(batches(&first), (1, 4));
        assert_eq!(batches(&second), (1, 4));
        let stats = pipelines.stats();
        assert_eq!((stats.booked, stats.dropped, stats.queued), (vec![Booked { batches: 1, requests: 4 }], 0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_request_runs_before_waiting_would_miss_its_deadline_and_a_hopeless_one_is_dropped() {
        let only = adder("s0#1", 5, 1.0);
        let pipelines = pipeline(8, std::slice::from_ref(&only), 50);
        let slots = Arc::new(ModelSlots::new());
        let host = pipelines.host(slots.clone());
        let deadline = Instant::now() + Duration::from_millis(400);
        assert_eq!(call(&host, "s0", 1.0, deadline).await.unwrap(), 2.0);
        assert!(Instant::now() <= deadline, "served late");
        assert_eq!(batches(&only), (1, 1));

        let host = pipelines.host(slots);
        let err = call(&host, "s0", 1.0, Instant::now() + Duration::from_millis(10)).await.unwrap_err();
        assert!(matches!(&err, InferError::Dropped(m) if m.contains("app `app`")), "{err}");
        assert_eq!(batches(&only), (1, 1), "a dropped request runs nowhere");
        assert_eq!(pipelines.stats().dropped, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn members_that_leave_or_skip_a_stage_are_not_waited_for() {
        let stages = [adder("s0#2", 5, 1.0), adder("s1#2", 5, 10.0), adder("s2#2", 5, 100.0)];
        // A booked run of 10 s: only members leaving can start a stage's batch soon.
        let pipelines = pipeline(3, &stages, 10_000);
        let slots = Arc::new(ModelSlots::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        let hosts: Vec<_> = (0..3).map(|_| pipelines.host(slots.clone())).collect();
        let (a, b, c) = (hosts[0].clone(), hosts[1].clone(), hosts[2].clone());
        let all = tokio::spawn(async move {
            let x = call(&a, "s0", 0.0, deadline).await?;
            let x = call(&a, "s1", x, deadline).await?;
            call(&a, "s2", x, deadline).await
        });
        let skips = tokio::spawn(async move {
            let x = call(&b, "s0", 0.0, deadline).await?;
            call(&b, "s2", x, deadline).await
        });
        let leaves = tokio::spawn(async move {
            call(&c, "s0", 0.0, deadline).await?;
            drop(c);
            Ok::<_, InferError>(0.0)
        });
        drop(hosts);
        let within = Duration::from_secs(5);
        assert_eq!(tokio::time::timeout(within, all).await.expect("a stage waited for the others").unwrap(), Ok(111.0));
        assert_eq!(tokio::time::timeout(within, skips).await.expect("s2 waited").unwrap(), Ok(101.0));
        leaves.await.unwrap().unwrap();
        assert_eq!(batches(&stages[0]), (1, 3));
        assert_eq!(batches(&stages[1]), (1, 1));
        assert_eq!(batches(&stages[2]), (1, 2), "the two that came to s2 ran there together");
    }
}
