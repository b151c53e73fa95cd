//! Instances: batching, early dropping, input checks and memory budgets, on real ONNX models where the
//! semantics depend on the model, and on a scripted executor where they depend on timing.

use jig_test_support::{f32s, i64s, model};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jig_model_host::instance::{BatchPolicy, BoxError, DropReason, Executor, Instance, InstanceConfig, InstanceError};
use jig_model_host::launch::{LaunchError, Launcher, Placement};
use jig_model_host::onnx::{ModelError, TensorSpec};
use jig_model_host::pool::Pool;
use jig_model_host::segment::Segment;
use jig_model_host::{DType, Tensor};

fn cpu() -> Launcher {
    Launcher::discover()
}

fn one_core() -> Placement {
    Placement::new(Segment::Cpu { cores: 1 })
}

fn onnx_instance(name: &str, config: InstanceConfig) -> Arc<Instance> {
    Arc::new(cpu().start_instance(config, name, &model(name), one_core()).unwrap())
}

fn mixed_inputs(k: f32) -> Vec<Tensor> {
    let x = Tensor::from_f32(vec![1, 4], &[k, k, k, k]).unwrap();
    let ids = i64s(vec![1, 4], &[1, 2, 3, 4]);
    vec![x, ids]
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

/// A scripted executor for timing-dependent semantics: takes `delay` per batch, echoes its input.
struct Sleepy {
    delay: Duration,
    spec: Vec<TensorSpec>,
}

impl Sleepy {
    fn new(delay_ms: u64) -> Sleepy {
        Sleepy {
            delay: Duration::from_millis(delay_ms),
            spec: vec![TensorSpec { name: "x".into(), dtype: DType::F32, shape: vec![None, Some(1)] }],
        }
    }
}

impl Executor for Sleepy {
    fn inputs(&self) -> &[TensorSpec] {
        &self.spec
    }
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
        std::thread::sleep(self.delay);
        if f32s(&inputs[0]).contains(&-1.0) {
            return Err("scripted failure".into());
        }
        Ok(inputs.to_vec())
    }
}

fn one(v: f32) -> Vec<Tensor> {
    vec![Tensor::from_f32(vec![1, 1], &[v]).unwrap()]
}

fn sleepy(delay_ms: u64, config: InstanceConfig) -> Arc<Instance> {
    Arc::new(Instance::start(config, move || Ok(Sleepy::new(delay_ms))).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_form_one_batch_with_exact_results() {
    let config = InstanceConfig {
        policy: BatchPolicy { max_batch: 8, max_wait: Duration::from_millis(500), ..BatchPolicy::default() },
        ..InstanceConfig::new("mixed#0")
    };
    let instance = onnx_instance("mixed", config);
    let tasks: Vec<_> = (0..8)
        .map(|k| {
            let instance = instance.clone();
            tokio::spawn(async move { instance.infer(mixed_inputs(k as f32), far()).await })
        })
        .collect();
    for (k, task) in tasks.into_iter().enumerate() {
        let out = task.await.unwrap().unwrap();
        let k = k as f32;
        assert_eq!(out[0].shape(), &[1, 4]);
        assert_eq!(f32s(&out[0]), vec![k, 2.0 * k, 3.0 * k, 4.0 * k], "request {k} got another's rows");
    }
    // The first may start alone (an idle instance expects no company until arrivals say otherwise); the rest
    // share batches: those waiting when one ends start together, and a lone one waits for the company its
    // neighbours' gaps promise. How many batches depends on how the machine spreads the arrivals (a fresh
    // clone's `make test`, the whole suite on two cores, once made 3 of them), not on one each.
    let batches = instance.stats().batches.load(Ordering::Relaxed);
    assert!((1..=4).contains(&batches), "8 requests with b = 8 made {batches} batches");
    assert_eq!(instance.stats().rows.load(Ordering::Relaxed), 8);
}

#[tokio::test]
async fn a_lone_request_on_an_idle_instance_starts_at_once_not_after_the_wait_bound() {
    // Found at 4 req/s: planned instances held each lone request for their whole wait bound L̂ (hundreds of ms)
    // for company that was not coming, and requests behind it went stale.
    let config = InstanceConfig {
        policy: BatchPolicy { max_batch: 8, max_wait: Duration::from_millis(400), ..BatchPolicy::default() },
        ..InstanceConfig::new("mixed#1")
    };
    let instance = onnx_instance("mixed", config);
    for lull in [Duration::ZERO, Duration::from_millis(500)] {
        tokio::time::sleep(lull).await;
        let started = Instant::now();
        instance.infer(mixed_inputs(1.0), far()).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(200), "after {lull:?}: {:?}", started.elapsed());
    }
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_policy_applies_from_the_next_batch_without_a_restart() {
    // What a re-plan that keeps an instance but changes its batch size does, instead of loading it again.
    let config = InstanceConfig {
        policy: BatchPolicy { max_batch: 2, max_wait: Duration::from_millis(200), ..BatchPolicy::default() },
        ..InstanceConfig::new("sleepy#policy")
    };
    let instance = sleepy(50, config);
    // Eight requests at once: the batches they take.
    let burst = || async {
        let before = instance.stats().batches.load(Ordering::Relaxed);
        for (k, out) in at_once(&instance, 8).await.into_iter().enumerate() {
            assert_eq!(f32s(&out.unwrap()[0]), vec![k as f32], "request {k} got another's rows");
        }
        instance.stats().batches.load(Ordering::Relaxed) - before
    };
    assert!(burst().await >= 4, "b = 2 runs eight requests in four batches at least");
    instance.set_policy(BatchPolicy { max_batch: 8, ..instance.policy() });
    assert_eq!(instance.policy().max_batch, 8);
    // The first may start alone; the rest, arriving meanwhile, fill the next.
    let batches = burst().await;
    assert!(batches <= 2, "under b = 8, eight requests took {batches} batches");
    instance.set_policy(BatchPolicy { min_service: Duration::from_secs(3600), ..instance.policy() });
    let refused = instance.infer(one(1.0), far()).await;
    assert!(matches!(refused, Err(InstanceError::Dropped { reason: DropReason::Late { .. }, .. })), "{refused:?}");
    assert_eq!(instance.stats().requests.load(Ordering::Relaxed), 17, "one instance counted all along");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_when_a_batch_finishes_start_at_once() {
    // b = 2 and a wait bound of 10 s: only the "previous batch finished" rule can start the second batch soon.
    let config = InstanceConfig {
        policy: BatchPolicy { max_batch: 2, max_wait: Duration::from_secs(10), ..BatchPolicy::default() },
        ..InstanceConfig::new("sleepy#0")
    };
    let instance = sleepy(100, config);
    let started = Instant::now();
    for result in at_once(&instance, 3).await {
        result.unwrap();
    }
    assert!(started.elapsed() < Duration::from_secs(5), "the third request waited for the bound");
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn requests_that_cannot_make_their_deadline_are_dropped_on_arrival() {
    let config = InstanceConfig {
        policy: BatchPolicy { min_service: Duration::from_millis(100), ..BatchPolicy::default() },
        ..InstanceConfig::new("sleepy#1")
    };
    let instance = sleepy(1, config);
    let err = instance.infer(one(1.0), Instant::now() + Duration::from_millis(30)).await.unwrap_err();
    assert!(
        matches!(&err, InstanceError::Dropped { instance, reason: DropReason::Late { .. } } if instance == "sleepy#1"),
        "{err}"
    );
    assert_eq!(instance.stats().dropped_late.load(Ordering::Relaxed), 1);
    // With time to spare the next request is served.
    assert!(instance.infer(one(2.0), far()).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_nobody_picks_up_in_time_are_dropped_as_stale() {
    let config = InstanceConfig {
        policy: BatchPolicy { staleness: Duration::from_millis(30), ..BatchPolicy::default() },
        ..InstanceConfig::new("sleepy#2")
    };
    let instance = sleepy(150, config);
    let results = at_once(&instance, 3).await;
    let stale = results
        .iter()
        .filter(|r| matches!(r, Err(InstanceError::Dropped { reason: DropReason::Stale { .. }, .. })))
        .count();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    assert_eq!(stale, 2, "{results:?}");
    assert_eq!(instance.stats().dropped_stale.load(Ordering::Relaxed), 2);
}

/// `n` requests sent to `instance` at once, the k-th of value k; their results in that order.
async fn at_once(instance: &Arc<Instance>, n: usize) -> Vec<Result<Vec<Tensor>, InstanceError>> {
    let tasks = (0..n)
        .map(|k| {
            let instance = instance.clone();
            tokio::spawn(async move { instance.infer(one(k as f32), far()).await })
        })
        .collect();
    futures_join(tasks).await
}

async fn futures_join<T: Send + 'static>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

#[tokio::test]
async fn a_failed_batch_fails_its_requests_and_the_next_is_served() {
    let instance = sleepy(1, InstanceConfig::new("sleepy#3"));
    let err = instance.infer(one(-1.0), far()).await.unwrap_err();
    assert!(matches!(&err, InstanceError::Failed { detail, .. } if detail.contains("scripted failure")), "{err}");
    assert!(instance.infer(one(1.0), far()).await.is_ok());
    assert_eq!(instance.stats().failed.load(Ordering::Relaxed), 1);
}

/// An executor a caller may run on its own thread (as a model in process): echoes its input after `delay`,
/// noting which thread ran each batch, and fails a batch holding -1.
struct Quick {
    delay: Duration,
    spec: Vec<TensorSpec>,
    ran_on: Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
}

impl Executor for Quick {
    fn inputs(&self) -> &[TensorSpec] {
        &self.spec
    }
    fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
        self.ran_on.lock().unwrap().push(std::thread::current().id());
        let started = Instant::now();
        while started.elapsed() < self.delay {}
        if f32s(&inputs[0]).contains(&-1.0) {
            return Err("scripted failure".into());
        }
        Ok(inputs.to_vec())
    }
    fn caller_may_run(&self) -> bool {
        true
    }
}

/// A [`Quick`] instance under `policy`, and the threads its batches ran on.
fn quick(delay: Duration, policy: BatchPolicy) -> (Instance, Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>) {
    let ran_on = Arc::new(std::sync::Mutex::new(Vec::new()));
    let spec = Sleepy::new(0).spec;
    let executor = Quick { delay, spec, ran_on: ran_on.clone() };
    let instance = Instance::start(InstanceConfig { policy, ..InstanceConfig::new("quick") }, move || Ok(executor));
    (instance.unwrap(), ran_on)
}

fn rows(v: &[f32]) -> Vec<Tensor> {
    vec![Tensor::from_f32(vec![v.len() as u64, 1], v).unwrap()]
}

#[tokio::test]
async fn a_short_batch_on_an_idle_instance_runs_on_its_callers_thread_and_counts_alike() {
    let (instance, ran_on) = quick(Duration::ZERO, BatchPolicy::default());
    for k in 0..3 {
        let out = instance.infer(one(k as f32), far()).await.unwrap();
        assert_eq!(f32s(&out[0]), vec![k as f32]);
    }
    let here = std::thread::current().id();
    let threads = ran_on.lock().unwrap().clone();
    assert_ne!(threads[0], here, "the first batch of a size runs on the instance's thread: its time is unknown");
    assert_eq!(threads[1..], [here, here], "later ones, known to be short, run on the caller's");
    let stats = instance.stats();
    assert_eq!((stats.batches.load(Ordering::Relaxed), stats.rows.load(Ordering::Relaxed)), (3, 3));
    assert_eq!(stats.batch_latencies()[0].recent_ms.len(), 3, "every batch's latency is recorded");
    assert_eq!(stats.queued.load(Ordering::Relaxed), 0);
    // A batch that fails on the caller's thread fails its request, is counted, and the next is served.
    let err = instance.infer(one(-1.0), far()).await.unwrap_err();
    assert!(
        matches!(&err, InstanceError::Failed { instance, detail } if instance == "quick"
        && detail.contains("scripted failure")),
        "{err}"
    );
    assert_eq!(stats.failed.load(Ordering::Relaxed), 1);
    assert_eq!(f32s(&instance.infer(one(5.0), far()).await.unwrap()[0]), vec![5.0]);
    assert_eq!(*ran_on.lock().unwrap().last().unwrap(), here);
}

#[tokio::test]
async fn long_batches_batches_that_wait_for_company_and_other_executors_use_the_instance_thread() {
    let here = std::thread::current().id();
    // Longer than CALLER_RUNS_BELOW.
    let (long, ran_on) = quick(Duration::from_millis(2), BatchPolicy::default());
    // A lone request that waits for company (b = 2, L̂ = 5 ms) is the instance thread's to start.
    let waits = BatchPolicy { max_batch: 2, max_wait: Duration::from_millis(5), ..BatchPolicy::default() };
    let (waiting, waited_on) = quick(Duration::ZERO, waits);
    for k in 0..3 {
        long.infer(one(k as f32), far()).await.unwrap();
        waiting.infer(one(k as f32), far()).await.unwrap();
    }
    assert!(!ran_on.lock().unwrap().contains(&here), "a 2 ms batch ran on the caller's thread");
    assert!(!waited_on.lock().unwrap().contains(&here), "a batch that waits for company ran on the caller's thread");
    // Worker processes and remote nodes do not opt in: their batches wait on another process.
    let sleepy = sleepy(0, InstanceConfig::new("sleepy#9"));
    for k in 0..3 {
        sleepy.infer(one(k as f32), far()).await.unwrap();
    }
    assert_eq!(sleepy.stats().batches.load(Ordering::Relaxed), 3);
}

#[test]
fn a_caller_runs_a_short_batch_only_on_the_instances_cores() {
    use jig_model_host::device::{cpu_cores, pin_current_thread};
    let cores = cpu_cores();
    let (ours, other) = (cores[0], *cores.last().unwrap());
    let config = InstanceConfig { cores: Some(vec![ours]), ..InstanceConfig::new("quick@cpu") };
    let ran_on = Arc::new(std::sync::Mutex::new(Vec::new()));
    let executor = Quick { delay: Duration::ZERO, spec: Sleepy::new(0).spec, ran_on: ran_on.clone() };
    let instance = Arc::new(Instance::start(config, move || Ok(executor)).unwrap());
    // Three requests from a thread pinned to `core`; whether any batch ran on that thread.
    let ran_here = |core: usize| {
        let (instance, ran_on) = (instance.clone(), ran_on.clone());
        std::thread::spawn(move || {
            pin_current_thread(&[core]).unwrap();
            let tokio = tokio::runtime::Builder::new_current_thread().build().unwrap();
            for k in 0..3 {
                tokio.block_on(instance.infer(one(k as f32), far())).unwrap();
            }
            ran_on.lock().unwrap().contains(&std::thread::current().id())
        })
        .join()
        .unwrap()
    };
    assert!(ran_here(ours), "a caller on the instance's core ran no batch of its own");
    if other != ours {
        assert!(!ran_here(other), "a caller on another core ran a batch off the instance's cores");
    }
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_batch_behind_a_waiting_request_queues_behind_it() {
    let policy = BatchPolicy { max_batch: 2, max_wait: Duration::from_millis(300), ..BatchPolicy::default() };
    let (instance, ran_on) = quick(Duration::ZERO, policy);
    let instance = Arc::new(instance);
    // Two rows fill a batch: the first such batch teaches the instance it is short, the second runs here.
    instance.infer(rows(&[1.0, 2.0]), far()).await.unwrap();
    let here = std::thread::current().id();
    let out = instance.infer(rows(&[3.0, 4.0]), far()).await.unwrap();
    assert_eq!(f32s(&out[0]), vec![3.0, 4.0]);
    assert_eq!(*ran_on.lock().unwrap().last().unwrap(), here);
    // A lone row, arriving at a pace that brings company within the 300 ms bound (the last queued arrival was
    // 200 ms before it), waits for that company; a full batch that comes meanwhile must not overtake it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lone = tokio::spawn({
        let instance = instance.clone();
        async move { instance.infer(one(5.0), far()).await.unwrap() }
    });
    // Bounded, so that a lone row that never queues fails the test instead of hanging it (seen once, under load).
    let waiting = Instant::now();
    while instance.stats().queued.load(Ordering::Relaxed) == 0 {
        let finished = lone.is_finished();
        assert!(
            !finished && waiting.elapsed() < Duration::from_secs(10),
            "the lone row never queued (done: {finished})"
        );
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    let full = instance.infer(rows(&[6.0, 7.0]), far()).await.unwrap();
    assert_eq!(f32s(&full[0]), vec![6.0, 7.0]);
    assert_eq!(f32s(&lone.await.unwrap()[0]), vec![5.0]);
    let threads = ran_on.lock().unwrap().clone();
    assert_eq!(threads.len(), 4, "the lone row and the full batch ran as two batches");
    assert!(threads[2..].iter().all(|&t| t != here), "both ran on the instance's thread");
    assert!(started.elapsed() < Duration::from_millis(300), "the full batch started the lone row's at once");
}

#[tokio::test]
async fn mismatched_inputs_are_refused_before_they_queue() {
    let instance = onnx_instance("mixed", InstanceConfig::new("mixed#2"));
    let mut inputs = mixed_inputs(1.0);
    inputs[1] = Tensor::from_f32(vec![1, 4], &[0.0; 4]).unwrap();
    let err = instance.infer(inputs, far()).await.unwrap_err().to_string();
    assert!(err.contains("mixed#2") && err.contains("`ids`"), "{err}");
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_different_shapes_run_in_separate_batches() {
    let config = InstanceConfig {
        policy: BatchPolicy {
            max_batch: 4,
            max_wait: Duration::from_millis(300),
            staleness: Duration::from_secs(5),
            ..BatchPolicy::default()
        },
        ..InstanceConfig::new("rec#0")
    };
    let instance = onnx_instance("ppocr-rec", config);
    // The first starts at once (an idle instance expects no company yet) unless the others are already there;
    // those arriving while it runs start when it ends, the widths of 320 in one batch, the one of 160 in its own.
    let tasks: Vec<_> = [320u64, 320, 160, 320]
        .into_iter()
        .map(|w| {
            let instance = instance.clone();
            let x = Tensor::from_f32(vec![1, 3, 48, w], &vec![0.2; (3 * 48 * w) as usize]).unwrap();
            tokio::spawn(async move { (w, instance.infer(vec![x], far()).await) })
        })
        .collect();
    for (w, result) in futures_join(tasks).await {
        let out = result.unwrap();
        assert_eq!(out[0].shape()[..2], [1, w / 8], "CTC steps follow the width");
    }
    let batches = instance.stats().batches.load(Ordering::Relaxed);
    assert!((2..=3).contains(&batches), "{batches} batches: two widths never share one, the three of 320 may");
}

#[tokio::test]
async fn requests_run_together_as_one_batch_alone_each_shape_its_own() {
    // Max batch 1 and no wait: only `infer_together` puts several requests into one batch.
    let instance = sleepy(5, InstanceConfig::new("sleepy#together"));
    let two = Tensor::from_f32(vec![2, 1], &[7.0, 8.0]).unwrap();
    let out = instance.infer_together(vec![one(1.0), vec![two], one(3.0)], far()).await.unwrap();
    let values: Vec<Vec<f32>> = out.iter().map(|o| f32s(&o[0])).collect();
    assert_eq!(values, vec![vec![1.0], vec![7.0, 8.0], vec![3.0]], "each request gets its own rows back, in order");
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 1);
    assert_eq!(instance.stats().rows.load(Ordering::Relaxed), 4);
    assert_eq!(instance.stats().requests.load(Ordering::Relaxed), 3);

    // Shapes that cannot stack run as consecutive batches; the answers keep the requests' order.
    // (As a pipeline's instances are configured: a batch at once, dropped only past its deadline.)
    let config = InstanceConfig {
        policy: BatchPolicy::serving(1, Duration::from_secs(30)),
        ..InstanceConfig::new("rec#together")
    };
    let instance = onnx_instance("ppocr-rec", config);
    let x = |w: u64| vec![Tensor::from_f32(vec![1, 3, 48, w], &vec![0.2; (3 * 48 * w) as usize]).unwrap()];
    let out = instance.infer_together(vec![x(320), x(160), x(320)], far()).await.unwrap();
    let steps: Vec<u64> = out.iter().map(|o| o[0].shape()[1]).collect();
    assert_eq!(steps, vec![40, 20, 40]);
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 2);

    // A failure fails them all, and the instance serves the next.
    let instance = sleepy(1, InstanceConfig::new("sleepy#together-fails"));
    let err = instance.infer_together(vec![one(1.0), one(-1.0)], far()).await.unwrap_err();
    assert!(err.to_string().contains("scripted failure"), "{err}");
    assert_eq!(instance.infer(one(2.0), far()).await.unwrap()[0].shape(), &[1, 1]);
}

#[test]
fn a_model_larger_than_its_segment_is_refused() {
    let config = InstanceConfig { memory: Some(32 << 20), ..InstanceConfig::new("big@mig:0:1g.10gb:4#0") };
    let err = cpu().start_instance(config, "big", &model("big"), one_core()).err().unwrap();
    let text = err.to_string();
    assert!(text.contains("big@mig") && text.contains("`big`") && text.contains("64 MiB"), "{text}");
}

#[test]
fn a_corrupt_model_fails_its_instance_only() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.onnx");
    std::fs::write(&bad, b"\x08\x07garbage").unwrap();
    let err = cpu().start_instance(InstanceConfig::new("bad#0"), "bad", &bad, one_core()).err().unwrap();
    // The launcher keeps the load's own error: the model file at fault, named.
    assert!(
        matches!(&err, LaunchError::Model(ModelError::Invalid { model, path, .. }) if model == "bad" && path == &bad),
        "{err}"
    );
}

#[tokio::test]
async fn pinned_instances_serve() {
    let config = InstanceConfig { cores: Some(vec![0]), ..InstanceConfig::new("mlp@cpu:1#0") };
    let instance = onnx_instance("mlp", config);
    let out = instance.infer(vec![Tensor::from_f32(vec![2, 64], &[0.1; 128]).unwrap()], far()).await.unwrap();
    assert_eq!(out[0].shape(), &[2, 16]);
}

#[test]
fn the_pool_spreads_requests_by_weight() {
    let a = sleepy(1, InstanceConfig::new("a"));
    let b = sleepy(1, InstanceConfig::new("b"));
    let pool = Pool::new(vec![(a, 30.0), (b, 10.0)]);
    let picks: Vec<String> = (0..8).map(|_| pool.pick().unwrap().name().to_string()).collect();
    assert_eq!(picks.iter().filter(|n| *n == "a").count(), 6, "{picks:?}");
    assert_ne!(picks[..4].iter().filter(|n| *n == "b").count(), 0, "b gets a turn within each cycle: {picks:?}");
}

#[test]
fn placing_leaves_the_rotation_alone_and_a_request_goes_where_its_inputs_lie() {
    let pool = Pool::new(vec![(sleepy(1, InstanceConfig::new("a")), 1.0), (sleepy(1, InstanceConfig::new("b")), 1.0)]);
    let picks: Vec<String> = (0..4)
        .map(|_| {
            let placed = pool.place(&[&[0u8; 16][..]]).expect("an instance in process places in its own memory");
            let holder = pool.instances().find(|i| i.holds(&placed[0])).expect("placed in the next instance");
            let picked = pool.pick().unwrap();
            assert_eq!(holder.name(), picked.name());
            picked.name().to_string()
        })
        .collect();
    assert_eq!(picks, ["a", "b", "a", "b"]);
}

/// A request's inputs placed in turn (as a function's `infer` places them, `Pool::place`) lie end to end, so a
/// batch of them in that order is a view of them: the one copy in was the batch's. Out of turn, it is copied.
#[tokio::test]
async fn requests_placed_in_turn_run_as_one_batch_with_no_copy() {
    let policy = BatchPolicy { max_batch: 4, ..BatchPolicy::default() };
    let instance = sleepy(0, InstanceConfig { policy, ..InstanceConfig::new("sleepy#placed") });
    let placed: Vec<Tensor> = (0..4)
        .map(|k| {
            let data = instance.place(&[&(k as f32).to_le_bytes()[..]]).unwrap().remove(0);
            Tensor::new(DType::F32, vec![1, 1], data).unwrap()
        })
        .collect();
    assert!(placed.iter().all(|t| instance.holds(t.data())));
    let requests = placed.iter().map(|t| vec![t.clone()]).collect();
    let out = instance.infer_together(requests, far()).await.unwrap();
    for (k, (out, placed)) in out.iter().zip(&placed).enumerate() {
        assert_eq!(f32s(&out[0]), vec![k as f32]);
        assert_eq!(out[0].data().as_ptr(), placed.data().as_ptr(), "request {k}: its own row, not a copy");
    }
    let reversed = placed.iter().rev().map(|t| vec![t.clone()]).collect();
    let out = instance.infer_together(reversed, far()).await.unwrap();
    assert_eq!(out.iter().map(|o| f32s(&o[0])[0]).collect::<Vec<_>>(), [3.0, 2.0, 1.0, 0.0]);
    assert_ne!(out[0][0].data().as_ptr(), placed[3].data().as_ptr(), "one request of rows out of turn: copied");
}

/// Requests placed in turn but queued out of it (callers racing between placing and queueing) are batched in
/// the order their inputs lie: still a view, and each answer its own request's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_queued_out_of_the_turn_they_were_placed_in_are_batched_in_it() {
    let policy = BatchPolicy { max_batch: 4, staleness: Duration::from_secs(60), ..BatchPolicy::default() };
    let instance = sleepy(100, InstanceConfig { policy, ..InstanceConfig::new("sleepy#racing") });
    let busy = tokio::spawn({
        let instance = instance.clone();
        async move { instance.infer(one(9.0), far()).await }
    });
    while instance.stats().batches.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let placed: Vec<Tensor> = (0..3)
        .map(|k| {
            let data = instance.place(&[&(k as f32).to_le_bytes()[..]]).unwrap().remove(0);
            Tensor::new(DType::F32, vec![1, 1], data).unwrap()
        })
        .collect();
    // Queued last to first while the busy batch runs: they wait together and start as one batch after it.
    let mut answers = Vec::new();
    for t in placed.iter().rev() {
        let (instance, t) = (instance.clone(), t.clone());
        answers.push(tokio::spawn(async move { instance.infer(vec![t], far()).await }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    busy.await.unwrap().unwrap();
    for (answer, k) in answers.into_iter().zip([2usize, 1, 0]) {
        let out = answer.await.unwrap().unwrap();
        assert_eq!(f32s(&out[0]), vec![k as f32]);
        assert_eq!(out[0].data().as_ptr(), placed[k].data().as_ptr(), "request {k}: its own row, not a copy");
    }
    assert_eq!(instance.stats().batches.load(Ordering::Relaxed), 2);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_batch_records_the_cpu_time_it_took_apart_from_the_time_it_waited() {
    // 30 ms asleep: a batch that waited (for a core, a worker, a GPU) costs its thread next to no CPU.
    let sleepy = sleepy(30, InstanceConfig::new("sleepy"));
    sleepy.infer(one(1.0), far()).await.unwrap();
    let recorded = &sleepy.stats().batch_latencies()[0];
    let (latency, cpu) = (recorded.recent_ms[0], recorded.recent_cpu_ms[0].expect("measured on Linux"));
    assert!(latency >= 30.0 && cpu < 10.0, "{latency} ms, {cpu} ms of CPU");
    // 30 ms computing: its CPU time is its latency.
    let (busy, _) = quick(Duration::from_millis(30), BatchPolicy::default());
    busy.infer(one(1.0), far()).await.unwrap();
    let recorded = &busy.stats().batch_latencies()[0];
    let (latency, cpu) = (recorded.recent_ms[0], recorded.recent_cpu_ms[0].expect("measured on Linux"));
    assert!(cpu >= 25.0 && cpu <= latency + 1.0, "{latency} ms, {cpu} ms of CPU");
}
