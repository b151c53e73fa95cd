//! The app's graph: its functions ([`Task`], `[[tasks]]`) with their limits ([`TaskLimits`]), and the edges
//! ([`Edge`], `[[edges]]`) that turn what one task emits into requests of another.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A function of the app's graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task's name: letters, digits, `-` and `_`, at most 64.
    pub name: String,
    /// The glue component (a `.wasm` built for `wasm32-wasip2`), relative to the bundle directory.
    pub glue: PathBuf,
    /// How `jig build` makes the glue; `None`: it is built some other way.
    #[serde(default)]
    pub build: Option<Build>,
    /// The model slot the glue calls, when it runs one: makes the task a task of the planner's graph.
    #[serde(default)]
    pub slot: Option<String>,
    /// Configuration values the glue reads with `config(key)`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Configuration values read from UTF-8 files in the bundle (a character set, a vocabulary).
    #[serde(default)]
    pub config_files: BTreeMap<String, PathBuf>,
    /// Its memory, time and concurrency limits.
    #[serde(default)]
    pub limits: TaskLimits,
    /// The CPU time one invocation costs on the gateway's cores outside the planned model instances, ms: its
    /// glue, and the models it calls that no task plans. Plans count it (0 when absent) until the app has run
    /// 20 requests, then what they observe.
    #[serde(default)]
    pub cpu_ms: Option<f64>,
}

/// How a task's glue is built (`jig build`), as Spin's `[component.build]`: a command whose result is the task's
/// `glue`. Tasks with the same command and directory share one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Build {
    /// The command, run by `sh -c`: `cargo build --release --target wasm32-wasip2` for a Rust crate.
    pub command: String,
    /// Where it runs, relative to the bundle directory; the bundle directory when absent.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
}

/// Per-function limits.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskLimits {
    /// Linear memory of one invocation, MiB; `None` takes the function runtime's default (128 MiB).
    #[serde(default)]
    pub memory_mib: Option<u32>,
    /// The longest one invocation may run, whatever the request's deadline, milliseconds; `None` takes the
    /// function runtime's default (30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Invocations of this task running at once; more wait (until their deadline).
    #[serde(default = "TaskLimits::default_concurrency")]
    pub concurrency: u32,
}

impl TaskLimits {
    fn default_concurrency() -> u32 {
        64
    }
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits { memory_mib: None, timeout_ms: None, concurrency: Self::default_concurrency() }
    }
}

/// A connection of the graph: what task `from.0` emits on port `from.1` goes to task `to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    /// `TASK.PORT`: what that task emits on that port…
    pub from: String,
    /// …becomes one request of this task per payload.
    pub to: String,
}

impl Edge {
    /// The task and port of `from`.
    pub fn source(&self) -> Option<(&str, &str)> {
        self.from.split_once('.')
    }
}
