//! The sign reader (examples/sign-reader) as a user runs it: `jig up`, `jig deploy`, invocations with the
//! rendered sample signs of `make setup`, real PP-OCRv4 weights.

use std::path::Path;

use jig_tests::{Gateway, bundle, component, root};

fn sign_reader(dir: &Path) {
    let manifest = std::fs::read_to_string(root().join("examples/sign-reader/jig.toml")).unwrap();
    let models = root().join(".jig/models");
    bundle(
        dir,
        &manifest,
        &[
            ("glue/ocr_detect.wasm", &component("ocr_detect")),
            ("glue/ocr_recognize.wasm", &component("ocr_recognize")),
            ("models/ppocr-det.onnx", &models.join("ppocr-det.onnx")),
            ("models/ppocr-rec.onnx", &models.join("ppocr-rec.onnx")),
            ("models/ppocr-rec.charset.txt", &models.join("ppocr-rec.charset.txt")),
        ],
    );
}

/// Text without spaces: the recognizer is not reliable about the width of a space.
fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn the_sign_reader_reads_every_sample_sign() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    sign_reader(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = gateway.jig("deploy").arg(dir.path()).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));

    let samples = root().join(".jig/samples");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(samples.join("samples.json")).expect("run `make setup`")).unwrap();
    for (file, lines) in expected.as_object().unwrap() {
        let image = std::fs::read(samples.join(file)).unwrap();
        let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], &image);
        assert_eq!(reply.status, 200, "{file}: {}", reply.text());
        let outputs = reply.json()["outputs"].as_array().unwrap().clone();
        let read: Vec<String> = outputs.iter().map(|o| squeeze(o["json"]["text"].as_str().unwrap())).collect();
        let want: Vec<String> = lines.as_array().unwrap().iter().map(|l| squeeze(l.as_str().unwrap())).collect();
        assert_eq!(read, want, "{file}: {outputs:?}");
        for o in &outputs {
            assert!(o["json"]["confidence"].as_f64().unwrap() > 0.8, "{file}: {o}");
        }
    }
}

#[test]
fn what_is_not_an_image_gets_a_400_and_the_next_request_is_served() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    sign_reader(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    assert!(gateway.jig("deploy").arg(dir.path()).output().unwrap().status.success());
    for body in [&b""[..], b"GIF89a not really", b"\x89PNG\r\n\x1a\n truncated"] {
        let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], body);
        assert_eq!(reply.status, 400, "{:?}: {}", String::from_utf8_lossy(body), reply.text());
        assert!(reply.text().contains("sign-reader/detect"), "names the task: {}", reply.text());
    }
    let stop = std::fs::read(root().join(".jig/samples/stop.png")).unwrap();
    let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], &stop);
    assert_eq!(reply.json()["outputs"][0]["json"]["text"], "STOP");
}
