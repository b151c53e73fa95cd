//! Model execution benchmarks (`make bench`, or `cargo bench -p jig-model-host --bench model`), each a ratio
//! against a reference measured in the same run, on the same model, batch size and threads:
//!
//! * **path vs bare**: rows per second through the whole in-process path — `Instance::infer` from concurrent
//!   clients → queue → batcher → stacking → ONNX Runtime → split — against a bare `ort` `Session::run` loop
//!   on ready-stacked batches (target ≥ 0.9×). For the PP-OCRv4 recognizer (real, ~10 ms a row) and for a
//!   tiny MLP (~10 µs a batch), where the path's own overhead shows.
//! * **b = 8 vs b = 1**: the recognizer's rows per second at batch 8 against batch 1.
//!
//! Needs the models `make setup` writes into .jig/models.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jig_model_host::instance::{BatchPolicy, InstanceConfig};
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::onnx::{self, Model, SessionOptions};
use jig_model_host::segment::Segment;
use jig_model_host::sweep::{SampleInput, sample_inputs};

fn model_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.jig/models").join(format!("{name}.onnx"))
}

/// Rows per second of a bare `Session::run` loop on batches of `b` rows, for `time`.
fn bare(name: &str, item: &[u64], b: u64, time: Duration) -> f64 {
    let env = onnx::environment().unwrap();
    let mut session = ort::session::Session::builder(env)
        .unwrap()
        .with_intra_threads(1)
        .unwrap()
        .with_inter_threads(1)
        .unwrap()
        .commit_from_file(model_path(name))
        .unwrap();
    let shape: Vec<i64> = std::iter::once(b as i64).chain(item.iter().map(|&d| d as i64)).collect();
    let values: Vec<f32> = (0..shape.iter().product::<i64>()).map(|k| (k % 17) as f32 / 17.0).collect();
    let input_name = session.inputs()[0].name().to_string();
    let mut run = || {
        let input = ort::value::Tensor::from_array((shape.clone(), values.clone())).unwrap();
        session.run(ort::inputs![input_name.as_str() => input]).unwrap();
    };
    run();
    let (started, mut rows) = (Instant::now(), 0);
    while started.elapsed() < time {
        run();
        rows += b;
    }
    rows as f64 / started.elapsed().as_secs_f64()
}

/// Rows per second through an instance with max batch `b`, fed one-row requests by `2b` concurrent clients.
fn through_instance(name: &str, item: &[u64], b: u64, time: Duration) -> f64 {
    // A closed loop keeps a second batch queued behind the running one: nothing is stale here.
    let config = InstanceConfig {
        policy: BatchPolicy {
            max_batch: b,
            max_wait: Duration::from_millis(50),
            staleness: Duration::from_secs(60),
            ..BatchPolicy::default()
        },
        ..InstanceConfig::new(name)
    };
    let one_core = Placement::new(Segment::Cpu { cores: 1 });
    let instance = Arc::new(Launcher::discover().start_instance(config, name, &model_path(name), one_core).unwrap());
    let row =
        sample_inputs(name, instance.inputs(), &[SampleInput { shape: Some(item.to_vec()), values: None }], 1).unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (stop, rows) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    tokio.block_on(async {
        instance.infer(row.clone(), Instant::now() + Duration::from_secs(60)).await.unwrap();
        let started = Instant::now();
        let clients: Vec<_> = (0..2 * b)
            .map(|_| {
                let (instance, row, stop, rows) = (instance.clone(), row.clone(), stop.clone(), rows.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        instance.infer(row.clone(), Instant::now() + Duration::from_secs(60)).await.unwrap();
                        rows.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        tokio::time::sleep(time).await;
        stop.store(true, Ordering::Relaxed);
        let counted = rows.load(Ordering::Relaxed);
        let elapsed = started.elapsed();
        for client in clients {
            client.await.unwrap();
        }
        counted as f64 / elapsed.as_secs_f64()
    })
}

fn rows_per_second(model: &Model, item: &[u64], b: u64, time: Duration) -> f64 {
    let inputs =
        sample_inputs(model.name(), model.inputs(), &[SampleInput { shape: Some(item.to_vec()), values: None }], b)
            .unwrap();
    model.run(&inputs).unwrap();
    let (started, mut rows) = (Instant::now(), 0);
    while started.elapsed() < time {
        model.run(&inputs).unwrap();
        rows += b;
    }
    rows as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to run quickly.
    }
    let time = Duration::from_secs(4);
    println!("model execution, 1 intra-op thread, {time:?} per measurement (rows/s)");
    for (name, item, b) in [("ppocr-rec", vec![3, 48, 320], 8), ("mlp", vec![64], 8)] {
        let reference = bare(name, &item, b, time);
        let path = through_instance(name, &item, b, time);
        println!(
            "  {name:<10} b={b}: whole path {path:>10.1}, bare Session::run {reference:>10.1}: ratio {:.2}   (target ≥ 0.9)",
            path / reference
        );
    }
    let rec = Model::load("ppocr-rec", &model_path("ppocr-rec"), &SessionOptions::default()).unwrap();
    let item = [3, 48, 320];
    let (b1, b8) = (rows_per_second(&rec, &item, 1, time), rows_per_second(&rec, &item, 8, time));
    println!("  ppocr-rec  b=8 {b8:>10.1} vs b=1 {b1:>10.1}: ratio {:.2}", b8 / b1);
}
