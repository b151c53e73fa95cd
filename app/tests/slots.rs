//! Glue → `infer` → model instances → ONNX Runtime: the main path, with real components and real models
//! (`make setup` generates them into .jig/models, `make functions` builds the probe guest).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jig_app::ModelSlots;
use jig_model_host::instance::{BatchPolicy, Instance, InstanceConfig};
use jig_model_host::launch::{Launcher, Placement};
use jig_model_host::pool::Pool;
use jig_model_host::segment::Segment;
use jig_runtime::{FunctionError, FunctionOptions, InferError, InvokeError, Runtime, RuntimeConfig};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn one_core() -> Placement {
    Placement::new(Segment::Cpu { cores: 1 })
}

fn probe(runtime: &Runtime, slots: ModelSlots) -> jig_runtime::Function {
    let wasm = std::fs::read(root().join("target/wasm32-wasip2/release/jig_probe.wasm"))
        .expect("build the guests first with `make functions`");
    runtime.load("probe", &wasm, FunctionOptions { models: Arc::new(slots), ..FunctionOptions::default() }).unwrap()
}

fn mlp_slot(config: InstanceConfig) -> (ModelSlots, Arc<Instance>) {
    let path = root().join(".jig/models/mlp.onnx");
    let instance = Arc::new(Launcher::discover().start_instance(config, "mlp", &path, one_core()).unwrap());
    let mut slots = ModelSlots::new();
    slots.insert("classifier", Arc::new(Pool::new(vec![(instance.clone(), 1.0)])));
    (slots, instance)
}

fn call(row: f32) -> Vec<u8> {
    serde_json::to_vec(&json!({"op": "infer-f32", "slot": "classifier", "shape": [1, 64], "values": vec![row; 64]}))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_invocations_share_a_batch_and_get_their_own_rows() {
    let runtime = Runtime::new(RuntimeConfig { max_invocations: 32, ..RuntimeConfig::default() }).unwrap();
    let config = InstanceConfig {
        policy: BatchPolicy { max_batch: 8, max_wait: Duration::from_millis(200), ..BatchPolicy::default() },
        ..InstanceConfig::new("mlp#0")
    };
    let (slots, instance) = mlp_slot(config);
    let function = probe(&runtime, slots);

    // What the model says for each row alone, then the same rows from 8 concurrent invocations.
    let mut alone = Vec::new();
    for k in 0..8 {
        alone.push(function.invoke(&call(k as f32 * 0.1), None).await.unwrap().output);
    }
    let batches_before = instance.stats().batches.load(Ordering::Relaxed);
    let tasks: Vec<_> = (0..8)
        .map(|k| {
            let function = function.clone();
            tokio::spawn(async move { function.invoke(&call(k as f32 * 0.1), None).await })
        })
        .collect();
    for (k, task) in tasks.into_iter().enumerate() {
        let together: Value = serde_json::from_slice(&task.await.unwrap().unwrap().output).unwrap();
        let alone: Value = serde_json::from_slice(&alone[k]).unwrap();
        assert_eq!(together[0]["shape"], json!([1, 16]));
        let (a, b) = (alone[0]["values"].as_array().unwrap(), together[0]["values"].as_array().unwrap());
        for (x, y) in a.iter().zip(b) {
            assert!((x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-5, "row {k}: {a:?} vs {b:?}");
        }
    }
    let batches = instance.stats().batches.load(Ordering::Relaxed) - batches_before;
    assert!(batches < 8, "8 concurrent calls ran as {batches} batches");
}

#[tokio::test]
async fn a_mismatched_tensor_and_a_late_request_get_distinct_errors() {
    let runtime = Runtime::new(RuntimeConfig { max_invocations: 8, ..RuntimeConfig::default() }).unwrap();
    let config = InstanceConfig {
        policy: BatchPolicy { min_service: Duration::from_millis(500), ..BatchPolicy::default() },
        ..InstanceConfig::new("mlp#1")
    };
    let (slots, _) = mlp_slot(config);
    let function = probe(&runtime, slots);

    let wrong =
        serde_json::to_vec(&json!({"op": "infer-f32", "slot": "classifier", "shape": [1, 3], "values": [1, 2, 3]}))
            .unwrap();
    let err = function.invoke(&wrong, None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::Failed { error: FunctionError::Model(InferError::InvalidInput(m)), .. } if m.contains("mlp#1") && m.contains("`x`")),
        "{err}"
    );

    let err = function.invoke(&call(0.5), Some(Instant::now() + Duration::from_millis(100))).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::Failed { error: FunctionError::Model(InferError::Dropped(m)), .. } if m.contains("mlp#1")),
        "{err}"
    );
    // The next request, with time to spare, is served.
    assert!(function.invoke(&call(0.5), None).await.is_ok());

    let unknown = serde_json::to_vec(&json!({"op": "infer-f32", "slot": "nope", "shape": [1], "values": [1]})).unwrap();
    let err = function.invoke(&unknown, None).await.unwrap_err().to_string();
    assert!(err.contains("no model slot `nope`") && err.contains("classifier"), "{err}");
}

/// A real model through real glue: the PP-OCRv4 text recognizer, called from WebAssembly, answers one
/// probability distribution over its character set per horizontal step of the image.
#[tokio::test]
async fn the_ppocr_recognizer_answers_wasm_glue() {
    let runtime = Runtime::new(RuntimeConfig { max_invocations: 4, ..RuntimeConfig::default() }).unwrap();
    let path = root().join(".jig/models/ppocr-rec.onnx");
    let instance = Launcher::discover().start_instance(InstanceConfig::new("rec#0"), "ppocr-rec", &path, one_core());
    let mut slots = ModelSlots::new();
    slots.insert("rec", Arc::new(Pool::new(vec![(Arc::new(instance.unwrap()), 1.0)])));
    let function = probe(&runtime, slots);

    let values: Vec<f32> = (0..3 * 48 * 320).map(|i| ((i % 320) as f32 / 160.0) - 1.0).collect();
    let call = json!({"op": "infer-f32", "slot": "rec", "shape": [1, 3, 48, 320], "values": values});
    let out = function.invoke(&serde_json::to_vec(&call).unwrap(), None).await.unwrap();
    let outputs: Value = serde_json::from_slice(&out.output).unwrap();
    let shape: Vec<u64> = serde_json::from_value(outputs[0]["shape"].clone()).unwrap();
    assert_eq!(&shape[..2], &[1, 40], "one step per 8 pixels of width");
    assert!(shape[2] > 1000, "a character set of {} classes", shape[2]);
    let first_step: f64 =
        outputs[0]["values"].as_array().unwrap()[..shape[2] as usize].iter().map(|v| v.as_f64().unwrap()).sum();
    assert!((first_step - 1.0).abs() < 1e-3, "a softmax sums to 1, not {first_step}");
}
