//! # jig-manifest
//!
//! Bundles: a directory with a `jig.toml` manifest, the glue components, the models and (optionally) the
//! profile table `profiles.csv` written by `jig profile`.
//!
//! ```toml
//! manifest_version = 1                # optional: the format's version, 1 (the only one so far)
//! name = "sign-reader"                # the app: letters, digits, `-` and `_`, at most 64
//! planner = "jigsaw"                  # optional: the planner strategy, `jigsaw` (default), `ipa` or `compass`
//! classes = [                         # with `compass`: query classes, each with its own objectives and
//!   { name = "fast", latency_ms = 300, accuracy = 0.8, share = 0.5 },   # share of the demand; a request
//!   { name = "best", latency_ms = 2000, accuracy = 1.0, share = 0.5 },  # names its class in `jig-class`
//! ]
//!
//! [ipa]                               # optional, with `ipa`: its objective's weights and baselines
//! alpha = 2.0                         # weight of accuracy (PAS, percent of the best); beta = 1.0 per core
//! variants = "switch"                 # `switch` (IPA), `lightest` (FA2-low) or `heaviest` (FA2-high)
//! replicas = 0                        # fixed replicas per stage (RIM); 0: chosen by the planner
//! interval_s = 10                     # IPA's adaptation interval: how often its load is predicted (1–120 s)
//!
//! [slo]
//! latency_ms = 800                    # end-to-end latency objective; the default deadline of an invocation
//! accuracy = 0.9                      # accuracy objective, as a fraction of the best the variants allow
//!
//! [limits]                            # optional, per app
//! max_inflight = 256                  # requests in progress at once; more get 429
//!
//! [demand]                            # optional
//! rps = 5.0                           # the request rate to plan for until the gateway has measured one
//!
//! [tensors]                           # optional: the app as the v2 model APP (Open Inference Protocol)
//! input = { name = "x", datatype = "FP32", shape = [-1, 3, 48, 320] }   # what its entry takes
//! output = { name = "y", datatype = "FP32", shape = [-1, 40, 6625] }    # what it answers
//!
//! [[tasks]]                           # one per function; the task no edge leads to is the entry
//! name = "detect"
//! glue = "glue/detect.wasm"           # the component, relative to the bundle directory
//! config = { threshold = "0.3" }      # optional: what the glue reads with `config(key)`
//! config_files = { charset = "models/charset.txt" }   # optional: config values read from bundle files
//! limits = { memory_mib = 128, timeout_ms = 30000, concurrency = 64 }   # optional, these are the defaults
//! cpu_ms = 22                         # optional: CPU an invocation costs outside planned models, for the planner
//!
//! [[tasks]]
//! name = "recognize"
//! glue = "glue/recognize.wasm"
//! slot = "rec"                        # the model slot this task's glue calls, for the planner
//!
//! [[edges]]
//! from = "detect.crops"               # TASK.PORT: what `detect` emits on port `crops`…
//! to = "recognize"                    # …becomes one request of `recognize` per payload
//!
//! [[variants]]
//! slot = "rec"                        # the model slot glue calls with `infer`
//! name = "ppocr-v4"                   # the variant
//! model = "models/rec.onnx"           # relative to the bundle directory
//! accuracy = 0.82                     # optional, for the planner
//! factors = { speak = 1.0 }           # optional: requests this variant's task sends each downstream task
//!                                     # per request (1 when absent), for the planner
//! shapes = { x = [3, 48, 320] }       # optional: one item's shape (no batch dimension) per input with
//!                                     # dynamic dimensions, used when profiling
//! values = { lengths = [48] }         # optional: values per input, repeated to fill it, used when
//!                                     # profiling where the values set the work (else a fixed pattern)
//! ```
//!
//! Every path stays inside the bundle: absolute paths and `..` are refused. A bundle travels to the gateway
//! [packed](pack) as a tar archive with entries in a fixed order and no timestamps or owners, so the same
//! bundle always packs to the same bytes (and the same content hash).

#![deny(missing_docs)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The manifest's file name inside a bundle.
pub const MANIFEST: &str = "jig.toml";
/// The profile table's file name inside a bundle.
pub const PROFILES: &str = "profiles.csv";

/// A bundle that cannot be used: the message names the file and field and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidBundle(pub String);

type Result<T> = std::result::Result<T, InvalidBundle>;

fn invalid(message: impl Into<String>) -> InvalidBundle {
    InvalidBundle(message.into())
}

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
    /// The planner strategy, one of [`PLANNERS`]: `jigsaw` (the default), `ipa` (linear pipelines on CPU
    /// cores), `compass` (query classes over a linear pipeline), `gpulet` (MPS shares of whole GPUs) or `ppipe`
    /// (a model cut into a chain of tasks, each served by a pool).
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

/// The planner strategies a bundle's `planner` may name: those of `jig_planner::Strategy`.
pub const PLANNERS: [&str; 5] = ["jigsaw", "ipa", "compass", "gpulet", "ppipe"];

/// IPA's objective weights and baselines (`[ipa]`); each absent key keeps the planner's default (the paper's).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpaSettings {
    /// α, the weight of the pipeline's accuracy in percent of its best (PAS).
    pub alpha: Option<f64>,
    /// β, the cost of one core.
    pub beta: Option<f64>,
    /// δ, the cost of one request of batch size.
    pub delta: Option<f64>,
    /// The req/s one replica must sustain at batch 1 on its base core allocation.
    pub threshold_rps: Option<f64>,
    /// Which variants a stage may run: one of [`IPA_VARIANTS`].
    pub variants: Option<String>,
    /// Replicas of every stage, fixed (RIM); 0 or absent: chosen by the planner.
    pub replicas: Option<u32>,
    /// IPA's adaptation interval, seconds: how often the gateway predicts the app's load and re-plans it when
    /// the prediction moved ([`IpaSettings::INTERVAL_S`] when absent).
    pub interval_s: Option<f64>,
}

impl IpaSettings {
    /// IPA's adaptation interval by default, seconds (the paper's).
    pub const INTERVAL_S: f64 = 10.0;
    /// The longest adaptation interval, seconds: the load history the gateway keeps per second.
    pub const MAX_INTERVAL_S: f64 = 120.0;

    /// The adaptation interval.
    pub fn interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.interval_s.unwrap_or(Self::INTERVAL_S))
    }
}

/// An app that takes a tensor and answers one (`[tensors]`), served as the v2 model `APP`: a request's input
/// reaches the entry task as a tensor envelope (its raw little-endian data, with metadata `{"datatype",
/// "shape"}`, as the bundled `forward` function takes), and the app's one output that is a tensor envelope is
/// the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppTensors {
    /// The tensor the entry task takes.
    pub input: TensorDecl,
    /// The tensor the app answers.
    pub output: TensorDecl,
}

/// A tensor of an app's v2 model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorDecl {
    /// Its name in v2 requests and answers.
    pub name: String,
    /// Its element type, by the protocol's name: one of [`DATATYPES`].
    pub datatype: String,
    /// Its shape, -1 where any size goes (the batch); metadata for clients.
    #[serde(default)]
    pub shape: Vec<i64>,
}

/// The Open Inference Protocol's element types that jig serves.
pub const DATATYPES: [&str; 10] =
    ["BOOL", "UINT8", "UINT16", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"];

/// What `[ipa] variants` may say: any variant (IPA), each stage's least accurate (FA2-low) or most accurate
/// (FA2-high).
pub const IPA_VARIANTS: [&str; 3] = ["switch", "lightest", "heaviest"];

/// A query class of a Compass app: its own latency and accuracy objectives, and its share of the demand.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryClass {
    /// Its name, as requests give it (`jig-class`).
    pub name: String,
    /// Its end-to-end latency objective, ms: the deadline of its requests that name none.
    pub latency_ms: u64,
    /// Its accuracy objective, a fraction of the best achievable (0 to 1].
    pub accuracy: f64,
    /// Its share of the app's demand (the shares are normalised to sum to 1).
    pub share: f64,
}

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

/// A function of the app's graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task's name: letters, digits, `-` and `_`, at most 64.
    pub name: String,
    /// The glue component (a `.wasm` built for `wasm32-wasip2`), relative to the bundle directory.
    pub glue: PathBuf,
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

/// A model that can fill a slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// The slot it fills.
    pub slot: String,
    /// The variant's name, unique within its slot.
    pub name: String,
    /// The ONNX model, relative to the bundle directory.
    pub model: PathBuf,
    /// Its accuracy, in any unit shared by the slot's variants, for the planner (the best counts as 1).
    #[serde(default)]
    pub accuracy: Option<f64>,
    /// Requests this variant's task sends each downstream model task per request it serves (1 when absent).
    #[serde(default)]
    pub factors: BTreeMap<String, f64>,
    /// One item's shape (no batch dimension) per input with dynamic dimensions, used when profiling.
    #[serde(default)]
    pub shapes: BTreeMap<String, Vec<u64>>,
    /// Values per input, repeated to fill it, used when profiling (otherwise a fixed pattern).
    #[serde(default)]
    pub values: BTreeMap<String, Vec<f64>>,
}

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
        // Errors name files as the bundle does (`jig.toml`), never where this machine keeps it: a gateway opens
        // uploads in its state directory, which is no client's business.
        let text = std::fs::read_to_string(dir.join(MANIFEST)).map_err(|e| {
            invalid(format!("cannot read the bundle's {MANIFEST}: {e}; a bundle is a directory with one"))
        })?;
        Bundle::with_manifest(dir, &text)
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

    fn check(&self) -> std::result::Result<(), String> {
        let m = &self.manifest;
        if m.manifest_version != MANIFEST_VERSION {
            return Err(format!(
                "`manifest_version = {}`: this jig reads version {MANIFEST_VERSION}; upgrade jig, or write the \
                 manifest for version {MANIFEST_VERSION}",
                m.manifest_version
            ));
        }
        check_name("app name", &m.name).map_err(|e| e.0)?;
        // A graph is planned as a whole: a bound keeps one manifest from taking the gateway's memory.
        for (what, count, max) in [
            ("tasks", m.tasks.len(), MAX_TASKS),
            ("edges", m.edges.len(), MAX_EDGES),
            ("variants", m.variants.len(), MAX_VARIANTS),
        ] {
            if count > max {
                return Err(format!("{count} {what}: an app has at most {max}; split it into apps"));
            }
        }
        if let Some(planner) = &m.planner
            && !PLANNERS.contains(&planner.as_str())
        {
            return Err(format!("`planner = \"{planner}\"`: jig's planners are {}", PLANNERS.join(", ")));
        }
        let compass = m.planner.as_deref() == Some("compass");
        if compass && m.classes.is_empty() {
            return Err("`planner = \"compass\"` plans query classes: declare them in `classes = [{ name, \
                        latency_ms, accuracy, share }, …]`"
                .into());
        }
        if !compass && !m.classes.is_empty() {
            return Err("`classes` are Compass's query classes: add `planner = \"compass\"`, or remove them".into());
        }
        if let Some(ipa) = &m.ipa {
            if m.planner.as_deref() != Some("ipa") {
                return Err("`[ipa]` sets IPA's planner: add `planner = \"ipa\"`, or remove it".into());
            }
            for (key, value) in
                [("alpha", ipa.alpha), ("beta", ipa.beta), ("delta", ipa.delta), ("threshold_rps", ipa.threshold_rps)]
            {
                if let Some(v) = value
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(format!("`ipa.{key}` is {v}; give a non-negative number"));
                }
            }
            if let Some(v) = &ipa.variants
                && !IPA_VARIANTS.contains(&v.as_str())
            {
                return Err(format!("`ipa.variants = \"{v}\"`: say one of {}", IPA_VARIANTS.join(", ")));
            }
            if let Some(v) = ipa.interval_s
                && !(1.0..=IpaSettings::MAX_INTERVAL_S).contains(&v)
            {
                return Err(format!(
                    "`ipa.interval_s` is {v}; give IPA's adaptation interval in seconds, 1 to {}",
                    IpaSettings::MAX_INTERVAL_S
                ));
            }
        }
        if let Some(tensors) = &m.tensors {
            for (key, t) in [("input", &tensors.input), ("output", &tensors.output)] {
                if t.name.is_empty() {
                    return Err(format!("`tensors.{key}` has no name; give the name v2 clients call it by"));
                }
                if !DATATYPES.contains(&t.datatype.as_str()) {
                    return Err(format!(
                        "`tensors.{key}.datatype = \"{}\"`: say one of {}",
                        t.datatype,
                        DATATYPES.join(", ")
                    ));
                }
                if let Some(d) = t.shape.iter().find(|&&d| d < -1) {
                    return Err(format!("`tensors.{key}.shape` has {d}: give sizes, or -1 where any size goes"));
                }
            }
        }
        let mut names = HashSet::new();
        for c in &m.classes {
            check_name("class name", &c.name).map_err(|e| e.0)?;
            if !names.insert(c.name.as_str()) {
                return Err(format!("class `{}` is declared twice", c.name));
            }
            if c.latency_ms == 0 || !(c.accuracy > 0.0 && c.accuracy <= 1.0) || !(c.share.is_finite() && c.share > 0.0)
            {
                return Err(format!(
                    "class `{}`: give a positive `latency_ms`, an `accuracy` in (0, 1] and a positive `share`",
                    c.name
                ));
            }
        }
        if let Some(slo) = &m.slo {
            if slo.latency_ms == 0 {
                return Err("`slo.latency_ms` must be positive".into());
            }
            if let Some(a) = slo.accuracy
                && !(a > 0.0 && a <= 1.0)
            {
                return Err(format!("`slo.accuracy` is {a}; give a fraction of the best accuracy in (0, 1]"));
            }
        }
        if m.limits.max_inflight == 0 {
            return Err("`limits.max_inflight` must be positive".into());
        }
        if !(m.demand.rps.is_finite() && m.demand.rps >= 0.0) {
            return Err(format!("`demand.rps` is {}; give a non-negative rate", m.demand.rps));
        }

        let mut tasks = HashSet::new();
        for t in &m.tasks {
            check_name("task name", &t.name).map_err(|e| e.0)?;
            if !tasks.insert(t.name.as_str()) {
                return Err(format!("task `{}` is declared twice", t.name));
            }
            self.check_file(&format!("task `{}`: `glue`", t.name), &t.glue)?;
            for (key, path) in &t.config_files {
                if t.config.contains_key(key) {
                    return Err(format!("task `{}`: `{key}` is in both `config` and `config_files`", t.name));
                }
                self.check_file(&format!("task `{}`: `config_files.{key}`", t.name), path)?;
            }
            let l = &t.limits;
            if l.memory_mib == Some(0) || l.timeout_ms == Some(0) || l.concurrency == 0 {
                return Err(format!("task `{}`: `limits` must all be positive", t.name));
            }
            if let Some(ms) = t.cpu_ms.filter(|ms| !(ms.is_finite() && *ms >= 0.0)) {
                return Err(format!(
                    "task `{}`: `cpu_ms` is {ms}; give the milliseconds of CPU an invocation costs",
                    t.name
                ));
            }
        }
        let mut next: HashMap<&str, Vec<&str>> = HashMap::new();
        for e in &m.edges {
            let Some((from, port)) = e.source().filter(|(t, p)| !t.is_empty() && !p.is_empty()) else {
                return Err(format!("edge from `{}`: write `from = \"TASK.PORT\"`", e.from));
            };
            for task in [from, e.to.as_str()] {
                if !tasks.contains(task) {
                    return Err(format!("edge `{}` → `{}` names task `{task}`, which is not declared", e.from, e.to));
                }
            }
            if port.contains('.') {
                return Err(format!("edge from `{}`: a port name may not contain `.`", e.from));
            }
            next.entry(from).or_default().push(&e.to);
        }
        if !m.tasks.is_empty() {
            let targets: HashSet<&str> = m.edges.iter().map(|e| e.to.as_str()).collect();
            let roots: Vec<&str> = m.tasks.iter().map(|t| t.name.as_str()).filter(|t| !targets.contains(t)).collect();
            match roots.as_slice() {
                [_] => {}
                [] => return Err("every task has an incoming edge; an app needs one entry task".into()),
                many => {
                    return Err(format!(
                        "tasks {} have no incoming edge; an app has exactly one entry task",
                        many.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                    ));
                }
            }
            if let Some(task) = find_cycle(&next) {
                return Err(format!("the edges form a cycle through task `{task}`; the graph must be acyclic"));
            }
        }

        let mut seen = HashSet::new();
        for v in &m.variants {
            if !seen.insert((&v.slot, &v.name)) {
                return Err(format!("variant `{}` of slot `{}` is declared twice", v.name, v.slot));
            }
            if v.name.contains(',') || v.slot.contains(',') {
                return Err(format!("slot and variant names may not contain commas (`{}`/`{}`)", v.slot, v.name));
            }
            self.check_file(&format!("variant `{}` of slot `{}`: `model`", v.name, v.slot), &v.model)?;
            if let Some(task) = v.factors.keys().find(|t| !tasks.contains(t.as_str())) {
                return Err(format!(
                    "variant `{}` of slot `{}`: `factors` names task `{task}`, which is not declared",
                    v.name, v.slot
                ));
            }
        }
        let mut claimed = HashMap::new();
        for t in &m.tasks {
            let Some(slot) = &t.slot else { continue };
            if !m.variants.iter().any(|v| &v.slot == slot) {
                return Err(format!("task `{}`: `slot` is `{slot}`, which no [[variants]] entry fills", t.name));
            }
            if let Some(other) = claimed.insert(slot, &t.name) {
                return Err(format!(
                    "tasks `{other}` and `{}` both name slot `{slot}`; a slot belongs to one task",
                    t.name
                ));
            }
        }
        Ok(())
    }

    /// `path` is relative, stays inside the bundle and names a file.
    fn check_file(&self, field: &str, path: &Path) -> std::result::Result<(), String> {
        if !is_inside(path) {
            return Err(format!(
                "{field} is {}, which leaves the bundle; give a path relative to the bundle directory, without `..`",
                path.display()
            ));
        }
        if !self.dir.join(path).is_file() {
            return Err(format!("{field} names {}, which does not exist in the bundle", path.display()));
        }
        Ok(())
    }
}

/// Letters, digits, `-` and `_`, 1 to 64 of them: safe in URLs, file names and metric labels.
pub fn check_name(what: &str, name: &str) -> std::result::Result<(), InvalidName> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok { Ok(()) } else { Err(InvalidName(format!("{what} `{name}`: use 1 to 64 letters, digits, `-` or `_`"))) }
}

/// A name jig does not take for an app or task; the message says what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidName(pub String);

/// A relative path of plain components only.
fn is_inside(path: &Path) -> bool {
    path.components().next().is_some() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// A task on a cycle of `next`, if any.
fn find_cycle<'a>(next: &HashMap<&'a str, Vec<&'a str>>) -> Option<&'a str> {
    // Depth-first search; 1 = on the current path, 2 = done.
    fn visit<'a>(
        task: &'a str,
        next: &HashMap<&'a str, Vec<&'a str>>,
        state: &mut HashMap<&'a str, u8>,
    ) -> Option<&'a str> {
        match state.get(task) {
            Some(1) => return Some(task),
            Some(_) => return None,
            None => {}
        }
        state.insert(task, 1);
        for &to in next.get(task).into_iter().flatten() {
            if let Some(t) = visit(to, next, state) {
                return Some(t);
            }
        }
        state.insert(task, 2);
        None
    }
    let mut state = HashMap::new();
    let mut starts: Vec<&str> = next.keys().copied().collect();
    starts.sort_unstable();
    starts.into_iter().find_map(|t| visit(t, next, &mut state))
}

/// Pack the bundle at `dir` for upload: a tar archive of [`Bundle::files`] in order, with fixed modes and
/// no timestamps or owners. Checks the bundle first.
pub fn pack(dir: &Path) -> Result<Vec<u8>> {
    let bundle = Bundle::open(dir)?;
    let mut archive = tar::Builder::new(Vec::new());
    for file in bundle.files() {
        let path = dir.join(&file);
        let bytes = std::fs::read(&path).map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))?;
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        archive
            .append_data(&mut header, &file, bytes.as_slice())
            .map_err(|e| invalid(format!("cannot pack {}: {e}", file.display())))?;
    }
    archive.into_inner().map_err(|e| invalid(format!("cannot pack {}: {e}", dir.display())))
}

/// Entries an uploaded bundle may hold.
pub const MAX_ENTRIES: usize = 10_000;

/// The most tasks an app declares.
pub const MAX_TASKS: usize = 256;
/// The most edges an app declares.
pub const MAX_EDGES: usize = 1024;
/// The most variants an app declares, all slots together.
pub const MAX_VARIANTS: usize = 1024;

/// Unpack an archive made by [`pack`] into `dest` (which must not exist yet) and open it. Refuses entries
/// that are not plain files or directories, paths that leave the bundle, more than `max_bytes` in all and
/// more than [`MAX_ENTRIES`] entries.
pub fn unpack(archive: &[u8], dest: &Path, max_bytes: u64) -> Result<Bundle> {
    // The tar reader's messages may quote the input's bytes: keep them only when they are plain text.
    let io = |what: &str, e: std::io::Error| {
        let detail = e.to_string();
        if detail.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
            invalid(format!("the uploaded bundle {what}: {detail}"))
        } else {
            invalid(format!("the uploaded bundle {what} (send the tar archive `jig deploy` makes)"))
        }
    };
    std::fs::create_dir(dest).map_err(|e| io("cannot be stored", e))?;
    let mut entries = tar::Archive::new(archive);
    let mut total = 0u64;
    for (count, entry) in entries.entries().map_err(|e| io("is not a tar archive", e))?.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(invalid(format!("the uploaded bundle holds more than {MAX_ENTRIES} entries")));
        }
        let mut entry = entry.map_err(|e| io("is truncated or not a tar archive", e))?;
        let path = entry.path().map_err(|e| io("has an unreadable path", e))?.into_owned();
        if !is_inside(&path) {
            return Err(invalid(format!("the uploaded bundle holds {path:?}, which leaves the bundle")));
        }
        let target = dest.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => std::fs::create_dir_all(&target).map_err(|e| io("cannot be stored", e))?,
            tar::EntryType::Regular => {
                total += entry.size();
                if total > max_bytes {
                    return Err(invalid(format!("the uploaded bundle unpacks to more than {max_bytes} bytes")));
                }
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io("cannot be stored", e))?;
                }
                let mut file = std::fs::File::create(&target).map_err(|e| io("cannot be stored", e))?;
                std::io::copy(&mut entry, &mut file).map_err(|e| io("is truncated", e))?;
                file.sync_all().map_err(|e| io("cannot be stored", e))?;
            }
            other => {
                return Err(invalid(format!(
                    "the uploaded bundle holds {} of type {other:?}; only files and directories are allowed",
                    path.display()
                )));
            }
        }
    }
    Bundle::open(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, manifest: &str) {
        std::fs::create_dir_all(dir.join("glue")).unwrap();
        std::fs::write(dir.join(MANIFEST), manifest).unwrap();
        std::fs::write(dir.join("glue/a.wasm"), b"a").unwrap();
        std::fs::write(dir.join("glue/b.wasm"), b"b").unwrap();
    }

    const TWO_TASKS: &str = "name = \"app\"\n[[tasks]]\nname = \"a\"\nglue = \"glue/a.wasm\"\n\
                             [[tasks]]\nname = \"b\"\nglue = \"glue/b.wasm\"\n[[edges]]\nfrom = \"a.out\"\nto = \"b\"\n";

    #[test]
    fn packing_is_deterministic_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), TWO_TASKS);
        std::fs::write(dir.path().join("unrelated.txt"), b"not part of the bundle").unwrap();
        let packed = pack(dir.path()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(dir.path().join("glue/a.wasm"), b"a").unwrap(); // a newer mtime, same bytes
        assert_eq!(pack(dir.path()).unwrap(), packed);

        let out = tempfile::tempdir().unwrap();
        let bundle = unpack(&packed, &out.path().join("b"), 1 << 20).unwrap();
        assert_eq!(bundle.entry().unwrap().name, "a");
        assert_eq!(bundle.files(), [PathBuf::from("glue/a.wasm"), "glue/b.wasm".into(), MANIFEST.into()]);
        assert!(!out.path().join("b/unrelated.txt").exists());
        assert!(unpack(&packed, &out.path().join("c"), 10).unwrap_err().0.contains("more than 10 bytes"));
    }

    #[test]
    fn the_manifest_version_is_1_by_default_and_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), TWO_TASKS);
        assert_eq!(Bundle::open(dir.path()).unwrap().manifest.manifest_version, 1);
        write(dir.path(), &format!("manifest_version = 1\n{TWO_TASKS}"));
        assert!(Bundle::open(dir.path()).is_ok());
        write(dir.path(), &format!("manifest_version = 2\n{TWO_TASKS}"));
        let error = Bundle::open(dir.path()).unwrap_err().0;
        assert!(error.contains("jig.toml") && error.contains("reads version 1"), "{error}");
    }

    #[test]
    fn query_classes_belong_to_compass_and_are_checked_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let class = |name: &str, latency: u64, accuracy: f64| {
            format!("{{ name = \"{name}\", latency_ms = {latency}, accuracy = {accuracy}, share = 1 }}")
        };
        let open = |planner: &str, classes: &[String]| {
            write(dir.path(), &format!("{planner}classes = [{}]\n{TWO_TASKS}", classes.join(", ")));
            Bundle::open(dir.path()).map(|b| b.manifest.classes.len()).map_err(|e| e.0)
        };
        let compass = "planner = \"compass\"\n";
        assert_eq!(open(compass, &[class("fast", 60, 0.5), class("best", 2000, 1.0)]), Ok(2));
        for (planner, classes, says) in [
            (compass, vec![], "declare them in `classes"),
            ("", vec![class("fast", 60, 0.5)], "add `planner = \"compass\"`"),
            (compass, vec![class("fast", 60, 0.5), class("fast", 70, 0.5)], "class `fast` is declared twice"),
            (compass, vec![class("fast", 0, 0.5)], "class `fast`: give a positive `latency_ms`"),
            (compass, vec![class("fast", 60, 1.5)], "an `accuracy` in (0, 1]"),
            (compass, vec![class("no way", 60, 0.5)], "class name"),
        ] {
            let error = open(planner, &classes).unwrap_err();
            assert!(error.contains("jig.toml") && error.contains(says), "{error}");
        }
    }

    #[test]
    fn ipa_settings_belong_to_ipa_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let open = |planner: &str, ipa: &str| {
            write(dir.path(), &format!("{planner}{TWO_TASKS}\n[ipa]\n{ipa}\n"));
            Bundle::open(dir.path()).map(|b| b.manifest.ipa.unwrap_or_default()).map_err(|e| e.0)
        };
        let ipa = "planner = \"ipa\"\n";
        let read = open(ipa, "alpha = 0.1\nvariants = \"lightest\"\nreplicas = 2").unwrap();
        assert_eq!(
            (read.alpha, read.variants.as_deref(), read.replicas, read.beta),
            (Some(0.1), Some("lightest"), Some(2), None)
        );
        assert_eq!(read.interval(), std::time::Duration::from_secs(10), "IPA's adaptation interval by default");
        assert_eq!(open(ipa, "interval_s = 2.5").unwrap().interval(), std::time::Duration::from_millis(2500));
        for (planner, table, says) in [
            ("", "alpha = 1", "add `planner = \"ipa\"`"),
            (ipa, "variants = \"light\"", "`ipa.variants = \"light\"`: say one of switch, lightest, heaviest"),
            (ipa, "beta = -1", "`ipa.beta` is -1"),
            (ipa, "gamma = 1", "unknown field `gamma`"),
            (ipa, "interval_s = 0.5", "`ipa.interval_s` is 0.5; give IPA's adaptation interval in seconds, 1 to 120"),
        ] {
            let error = open(planner, table).unwrap_err();
            assert!(error.contains("jig.toml") && error.contains(says), "{error}");
        }
    }

    #[test]
    fn tensors_declare_an_app_as_a_v2_model_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let open = |tensors: &str| {
            write(dir.path(), &format!("{TWO_TASKS}\n[tensors]\n{tensors}\n"));
            Bundle::open(dir.path()).map(|b| b.manifest.tensors.unwrap()).map_err(|e| e.0)
        };
        let good = "input = { name = \"x\", datatype = \"FP32\", shape = [-1, 4] }\n\
                    output = { name = \"y\", datatype = \"INT64\" }";
        let read = open(good).unwrap();
        assert_eq!((read.input.shape, read.output.datatype.as_str()), (vec![-1, 4], "INT64"));
        for (tensors, says) in [
            (good.replace("FP32", "F32"), "`tensors.input.datatype = \"F32\"`: say one of"),
            (good.replace("[-1, 4]", "[-2]"), "`tensors.input.shape` has -2"),
            (good.replace("\"y\"", "\"\""), "`tensors.output` has no name"),
            ("input = { name = \"x\", datatype = \"FP32\" }".into(), "missing field `output`"),
        ] {
            let error = open(&tensors).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_manifest_of_too_many_tasks_is_refused_by_count_without_server_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        let tasks: String =
            (0..=MAX_TASKS).map(|i| format!("[[tasks]]\nname = \"t{i}\"\nglue = \"g.wasm\"\n")).collect();
        let error = Bundle::with_manifest(dir.path(), &format!("name = \"big\"\n{tasks}")).unwrap_err().to_string();
        assert!(error.contains("257 tasks") && error.contains("at most 256"), "{error}");
        assert!(!error.contains(&*dir.path().to_string_lossy()), "{error}");
        let bad = Bundle::with_manifest(dir.path(), "name = ").unwrap_err().to_string();
        assert!(bad.starts_with("invalid bundle: jig.toml") || bad.contains("jig.toml is not"), "{bad}");
        assert!(!bad.contains(&*dir.path().to_string_lossy()), "{bad}");
    }

    #[test]
    fn an_archive_of_too_many_entries_is_refused() {
        let mut archive = tar::Builder::new(Vec::new());
        for i in 0..=MAX_ENTRIES {
            let mut header = tar::Header::new_ustar();
            header.set_size(0);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            archive.append_data(&mut header, format!("f{i}"), &b""[..]).unwrap();
        }
        let out = tempfile::tempdir().unwrap();
        let error = unpack(&archive.into_inner().unwrap(), &out.path().join("b"), 1 << 30).unwrap_err().0;
        assert!(error.contains("more than 10000 entries"), "{error}");
    }

    #[test]
    fn an_archive_of_junk_is_refused_without_its_bytes() {
        // A tar header block whose size field holds bytes that are not text: the tar reader quotes them.
        let mut junk = vec![0xffu8; 1024];
        junk[..5].copy_from_slice(b"name\0");
        let out = tempfile::tempdir().unwrap();
        let error = unpack(&junk, &out.path().join("b"), 1 << 20).unwrap_err().0;
        assert!(error.starts_with("the uploaded bundle is truncated or not a tar archive"), "{error}");
        assert!(error.chars().all(|c| c.is_ascii() && !c.is_ascii_control()), "no input bytes echoed: {error:?}");
    }

    #[test]
    fn graph_errors_name_the_tasks() {
        let cases = [
            (TWO_TASKS.replace("to = \"b\"", "to = \"c\""), "names task `c`, which is not declared"),
            (TWO_TASKS.replace("a.out", "aout"), "write `from = \"TASK.PORT\"`"),
            (TWO_TASKS.to_string() + "[[edges]]\nfrom = \"b.back\"\nto = \"a\"\n", "every task has an incoming edge"),
            (TWO_TASKS.replace("name = \"b\"", "name = \"a\""), "task `a` is declared twice"),
            (TWO_TASKS.replace("name = \"app\"", "name = \"my app\""), "app name `my app`"),
            (TWO_TASKS.replace("glue/b.wasm", "/etc/passwd"), "leaves the bundle"),
            (TWO_TASKS.to_string() + "[slo]\nlatency_ms = 0\n", "`slo.latency_ms` must be positive"),
        ];
        for (manifest, message) in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), &manifest);
            let error = Bundle::open(dir.path()).unwrap_err().0;
            assert!(error.contains(message) && error.contains("jig.toml"), "{message}: {error}");
        }
    }
}
