//! A bundle on disk ([`Bundle`]): a directory with a `jig.toml` ([`MANIFEST`]), opened and checked, and where
//! its glue, models, configuration files and profile table ([`PROFILES`]) are. Every path stays inside it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};

use crate::error::{Result, invalid};
use crate::graph::Task;
use crate::manifest::Manifest;
use crate::variant::Variant;

/// The manifest's file name inside a bundle.
pub const MANIFEST: &str = "jig.toml";
/// The profile table's file name inside a bundle.
pub const PROFILES: &str = "profiles.csv";

/// A bundle on disk.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The bundle's directory.
    pub dir: PathBuf,
    /// Its `jig.toml`, checked.
    pub manifest: Manifest,
}

impl Bundle {
    /// Read and check `dir/jig.toml`: names, paths that stay inside the bundle and exist, and the graph
    /// (one entry task, edges between declared tasks, no cycles).
    pub fn open(dir: &Path) -> Result<Bundle> {
        Bundle::with_manifest(dir, &read_manifest_text(dir)?)
    }

    /// `dir/jig.toml` parsed but not checked: what `jig build` reads before the glue it names exists.
    pub fn manifest_of(dir: &Path) -> Result<Manifest> {
        toml::from_str(&read_manifest_text(dir)?)
            .map_err(|e| invalid(format!("{MANIFEST} is not a valid manifest: {e}")))
    }

    /// [`Bundle::open`] with the manifest's text given rather than read from `dir`.
    pub fn with_manifest(dir: &Path, text: &str) -> Result<Bundle> {
        let manifest: Manifest =
            toml::from_str(text).map_err(|e| invalid(format!("{MANIFEST} is not a valid manifest: {e}")))?;
        let bundle = Bundle { dir: dir.to_path_buf(), manifest };
        bundle.check().map_err(|e| invalid(format!("{MANIFEST}: {e}")))?;
        Ok(bundle)
    }

    /// Where a variant's model file is.
    pub fn model_path(&self, variant: &Variant) -> PathBuf {
        self.dir.join(&variant.model)
    }

    /// Where a task's glue component is.
    pub fn glue_path(&self, task: &Task) -> PathBuf {
        self.dir.join(&task.glue)
    }

    /// A task's configuration: `config` and the contents of `config_files`.
    pub fn task_config(&self, task: &Task) -> Result<BTreeMap<String, String>> {
        let mut config = task.config.clone();
        for (key, file) in &task.config_files {
            let path = self.dir.join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                invalid(format!("task `{}`: cannot read `config_files.{key}` ({}): {e}", task.name, file.display()))
            })?;
            config.insert(key.clone(), text);
        }
        Ok(config)
    }

    /// The profile table, when the bundle has one.
    pub fn profiles_path(&self) -> Option<PathBuf> {
        Some(self.dir.join(PROFILES)).filter(|p| p.is_file())
    }

    /// The entry task: the one no edge leads to ([`Bundle::open`] checks there is exactly one when the app has
    /// tasks).
    pub fn entry(&self) -> Option<&Task> {
        let targets: HashSet<&str> = self.manifest.edges.iter().map(|e| e.to.as_str()).collect();
        self.manifest.tasks.iter().find(|t| !targets.contains(t.name.as_str()))
    }

    /// Every file the bundle consists of, relative to its directory, sorted: the manifest, glue, models and
    /// the profile table if present.
    pub fn files(&self) -> Vec<PathBuf> {
        let m = &self.manifest;
        let mut files: BTreeSet<PathBuf> = [PathBuf::from(MANIFEST)].into();
        files.extend(m.tasks.iter().map(|t| t.glue.clone()));
        files.extend(m.tasks.iter().flat_map(|t| t.config_files.values().cloned()));
        files.extend(m.variants.iter().map(|v| v.model.clone()));
        if self.profiles_path().is_some() {
            files.insert(PROFILES.into());
        }
        files.into_iter().collect()
    }
}

/// The text of `dir/jig.toml`. Errors name files as the bundle does (`jig.toml`), never where this machine keeps
/// it: a gateway opens uploads in its state directory, which is no client's business.
fn read_manifest_text(dir: &Path) -> Result<String> {
    std::fs::read_to_string(dir.join(MANIFEST))
        .map_err(|e| invalid(format!("cannot read the bundle's {MANIFEST}: {e}; a bundle is a directory with one")))
}

/// A relative path of plain components only.
pub(crate) fn is_inside(path: &Path) -> bool {
    path.components().next().is_some() && path.components().all(|c| matches!(c, Component::Normal(_)))
}
