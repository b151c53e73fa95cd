//! `jig run` as a user runs it: the real binary, real files, real components.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `cargo test --workspace` builds the `jig` binary for the platform's own integration tests.
fn jig() -> Command {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let bin = target.join("debug/jig");
    assert!(bin.exists(), "{} is missing; run the suite with `make test`", bin.display());
    let mut cmd = Command::new(bin);
    cmd.env("JIG_CACHE_DIR", target.join("jig-test-cache"));
    cmd
}

fn component(name: &str) -> PathBuf {
    root().join("target/wasm32-wasip2/release").join(format!("{name}.wasm"))
}

fn run(cmd: &mut Command, stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn run_crops_a_photo_and_writes_each_crop_as_png() {
    let out_dir = tempfile::tempdir().unwrap();
    let output = run(
        jig()
            .arg("run")
            .arg(component("crop"))
            .arg(root().join("tests/data/f3-board.jpg"))
            .args(["--meta", r#"{"boxes": [{"x0": 10, "y0": 10, "x1": 90, "y1": 50}, {"x0": 100, "y0": 100, "x1": 140, "y1": 180}]}"#])
            .args(["--config", "encoding=png", "--emit-dir"])
            .arg(out_dir.path()),
        b"",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, serde_json::json!({"crops": 2, "skipped": 0}));
    assert!(stderr.contains("2 payload(s) emitted"), "{stderr}");

    let png = std::fs::read(out_dir.path().join("crops-1.png")).unwrap();
    let image = jig_sdk::image::decode(&png).unwrap();
    assert_eq!(image.dimensions(), (40, 80));
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.path().join("crops-1.json")).unwrap()).unwrap();
    assert_eq!(meta["index"], 1);
}

#[test]
fn run_reads_the_payload_from_stdin() {
    let output = run(
        jig().arg("run").arg(component("select")).args(["-c", "labels=cat", "-c", "min-score=0.5"]),
        br#"{"detections": [{"label": "cat", "score": 0.9}, {"label": "dog", "score": 0.99}]}"#,
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["dropped"], 1);
    assert_eq!(result["selected"][0]["label"], "cat");
}

#[test]
fn a_failing_function_exits_1_naming_it_and_the_cause() {
    let output = run(jig().arg("run").arg(component("select")), b"not json");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("function `select` failed: invalid input"), "{stderr}");
}

#[test]
fn a_file_that_is_not_a_component_exits_2_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let output = run(jig().arg("run").arg(&core), b"");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("function `core`") && stderr.contains("wasm32-wasip2"), "{stderr}");

    let output = run(jig().arg("run").arg(dir.path().join("missing.wasm")), b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("missing.wasm"));

    let output = run(jig().arg("run").arg(component("echo")).args(["--config", "novalue"]), b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("KEY=VALUE"));
}
