//! The gateway as users run it: `jig up` on a loopback port, `jig deploy` of real bundles, invocations over
//! real HTTP, a restart after `kill -9`; planned deploys and re-plans (`plans`), model slots over the Open
//! Inference Protocol (`model_slots`), and what one client can hold (`clients`).

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jig_api::{AppList, ErrorKind, InvokeResponse};
use jig_test_support::{Gateway, bundle, component, model, root};

mod clients;
mod model_slots;
mod plans;

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

/// What `jig invoke` prints of an answer: text as it is (what `jig new`'s greeting answers), other bytes by their
/// size, and with `-o` each part in a file named for what it holds.
#[test]
fn invoke_shows_text_as_text_and_writes_parts_out_by_kind() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let manifest = "name = \"echo\"\n[[tasks]]\nname = \"echo\"\nglue = \"glue/echo.wasm\"\n";
    bundle(dir.path(), manifest, &[("glue/echo.wasm", &component("echo"))]);
    let gateway = Gateway::start(state.path(), &[]);
    assert_ok(&deploy(&gateway, dir.path(), &[]));
    let invoke = |input: &[u8], extra: &[&std::ffi::OsStr]| {
        let file = dir.path().join("input");
        std::fs::write(&file, input).unwrap();
        let invoked = gateway.jig("invoke").arg("echo").arg(&file).args(extra).output().unwrap();
        assert_ok(&invoked);
        String::from_utf8(invoked.stdout).unwrap()
    };
    assert_eq!(invoke(b"hello, world!\n", &[]), "[0] echo: hello, world!\n");
    assert_eq!(invoke(&[0, 159, 146, 150], &[]), "[0] echo: 4 B of binary data (write it out with --output-dir)\n");
    let out = tempfile::tempdir().unwrap();
    let shown = invoke(b"a line\n", &["-o".as_ref(), out.path().as_os_str()]);
    assert!(shown.contains("written to"), "{shown}");
    assert_eq!(std::fs::read(out.path().join("0-echo.txt")).unwrap(), b"a line\n", "{shown}");
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
