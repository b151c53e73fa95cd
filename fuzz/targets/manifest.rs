//! `jig.toml` as the gateway reads it: parsed and checked (names, paths inside the bundle, the graph) against a
//! bundle directory that has the seeds' glue and model files.

fn main() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    for file in ["glue/echo.wasm", "glue/crop.wasm", "models/mlp.onnx", "models/det.onnx"] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }
    afl::fuzz!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = jig_manifest::Bundle::with_manifest(dir.path(), text);
        }
    });
}
