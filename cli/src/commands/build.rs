//! `jig build [DIR]`: make each task's glue with the `build` command its `jig.toml` gives (as `spin build`
//! does), then check the bundle as `jig deploy` will.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use jig_manifest::{Build, Bundle};

use crate::input::open_bundle;

#[derive(clap::Args, Debug)]
pub struct BuildCommand {
    /// The bundle directory (with its jig.toml).
    #[arg(default_value = ".")]
    bundle: PathBuf,
}

impl BuildCommand {
    /// Run each distinct build once, in the manifest's order; stop at the first that fails.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let dir = &self.bundle;
        let manifest = Bundle::manifest_of(dir).with_context(|| format!("bundle {}", dir.display()))?;
        let mut builds: Vec<(&Build, Vec<&str>)> = Vec::new();
        for task in &manifest.tasks {
            let Some(build) = &task.build else { continue };
            match builds.iter_mut().find(|(b, _)| *b == build) {
                Some((_, tasks)) => tasks.push(&task.name),
                None => builds.push((build, vec![&task.name])),
            }
        }
        if builds.is_empty() {
            eprintln!("build: no task of {} has a `build` command; nothing to do", dir.join("jig.toml").display());
        }
        for (build, tasks) in &builds {
            let workdir = build.workdir.as_ref().map_or_else(|| dir.clone(), |w| dir.join(w));
            let tasks = tasks.join(", ");
            eprintln!("build: {tasks}: `{}` in {}", build.command, workdir.display());
            let status =
                Command::new("sh").arg("-c").arg(&build.command).current_dir(&workdir).status().with_context(|| {
                    format!("task {tasks}: cannot run `{}` in {}", build.command, workdir.display())
                })?;
            if !status.success() {
                let code = status.code().map_or_else(|| "a signal".to_string(), |c| format!("status {c}"));
                let hint = if build.command.contains("wasm32-wasip2") {
                    " (a missing target is added with `rustup target add wasm32-wasip2`)"
                } else {
                    ""
                };
                bail!("task {tasks}: `{}` failed with {code}{hint}", build.command);
            }
        }
        for task in manifest.tasks.iter().filter(|t| t.build.is_some()) {
            if !dir.join(&task.glue).is_file() {
                bail!(
                    "task {}: its build ran, but `glue` ({}) is not there: name what the build makes (a \
                     CARGO_TARGET_DIR, or a cargo config's `build.target-dir`, moves cargo's `target/` elsewhere)",
                    task.name,
                    task.glue.display()
                );
            }
        }
        let bundle = open_bundle(dir)?;
        println!(
            "built {}: {} task(s); deploy it with `jig deploy {}`",
            bundle.manifest.name,
            bundle.manifest.tasks.len(),
            dir.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}
