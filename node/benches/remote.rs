//! A model's batches on a `jig node` over loopback TCP against the same model in this process, beside a plain
//! TCP round trip of the same bytes (inputs out, outputs back, no framing): how close the node's path stays to
//! the link. The node runs in this process on a thread, as a separate machine would, but sharing its cores.
//! Median milliseconds per batch; `BENCH_MODELS=add,ppocr-det,ppocr-rec` and `BENCH_BATCHES=1,8,64` narrow it.
//!
//! `cargo bench -p jig-node --bench remote`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_model_host::device::Devices;
use jig_model_host::instance::Executor;
use jig_model_host::launch::Launcher;
use jig_model_host::onnx::{Model, SessionOptions};
use jig_model_host::{DType, Tensor};
use jig_node::{Node, NodeConfig, Remote, RemoteSpec};

fn model_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.jig/models").join(format!("{name}.onnx"))
}

fn median(mut run: impl FnMut() -> Duration) -> f64 {
    (0..3).for_each(|_| {
        run();
    });
    let one = run();
    let runs = (Duration::from_secs(2).as_secs_f64() / one.as_secs_f64().max(1e-6)).clamp(3.0, 500.0) as usize;
    let mut times: Vec<Duration> = (0..runs).map(|_| run()).collect();
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

/// A TCP echo of sizes: reads `input` bytes, answers `output` bytes, per round (the two sizes come first).
fn echo_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut s = stream.unwrap();
            s.set_nodelay(true).unwrap();
            std::thread::spawn(move || {
                let (mut inbuf, mut outbuf) = (Vec::new(), Vec::new());
                let mut sizes = [0u8; 16];
                while s.read_exact(&mut sizes).is_ok() {
                    let input = u64::from_le_bytes(sizes[..8].try_into().unwrap()) as usize;
                    let output = u64::from_le_bytes(sizes[8..].try_into().unwrap()) as usize;
                    inbuf.resize(input, 0);
                    outbuf.resize(output, 1);
                    s.read_exact(&mut inbuf).unwrap();
                    s.write_all(&outbuf).unwrap();
                }
            });
        }
    });
    addr
}

fn main() {
    let models = std::env::var("BENCH_MODELS").unwrap_or_else(|_| "add,ppocr-det,ppocr-rec".into());
    let batches: Vec<u64> = std::env::var("BENCH_BATCHES")
        .unwrap_or_else(|_| "1,2,4,8,16,32,64".into())
        .split(',')
        .map(|b| b.parse().unwrap())
        .collect();
    let cache = std::env::temp_dir().join(format!("jig-node-bench-{}", std::process::id()));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let node_addr = listener.local_addr().unwrap().to_string();
    let node = Arc::new(Node::new(NodeConfig::new("bench", "t", &cache), Launcher::new(Devices::discover(), None)));
    std::thread::spawn(move || node.serve(listener));
    let echo = echo_server();
    let threads = Devices::discover().cpu_cores.len().min(2);
    println!("node on loopback vs in process ({threads} intra-op threads each), median ms per batch");
    println!(
        "{:<10} {:>5} {:>10} {:>10} {:>10} {:>10} {:>14} {:>16}",
        "model", "batch", "MB in+out", "in proc", "node", "tcp copy", "ratio in/node", "node-in / copy"
    );
    for name in models.split(',') {
        let item: &[u64] = match name {
            "add" | "ppocr-det" => &[3, 640, 640],
            "ppocr-rec" => &[3, 48, 320],
            other => panic!("unknown bench model {other}"),
        };
        let max_batch = match name {
            "add" => 64,
            "ppocr-det" => 8,
            _ => 32,
        };
        let options = SessionOptions { threads, ..SessionOptions::default() };
        let here = Model::load(name, &model_path(name), &options).unwrap();
        let remote = Remote::connect(RemoteSpec {
            node: node_addr.clone(),
            access: jig_node::Access { token: "t".into(), timeout: Duration::from_secs(600), tls: None },
            instance: format!("bench/{name}"),
            model_name: name.into(),
            model_path: model_path(name),
            segment: format!("cpu:{threads}").parse().unwrap(),
            device: None,
            cores: Vec::new(),
        })
        .unwrap();
        let mut copy = TcpStream::connect(&echo).unwrap();
        copy.set_nodelay(true).unwrap();
        for &b in batches.iter().filter(|&&b| b <= max_batch) {
            let shape: Vec<u64> = [&[b], item].concat();
            let len = shape.iter().product::<u64>() as usize;
            let values: Vec<f32> = (0..len).map(|i| (i % 255) as f32 / 255.0).collect();
            let inputs: Vec<Tensor> = here
                .inputs()
                .iter()
                .map(|spec| {
                    assert_eq!(spec.dtype, DType::F32, "the bench feeds f32 inputs");
                    Tensor::from_f32(shape.clone(), &values).unwrap()
                })
                .collect();
            let in_bytes: usize = inputs.iter().map(|t| t.data().len()).sum();
            let out_bytes: usize = here.run(&inputs).unwrap().iter().map(|t| t.data().len()).sum();
            let local = median(|| {
                let started = Instant::now();
                let outputs = here.run(&inputs).unwrap();
                let elapsed = started.elapsed();
                drop(outputs);
                elapsed
            });
            let far = median(|| {
                let started = Instant::now();
                let outputs = remote.execute(&inputs).unwrap();
                let elapsed = started.elapsed();
                drop(outputs);
                elapsed
            });
            let (sent, mut back) = (vec![1u8; in_bytes], vec![0u8; out_bytes]);
            let tcp = median(|| {
                let started = Instant::now();
                let sizes = [(in_bytes as u64).to_le_bytes(), (out_bytes as u64).to_le_bytes()].concat();
                copy.write_all(&sizes).unwrap();
                copy.write_all(&sent).unwrap();
                copy.read_exact(&mut back).unwrap();
                started.elapsed()
            });
            println!(
                "{name:<10} {b:>5} {:>10.1} {local:>10.2} {far:>10.2} {tcp:>10.2} {:>14.2} {:>16.2}",
                (in_bytes + out_bytes) as f64 / 1e6,
                local / far,
                (far - local) / tcp
            );
        }
    }
    let _ = std::fs::remove_dir_all(cache);
}
