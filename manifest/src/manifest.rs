//! The manifest's top level ([`Manifest`], a parsed `jig.toml`) and the app-wide tables it holds: its
//! objectives ([`Slo`]), its limits ([`AppLimits`]) and the demand to plan for ([`Demand`]). The graph, the
//! variants, the planner's settings and the v2 tensors have files of their own.

use serde::{Deserialize, Serialize};

use crate::graph::{Edge, Task};
use crate::planner::{IpaSettings, QueryClass};
use crate::tensors::AppTensors;
use crate::variant::Variant;

/// A parsed `jig.toml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The manifest format's version: [`MANIFEST_VERSION`], the only one there is so far (1 when absent).
    #[serde(default = "Manifest::default_version")]
    pub manifest_version: u32,
    /// The app's name: letters, digits, `-` and `_`, at most 64.
    pub name: String,
    /// The latency and accuracy objectives; without them the app is not planned and each slot runs its most
    /// accurate variant.
    #[serde(default)]
    pub slo: Option<Slo>,
    /// Limits of the whole app.
    #[serde(default)]
    pub limits: AppLimits,
    /// The demand to plan for before the gateway has measured one.
    #[serde(default)]
    pub demand: Demand,
    /// The planner strategy, one of [`PLANNERS`](crate::PLANNERS): `jigsaw` (the default), `ipa` (linear
    /// pipelines on CPU cores), `compass` (query classes over a linear pipeline), `gpulet` (MPS shares of whole
    /// GPUs) or `ppipe` (a model cut into a chain of tasks, each served by a pool).
    #[serde(default)]
    pub planner: Option<String>,
    /// Compass's query classes: requests that name one (the `jig-class` header) are held to its objectives.
    #[serde(default)]
    pub classes: Vec<QueryClass>,
    /// IPA's settings, with `planner = "ipa"`.
    #[serde(default)]
    pub ipa: Option<IpaSettings>,
    /// The app as a model of the Open Inference Protocol, `/v2/models/APP`: the tensor its entry takes and the
    /// one it answers.
    #[serde(default)]
    pub tensors: Option<AppTensors>,
    /// The functions of its graph; the one no edge leads to is the entry.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// What each task's emits become: requests of other tasks.
    #[serde(default)]
    pub edges: Vec<Edge>,
    /// The models that can fill each slot.
    #[serde(default)]
    pub variants: Vec<Variant>,
}

impl Manifest {
    fn default_version() -> u32 {
        MANIFEST_VERSION
    }
}

/// The manifest format this jig reads.
pub const MANIFEST_VERSION: u32 = 1;

/// The app's objectives.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// End-to-end latency objective in milliseconds; an invocation without a timeout gets this deadline.
    pub latency_ms: u64,
    /// Accuracy objective as a fraction of the best achievable (0 to 1); 0.9 when absent.
    #[serde(default)]
    pub accuracy: Option<f64>,
}

/// Limits of the app as a whole.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppLimits {
    /// Requests in progress at once; beyond it the gateway answers 429.
    #[serde(default = "AppLimits::default_max_inflight")]
    pub max_inflight: u32,
}

impl AppLimits {
    fn default_max_inflight() -> u32 {
        256
    }
}

impl Default for AppLimits {
    fn default() -> Self {
        AppLimits { max_inflight: Self::default_max_inflight() }
    }
}

/// What the app expects before the gateway has measured its demand.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demand {
    /// Requests per second at the entry task.
    #[serde(default = "Demand::default_rps")]
    pub rps: f64,
}

impl Demand {
    fn default_rps() -> f64 {
        1.0
    }
}

impl Default for Demand {
    fn default() -> Self {
        Demand { rps: Self::default_rps() }
    }
}
