//! The function runtime against real components: the bundled glue functions and the test guests in
//! `tests/guests`, built by `make functions` into `target/wasm32-wasip2/release/`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jig_runtime::models::{BoxFuture, Bytes, DType, Tensor};
use jig_runtime::{
    Function, FunctionError, FunctionLimits, FunctionOptions, InferError, InferRequest, InvokeError, LoadError,
    ModelHost, Runtime, RuntimeConfig,
};
use jig_sdk::Envelope;
use serde_json::{Value, json};

fn wasm(name: &str) -> Vec<u8> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("wasm32-wasip2/release").join(format!("{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build the guests first with `make functions`", path.display()))
}

fn test_image() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/f3-board.jpg")).unwrap()
}

/// A runtime with a pool small enough for many test processes at once.
fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig { max_invocations: 64, max_memory: 512 << 20, ..RuntimeConfig::default() }).unwrap()
}

fn options(models: impl ModelHost) -> FunctionOptions {
    FunctionOptions { models: Arc::new(models), ..FunctionOptions::default() }
}

fn with_config(pairs: &[(&str, &str)]) -> FunctionOptions {
    let config: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    FunctionOptions { config, ..FunctionOptions::default() }
}

/// Test models: `identity` returns its inputs; `halves` returns the second and first half of its one input,
/// each a view of a buffer it keeps (as a batch's outputs are views of its output buffer); `slow` never answers;
/// `voice` returns 100 samples per id, checking Piper's input signature. Counts calls in flight at once.
#[derive(Default, Clone)]
struct TestModels {
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

impl ModelHost for TestModels {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let result = match request.slot.as_str() {
                "identity" => {
                    // A millisecond's wait, so that concurrent invocations' calls overlap even on a loaded machine
                    // (a bare yield let one invocation finish all its calls before the next began).
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    Ok(request.inputs)
                }
                "halves" => {
                    let input = &request.inputs[0];
                    let kept = bytes::Bytes::copy_from_slice(input.data());
                    let half = kept.len() / 2;
                    let shape = vec![input.shape()[0] / 2];
                    Ok(vec![
                        Tensor::new(DType::F32, shape.clone(), kept.slice(half..)).unwrap(),
                        Tensor::new(DType::F32, shape, kept.slice(..half)).unwrap(),
                    ])
                }
                "slow" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    unreachable!()
                }
                "pause" => {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    Ok(request.inputs)
                }
                "voice" => {
                    let [ids, lengths, scales] = &request.inputs[..] else {
                        return Err(InferError::InvalidInput("expected 3 inputs".into()));
                    };
                    assert_eq!((ids.dtype(), lengths.dtype(), scales.dtype()), (DType::I64, DType::I64, DType::F32));
                    assert_eq!(scales.shape(), &[3]);
                    let n = ids.shape()[1] as usize;
                    let samples: Vec<f32> = (0..n * 100).map(|i| (i as f32 * 0.05).sin() * 0.5).collect();
                    Ok(vec![Tensor::from_f32(vec![1, 1, samples.len() as u64], &samples).unwrap()])
                }
                other => Err(InferError::UnknownSlot(other.to_string())),
            };
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }
}

fn probe(op: Value) -> Vec<u8> {
    serde_json::to_vec(&op).unwrap()
}

/// Invoke `f` on `payload` `n` times at once; the outputs, each invocation having succeeded.
async fn invoke_concurrently(f: &Function, payload: &[u8], n: usize) -> Vec<Vec<u8>> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (f, payload) = (f.clone(), payload.to_vec());
            tokio::spawn(async move { f.invoke(&payload, None).await })
        })
        .collect();
    let mut outputs = Vec::new();
    for t in tasks {
        outputs.push(t.await.unwrap().unwrap().output);
    }
    outputs
}

#[tokio::test]
async fn echo_returns_its_payload_every_time() {
    let rt = runtime();
    let echo = rt.load("echo", &wasm("echo"), FunctionOptions::default()).unwrap();
    for payload in [&b"hello"[..], b"", &[0u8; 100_000]] {
        let out = echo.invoke(payload, None).await.unwrap();
        assert_eq!(out.output, payload);
        assert!(out.emitted.is_empty());
    }
}

#[tokio::test]
async fn crop_cuts_boxes_out_of_a_real_jpeg_and_emits_each() {
    let rt = runtime();
    let crop = rt.load("crop", &wasm("crop"), FunctionOptions::default()).unwrap();
    let photo = test_image();
    let boxes = json!([
        {"x0": 10.0, "y0": 20.0, "x1": 110.0, "y1": 70.0},
        {"x0": 200.5, "y0": 100.2, "x1": 260.0, "y1": 300.0},
        {"x0": 5000.0, "y0": 5000.0, "x1": 5100.0, "y1": 5100.0}
    ]);
    let request = Envelope { meta: json!({ "boxes": boxes }), body: photo.clone() }.encode();
    let out = crop.invoke(&request, None).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out.output).unwrap(), json!({"crops": 2, "skipped": 1}));
    assert_eq!(out.emitted.len(), 2);

    // The crops are exactly what the same code computes natively.
    let decoded = jig_sdk::image::decode(&photo).unwrap();
    for (emission, expect_box) in out.emitted.iter().zip(boxes.as_array().unwrap()) {
        assert_eq!(emission.port, "crops");
        let env = Envelope::<Value>::decode(emission.payload.clone()).unwrap();
        let region: jig_sdk::image::BoundingBox = serde_json::from_value(expect_box.clone()).unwrap();
        let native = jig_sdk::image::crop(&decoded, &region).unwrap();
        assert_eq!(env.meta["width"], native.width());
        assert_eq!(env.meta["height"], native.height());
        assert_eq!(env.meta["encoding"], "rgb8");
        assert_eq!(env.body, native.into_raw());
    }
}

#[tokio::test]
async fn crop_encodes_png_and_uses_the_configured_port() {
    let rt = runtime();
    let crop = rt.load("crop", &wasm("crop"), with_config(&[("encoding", "png"), ("port", "plates")])).unwrap();
    let request =
        Envelope { meta: json!({ "boxes": [{"x0": 0.0, "y0": 0.0, "x1": 64.0, "y1": 32.0}] }), body: test_image() }
            .encode();
    let out = crop.invoke(&request, None).await.unwrap();
    assert_eq!(out.emitted[0].port, "plates");
    let env = Envelope::<Value>::decode(out.emitted[0].payload.clone()).unwrap();
    let png = jig_sdk::image::decode(&env.body).unwrap();
    assert_eq!(png.dimensions(), (64, 32));

    let bad = rt.load("crop", &wasm("crop"), with_config(&[("encoding", "gif")])).unwrap();
    let err = bad.invoke(&request, None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::Failed { function, error: FunctionError::InvalidInput(m) } if function == "crop" && m.contains("encoding")),
        "{err}"
    );
}

#[tokio::test]
async fn crop_rejects_a_payload_that_is_not_an_image() {
    let rt = runtime();
    let crop = rt.load("crop", &wasm("crop"), FunctionOptions::default()).unwrap();
    let request = Envelope { meta: json!({ "boxes": [] }), body: b"GIF89a? no".to_vec() }.encode();
    let err = crop.invoke(&request, None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::Failed { error: FunctionError::InvalidInput(m), .. } if m.contains("image")),
        "{err}"
    );
    let err = crop.invoke(b"\x01\x02\xff\xff\xff\xff", None).await.unwrap_err();
    assert!(matches!(&err, InvokeError::Failed { error: FunctionError::InvalidInput(_), .. }), "{err}");
}

#[tokio::test]
async fn select_filters_by_label_score_and_top_k_and_routes_by_label() {
    let rt = runtime();
    let select = rt
        .load(
            "select",
            &wasm("select"),
            with_config(&[("labels", "cat, dog"), ("min-score", "0.3"), ("top-k", "2"), ("route", "label")]),
        )
        .unwrap();
    let detections = json!({"detections": [
        {"label": "cat", "score": 0.4, "box": [1, 2, 3, 4]},
        {"label": "car", "score": 0.99},
        {"label": "dog", "score": 0.9, "image": "a.jpg"},
        {"label": "cat", "score": 0.2},
        {"label": "cat", "score": 0.6}
    ]});
    let out = select.invoke(&serde_json::to_vec(&detections).unwrap(), None).await.unwrap();
    let ports: Vec<&str> = out.emitted.iter().map(|e| e.port.as_str()).collect();
    assert_eq!(ports, ["dog", "cat"]);
    let first: Value = serde_json::from_slice(&out.emitted[0].payload).unwrap();
    assert_eq!(first, json!({"label": "dog", "score": 0.9, "image": "a.jpg"}));
    let result: Value = serde_json::from_slice(&out.output).unwrap();
    assert_eq!(result["dropped"], 3);

    let err = select.invoke(b"{\"detections\": [{\"score\": 1}]}", None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::Failed { error: FunctionError::InvalidInput(m), .. } if m.contains("label")),
        "{err}"
    );
}

#[tokio::test]
async fn tts_frame_assembles_sentences_into_one_wav() {
    let rt = runtime();
    let map = r#"{"^":[1],"_":[0],"$":[2],"h":[10],"i":[11],"o":[12]}"#;
    let mut opts = with_config(&[("phoneme-id-map", map), ("sample-rate", "16000"), ("sentence-silence", "0.1")]);
    opts.models = Arc::new(TestModels::default());
    let tts = rt.load("tts-frame", &wasm("tts_frame"), opts).unwrap();
    let out = tts.invoke(b"hi. oh!", None).await.unwrap();
    let wav = out.output;
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(u32::from_le_bytes(wav[24..28].try_into().unwrap()), 16_000);
    // "hi." frames as ^ _ h _ i _ $ (7 ids, '.' is not in the map); "oh!" as ^ _ o _ h _ $ (7 ids).
    let samples = (7 * 100) + 1600 + (7 * 100);
    assert_eq!(u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize, samples * 2);
    assert_eq!(wav.len(), 44 + samples * 2);

    let no_voice = rt.load("tts-frame", &wasm("tts_frame"), FunctionOptions::default()).unwrap();
    let err = no_voice.invoke(b"hello.", None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::Failed { error: FunctionError::Model(InferError::UnknownSlot(m)), .. } if m.contains("voice")),
        "{err}"
    );
}

#[tokio::test]
async fn a_core_module_or_garbage_is_refused_at_load() {
    let rt = runtime();
    let err = rt.load("core", b"\0asm\x01\0\0\0", FunctionOptions::default()).err().unwrap();
    assert!(matches!(&err, LoadError::CoreModule { function } if function == "core"), "{err}");
    assert!(err.to_string().contains("wasm32-wasip2"));
    let err = rt.load("junk", b"\0asm\x0d\0\x01\0garbage", FunctionOptions::default()).err().unwrap();
    assert!(matches!(&err, LoadError::Invalid { function, .. } if function == "junk"), "{err}");
    let err = rt.load("text", b"hello", FunctionOptions::default()).err().unwrap();
    assert!(matches!(&err, LoadError::Invalid { .. }), "{err}");
    // Bytes that are neither format are named for what they are, not for the text parser's first complaint.
    let err = rt.load("png", b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", FunctionOptions::default()).err().unwrap();
    assert!(matches!(&err, LoadError::NotWasm { function } if function == "png"), "{err}");
    assert!(err.to_string().contains("wasm32-wasip2"), "{err}");
}

#[tokio::test]
async fn a_component_importing_what_the_host_lacks_is_refused_at_load() {
    let rt = runtime();
    let component = r#"(component
        (import "acme:net/socket@1.0.0" (instance (export "connect" (func (param "host" string)))))
    )"#;
    let err = rt.load("sneaky", component.as_bytes(), FunctionOptions::default()).err().unwrap();
    assert!(
        matches!(&err, LoadError::UnsupportedImport { function, import, .. } if function == "sneaky" && import == "acme:net/socket@1.0.0"),
        "{err}"
    );

    // Networking is not linked: a guest using `std::net` imports `wasi:sockets` and is refused by name.
    let networked = r#"(component (import "wasi:sockets/tcp@0.2.6" (instance)))"#;
    let err = rt.load("networked", networked.as_bytes(), FunctionOptions::default()).err().unwrap();
    assert!(matches!(&err, LoadError::UnsupportedImport { import, .. } if import == "wasi:sockets/tcp@0.2.6"), "{err}");

    // An import of the contract with the wrong shape: built against another version of it.
    let mismatched = r#"(component (import "jig:function/runtime@0.1.0" (instance (export "emit" (func)))))"#;
    let err = rt.load("stale", mismatched.as_bytes(), FunctionOptions::default()).err().unwrap();
    assert!(matches!(&err, LoadError::Link { function, .. } if function == "stale"), "{err}");
    assert!(err.to_string().contains("rebuild"), "{err}");

    let no_handler = rt.load("empty", b"(component)", FunctionOptions::default()).err().unwrap();
    assert!(matches!(&no_handler, LoadError::MissingHandler { function, .. } if function == "empty"), "{no_handler}");
}

#[tokio::test]
async fn a_trap_names_the_function_and_its_panic_and_the_next_call_works() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), FunctionOptions::default()).unwrap();
    let err = f.invoke(&probe(json!({"op": "panic"})), None).await.unwrap_err();
    match &err {
        InvokeError::Trap { function, stderr, .. } => {
            assert_eq!(function, "probe");
            assert!(stderr.contains("the probe was asked to panic"), "{stderr}");
        }
        other => panic!("expected a trap, got {other}"),
    }
    assert!(err.to_string().contains("probe"));
    let ok = f.invoke(&probe(json!({"op": "echo", "text": "still here"})), None).await.unwrap();
    assert_eq!(ok.output, b"still here");
}

#[tokio::test]
async fn an_endless_loop_stops_at_the_deadline_and_the_next_call_works() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), FunctionOptions::default()).unwrap();
    let started = Instant::now();
    let err =
        f.invoke(&probe(json!({"op": "spin"})), Some(Instant::now() + Duration::from_millis(200))).await.unwrap_err();
    assert!(matches!(&err, InvokeError::DeadlineExceeded { function, .. } if function == "probe"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "the loop was not interrupted promptly");

    // The function's own timeout applies when the request has no deadline.
    let mut opts = FunctionOptions::default();
    opts.limits.timeout = Duration::from_millis(100);
    let short = rt.load("probe", &wasm("jig_probe"), opts).unwrap();
    let err = short.invoke(&probe(json!({"op": "spin"})), None).await.unwrap_err();
    assert!(matches!(err, InvokeError::DeadlineExceeded { .. }), "{err}");

    let ok = f.invoke(&probe(json!({"op": "echo", "text": "after"})), None).await.unwrap();
    assert_eq!(ok.output, b"after");
}

#[tokio::test]
async fn a_model_call_past_the_deadline_is_cut_off() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), options(TestModels::default())).unwrap();
    let started = Instant::now();
    let call = probe(json!({"op": "infer", "slot": "slow", "count": 1, "bytes": 4}));
    let err = f.invoke(&call, Some(Instant::now() + Duration::from_millis(150))).await.unwrap_err();
    assert!(matches!(err, InvokeError::DeadlineExceeded { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn growing_past_the_memory_limit_is_reported_and_the_next_call_works() {
    let rt = runtime();
    let mut opts = FunctionOptions::default();
    opts.limits.memory = 32 << 20;
    let f = rt.load("probe", &wasm("jig_probe"), opts).unwrap();
    let err = f.invoke(&probe(json!({"op": "grow", "bytes": 256 << 20})), None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::MemoryLimit { function, limit } if function == "probe" && *limit == 32 << 20),
        "{err}"
    );
    let ok = f.invoke(&probe(json!({"op": "grow", "bytes": 8 << 20})), None).await.unwrap();
    assert_eq!(ok.output, (8 << 20).to_string().as_bytes());

    let mut too_big = FunctionOptions::default();
    too_big.limits.memory = 1 << 40;
    assert!(matches!(rt.load("probe", &wasm("jig_probe"), too_big), Err(LoadError::MemoryLimitTooLarge { .. })));
}

#[tokio::test]
async fn a_malformed_output_is_an_error_not_a_crash() {
    let rt = runtime();
    let f = rt.load("malformed", &wasm("jig_malformed"), FunctionOptions::default()).unwrap();
    for payload in [&b"pointer"[..], b"discriminant"] {
        let err = f.invoke(payload, None).await.unwrap_err();
        assert!(matches!(&err, InvokeError::MalformedOutput { function, .. } if function == "malformed"), "{err}");
    }
}

/// Small tensors and large ones (lifted into the runtime's reused memory, here twice with different values), in
/// and out, outputs sharing a buffer included.
#[tokio::test]
async fn tensors_cross_the_boundary_intact_both_ways_outputs_sharing_a_buffer_included() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), options(TestModels::default())).unwrap();
    for (n, offset) in [(4096, 7.0), (1 << 19, 7.0), (1 << 19, -3.0)] {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - offset).collect();
        let call = |slot: &str| probe(json!({"op": "infer-f32", "slot": slot, "shape": [n], "values": values}));
        let out = f.invoke(&call("identity"), None).await.unwrap().output;
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert!(out == json!([{"shape": [n], "values": values}]), "{n} values through identity");
        let out = f.invoke(&call("halves"), None).await.unwrap().output;
        let out: Value = serde_json::from_slice(&out).unwrap();
        let half = n / 2;
        let want = json!([{"shape": [half], "values": values[half..]}, {"shape": [half], "values": values[..half]}]);
        assert!(out == want, "{n} values through halves");
    }
}

/// Places the inputs of calls to `placed` in memory of its own (as a GPU worker's shared region) and answers
/// them as `identity` does, but only if they arrive in that very memory; for `short` it places one input too
/// few, which the runtime must not take; for other slots it places nothing.
#[derive(Default)]
struct Placing {
    placed: Mutex<Vec<Bytes>>,
}

impl ModelHost for Placing {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        Box::pin(async move {
            let placed: Vec<*const u8> = self.placed.lock().unwrap().drain(..).map(|b| b.as_ptr()).collect();
            let arrived: Vec<*const u8> = request.inputs.iter().map(|t| t.data().as_ptr()).collect();
            match request.slot.as_str() {
                "placed" if arrived != placed => {
                    Err(InferError::Failed("the inputs are not where they were placed".into()))
                }
                _ => Ok(request.inputs),
            }
        })
    }

    fn place(&self, slot: &str, inputs: &[&[u8]]) -> Option<Vec<Bytes>> {
        let copies: Vec<Bytes> = inputs.iter().map(|bytes| Bytes::copy_from_slice(bytes)).collect();
        match slot {
            "placed" => {
                *self.placed.lock().unwrap() = copies.clone();
                Some(copies)
            }
            "short" => Some(copies[1..].to_vec()),
            _ => None,
        }
    }
}

#[tokio::test]
async fn inputs_go_where_the_model_host_places_them_else_where_the_runtime_puts_them() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), options(Placing::default())).unwrap();
    for n in [4096, 1 << 19] {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 9.0).collect();
        for slot in ["placed", "short", "identity"] {
            let call = probe(json!({"op": "infer-f32", "slot": slot, "shape": [n], "values": values}));
            let out = f.invoke(&call, None).await.unwrap_or_else(|e| panic!("{n} values through {slot}: {e}")).output;
            let out: Value = serde_json::from_slice(&out).unwrap();
            assert!(out == json!([{"shape": [n], "values": values}]), "{n} values through {slot}");
        }
    }
}

#[tokio::test]
async fn a_malformed_tensor_is_refused_with_the_function_slot_and_input() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), options(TestModels::default())).unwrap();
    let err = f.invoke(&probe(json!({"op": "bad-tensor"})), None).await.unwrap_err();
    match &err {
        InvokeError::Failed { function, error: FunctionError::Model(InferError::InvalidInput(m)) } => {
            assert_eq!(function, "probe");
            assert!(
                m.contains("`probe`") && m.contains("`identity`") && m.contains("input 0") && m.contains("16 bytes"),
                "{m}"
            );
        }
        other => panic!("expected a refused tensor, got {other}"),
    }
}

#[tokio::test]
async fn emitting_past_the_limit_is_a_host_limit_error() {
    let rt = runtime();
    let opts = FunctionOptions {
        limits: FunctionLimits { max_emits: 5, ..FunctionLimits::default() },
        ..FunctionOptions::default()
    };
    let f = rt.load("probe", &wasm("jig_probe"), opts).unwrap();
    let ok = f.invoke(&probe(json!({"op": "emit", "port": "out", "count": 5, "bytes": 3})), None).await.unwrap();
    assert_eq!(ok.emitted.len(), 5);
    assert_eq!(ok.emitted[4].payload, [4, 0, 0]);
    let err = f.invoke(&probe(json!({"op": "emit", "port": "out", "count": 6, "bytes": 3})), None).await.unwrap_err();
    assert!(
        matches!(&err, InvokeError::HostLimit { function, detail } if function == "probe" && detail.contains("max_emits")),
        "{err}"
    );
}

#[tokio::test]
async fn the_sandbox_shows_no_environment_files_network_or_wall_clock() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), FunctionOptions::default()).unwrap();
    let a: Value =
        serde_json::from_slice(&f.invoke(&probe(json!({"op": "sandbox"})), None).await.unwrap().output).unwrap();
    assert_eq!(a["env"], 0);
    assert_eq!(a["args"], 0);
    assert_eq!(a["read_dir"], false);
    assert_eq!(a["open"], false);
    assert_eq!(a["unix_time"], 0);
    let b: Value =
        serde_json::from_slice(&f.invoke(&probe(json!({"op": "sandbox"})), None).await.unwrap().output).unwrap();
    assert_eq!(a["hash"], b["hash"], "hash seeds are deterministic across invocations");
}

#[tokio::test]
async fn config_and_remaining_time_reach_the_guest() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), with_config(&[("greeting", "hej")])).unwrap();
    let out = f.invoke(&probe(json!({"op": "config", "key": "greeting"})), None).await.unwrap();
    assert_eq!(out.output, b"hej");
    let out = f.invoke(&probe(json!({"op": "config", "key": "absent"})), None).await.unwrap();
    assert_eq!(out.output, b"");
    let out =
        f.invoke(&probe(json!({"op": "remaining"})), Some(Instant::now() + Duration::from_secs(5))).await.unwrap();
    let nanos: u64 = String::from_utf8(out.output).unwrap().parse().unwrap();
    assert!(nanos > 0 && nanos <= 5_000_000_000, "{nanos}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_invocations_have_model_calls_in_flight_together() {
    let rt = runtime();
    let models = TestModels::default();
    let f = rt.load("probe", &wasm("jig_probe"), options(models.clone())).unwrap();
    let call = probe(json!({"op": "infer", "slot": "identity", "count": 20, "bytes": 1024}));
    for output in invoke_concurrently(&f, &call, 16).await {
        assert_eq!(output, (20 * 1024).to_string().as_bytes());
    }
    assert!(models.max_in_flight.load(Ordering::SeqCst) > 1, "infer calls never overlapped");
}

#[tokio::test]
async fn an_invocation_says_how_long_it_waited_for_models() {
    let rt = runtime();
    let f = rt.load("probe", &wasm("jig_probe"), options(TestModels::default())).unwrap();
    let call = probe(json!({"op": "infer", "slot": "pause", "count": 3, "bytes": 64}));
    let started = std::time::Instant::now();
    let outcome = f.invoke(&call, None).await.unwrap();
    let (elapsed, waited) = (started.elapsed(), outcome.in_models);
    assert!(waited >= Duration::from_millis(120) && waited <= elapsed, "{waited:?} of {elapsed:?}");
    // Glue time is CPU time, which the 120 ms of waiting for models is not (on a loaded machine the two
    // clocks need not add up to the wall clock, so only the bound is checked).
    assert!(outcome.glue < Duration::from_millis(40), "waiting is no glue time: {:?}", outcome.glue);
    let echo = f.invoke(&probe(json!({"op": "echo", "text": "hi"})), None).await.unwrap();
    assert_eq!(echo.in_models, Duration::ZERO, "no model calls, no waiting");
    // Glue time is CPU time: writing 64 MiB takes some.
    let grow = f.invoke(&probe(json!({"op": "grow", "bytes": 64 << 20})), None).await.unwrap();
    assert!(grow.glue >= Duration::from_millis(2) && grow.glue > echo.glue, "{:?} vs {:?}", grow.glue, echo.glue);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invocations_beyond_the_instance_pool_wait_for_a_slot_instead_of_failing() {
    let rt = Runtime::new(RuntimeConfig { max_invocations: 2, ..RuntimeConfig::default() }).unwrap();
    let models = TestModels::default();
    let f = rt.load("probe", &wasm("jig_probe"), options(models.clone())).unwrap();
    let call = probe(json!({"op": "infer", "slot": "identity", "count": 5, "bytes": 64}));
    for output in invoke_concurrently(&f, &call, 12).await {
        assert_eq!(output, (5 * 64).to_string().as_bytes());
    }
    assert!(models.max_in_flight.load(Ordering::SeqCst) <= 2, "more instances ran at once than the pool has");
}

/// wasmtime never gives back what a pooled slot keeps resident: neither a burst of invocations at once nor
/// invocations of several functions in turn may leave memory resident in more slots than the resident ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_burst_only_the_resident_slots_keep_memory() {
    let keep = 4 << 20;
    let rt = Runtime::new(RuntimeConfig {
        max_invocations: 12,
        max_memory: 512 << 20,
        memory_keep_resident: keep,
        resident_slots: 2,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let models = TestModels::default();
    // Three functions (the same code loaded thrice): a slot last used by one is not the other's to reuse as is.
    let [a, b, c] = ["a", "b", "c"].map(|name| rt.load(name, &wasm("jig_probe"), options(models.clone())).unwrap());
    // Each invocation writes a few MiB of its memory (its input, and the output lowered back), then waits in
    // `infer` with the others.
    let call = probe(json!({"op": "infer", "slot": "pause", "count": 1, "bytes": 3 << 20}));
    let expected = (3 << 20).to_string().into_bytes();
    let bound = |when: &str| {
        let kept = rt.idle_resident_bytes();
        assert!(kept > 0, "{when}: the resident slots keep what their instances wrote");
        assert!(kept <= 2 * keep, "{when}: {} MiB kept resident, more than 2 slots' worth", kept >> 20);
    };
    assert_eq!(a.invoke(&call, None).await.unwrap().output, expected);
    assert_eq!(b.invoke(&call, None).await.unwrap().output, expected);
    for output in invoke_concurrently(&c, &call, 2).await {
        assert_eq!(output, expected);
    }
    bound("after a, b, then two of c at once");
    for f in [&a, &b, &c] {
        for output in invoke_concurrently(f, &call, 12).await {
            assert_eq!(output, expected);
        }
    }
    assert!(models.max_in_flight.load(Ordering::SeqCst) > 2, "the invocations never overlapped");
    bound("after bursts of 12 at once");
}

#[tokio::test]
async fn compiled_components_are_cached_on_disk_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        RuntimeConfig { cache_dir: Some(dir.path().to_path_buf()), max_invocations: 8, ..RuntimeConfig::default() };
    let echo = wasm("echo");
    {
        let rt = Runtime::new(config.clone()).unwrap();
        rt.load("echo", &echo, FunctionOptions::default()).unwrap();
    }
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].extension().is_some_and(|e| e == "cwasm"));

    // A second runtime uses the artifact; a corrupted one is replaced, not fatal.
    let rt = Runtime::new(config.clone()).unwrap();
    let f = rt.load("echo", &echo, FunctionOptions::default()).unwrap();
    assert_eq!(f.invoke(b"cached", None).await.unwrap().output, b"cached");
    std::fs::write(&entries[0], b"not a compiled component").unwrap();
    let f = rt.load("echo", &echo, FunctionOptions::default()).unwrap();
    assert_eq!(f.invoke(b"recompiled", None).await.unwrap().output, b"recompiled");
    assert!(std::fs::read(&entries[0]).unwrap().len() > 100, "the corrupt entry was rewritten");
}
