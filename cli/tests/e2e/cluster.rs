//! Gateway replicas with their cluster state in etcd, on loopback: etcd, three `jig node`s (one listed in the
//! gateways' config, two registered in etcd) and two gateways as real processes. An app deployed through one
//! gateway is served through the other; when the leading gateway
//! and then a node are killed (`kill -9`), the other gateway takes the lead and re-plans the app onto the node
//! that remains, and it is still served; a third gateway started later runs it too: nothing deployed is lost.
//! When etcd goes, the replicas serve on and refuse deploys with a message. And an etcd that speaks TLS and
//! checks its clients' certificates, reached as `JIG_ETCD_CA_FILE`, `JIG_ETCD_CERT_FILE` and `JIG_ETCD_KEY_FILE`
//! say.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use jig_node::registry::{CA_FILE_ENV, CERT_FILE_ENV, KEY_FILE_ENV};
use jig_test_support::{Etcd, Gateway, Process, probe_app};

/// `jig node` with one core on a free port, registered in `etcd` if given; its process and address.
fn node(dir: &Path, token: &Path, etcd: Option<&str>) -> (Process, String) {
    let args: Vec<&str> = etcd.map(|url| vec!["--etcd", url]).unwrap_or_default();
    jig_test_support::start_node(dir, "127.0.0.1:0", token, &args)
}

fn leads(gateway: &Gateway) -> bool {
    gateway.http("GET", "/v1/devices", &[], b"").json()["cluster"]["leader"] == true
}

/// Wait up to 30 s for `ready`.
fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what}: not within 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn replicas_serve_one_cluster_and_survive_a_gateway_and_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let token = dir.path().join("token");
    std::fs::write(&token, "cluster-token\n").unwrap();
    let (mut a, addr_a) = node(&dir.path().join("a"), &token, None);
    let (mut b, addr_b) = node(&dir.path().join("b"), &token, Some(&etcd.url));
    let (mut c, addr_c) = node(&dir.path().join("c"), &token, Some(&etcd.url));
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "etcd = [\"{}\"]\nnodes = [\"{addr_a}\"]\nnode_token_file = \"{}\"\ndemand_window_s = 3600\n",
            etcd.url,
            token.display()
        ),
    )
    .unwrap();
    // The replicas share the state directory, where the bundles are.
    let state = dir.path().join("state");
    let start = || Gateway::start(&state, &["--config", config.to_str().unwrap()]);
    let (first, second) = (start(), start());
    eventually("one replica leads", || leads(&first) || leads(&second));
    let nodes_seen =
        |gateway: &Gateway| gateway.http("GET", "/v1/devices", &[], b"").json()["nodes"].as_array().map_or(0, Vec::len);
    eventually("the listed node and the registered ones are seen", || nodes_seen(&first) == 3);
    assert!(!(leads(&first) && leads(&second)), "two leaders");

    // Deployed through the first, served through the second.
    let app = dir.path().join("app");
    let profiles = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
                    classifier,fast,cpu:1,1,10,15,30,test\n";
    probe_app(&app, "spread", 0.9, Some(profiles));
    let manifest = std::fs::read_to_string(app.join("jig.toml")).unwrap();
    std::fs::write(app.join("jig.toml"), format!("{manifest}\n[demand]\nrps = 50\n")).unwrap();
    let deployed = first.jig("deploy").arg(&app).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [1, 64], "values": vec![0.5; 64]});
    let invoke =
        |gateway: &Gateway| gateway.http("POST", "/v1/apps/spread/invoke", &[], payload.to_string().as_bytes());
    eventually("the second replica runs the app", || invoke(&second).status == 200);
    let places = |gateway: &Gateway| -> Vec<String> {
        let status = gateway.http("GET", "/v1/apps/spread", &[], b"").json();
        let places = status["deployment"]["instances"][0]["places"].as_array().cloned().unwrap_or_default();
        places.iter().filter_map(|p| p["node"].as_str().map(str::to_owned)).collect()
    };
    // Two instances of one core each, on two of the three nodes, the listed one (first in the plan's order) and a
    // registered one.
    let on = places(&second);
    assert_eq!(on.len(), 2, "{on:?}");
    assert!(on.contains(&addr_a) && on.iter().any(|n| *n == addr_b || *n == addr_c) && on[0] != on[1], "{on:?}");

    // The leader dies, and so does node a: the other replica takes the lead and re-plans onto nodes b and c.
    let (mut leader, survivor) = if leads(&first) { (first, second) } else { (second, first) };
    leader.child.kill().unwrap();
    leader.child.wait().unwrap();
    a.kill();
    eventually("the survivor leads", || leads(&survivor));
    eventually("the app re-planned onto nodes b and c", || {
        let mut on = places(&survivor);
        on.sort();
        let mut left = vec![addr_b.clone(), addr_c.clone()];
        left.sort();
        on == left
    });
    assert_eq!(invoke(&survivor).status, 200);

    // A replica started now runs what the cluster holds.
    let third = start();
    eventually("a new replica serves the app", || invoke(&third).status == 200);
    assert_eq!(places(&third), places(&survivor));

    // etcd goes: the replicas serve on as they were; a deploy is refused, saying why, and nothing changes.
    drop(etcd);
    assert_eq!(invoke(&survivor).status, 200);
    let refused = survivor.jig("deploy").arg(&app).output().unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("etcd") && said.contains("spread"), "{said}");
    assert_eq!(invoke(&third).status, 200);
    b.kill();
    c.kill();
}

/// `jig up` with `args` and `env`, expected to fail to start: what it said on standard error, within 30 s.
fn refused_start(state: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> String {
    let mut child = jig_test_support::jig()
        .args(["up", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("`jig up` neither started nor failed within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(!status.success(), "`jig up` started: {said}");
    said
}

#[test]
fn an_etcd_in_tls_that_checks_client_certificates_is_reached_with_the_files_the_environment_names() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    jig_test_support::certificates(&pki, &["127.0.0.1", "localhost"]);
    let file = |name: &str| -> PathBuf { pki.join(name) };
    let ca = file("ca.pem");
    let etcd = Etcd::start_tls(&dir.path().join("etcd"), &file("server.pem"), &file("server-key.pem"), Some(&ca));
    assert!(etcd.url.starts_with("https://"), "{}", etcd.url);
    let (cert, key) = (file("client.pem"), file("client-key.pem"));
    let env = [(CA_FILE_ENV, ca.as_os_str()), (CERT_FILE_ENV, cert.as_os_str()), (KEY_FILE_ENV, key.as_os_str())];
    let token = dir.path().join("token");
    std::fs::write(&token, "cluster-token\n").unwrap();

    // A node registers through TLS; a gateway campaigns, leads and finds the node there.
    let (_node, addr) = jig_test_support::start_node_with_env(
        &dir.path().join("n"),
        "127.0.0.1:0",
        &token,
        &["--etcd", &etcd.url],
        &env,
    );
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!("etcd = [\"{}\"]\nnode_token_file = \"{}\"\ndemand_window_s = 3600\n", etcd.url, token.display()),
    )
    .unwrap();
    let state = dir.path().join("state");
    let args = ["--config", config.to_str().unwrap()];
    let gateway = Gateway::start_with_env(&state, &args, &env);
    eventually("the gateway leads", || leads(&gateway));
    let nodes = || gateway.http("GET", "/v1/devices", &[], b"").json()["nodes"].clone();
    eventually("the gateway finds the node registered in etcd", || nodes().to_string().contains(&addr));

    // Without the CA, an https:// endpoint is refused at start, saying which variable is missing.
    let said = refused_start(&dir.path().join("state-2"), &args, &[]);
    assert!(said.contains(CA_FILE_ENV) && said.contains(&etcd.url), "{said}");
    // A client certificate without the CA, or a certificate without its key: refused, naming what is missing.
    let said = refused_start(&dir.path().join("state-2"), &args, &env[1..]);
    assert!(said.contains(CA_FILE_ENV), "{said}");
    let said = refused_start(&dir.path().join("state-2"), &args, &env[..2]);
    assert!(said.contains(CERT_FILE_ENV) && said.contains(KEY_FILE_ENV), "{said}");
}
