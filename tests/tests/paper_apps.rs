//! The paper's applications as users deploy them: examples/social-media on synthetic models of the paper's
//! families (the smallest variant of each slot, generated here), through `jig up`, `jig deploy` and HTTP.

use std::path::Path;

use jig_tests::{Gateway, bundle, component, root};

/// The example's manifest with only the variants named in `keep`.
fn manifest_with(example: &str, keep: &[&str]) -> String {
    let text = std::fs::read_to_string(root().join("examples").join(example).join("jig.toml")).unwrap();
    let mut parts = text.split("[[variants]]");
    let mut out = parts.next().unwrap().to_string();
    for variant in parts {
        if keep.iter().any(|k| variant.contains(&format!("name = \"{k}\""))) {
            out.push_str("[[variants]]");
            out.push_str(variant);
        }
    }
    out
}

fn write_model(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::fs::write(dir.join("models").join(format!("{name}.onnx")), jig_synth::model(name).unwrap().encode()).unwrap();
}

#[test]
fn the_social_media_app_classifies_and_captions_every_post() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    bundle(
        dir.path(),
        &manifest_with("social-media", &["resnet18", "git-base"]),
        &[
            ("glue/fan_out.wasm", &component("fan_out")),
            ("glue/classify.wasm", &component("classify")),
            ("glue/caption.wasm", &component("caption")),
        ],
    );
    for model in ["resnet18", "git-base"] {
        write_model(dir.path(), model);
    }
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = gateway.jig("deploy").arg(dir.path()).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let summary = String::from_utf8_lossy(&deployed.stdout);
    assert!(summary.contains("post → classify → caption"), "{summary}");

    let photo = std::fs::read(root().join("tests/data/f3-board.jpg")).unwrap();
    let reply = gateway.http("POST", "/v1/apps/social-media/invoke", &[("jig-timeout-ms", "20000")], &photo);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let outputs = reply.json()["outputs"].as_array().unwrap().clone();
    let tasks: Vec<&str> = outputs.iter().map(|o| o["task"].as_str().unwrap()).collect();
    assert_eq!(tasks, ["classify", "caption"], "one answer from each path, in port order");

    let top = outputs[0]["json"]["top"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    let probabilities: Vec<f64> = top.iter().map(|t| t["probability"].as_f64().unwrap()).collect();
    assert!(probabilities.windows(2).all(|w| w[0] >= w[1]) && probabilities[0] <= 1.0, "{probabilities:?}");
    assert!(top.iter().all(|t| t["class"].as_u64().unwrap() < 1000));

    let tokens = outputs[1]["json"]["tokens"].as_array().unwrap();
    assert!(tokens.len() <= 20 && tokens.iter().all(|t| t.as_u64().unwrap() < 30_522), "{tokens:?}");
}
