//! `jig node` as a process: a gateway-side instance runs its batches there, and when the node dies (`kill -9`)
//! mid-stream, the batch in flight and the next ones fail at once with an error naming the node, never a hang;
//! a node started again on the same port serves the next batch.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_model_host::instance::Executor;
use jig_model_host::segment::Segment;
use jig_model_host::{DType, Tensor};
use jig_node::{Remote, RemoteSpec};
use jig_tests::{jig, root};

/// `jig node` on `listen`, with its token file in `dir`; the process and the address it printed.
fn start_node(dir: &std::path::Path, listen: &str) -> (Child, String) {
    std::fs::write(dir.join("token"), "cluster-token\n").unwrap();
    let mut child = jig()
        .args(["node", "--listen", listen, "--name", "n1", "--cores", "1", "--token-file"])
        .arg(dir.join("token"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("listening on ").nth(1).and_then(|rest| rest.split(' ').next()).unwrap_or_else(|| {
        panic!("`jig node` printed {line:?}, not its address")
    });
    (child, addr.to_string())
}

fn spec(addr: &str) -> RemoteSpec {
    RemoteSpec {
        node: addr.to_string(),
        token: "cluster-token".into(),
        instance: "e2e/add@cpu:1#0".into(),
        model_name: "add".into(),
        model_path: root().join(".jig/models/add.onnx"),
        segment: "cpu:1".parse::<Segment>().unwrap(),
        device: None,
        timeout: Duration::from_secs(20),
    }
}

#[test]
fn a_killed_node_fails_batches_at_once_and_a_restarted_one_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (mut node, addr) = start_node(dir.path(), "127.0.0.1:0");
    let remote = Arc::new(Remote::connect(spec(&addr)).unwrap());
    let inputs: Vec<Tensor> = remote
        .inputs()
        .iter()
        .map(|_| Tensor::new(DType::F32, vec![8, 3, 640, 640], vec![0u8; 8 * 3 * 640 * 640 * 4]).unwrap())
        .collect();
    assert_eq!(remote.execute(&inputs).unwrap()[0].shape(), [8, 3, 640, 640]);

    // Batches back to back while the node is killed: each ends, in error once the node is gone.
    let running = {
        let (remote, inputs) = (remote.clone(), inputs.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            loop {
                if let Err(e) = remote.execute(&inputs) {
                    return (e.to_string(), started.elapsed());
                }
                assert!(started.elapsed() < Duration::from_secs(60), "no batch failed after the node was killed");
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let killed = Instant::now();
    node.kill().unwrap();
    node.wait().unwrap();
    let (error, _) = running.join().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(5), "the failure took {:?}", killed.elapsed());
    assert!(error.contains(&addr) && error.contains("e2e/add@cpu:1#0"), "{error}");
    let again = remote.execute(&inputs).unwrap_err().to_string();
    assert!(again.contains("cannot reach node") && again.contains(&addr), "{again}");

    // A node back on the same port (its cache kept the model) serves the next batch over a new connection.
    let (mut node, _) = start_node(dir.path(), &addr);
    assert_eq!(remote.execute(&inputs).unwrap()[0].shape(), [8, 3, 640, 640]);
    assert_eq!(remote.restarts().unwrap().load(std::sync::atomic::Ordering::Relaxed), 1);
    node.kill().unwrap();
    node.wait().unwrap();
}

#[test]
fn jig_node_without_a_token_says_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = jig().args(["node", "--token-file"]).arg(dir.path().join("missing")).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read the token file"), "{stderr}");
    std::fs::write(dir.path().join("empty"), "\n").unwrap();
    let out = jig().args(["node", "--token-file"]).arg(dir.path().join("empty")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is empty") && stderr.contains("/dev/urandom"), "{stderr}");
}
