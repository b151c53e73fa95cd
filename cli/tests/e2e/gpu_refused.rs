//! A bundle profiled only on GPU segments, deployed on a gateway without a GPU: `jig deploy` is refused with a
//! message that names the app, the segments and what to do, and the gateway serves on as before.

use std::path::Path;
use std::process::Output;

use jig_test_support::{Gateway, probe_app};

const HEADER: &str = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n";

/// The probe's one-slot app, with `rows` of a profile table (none when `None`).
fn app(dir: &Path, name: &str, accuracy: f64, rows: Option<&str>) {
    probe_app(dir, name, accuracy, rows.map(|rows| format!("{HEADER}{rows}")).as_deref());
}

const ON_CORES: &str = "classifier,fast,cpu:1,1,1,2,500,test\n";
const ON_A_GPU: &str = "classifier,fast,mps:0:50,1,1,2,900,NVIDIA H100 80GB HBM3\n\
                        classifier,fast,mps:0:50,4,2,3,1800,NVIDIA H100 80GB HBM3\n";

fn deploy(gateway: &Gateway, dir: &Path) -> Output {
    gateway.jig("deploy").arg(dir).arg("--json").output().unwrap()
}

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn invoke(gateway: &Gateway, app: &str) -> u16 {
    gateway.http("POST", &format!("/v1/apps/{app}/invoke"), &[], br#"{"op": "echo", "text": "1"}"#).status
}

/// The deployed apps and their bundles' hashes.
fn apps(gateway: &Gateway) -> Vec<(String, String)> {
    let list = gateway.http("GET", "/v1/apps", &[], b"").json();
    let mut apps: Vec<(String, String)> = list["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap().to_string(), a["bundle"].as_str().unwrap().to_string()))
        .collect();
    apps.sort();
    apps
}

#[test]
fn a_bundle_profiled_only_on_a_gpu_is_refused_on_a_machine_without_one_and_the_gateway_serves_on() {
    let scratch = tempfile::tempdir().unwrap();
    let state = scratch.path().join("state");
    // No GPU for this gateway, whatever the machine has.
    let gateway = Gateway::start(&state, &["--gpus", "none"]);

    // An app planned on cores serves.
    let served = scratch.path().join("served");
    app(&served, "served", 0.9, Some(ON_CORES));
    let deployed = deploy(&gateway, &served);
    assert!(deployed.status.success(), "{}", said(&deployed));
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert!(status["deployment"]["source"].as_str().unwrap().starts_with("planned"), "{status}");
    let before = apps(&gateway);
    assert_eq!(before.len(), 1, "{before:?}");

    // A new app profiled only on mps:0:50 is refused: a 400 naming the app, its slot and segment, what the machine
    // offers and what to do.
    let gpu_only = scratch.path().join("gpu-only");
    app(&gpu_only, "gpu-only", 0.9, Some(ON_A_GPU));
    let refused = deploy(&gateway, &gpu_only);
    let text = said(&refused);
    assert_eq!(refused.status.code(), Some(1), "{text}");
    for named in [
        "app `gpu-only` cannot be deployed on this machine",
        "it measures slot `classifier` on mps:50",
        "(free: ",
        "the gateway has no GPU",
        "jig profile BUNDLE",
        "(400",
    ] {
        assert!(text.contains(named), "the refusal says {named:?}: {text}");
    }
    assert_eq!(invoke(&gateway, "gpu-only"), 404, "nothing of it is deployed");

    // A new version of the running app profiled only on the GPU is refused too; the old version serves on.
    app(&served, "served", 0.8, Some(ON_A_GPU));
    let refused = deploy(&gateway, &served);
    let text = said(&refused);
    assert_eq!(refused.status.code(), Some(1), "{text}");
    assert!(text.contains("app `served` cannot be deployed") && text.contains("mps:50"), "{text}");
    assert_eq!(apps(&gateway), before, "the previous deployment is kept");
    assert_eq!(invoke(&gateway, "served"), 200);

    // Nothing stored was lost: after a restart the previous version is restored and serves.
    gateway.kill();
    let gateway = Gateway::start(&state, &["--gpus", "none"]);
    assert_eq!(apps(&gateway), before, "restored as it was before the refused deploys");
    assert_eq!(invoke(&gateway, "served"), 200);

    // A bundle with no profile table at all still deploys, with the default deployment.
    let unprofiled = scratch.path().join("unprofiled");
    app(&unprofiled, "unprofiled", 0.9, None);
    let deployed = deploy(&gateway, &unprofiled);
    assert!(deployed.status.success(), "{}", said(&deployed));
    let status: serde_json::Value = serde_json::from_slice(&deployed.stdout).unwrap();
    assert!(status["deployment"]["source"].as_str().unwrap().contains("no profiles.csv"), "{status}");
    assert_eq!(invoke(&gateway, "unprofiled"), 200);
    assert_eq!(invoke(&gateway, "served"), 200);
}
