//! The profiler's measurement: latency and throughput of one model on one segment for batch sizes 1, 2, 4, …
//! (`jig profile` drives it over a bundle's variants and segments and writes the table the planner reads).
//!
//! A point measures one instance of the segment as the planner counts it. For `mig:GPU:PROFILE:K` that is the
//! MIG instance with its K MPS processes serving together: K workers run their batches at the same time, the
//! latencies are those of all K (interference included), and the throughput is theirs together. Every other
//! segment is one process.

use std::time::{Duration, Instant};

use crate::executor::{BoxError, Executor};
use crate::onnx::{ModelError, TensorSpec};
use crate::{DType, Tensor};
use jig_policy::stats::quantile;

/// How far and how long to measure.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The largest batch tried (batches double from 1 up to it).
    pub max_batch: u32,
    /// Untimed runs before measuring each batch size.
    pub warmup: usize,
    /// Timed runs per batch size.
    pub runs: usize,
    /// Stop growing the batch once a batch's p95 latency exceeds this.
    pub max_latency: Duration,
    /// Measure each point until its verdict against a latency budget is certain enough, instead of `runs`
    /// times (Compass's adaptive profiling).
    pub adaptive: Option<Adaptive>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { max_batch: 128, warmup: 3, runs: 20, max_latency: Duration::from_secs(2), adaptive: None }
    }
}

/// Adaptive sampling (Compass §4.2): a point is measured until the verdict "its p95 latency is within
/// `budget`" holds, or its opposite, with `confidence`, and at least `min_runs` times; at most `max_runs`.
///
/// Compass decides on a mean (a t-test on accuracy samples); the planner reads a p95, so the verdict here is
/// the distribution-free one on that quantile: with k of n samples over the budget, the p95 is within it when
/// P(Binomial(n, 0.05) ≤ k) ≤ 1 − confidence, and over it when P(Binomial(n, 0.05) ≥ k) ≤ 1 − confidence. A
/// batch whose p95 is over the budget ends the sweep, as [`Settings::max_latency`] does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adaptive {
    /// The latency the verdict is about.
    pub budget: Duration,
    /// How sure the verdict must be, e.g. 0.99.
    pub confidence: f64,
    /// Samples taken at the least (Compass: 50).
    pub min_runs: usize,
    /// Samples taken at the most, verdict or not.
    pub max_runs: usize,
}

impl Adaptive {
    /// Compass's settings for `budget`: 99% confidence, at least 50 samples; at most 400.
    pub fn compass(budget: Duration) -> Self {
        Adaptive { budget, confidence: 0.99, min_runs: 50, max_runs: 400 }
    }
}

/// Whether the p95 of the distribution `samples` come from is within `budget` (`Some(true)`), over it
/// (`Some(false)`), or not yet known with `confidence` ([`Adaptive`]).
pub fn verdict(samples: &[Duration], budget: Duration, confidence: f64) -> Option<bool> {
    let n = samples.len();
    let over = samples.iter().filter(|&&s| s > budget).count();
    // P(Binomial(n, q) = i), in logs so that n in the thousands stays finite.
    let q: f64 = 0.05;
    let ln_choose = |i: usize| -> f64 { (1..=i).map(|j| ((n + 1 - j) as f64 / j as f64).ln()).sum() };
    let pmf = |i: usize| (ln_choose(i) + i as f64 * q.ln() + (n - i) as f64 * (1.0 - q).ln()).exp();
    let alpha = 1.0 - confidence;
    if (0..=over).map(pmf).sum::<f64>() <= alpha {
        Some(true)
    } else if (over..=n).map(pmf).sum::<f64>() <= alpha {
        Some(false)
    } else {
        None
    }
}

/// One measured batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Rows per batch.
    pub batch: u32,
    /// Median latency of one batch.
    pub p50: Duration,
    /// 95th-percentile latency of one batch.
    pub p95: Duration,
    /// Rows per second, batches run back to back.
    pub throughput: f64,
    /// Timed runs it took (of all processes together).
    pub runs: usize,
    /// The host CPU time of one batch, where its executors run in worker processes on this machine (a GPU
    /// segment's): every thread of the process, its launches, copies and waits on the device and any of the
    /// model's operators that run on the CPU; `None` in process.
    pub cpu: Option<Duration>,
    /// With [`Settings::adaptive`]: whether its p95 is within the budget, when that is known.
    pub within_budget: Option<bool>,
}

/// Why the batch stopped growing before `max_batch`, if it did.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// A batch's p95 latency exceeded [`Settings::max_latency`]; that batch is the last point measured.
    Latency {
        /// The batch size that was too slow.
        batch: u32,
        /// Its p95 latency.
        p95: Duration,
    },
    /// A batch failed (usually memory running out); the points end at the batch size before it.
    Failed {
        /// The batch size that failed.
        batch: u32,
        /// The executor's message.
        detail: String,
    },
}

/// Measure model `name` on batches of doubling size, run by `executors` together (one, or the K processes of
/// a `mig:…:K` instance or an `mps:…xK` share; each a model in this process or a worker process on a GPU segment), each on a thread
/// of its own, their timed runs started together; `progress` sees each point as it is measured. A failure at
/// batch 1 is an error; a failure at a larger batch (memory running out) ends the sweep there.
pub fn sweep(
    executors: &[&dyn Executor],
    name: &str,
    samples: &[SampleInput],
    settings: &Settings,
    mut progress: impl FnMut(&Point),
) -> Result<(Vec<Point>, Option<Stop>), BoxError> {
    let Some(first) = executors.first() else { return Err("no executor to measure".into()) };
    let mut points = Vec::new();
    let mut batch = 1u32;
    // A model with an input that has no batch dimension is served one request per batch (see `instance`).
    let max_batch = if first.inputs().iter().all(crate::onnx::TensorSpec::batchable) { settings.max_batch } else { 1 };
    while batch <= max_batch.max(1) {
        let inputs = sample_inputs(name, first.inputs(), samples, u64::from(batch))?;
        let measured = match &settings.adaptive {
            None => measure_together(executors, &inputs, settings.warmup, settings.runs),
            Some(adaptive) => measure_adaptively(executors, &inputs, settings.warmup, adaptive),
        };
        let Measured { times, cpu } = match measured {
            Ok(measured) => measured,
            Err(e) if batch == 1 => return Err(e),
            Err(e) => return Ok((points, Some(Stop::Failed { batch, detail: e.to_string() }))),
        };
        let mut all: Vec<Duration> = times.iter().flatten().copied().collect();
        all.sort();
        // Rows per second of each process, batches back to back, added up.
        let throughput =
            times.iter().map(|t| f64::from(batch) * t.len() as f64 / t.iter().sum::<Duration>().as_secs_f64()).sum();
        let within_budget = settings.adaptive.and_then(|a| verdict(&all, a.budget, a.confidence));
        // The rule a deployed app's observed latencies are reported by: the planner compares the two.
        let at = |q| quantile(&all, q).expect("every executor times at least one run");
        let cpu = cpu.map(|cpu| cpu / all.len() as u32);
        let point = Point { batch, p50: at(0.5), p95: at(0.95), throughput, runs: all.len(), within_budget, cpu };
        progress(&point);
        let p95 = point.p95;
        points.push(point);
        if (p95 > settings.max_latency || within_budget == Some(false)) && batch < max_batch {
            return Ok((points, Some(Stop::Latency { batch, p95 })));
        }
        batch *= 2;
    }
    Ok((points, None))
}

/// What one point's timed runs measured.
struct Measured {
    /// Each executor's batch latencies.
    times: Vec<Vec<Duration>>,
    /// The CPU time their worker processes spent over those runs, all together; `None` in process.
    cpu: Option<Duration>,
}

/// One executor's timed runs: their latencies, and its worker process's CPU time over them (`None` in process).
type Runs = (Vec<Duration>, Option<Duration>);

/// Each executor's timed batch latencies, measured in rounds of ten until [`verdict`] is certain and at
/// least `min_runs` were taken (all executors together), or `max_runs` were.
fn measure_adaptively(
    executors: &[&dyn Executor],
    inputs: &[Tensor],
    warmup: usize,
    adaptive: &Adaptive,
) -> Result<Measured, BoxError> {
    const ROUND: usize = 10;
    let mut measured = measure_together(executors, inputs, warmup, ROUND)?;
    loop {
        let all: Vec<Duration> = measured.times.iter().flatten().copied().collect();
        let known = verdict(&all, adaptive.budget, adaptive.confidence).is_some();
        if (known && all.len() >= adaptive.min_runs) || all.len() >= adaptive.max_runs {
            return Ok(measured);
        }
        let more = measure_together(executors, inputs, 0, ROUND)?;
        for (mine, more) in measured.times.iter_mut().zip(more.times) {
            mine.extend(more);
        }
        measured.cpu = measured.cpu.zip(more.cpu).map(|(a, b)| a + b);
    }
}

/// Each executor's timed batch latencies on `inputs`: `warmup` untimed runs, then `runs` timed ones, every
/// executor on a thread of its own and the timed runs started together; and the CPU time of their processes
/// over the timed runs, where they run in worker processes.
fn measure_together(
    executors: &[&dyn Executor],
    inputs: &[Tensor],
    warmup: usize,
    runs: usize,
) -> Result<Measured, BoxError> {
    let start = std::sync::Barrier::new(executors.len());
    let measured: Result<Vec<Runs>, BoxError> = std::thread::scope(|scope| {
        let running: Vec<_> = executors
            .iter()
            .map(|executor| {
                let start = &start;
                scope.spawn(move || -> Result<Runs, BoxError> {
                    let warm = (0..warmup).try_for_each(|_| executor.execute(inputs).map(drop));
                    // Every thread reaches the barrier, failed or not, so that none waits forever.
                    start.wait();
                    warm?;
                    let cpu_before = executor.process_cpu();
                    let mut times = Vec::with_capacity(runs.max(1));
                    for _ in 0..runs.max(1) {
                        let started = Instant::now();
                        executor.execute(inputs)?;
                        times.push(started.elapsed());
                    }
                    let cpu =
                        cpu_before.zip(executor.process_cpu()).map(|(before, after)| after.saturating_sub(before));
                    Ok((times, cpu))
                })
            })
            .collect();
        running.into_iter().map(|r| r.join().unwrap_or_else(|_| Err("a measuring thread panicked".into()))).collect()
    });
    let (times, cpus): (Vec<_>, Vec<_>) = measured?.into_iter().unzip();
    // Every executor's, or none: a total of some would read as a batch's whole cost.
    let cpu = cpus.into_iter().sum::<Option<Duration>>();
    Ok(Measured { times, cpu })
}

/// Runs of one process beside others (`jig profile --pairs`): back to back on `inputs` for `duration` after
/// `warmup` untimed runs, started when every co-runner has warmed up (`ready` counts them up to `together`; a
/// co-runner not ready within a minute is an error), each run's start and end.
pub fn run_beside(
    executor: &dyn Executor,
    inputs: &[Tensor],
    warmup: usize,
    ready: &std::sync::atomic::AtomicUsize,
    together: usize,
    duration: Duration,
) -> Result<Vec<(Instant, Instant)>, BoxError> {
    use std::sync::atomic::Ordering;
    for _ in 0..warmup {
        executor.execute(inputs)?;
    }
    ready.fetch_add(1, Ordering::SeqCst);
    let waiting = Instant::now();
    while ready.load(Ordering::SeqCst) < together {
        if waiting.elapsed() > Duration::from_secs(60) {
            return Err("a co-running model was not ready within a minute".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let (start, mut runs) = (Instant::now(), Vec::new());
    while start.elapsed() < duration {
        let began = Instant::now();
        executor.execute(inputs)?;
        runs.push((began, Instant::now()));
    }
    Ok(runs)
}

/// The median latency of each of several co-runners' runs (from [`run_beside`]) inside the window all of them
/// ran in; `None` for one with fewer than three runs there.
pub fn medians_together(runs: &[Vec<(Instant, Instant)>]) -> Vec<Option<Duration>> {
    let start = runs.iter().filter_map(|r| r.first().map(|f| f.0)).max();
    let end = runs.iter().filter_map(|r| r.last().map(|l| l.1)).min();
    runs.iter()
        .map(|r| {
            let (Some(start), Some(end)) = (start, end) else { return None };
            let mut inside: Vec<Duration> =
                r.iter().filter(|(a, b)| *a >= start && *b <= end).map(|(a, b)| *b - *a).collect();
            inside.sort();
            (inside.len() >= 3).then(|| inside[inside.len() / 2])
        })
        .collect()
}

/// What to feed one input when profiling; the defaults make a tensor of shape 1 in every dynamic dimension,
/// filled with a fixed pattern.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleInput {
    /// One item's shape, without the batch dimension.
    pub shape: Option<Vec<u64>>,
    /// Values, repeated to fill the tensor: for inputs whose values set the work (a sequence length, a
    /// speech rate), where the pattern would make the model do less than it does when serving.
    pub values: Option<Vec<f64>>,
}

/// Inputs of `rows` rows for `specs`, as `samples` (one per input, in order) describe them.
pub fn sample_inputs(
    model: &str,
    specs: &[TensorSpec],
    samples: &[SampleInput],
    rows: u64,
) -> Result<Vec<Tensor>, ModelError> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let sample = samples.get(i).cloned().unwrap_or_default();
            let item = sample.shape;
            let mut shape = Vec::with_capacity(spec.shape.len());
            for (d, dim) in spec.shape.iter().enumerate() {
                shape.push(match (d, dim, &item) {
                    (0, _, _) if spec.batchable() => rows,
                    (_, _, Some(item)) if spec.batchable() => *item.get(d - 1).ok_or_else(|| ModelError::Input {
                        model: model.into(),
                        detail: format!(
                            "the profiling shape {item:?} for input `{}` has too few dimensions",
                            spec.name
                        ),
                    })?,
                    (_, Some(fixed), _) => *fixed,
                    (_, None, _) => 1,
                });
            }
            let count: u64 = shape.iter().product();
            let data: Vec<u8> = match (spec.dtype, sample.values.filter(|v| !v.is_empty())) {
                (DType::F32, Some(v)) => {
                    (0..count).flat_map(|k| (v[k as usize % v.len()] as f32).to_le_bytes()).collect()
                }
                (DType::I64, Some(v)) => {
                    (0..count).flat_map(|k| (v[k as usize % v.len()] as i64).to_le_bytes()).collect()
                }
                (DType::F32, None) => (0..count).flat_map(|k| ((k % 17) as f32 / 17.0).to_le_bytes()).collect(),
                (DType::I64, None) => (0..count).flat_map(|k| ((k % 7) as i64 + 1).to_le_bytes()).collect(),
                (dtype, Some(_)) => {
                    return Err(ModelError::Input {
                        model: model.into(),
                        detail: format!(
                            "profiling values for input `{}` of type {dtype:?}: only f32 and i64 inputs take values",
                            spec.name
                        ),
                    });
                }
                (dtype, None) => vec![1; count as usize * dtype.size()],
            };
            Tensor::new(spec.dtype, shape, data)
                .map_err(|e| ModelError::Input { model: model.into(), detail: e.to_string() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, dtype: DType, shape: &[Option<u64>]) -> TensorSpec {
        TensorSpec { name: name.into(), dtype, shape: shape.to_vec() }
    }

    #[test]
    fn inputs_take_their_shapes_and_values_and_fall_back_to_a_pattern() {
        // A Piper voice's signature: ids [batch, n], lengths [batch], scales [3].
        let specs = [
            spec("input", DType::I64, &[None, None]),
            spec("input_lengths", DType::I64, &[None]),
            spec("scales", DType::F32, &[Some(3)]),
        ];
        let samples = [
            SampleInput { shape: Some(vec![40]), values: None },
            SampleInput { shape: None, values: Some(vec![40.0]) },
            SampleInput { shape: None, values: Some(vec![0.667, 1.0, 0.8]) },
        ];
        let inputs = sample_inputs("voice", &specs, &samples, 2).unwrap();
        assert_eq!(inputs[0].shape(), [2, 40]);
        let ids: Vec<i64> = inputs[0].data().chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(&ids[..8], [1, 2, 3, 4, 5, 6, 7, 1], "the pattern where no values are given");
        assert_eq!(inputs[1].shape(), [2]);
        assert_eq!(inputs[1].data(), [40i64.to_le_bytes(), 40i64.to_le_bytes()].concat());
        let scales: Vec<f32> = inputs[2].data().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(scales, [0.667, 1.0, 0.8]);
    }

    /// Runs a batch in a fixed time, or fails.
    struct Sleeper {
        inputs: Vec<TensorSpec>,
        per_batch: Duration,
        fail: bool,
    }

    impl Executor for Sleeper {
        fn inputs(&self) -> &[TensorSpec] {
            &self.inputs
        }
        fn execute(&self, _inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
            std::thread::sleep(self.per_batch);
            if self.fail { Err("out of memory".into()) } else { Ok(Vec::new()) }
        }
    }

    fn sleeper(ms: u64, fail: bool) -> Sleeper {
        Sleeper { inputs: vec![spec("x", DType::F32, &[None])], per_batch: Duration::from_millis(ms), fail }
    }

    #[test]
    fn processes_measured_together_add_their_throughput_and_share_their_latencies() {
        let settings = Settings { max_batch: 2, warmup: 1, runs: 5, ..Settings::default() };
        let (one, two) = (sleeper(20, false), sleeper(20, false));
        let (alone, _) = sweep(&[&one], "m", &[], &settings, |_| {}).unwrap();
        let (together, _) = sweep(&[&one, &two], "m", &[], &settings, |_| {}).unwrap();
        assert_eq!(together.len(), 2, "batches 1 and 2");
        // Sleeping processes do not slow each other: two serve about twice the rows of one.
        let ratio = together[0].throughput / alone[0].throughput;
        assert!((1.5..2.5).contains(&ratio), "{ratio}: {together:?} against {alone:?}");
        assert!(together[0].p50 >= Duration::from_millis(20));
    }

    #[test]
    fn the_verdict_on_a_p95_needs_enough_samples_either_way() {
        let ms = Duration::from_millis;
        let under = |n: usize| vec![ms(1); n];
        // All within: 0.95^n ≤ 1% from n = 90.
        assert_eq!(verdict(&under(89), ms(10), 0.99), None);
        assert_eq!(verdict(&under(90), ms(10), 0.99), Some(true));
        // All over: certain at once.
        assert_eq!(verdict(&[ms(20); 5], ms(10), 0.99), Some(false));
        // 6% over, near the 5% the p95 allows: not known after 100, nor after 1000.
        let near = |n: usize| (0..n).map(|i| if i % 50 < 3 { ms(20) } else { ms(1) }).collect::<Vec<_>>();
        assert_eq!(verdict(&near(100), ms(10), 0.99), None);
        assert_eq!(verdict(&near(1000), ms(10), 0.99), None);
        // 20% over: the p95 is over.
        let often = (0..100).map(|i| if i % 5 == 0 { ms(20) } else { ms(1) }).collect::<Vec<_>>();
        assert_eq!(verdict(&often, ms(10), 0.99), Some(false));
    }

    #[test]
    fn adaptive_sampling_stops_at_the_verdict_and_a_batch_over_budget_ends_the_sweep() {
        let adaptive = |budget_ms: u64| Settings {
            max_batch: 2,
            warmup: 1,
            adaptive: Some(Adaptive::compass(Duration::from_millis(budget_ms))),
            ..Settings::default()
        };
        let fast = sleeper(1, false);
        let (points, stop) = sweep(&[&fast], "m", &[], &adaptive(50), |_| {}).unwrap();
        assert_eq!(stop, None);
        assert_eq!(points.iter().map(|p| (p.runs, p.within_budget)).collect::<Vec<_>>(), [(90, Some(true)); 2]);
        let slow = sleeper(12, false);
        let (points, stop) = sweep(&[&slow], "m", &[], &adaptive(5), |_| {}).unwrap();
        assert_eq!(points.iter().map(|p| (p.runs, p.within_budget)).collect::<Vec<_>>(), [(50, Some(false))]);
        assert!(matches!(stop, Some(Stop::Latency { batch: 1, .. })), "{stop:?}");
    }

    /// A worker process whose batches each cost its host `cpu_per_batch` of CPU (as it reports its process's).
    struct Worker {
        sleeper: Sleeper,
        cpu: std::sync::Mutex<Duration>,
        cpu_per_batch: Duration,
    }

    impl Executor for Worker {
        fn inputs(&self) -> &[TensorSpec] {
            &self.sleeper.inputs
        }
        fn execute(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, BoxError> {
            *self.cpu.lock().unwrap() += self.cpu_per_batch;
            self.sleeper.execute(inputs)
        }
        fn process_cpu(&self) -> Option<Duration> {
            Some(*self.cpu.lock().unwrap())
        }
    }

    /// A point on worker processes says the host CPU one batch cost, warm-up runs left out; one in process, none.
    #[test]
    fn a_point_on_workers_measures_the_host_cpu_of_a_batch() {
        let settings = Settings { max_batch: 1, warmup: 3, runs: 4, ..Settings::default() };
        let worker = |ms: u64| Worker {
            sleeper: sleeper(1, false),
            cpu: std::sync::Mutex::new(Duration::from_secs(1)),
            cpu_per_batch: Duration::from_millis(ms),
        };
        let (one, two) = (worker(6), worker(10));
        let (points, _) = sweep(&[&one, &two], "m", &[], &settings, |_| {}).unwrap();
        assert_eq!(points[0].cpu, Some(Duration::from_millis(8)), "(4 × 6 + 4 × 10) ms over 8 batches");
        let (points, _) = sweep(&[&sleeper(1, false)], "m", &[], &settings, |_| {}).unwrap();
        assert_eq!(points[0].cpu, None);
    }

    #[test]
    fn a_process_that_fails_fails_the_point_without_hanging_the_others() {
        let settings = Settings { max_batch: 1, warmup: 1, runs: 3, ..Settings::default() };
        let (ok, failing) = (sleeper(1, false), sleeper(1, true));
        let e = sweep(&[&ok, &failing], "m", &[], &settings, |_| {}).unwrap_err();
        assert!(e.to_string().contains("out of memory"), "{e}");
    }

    #[test]
    fn values_for_an_input_of_another_type_are_refused_by_name() {
        let specs = [spec("mask", DType::U8, &[None, Some(4)])];
        let samples = [SampleInput { shape: None, values: Some(vec![1.0]) }];
        let e = sample_inputs("m", &specs, &samples, 1).unwrap_err().to_string();
        assert!(e.contains("`mask`") && e.contains("only f32 and i64"), "{e}");
    }
}
