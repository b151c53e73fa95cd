//! Worker processes (`jig_model_host::worker`) on CPU sessions with the models `make setup` generates, each
//! started as jig starts them: `jig worker --socket PATH`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use jig_model_host::onnx::{Model, ModelError, SessionOptions};
use jig_model_host::worker::{Worker, WorkerError, WorkerSpec};
use jig_model_host::{DType, Tensor};
use jig_test_support::{cpu_ticks, f32s, i64s, minor_faults, mixed_two_rows, model, resident_bytes};

fn spec(instance: &str, model: &str, path: PathBuf) -> WorkerSpec {
    let spec = WorkerSpec::new(env!("CARGO_BIN_EXE_jig"), instance, model, path, SessionOptions::default());
    WorkerSpec { args: vec!["worker".into()], ..spec }
}

fn start(instance: &str, model: &str) -> Worker {
    Worker::start(spec(instance, model, jig_test_support::model(model))).unwrap()
}

fn mixed_batch(rows: usize) -> (Vec<Tensor>, Vec<f32>) {
    let x: Vec<f32> = (0..rows * 4).map(|i| i as f32 * 0.5).collect();
    let ids: Vec<i64> = (0..rows * 4).map(|i| (i % 7) as i64 - 3).collect();
    let want = x.iter().zip(&ids).map(|(x, id)| x * *id as f32).collect();
    let inputs = vec![Tensor::from_f32(vec![rows as u64, 4], &x).unwrap(), i64s(vec![rows as u64, 4], &ids)];
    (inputs, want)
}

/// Copies of `inputs` in memory `worker` reads in place.
fn in_shared_memory(worker: &Worker, inputs: &[Tensor]) -> Vec<Tensor> {
    inputs
        .iter()
        .map(|t| {
            let mut buffer = worker.buffer(t.data().len()).expect("a live worker lends memory");
            buffer.as_mut_slice().copy_from_slice(t.data());
            Tensor::new(t.dtype(), t.shape().to_vec(), buffer.freeze()).unwrap()
        })
        .collect()
}

fn kill(pid: u32) {
    signal(pid, libc::SIGKILL);
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: sending a signal has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0, "signal {signal} to {pid}");
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

#[test]
fn runs_a_model_with_exact_results() {
    fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<Worker>();

    let worker = start("cpu-0/mixed", "mixed");
    assert_eq!(worker.inputs().len(), 2);
    assert_eq!(worker.inputs()[1].dtype, DType::I64);
    assert_eq!(worker.outputs()[0].name, "y");
    assert!(worker.pid().is_some_and(|p| p != std::process::id()));

    let (inputs, want) = mixed_two_rows();
    let out = worker.run(&inputs).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape(), &[2, 4]);
    assert_eq!(f32s(&out[0]), want);

    // Large and small batches, each shape first seen (outputs placed after the run) and then repeated (written
    // in place), with earlier outputs still held while later batches reuse the pool's other regions.
    let mut held = Vec::new();
    for rows in [100_000, 3, 250_000, 1, 250_000, 3] {
        let (inputs, want) = mixed_batch(rows);
        let out = worker.run(&inputs).unwrap();
        assert_eq!(out[0].shape(), &[rows as u64, 4]);
        assert_eq!(f32s(&out[0]), want, "{rows} rows");
        held.push((out, want));
    }
    for (out, want) in &held {
        assert_eq!(&f32s(&out[0]), want, "an output keeps its bytes while others are written");
    }
    assert_eq!(worker.restarts(), 0);
}

/// Either side sleeps on the socket once it has polled long enough for the other's frame (`worker::mailbox`):
/// the parent through an Add batch of 16 images (milliseconds, past the most it polls for), the worker through
/// the pauses between batches; each is woken by the other's doorbell, and short batches between them are
/// answered while the parent polls.
#[test]
fn answers_and_requests_that_come_after_a_side_sleeps_wake_it() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let worker = start("cpu-0/add", "add");
        for (turn, rows) in [16u64, 1, 16, 2, 16].into_iter().enumerate() {
            let n = rows as usize * 3 * 640 * 640;
            let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 + turn as f32).collect();
            let outputs = worker.run(&[Tensor::from_f32(vec![rows, 3, 640, 640], &x).unwrap()]).unwrap();
            let want: Vec<f32> = x.iter().map(|x| x + 1.0).collect();
            assert!(f32s(&outputs[0]) == want, "turn {turn}: Add of {rows} images answered wrong values");
            std::thread::sleep(Duration::from_millis(5));
        }
        done.send(worker.restarts()).unwrap();
    });
    // A doorbell that went missing would leave a side asleep for good: fail instead of hanging.
    let restarts = finished.recv_timeout(Duration::from_secs(60)).expect("a side slept through its doorbell");
    assert_eq!(restarts, 0);
}

#[test]
fn inputs_in_the_workers_memory_are_read_in_place_and_outputs_outlive_the_worker() {
    let worker = start("cpu-0/mixed", "mixed");
    let (inputs, want) = mixed_batch(1000);
    let shared = in_shared_memory(&worker, &inputs);
    let first = worker.run(&shared).unwrap();
    let second = worker.run(&shared).unwrap();
    assert_eq!(f32s(&first[0]), want);
    assert_eq!(f32s(&second[0]), want);
    assert_ne!(first[0].data().as_ptr(), second[0].data().as_ptr(), "each batch's outputs have their own memory");
    drop(worker);
    assert_eq!(f32s(&second[0]), want, "outputs stay readable after the worker is gone");
}

/// Once warm, a worker's batch touches no fresh memory: it reads the inputs where they lie in its regions and
/// ONNX Runtime writes the outputs into regions it already mapped, whether the batch was placed there or the
/// parent copied it in. A batch in fresh memory would fault on each of its 9 600 pages.
#[test]
fn a_warm_worker_runs_each_batch_in_memory_it_already_has() {
    let worker = start("cpu-0/add", "add");
    let pid = worker.pid().unwrap();
    let x: Vec<f32> = (0..8 * 3 * 640 * 640).map(|i| (i % 97) as f32).collect();
    let input = [Tensor::from_f32(vec![8, 3, 640, 640], &x).unwrap()];
    let pages = (x.len() * 4 / 4096) as u64;
    for placed in [true, false] {
        let mut faults = Vec::new();
        for turn in 0..13 {
            let inputs = if placed { in_shared_memory(&worker, &input) } else { input.to_vec() };
            let before = minor_faults(pid);
            let out = worker.run(&inputs).unwrap();
            // Three turns to warm up.
            if turn >= 3 {
                faults.push(minor_faults(pid).saturating_sub(before));
            }
            let y = out[0].data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap()));
            assert!(y.zip(&x).all(|(y, x)| y == x + 1.0), "turn {turn}");
        }
        // The median batch: the system may unmap a page now and then (NUMA balancing, reclaim).
        faults.sort();
        assert!(
            faults[5] < pages / 100,
            "placed {placed}: page faults of 10 warm batches {faults:?}, {pages} pages each"
        );
    }
    assert_eq!(worker.restarts(), 0);
}

/// A busy instance's batches lie in the few regions its worker maps, taken in turns and rewritten between
/// batches; the worker runs again what it bound to the same regions. Each answer must be its own batch's.
#[test]
fn batches_rewritten_in_the_same_regions_are_each_answered_anew() {
    let worker = start("cpu-0/mixed", "mixed");
    let mut addresses = std::collections::HashSet::new();
    for turn in 0..12usize {
        let rows = 1000;
        let x: Vec<f32> = (0..rows * 4).map(|i| (i + turn) as f32 * 0.5).collect();
        let ids: Vec<i64> = (0..rows * 4).map(|i| ((i + turn) % 7) as i64 - 3).collect();
        let want: Vec<f32> = x.iter().zip(&ids).map(|(x, id)| x * *id as f32).collect();
        let inputs = [Tensor::from_f32(vec![rows as u64, 4], &x).unwrap(), i64s(vec![rows as u64, 4], &ids)];
        let shared = in_shared_memory(&worker, &inputs);
        addresses.extend(shared.iter().map(|t| t.data().as_ptr() as usize));
        let out = worker.run(&shared).unwrap();
        assert_eq!(f32s(&out[0]), want, "turn {turn}");
        addresses.insert(out[0].data().as_ptr() as usize);
    }
    assert!(addresses.len() <= 4, "the batches took turns over a few regions, not {} of them", addresses.len());
    assert_eq!(worker.restarts(), 0);
}

#[test]
fn a_corrupt_model_is_a_load_error_naming_model_and_instance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.onnx");
    std::fs::write(&path, b"this is not a protobuf").unwrap();
    let err = Worker::start(spec("mig-1g.10gb/0", "broken", path)).unwrap_err();
    assert!(matches!(err, WorkerError::Load { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("`broken`") && text.contains("mig-1g.10gb/0") && text.contains("not a valid ONNX model"),
        "{text}"
    );

    let err = Worker::start(spec("cpu-1", "absent", dir.path().join("absent.onnx"))).unwrap_err().to_string();
    assert!(err.contains("`absent`") && err.contains("cannot read"), "{err}");

    let mut bad = spec("cpu-2", "mixed", model("mixed"));
    bad.program = dir.path().join("no-such-worker");
    let err = Worker::start(bad).unwrap_err();
    assert!(matches!(err, WorkerError::Spawn { .. }) && err.to_string().contains("cpu-2"), "{err}");
}

#[test]
fn a_program_that_never_connects_times_out() {
    let mut never = spec("cpu-3", "mixed", model("mixed"));
    never.program = "sh".into();
    never.args = vec!["-c".into(), "exec sleep 30".into(), "sh".into()];
    never.load_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let err = Worker::start(never).unwrap_err();
    assert!(matches!(err, WorkerError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("cpu-3"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_peer_speaking_garbage_is_an_error_not_a_panic() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to play a broken worker");
        return;
    }
    let mut broken = spec("cpu-4", "mixed", model("mixed"));
    broken.program = "python3".into();
    let script = "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[2]); s.recv(65536); \
                  s.sendall(b'\\x05\\x00\\x00\\x00\\xff\\xff\\xff\\xff\\xff'); s.recv(1)";
    broken.args = vec!["-c".into(), script.into()];
    let err = Worker::start(broken).unwrap_err();
    assert!(matches!(err, WorkerError::Load { .. }), "{err:?}");
    assert!(err.to_string().contains("malformed"), "{err}");
}

#[test]
fn a_mismatched_input_is_refused_naming_the_input() {
    let worker = start("cpu-0/mixed", "mixed");
    let x = Tensor::from_f32(vec![1, 4], &[1.0; 4]).unwrap();
    let err = worker.run(&[x.clone(), x.clone()]).unwrap_err();
    assert!(matches!(err, WorkerError::Model { source: ModelError::Input { .. }, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("`ids`") && text.contains("mixed") && text.contains("cpu-0/mixed"), "{text}");
    assert!(matches!(ModelError::from(err), ModelError::Input { .. }));

    let err = worker.run(&[x]).unwrap_err().to_string();
    assert!(err.contains("expects 2 inputs"), "{err}");
    // The worker was never involved, and still serves.
    let (inputs, want) = mixed_batch(2);
    assert_eq!(f32s(&worker.run(&inputs).unwrap()[0]), want);
    assert_eq!(worker.restarts(), 0);
}

#[test]
fn a_worker_killed_between_batches_fails_the_next_and_serves_the_one_after() {
    let worker = start("cpu-0/mixed", "mixed");
    let (inputs, want) = mixed_batch(8);
    worker.run(&inputs).unwrap();
    let lent = worker.kept_buffer(16).expect("the batch's memory is free again").freeze();
    assert!(worker.holds(&lent));
    let pid = worker.pid().unwrap();
    kill(pid);
    let err = worker.run(&inputs).unwrap_err();
    assert!(matches!(err, WorkerError::Died { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("cpu-0/mixed") && text.contains("signal 9"), "{text}");
    assert_eq!(f32s(&worker.run(&inputs).unwrap()[0]), want);
    assert_eq!(worker.restarts(), 1);
    assert_ne!(worker.pid(), Some(pid));
    assert!(!worker.holds(&lent), "memory lent for the dead process is not the new one's");
    assert!(worker.kept_buffer(16).is_some(), "the new process's, free after its batch");
}

#[test]
fn a_worker_that_stops_answering_is_killed_and_replaced() {
    let mut hangs = spec("cpu-0/mixed", "mixed", model("mixed"));
    hangs.batch_timeout = Duration::from_secs(1);
    let worker = std::sync::Arc::new(Worker::start(hangs).unwrap());
    let (inputs, want) = mixed_batch(8);
    assert_eq!(f32s(&worker.run(&inputs).unwrap()[0]), want);
    // Stopped, the process lives on and holds its socket open, as a worker stuck in a GPU call does.
    let pid = worker.pid().unwrap();
    signal(pid, libc::SIGSTOP);
    let (sent, answer) = std::sync::mpsc::channel();
    let (waiting, batch) = (worker.clone(), inputs.clone());
    std::thread::spawn(move || sent.send(waiting.run(&batch)));
    let err = answer.recv_timeout(Duration::from_secs(20)).expect("the batch to a stopped worker never failed");
    let err = err.unwrap_err();
    assert!(matches!(err, WorkerError::Hung { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("cpu-0/mixed") && text.contains("did not answer the batch within 1s"), "{text}");
    assert!(!alive(pid), "the hung worker {pid} was not killed");
    assert_eq!(f32s(&worker.run(&inputs).unwrap()[0]), want, "a fresh worker serves the next batch");
    assert_eq!(worker.restarts(), 1);
}

#[test]
fn a_worker_killed_mid_batch_fails_that_batch_and_restarts() {
    let worker = start("cpu-0/mlp", "mlp");
    // Large enough that the batch takes far longer than the delay before the kill.
    let rows = 400_000u64;
    let x = Tensor::from_f32(vec![rows, 64], &vec![0.25; rows as usize * 64]).unwrap();
    let pid = worker.pid().unwrap();

    let idle = cpu_ticks(pid);
    let started = Instant::now();
    let killer = std::thread::spawn(move || {
        // The worker uses no CPU until the batch reaches it; a few ticks of CPU mean it is inside the batch.
        while cpu_ticks(pid) < idle + 3 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        kill(pid);
        started.elapsed()
    });
    let err = worker.run(std::slice::from_ref(&x)).unwrap_err();
    let failed_after = started.elapsed();
    let killed_after = killer.join().unwrap();
    assert!(matches!(err, WorkerError::Died { .. }), "{err:?}");
    assert!(err.to_string().contains("SIGKILL"), "{err}");
    assert!(
        failed_after < killed_after + Duration::from_secs(1),
        "killed after {killed_after:?}, but the batch failed only after {failed_after:?}"
    );

    let small = Tensor::from_f32(vec![2, 64], &[0.25; 128]).unwrap();
    let out = worker.run(&[small]).unwrap();
    assert_eq!(out[0].shape(), &[2, 16]);
    assert_eq!(worker.restarts(), 1);
    let in_process = Model::load("mlp", &model("mlp"), &SessionOptions::default()).unwrap();
    let want = in_process.run(&[Tensor::from_f32(vec![2, 64], &[0.25; 128]).unwrap()]).unwrap();
    assert_eq!(out, want, "a worker computes what the model computes in-process");
}

#[test]
fn two_workers_are_independent() {
    let a = start("cpu-0/mixed", "mixed");
    let b = start("cpu-1/mixed", "mixed");
    let (inputs, want) = mixed_batch(16);
    kill(a.pid().unwrap());
    assert_eq!(f32s(&b.run(&inputs).unwrap()[0]), want);
    assert!(matches!(a.run(&inputs), Err(WorkerError::Died { .. })));
    assert_eq!(f32s(&b.run(&inputs).unwrap()[0]), want);
    assert_eq!(f32s(&a.run(&inputs).unwrap()[0]), want);
    assert_eq!((a.restarts(), b.restarts()), (1, 0));
}

#[test]
fn an_instance_counts_its_workers_restarts() {
    use jig_model_host::instance::{Instance, InstanceConfig};
    let worker = start("cpu-0/mixed", "mixed");
    let pid = worker.pid().unwrap();
    let instance = Instance::start(InstanceConfig::new("mixed@worker"), move || Ok(worker)).unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let infer = |inputs: Vec<Tensor>| tokio.block_on(instance.infer(inputs, Instant::now() + Duration::from_secs(30)));
    let (inputs, want) = mixed_batch(4);
    assert_eq!(f32s(&infer(inputs.clone()).unwrap()[0]), want);
    assert_eq!(instance.restarts(), 0);
    kill(pid);
    assert!(infer(inputs.clone()).is_err(), "the batch the worker died in fails");
    assert_eq!(f32s(&infer(inputs).unwrap()[0]), want, "the next batch runs in a fresh process");
    assert_eq!(instance.restarts(), 1);
}

/// A worker's CPU time is its whole process's, read while it runs, and grows with the batches it runs: what a
/// deployment counts against the gateway's cores for a GPU instance. An instance in process has none of its own.
#[test]
fn an_instance_in_a_worker_reports_its_process_cpu_time() {
    use jig_model_host::instance::{Instance, InstanceConfig};
    let worker = start("cpu-0/mixed", "mixed");
    let instance = Instance::start(InstanceConfig::new("mixed@worker"), move || Ok(worker)).unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let loaded = instance.process_cpu().expect("a live worker's CPU time");
    let (inputs, want) = mixed_batch(250_000);
    let started = Instant::now();
    for _ in 0..40 {
        let outputs = tokio.block_on(instance.infer(inputs.clone(), Instant::now() + Duration::from_secs(30))).unwrap();
        assert_eq!(f32s(&outputs[0])[..8], want[..8]);
    }
    let spent = instance.process_cpu().unwrap() - loaded;
    assert!(spent >= Duration::from_millis(10), "40 batches of a million values cost the worker {spent:?}");
    assert!(spent <= started.elapsed() * 4, "{spent:?} in {:?}", started.elapsed());

    let model = Model::load("mixed", &jig_test_support::model("mixed"), &SessionOptions::default()).unwrap();
    let in_process = Instance::start(InstanceConfig::new("mixed@cpu"), move || Ok(model)).unwrap();
    assert_eq!(in_process.process_cpu(), None);
}

/// Requests placed in turn in a worker's instance lie end to end in its shared memory, each input in its own
/// region, and run as one batch the worker reads where it lies: exact answers, each request its own rows.
#[test]
fn requests_placed_in_turn_in_a_worker_s_memory_run_as_one_batch() {
    use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
    let worker = start("cpu-0/mixed", "mixed");
    let policy = BatchPolicy { max_batch: 4, ..BatchPolicy::default() };
    let config = InstanceConfig { policy, ..InstanceConfig::new("mixed@worker placed") };
    let instance = Instance::start(config, move || Ok(worker)).unwrap();
    let requests: Vec<Vec<Tensor>> = (0..4)
        .map(|k| {
            let x: Vec<f32> = (0..4).map(|i| (k * 4 + i) as f32).collect();
            let ids: Vec<i64> = vec![k as i64 + 1; 4];
            let inputs = [Tensor::from_f32(vec![1, 4], &x).unwrap(), i64s(vec![1, 4], &ids)];
            let bytes: Vec<&[u8]> = inputs.iter().map(Tensor::data).collect();
            let placed = instance.place(&bytes).expect("the worker lends memory");
            inputs
                .iter()
                .zip(placed)
                .map(|(t, data)| Tensor::new(t.dtype(), t.shape().to_vec(), data).unwrap())
                .collect()
        })
        .collect();
    assert!(requests.iter().flatten().all(|t| instance.holds(t.data())));
    assert_eq!(requests[0][0].data().as_ptr().wrapping_add(16), requests[1][0].data().as_ptr(), "end to end");
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = tokio.block_on(instance.infer_together(requests, Instant::now() + Duration::from_secs(30))).unwrap();
    for (k, out) in out.iter().enumerate() {
        let want: Vec<f32> = (0..4).map(|i| (k * 4 + i) as f32 * (k + 1) as f32).collect();
        assert_eq!(f32s(&out[0]), want, "request {k}");
    }
    assert_eq!(instance.stats().batches.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// A worker's CPU time keeps what the processes it replaced spent serving: the instance's batch count goes on
/// across a restart, so a CPU time that started again from zero would read each batch's host CPU low.
#[test]
fn a_worker_s_cpu_time_keeps_the_processes_it_replaced() {
    let worker = start("cpu-0/mixed", "mixed");
    let (inputs, want) = mixed_batch(250_000);
    for _ in 0..40 {
        assert_eq!(f32s(&worker.run(&inputs).unwrap()[0])[..8], want[..8]);
    }
    let before = worker.cpu_time().expect("a live worker's CPU time");
    assert!(before >= Duration::from_millis(10), "40 batches of a million values cost the worker {before:?}");
    kill(worker.pid().unwrap());
    assert!(worker.run(&inputs).is_err(), "the batch the worker died in fails");
    assert!(worker.cpu_time().unwrap() >= before, "between the death and the restart");
    assert_eq!(f32s(&worker.run(&inputs).unwrap()[0])[..8], want[..8], "the next batch runs in a fresh process");
    assert_eq!(worker.restarts(), 1);
    let after = worker.cpu_time().unwrap();
    assert!(after >= before, "{after:?} after the restart, {before:?} before");
}

/// Loading a model is the deployment's cost, not the requests': a worker's CPU time starts from the loaded model,
/// where its process has spent tens of milliseconds starting ONNX Runtime and optimising the recognizer's graph
/// (seconds for CUDA's and cuDNN's start on a GPU), which the plan would otherwise charge to its first requests.
#[test]
fn a_worker_counts_its_cpu_time_from_the_loaded_model() {
    let worker = start("cpu-0/ppocr-rec", "ppocr-rec");
    let pid = worker.pid().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    let tick = Duration::from_secs(1) / u32::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap();
    let started = tick * u32::try_from(cpu_ticks(pid)).unwrap();
    assert!(started >= tick * 2, "starting and loading the recognizer cost its process only {started:?}");
    let counted = worker.cpu_time().expect("a live worker's CPU time");
    assert!(counted <= tick, "{counted:?} counted of the {started:?} its process spent loading the model");
}

#[test]
fn dropping_a_worker_ends_its_process() {
    let worker = start("cpu-0/mixed", "mixed");
    let pid = worker.pid().unwrap();
    drop(worker);
    assert!(!alive(pid), "worker {pid} outlived its Worker");
}

/// IPC cost per batch: a tiny batch through a worker against the same model in-process.
/// `cargo test -p jig --release --test worker -- --ignored --nocapture ipc_cost`
#[test]
#[ignore]
fn ipc_cost() {
    const N: usize = 2000;
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let time = |f: &dyn Fn()| {
        for _ in 0..200 {
            f();
        }
        median(
            (0..N)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed()
                })
                .collect(),
        )
    };
    let (inputs, _) = mixed_batch(1);
    let model = Model::load("mixed", &model("mixed"), &SessionOptions::default()).unwrap();
    let worker = start("cpu-0/mixed", "mixed");
    let local = time(&|| {
        model.run(&inputs).unwrap();
    });
    let remote = time(&|| {
        worker.run(&inputs).unwrap();
    });
    println!(
        "mixed [1,4]: in-process {local:?}, worker {remote:?}, IPC cost {:?} per batch (median of {N})",
        remote.saturating_sub(local)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_batches_requests_into_a_worker() {
    use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
    use std::sync::Arc;
    let config = InstanceConfig {
        policy: BatchPolicy { max_batch: 4, max_wait: Duration::from_millis(300), ..BatchPolicy::default() },
        ..InstanceConfig::new("mixed@worker#0")
    };
    let spec = spec("mixed@worker#0", "mixed", model("mixed"));
    let instance = Arc::new(Instance::start(config, move || Worker::start(spec).map_err(Into::into)).unwrap());
    let tasks: Vec<_> = (0..4)
        .map(|k| {
            let instance = instance.clone();
            let x = Tensor::from_f32(vec![1, 4], &[k as f32; 4]).unwrap();
            let ids = i64s(vec![1, 4], &[1, 2, 3, 4]);
            tokio::spawn(async move { instance.infer(vec![x, ids], Instant::now() + Duration::from_secs(30)).await })
        })
        .collect();
    for (k, task) in tasks.into_iter().enumerate() {
        let k = k as f32;
        assert_eq!(f32s(&task.await.unwrap().unwrap()[0]), vec![k, 2.0 * k, 3.0 * k, 4.0 * k]);
    }
    // An idle instance starts its first request at once (it expects no company yet); the others, arriving while
    // it runs, go together when it ends.
    let batches = instance.stats().batches.load(std::sync::atomic::Ordering::Relaxed);
    assert!((1..=2).contains(&batches), "{batches} batches for 4 requests");
}

/// A function's inputs placed by the pool go into shared memory of the worker next in turn (a fresh worker's
/// too: placing makes a region where none is free), and the request runs on that worker, even when the rotation
/// has moved on meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_placed_in_a_workers_memory_runs_on_that_worker() {
    use jig_model_host::instance::{Instance, InstanceConfig};
    use jig_model_host::pool::Pool;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    let instance = |name: &str| {
        let spec = spec(name, "mixed", model("mixed"));
        Arc::new(Instance::start(InstanceConfig::new(name), move || Worker::start(spec).map_err(Into::into)).unwrap())
    };
    let instances = [instance("mixed@worker#0"), instance("mixed@worker#1")];
    let pool = Pool::new(instances.iter().map(|i| (i.clone(), 1.0)).collect());
    let batches = || instances.each_ref().map(|i| i.stats().batches.load(Ordering::Relaxed));
    let deadline = Instant::now() + Duration::from_secs(30);
    let (inputs, _) = mixed_batch(1);
    let placed = pool.place(&inputs.iter().map(Tensor::data).collect::<Vec<_>>()).expect("a fresh worker places");
    assert!(placed.iter().all(|p| instances[0].holds(p)) && !instances[1].holds(&placed[0]));
    drop(placed);
    for call in 0..5 {
        let (inputs, want) = mixed_batch(1 + call);
        let bytes: Vec<&[u8]> = inputs.iter().map(Tensor::data).collect();
        let placed = pool.place(&bytes).expect("workers lend memory");
        let holds = instances.each_ref().map(|i| placed.iter().all(|p| i.holds(p)));
        let next = call % 2;
        assert_eq!(holds, [next == 0, next == 1], "call {call}: placed with the instance next in turn");
        if call == 4 {
            pool.pick(); // another request took this turn meanwhile
        }
        let tensors = inputs.iter().zip(placed).map(|(t, data)| Tensor::new(t.dtype(), t.shape().to_vec(), data));
        let before = batches();
        let outputs = pool.infer(tensors.collect::<Result<_, _>>().unwrap(), deadline).await.unwrap().unwrap();
        assert_eq!(f32s(&outputs[0]), want, "call {call}");
        let mut ran = before;
        ran[next] += 1;
        assert_eq!(batches(), ran, "call {call} ran on the instance holding its inputs");
    }
}

/// Many requests placing and running at once on two workers, in two waves (the first finds little or no free
/// memory, the second the first's, fewer regions than requests): each is placed or lifted as memory allows, and
/// each answer is its own request's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_placed_or_not_are_each_answered_exactly() {
    use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
    use jig_model_host::pool::Pool;
    use std::sync::Arc;
    let instance = |name: &str| {
        let spec = spec(name, "mixed", model("mixed"));
        // Nothing goes stale: 96 requests queue on two instances, longer than the default 20 ms on a busy machine.
        let staleness = Duration::from_secs(60);
        let policy =
            BatchPolicy { max_batch: 4, max_wait: Duration::from_millis(2), staleness, ..BatchPolicy::default() };
        let config = InstanceConfig { policy, ..InstanceConfig::new(name) };
        (Arc::new(Instance::start(config, move || Worker::start(spec).map_err(Into::into)).unwrap()), 1.0)
    };
    let pool = Arc::new(Pool::new(vec![instance("mixed@worker#0"), instance("mixed@worker#1")]));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut placed = Vec::new();
    for wave in 0..2 {
        let tasks: Vec<_> = (0..48)
            .map(|k| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    let x: Vec<f32> = (0..4).map(|i| (wave * 1000 + k * 4 + i) as f32).collect();
                    let inputs = vec![Tensor::from_f32(vec![1, 4], &x).unwrap(), i64s(vec![1, 4], &[1, -2, 3, -4])];
                    let bytes: Vec<&[u8]> = inputs.iter().map(Tensor::data).collect();
                    let (was_placed, inputs) = match pool.place(&bytes) {
                        Some(data) => (true, {
                            let tensors = inputs.iter().zip(data);
                            tensors.map(|(t, data)| Tensor::new(t.dtype(), t.shape().to_vec(), data).unwrap()).collect()
                        }),
                        None => (false, inputs),
                    };
                    let outputs = pool.infer(inputs, deadline).await.unwrap().unwrap();
                    let want: Vec<f32> = x.iter().zip([1.0, -2.0, 3.0, -4.0]).map(|(x, id)| x * id).collect();
                    assert_eq!(f32s(&outputs[0]), want, "wave {wave}, request {k}");
                    was_placed
                })
            })
            .collect();
        let mut count = 0;
        for task in tasks {
            count += task.await.unwrap() as usize;
        }
        placed.push(count);
    }
    assert!(placed[1] > 0, "the first wave's memory, free again, takes some of the second: {placed:?}");
}

/// A worker asked to release memory (its instance went idle) gives back what a large batch grew its session's
/// arena to and the free regions it was sent in, and serves on.
#[test]
fn a_worker_asked_to_release_memory_gives_back_its_arena() {
    // `big`: x [N, 4096] -> y [N, 4096]; a first batch of a shape has ONNX Runtime allocate its output, 64 MiB at
    // N = 4096, in the arena.
    let worker = start("test/big@cpu:1#0", "big");
    let run = |rows: u64| {
        let x = Tensor::new(DType::F32, vec![rows, 4096], vec![0u8; rows as usize * 4096 * 4]).unwrap();
        assert_eq!(worker.run(&[x]).unwrap()[0].shape(), &[rows, 4096]);
    };
    run(2); // the footprint of a light load
    run(4096); // a burst's large batch
    let pid = worker.pid().expect("a live worker");
    let batch = 4096 * 4096 * 4;
    assert!(worker.kept_buffer(batch).is_some(), "the large batch's regions are kept for the next");
    let grown = resident_bytes(pid);
    worker.release_memory().unwrap();
    let released = grown.saturating_sub(resident_bytes(pid));
    assert!(released >= 48 << 20, "released {} MiB of {} MiB resident", released >> 20, grown >> 20);
    assert!(worker.kept_buffer(batch).is_none(), "the free regions went with the release");
    run(2);
    assert_eq!(worker.pid(), Some(pid), "the same process serves on");
}
