//! The tensor path against bare ONNX Runtime (issue 16): `cargo bench -p jig --bench tensor_path`.
//!
//! For each model and batch size, in one run on the same machine, the median time of one batch of `b` rows,
//! each path measured in turns with bare ONNX Runtime (see `measure`) and its ratio taken to that bare time:
//!
//! * **bare**: a `Session::run` on ready ONNX Runtime tensors over the inputs' bytes (made outside the timing),
//!   its outputs allocated by ONNX Runtime, as a hand-written program would run it. It reads the very bytes the
//!   in-process paths read, so that where a large input lies in memory (which moved Add b = 64 between 12 and
//!   18 ms from run to run on the machine of BENCHMARKS.md) weighs on both sides alike; each side's outputs
//!   still lie where its own session puts them;
//! * **in process**: `Instance::infer` of one request of `b` rows on a CPU segment, as a deployment serves it:
//!   queue, batcher, ONNX Runtime, outputs back as `Tensor`s (a batch known to be short is run by the caller
//!   itself: `jig_model_host::instance::CALLER_RUNS_BELOW`);
//! * **stacked**: `b` requests of one row each, sent together to the same instance, which batches them and
//!   splits the outputs back. Each request's row was placed by the instance beforehand, outside the timing, as a
//!   function's `infer` places it (the request's one copy in): requests placed in turn lie end to end, and
//!   their batch is a view of them, not a copy (before, stacking copied the batch once more: Add at 0.2–0.46);
//! * **worker**: `Worker::run` of the same batch in a `jig worker` process, as GPU segments are served (here on
//!   the CPU), with the batch already in the worker's shared memory, where the batcher stacks requests;
//! * **worker, copy in**: the same with the batch in ordinary memory, copied in by `Worker::run` (a batch of
//!   one request, which the batcher does not restack).
//!
//! and the ratio bare / path (≥ 0.9 is the target: the path costs at most 10% more than ONNX Runtime itself).
//! Models: a one-node `Add` on 3×640×640 images (the most bytes per unit of work: 4.9 MB a row each way), and
//! the PP-OCRv4 detector and recognizer. `BENCH_MODELS=add` and `BENCH_BATCHES=1,8` narrow the run;
//! `BENCH_THREADS` sets the intra-op threads (default: this machine's cores).
//!
//! `BENCH_SEGMENT=mps:0:100` (any GPU segment) measures the GPU path instead, on a machine with an NVIDIA GPU
//! and ONNX Runtime's CUDA build (`JIG_ORT_LIB`): bare is a session with the CUDA provider (cuDNN's heuristics
//! choosing convolutions, as in jig's sessions) on host tensors, its outputs copied back to the host (as Python's
//! `InferenceSession.run` does); in process and stacked are an instance on that segment, served as a deployment
//! serves it (a `jig worker` bound to the device, its MPS share); worker is that process without the instance's
//! queue, on the same device. On an `mps:` segment the run adds **bare, MPS**: the same bare session in a process
//! of its own that is a client of the GPU's MPS daemon with the segment's share, the reference that charges MPS's
//! own cost to neither side.
//!
//! With `add` among the models, a last table starts where a user's tensors start, in glue: see [`from_glue`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_model_host::device::Devices;
use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
use jig_model_host::launch::{Launcher, Placement, WorkerCommand};
use jig_model_host::mps::MpsDaemon;
use jig_model_host::onnx::{self, SessionOptions};
use jig_model_host::segment::Segment;
use jig_model_host::sweep::{SampleInput, sample_inputs};
use jig_model_host::worker::{Worker, WorkerSpec};
use jig_model_host::{DType, Tensor};

fn model_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.jig/models").join(format!("{name}.onnx"))
}

/// Enough runs for a steady median: about two seconds a measurement, at least 3 and at most 1000 runs.
fn runs(one: Duration) -> usize {
    (Duration::from_secs(2).as_secs_f64() / one.as_secs_f64().max(1e-6)).clamp(3.0, 1000.0) as usize
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// One batch on one side, timed.
type Side<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Rounds each side's runs are spread over.
const ROUNDS: usize = 10;

/// The pause before a side's turn: after a run, ONNX Runtime's intra-op threads spin for about 40 ms (on the
/// 2-vCPU machine of BENCHMARKS.md), taking a core from whichever side runs next.
const QUIET: Duration = Duration::from_millis(60);

/// Each side's median time, the sides taking turns: in each of [`ROUNDS`] rounds every side runs a tenth of
/// its runs, so that a slow stretch of a shared machine falls on every side alike (measured one after the
/// other, the same side's median differed by up to 2× from run to run on a 2-vCPU virtual machine). A side
/// first runs three times (a CUDA session tunes its kernels and grows its arena in its first runs). Each turn
/// starts [`QUIET`] after the last, with an untimed run.
fn measure(sides: &mut [&mut dyn FnMut() -> Duration]) -> Vec<Duration> {
    let per_round: Vec<usize> = sides
        .iter_mut()
        .map(|run| {
            let last = (0..3).map(|_| run()).last().unwrap();
            runs(last).div_ceil(ROUNDS)
        })
        .collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    for _ in 0..ROUNDS {
        for ((run, &n), times) in sides.iter_mut().zip(&per_round).zip(&mut times) {
            std::thread::sleep(QUIET);
            run();
            times.extend((0..n).map(|_| run()));
        }
    }
    times.into_iter().map(median).collect()
}

fn bare(name: &str, inputs: &[Tensor], threads: usize, gpu: bool) -> Side<'static> {
    let mut builder = ort::session::Session::builder(onnx::environment().unwrap())
        .unwrap()
        .with_intra_threads(threads)
        .unwrap()
        .with_inter_threads(1)
        .unwrap();
    if gpu {
        // As jig's sessions choose convolutions (cuDNN's heuristics), so that the ratio is the path's alone.
        let cuda = ort::ep::CUDA::default().with_conv_algorithm_search(ort::ep::cuda::ConvAlgorithmSearch::Heuristic);
        builder = builder.with_execution_providers([cuda.build().error_on_failure()]).unwrap();
    }
    let mut session = builder.commit_from_file(model_path(name)).unwrap();
    let names: Vec<String> = session.inputs().iter().map(|i| i.name().to_string()).collect();
    let inputs = inputs.to_vec();
    Box::new(move || {
        let feed: Vec<(&str, ort::session::SessionInputValue)> =
            names.iter().zip(&inputs).map(|(n, t)| (n.as_str(), ort_view(t))).collect();
        let started = Instant::now();
        let outputs = session.run(feed).unwrap();
        let elapsed = started.elapsed();
        drop(outputs);
        elapsed
    })
}

/// An ONNX Runtime tensor over `tensor`'s bytes.
fn ort_view(tensor: &Tensor) -> ort::session::SessionInputValue<'_> {
    let shape: Vec<i64> = tensor.shape().iter().map(|&d| d as i64).collect();
    let data = tensor.data();
    match tensor.dtype() {
        DType::F32 => {
            ort::value::TensorRef::from_array_view((shape, bytemuck::cast_slice::<u8, f32>(data))).unwrap().into()
        }
        DType::I64 => {
            ort::value::TensorRef::from_array_view((shape, bytemuck::cast_slice::<u8, i64>(data))).unwrap().into()
        }
        other => panic!("the bench feeds f32 and i64 inputs, not {other:?}"),
    }
}

/// Bare ONNX Runtime with the CUDA provider in a child process (this bench again, `BENCH_BARE=model:batch`)
/// that is a client of `segment`'s MPS daemon with its share: CUDA decides at its start whether a process is
/// an MPS client, so this one's own sessions cannot be.
fn bare_under_mps(name: &str, b: u64, threads: usize, segment: &Segment) -> Duration {
    let devices = Devices::discover();
    let device = devices.first_device(segment).unwrap();
    let bound = devices.bind(segment, &device).unwrap();
    let _daemon = MpsDaemon::ensure(&bound.device).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--bench")
        .envs(bound.env())
        .env("BENCH_BARE", format!("{name}:{b}"))
        .env("BENCH_THREADS", threads.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ns = stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("bare run under MPS failed: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    Duration::from_nanos(ns)
}

/// Inputs of `b` rows for the bench model `name`.
fn inputs(name: &str, b: u64) -> Vec<Tensor> {
    let item: &[u64] = match name {
        "add" | "ppocr-det" => &[3, 640, 640],
        "ppocr-rec" => &[3, 48, 320],
        other => panic!("unknown bench model {other}"),
    };
    let probe = jig_model_host::onnx::Model::load(name, &model_path(name), &SessionOptions::default()).unwrap();
    let sample = [SampleInput { shape: Some(item.to_vec()), values: None }];
    sample_inputs(name, probe.inputs(), &sample, b).unwrap()
}

/// The `jig` binary, whose `worker` subcommand serves GPU segments.
fn jig() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_jig"))
}

/// What starts instances on `segment`: in this process for CPU cores, in a `jig worker` for a GPU.
fn launcher() -> Launcher {
    Launcher::new(Devices::discover(), Some(WorkerCommand { program: jig(), args: vec!["worker".into()] }))
}

/// The bench times the path, not the drop policy: its requests wait as long as they must. A stall (seen once:
/// 33 ms before a request at an idle instance was picked up, just after the detector's b = 64 sessions had freed
/// their memory) is then a slow sample, not a request dropped as stale that ends the run.
fn patient(max_batch: u64) -> BatchPolicy {
    BatchPolicy { max_batch, staleness: Duration::from_secs(60), ..BatchPolicy::default() }
}

fn in_process(name: &str, inputs: &[Tensor], b: u64, segment: &Segment) -> Side<'static> {
    let config = InstanceConfig { policy: patient(b), ..InstanceConfig::new(format!("{name}@{segment}")) };
    let placement = Placement::new(*segment);
    let instance = launcher().start_instance(config, name, &model_path(name), placement).unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let inputs = inputs.to_vec();
    Box::new(move || {
        let request = inputs.to_vec();
        let started = Instant::now();
        let outputs = tokio.block_on(instance.infer(request, Instant::now() + Duration::from_secs(600))).unwrap();
        let elapsed = started.elapsed();
        drop(outputs);
        elapsed
    })
}

/// `b` requests of one row each, placed in turn and sent at once: the batcher waits for all of them and runs them
/// as one batch, a view of their rows. The instance comes back too, for [`where_stacked_time_went`].
fn stacked(name: &str, inputs: &[Tensor], b: u64, segment: &Segment) -> (Side<'static>, Arc<Instance>) {
    let policy = BatchPolicy { max_wait: Duration::from_secs(1), ..patient(b) };
    let config = InstanceConfig { policy, ..InstanceConfig::new(format!("{name}@{segment}")) };
    let placement = Placement::new(*segment);
    let instance = Arc::new(launcher().start_instance(config, name, &model_path(name), placement).unwrap());
    // Each request's row placed by the instance, in turn, as a function's `infer` places it (`Pool::place`).
    let requests: Vec<Vec<Tensor>> = (0..b as usize)
        .map(|r| {
            let rows: Vec<&[u8]> = inputs
                .iter()
                .map(|t| {
                    let row = t.data().len() / b as usize;
                    &t.data()[r * row..(r + 1) * row]
                })
                .collect();
            let placed = instance.place(&rows).expect("memory to place a request in");
            inputs
                .iter()
                .zip(placed)
                .map(|(t, data)| Tensor::new(t.dtype(), [&[1], &t.shape()[1..]].concat(), data).unwrap())
                .collect()
        })
        .collect();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let counted = instance.clone();
    let side: Side<'static> = Box::new(move || {
        let deadline = Instant::now() + Duration::from_secs(600);
        let started = Instant::now();
        let outputs = tokio.block_on(async {
            let mut calls = tokio::task::JoinSet::new();
            for request in &requests {
                let (instance, request) = (instance.clone(), request.clone());
                calls.spawn(async move { instance.infer(request, deadline).await.unwrap() });
            }
            calls.join_all().await
        });
        let elapsed = started.elapsed();
        drop(outputs);
        elapsed
    });
    (side, counted)
}

/// Where the stacked side's time went, from its instance's counters: batches and rows a run (one batch of `b`
/// rows is the intent), and a batch's mean time stacking, executing and splitting, against the run's median
/// `wall`. Time outside the batch is the requests' way in and out (the GPU-only cliff of BENCHMARKS.md, det at
/// b = 64 on an H200, is to be placed by this line).
fn where_stacked_time_went(instance: &Instance, b: u64, wall: Duration) -> String {
    let stats = instance.stats();
    let get = |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed) as f64;
    let (requests, batches, rows) = (get(&stats.answered).max(1.0), get(&stats.batches).max(1.0), get(&stats.rows));
    let phase_ms = |counter| get(counter) / requests / 1e6;
    let (stack, execute, split) = (phase_ms(&stats.input_ns), phase_ms(&stats.execute_ns), phase_ms(&stats.output_ns));
    let batch_ms = get(&stats.busy_ns) / batches / 1e6;
    let runs = requests / b as f64;
    format!(
        "{:.2} batches a run of {:.1} rows; a batch {batch_ms:.2} ms: stack {stack:.2}, execute {execute:.2}, split \
         {split:.2}; the run's median {:.2} ms",
        batches / runs,
        rows / batches,
        wall.as_secs_f64() * 1e3
    )
}

/// A worker (on GPU 0 for `gpu`) running the batch from its shared memory, and copying the batch in.
fn worker(name: &str, inputs: &[Tensor], threads: usize, gpu: bool) -> (Side<'static>, Side<'static>) {
    let options = SessionOptions { threads, cuda: gpu.then_some((0, None)) };
    let spec = WorkerSpec::new(jig(), format!("{name}@worker"), name, model_path(name), options);
    let worker = Worker::start(WorkerSpec { args: vec!["worker".into()], ..spec }).unwrap();
    let shared: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            let mut buffer = worker.buffer(t.data().len()).unwrap();
            buffer.as_mut_slice().copy_from_slice(t.data());
            Tensor::new(t.dtype(), t.shape().to_vec(), buffer.freeze()).unwrap()
        })
        .collect();
    let worker = Arc::new(worker);
    let time = |batch: Vec<Tensor>| -> Side<'static> {
        let worker = worker.clone();
        Box::new(move || {
            let started = Instant::now();
            let outputs = worker.run(&batch).unwrap();
            let elapsed = started.elapsed();
            drop(outputs);
            elapsed
        })
    };
    (time(shared), time(inputs.to_vec()))
}

/// `infer` calls in one invocation of [`from_glue`].
const GLUE_CALLS: u32 = 10;

/// The glue's end of the path: `jig_probe` (the runtime's test guest) calling `infer` [`GLUE_CALLS`] times in
/// one invocation with a b×3×640×640 f32 image (its output, as large, lowered back into the guest) on the `add`
/// model, served as a GPU segment's slots are, by an instance whose batches run in a `jig worker` (on a CPU
/// segment, a worker on the CPU). Its input is either **lifted** into the runtime's memory and copied into the
/// worker's by the batch, or **placed** there straight from the guest's memory (`ModelHost::place`, as
/// deployments serve it). On a CPU segment a third side is the instance as a deployment serves that segment,
/// **in process**. Median time per call of each, measured in turns.
fn from_glue(b: u64, segment: &Segment, threads: usize) -> Vec<Duration> {
    use jig_app::ModelSlots;
    use jig_model_host::pool::Pool;
    use jig_runtime::models::{BoxFuture, InferError, InferRequest, ModelHost};
    use jig_runtime::{FunctionLimits, FunctionOptions, Runtime, RuntimeConfig};

    /// The slots with nothing placed: the runtime lifts every input into memory of its own.
    struct Lifted(Arc<ModelSlots>);
    impl ModelHost for Lifted {
        fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
            self.0.infer(request)
        }
    }

    let config = InstanceConfig { policy: patient(1), ..InstanceConfig::new(format!("add@{segment} from glue")) };
    let instance = if segment.is_gpu() {
        launcher().start_instance(config, "add", &model_path("add"), Placement::new(*segment)).unwrap()
    } else {
        let options = SessionOptions { threads, cuda: None };
        let spec = WorkerSpec::new(jig(), config.name.clone(), "add", model_path("add"), options);
        let spec = WorkerSpec { args: vec!["worker".into()], ..spec };
        Instance::start(config, move || Worker::start(spec).map_err(Into::into)).unwrap()
    };
    let slots_of = |instance: Instance| {
        let mut slots = ModelSlots::new();
        slots.insert("model", Arc::new(Pool::new(vec![(Arc::new(instance), 1.0)])));
        Arc::new(slots)
    };
    let slots = slots_of(instance);
    let runtime = Runtime::new(RuntimeConfig { max_invocations: 4, ..RuntimeConfig::default() }).unwrap();
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/wasm32-wasip2/release/jig_probe.wasm");
    let payload = serde_json::json!({"op": "infer", "slot": "model", "count": GLUE_CALLS, "shape": [b, 3, 640, 640]});
    let payload = Arc::new(serde_json::to_vec(&payload).unwrap());
    let tokio = Arc::new(tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap());
    let side = |models: Arc<dyn ModelHost>| -> Side<'static> {
        // The guest holds its input, an output and the SDK's copy of the payload at once.
        let limits = FunctionLimits { memory: 512 << 20, ..FunctionLimits::default() };
        let options = FunctionOptions { models, limits, ..FunctionOptions::default() };
        let probe = runtime
            .load_file("probe", &wasm, options)
            .unwrap_or_else(|e| panic!("{e}; build the guests with `make functions`"));
        let (tokio, payload) = (tokio.clone(), payload.clone());
        Box::new(move || {
            let started = Instant::now();
            tokio.block_on(probe.invoke(&payload, None)).unwrap();
            started.elapsed() / GLUE_CALLS
        })
    };
    let mut sides = vec![side(Arc::new(Lifted(slots.clone()))), side(slots)];
    if !segment.is_gpu() {
        let name = format!("add@{segment} in process from glue");
        let config = InstanceConfig { policy: patient(1), ..InstanceConfig::new(name) };
        let placement = Placement::new(*segment);
        sides.push(side(slots_of(launcher().start_instance(config, "add", &model_path("add"), placement).unwrap())));
    }
    let mut sides: Vec<&mut dyn FnMut() -> Duration> = sides.iter_mut().map(|s| &mut **s as _).collect();
    measure(&mut sides)
}

fn list(var: &str) -> Option<Vec<String>> {
    std::env::var(var).ok().map(|v| v.split(',').map(str::to_owned).collect())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to run quickly.
    }
    let threads: usize = std::env::var("BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let models = list("BENCH_MODELS").unwrap_or_else(|| ["add", "ppocr-det", "ppocr-rec"].map(String::from).to_vec());
    let batches: Option<Vec<u64>> = list("BENCH_BATCHES").map(|b| b.iter().filter_map(|b| b.parse().ok()).collect());
    if let Ok(job) = std::env::var("BENCH_BARE") {
        let (name, b) = job.split_once(':').expect("BENCH_BARE=model:batch");
        let b = b.parse().expect("BENCH_BARE's batch");
        println!("{}", measure(&mut [&mut *bare(name, &inputs(name, b), threads, true)])[0].as_nanos());
        return;
    }
    let segment: Segment = match std::env::var("BENCH_SEGMENT") {
        Ok(s) => s.parse().unwrap_or_else(|e| panic!("BENCH_SEGMENT: {e}")),
        Err(_) => Segment::Cpu { cores: threads as u32 },
    };
    let gpu = segment.is_gpu();
    println!(
        "tensor path on {segment} vs bare ONNX Runtime ({}), {threads} intra-op threads; median ms per batch, \
         ratio bare/path",
        if gpu { "CUDA provider, host tensors" } else { "CPU" }
    );
    println!(
        "{:<10} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "model",
        "batch",
        "MB each",
        "bare",
        "in proc",
        "stacked",
        "worker",
        "+copy in",
        "in proc",
        "stacked",
        "worker",
        "+copy in"
    );
    for name in &models {
        let default_batches: &[u64] = match name.as_str() {
            "add" => &[1, 2, 4, 8, 16, 32, 64],
            "ppocr-det" if gpu => &[1, 8, 64],
            "ppocr-det" => &[1, 8],
            "ppocr-rec" => &[1, 16, 32],
            other => panic!("unknown bench model {other}"),
        };
        for &b in batches.as_deref().unwrap_or(default_batches) {
            let inputs = inputs(name, b);
            let mb = inputs.iter().map(|t| t.data().len()).sum::<usize>() as f64 / 1e6;
            // Each path takes turns with bare ONNX Runtime alone, the other paths' sessions closed or idle.
            let mut reference = bare(name, &inputs, threads, gpu);
            let mut against = |mut path: Side<'_>| {
                let times = measure(&mut [&mut *reference, &mut *path]);
                (times[0], times[1])
            };
            let (bare_time, local) = against(in_process(name, &inputs, b, &segment));
            let (remote, copied) = worker(name, &inputs, threads, gpu);
            let (remote, copied) = (against(remote), against(copied));
            let (together, stacked_instance) = if b > 1 {
                let (side, instance) = stacked(name, &inputs, b, &segment);
                (against(side), Some(instance))
            } else {
                ((bare_time, local), None)
            };
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let ratio = |(bare, path): (Duration, Duration)| ms(bare) / ms(path);
            println!(
                "{name:<10} {b:>5} {mb:>8.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
                ms(bare_time),
                ms(local),
                ms(together.1),
                ms(remote.1),
                ms(copied.1),
                ratio((bare_time, local)),
                ratio(together),
                ratio(remote),
                ratio(copied)
            );
            if let Some(instance) = stacked_instance {
                println!("{name:<10} {b:>5} stacked: {}", where_stacked_time_went(&instance, b, together.1));
            }
            if segment.mps_percentage().is_some() {
                let shared = bare_under_mps(name, b, threads, &segment);
                println!(
                    "{name:<10} {b:>5} bare, MPS {:>9.2}: ratio to it in process {:.2}, stacked {:.2}",
                    ms(shared),
                    ms(shared) / ms(local),
                    ms(shared) / ms(together.1)
                );
            }
        }
    }
    if models.iter().any(|m| m == "add") {
        println!(
            "from glue: jig_probe's infer of a b×3×640×640 f32 image into a worker's instance on {segment} (lifted, \
             placed) and, on CPU, an instance in process; median ms per call; ratio lifted/placed"
        );
        println!(
            "{:<10} {:>5} {:>8} {:>9} {:>9} {:>9} {:>8}",
            "model", "batch", "MB each", "lifted", "placed", "in proc", "ratio"
        );
        for &b in batches.as_deref().unwrap_or(&[1, 8]).iter().filter(|&&b| b <= 8) {
            let times = from_glue(b, &segment, threads);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let mb = (b * 3 * 640 * 640 * 4) as f64 / 1e6;
            let local = times.get(2).map_or("–".to_string(), |&t| format!("{:.2}", ms(t)));
            println!(
                "{:<10} {b:>5} {mb:>8.1} {:>9.2} {:>9.2} {local:>9} {:>8.2}",
                "add",
                ms(times[0]),
                ms(times[1]),
                ms(times[0]) / ms(times[1])
            );
        }
    }
}
