//! `jig node` as a process: a gateway-side instance runs its batches there, and when the node dies (`kill -9`)
//! mid-stream, the batch in flight and the next ones fail at once with an error naming the node, never a hang;
//! a node started again on the same port serves the next batch. A gateway given two nodes plans an app over
//! their cores and serves it from them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_model_host::instance::Executor;
use jig_model_host::segment::Segment;
use jig_model_host::{DType, Tensor};
use jig_node::{Remote, RemoteSpec};
use jig_test_support::{Gateway, Process, jig, probe_app, root};

/// `jig node` named `n1` on `listen`, with its token file in `dir`; the process and the address it printed.
fn start_node(dir: &std::path::Path, listen: &str) -> (Process, String) {
    std::fs::write(dir.join("token"), "cluster-token\n").unwrap();
    jig_test_support::start_node(&dir.join("n1"), listen, &dir.join("token"), &[])
}

fn spec(addr: &str) -> RemoteSpec {
    RemoteSpec {
        node: addr.to_string(),
        access: jig_node::Access { token: "cluster-token".into(), timeout: Duration::from_secs(20), tls: None },
        instance: "e2e/add@cpu:1#0".into(),
        model_name: "add".into(),
        model_path: root().join(".jig/models/add.onnx"),
        segment: "cpu:1".parse::<Segment>().unwrap(),
        device: None,
        cores: Vec::new(),
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
    node.kill();
    let (error, _) = running.join().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(5), "the failure took {:?}", killed.elapsed());
    assert!(error.contains(&addr) && error.contains("e2e/add@cpu:1#0"), "{error}");
    let again = remote.execute(&inputs).unwrap_err().to_string();
    assert!(again.contains("cannot reach node") && again.contains(&addr), "{again}");

    // A node back on the same port (its cache kept the model) serves the next batch over a new connection.
    let (mut node, _) = start_node(dir.path(), &addr);
    assert_eq!(remote.execute(&inputs).unwrap()[0].shape(), [8, 3, 640, 640]);
    assert_eq!(remote.restarts().unwrap().load(std::sync::atomic::Ordering::Relaxed), 1);
    node.kill();
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

#[test]
fn a_gateway_plans_over_its_nodes_and_serves_from_them() {
    let (dir, app) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (node_a, node_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&node_a).unwrap();
    std::fs::create_dir_all(&node_b).unwrap();
    let ((mut a, addr_a), (mut b, addr_b)) = (start_node(&node_a, "127.0.0.1:0"), start_node(&node_b, "127.0.0.1:0"));
    // One core serves 30 req/s as profiled; the app expects 50 (with slack): two instances, one per node.
    let profiles = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
                    classifier,fast,cpu:1,1,10,15,30,test\n";
    probe_app(app.path(), "spread", 0.9, Some(profiles));
    let manifest = std::fs::read_to_string(app.path().join("jig.toml")).unwrap();
    std::fs::write(app.path().join("jig.toml"), format!("{manifest}\n[demand]\nrps = 50\n")).unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!("nodes = [\"{addr_a}\", \"{addr_b}\"]\nnode_token_file = \"{}\"\n", node_a.join("token").display()),
    )
    .unwrap();
    let gateway = Gateway::start(&dir.path().join("state"), &["--config", config.to_str().unwrap()]);
    let deployed = gateway.jig("deploy").arg(app.path()).arg("--json").output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    let places = status["deployment"]["instances"][0]["places"].as_array().unwrap().clone();
    let mut nodes: Vec<&str> = places.iter().map(|p| p["node"].as_str().unwrap()).collect();
    nodes.sort();
    let mut expected = [addr_a.as_str(), addr_b.as_str()];
    expected.sort();
    assert_eq!(nodes, expected, "{status}");

    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    for _ in 0..4 {
        let reply = gateway.http("POST", "/v1/apps/spread/invoke", &[], payload.to_string().as_bytes());
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json()["outputs"][0]["json"][0]["shape"], serde_json::json!([2, 16]));
    }
    // `GET /v1/devices` lists the nodes and what the app holds of them.
    let devices = gateway.http("GET", "/v1/devices", &[], b"").json();
    let listed = devices["nodes"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{devices}");
    assert!(listed.iter().all(|n| n["name"] == "n1" && n["free_cores"].as_array().unwrap().is_empty()), "{devices}");

    // Node a dies: the gateway re-plans onto node b within a few seconds, and the app is served from it.
    a.kill();
    let started = Instant::now();
    let status = loop {
        let status = gateway.http("GET", "/v1/apps/spread", &[], b"").json();
        let places = status["deployment"]["instances"][0]["places"].as_array().cloned().unwrap_or_default();
        if !places.is_empty() && places.iter().all(|p| p["node"] == addr_b.as_str()) {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "not re-planned off the dead node: {status}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status["deployment"]["source"].as_str().unwrap().contains("the most this machine serves"), "{status}");
    let reply = gateway.http("POST", "/v1/apps/spread/invoke", &[], payload.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    b.kill();
}

#[test]
fn a_gateway_serves_from_a_node_in_tls_and_a_gateway_in_clear_is_told_why_not() {
    let (dir, app) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // One certificate for the fleet's name (nodes are reached by IP here, as in a headless Service).
    jig_test_support::certificates(&dir.path().join("pki"), &["jig-node"]);
    let pki = |file: &str| dir.path().join("pki").join(file);
    let (ca_file, cert_file, key_file) = (pki("ca.pem"), pki("server.pem"), pki("server-key.pem"));

    let node_dir = dir.path().join("n");
    std::fs::create_dir_all(&node_dir).unwrap();
    std::fs::write(node_dir.join("token"), "cluster-token\n").unwrap();
    let tls_args = ["--tls-cert", cert_file.to_str().unwrap(), "--tls-key", key_file.to_str().unwrap()];
    let (_node, addr) =
        jig_test_support::start_node(&node_dir.join("n1"), "127.0.0.1:0", &node_dir.join("token"), &tls_args);
    probe_app(app.path(), "sealed", 0.9, None);
    let config = |tls: &str| {
        let path = dir.path().join(format!("gateway{}.toml", tls.len()));
        let token = node_dir.join("token");
        std::fs::write(&path, format!("nodes = [\"{addr}\"]\nnode_token_file = \"{}\"\n{tls}", token.display()))
            .unwrap();
        path
    };

    let tls = format!("node_tls_ca = \"{}\"\nnode_tls_server_name = \"jig-node\"\n", ca_file.display());
    let gateway = Gateway::start(&dir.path().join("state"), &["--config", config(&tls).to_str().unwrap()]);
    let deployed = gateway.jig("deploy").arg(app.path()).arg("--json").output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let reply = gateway.http("POST", "/v1/apps/sealed/invoke", &[], payload.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["outputs"][0]["json"][0]["shape"], serde_json::json!([2, 16]));
    let devices = gateway.http("GET", "/v1/devices", &[], b"").json();
    assert_eq!(devices["nodes"].as_array().map(Vec::len), Some(1), "the node answered in TLS: {devices}");
    drop(gateway);

    // A gateway in clear finds no node to plan on, runs nothing itself, and says what to set.
    let clear = Gateway::start(&dir.path().join("state-clear"), &["--config", config("").to_str().unwrap()]);
    let devices = clear.http("GET", "/v1/devices", &[], b"").json();
    assert_eq!(devices["nodes"].as_array().map_or(0, Vec::len), 0, "{devices}");
    let refused = clear.jig("deploy").arg(app.path()).output().unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{message}");
    assert!(message.contains("no node answers") && message.contains("speaks only TLS"), "{message}");
}
