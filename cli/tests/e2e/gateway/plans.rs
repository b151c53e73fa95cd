//! Deploys planned from profiles, and what follows them: re-plans by the controller as demand and observed
//! costs move (none losing a request), IPA's and Compass's apps, admission by planned capacity.

use super::*;

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

/// The planned app `small`, every variant of which serves 2 req/s: one instance serves the 1 req/s planned
/// for, and the app admits 2 requests (2 req/s × its 1 s SLO) at once.
pub(super) fn two_at_once_app(dir: &Path) {
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
