//! The gateway as users run it: `jig up` on a loopback port, `jig deploy` of real bundles, invocations over
//! real HTTP, a restart after `kill -9`.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jig_api::{AppList, ErrorKind, InvokeResponse};
use jig_test_support::{Gateway, bundle, component, model, root};

/// `crop` (PNG crops) fanning out to `echo`: every crop comes back as one output.
const CROPS: &str = r#"
name = "crops"
[slo]
latency_ms = 5000

[[tasks]]
name = "crop"
glue = "glue/crop.wasm"
config = { encoding = "png" }

[[tasks]]
name = "echo"
glue = "glue/echo.wasm"

[[edges]]
from = "crop.crops"
to = "echo"
"#;

fn crops_bundle(dir: &Path) {
    bundle(dir, CROPS, &[("glue/crop.wasm", &component("crop")), ("glue/echo.wasm", &component("echo"))]);
}

/// The probe guest alone, with the MLP model in slot `classifier`.
fn probe_bundle(dir: &Path, name: &str) {
    let manifest = format!(
        r#"
name = "{name}"
[[tasks]]
name = "probe"
glue = "glue/probe.wasm"

[[variants]]
slot = "classifier"
name = "mlp"
model = "models/mlp.onnx"
accuracy = 0.7
"#
    );
    bundle(dir, &manifest, &[("glue/probe.wasm", &component("jig_probe")), ("models/mlp.onnx", &model("mlp"))]);
}

/// `jig up` with `config` as its config file, both under `scratch`.
fn start_with_config(scratch: &Path, config: &str) -> Gateway {
    let path = scratch.join("gateway.toml");
    std::fs::write(&path, config).unwrap();
    Gateway::start(&scratch.join("state"), &["--config", path.to_str().unwrap()])
}

fn deploy(gateway: &Gateway, dir: &Path, extra: &[&str]) -> Output {
    gateway.jig("deploy").arg(dir).args(extra).output().unwrap()
}

fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn crop_request() -> Vec<u8> {
    let image = std::fs::read(root().join("tests/data/f3-board.jpg")).unwrap();
    let meta = serde_json::json!({"boxes": [
        {"x0": 10, "y0": 10, "x1": 90, "y1": 50},
        {"x0": 100, "y0": 100, "x1": 140, "y1": 180},
        {"x0": 5000, "y0": 5000, "x1": 5100, "y1": 5100},
    ]});
    jig_wire::Envelope { meta, body: image }.encode()
}

#[test]
fn deploy_then_invoke_fans_out_and_gathers_every_leaf_output() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    crops_bundle(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = deploy(&gateway, dir.path(), &[]);
    assert_ok(&deployed);
    let stdout = String::from_utf8_lossy(&deployed.stdout);
    assert!(stdout.contains("deployed crops") && stdout.contains("crop → echo"), "{stdout}");
    assert!(String::from_utf8_lossy(&deployed.stderr).contains("uploaded"), "progress is shown");

    let reply = gateway.http("POST", "/v1/apps/crops/invoke", &[], &crop_request());
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.header("server-timing").is_some_and(|t| t.starts_with("total;dur=")), "{:?}", reply.headers);
    let outputs = reply.json()["outputs"].as_array().unwrap().clone();
    assert_eq!(outputs.len(), 2, "two boxes overlap the image: {outputs:?}");
    // In emission order, whichever finished first: box 0 is 80×40, box 1 is 40×80. Each crop is an envelope:
    // its metadata comes as `json`, the PNG as `base64`.
    for (i, (part, size)) in outputs.iter().zip([(80, 40), (40, 80)]).enumerate() {
        assert_eq!(part["task"], "echo");
        assert_eq!(part["json"]["index"], i);
        let png = base64::engine::general_purpose::STANDARD.decode(part["base64"].as_str().unwrap()).unwrap();
        assert_eq!(jig_sdk::image::decode(&png).unwrap().dimensions(), size);
    }

    // The CLI says the same, and writes the crops out.
    let out = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.bin");
    std::fs::write(&request, crop_request()).unwrap();
    let invoked = gateway.jig("invoke").arg("crops").arg(&request).arg("-o").arg(out.path()).output().unwrap();
    assert_ok(&invoked);
    assert!(out.path().join("1-echo.png").is_file(), "{}", String::from_utf8_lossy(&invoked.stdout));

    // `jig plan APP` shows a deployed app's plan, from the gateway of JIG_GATEWAY.
    let plan = jig_test_support::jig().args(["plan", "crops"]).env("JIG_GATEWAY", gateway.url()).output().unwrap();
    assert_ok(&plan);
    assert!(String::from_utf8_lossy(&plan.stdout).contains("crop → echo"));

    let apps = gateway.jig("apps").arg("--json").output().unwrap();
    assert_ok(&apps);
    let apps: AppList = serde_json::from_slice(&apps.stdout).unwrap();
    assert_eq!(apps.apps[0].tasks, ["crop", "echo"]);
    assert_eq!(apps.apps[0].deployment.instances.len(), 0, "glue only: no model instances");

    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains(r#"jig_requests_total{app="crops",code="200"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"jig_task_invocations_total{app="crops",task="echo",outcome="ok"} 4"#), "{metrics}");
    assert_eq!(gateway.http("GET", "/healthz", &[], b"").status, 200);
}

#[test]
fn a_model_slot_is_served_and_reported_in_metrics() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "classify");
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = deploy(&gateway, dir.path(), &["--json"]);
    assert_ok(&deployed);
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert_eq!(status["deployment"]["instances"][0]["variant"], "mlp");

    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let reply = gateway.http("POST", "/v1/apps/classify/invoke", &[], payload.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let result = &reply.json()["outputs"][0]["json"];
    assert_eq!(result[0]["shape"], serde_json::json!([2, 16]));
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("jig_instance_rows_total{app=\"classify\",slot=\"classifier\""), "{metrics}");
    // Counters docs/src/reference/metrics.md lists show at 0 before anything is dropped or late.
    let restarts = "jig_instance_restarts_total{app=\"classify\",slot=\"classifier\",instance=\"classify/classifier/";
    assert!(metrics.lines().any(|l| l.starts_with(restarts) && l.ends_with(" 0")), "{restarts} in {metrics}");
    for zero in ["jig_early_drops_total{app=\"classify\"} 0", "jig_slo_violations_total{app=\"classify\"} 0"] {
        assert!(metrics.contains(zero), "{zero} in {metrics}");
    }

    // `jig bench` reports the run and what served it: the default deployment holds this machine's cores.
    let input = dir.path().join("payload.json");
    std::fs::write(&input, payload.to_string()).unwrap();
    let bench = gateway
        .jig("bench")
        .args(["classify", input.to_str().unwrap(), "--rate", "20", "--duration", "1", "--json"])
        .output()
        .unwrap();
    assert_ok(&bench);
    let report: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
    assert!(report["ok"].as_u64().unwrap() > 5, "{report}");
    let instance = &status["deployment"]["instances"][0];
    let cores = instance["segment"].as_str().unwrap().strip_prefix("cpu:").unwrap().parse::<u64>().unwrap();
    assert_eq!(report["cores_used"].as_u64(), Some(cores * instance["count"].as_u64().unwrap()), "{report}");
    assert!(report["accuracy_drop"].is_null(), "not planned, so no accuracy to report: {report}");

    // The instances' batch latencies are observed: at the batch size they ran most, beside no profile row
    // (the bundle has no profile table).
    let status = gateway.http("GET", "/v1/apps/classify", &[], b"").json();
    let observed = &status["observed_latencies"][0];
    assert_eq!(
        (observed["slot"].as_str(), observed["variant"].as_str()),
        (Some("classifier"), Some("mlp")),
        "{status}"
    );
    assert!(observed["batches"].as_u64().unwrap() >= 1 && observed["p95_ms"].as_f64().unwrap() > 0.0, "{status}");
    assert!(observed["profiled_ms"].is_null(), "{status}");
    let glue = &status["observed_glue"][0];
    assert_eq!(glue["task"].as_str(), Some("probe"), "{status}");
    assert!(glue["invocations"].as_u64().unwrap() >= 5 && glue["mean_ms"].as_f64().unwrap() > 0.0, "{status}");
    let text = gateway.jig("status").arg("classify").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("latency    classifier/mlp on cpu:") && text.contains("glue       probe: "), "{text}");
}

/// `/openapi.json` describes every route the gateway serves, and the gateway serves every route it describes.
#[test]
fn the_api_description_and_the_routes_agree() {
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &[]);
    let reply = gateway.http("GET", "/openapi.json", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let doc = reply.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations += 1;
            let concrete = path.replace("{app}", "nope").replace("{model}", "nope.slot");
            let reply = gateway.http(&method.to_uppercase(), &concrete, &[], b"");
            // A described route is routed: an unknown app or an empty bundle may be refused, but never as a
            // route the gateway lacks.
            assert!(!reply.text().contains("no route"), "{method} {path}: {} {}", reply.status, reply.text());
            assert!(reply.status < 500, "{method} {path}: {} {}", reply.status, reply.text());
        }
    }
    assert_eq!(operations, jig_api::Route::ALL.len(), "{doc}");
    let reply = gateway.http("PUT", "/v1/apps", &[], b"");
    assert_eq!(reply.status, 404);
    assert!(
        reply.text().contains("no route PUT /v1/apps") && reply.text().contains("/openapi.json"),
        "{}",
        reply.text()
    );
    // KServe's v1 `:predict` is told where to go.
    let v1 = gateway.http("POST", "/v1/models/shop.det:predict", &[], b"{\"instances\": []}");
    assert_eq!(v1.status, 404);
    assert!(v1.text().contains("POST /v2/models/shop.det/infer"), "{}", v1.text());
}

#[test]
fn status_codes_mean_one_thing_each() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "probe");
    let gateway = start_with_config(state.path(), "max_request_mib = 1\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    let unknown = gateway.http("POST", "/v1/apps/nope/invoke", &[], b"{}");
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"].as_str().unwrap().contains("unknown app `nope`"));
    assert_eq!(unknown.error().kind, ErrorKind::NotFound);
    // The control API (behind its token, when one is set) says what is deployed.
    let unknown = gateway.http("GET", "/v1/apps/nope", &[], b"");
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"].as_str().unwrap().contains("unknown app `nope` (deployed: probe)"));

    let bad = gateway.http("POST", "/v1/apps/probe/invoke", &[], b"not json");
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(bad.error().kind, ErrorKind::InvalidInput);

    let timeout = gateway.http("POST", "/v1/apps/probe/invoke", &[("jig-timeout-ms", "soon")], b"{}");
    assert_eq!(timeout.status, 400);
    assert!(timeout.text().contains("jig-timeout-ms"));
    assert_eq!(timeout.error().kind, ErrorKind::InvalidRequest);

    let large = gateway.http("POST", "/v1/apps/probe/invoke", &[], &vec![b' '; 2 << 20]);
    assert_eq!(large.status, 413, "{}", large.text());
    assert_eq!(large.error().kind, ErrorKind::TooLarge);

    let trap = gateway.http("POST", "/v1/apps/probe/invoke", &[], br#"{"op": "panic"}"#);
    assert_eq!(trap.status, 500);
    assert_eq!(trap.error().kind, ErrorKind::FunctionFailed);
    assert!(trap.text().contains("probe/probe"), "names the app and task: {}", trap.text());

    // A guest that never returns: 504 once its deadline passes, the guest interrupted there rather than left
    // spinning (a loose bound: the other tests share the machine, and a tight one failed under `make test`).
    let started = Instant::now();
    let spin = gateway.http("POST", "/v1/apps/probe/invoke", &[("jig-timeout-ms", "300")], br#"{"op": "spin"}"#);
    let elapsed = started.elapsed();
    assert_eq!(spin.status, 504, "{}", spin.text());
    assert_eq!(spin.error().kind, ErrorKind::Deadline);
    assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3), "504 after {elapsed:?}");

    // Every failure above left the app serving.
    let echo = gateway.http("POST", "/v1/apps/probe/invoke", &[], br#"{"op": "echo", "text": "\"still here\""}"#);
    assert_eq!(echo.status, 200, "{}", echo.text());
    let answer: InvokeResponse = echo.parse();
    assert_eq!(answer.outputs[0].json, Some(serde_json::json!("still here")));
    assert_eq!((answer.outputs[0].task.as_str(), answer.outputs[0].port.as_deref()), ("probe", None));
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains(r#"jig_slo_violations_total{app="probe"} 1"#), "{metrics}");
}

#[test]
fn the_control_api_needs_the_token() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    crops_bundle(dir.path());
    let gateway = Gateway::start(state.path(), &["--token", "s3cret"]);

    let refused = deploy(&gateway, dir.path(), &[]);
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("needs a token"), "{said}");
    assert!(!said.contains("uploaded"), "refused before the bundle is uploaded: {said}");
    let wrong = gateway.http("GET", "/v1/apps", &[("authorization", "Bearer nope")], b"");
    assert_eq!(wrong.status, 401);
    assert!(wrong.text().contains("wrong token"));
    assert_eq!(wrong.error().kind, ErrorKind::Unauthorized);

    assert_ok(&deploy(&gateway, dir.path(), &["--token", "s3cret"]));
    let listed = gateway.http("GET", "/v1/apps", &[("authorization", "Bearer s3cret")], b"");
    assert_eq!(listed.status, 200);
    // Invocations are open unless `invoke_token` is set.
    assert_eq!(gateway.http("POST", "/v1/apps/crops/invoke", &[], &crop_request()).status, 200);
}

/// A tar archive holding `entries` (path, contents); paths are written as given, `..` included.
fn tar(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut archive = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        archive.append(&header, *data).unwrap();
    }
    archive.into_inner().unwrap()
}

#[test]
fn bad_bundles_get_a_clear_400_and_damage_nothing() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    crops_bundle(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    let echo = std::fs::read(component("echo")).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("bad TOML", tar(&[("jig.toml", b"name = ")]), "jig.toml is not a valid manifest"),
        (
            "missing glue",
            tar(&[("jig.toml", b"name = \"x\"\n[[tasks]]\nname = \"t\"\nglue = \"glue/t.wasm\"\n")]),
            "task `t`: `glue` names glue/t.wasm, which does not exist",
        ),
        ("path escape", tar(&[("../evil.toml", b"x"), ("jig.toml", b"name = \"x\"")]), "leaves the bundle"),
        ("not a tar", b"hello, this is not an archive at all".repeat(20), "not a tar archive"),
        (
            "not a component",
            tar(&[("jig.toml", b"name = \"x\"\n[[tasks]]\nname = \"t\"\nglue = \"t.wasm\"\n"), ("t.wasm", b"\0asm junk")]),
            "function `x/t`",
        ),
        (
            "two entry tasks",
            tar(&[
                ("jig.toml", b"name = \"x\"\n[[tasks]]\nname = \"a\"\nglue = \"e.wasm\"\n[[tasks]]\nname = \"b\"\nglue = \"e.wasm\"\n"),
                ("e.wasm", &echo),
            ]),
            "tasks `a`, `b` have no incoming edge",
        ),
    ];
    for (what, body, message) in cases {
        let reply = gateway.http("POST", "/v1/apps", &[], &body);
        assert_eq!(reply.status, 400, "{what}: {}", reply.text());
        assert_eq!(reply.error().kind, ErrorKind::InvalidBundle, "{what}");
        let error = reply.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(message), "{what}: {error}");
    }
    // Checked locally before any upload: a manifest path that leaves the bundle.
    let escape = tempfile::tempdir().unwrap();
    bundle(escape.path(), "name = \"x\"\n[[tasks]]\nname = \"t\"\nglue = \"../t.wasm\"\n", &[]);
    let refused = deploy(&gateway, escape.path(), &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("leaves the bundle"));

    assert_eq!(gateway.http("POST", "/v1/apps/crops/invoke", &[], &crop_request()).status, 200);
    let apps = gateway.http("GET", "/v1/apps", &[], b"").json();
    assert_eq!(apps["apps"].as_array().unwrap().len(), 1, "{apps}");
}

#[test]
fn deployed_apps_survive_kill_9_and_delete_removes_them() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    crops_bundle(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    gateway.kill();

    let gateway = Gateway::start(state.path(), &[]);
    let reply = gateway.http("POST", "/v1/apps/crops/invoke", &[], &crop_request());
    assert_eq!(reply.status, 200, "served after a restart without a redeploy: {}", reply.text());

    assert_ok(&gateway.jig("delete").arg("crops").output().unwrap());
    assert_eq!(gateway.http("POST", "/v1/apps/crops/invoke", &[], &crop_request()).status, 404);
    let status = gateway.jig("status").arg("crops").output().unwrap();
    assert_eq!(status.status.code(), Some(1));
    let bundles = std::fs::read_dir(state.path().join("bundles")).unwrap().count();
    assert_eq!(bundles, 0, "the deleted app's bundle is removed");
}

#[test]
fn a_redeploy_under_steady_load_loses_no_request() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "steady");
    let gateway = Gateway::start(state.path(), &[]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (addr, stop) = (gateway.addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let payload = serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [1, 64], "values": vec![0.5; 64]});
                let mut codes = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let reply = jig_test_support::http(&addr, "POST", "/v1/apps/steady/invoke", &[], payload.to_string().as_bytes());
                    codes.push(reply.status);
                }
                codes
            })
        })
        .collect();
    // A changed bundle (a new hash) replaces the running app twice while the clients keep invoking.
    for accuracy in ["0.8", "0.9"] {
        let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
        let manifest = manifest
            .replace("accuracy = 0.7", &format!("accuracy = {accuracy}"))
            .replace("accuracy = 0.8", &format!("accuracy = {accuracy}"));
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        assert_ok(&deploy(&gateway, dir.path(), &[]));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let codes: Vec<u16> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    assert!(codes.len() > 20, "only {} requests", codes.len());
    assert!(codes.iter().all(|&c| c == 200), "{:?}", codes.iter().filter(|&&c| c != 200).collect::<Vec<_>>());
}

/// A profile table (hand-written, as `jig profile` writes them): `fast` serves 1000 req/s at 1 ms, `accurate`
/// 10 req/s on one core (18 on two) at 100 ms (60 ms).
const PROFILES: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device
classifier,fast,cpu:1,1,0.5,1,1000,test
classifier,fast,cpu:2,1,0.4,0.8,1200,test
classifier,accurate,cpu:1,1,90,100,10,test
classifier,accurate,cpu:2,1,50,60,18,test
";

/// The probe with two variants in slot `classifier` and the table above.
fn planned_bundle(dir: &Path, latency_ms: u64) {
    named_planned_bundle(dir, "planned", latency_ms)
}

fn named_planned_bundle(dir: &Path, name: &str, latency_ms: u64) {
    let manifest = format!(
        r#"
name = "{name}"
[slo]
latency_ms = {latency_ms}
accuracy = 0.5

[[tasks]]
name = "probe"
glue = "glue/probe.wasm"
slot = "classifier"

[[variants]]
slot = "classifier"
name = "fast"
model = "models/mlp.onnx"
accuracy = 0.7

[[variants]]
slot = "classifier"
name = "accurate"
model = "models/mixed.onnx"
accuracy = 0.9
"#
    );
    bundle(
        dir,
        &manifest,
        &[
            ("glue/probe.wasm", &component("jig_probe")),
            ("models/mlp.onnx", &model("mlp")),
            ("models/mixed.onnx", &model("mixed")),
        ],
    );
    std::fs::write(dir.join("profiles.csv"), PROFILES).unwrap();
}

fn deployed_variants(status: &serde_json::Value) -> Vec<String> {
    status["deployment"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["variant"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn deploy_plans_the_variants_that_meet_the_latency_slo() {
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &["--cores", "2"]);
    for (latency_ms, variant) in [(1000, "accurate"), (100, "fast")] {
        let dir = tempfile::tempdir().unwrap();
        planned_bundle(dir.path(), latency_ms);
        let deployed = deploy(&gateway, dir.path(), &["--json"]);
        assert_ok(&deployed);
        let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
        assert!(status["deployment"]["source"].as_str().unwrap().starts_with("planned"), "{status}");
        assert_eq!(deployed_variants(&status), [variant], "SLO {latency_ms} ms: {status}");
        // Each instance is placed on (and pinned to) as many cores as its segment has.
        let instance = &status["deployment"]["instances"][0];
        let cores_per_instance: u64 = instance["segment"].as_str().unwrap()["cpu:".len()..].parse().unwrap();
        let places = instance["places"].as_array().unwrap();
        assert_eq!(places.len() as u64, instance["count"].as_u64().unwrap(), "{status}");
        assert!(places.iter().all(|p| p["cores"].as_array().unwrap().len() as u64 == cores_per_instance), "{status}");
    }
}

/// The cores every instance of a deployed app's status is pinned to.
fn pinned_cores(status: &serde_json::Value) -> Vec<u64> {
    let instances = status["deployment"]["instances"].as_array().unwrap();
    let places = instances.iter().flat_map(|i| i["places"].as_array().unwrap());
    places.flat_map(|p| p["cores"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap())).collect()
}

#[test]
fn two_apps_never_hold_the_same_core_and_a_third_runs_unpinned() {
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &["--cores", "2", "--gpus", "none"]);
    let mut held = Vec::new();
    for name in ["first", "second"] {
        let dir = tempfile::tempdir().unwrap();
        named_planned_bundle(dir.path(), name, 1000);
        let deployed = deploy(&gateway, dir.path(), &["--json"]);
        assert_ok(&deployed);
        let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
        let cores = pinned_cores(&status);
        assert_eq!(cores.len(), 1, "1 req/s needs one `cpu:1` instance: {status}");
        assert!(!held.contains(&cores[0]), "core {} handed out twice: {status}", cores[0]);
        held.extend(cores);
    }
    let machine = gateway.http("GET", "/v1/devices", &[], b"").json();
    assert_eq!(machine["free_cores"], serde_json::json!([]), "{machine}");
    assert_eq!(machine["cores"].as_array().unwrap().len(), 2, "{machine}");

    // Nothing is left to plan on: the default deployment, unpinned, says why.
    let dir = tempfile::tempdir().unwrap();
    named_planned_bundle(dir.path(), "third", 1000);
    let deployed = deploy(&gateway, dir.path(), &["--json"]);
    assert_ok(&deployed);
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert!(status["deployment"]["source"].as_str().unwrap().contains("free: 0 cores"), "{status}");
    assert!(pinned_cores(&status).is_empty(), "{status}");
    let reply = gateway.http("POST", "/v1/apps/third/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(reply.status, 200, "{}", reply.text());

    // Deleting an app frees its core for the next plan.
    assert_ok(&gateway.jig("delete").arg("first").output().unwrap());
    let machine = gateway.http("GET", "/v1/devices", &[], b"").json();
    assert_eq!(machine["free_cores"].as_array().unwrap().len(), 1, "{machine}");
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains("jig_cpu_cores{state=\"free\"} 1\n"), "{metrics}");
    assert!(metrics.contains("jig_cpu_cores{state=\"held\"} 1\n"), "{metrics}");
    let status = gateway.jig("status").output().unwrap();
    assert_ok(&status);
    assert!(String::from_utf8_lossy(&status.stdout).contains("cores      1 of 2 free"), "{status:?}");
}

#[test]
fn the_controller_replans_as_demand_grows_without_losing_a_request() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    planned_bundle(dir.path(), 1000);
    let gateway = start_with_config(state.path(), "demand_window_s = 0.5\ncores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let status = gateway.http("GET", "/v1/apps/planned", &[], b"").json();
    assert_eq!(deployed_variants(&status), ["accurate"], "1 req/s expected: {status}");

    // About 100 req/s: more than `accurate` can serve on two cores, so the controller moves to `fast`.
    let fast = Duration::from_millis(5);
    let (codes, status) = drive(&gateway, "planned", fast, 300, |status| status["replans"].as_u64() >= Some(1));
    assert_eq!(deployed_variants(&status), ["fast"], "{status}");
    assert!(status["predicted_rps"].as_f64().unwrap() > 20.0, "{status}");
    assert!(codes.iter().all(|&c| c == 200), "{:?}", codes.iter().filter(|&&c| c != 200).collect::<Vec<_>>());
}

#[test]
fn a_re_plan_that_keeps_the_instances_serves_on_with_the_new_plans_demand() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    planned_bundle(dir.path(), 1000);
    let gateway = start_with_config(state.path(), "demand_window_s = 0.5\ncores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let planned_for = |status: &serde_json::Value| status["deployment"]["demand_rps"].as_f64().unwrap();
    let before = gateway.http("GET", "/v1/apps/planned", &[], b"").json();
    // About 4 req/s: one `accurate` instance (10 req/s) still serves it, so the re-plan starts nothing new.
    let (codes, status) =
        drive(&gateway, "planned", Duration::from_millis(250), 20, |status| status["replans"].as_u64() >= Some(1));
    assert!(status["replans"].as_u64() >= Some(1), "never re-planned: {status}");
    assert_eq!(deployed_variants(&status), ["accurate"], "{status}");
    let places = |status: &serde_json::Value| {
        let instances = status["deployment"]["instances"].as_array().unwrap().clone();
        instances.iter().map(|i| (i["variant"].clone(), i["count"].clone(), i["places"].clone())).collect::<Vec<_>>()
    };
    assert_eq!(places(&status), places(&before), "the same instances: {status}");
    assert!(planned_for(&status) > 2.0 * planned_for(&before), "planned for the demand it sees: {status}");
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
}

#[test]
fn three_re_plans_of_a_loaded_app_swap_deployments_without_failing_a_request() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    planned_bundle(dir.path(), 1000);
    let gateway = start_with_config(state.path(), "demand_window_s = 0.5\ncores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    // Load that swings between about 100 req/s (`fast` serves it) and about 5 (`accurate` does), never stopping:
    // each swing is a re-plan whose new copy of the app is swapped in under load.
    let (mut codes, mut replans) = (Vec::new(), 0);
    for (pause, variant) in [(5, "fast"), (200, "accurate"), (5, "fast")] {
        let swapped = |status: &serde_json::Value| deployed_variants(status) == [variant];
        let (answered, status) = drive(&gateway, "planned", Duration::from_millis(pause), 20, swapped);
        assert!(swapped(&status), "a request every {pause} ms was not re-planned onto `{variant}`: {status}");
        codes.extend(answered);
        replans = status["replans"].as_u64().unwrap();
    }
    assert!(replans >= 3, "{replans} re-plans");
    let failed: Vec<&u16> = codes.iter().filter(|&&c| c != 200).collect();
    assert!(failed.is_empty(), "{} of {} requests failed across three swaps: {failed:?}", failed.len(), codes.len());
}

#[test]
fn a_deployment_planned_from_declared_costs_is_re_planned_once_the_first_are_observed() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The bundle declares 20 ms of glue CPU a request (the probe's echo takes well under one) and a demand of
    // 50 req/s, which two cores serve either way, so that the load below is no surge; demand windows never
    // close during the test.
    planned_bundle(dir.path(), 1000);
    let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
    let manifest = manifest.replacen("slot = \"classifier\"\n", "slot = \"classifier\"\ncpu_ms = 20\n", 1);
    std::fs::write(dir.path().join("jig.toml"), format!("{manifest}\n[demand]\nrps = 50\n")).unwrap();
    let gateway = start_with_config(state.path(), "demand_window_s = 3600\ncores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let planned_cpu = |status: &serde_json::Value| status["deployment"]["unplanned_cpu_ms"].as_f64();
    let status = gateway.http("GET", "/v1/apps/planned", &[], b"").json();
    assert_eq!(planned_cpu(&status), Some(20.0), "declared: {status}");

    let observed = |status: &serde_json::Value| status["replans"].as_u64() >= Some(1);
    let (codes, status) = drive(&gateway, "planned", Duration::from_millis(20), 25, observed);
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
    assert!(observed(&status), "not re-planned once observed: {status}");
    assert!(planned_cpu(&status).is_none_or(|ms| ms < 2.0), "planned with what was observed: {status}");
}

/// An app of glue alone is sized by the CPU its glue costs: from the declared `cpu_ms` at its deploy, from what
/// its first 20 requests cost once they are answered (on an AMD EPYC VM the crop example's glue cost 35.8 ms
/// where 30 were declared, and the app stated 1.21× what the cores served).
#[test]
fn an_app_of_glue_alone_is_re_planned_with_the_cpu_its_glue_was_observed_to_cost() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let manifest = "name = \"glue\"\n[slo]\nlatency_ms = 1000\n\n\
                    [[tasks]]\nname = \"probe\"\nglue = \"glue/probe.wasm\"\ncpu_ms = 20\n";
    bundle(dir.path(), manifest, &[("glue/probe.wasm", &component("jig_probe"))]);
    let gateway = start_with_config(state.path(), "demand_window_s = 3600\ncores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let status = gateway.http("GET", "/v1/apps/glue", &[], b"").json();
    let cpu = |status: &serde_json::Value| status["deployment"]["unplanned_cpu_ms"].as_f64();
    let capacity = |status: &serde_json::Value| status["deployment"]["capacity_rps"].as_f64().unwrap_or(0.0);
    assert_eq!(cpu(&status), Some(20.0), "declared: {status}");
    let declared = capacity(&status);
    assert!((declared - 0.87 * 2.0 * 1000.0 / 20.0).abs() < 1.0, "{status}");

    let observed = |status: &serde_json::Value| status["replans"].as_u64() >= Some(1);
    let (codes, status) = drive(&gateway, "glue", Duration::from_millis(5), 25, observed);
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
    assert!(observed(&status), "not re-planned once observed: {status}");
    assert!(cpu(&status).is_some_and(|ms| ms < 5.0), "planned with what was observed: {status}");
    assert!(capacity(&status) > 4.0 * declared, "{status}");
}

#[test]
fn an_unpinned_instance_a_re_plan_keeps_is_counted_once() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Slot `extra` (a 4096×4096 matrix product, no task names it) beside the planned classifier, on one core:
    // its default instance runs unpinned there, and the plan counts its CPU time a request.
    planned_bundle(dir.path(), 1000);
    let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
    let extra = "\n[[variants]]\nslot = \"extra\"\nname = \"big\"\nmodel = \"models/big.onnx\"\naccuracy = 1.0\n";
    std::fs::write(dir.path().join("jig.toml"), manifest + extra).unwrap();
    std::fs::copy(model("big"), dir.path().join("models/big.onnx")).unwrap();
    let gateway = start_with_config(state.path(), "demand_window_s = 0.5\ncores = 1\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    // Load that swings (`fast`, `accurate`, `fast`), each request a product on `extra`: re-plans that change the
    // classifier and keep `extra`'s instance running.
    let payload = br#"{"op": "infer", "slot": "extra", "count": 1, "shape": [1, 4096]}"#;
    let mut status = serde_json::Value::Null;
    for (pause, variant) in [(5, "fast"), (200, "accurate"), (5, "fast")] {
        let swapped = |status: &serde_json::Value| deployed_variants(status).iter().any(|v| v == variant);
        let (codes, last) = drive_with(&gateway, "planned", payload, Duration::from_millis(pause), 20, swapped);
        assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
        status = last;
    }
    assert!(status["replans"].as_u64() >= Some(2), "{status}");
    let extra = status["deployment"]["instances"].as_array().unwrap().iter().find(|i| i["slot"] == "extra").cloned();
    assert!(extra.is_some_and(|i| i["places"] == serde_json::json!([])), "`extra` runs unpinned: {status}");
    // Its CPU time, counted once, is within the time it spent running batches.
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    let busy_s: f64 = (metrics.lines())
        .filter(|l| l.starts_with("jig_instance_busy_seconds_total{") && l.contains("slot=\"extra\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    let unpinned_ms = status["observed_unpinned_ms"].as_f64().unwrap();
    assert!(unpinned_ms > 0.0 && unpinned_ms <= busy_s * 1e3 + 1.0, "{unpinned_ms} ms of CPU counted, {busy_s} s busy");
}

/// Invoke `app` one request (an echo) at a time, `pause` apart, for at least `least` requests, until `done` holds
/// of its status (checked every 20 requests, or every second when slower) or 20 s pass; the answers' status
/// codes, and the last status.
fn drive(
    gateway: &Gateway,
    app: &str,
    pause: Duration,
    least: usize,
    done: impl Fn(&serde_json::Value) -> bool,
) -> (Vec<u16>, serde_json::Value) {
    drive_with(gateway, app, br#"{"op": "echo", "text": "1"}"#, pause, least, done)
}

/// [`drive`] with `payload` as each request.
fn drive_with(
    gateway: &Gateway,
    app: &str,
    payload: &[u8],
    pause: Duration,
    least: usize,
    done: impl Fn(&serde_json::Value) -> bool,
) -> (Vec<u16>, serde_json::Value) {
    let started = Instant::now();
    let (mut codes, mut status) = (Vec::new(), serde_json::Value::Null);
    let mut looked = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        let reply = gateway.http("POST", &format!("/v1/apps/{app}/invoke"), &[], payload);
        codes.push(reply.status);
        std::thread::sleep(pause);
        if codes.len() % 20 == 0 || looked.elapsed() > Duration::from_secs(1) {
            looked = Instant::now();
            status = gateway.http("GET", &format!("/v1/apps/{app}"), &[], b"").json();
            if done(&status) && codes.len() >= least {
                break;
            }
        }
    }
    (codes, status)
}

#[test]
fn an_ipa_app_scales_its_replicas_as_demand_grows_without_losing_a_request() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // One replica (IPA's base allocation: one core) serves 60 req/s, as the planner believes.
    let profiles =
        "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\nclassifier,fast,cpu:1,1,10,15,60,test\n";
    jig_test_support::probe_app(dir.path(), "scaled", 0.7, Some(profiles));
    let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
    // It adapts every second (`[ipa] interval_s`); the gateway's demand windows never close during the test, so
    // only IPA's adaptation can re-plan it.
    std::fs::write(dir.path().join("jig.toml"), format!("planner = \"ipa\"\n{manifest}\n[ipa]\ninterval_s = 1\n"))
        .unwrap();
    let gateway = start_with_config(state.path(), "demand_window_s = 3600\ncores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let replicas = |status: &serde_json::Value| -> u64 {
        status["deployment"]["instances"].as_array().unwrap().iter().map(|i| i["count"].as_u64().unwrap()).sum()
    };
    let status = gateway.http("GET", "/v1/apps/scaled", &[], b"").json();
    assert!(status["deployment"]["source"].as_str().unwrap().contains("by ipa"), "{status}");
    assert_eq!(replicas(&status), 1, "1 req/s expected: {status}");

    // A rising `jig bench` load, doubling every two seconds up to 160 req/s: beyond 60 req/s one replica no
    // longer serves, so the controller's re-plan adds the second; every request is answered.
    let payload = dir.path().join("echo.json");
    std::fs::write(&payload, br#"{"op": "echo", "text": "1"}"#).unwrap();
    let (started, mut rate, mut sent, mut ok) = (Instant::now(), 20.0f64, 0, 0);
    let status = loop {
        let bench = gateway
            .jig("bench")
            .args(["scaled", payload.to_str().unwrap(), "--rate", &rate.to_string(), "--duration", "2", "--json"])
            .output()
            .unwrap();
        assert_ok(&bench);
        let report: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
        sent += report["sent"].as_u64().unwrap();
        ok += report["ok"].as_u64().unwrap();
        let status = gateway.http("GET", "/v1/apps/scaled", &[], b"").json();
        if (status["replans"].as_u64() >= Some(1) && replicas(&status) == 2)
            || started.elapsed() > Duration::from_secs(40)
        {
            break status;
        }
        rate = (rate * 2.0).min(160.0);
    };
    assert_eq!(replicas(&status), 2, "at {rate} req/s: {status}");
    assert!(status["deployment"]["source"].as_str().unwrap().contains("by ipa"), "{status}");
    assert!(sent > 100 && ok == sent, "{ok} of {sent} requests answered");
}

/// A Compass app with two query classes over one slot: `fast` (60 ms) only the fast variant meets, `best` (the
/// most accurate) only the accurate one. Each class's requests run on its own route; a request must name a
/// class the app has.
#[test]
fn a_compass_app_serves_each_query_class_on_its_own_route() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let manifest = r#"
name = "classes"
planner = "compass"
classes = [
  { name = "fast", latency_ms = 60, accuracy = 0.5, share = 0.5 },
  { name = "best", latency_ms = 2000, accuracy = 1.0, share = 0.5 },
]
[slo]
latency_ms = 2000
accuracy = 0.5

[[tasks]]
name = "probe"
glue = "glue/probe.wasm"
slot = "classifier"

[[variants]]
slot = "classifier"
name = "fast"
model = "models/mlp.onnx"
accuracy = 0.7

[[variants]]
slot = "classifier"
name = "accurate"
model = "models/mlp.onnx"
accuracy = 0.9
"#;
    bundle(dir.path(), manifest, &[("glue/probe.wasm", &component("jig_probe")), ("models/mlp.onnx", &model("mlp"))]);
    // 2·L of `accurate` is 200 ms, over `fast`'s 60 ms; `fast` is 0.78 of the best accuracy, under `best`'s 1.
    let profiles = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
                    classifier,fast,cpu:1,1,1,2,500,test\nclassifier,accurate,cpu:1,1,90,100,10,test\n";
    std::fs::write(dir.path().join("profiles.csv"), profiles).unwrap();
    let gateway = start_with_config(state.path(), "cores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let status = gateway.http("GET", "/v1/apps/classes", &[], b"").json();
    assert!(status["deployment"]["source"].as_str().unwrap().contains("by compass"), "{status}");
    let route = |class: &str| -> Vec<String> {
        let classes = status["deployment"]["classes"].as_array().unwrap();
        let c = classes.iter().find(|c| c["class"] == class).unwrap();
        c["routes"].as_array().unwrap().iter().map(|r| r["steps"][0]["variant"].as_str().unwrap().into()).collect()
    };
    assert_eq!((route("fast"), route("best")), (vec!["fast".to_string()], vec!["accurate".to_string()]), "{status}");

    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [1, 64], "values": vec![0.5; 64]});
    let invoke = |class: Option<&str>| {
        let headers: Vec<(&str, &str)> = class.map(|c| ("jig-class", c)).into_iter().collect();
        gateway.http("POST", "/v1/apps/classes/invoke", &headers, payload.to_string().as_bytes())
    };
    let batches = |variant: &str| -> u64 {
        let status = gateway.http("GET", "/v1/apps/classes", &[], b"").json();
        let observed = status["observed_latencies"].as_array().unwrap().clone();
        observed.iter().filter(|o| o["variant"] == variant).map(|o| o["batches"].as_u64().unwrap()).sum()
    };
    for _ in 0..5 {
        let reply = invoke(Some("best"));
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    assert_eq!((batches("accurate"), batches("fast")), (5, 0), "`best` runs on the accurate variant only");
    for _ in 0..5 {
        assert_eq!(invoke(Some("fast")).status, 200);
    }
    assert_eq!((batches("accurate"), batches("fast")), (5, 5), "`fast` runs on the fast variant only");

    // A request must name one of the app's classes.
    for (class, says) in [(None, "name one in the `jig-class` header"), (Some("cheap"), "has no query class `cheap`")] {
        let reply = invoke(class);
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert!(reply.text().contains(says) && reply.text().contains("best, fast"), "{}", reply.text());
    }
}

#[test]
fn oversized_uploads_truncated_bodies_and_vanishing_clients_leave_the_gateway_serving() {
    use std::io::Write;
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "probe");
    let gateway = start_with_config(state.path(), "max_bundle_mib = 1\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    let upload = gateway.http("POST", "/v1/apps", &[], &vec![0u8; 2 << 20]);
    assert_eq!(upload.status, 413, "{}", upload.text());
    assert!(upload.text().contains("bundle upload"));

    // A body that stops short of its declared length.
    let mut stream = std::net::TcpStream::connect(&gateway.addr).unwrap();
    write!(stream, "POST /v1/apps/probe/invoke HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{{\"op\"").unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    drop(stream);

    // A client that goes away while its request spins: the request is cancelled, not left running.
    let mut stream = std::net::TcpStream::connect(&gateway.addr).unwrap();
    let body = br#"{"op": "spin"}"#;
    write!(
        stream,
        "POST /v1/apps/probe/invoke HTTP/1.1\r\nhost: x\r\njig-timeout-ms: 20000\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let in_flight = r#"jig_requests_in_flight{app="probe"}"#;
    assert!(gateway.http("GET", "/metrics", &[], b"").text().contains(&format!("{in_flight} 1")));
    drop(stream);
    let started = Instant::now();
    loop {
        let metrics = gateway.http("GET", "/metrics", &[], b"").text();
        if metrics.contains(&format!("{in_flight} 0")) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(3), "the abandoned request still runs: {metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let echo = gateway.http("POST", "/v1/apps/probe/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(echo.status, 200, "{}", echo.text());
}

#[test]
fn a_client_that_never_finishes_its_headers_is_cut_off_and_frees_its_connection() {
    use std::io::{Read, Write};
    let scratch = tempfile::tempdir().unwrap();
    // One connection at a time: while the slow client holds it, nobody else is served.
    let gateway = start_with_config(scratch.path(), "header_timeout_s = 1.0\nmax_connections = 1\n");
    let mut slow = std::net::TcpStream::connect(&gateway.addr).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));

    // Served once the slow client's header timeout closes its connection; without it, no answer comes.
    let reply = gateway.http("GET", "/healthz", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());

    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let read = slow.read_to_end(&mut rest);
    assert!(read.is_ok(), "the slow client's connection should be closed, not left open: {read:?}");
}

#[test]
fn grpc_connections_count_against_the_same_caps_as_http_ones() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let scratch = tempfile::tempdir().unwrap();
    // One connection a peer: a client that holds an HTTP connection gets no gRPC one. Room for more in all, so
    // that the gRPC listener always holds a permit and refuses the connection at once: with two in all, it could
    // wait in the backlog for the HTTP connection's permit and be served when that one's header timeout ended it.
    let config =
        "max_connections = 8\nmax_connections_per_peer = 1\nheader_timeout_s = 6.0\ngrpc_listen = \"127.0.0.1:0\"\n";
    let gateway = start_with_config(scratch.path(), config);
    let grpc = gateway.grpc_addr.clone().expect("the gateway serves gRPC on `grpc_listen`");
    // HTTP/2's client preface and an empty SETTINGS frame: a server that serves the connection answers with its own.
    let answered = |mut stream: TcpStream| {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0");
        stream.read(&mut [0u8; 64]).unwrap_or(0)
    };
    // An HTTP connection kept open after its answer, so surely accepted (and for the header timeout at most).
    let mut http = TcpStream::connect(&gateway.addr).unwrap();
    http.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    assert!(http.read(&mut [0u8; 256]).unwrap() > 0);
    assert_eq!(answered(TcpStream::connect(&grpc).unwrap()), 0, "the peer's second connection was served");
    drop(http);
    std::thread::sleep(Duration::from_millis(300));
    assert!(answered(TcpStream::connect(&grpc).unwrap()) > 0, "its place, given back, was not taken by gRPC");
    // A client that connects and sends nothing is served (once the last one's place is back), closed at the
    // header timeout, and gives its place back.
    std::thread::sleep(Duration::from_millis(300));
    let mut silent = TcpStream::connect(&grpc).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = Instant::now();
    let mut settings = Vec::new();
    let _ = silent.read_to_end(&mut settings); // the server's SETTINGS, then the end (or a reset)
    assert!(!settings.is_empty(), "the silent client was closed unanswered, not served");
    assert!(started.elapsed() < Duration::from_secs(15), "still open after {:?}", started.elapsed());
    assert!(answered(TcpStream::connect(&grpc).unwrap()) > 0, "the silent client's place was not given back");
}

/// The planned app `small`, every variant of which serves 2 req/s: one instance serves the 1 req/s planned
/// for, and the app admits 2 requests (2 req/s × its 1 s SLO) at once.
fn two_at_once_app(dir: &Path) {
    named_planned_bundle(dir, "small", 1000);
    let slow = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device
classifier,fast,cpu:1,1,400,450,2,test
classifier,accurate,cpu:1,1,400,450,2,test
";
    std::fs::write(dir.join("profiles.csv"), slow).unwrap();
}

#[test]
fn a_planned_app_admits_what_its_capacity_serves_within_the_slo_refuses_the_rest_at_once_and_learns_from_misses() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    two_at_once_app(dir.path());
    let gateway = Gateway::start(state.path(), &["--cores", "1"]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let status = gateway.http("GET", "/v1/apps/small", &[], b"").json();
    assert_eq!(status["deployment"]["capacity_rps"].as_f64(), Some(2.0), "{status}");

    // Six requests at once that each hold their place until their deadline.
    let replies: Vec<jig_test_support::Reply> = std::thread::scope(|s| {
        let spin =
            || gateway.http("POST", "/v1/apps/small/invoke", &[("jig-timeout-ms", "1500")], br#"{"op": "spin"}"#);
        let running: Vec<_> = (0..6).map(|_| s.spawn(spin)).collect();
        running.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let mut codes: Vec<u16> = replies.iter().map(|r| r.status).collect();
    codes.sort();
    assert_eq!(codes, [503, 503, 503, 503, 504, 504], "two admitted (late), four refused");
    for refused in replies.iter().filter(|r| r.status == 503) {
        assert_eq!(refused.error().kind, ErrorKind::Overloaded);
        assert_eq!(refused.header("retry-after"), Some("1"));
        assert!(refused.text().contains("planned capacity"), "{}", refused.text());
    }
    // The two that missed their deadline cut the limit (once: within a second) from 2 to 1.5.
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains(r#"jig_admission_limit{app="small"} 1"#), "{metrics}");
    let echo = gateway.http("POST", "/v1/apps/small/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(echo.status, 200, "served again once the others ended: {}", echo.text());
}

#[test]
fn clients_that_send_headers_and_no_body_hold_no_admission_place_and_are_cut_off() {
    use std::io::{Read, Write};
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    two_at_once_app(dir.path());
    let config = state.path().join("gateway.toml");
    std::fs::write(&config, "body_timeout_s = 1.5\n").unwrap();
    let gateway = Gateway::start(&state.path().join("state"), &["--cores", "1", "--config", config.to_str().unwrap()]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    // Four clients announce a body, with a long timeout, and send none: before its body was read, each took an
    // admission place, and these four locked the app out.
    let stalled: Vec<std::net::TcpStream> = (0..4)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&gateway.addr).unwrap();
            let head = "POST /v1/apps/small/invoke HTTP/1.1\r\nhost: x\r\njig-timeout-ms: 600000\r\n\
                        content-length: 100\r\n\r\n";
            c.write_all(head.as_bytes()).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let echo = gateway.http("POST", "/v1/apps/small/invoke", &[], br#"{"op": "echo", "text": "1"}"#);
    assert_eq!(echo.status, 200, "a whole request is served beside bodies that never come: {}", echo.text());

    // Each stalled client is answered 400 at the body timeout, naming it.
    for mut c in stalled {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = vec![0u8; 4096];
        let n = c.read(&mut answer).unwrap_or(0);
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("body_timeout_s"), "{answer}");
    }
}

/// The factor between model tasks is observed over the last five demand windows and the open one
/// (JigsawServe §3.2), not since the deploy.
#[test]
fn the_factor_between_model_tasks_is_observed_over_the_last_windows_and_exported() {
    let (scratch, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let manifest = r#"
name = "fan"
[[tasks]]
name = "first"
glue = "glue/probe.wasm"
slot = "a"

[[tasks]]
name = "second"
glue = "glue/echo.wasm"
slot = "b"

[[edges]]
from = "first.out"
to = "second"

[[variants]]
slot = "a"
name = "mlp-a"
model = "models/mlp.onnx"

[[variants]]
slot = "b"
name = "mlp-b"
model = "models/mlp.onnx"
"#;
    let files = [
        ("glue/probe.wasm", component("jig_probe")),
        ("glue/echo.wasm", component("echo")),
        ("models/mlp.onnx", model("mlp")),
    ];
    bundle(dir.path(), manifest, &files.iter().map(|(n, p)| (*n, p.as_path())).collect::<Vec<_>>());
    let gateway = start_with_config(scratch.path(), "demand_window_s = 1\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let emit = |counts: &[u32]| {
        for count in counts {
            let body = format!(r#"{{"op": "emit", "port": "out", "count": {count}, "bytes": 4}}"#);
            let reply = gateway.http("POST", "/v1/apps/fan/invoke", &[], body.as_bytes());
            assert_eq!(reply.status, 200, "{}", reply.text());
        }
    };
    let observed = || {
        let status = gateway.http("GET", "/v1/apps/fan", &[], b"").json();
        let observed = &status["observed_factors"][0];
        assert_eq!((observed["from"].as_str(), observed["to"].as_str()), (Some("first"), Some("second")), "{status}");
        (observed["factor"].as_f64(), observed["samples"].as_u64())
    };
    emit(&[2, 3, 4]);
    assert_eq!(observed(), (Some(3.0), Some(3)));
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    assert!(metrics.contains(r#"jig_edge_factor{app="fan",from="first",to="second"} 3.0"#), "{metrics}");

    // Six windows later (and a margin for a busy machine) those invocations are out of the count: only the new
    // ones are (since the deploy: 2.0).
    std::thread::sleep(Duration::from_secs_f64(7.5));
    emit(&[1, 1, 1]);
    assert_eq!(observed(), (Some(1.0), Some(3)));
}

/// The echo glue with the `mixed` model (y = x * ids) in slot `m`: the v2 model `shop.m`.
fn mixed_slot_bundle(dir: &Path) {
    let manifest = "name = \"shop\"\n[[tasks]]\nname = \"score\"\nglue = \"glue/echo.wasm\"\nslot = \"m\"\n\
        [[variants]]\nslot = \"m\"\nname = \"mixed\"\nmodel = \"models/mixed.onnx\"\n";
    bundle(dir, manifest, &[("glue/echo.wasm", &component("echo")), ("models/mixed.onnx", &model("mixed"))]);
}

/// Model control of one slot restarts the app without it, and the other slot keeps its running instance (its
/// counters go on): a new copy loads only what changed.
#[test]
fn unloading_a_slot_keeps_the_other_slots_instances_running() {
    let (scratch, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    mixed_slot_bundle(dir.path());
    let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
    let extra = "[[variants]]\nslot = \"n\"\nname = \"small\"\nmodel = \"models/mlp.onnx\"\n";
    std::fs::write(dir.path().join("jig.toml"), format!("{manifest}{extra}")).unwrap();
    std::fs::copy(model("mlp"), dir.path().join("models/mlp.onnx")).unwrap();
    let gateway = start_with_config(scratch.path(), "cores = 2\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let infer = br#"{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]},
        {"name":"ids","shape":[1,4],"datatype":"INT64","data":[1,1,1,1]}]}"#;
    for _ in 0..3 {
        let reply = gateway.http("POST", "/v2/models/shop.m/infer", &[], infer);
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let served_by_m = |gateway: &Gateway| -> u64 {
        let metrics = gateway.http("GET", "/metrics", &[], b"").text();
        let line = metrics.lines().find(|l| l.starts_with("jig_instance_requests_total{app=\"shop\",slot=\"m\""));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or_else(|| panic!("no counter of m: {metrics}"))
    };
    assert_eq!(served_by_m(&gateway), 3);

    let unloaded = gateway.http("POST", "/v2/repository/models/shop.n/unload", &[], b"{}");
    assert_eq!(unloaded.status, 200, "{}", unloaded.text());
    assert_eq!(gateway.http("GET", "/v2/models/shop.n/ready", &[], b"").status, 503);
    assert_eq!(gateway.http("GET", "/v2/models/shop.m/ready", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/readyz", &[], b"").status, 200, "an unloaded slot keeps the gateway ready");
    assert_eq!(served_by_m(&gateway), 3, "slot m's instance was started anew, not kept");
    let status = gateway.http("GET", "/v1/apps/shop", &[], b"").json();
    let slots: Vec<&str> =
        status["deployment"]["instances"].as_array().unwrap().iter().map(|i| i["slot"].as_str().unwrap()).collect();
    assert_eq!(slots, ["m"], "{status}");

    let loaded = gateway.http("POST", "/v2/repository/models/shop.n/load", &[], b"{}");
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    assert_eq!(gateway.http("GET", "/v2/models/shop.n/ready", &[], b"").status, 200);
    let whole = gateway.http("POST", "/v2/repository/models/shop/unload", &[], b"{}");
    assert_eq!(whole.status, 400, "an app is unloaded by deleting it: {}", whole.text());
}

#[test]
fn triton_and_kserve_clients_run_a_model_slot_over_the_open_inference_protocol() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    mixed_slot_bundle(dir.path());
    let gateway = start_with_config(scratch.path(), "invoke_token = \"let-me-in\"\ngrpc_listen = \"127.0.0.1:0\"\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    // Health is open; the models are behind the invoke token, as /v1 invocations are.
    assert_eq!(gateway.http("GET", "/v2/health/live", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/v2/health/ready", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/v2/models/shop.m", &[], b"").status, 401);
    let auth = [("authorization", "Bearer let-me-in")];
    let unknown = gateway.http("GET", "/v2/models/shop.nope", &auth, b"");
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"].as_str().unwrap().contains("`shop` has the slots: m"), "{}", unknown.text());
    // An app is a v2 model itself only when it declares `[tensors]` (cli/tests/e2e/partition.rs serves one).
    let app = gateway.http("GET", "/v2/models/shop", &auth, b"");
    assert_eq!(app.status, 404);
    assert!(app.text().contains("app `shop` declares no `[tensors]`"), "{}", app.text());

    // Binary tensors after the JSON, a binary output back.
    let head = br#"{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}},
        {"name":"ids","shape":[1,4],"datatype":"INT64","data":[[1,2,3,-4]]}],
        "outputs":[{"name":"y","parameters":{"binary_data":true}}]}"#;
    let mut body = head.to_vec();
    body.extend([0.5f32, 1.0, 1.5, 2.0].iter().flat_map(|v| v.to_le_bytes()));
    let length = head.len().to_string();
    let headers = [auth[0], ("inference-header-content-length", length.as_str())];
    let reply = gateway.http("POST", "/v2/models/shop.m/infer", &headers, &body);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let json_length: usize = reply.header("inference-header-content-length").unwrap().parse().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&reply.body[..json_length]).unwrap();
    assert_eq!(answer["outputs"][0]["parameters"]["binary_data_size"], 16, "{answer}");
    let y: Vec<f32> = reply.body[json_length..].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(y, [0.5, 2.0, 4.5, -8.0]);

    // A size that disagrees with the body gets the protocol's error JSON, and the next request is served.
    let short = gateway.http("POST", "/v2/models/shop.m/infer", &headers, &body[..body.len() - 4]);
    assert_eq!(short.status, 400);
    assert!(short.json()["error"].as_str().unwrap().contains("only 12 bytes"), "{}", short.text());

    // A tensor of the wrong rank is refused in the model's terms: its v2 name and the protocol's type names,
    // not the instance serving it.
    let flat = br#"{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[1,2,3,4]},
        {"name":"ids","shape":[4],"datatype":"INT64","data":[1,2,3,4]}]}"#;
    let wrong = gateway.http("POST", "/v2/models/shop.m/infer", &auth, flat);
    assert_eq!(wrong.status, 400, "{}", wrong.text());
    let said = wrong.json()["error"].as_str().unwrap().to_string();
    assert!(said.starts_with("model `shop.m`: ") && said.contains("FP32"), "{said}");
    assert!(!said.contains("instance") && !said.contains("F32 ") && !said.contains('#'), "{said}");

    // The real clients users of Triton and KServe have (set-up installs them into .jig/python-clients), over
    // HTTP and over gRPC.
    let grpc = gateway.grpc_addr.clone().expect("the gateway serves gRPC on `grpc_listen`");
    for (client, addr) in [
        ("triton_client.py", &gateway.addr),
        ("kserve_client.py", &gateway.addr),
        ("triton_grpc_client.py", &grpc),
        ("kserve_grpc_client.py", &grpc),
    ] {
        let output = std::process::Command::new("python3")
            .arg(root().join("tests/oip").join(client))
            .args([addr.as_str(), "shop.m", "let-me-in"])
            .env("PYTHONPATH", root().join(".jig/python-clients"))
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(
            // KServe's client logs the refusals it is shown to standard error.
            output.status.success() && String::from_utf8_lossy(&output.stdout).trim_end().ends_with("ok"),
            "{client}: {said}\n(scripts/setup.sh installs the clients into .jig/python-clients)"
        );
    }
    // Direct model calls are counted as the model's, apart from the app's invocations; a scraper gets the text
    // format unless it asks for OpenMetrics, as Prometheus does.
    let metrics = gateway.http("GET", "/metrics", &[], b"");
    assert!(metrics.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"), "{metrics:?}");
    let text = metrics.text();
    assert!(text.contains(r#"jig_model_requests_total{app="shop",slot="m",code="200"}"#), "{text}");
    assert!(!text.contains(r#"jig_requests_total{app="shop""#), "{text}");
    assert!(text.contains("# TYPE jig_model_requests_total counter") && !text.contains("# EOF"), "{text}");
    let accept = [("accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")];
    let openmetrics = gateway.http("GET", "/metrics", &accept, b"");
    assert!(openmetrics.header("content-type").unwrap().starts_with("application/openmetrics-text"));
    assert!(openmetrics.text().trim_end().ends_with("# EOF"), "{}", openmetrics.text());
}

/// A model file damaged in the state directory (a disk fault, a stray edit) is repaired by redeploying the same
/// bundle: the stored copy is checked against the upload and replaced, rather than the upload blamed for it.
#[test]
fn a_redeploy_of_the_same_bundle_repairs_its_damaged_stored_copy() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    probe_bundle(dir.path(), "repaired");
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = deploy(&gateway, dir.path(), &["--json"]);
    assert_ok(&deployed);
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    let stored = state.path().join("bundles").join(status["bundle"].as_str().unwrap()).join("models/mlp.onnx");
    gateway.kill();
    let model = std::fs::read(&stored).unwrap();
    std::fs::write(&stored, &model[..model.len() / 2]).unwrap();

    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let gateway = Gateway::start(state.path(), &[]);
    // Alive, but not ready while an app it should run cannot start: the probes say which and why.
    assert_eq!(gateway.http("GET", "/healthz", &[], b"").status, 200);
    let unready = gateway.http("GET", "/readyz", &[], b"");
    assert_eq!(unready.status, 503, "{}", unready.text());
    assert!(unready.text().contains("app `repaired`: cannot start"), "{}", unready.text());
    assert_eq!(gateway.http("GET", "/v2/health/ready", &[], b"").error().kind, jig_api::ErrorKind::Unavailable);
    let slot = gateway.http("GET", "/v2/models/repaired.classifier/ready", &[], b"");
    assert_eq!(slot.status, 503, "{}", slot.text());
    let redeployed = deploy(&gateway, dir.path(), &["--json"]);
    assert_ok(&redeployed);
    let again: serde_json::Value = serde_json::from_slice(&redeployed.stdout).unwrap();
    assert_eq!(again["bundle"], status["bundle"], "the same bytes, stored again");
    assert_eq!(std::fs::read(&stored).unwrap(), model, "the stored model is whole again");
    let reply = gateway.http("POST", "/v1/apps/repaired/invoke", &[], payload.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(gateway.http("GET", "/readyz", &[], b"").text(), "ready\n");
    assert_eq!(gateway.http("GET", "/v2/health/ready", &[], b"").status, 200);
    assert_eq!(gateway.http("GET", "/v2/models/repaired.classifier/ready", &[], b"").status, 200);

    // And a restart restores the app from the repaired copy.
    gateway.kill();
    let gateway = Gateway::start(state.path(), &[]);
    let reply = gateway.http("POST", "/v1/apps/repaired/invoke", &[], payload.to_string().as_bytes());
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// A deploy killed between unpacking its bundle and recording its app leaves the bundle in `bundles/` with no
/// app naming it: the gateway removes it when it starts, and keeps the bundles its apps use.
#[test]
fn bundles_no_app_names_are_removed_when_the_gateway_starts() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    crops_bundle(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    gateway.kill();
    let bundles = state.path().join("bundles");
    let used: Vec<_> = std::fs::read_dir(&bundles).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(used.len(), 1, "{used:?}");
    let orphan = bundles.join("0".repeat(64));
    std::fs::create_dir_all(orphan.join("glue")).unwrap();
    std::fs::write(orphan.join("jig.toml"), CROPS.replace("name = \"crops\"", "name = \"killed\"")).unwrap();
    std::fs::copy(component("echo"), orphan.join("glue/echo.wasm")).unwrap();

    let gateway = Gateway::start(state.path(), &[]);
    assert!(!orphan.exists(), "the bundle no app names is removed on start");
    assert!(used[0].join("jig.toml").is_file(), "the bundle of `crops` stays");
    assert_eq!(gateway.http("POST", "/v1/apps/crops/invoke", &[], &crop_request()).status, 200);
}

#[test]
fn no_client_has_a_deadline_past_the_gateways_maximum() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    jig_test_support::probe_app(dir.path(), "probe", 0.7, None);
    let gateway = start_with_config(state.path(), "max_timeout_s = 2.0\n");
    assert_ok(&deploy(&gateway, dir.path(), &[]));

    // A client asks for ten minutes: its glue is given the gateway's two seconds.
    let reply =
        gateway.http("POST", "/v1/apps/probe/invoke", &[("jig-timeout-ms", "600000")], br#"{"op": "remaining"}"#);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let remaining_ns = reply.json()["outputs"][0]["json"].as_f64().unwrap();
    assert!(remaining_ns > 0.0 && remaining_ns <= 2e9, "{remaining_ns} ns left of a 600 s timeout");
}

/// A gateway stand-in that answers the deploy's first check, reads the upload whole and closes without an
/// answer (as a gateway killed after applying it, or a network cut, does), then answers `GET /v1/apps/NAME`
/// with `status`.
fn answer_lost_after_upload(status: Vec<u8>) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut reader = BufReader::new(stream.unwrap());
            loop {
                let (mut head, mut line) = (Vec::new(), String::new());
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    head.push(std::mem::take(&mut line));
                }
                let Some(request) = head.first() else { break };
                let length = head
                    .iter()
                    .find_map(|h| {
                        h.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0u64);
                std::io::copy(&mut (&mut reader).take(length), &mut std::io::sink()).unwrap();
                let body: &[u8] = if request.starts_with("POST") {
                    break; // the upload arrived; its answer never leaves
                } else if request.starts_with("GET /v1/apps/") {
                    &status
                } else {
                    b"{\"apps\":[]}"
                };
                let mut stream = reader.get_ref();
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                )
                .unwrap();
                stream.write_all(body).unwrap();
            }
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_deploy_whose_answer_is_lost_says_whether_the_gateway_applied_it() {
    let scratch = tempfile::tempdir().unwrap();
    let app = scratch.path().join("app");
    probe_bundle(&app, "lost");
    let gateway = Gateway::start(&scratch.path().join("state"), &[]);
    let deployed = gateway.jig("deploy").arg(&app).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let status = gateway.http("GET", "/v1/apps/lost", &[], b"").body;

    // The gateway runs the very bundle this deploy sent: applied, though the answer was lost.
    let url = answer_lost_after_upload(status.clone());
    let applied = jig_test_support::jig().args(["deploy", "--gateway", &url]).arg(&app).output().unwrap();
    let said = String::from_utf8_lossy(&applied.stderr);
    assert!(applied.status.success() && said.contains("applied it all the same"), "{said}");

    // Another bundle of the app: not applied, and the gateway's one is named.
    let manifest = std::fs::read_to_string(app.join("jig.toml")).unwrap();
    std::fs::write(app.join("jig.toml"), format!("{manifest}\n[slo]\nlatency_ms = 4000\n")).unwrap();
    let url = answer_lost_after_upload(status);
    let kept = jig_test_support::jig().args(["deploy", "--gateway", &url]).arg(&app).output().unwrap();
    let said = String::from_utf8_lossy(&kept.stderr);
    assert_eq!(kept.status.code(), Some(3), "{said}");
    assert!(said.contains("not applied") && said.contains("still runs bundle"), "{said}");
}

/// `--cores` beyond what the machine lets jig run on stops `jig up` with the number it has, rather than a plan
/// silently cut to it.
#[test]
fn a_gateway_given_more_cores_than_the_machine_has_says_how_many_it_has() {
    let state = tempfile::tempdir().unwrap();
    let up = jig_test_support::jig()
        .args(["up", "--listen", "127.0.0.1:0", "--cores", "100000", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&up.stderr);
    assert!(!up.status.success(), "{said}");
    assert!(said.contains("`cores` is 100000, but this machine lets jig run on"), "{said}");
}

/// A refusal before the body is read (no such app, no token, no route) is still an answer the client reads:
/// the gateway reads what the client is sending (within its limits) before it closes, rather than resetting a
/// connection that still has bytes in flight. A client that sends its whole body before it reads (httpx, as
/// KServe's client uses it) failed on the reset, without the answer.
#[test]
fn a_client_refused_before_its_body_was_read_reads_the_refusal() {
    use std::io::{Read, Write};
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("gateway.toml");
    std::fs::write(&config, "invoke_token = \"secret\"\n").unwrap();
    let gateway = Gateway::start(&state.path().join("state"), &["--config", config.to_str().unwrap()]);
    let body = vec![7u8; 16 << 20];
    for (path, auth, status) in [
        ("/v1/apps/nope/invoke", true, "404"),
        ("/v2/models/nope/infer", true, "404"),
        ("/v1/apps/nope/invoke", false, "401"),
        ("/no/such/route", false, "404"),
    ] {
        let mut stream = std::net::TcpStream::connect(&gateway.addr).unwrap();
        let auth = if auth { "authorization: Bearer secret\r\n" } else { "" };
        let head = format!("POST {path} HTTP/1.1\r\nhost: jig\r\n{auth}content-length: {}\r\n\r\n", body.len());
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap_or_else(|e| panic!("{path}: the gateway cut the body off: {e}"));
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).unwrap();
        assert!(String::from_utf8_lossy(&answer).ends_with(status), "{path}: {}", String::from_utf8_lossy(&answer));
    }
}

/// A body sent with `Content-Encoding: gzip` or `deflate` (tritonclient's `request_compression_algorithm`) is
/// served as the plain one; another encoding, a body that does not decompress, and one that inflates past the
/// limit are the client's errors.
#[test]
fn compressed_bodies_are_served_as_plain_ones() {
    use std::io::Write;
    let scratch = tempfile::tempdir().unwrap();
    jig_test_support::probe_app(&scratch.path().join("app"), "squeezed", 0.7, None);
    let gateway = start_with_config(scratch.path(), "max_request_mib = 1\n");
    let deployed = gateway.jig("deploy").arg(scratch.path().join("app")).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let payload =
        serde_json::json!({"op": "infer-f32", "slot": "classifier", "shape": [2, 64], "values": vec![0.25; 128]});
    let plain = payload.to_string().into_bytes();
    let squeeze = |encoder: &mut dyn Write| encoder.write_all(&plain).unwrap();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    squeeze(&mut gzip);
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    squeeze(&mut deflate);
    let path = "/v1/apps/squeezed/invoke";
    let expected = gateway.http("POST", path, &[], &plain);
    assert_eq!(expected.status, 200, "{}", expected.text());
    for (encoding, body) in [("gzip", gzip.finish().unwrap()), ("deflate", deflate.finish().unwrap())] {
        let reply = gateway.http("POST", path, &[("content-encoding", encoding)], &body);
        assert_eq!(reply.status, 200, "{encoding}: {}", reply.text());
        assert_eq!(reply.json()["outputs"], expected.json()["outputs"], "{encoding}");
    }
    let br = gateway.http("POST", path, &[("content-encoding", "br")], &plain);
    assert_eq!(br.status, 400, "{}", br.text());
    assert!(br.text().contains("gzip, deflate"), "{}", br.text());
    let corrupt = gateway.http("POST", path, &[("content-encoding", "gzip")], b"not gzip at all");
    assert_eq!(corrupt.status, 400, "{}", corrupt.text());
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(&vec![b' '; 2 << 20]).unwrap();
    let bomb = gateway.http("POST", path, &[("content-encoding", "gzip")], &bomb.finish().unwrap());
    assert_eq!(bomb.status, 413, "two MiB inflated past a one-MiB limit: {}", bomb.text());
}

/// `/metrics` carries the build's version and the process's own figures under their conventional names, beside
/// jig's.
#[test]
fn metrics_carry_the_build_and_the_process() {
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &[]);
    let metrics = gateway.http("GET", "/metrics", &[], b"").text();
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value(&format!("jig_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"))), 1.0);
    assert!(value("process_resident_memory_bytes ") > 1e6, "{metrics}");
    assert!(value("process_virtual_memory_bytes ") >= value("process_resident_memory_bytes "));
    assert!(value("process_open_fds ") >= 3.0);
    assert!(value("process_cpu_seconds_total ") >= 0.0);
    let started = value("process_start_time_seconds ");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(started <= now + 1.0 && started > now - 600.0, "started {started}, now {now}");
    assert!(metrics.contains("# TYPE jig_cpu_cores gauge"), "jig's own keep their prefix");
}
