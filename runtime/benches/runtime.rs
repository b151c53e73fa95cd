//! Benchmarks of the function runtime (`make bench`, or `cargo bench -p jig-runtime --bench runtime`):
//!
//! * `noop`: instantiate a fresh instance of `echo` and call it with an empty payload — the per-request cost of
//!   the sandbox (target: median ≤ 20 µs).
//! * `infer_1kib`: one `infer` call with a 1 KiB tensor, guest → host trait → guest, with an identity model;
//!   measured as invocations making 0 and 100 calls, the overhead being their difference / 100 (target ≤ 5 µs).
//! * `infer` of a large tensor whose output, as large, is a buffer the model keeps, as ONNX Runtime's outputs
//!   are: the call's cost, measured as invocations making 0 and 10 calls, against one `memcpy` of the same bytes
//!   in the same run, for a recognizer's text line (0.2 MB), a detector's image (4.9 MB) and eight images
//!   (39 MB). The floor is two copies' worth: the input lifted out of the guest's memory and the output lowered
//!   into it.
//! * `crop_10_boxes`: `crop` of 10 boxes from a 1280×720 RGB image in WebAssembly (instantiation included)
//!   against the same handler compiled natively and called through `jig_sdk::native`, in the same run
//!   (target: ≤ 2×).
//!
//! After criterion's report, a summary prints each figure with its target and the crop ratio.
//! Needs the components from `make functions`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use jig_runtime::models::{BoxFuture, Tensor};
use jig_runtime::{Function, FunctionOptions, InferError, InferRequest, ModelHost, Runtime, RuntimeConfig};
use jig_sdk::Envelope;

struct Identity;

impl ModelHost for Identity {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        Box::pin(async move { Ok(request.inputs) })
    }
}

/// A model whose output is a buffer it keeps and shares, as a model's output buffer is shared with the batch's
/// requests: the host cannot take its bytes over.
struct Kept(bytes::Bytes);

impl ModelHost for Kept {
    fn infer(&self, request: InferRequest) -> BoxFuture<'_, Result<Vec<Tensor>, InferError>> {
        let input = &request.inputs[0];
        let (shape, data) = (input.shape().to_vec(), self.0.slice(..input.data().len()));
        Box::pin(async move { Ok(vec![Tensor::new(jig_runtime::models::DType::U8, shape, data).unwrap()]) })
    }
}

/// Tensors glue passes to `infer`: a 3×48×320 f32 text line, a 3×640×640 f32 image, eight such images.
const TENSOR_BYTES: [usize; 3] = [3 * 48 * 320 * 4, 3 * 640 * 640 * 4, 8 * 3 * 640 * 640 * 4];

struct Setup {
    tokio: tokio::runtime::Runtime,
    _runtime: Runtime,
    echo: Function,
    probe: Function,
    kept: Function,
    crop: Function,
    infer_0: Vec<u8>,
    infer_100: Vec<u8>,
    /// Per size of [`TENSOR_BYTES`], requests making 0 and 10 calls.
    large: Vec<(Vec<u8>, Vec<u8>)>,
    crop_request: Vec<u8>,
    crop_no_boxes: Vec<u8>,
}

fn setup() -> Setup {
    let wasm_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/wasm32-wasip2/release");
    let load = |rt: &Runtime, name: &str, file: &str, options: FunctionOptions| {
        rt.load_file(name, &wasm_dir.join(file), options)
            .unwrap_or_else(|e| panic!("{e}; build the components with `make functions`"))
    };
    let runtime = Runtime::new(RuntimeConfig { max_invocations: 16, ..RuntimeConfig::default() }).unwrap();
    let echo = load(&runtime, "echo", "echo.wasm", FunctionOptions::default());
    let probe = load(
        &runtime,
        "probe",
        "jig_probe.wasm",
        FunctionOptions { models: Arc::new(Identity), ..FunctionOptions::default() },
    );
    let kept = load(
        &runtime,
        "probe",
        "jig_probe.wasm",
        FunctionOptions {
            models: Arc::new(Kept(vec![1u8; TENSOR_BYTES[2]].into())),
            // The probe holds its input twice and the output once.
            limits: jig_runtime::FunctionLimits { memory: 512 << 20, ..Default::default() },
            ..FunctionOptions::default()
        },
    );
    let crop = load(&runtime, "crop", "crop.wasm", FunctionOptions::default());
    let call = |count: usize, bytes: usize| {
        serde_json::to_vec(&serde_json::json!({"op": "infer", "slot": "model", "count": count, "bytes": bytes}))
            .unwrap()
    };
    let infer = |count: usize| call(count, 1024);
    Setup {
        tokio: tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap(),
        _runtime: runtime,
        echo,
        probe,
        kept,
        crop,
        infer_0: infer(0),
        infer_100: infer(100),
        large: TENSOR_BYTES.iter().map(|&bytes| (call(0, bytes), call(10, bytes))).collect(),
        crop_request: crop_request(10),
        crop_no_boxes: crop_request(0),
    }
}

/// A 1280×720 RGB image with a gradient and `boxes` boxes of 160×90 to 340×180 pixels spread over it.
fn crop_request(boxes: usize) -> Vec<u8> {
    let (w, h) = (1280u32, 720u32);
    let pixels: Vec<u8> = (0..w * h).flat_map(|i| [(i % w) as u8, (i / w) as u8, (i % 251) as u8]).collect();
    let boxes: Vec<_> = (0..boxes)
        .map(|i| {
            let (x0, y0) = (40.0 + 110.0 * i as f32, 20.0 + 50.0 * i as f32);
            serde_json::json!({"x0": x0, "y0": y0, "x1": x0 + 160.0 + 20.0 * i as f32, "y1": y0 + 90.0 + 10.0 * i as f32})
        })
        .collect();
    Envelope { meta: serde_json::json!({"boxes": boxes, "width": w, "height": h}), body: pixels }.encode()
}

fn invoke(s: &Setup, f: &Function, payload: &[u8]) {
    s.tokio.block_on(f.invoke(payload, None)).expect("invocation failed");
}

/// The same handler compiled natively, called in-process through the SDK's native host: the copy of the request
/// the host hands a handler, the crops, and the copy of each emitted crop the host keeps.
fn crop_native(payload: &[u8]) {
    let outcome = jig_sdk::native::Invocation::new().run::<crop::Crop>(payload.to_vec());
    outcome.output.expect("native crop failed");
    std::hint::black_box(outcome.emitted);
}

fn benches(c: &mut Criterion) {
    let s = setup();
    c.bench_function("noop", |b| b.iter(|| invoke(&s, &s.echo, b"")));
    let mut infer = c.benchmark_group("infer_1kib");
    infer.bench_function("0_calls", |b| b.iter(|| invoke(&s, &s.probe, &s.infer_0)));
    infer.bench_function("100_calls", |b| b.iter(|| invoke(&s, &s.probe, &s.infer_100)));
    infer.finish();
    let mut crop = c.benchmark_group("crop_10_boxes");
    crop.bench_function("wasm", |b| b.iter(|| invoke(&s, &s.crop, &s.crop_request)));
    crop.bench_function("native", |b| b.iter(|| crop_native(&s.crop_request)));
    crop.finish();
}

/// Median wall time of `f` over `runs` runs, after a warm-up.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..runs / 10 + 1 {
        f();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn summary() {
    let s = setup();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let noop = median(2000, || invoke(&s, &s.echo, b""));
    let infer_0 = median(300, || invoke(&s, &s.probe, &s.infer_0));
    let infer_100 = median(300, || invoke(&s, &s.probe, &s.infer_100));
    let per_call = (us(infer_100) - us(infer_0)) / 100.0;
    let large: Vec<(usize, f64, f64)> = TENSOR_BYTES
        .iter()
        .zip(&s.large)
        .map(|(&bytes, (calls_0, calls_10))| {
            let none = median(100, || invoke(&s, &s.kept, calls_0));
            let ten = median(100, || invoke(&s, &s.kept, calls_10));
            let (from, mut to) = (vec![2u8; bytes], vec![0u8; bytes]);
            let memcpy = median(300, || to.copy_from_slice(std::hint::black_box(&from)));
            (bytes, (us(ten) - us(none)) / 10.0, us(memcpy))
        })
        .collect();
    let wasm = median(300, || invoke(&s, &s.crop, &s.crop_request));
    let native = median(300, || crop_native(&s.crop_request));
    let wasm_0 = median(300, || invoke(&s, &s.crop, &s.crop_no_boxes));
    let native_0 = median(300, || crop_native(&s.crop_no_boxes));
    println!("\nsummary (medians, this run):");
    println!("  noop instantiate + call          {:>9.2} µs   (target ≤ 20 µs)", us(noop));
    println!("  infer round trip, 1 KiB tensor   {per_call:>9.2} µs   (target ≤ 5 µs overhead per call)");
    for (bytes, call, memcpy) in large {
        println!(
            "  infer round trip, {:>4.1} MB tensor {call:>9.1} µs   = {:.1} copies of it ({memcpy:.1} µs a memcpy; floor 2: \
             in and out)",
            bytes as f64 / 1e6,
            call / memcpy
        );
    }
    println!(
        "  crop 10 boxes of 1280x720 RGB    {:>9.1} µs wasm, {:.1} µs native: ratio {:.2}   (target ≤ 2)",
        us(wasm),
        us(native),
        us(wasm) / us(native)
    );
    println!(
        "    of which the 2.7 MB request alone   {:>9.1} µs wasm, {:.1} µs native (same request, 0 boxes)",
        us(wasm_0),
        us(native_0)
    );
}

criterion_group!(runtime, benches);

fn main() {
    runtime();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
