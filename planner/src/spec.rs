//! Plain input and output types of the planner, and the planning-spec file that carries the inputs.
//!
//! A spec file (TOML, or JSON when its name ends in `.json`) holds everything but the profile table: the app
//! graph with its variants, accuracies and multiplicative factors, the segment types with their slice costs,
//! the slices available, the demand and the objective weights. See the crate docs for an example.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{ParseError, PlanError};
pub use jig_policy::MigProfile;
/// Where a segment type runs, parsed from its name by the grammar the runtime's placed segments share.
pub use jig_policy::segment::SegmentKind;

/// Everything the planner needs besides the profile table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSpec {
    /// The function graph with its variants and its latency and accuracy SLOs.
    pub app: AppSpec,
    /// Segment types an instance may run on; the profile table is matched against their names.
    pub segments: Vec<SegmentSpec>,
    /// S_avail, and the size of a CPU host for placement.
    pub resources: Resources,
    /// The demand R at the app's roots.
    pub demand: DemandSpec,
    /// α, β of objective (14); the paper's §4.4 weights when absent.
    #[serde(default)]
    pub objective: Objective,
    /// IPA's weights (`[ipa]`), read when `app.planner = "ipa"`.
    #[serde(default)]
    pub ipa: IpaSpec,
    /// Compass's settings (`[compass]`), read when `app.planner = "compass"`.
    #[serde(default)]
    pub compass: CompassSpec,
    /// Maximum batch sizes to consider; all the profile table has when absent.
    #[serde(default)]
    pub batch_sizes: Option<Vec<u32>>,
}

/// Whether the TOML file at `path` has a top-level table `name`: how `jig plan` and `jig simulate` tell the
/// other strategies' spec files (`[ppipe]`, `[gpulet]`) from a planning spec.
pub fn has_table(path: &Path, name: &str) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| toml::from_str::<toml::Table>(&text).ok())
        .is_some_and(|table| table.contains_key(name))
}

impl PlanSpec {
    /// Read a spec from a TOML file, or JSON when the name ends in `.json`.
    pub fn from_file(path: &Path) -> Result<Self, PlanError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PlanError::Input(format!("cannot read {}: {e}", path.display())))?;
        let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let parsed = if json { Self::from_json(&text) } else { Self::from_toml(&text) };
        parsed.map_err(|e| PlanError::Input(format!("{}: {e}", path.display())))
    }

    /// Parse a spec from TOML text; errors are [`PlanError::Input`].
    pub fn from_toml(text: &str) -> Result<Self, PlanError> {
        toml::from_str(text).map_err(|e| PlanError::Input(e.to_string()))
    }

    /// Parse a spec from JSON text (the same fields as TOML); errors are [`PlanError::Input`].
    pub fn from_json(text: &str) -> Result<Self, PlanError> {
        serde_json::from_str(text).map_err(|e| PlanError::Input(e.to_string()))
    }
}

/// The function graph with its objectives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    /// The app's name, for reports and error messages.
    pub name: String,
    /// End-to-end latency SLO (SLO_l), milliseconds.
    pub slo_latency_ms: f64,
    /// Accuracy SLO (SLO_a) as a fraction of the best achievable accuracy, e.g. 0.9.
    pub slo_accuracy: f64,
    /// The graph's nodes; names must be unique.
    pub tasks: Vec<TaskSpec>,
    /// Directed edges along which requests flow; the graph must be acyclic. Empty when absent: every task is then
    /// a root and a sink.
    #[serde(default)]
    pub edges: Vec<EdgeSpec>,
    /// Paths and their request fractions f_p; when absent, every root-to-sink path, its fraction in proportion
    /// to the product of the factors along it (each task's most accurate variant's): the share of the sink
    /// invocations a request makes that take it.
    #[serde(default)]
    pub paths: Option<Vec<PathSpec>>,
    /// The planner strategy: `jigsaw` (the default) or `ipa`.
    #[serde(default)]
    pub planner: Strategy,
    /// Compass's query classes over the graph, each with its own SLOs and share of the demand; none: one
    /// class with the app's SLOs.
    #[serde(default)]
    pub classes: Vec<ClassSpec>,
    /// JigsawServe's staleness (§3.3, §4.4): how long beyond its wait bound L̂ a request may wait at a task
    /// without being picked up before it is dropped as stale, ms (the paper: 20 for SLOs of 650-700 ms, 40 for
    /// 1550). Absent: the task's share of the SLO on its tightest path.
    #[serde(default)]
    pub staleness_ms: Option<f64>,
}

/// A task t: one node of the function graph, and the model variants that may serve it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Edges, paths and factors refer to the task by this name.
    pub name: String,
    /// The model slot whose profile rows this task uses; the task's name when absent.
    #[serde(default)]
    pub slot: Option<String>,
    /// The variants v that may serve the task, at least one; a plan may split the task's requests among several.
    pub variants: Vec<VariantSpec>,
}

impl TaskSpec {
    /// The profile table's slot for this task: `slot`, or the task's name when absent.
    pub fn slot(&self) -> &str {
        self.slot.as_deref().unwrap_or(&self.name)
    }
}

/// One model variant v of a task, with its accuracy and its fan-out to downstream tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// Matches the profile table's `variant` column; unique within the task.
    pub name: String,
    /// A(t,v), in any unit shared by the task's variants (top-1 %, mAP, MOS…): only ratios to the task's best
    /// variant matter.
    pub accuracy: f64,
    /// F(t,v,t′): requests this variant emits to downstream task t′ per request it serves; 1 when absent.
    #[serde(default)]
    pub factors: BTreeMap<String, f64>,
}

/// A directed edge of the function graph: each request `from` serves with variant v sends F(from,v,to) requests
/// to `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeSpec {
    /// The upstream task's name.
    pub from: String,
    /// The downstream task's name.
    pub to: String,
}

/// A path p through the graph and the fraction of requests that follow it; it weighs the path in A_obj, and its
/// latency must meet SLO_l.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    /// Task names in order; each step must be an edge.
    pub tasks: Vec<String>,
    /// f_p; fractions are normalised to sum to 1.
    pub fraction: f64,
}

/// A segment type: where an instance runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentSpec {
    /// `mig:PROFILE:MPS` (e.g. `mig:2g.20gb:3`), `mps:PERCENT[xPROCESSES]` or `cpu:CORES`; profile rows name their segment
    /// the same way (with the GPU index after `mig:` or `mps:`, which is dropped): [`SegmentKind::parse`].
    pub name: String,
    /// s_n, the cost in slices (GPU slices or CPU cores); [`SegmentKind::default_slices`] when absent.
    #[serde(default)]
    pub slices: Option<u32>,
}

/// The capacity a plan may use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// S_avail: GPU slices (7 per H100) or CPU cores available in all.
    pub slices: u32,
    /// Cores of one CPU host, for placing `cpu:N` segments; 16 when absent.
    #[serde(default)]
    pub cores_per_host: Option<u32>,
    /// At most this many CPU cores in all `cpu:` segments, when a machine offers both kinds (`slices` then
    /// bounds cores and GPU slices together, and the cost counts a core like a GPU slice).
    #[serde(default)]
    pub cpu_cores: Option<u32>,
    /// At most this many slices in all GPU (`mig:` and `mps:`) segments.
    #[serde(default)]
    pub gpu_slices: Option<u32>,
    /// The MIG instances that exist (and are free), by profile: `{ "3g.40gb" = 2 }`. A plan holds at most these
    /// of each profile, as jig creates no MIG instance; absent, the GPU slices may take any MIG layout (what
    /// `jig plan --mig-config` plans with, to write the layout that serves the plan).
    #[serde(default)]
    pub mig_instances: Option<BTreeMap<String, u32>>,
}

/// Demand R at the app's roots: either a rate, or recent windows to predict from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemandSpec {
    /// Mean request rate (req/s) of recent windows, oldest first; only the last five count.
    pub windows: Vec<f64>,
    /// Head-room on the prediction; 5% when absent.
    #[serde(default)]
    pub slack: Option<f64>,
}

impl DemandSpec {
    /// Head-room on the prediction when the spec gives no `slack`: 5%.
    pub const DEFAULT_SLACK: f64 = 0.05;
    /// How many of the most recent windows the prediction averages.
    pub const WINDOWS: usize = 5;

    /// Predicted demand: the mean of the last five windows × (1 + slack).
    pub fn predict(&self) -> Result<f64, PlanError> {
        let recent = &self.windows[self.windows.len().saturating_sub(Self::WINDOWS)..];
        if recent.is_empty() || recent.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err(PlanError::Input("demand: `windows` must hold at least one non-negative rate".into()));
        }
        let slack = self.slack.unwrap_or(Self::DEFAULT_SLACK);
        if !slack.is_finite() || slack < 0.0 {
            return Err(PlanError::Input(format!("demand: slack {slack} must be non-negative")));
        }
        Ok(recent.iter().sum::<f64>() / recent.len() as f64 * (1.0 + slack))
    }

    /// The last window's rate with the same head-room: the load just seen, as a plan would be sized for it.
    pub fn latest(&self) -> Result<f64, PlanError> {
        DemandSpec { windows: self.last_window().to_vec(), slack: self.slack }.predict()
    }

    fn last_window(&self) -> &[f64] {
        &self.windows[self.windows.len().saturating_sub(1)..]
    }

    /// What a running app's controller re-plans for when a window closes ([`Replan::due`]): the prediction, or
    /// the last window alone where its load is higher. The mean of five windows trails a rising load, and a plan
    /// for it would serve less than the load just seen (after a surge's plan was let go of, the gateway planned
    /// for 2.66 req/s while 5-7 arrived). Under a steady or falling load it is the paper's prediction.
    pub fn to_re_plan(&self) -> DemandSpec {
        match (self.predict(), self.latest()) {
            (Ok(predicted), Ok(latest)) if latest > predicted => {
                DemandSpec { windows: self.last_window().to_vec(), slack: self.slack }
            }
            _ => self.clone(),
        }
    }
}

/// When the gateway's controller re-plans a running app: at a window's close, the predicted demand rose past the
/// one planned for by more than `threshold` of it, or fell below it by that much with the last window's load too,
/// or more than [`Replan::VIOLATION_SHARE`] of the last window's requests missed their SLO ([`Replan::due`]); and
/// within a window, each second, for a surge ([`Replan::surge`]). `jig simulate --replan-threshold` follows the
/// same rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replan {
    /// The relative move of the prediction that triggers a re-plan (the gateway's `replan_threshold`).
    pub threshold: f64,
}

impl Replan {
    /// Violations above this share of a window's requests trigger a re-plan.
    pub const VIOLATION_SHARE: f64 = 0.01;

    /// Whether a deployment planned for `planned_for` req/s is re-planned, given the `predicted` demand, the
    /// `latest` window's load ([`DemandSpec::latest`]) and the share of the last window's requests that violated
    /// their SLO. A plan is let go of only when the load just seen no longer needs it either: the mean of five
    /// windows trails a rising load, and alone would take capacity away (or undo a surge's re-plan at the next
    /// window's close) while the load is still there.
    pub fn due(&self, planned_for: f64, predicted: f64, latest: f64, violation_share: f64) -> bool {
        let margin = self.threshold * planned_for.max(0.1);
        let moved =
            if predicted >= planned_for { predicted - planned_for } else { planned_for - predicted.max(latest) };
        moved > margin || violation_share > Self::VIOLATION_SHARE
    }

    /// Whole seconds a surge's load is measured over: short, so that a burst is re-planned within seconds rather
    /// than a demand window (five minutes by default); long enough that one busy second is not a surge.
    pub const SURGE_S: usize = 3;

    /// Standard deviations of Poisson arrivals at the known load that a surge's count must exceed it by. At a few
    /// requests a second, chance alone passes the threshold often: at 2 req/s planned, 8 or more arrivals in 3 s
    /// where 6 are expected come a quarter of the time, and each re-plan would swap instances for noise. Four
    /// deviations leave chance about one surge in half an hour at 2 req/s (one in 15 minutes at 1 req/s); a burst
    /// of 10× still counts within its first second.
    pub const SURGE_SIGMAS: f64 = 4.0;

    /// Whether `load`, the mean arrivals a second over the last [`Replan::SURGE_S`] whole seconds, is a surge over
    /// `known` req/s (what the deployment was planned for, or the load of the last surge re-planned for within
    /// the window, the larger): above it by more than `threshold` and by more than arrivals at `known` vary by
    /// chance ([`Replan::SURGE_SIGMAS`]). A surge is re-planned for at once, for its load.
    pub fn surge(&self, load: f64, known: f64) -> bool {
        let known = known.max(0.1);
        let expected = known * Self::SURGE_S as f64;
        let by_chance = (expected + Self::SURGE_SIGMAS * expected.sqrt()) / Self::SURGE_S as f64;
        load > ((1.0 + self.threshold) * known).max(by_chance)
    }
}

/// Weights of objective (14): maximise α·A_obj − β·Σ slices.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Objective {
    /// α: weight of the normalised accuracy A_obj (a fraction of the best achievable).
    pub alpha: f64,
    /// β: the objective's cost of one slice (GPU slice or CPU core): beyond what the SLOs need, a plan takes a
    /// slice only where it raises α·A_obj by more than β.
    pub beta: f64,
}

impl Default for Objective {
    /// The paper's §4.4 weights.
    fn default() -> Self {
        Self { alpha: 1.0, beta: 0.035 }
    }
}

impl Objective {
    /// The paper's weights for `slices` available: its β = 0.035 maps the 28 slices of its testbed (four
    /// H100s) onto the accuracy's range 0–1 (§4.4), so on S slices the same mapping is β = 0.035 · 28 / S.
    pub fn scaled_to(slices: u32) -> Self {
        let paper = Self::default();
        Self { beta: paper.beta * 28.0 / f64::from(slices.max(1)), ..paper }
    }
}

/// Compass's settings (`[compass]`, [`crate::compass`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompassSpec {
    /// Plan each class alone, in the spec's order, on what the ones before it left (Compass's baseline).
    pub alone: bool,
}

/// A query class (Compass): requests that run the app's graph under SLOs of their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// The class's name.
    pub name: String,
    /// Its end-to-end latency SLO, ms.
    pub slo_latency_ms: f64,
    /// Its accuracy SLO, a fraction of the best achievable.
    pub slo_accuracy: f64,
    /// Its share of the app's demand (shares are normalised to sum to 1).
    pub share: f64,
}

/// IPA's objective weights and base-allocation threshold (`[ipa]`, [`crate::ipa`]): maximise
/// α·PAS − β·cores − δ·Σ batch, PAS in percent. The defaults are the paper's for its video pipeline (Table 15,
/// and Appendix A's 4 req/s threshold for detection and classification).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IpaSpec {
    /// α: the weight of PAS, the pipeline's accuracy in percent of its best.
    pub alpha: f64,
    /// β: the cost of one core.
    pub beta: f64,
    /// δ: the cost of one request of batch size, a tie-break towards smaller batches.
    pub delta: f64,
    /// th of Eq. 1: the req/s one replica must sustain at batch 1 on its variant's base allocation.
    pub threshold_rps: f64,
    /// Which variants a stage may run: `switch` (IPA: any), or one fixed, as the paper's baselines run:
    /// `lightest` (FA2-low: the fewest cores at its base allocation, then the fastest) or `heaviest` (FA2-high,
    /// the most accurate).
    pub variants: IpaVariants,
    /// Replicas of every stage fixed to this many (RIM: model switching and batching without scaling); 0:
    /// chosen by the program.
    pub replicas: u32,
}

impl Default for IpaSpec {
    fn default() -> Self {
        Self { alpha: 2.0, beta: 1.0, delta: 1e-6, threshold_rps: 4.0, variants: IpaVariants::Switch, replicas: 0 }
    }
}

/// Which variants IPA's program may choose per stage ([`IpaSpec::variants`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpaVariants {
    /// Any: model switching, as IPA does.
    #[default]
    Switch,
    /// Each stage's lightest variant (FA2-low): the fewest cores at its base allocation, then the fastest at
    /// batch 1 there.
    Lightest,
    /// Each stage's most accurate variant (FA2-high).
    Heaviest,
}

/// The A/S/T feature switches of the paper's ablation (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Features {
    /// A: accuracy scaling; otherwise only each task's most accurate variant.
    pub accuracy_scaling: bool,
    /// S: spatial partitioning (MIG × MPS segments); otherwise whole devices only.
    pub spatial: bool,
    /// T: task-graph-informed budgets; otherwise static per-task budgets (Appendix B), read as `uninformed`
    /// says.
    pub graph_budgets: bool,
    /// How a space without T budgets its tasks; ignored with T.
    #[serde(default)]
    pub uninformed: Uninformed,
    /// How eq. (4) and (9)–(10) weight a task's instance types.
    #[serde(default)]
    pub weighting: Weighting,
}

/// How the average factor F̂ (eq. 4) and the effective accuracy Â (eq. 9–10) weight a task's instance types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Weighting {
    /// jig's reading: by the requests each type serves (its routed rate x ≤ M·H). F̂ is then the average factor
    /// Table 2 names, and idle head-room of a variant counts neither for nor against accuracy.
    #[default]
    Served,
    /// The equations as printed: F̂(t,t′) = Σ F(t,v,t′)·N over the *active* types (a task with two active
    /// types emits twice), and Ĥ = M·H, the capacity. Plans route each task's requests in proportion to its
    /// types' capacities, so that what is served has the accuracy (10) computes.
    Literal,
}

impl Weighting {
    /// Parse `served` or `literal`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "served" => Ok(Self::Served),
            "literal" => Ok(Self::Literal),
            _ => Err(ParseError(format!(
                "unknown weighting `{s}` for eq. (4) and (9)–(10) (expected served or literal)"
            ))),
        }
    }
}

/// How a space without T (task-graph-uninformed) budgets each task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Uninformed {
    /// The paper as written. Appendix B's slice budgets; its latency budgets, the SLO split along each path in
    /// the ratio of each task's highest latency over every (segment, batch) of its most accurate variant; and,
    /// as accuracy budgeting is part of T (Table 1), a static accuracy budget per task: the allowed normalised
    /// loss 1 − SLO_a split along each path in the ratio of each task's largest loss (its least accurate
    /// admitted variant), the smallest share where a task is on several paths.
    #[default]
    Paper,
    /// Stronger baselines: the latency split counts only the types whose doubled latency fits the SLO (a batch
    /// of 128 on the smallest segment does not set every budget), and the accuracy SLO stays end-to-end,
    /// weighted by the graph, as with T.
    Strong,
}

impl Uninformed {
    /// Parse `paper` or `strong`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "paper" => Ok(Self::Paper),
            "strong" => Ok(Self::Strong),
            _ => Err(ParseError(format!("unknown budgeting `{s}` for spaces without T (expected paper or strong)"))),
        }
    }
}

impl Features {
    /// None of A, S, T: the paper's Unopt baseline.
    pub const UNOPT: Self = Self {
        accuracy_scaling: false,
        spatial: false,
        graph_budgets: false,
        uninformed: Uninformed::Paper,
        weighting: Weighting::Served,
    };
    /// A+S+T: JigsawServe.
    pub const ALL: Self = Self { accuracy_scaling: true, spatial: true, graph_budgets: true, ..Self::UNOPT };

    /// The eight combinations, in the order of the paper's Figure 3.
    pub fn combinations() -> [Self; 8] {
        let f = |a, s, t| Self { accuracy_scaling: a, spatial: s, graph_budgets: t, ..Self::UNOPT };
        [
            f(false, false, false),
            f(false, true, false),
            f(true, false, false),
            f(false, false, true),
            f(true, false, true),
            f(false, true, true),
            f(true, true, false),
            f(true, true, true),
        ]
    }

    /// Parse `A+S+T`, `a,s`, `unopt`, `all`…
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("unopt") || s.eq_ignore_ascii_case("none") {
            return Ok(Self::UNOPT);
        }
        if s.eq_ignore_ascii_case("all") || s.eq_ignore_ascii_case("jigsawserve") {
            return Ok(Self::ALL);
        }
        let mut f = Self::UNOPT;
        for part in s.split(['+', ',']).map(str::trim) {
            match part.to_ascii_uppercase().as_str() {
                "A" => f.accuracy_scaling = true,
                "S" => f.spatial = true,
                "T" => f.graph_budgets = true,
                _ => {
                    return Err(ParseError(format!(
                        "unknown feature `{part}` in `{s}` (expected A, S, T, unopt or all)"
                    )));
                }
            }
        }
        Ok(f)
    }

    /// The same space, its tasks budgeted as `uninformed` says when it has no T.
    pub fn with_uninformed(self, uninformed: Uninformed) -> Self {
        Self { uninformed, ..self }
    }

    /// The same space, weighting instance types in eq. (4) and (9)–(10) as `weighting` says.
    pub fn with_weighting(self, weighting: Weighting) -> Self {
        Self { weighting, ..self }
    }
}

impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [(self.accuracy_scaling, "A"), (self.spatial, "S"), (self.graph_budgets, "T")]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
        f.write_str(if names.is_empty() { "Unopt".to_string() } else { names.join("+") }.as_str())?;
        if !self.graph_budgets && self.uninformed == Uninformed::Strong {
            f.write_str(" (strong)")?;
        }
        if self.weighting == Weighting::Literal {
            f.write_str(" (literal)")?;
        }
        Ok(())
    }
}

/// A planner strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// JigsawServe (§3.2): mixes of variants, segment types and batch sizes per task over a whole graph, each
    /// task's latency budgeted as 2·L (a batch waits at most one batch time, then runs).
    #[default]
    Jigsaw,
    /// IPA (§4): linear pipelines on CPU cores; per stage one variant on its base core allocation, one batch
    /// size and a replica count, for α·PAS − β·cores − δ·Σ batch; latency is the batch's plus the worst-case
    /// wait for a full batch, (b − 1)/λ ([`crate::ipa`]).
    Ipa,
    /// Compass (§3–5): query classes with SLOs of their own over a linear pipeline's shared operators, planned
    /// together for SLO goodput ([`crate::compass`]).
    Compass,
    /// gpu-lets (Choi et al., ATC 2022): each task's most accurate variant on MPS shares of whole GPUs, sized
    /// by Algorithm 1 with the app's SLO split among its tasks ([`crate::gpulet::app`]).
    Gpulet,
    /// PPipe (Kong et al., ATC 2025): one model cut into a chain of tasks, each partition served by a pool of
    /// GPU shares or cores, one batch size for all, pools matched in throughput ([`crate::ppipe::app`]).
    Ppipe,
}

impl Strategy {
    /// Every strategy, in the order `--help` lists them.
    pub const ALL: [Strategy; 5] =
        [Strategy::Jigsaw, Strategy::Ipa, Strategy::Compass, Strategy::Gpulet, Strategy::Ppipe];

    /// The name `app.planner` and `--planner` take.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Jigsaw => "jigsaw",
            Strategy::Ipa => "ipa",
            Strategy::Compass => "compass",
            Strategy::Gpulet => "gpulet",
            Strategy::Ppipe => "ppipe",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Strategy::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Strategy::ALL.iter().map(|p| p.name()).collect();
            format!("unknown planner `{s}`: expected one of {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_let_go_of_only_when_the_load_just_seen_is_below_it_too() {
        let replan = Replan { threshold: 0.2 };
        let demand = DemandSpec { windows: vec![4.0, 6.0, 8.0, 10.0, 12.0], slack: Some(0.0) };
        assert_eq!((demand.predict().unwrap(), demand.latest().unwrap()), (8.0, 12.0));
        assert!(replan.due(6.0, 8.0, 12.0, 0.0), "up by a third");
        assert!(!replan.due(7.0, 8.0, 12.0, 0.0), "up within the threshold");
        assert!(!replan.due(12.0, 8.0, 12.0, 0.0), "down by a third, but the last window needs all of it");
        assert!(replan.due(12.0, 8.0, 9.0, 0.0), "down by a third, and the last window by a quarter");
        assert!(replan.due(12.0, 12.0, 12.0, 0.02), "violations");
    }

    #[test]
    fn a_re_plan_is_for_the_load_just_seen_where_the_prediction_trails_it() {
        let rising = DemandSpec { windows: vec![1.0, 1.0, 1.0, 3.3, 7.0], slack: None };
        assert!((rising.predict().unwrap() - 2.793).abs() < 1e-9);
        assert_eq!(rising.to_re_plan().windows, vec![7.0]);
        assert!((rising.to_re_plan().predict().unwrap() - 7.35).abs() < 1e-9, "the last window with head-room");
        let falling = DemandSpec { windows: vec![7.0, 3.3, 1.0, 1.0, 1.0], slack: None };
        assert_eq!(falling.to_re_plan(), falling, "the paper's prediction");
        let steady = DemandSpec { windows: vec![5.0; 5], slack: Some(0.1) };
        assert_eq!(steady.to_re_plan().predict().unwrap(), steady.predict().unwrap());
    }

    #[test]
    fn a_surge_passes_both_the_threshold_and_chance() {
        let replan = Replan { threshold: 0.2 };
        // 1000 req/s planned: four deviations of a 3-s mean are 73 req/s, so the threshold (1200) decides; at 100,
        // chance (123.1) does.
        assert!(replan.surge(1201.0, 1000.0) && !replan.surge(1199.0, 1000.0));
        assert!(replan.surge(123.2, 100.0) && !replan.surge(123.0, 100.0));
        // 2 req/s planned: 8 arrivals in 3 s (2.7 req/s) come by chance a quarter of the time; 4 deviations
        // over the 6 expected are 15.8 arrivals.
        assert!(!replan.surge(8.0 / 3.0, 2.0) && !replan.surge(15.0 / 3.0, 2.0) && replan.surge(16.0 / 3.0, 2.0));
        // Nothing planned counts as 0.1 req/s: one busy second (a handful of arrivals) is a surge already.
        assert!(replan.surge(5.0 / 3.0, 0.0));
    }

    #[test]
    fn names_round_trip_and_unknown_ones_are_listed() {
        for s in Strategy::ALL {
            assert_eq!(s.name().parse::<Strategy>(), Ok(s));
        }
        let err = "compas".parse::<Strategy>().unwrap_err();
        assert!(err.contains("`compas`") && err.contains("jigsaw, ipa, compass, gpulet, ppipe"), "{err}");
    }

    #[test]
    fn segment_kinds_parse_as_profile_tables_write_them() {
        let mig = SegmentKind::parse("mig:0:3g.40gb:2").unwrap();
        assert_eq!((mig.name(), mig.default_slices()), ("mig:3g.40gb:2".into(), 4));
        let share = SegmentKind::parse("mps:0:30").unwrap();
        assert_eq!(share, SegmentKind::Mps { percent: 30, processes: 1 });
        assert_eq!((share.name(), share.default_slices()), ("mps:30".into(), 3), "30% of 7 slices, rounded up");
        assert_eq!(SegmentKind::parse("mps:100").unwrap().default_slices(), 7);
        assert_eq!(SegmentKind::parse("cpu:4").unwrap(), SegmentKind::Cpu { cores: 4 });
        for (bad, says) in [("mps:0:0", "1 to 100"), ("mps:0:101", "1 to 100"), ("gpu:1", "write a segment as")] {
            let error = SegmentKind::parse(bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
