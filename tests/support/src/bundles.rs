//! Where the tests find what set-up built, and the bundles they deploy.

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A glue component built by `make functions`.
pub fn component(name: &str) -> PathBuf {
    root().join("target/wasm32-wasip2/release").join(format!("{name}.wasm"))
}

/// A model `make setup` generated.
pub fn model(name: &str) -> PathBuf {
    let path = root().join(".jig/models").join(format!("{name}.onnx"));
    assert!(path.is_file(), "{} is missing: run `make setup`", path.display());
    path
}

/// A bundle directory: `manifest` as its jig.toml, and `files` (name in the bundle, source) copied in.
pub fn bundle(dir: &Path, manifest: &str, files: &[(&str, &Path)]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("jig.toml"), manifest).unwrap();
    for (name, source) in files {
        let target = dir.join(name);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(source, &target).unwrap_or_else(|e| panic!("copying {}: {e}", source.display()));
    }
}

/// The probe's one-slot app `name` (task `probe` calling slot `classifier`, variant `fast` on the `mlp` model
/// with `accuracy`, SLO 1 s) in `dir`, with `profiles` as its `profiles.csv` (none when `None`). Another
/// accuracy makes another bundle.
pub fn probe_app(dir: &Path, name: &str, accuracy: f64, profiles: Option<&str>) {
    let manifest = format!(
        r#"
name = "{name}"
[slo]
latency_ms = 1000
accuracy = 0.5

[[tasks]]
name = "probe"
glue = "glue/probe.wasm"
slot = "classifier"

[[variants]]
slot = "classifier"
name = "fast"
model = "models/mlp.onnx"
accuracy = {accuracy}
"#
    );
    bundle(dir, &manifest, &[("glue/probe.wasm", &component("jig_probe")), ("models/mlp.onnx", &model("mlp"))]);
    if let Some(profiles) = profiles {
        std::fs::write(dir.join("profiles.csv"), profiles).unwrap();
    }
}
