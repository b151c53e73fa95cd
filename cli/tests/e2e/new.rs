//! An SDK author's first ten minutes, as a user runs them: `jig new` makes a bundle whose glue's native tests
//! pass, `jig build` makes its component, and the app deploys and answers through a real gateway.

use std::process::Command;

use jig_test_support::{Gateway, jig};

#[test]
fn a_new_bundle_with_a_model_tests_builds_deploys_and_answers() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("scores");
    let made = jig().args(["new", "scores", "--template", "model", "--dir"]).arg(&dir).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    assert!(String::from_utf8_lossy(&made.stdout).contains("jig build"), "it says what to do next");

    // Before it is built, a deploy says how to build it.
    let unbuilt = jig().args(["deploy", "--gateway", "http://127.0.0.1:9"]).arg(&dir).output().unwrap();
    assert!(String::from_utf8_lossy(&unbuilt.stderr).contains("run `jig build`"), "{unbuilt:?}");

    // The glue's own tests pass natively, as the template wrote them; then the component builds.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tested = Command::new(&cargo).arg("test").current_dir(&dir).env_remove("CARGO_TARGET_DIR").output().unwrap();
    assert!(tested.status.success(), "{}", String::from_utf8_lossy(&tested.stderr));
    let built = jig().arg("build").arg(&dir).env_remove("CARGO_TARGET_DIR").output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    assert!(String::from_utf8_lossy(&built.stdout).contains("built scores"));

    let gateway = Gateway::start(&scratch.path().join("state"), &[]);
    let deployed = gateway.jig("deploy").arg(&dir).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    let reply = gateway.http("POST", "/v1/apps/scores/invoke", &[], br#"{"x": [[1, 2, 3, 4], [0, 0, 0, 0]]}"#);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let y = reply.json()["outputs"][0]["json"]["y"].clone();
    let rows = y.as_array().unwrap_or_else(|| panic!("{}", reply.text()));
    assert_eq!(rows.len(), 2);
    for row in rows {
        let p: Vec<f64> = row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(p.len(), 3);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-4, "the stand-in model's softmax: {p:?}");
    }
    let bad = gateway.http("POST", "/v1/apps/scores/invoke", &[], br#"{"x": [[1, 2]]}"#);
    assert_eq!(bad.status, 400, "a row of the wrong width is the client's error: {}", bad.text());
}

#[test]
fn jig_new_refuses_a_name_or_directory_it_cannot_use() {
    let scratch = tempfile::tempdir().unwrap();
    let refused = |args: &[&str]| {
        let out = jig().arg("new").args(args).current_dir(scratch.path()).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(refused(&["no/slash"]).contains("app name"));
    assert!(refused(&["9lives"]).contains("start it with a letter"));
    std::fs::create_dir_all(scratch.path().join("taken")).unwrap();
    std::fs::write(scratch.path().join("taken/keep.txt"), "mine").unwrap();
    assert!(refused(&["taken"]).contains("not empty"));
    assert_eq!(std::fs::read_to_string(scratch.path().join("taken/keep.txt")).unwrap(), "mine", "nothing overwritten");
    assert!(refused(&["elsewhere", "--sdk", scratch.path().to_str().unwrap()]).contains("no jig-sdk crate"));

    let glue = jig().args(["new", "greeter"]).current_dir(scratch.path()).output().unwrap();
    assert!(glue.status.success(), "{}", String::from_utf8_lossy(&glue.stderr));
    let manifest = std::fs::read_to_string(scratch.path().join("greeter/jig.toml")).unwrap();
    assert!(manifest.contains("greeter.wasm") && manifest.contains("build = "), "{manifest}");
    let cargo_toml = std::fs::read_to_string(scratch.path().join("greeter/Cargo.toml")).unwrap();
    assert!(cargo_toml.contains("jig-sdk = { path = "), "a path the author's cargo resolves: {cargo_toml}");
    let build_config = std::fs::read_to_string(scratch.path().join("greeter/.cargo/config.toml")).unwrap();
    for flag in ["--initial-memory=8388608", "+simd128"] {
        assert!(build_config.contains(flag), "built as jig builds its own glue ({flag}): {build_config}");
    }
    let lock = std::fs::read_to_string(scratch.path().join("greeter/Cargo.lock")).unwrap();
    assert!(lock.contains("name = \"wit-bindgen\""), "the versions jig was tested with");
}
