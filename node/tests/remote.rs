//! A node on loopback, in this process: batches run remotely answer as the model does here, the token and the
//! node's cores are checked, and a silent client is closed.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_model_host::device::Devices;
use jig_model_host::instance::{Executor, Instance, InstanceConfig};
use jig_model_host::launch::Launcher;
use jig_model_host::onnx::{Model, SessionOptions};
use jig_model_host::segment::Segment;
use jig_model_host::{DType, Tensor};
use jig_node::protocol::{self, Reply, Request, Side};
use jig_node::tls::{NodeIdentity, NodeTls};
use jig_node::{Access, Node, NodeConfig, Remote, RemoteSpec, discover};

const TOKEN: &str = "s3cret-token";

fn model_path(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.jig/models").join(format!("{name}.onnx"));
    assert!(path.is_file(), "{} is missing: run `make setup`", path.display());
    path
}

/// A node with `cores` cores serving on a loopback port; its address and cache directory.
fn node(cores: usize) -> (String, tempfile::TempDir) {
    let (addr, cache, _) = node_and_handle(cores);
    (addr, cache)
}

/// [`node`], and the node itself.
fn node_and_handle(cores: usize) -> (String, tempfile::TempDir, Arc<Node>) {
    node_with(cores, None)
}

/// [`node_and_handle`], speaking TLS with `tls`.
fn node_with(cores: usize, tls: Option<NodeIdentity>) -> (String, tempfile::TempDir, Arc<Node>) {
    let cache = tempfile::tempdir().unwrap();
    let mut devices = Devices::discover();
    devices.cpu_cores = (0..cores).map(|i| devices.cpu_cores[i % devices.cpu_cores.len()]).collect();
    let config = NodeConfig {
        hello_timeout: Duration::from_millis(300),
        tls,
        ..NodeConfig::new("test-node", TOKEN, cache.path())
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let node = Arc::new(Node::new(config, Launcher::new(devices, None)));
    let serving = node.clone();
    std::thread::spawn(move || serving.serve(listener));
    (addr, cache, node)
}

fn spec(node: &str, model: &str, segment: &str) -> RemoteSpec {
    RemoteSpec {
        node: node.to_string(),
        access: access(TOKEN),
        instance: format!("test/{model}@{segment}#0"),
        model_name: model.to_string(),
        model_path: model_path(model),
        segment: segment.parse::<Segment>().unwrap(),
        device: None,
        cores: Vec::new(),
    }
}

fn access(token: &str) -> Access {
    Access { token: token.to_string(), timeout: Duration::from_secs(30), tls: None }
}

fn mixed_inputs(rows: usize) -> Vec<Tensor> {
    let x: Vec<f32> = (0..rows * 4).map(|i| i as f32 * 0.5).collect();
    let ids: Vec<u8> = (0..rows * 4).flat_map(|i| (i as i64 % 7).to_le_bytes()).collect();
    vec![
        Tensor::from_f32(vec![rows as u64, 4], &x).unwrap(),
        Tensor::new(DType::I64, vec![rows as u64, 4], ids).unwrap(),
    ]
}

#[test]
fn remote_batches_answer_as_the_model_does_here() {
    let (addr, cache) = node(2);
    let here = Model::load("mixed", &model_path("mixed"), &SessionOptions::default()).unwrap();
    let remote = Remote::connect(spec(&addr, "mixed", "cpu:1")).unwrap();
    assert_eq!(remote.inputs(), here.inputs());
    assert_eq!(remote.outputs(), here.outputs());
    for rows in [1, 3, 16] {
        let inputs = mixed_inputs(rows);
        let (a, b) = (remote.execute(&inputs).unwrap(), here.run(&inputs).unwrap());
        assert_eq!(a.len(), b.len());
        for (a, b) in a.iter().zip(&b) {
            assert_eq!((a.dtype(), a.shape(), a.data()), (b.dtype(), b.shape(), b.data()), "{rows} rows");
        }
    }
    // The node keeps what it received, by hash, for the next instance of the model.
    let cached: Vec<_> = std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let second = Remote::connect(spec(&addr, "mixed", "cpu:1")).unwrap();
    assert_eq!(second.execute(&mixed_inputs(2)).unwrap()[0].data(), here.run(&mixed_inputs(2)).unwrap()[0].data());

    // A model error is the batch's, and the connection serves the next batch.
    let wrong = vec![Tensor::from_f32(vec![1, 3], &[1.0, 2.0, 3.0]).unwrap(), mixed_inputs(1)[1].clone()];
    let err = remote.execute(&wrong).unwrap_err().to_string();
    assert!(err.contains("test-node"), "{err}");
    assert!(remote.execute(&mixed_inputs(1)).is_ok());
}

#[test]
fn large_tensors_cross_intact() {
    let (addr, _cache) = node(2);
    let remote = Remote::connect(spec(&addr, "add", "cpu:2")).unwrap();
    let here = Model::load("add", &model_path("add"), &SessionOptions::default()).unwrap();
    let item = 3 * 640 * 640;
    let values: Vec<f32> = (0..2 * item).map(|i| (i % 1000) as f32).collect();
    let inputs: Vec<Tensor> =
        here.inputs().iter().map(|_| Tensor::from_f32(vec![2, 3, 640, 640], &values).unwrap()).collect();
    let (a, b) = (remote.execute(&inputs).unwrap(), here.run(&inputs).unwrap());
    assert_eq!(a[0].data().len(), 2 * item * 4);
    assert!(a[0].data() == b[0].data());
}

#[test]
fn an_instance_batches_on_the_gateway_and_runs_on_the_node() {
    let (addr, _cache) = node(1);
    let instance = Instance::start(InstanceConfig::new("test/mixed@cpu:1#0"), move || {
        Ok(Remote::connect(spec(&addr, "mixed", "cpu:1"))?)
    })
    .unwrap();
    let runtime = tokio_free_block_on(instance.infer(mixed_inputs(1), Instant::now() + Duration::from_secs(10)));
    let outputs = runtime.unwrap();
    assert_eq!(outputs[0].shape(), [1, 4]);
}

#[test]
fn a_wrong_token_is_refused_by_name_and_never_crosses_the_wire() {
    let (addr, _cache) = node(1);
    // The node proves the token first: a gateway with another token finds it unproven and goes no further.
    let err = Remote::connect(RemoteSpec { access: access("guess"), ..spec(&addr, "mixed", "cpu:1") }).err().unwrap();
    let message = err.to_string();
    assert!(message.contains(&addr) && message.contains("token") && message.contains("test/mixed"), "{message}");

    // A peer that proves nothing and answers the challenge with a guess is refused by the node, by name.
    let mut peer = TcpStream::connect(&addr).unwrap();
    let gateway = protocol::nonce().unwrap();
    protocol::write_frame(&mut peer, &Request::Hello { version: protocol::VERSION, nonce: gateway }).unwrap();
    let mut buf = Vec::new();
    let Some(Reply::Challenge { nonce, proof }) = protocol::read_frame(&mut peer, &mut buf).unwrap() else {
        panic!("no challenge")
    };
    assert!(protocol::proves(&proof, TOKEN, Side::Node, &gateway, &nonce), "the node proves the cluster's token");
    protocol::write_frame(&mut peer, &Request::Prove { proof: [7; 32] }).unwrap();
    let Some(Reply::Refused { reason }) = protocol::read_frame(&mut peer, &mut buf).unwrap() else {
        panic!("not refused")
    };
    assert!(reason.contains("test-node") && reason.contains("token"), "{reason}");
}

#[test]
fn an_impostor_at_a_node_address_learns_nothing_of_the_token() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let heard = std::thread::spawn(move || {
        let (mut gateway, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let Some(Request::Hello { .. }) = protocol::read_frame(&mut gateway, &mut buf).unwrap() else {
            panic!("no hello")
        };
        // A challenge with a proof made without the token.
        let nonce = protocol::nonce().unwrap();
        protocol::write_frame(&mut gateway, &Reply::Challenge { nonce, proof: [0; 32] }).unwrap();
        let mut rest = Vec::new();
        gateway.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = gateway.read_to_end(&mut rest);
        rest
    });
    let err = Remote::connect(spec(&addr, "mixed", "cpu:1")).err().expect("an impostor is not a node");
    assert!(err.to_string().contains("did not prove the cluster's token"), "{err}");
    let rest = heard.join().unwrap();
    assert!(rest.is_empty(), "the gateway sent {} bytes after the impostor's challenge", rest.len());
}

#[test]
fn instances_are_pinned_to_the_cores_the_plan_gives_and_a_core_the_node_lacks_is_refused() {
    let (addr, _cache) = node(2);
    let offered = Devices::discover().cpu_cores;
    let pinned = Remote::connect(RemoteSpec { cores: vec![offered[0]], ..spec(&addr, "mixed", "cpu:1") }).unwrap();
    assert!(pinned.execute(&mixed_inputs(2)).is_ok());
    let err = Remote::connect(RemoteSpec { cores: vec![999], ..spec(&addr, "mixed", "cpu:1") }).err().unwrap();
    let message = err.to_string();
    assert!(message.contains("test-node") && message.contains("no core 999"), "{message}");
}

#[test]
fn a_silent_client_is_closed_and_others_are_served() {
    let (addr, _cache) = node(1);
    let mut silent = TcpStream::connect(&addr).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    assert_eq!(silent.read(&mut byte).unwrap_or(0), 0, "the node closes a connection that never says hello");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(Remote::connect(spec(&addr, "mixed", "cpu:1")).is_ok());
}

#[test]
fn a_segment_the_node_lacks_or_a_missing_node_is_an_error_naming_it() {
    let (addr, _cache) = node(1);
    let err = Remote::connect(spec(&addr, "mixed", "mps:0:50")).err().unwrap().to_string();
    assert!(err.contains("test-node") && err.contains("mps:0:50"), "{err}");
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string(); // bound, then freed
    let err = Remote::connect(spec(&closed, "mixed", "cpu:1")).err().unwrap().to_string();
    assert!(err.contains("cannot reach node") && err.contains(&closed), "{err}");
}

/// Drive a future to completion on this thread (the instance answers through a oneshot channel).
fn tokio_free_block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

#[test]
fn discovery_lists_what_each_node_offers_and_names_the_missing() {
    let ((a, _ca), (b, _cb)) = (node(1), node(2));
    let gone = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let found = discover(&[a.clone(), b.clone(), gone.clone()], &access(TOKEN));
    let cores: Vec<usize> = found[..2].iter().map(|f| f.as_ref().unwrap().devices.cpu_cores.len()).collect();
    assert_eq!(cores, [1, 2]);
    assert_eq!(found[0].as_ref().unwrap().name, "test-node");
    assert_eq!(found[1].as_ref().unwrap().addr, b);
    let err = found[2].as_ref().unwrap_err().to_string();
    assert!(err.starts_with("cannot reach node") && err.contains(&gone), "{err}");
    let unproven = discover(&[a], &access("wrong")).remove(0).unwrap_err().to_string();
    assert!(unproven.contains("did not prove the cluster's token"), "{unproven}");
}

#[test]
fn connections_that_name_one_instance_share_its_session() {
    let (addr, _cache, node) = node_and_handle(2);
    let (first, second) = (
        Remote::connect(spec(&addr, "mixed", "cpu:1")).unwrap(),
        Remote::connect(spec(&addr, "mixed", "cpu:1")).unwrap(),
    );
    assert_eq!(node.instances(), 1, "a second gateway (or a redeploy) shares the loaded instance");
    let other =
        Remote::connect(RemoteSpec { instance: "test/other#0".into(), ..spec(&addr, "mixed", "cpu:1") }).unwrap();
    assert_eq!(node.instances(), 2);
    // Batches from both connections run, one at a time, on the one session.
    let threads: Vec<_> = [first, second]
        .into_iter()
        .map(|remote| std::thread::spawn(move || (0..20).all(|_| remote.execute(&mixed_inputs(3)).is_ok())))
        .collect();
    assert!(threads.into_iter().all(|t| t.join().unwrap()));
    drop(other);
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.instances() > 0 {
        assert!(Instant::now() < deadline, "the node kept instances no connection names");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A frame within the node's 1 MiB limit whose first string field, after `fields` (bincode's encoding of what
/// precedes it), claims `claimed` bytes.
fn claiming(fields: &[u8], claimed: u64) -> Vec<u8> {
    let mut body = fields.to_vec();
    body.push(0xfd); // a varint's u64 follows
    body.extend_from_slice(&claimed.to_le_bytes());
    body.resize(64 << 10, b'x');
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn a_first_frame_whose_string_claims_terabytes_is_refused_and_the_node_serves_on() {
    let (addr, _cache) = node(1);
    for claimed in [1u64 << 40, 1 << 62] {
        let mut peer = TcpStream::connect(&addr).unwrap();
        // `Load` (variant 2), before any hello: its first field, the instance's name, claims `claimed` bytes.
        let _ = std::io::Write::write_all(&mut peer, &claiming(&[2], claimed));
        peer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut rest = Vec::new();
        let _ = peer.read_to_end(&mut rest);
        // The node closed the connection without answering it, and is alive to serve the next.
        assert!(rest.is_empty(), "{claimed}: the node answered {} bytes", rest.len());
    }
    assert!(Remote::connect(spec(&addr, "mixed", "cpu:1")).unwrap().execute(&mixed_inputs(1)).is_ok());
}

#[test]
fn a_node_answering_with_a_refusal_that_claims_terabytes_is_an_error_not_an_abort() {
    for claimed in [1u64 << 40, 1 << 62] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut gateway, _) = listener.accept().unwrap();
            // `Refused` (variant 1), then its reason.
            let _ = std::io::Write::write_all(&mut gateway, &claiming(&[1], claimed));
            std::thread::sleep(Duration::from_secs(2));
        });
        let err = Remote::connect(spec(&addr, "mixed", "cpu:1")).err().expect("a malformed answer is refused");
        assert!(err.to_string().contains("malformed"), "{claimed}: {err}");
    }
}

#[test]
fn a_peer_trickling_its_hello_is_closed_at_the_deadline_and_holds_no_connection() {
    // max_connections 1: were the trickler counted among the connections served, the gateway would be refused.
    let cache = tempfile::tempdir().unwrap();
    let config = NodeConfig {
        hello_timeout: Duration::from_millis(500),
        max_connections: 1,
        ..NodeConfig::new("test-node", TOKEN, cache.path())
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let node = Arc::new(Node::new(config, Launcher::new(Devices::discover(), None)));
    std::thread::spawn(move || node.serve(listener));

    let mut trickler = TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    let frame = claiming(&[0, 1], 8);
    let mut sent = 0;
    // A byte every 100 ms: each read finds a byte well within the timeout, but the hello's deadline is absolute.
    while sent < frame.len() && std::io::Write::write_all(&mut trickler, &frame[sent..sent + 1]).is_ok() {
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
        if started.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    assert!(started.elapsed() < Duration::from_secs(3), "the trickler was kept for {:?}", started.elapsed());
    assert!(Remote::connect(spec(&addr, "mixed", "cpu:1")).is_ok());
}

#[test]
fn one_address_holds_at_most_its_share_of_connections_saying_hello() {
    let cache = tempfile::tempdir().unwrap();
    let config =
        NodeConfig { hello_timeout: Duration::from_secs(20), ..NodeConfig::new("test-node", TOKEN, cache.path()) };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let node = Arc::new(Node::new(config, Launcher::new(Devices::discover(), None)));
    std::thread::spawn(move || node.serve(listener));

    let silent: Vec<TcpStream> =
        (0..jig_node::server::GREETING_PER_PEER).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // One more from the same address is closed at once, not at its hello deadline 20 s on.
    let mut next = TcpStream::connect(&addr).unwrap();
    next.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    assert_eq!(next.read(&mut byte).unwrap_or(0), 0);
    assert!(started.elapsed() < Duration::from_secs(5), "held for {:?}", started.elapsed());
    drop(silent);
    std::thread::sleep(Duration::from_millis(300));
    assert!(Remote::connect(spec(&addr, "mixed", "cpu:1")).is_ok(), "served once the address let them go");
}

/// A CA, and a node certificate it signed for `names`, as PEM files in a new directory: `ca.pem`,
/// `node.pem`, `node.key`.
fn certificates(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = rcgen::CertificateParams::new(names).unwrap().signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.path().join("node.pem"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("node.key"), key.serialize_pem()).unwrap();
    dir
}

fn identity(certs: &tempfile::TempDir) -> NodeIdentity {
    NodeIdentity::from_files(&certs.path().join("node.pem"), &certs.path().join("node.key")).unwrap()
}

fn tls_access(ca: &std::path::Path, server_name: Option<&str>) -> Access {
    Access { tls: Some(NodeTls::from_files(ca, server_name).unwrap()), ..access(TOKEN) }
}

#[test]
fn batches_run_in_tls_to_a_node_with_a_certificate() {
    let certs = certificates(&["127.0.0.1"]);
    let (addr, _cache, _node) = node_with(2, Some(identity(&certs)));
    let remote = Remote::connect(RemoteSpec {
        access: tls_access(&certs.path().join("ca.pem"), None),
        ..spec(&addr, "mixed", "cpu:1")
    })
    .unwrap();
    let here = Model::load("mixed", &model_path("mixed"), &SessionOptions::default()).unwrap();
    for rows in [1, 16] {
        let inputs = mixed_inputs(rows);
        let (a, b) = (remote.execute(&inputs).unwrap(), here.run(&inputs).unwrap());
        assert_eq!(a, b, "{rows} rows");
    }
    // Large tensors cross TLS intact too (many records each).
    let big: Vec<f32> = (0..1 << 20).map(|i| i as f32).collect();
    let big = vec![Tensor::from_f32(vec![1 << 18, 4], &big).unwrap(), mixed_inputs(1 << 18)[1].clone()];
    assert_eq!(remote.execute(&big).unwrap(), here.run(&big).unwrap());

    // A fleet's one certificate, checked against the name the gateway is told, not the address.
    let fleet = certificates(&["nodes.jig.internal"]);
    let (addr, _cache, _node) = node_with(1, Some(identity(&fleet)));
    let ca = fleet.path().join("ca.pem");
    Remote::connect(RemoteSpec {
        access: tls_access(&ca, Some("nodes.jig.internal")),
        ..spec(&addr, "mixed", "cpu:1")
    })
    .unwrap();
    let wrong_name = Remote::connect(RemoteSpec { access: tls_access(&ca, None), ..spec(&addr, "mixed", "cpu:1") })
        .err()
        .unwrap()
        .to_string();
    assert!(wrong_name.contains("certificate"), "{wrong_name}");
}

#[test]
fn a_node_whose_certificate_another_ca_signed_is_refused_before_the_token() {
    let (ours, theirs) = (certificates(&["127.0.0.1"]), certificates(&["127.0.0.1"]));
    let (addr, _cache, _node) = node_with(1, Some(identity(&theirs)));
    let err = Remote::connect(RemoteSpec {
        access: tls_access(&ours.path().join("ca.pem"), None),
        ..spec(&addr, "mixed", "cpu:1")
    })
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains(&addr) && err.contains("certificate"), "{err}");
}

#[test]
fn one_side_in_tls_and_the_other_in_clear_is_an_error_that_says_which_to_set() {
    let certs = certificates(&["127.0.0.1"]);
    let (tls_node, _c1, _n1) = node_with(1, Some(identity(&certs)));
    let clear = Remote::connect(spec(&tls_node, "mixed", "cpu:1")).err().unwrap().to_string();
    assert!(clear.contains("node_tls_ca"), "a gateway in clear is told the node speaks TLS: {clear}");
    let (clear_node, _c2) = node(1);
    let ca = certs.path().join("ca.pem");
    let tls = Remote::connect(RemoteSpec { access: tls_access(&ca, None), ..spec(&clear_node, "mixed", "cpu:1") })
        .err()
        .unwrap()
        .to_string();
    assert!(tls.contains("--tls-cert"), "a gateway in TLS is told the node may not: {tls}");
    // Neither node stopped serving.
    Remote::connect(spec(&clear_node, "mixed", "cpu:1")).unwrap();
    Remote::connect(RemoteSpec { access: tls_access(&ca, None), ..spec(&tls_node, "mixed", "cpu:1") }).unwrap();
}

#[test]
fn certificate_files_that_are_not_pem_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let err = NodeTls::from_files(&junk, None).unwrap_err();
    assert!(err.contains("junk.pem") && err.contains("no PEM certificate"), "{err}");
    let err = NodeIdentity::from_files(&junk, &junk).unwrap_err();
    assert!(err.contains("junk.pem"), "{err}");
    let err = NodeTls::from_files(&dir.path().join("missing.pem"), None).unwrap_err();
    assert!(err.contains("missing.pem"), "{err}");
}
