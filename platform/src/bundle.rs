//! Bundles: a directory with a `jig.toml` manifest, the glue components and the models it names.
//!
//! This part reads what model execution needs: the model variants that can fill each slot.
//!
//! ```toml
//! name = "sign-reader"
//!
//! [[variants]]
//! slot = "rec"                      # the model slot glue calls with `infer`
//! name = "ppocr-v4"                 # the variant
//! model = "models/rec.onnx"         # relative to the bundle directory
//! accuracy = 0.82                   # optional, for the planner
//! shapes = { x = [3, 48, 320] }     # optional: one item's shape (no batch dimension) per input with
//!                                   # dynamic dimensions, used when profiling
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

/// A parsed `jig.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub variants: Vec<Variant>,
}

/// A model that can fill a slot.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub slot: String,
    pub name: String,
    pub model: PathBuf,
    #[serde(default)]
    pub accuracy: Option<f64>,
    #[serde(default)]
    pub shapes: BTreeMap<String, Vec<u64>>,
}

/// A bundle on disk.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl Bundle {
    /// Read and check `dir/jig.toml`: every variant's model file exists, names are unique.
    pub fn open(dir: &Path) -> anyhow::Result<Bundle> {
        let path = dir.join("jig.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}; a bundle is a directory with a jig.toml", path.display()))?;
        let manifest: Manifest =
            toml::from_str(&text).with_context(|| format!("{} is not a valid manifest", path.display()))?;
        let mut seen = std::collections::HashSet::new();
        for v in &manifest.variants {
            if !seen.insert((&v.slot, &v.name)) {
                bail!("{}: variant `{}` of slot `{}` is declared twice", path.display(), v.name, v.slot);
            }
            if v.name.contains(',') || v.slot.contains(',') {
                bail!("{}: slot and variant names may not contain commas (`{}`/`{}`)", path.display(), v.slot, v.name);
            }
            let model = dir.join(&v.model);
            if !model.is_file() {
                bail!(
                    "{}: variant `{}` of slot `{}` names model {}, which does not exist",
                    path.display(),
                    v.name,
                    v.slot,
                    model.display()
                );
            }
        }
        Ok(Bundle { dir: dir.to_path_buf(), manifest })
    }

    /// Where a variant's model file is.
    pub fn model_path(&self, variant: &Variant) -> PathBuf {
        self.dir.join(&variant.model)
    }
}
