//! PPipe's control plane (Kong, Xu and Hu, "PPipe: Efficient Video Analytics Serving on Heterogeneous GPU Clusters
//! via Pool-Based Pipeline Parallelism", §3, §5.3 and Appendix A.2): one model, cut beforehand into blocks of
//! consecutive layers (`scripts/partition_model.py`), served by *pooled pipelines*. A pooled pipeline cuts the
//! model into partitions at block boundaries; each partition is served by a pool of virtual GPUs of one class
//! (a unit of the class, or a 1/v share of one: MPS), any request may take any member of each pool, and all
//! partitions of a pipeline run one batch size (batch-size unification), the pools' sizes matching their
//! throughputs. The program picks, per candidate pipeline (every sequence of classes up to
//! [`PpipeProblem::max_partitions`] long), whether it runs, its batch size, its cut points, each partition's
//! share size and pool size, to maximise the total throughput within the latency SLO less its margin (the
//! partitions' latencies plus the transfers between them) and the units of each class.
//!
//! The formulation is A.2's with one reading the paper leaves open: a candidate pipeline may be left out ((16) as
//! printed makes every candidate run, which no cluster smaller than the candidates allows); and it is written
//! over each candidate's whole configurations (cut points, one batch size, shares: (16)–(20) and (24)–(27) hold
//! by construction) rather than each partition's choice apart ([`solve`] says why). A partition's throughput on
//! one virtual GPU is b / C (the paper's worked example: 2 × 1/0.0123 = 162 req/s). Ties in throughput are
//! broken towards fewer units.
//!
//! The baselines are the same program restricted ([`Scheme`]): NP runs whole models only; DART-r, DART's chains
//! replicated, cuts a model in two across units of two different classes, each chain one unit of each, and runs
//! the rest of the units' models whole.
//!
//! Where it stands (issue 19): the program, checked against exhaustive search on small clusters
//! (`planner/tests/planner/ppipe_vs_exhaustive.rs`), planning `[ppipe]` specs ([`PpipeSpec`]) in `jig plan` and
//! `jig simulate` (whose data plane is `jig_sim::ppipe`), and deployments of a model cut into a chain of tasks
//! ([`app`], `planner = "ppipe"`). At the paper's size (10 blocks, two classes of 25 and 75 units with four share
//! sizes, five batch sizes, three partitions) it solves in seconds (`BENCH_APP=ppipe cargo bench -p jig-sim
//! --bench solve`, BENCHMARKS.md).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use good_lp::solvers::highs::highs;
use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus, SolverModel, constraint, variable,
};

use crate::error::PlanError;
use crate::solution::{SolveOptions, highs_with};

pub mod app;

/// A class of segments: `units` alike (GPUs of one model, MIG instances of one profile, core sets of one size),
/// each of which may be split into `1/v` shares for each `v` of `shares` (1: the whole unit).
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    /// Its name, for messages and plans (`L4`, `mig 3g.40gb`, `cpu:4`).
    pub name: String,
    /// Units of it the cluster has.
    pub units: u32,
    /// The shares a unit may be split into: `v` for 1/v of a unit (PPipe: 1, 2, 3, 4).
    pub shares: Vec<u32>,
}

/// A model cut into blocks, profiled per block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockedModel {
    /// Its name.
    pub name: String,
    /// Blocks, in order.
    pub blocks: usize,
    /// Latency of block `block` at `batch` on a `1/share` share of `class`, ms: `(class, share, batch, block)`.
    pub latency_ms: HashMap<(usize, u32, u32, usize), f64>,
    /// Bytes per row of each block's output (the feature map a cut after it sends on).
    pub output_bytes: Vec<u64>,
}

/// Which of PPipe's comparisons plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    /// Pooled pipelines of up to `max_partitions` partitions on any classes and shares.
    #[default]
    PPipe,
    /// NP: whole models only, on any class and share.
    NoPartitioning,
    /// DART-r: chains of one unit of each of two different classes, the model cut in two between them,
    /// replicated; whole models on what is left.
    DartR,
    /// Every block a partition of its own: the cuts a deployed chain of sub-models has already made, one task a
    /// block ([`app`]).
    EveryBlock,
}

/// What PPipe plans.
#[derive(Debug, Clone, PartialEq)]
pub struct PpipeProblem {
    /// The model and its block profiles.
    pub model: BlockedModel,
    /// The cluster's classes.
    pub classes: Vec<Class>,
    /// The latency SLO, ms.
    pub slo_ms: f64,
    /// The share of the SLO held back from the plan, so that the data plane's batches fit (PPipe: 0.4).
    pub margin: f64,
    /// Batch sizes a pipeline may run.
    pub batches: Vec<u32>,
    /// The most partitions a pipeline has (the paper's example: 3).
    pub max_partitions: usize,
    /// Bytes per second a feature map moves between partitions.
    pub bandwidth_bytes_per_s: f64,
    /// Which comparison plans.
    pub scheme: Scheme,
}

/// A PPipe planning spec: a TOML file with a `[ppipe]` table, which `jig plan SPEC` and `jig simulate SPEC`
/// read (docs/src/guides/planners.md, "PPipe").
///
/// ```toml
/// [ppipe]
/// model = "ppocr-rec"
/// blocks = ["block0", "block1", "block2"]   # the profile table's slots, one per block, in order
/// output_bytes = [983040, 491520, 245760]   # each block's output per row; or `blocks_json`, as
///                                           # partition_model.py writes it, for both
/// profiles = "blocks.csv"                   # a profile table (`jig profile`'s format), relative to the spec
/// slo_ms = 100
/// margin = 0.4                              # default 0.4
/// batches = [1, 2, 4, 8]                    # default: every batch size the table has
/// max_partitions = 3                        # default 3
/// bandwidth_gbps = 10                       # between partitions; default 10
/// scheme = "ppipe"                          # or "np", "dart-r"
/// classes = [                               # share v of a unit: the segment its rows were measured on
///   { name = "fast", units = 4, segments = { 1 = "mps:0:100", 2 = "mps:0:50" } },
///   { name = "slow", units = 12, segments = { 1 = "cpu:4" } },
/// ]
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpipeSpec {
    /// The `[ppipe]` table.
    pub ppipe: PpipeTable,
}

/// The `[ppipe]` table of a [`PpipeSpec`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpipeTable {
    /// The model's name.
    pub model: String,
    /// The profile table's slot of each block, in order (with `blocks_json`, default `block0`, `block1`, …).
    #[serde(default)]
    pub blocks: Vec<String>,
    /// Bytes per row of each block's output.
    #[serde(default)]
    pub output_bytes: Vec<u64>,
    /// `partition_model.py`'s blocks json, for the block count and output sizes.
    pub blocks_json: Option<String>,
    /// The profile table of the blocks.
    pub profiles: String,
    /// The latency SLO, ms.
    pub slo_ms: f64,
    /// The share of the SLO held back (default 0.4).
    pub margin: Option<f64>,
    /// Batch sizes (default: the table's).
    #[serde(default)]
    pub batches: Vec<u32>,
    /// Partitions a pipeline may have (default 3).
    pub max_partitions: Option<usize>,
    /// Between partitions, Gbit/s (default 10).
    pub bandwidth_gbps: Option<f64>,
    /// `ppipe`, `np` or `dart-r` (default `ppipe`).
    pub scheme: Option<String>,
    /// The cluster's classes.
    pub classes: Vec<ClassSpec>,
}

/// A class of a [`PpipeTable`]: its units, and per share size the segment its blocks were profiled on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Its name.
    pub name: String,
    /// Units the cluster has.
    pub units: u32,
    /// Share `v` (1/v of a unit) → the profile table's segment measured on it.
    pub segments: HashMap<String, String>,
}

impl Scheme {
    /// The scheme a spec names: `ppipe`, `np` or `dart-r`.
    pub fn parse(name: &str) -> Result<Scheme, PlanError> {
        match name {
            "ppipe" => Ok(Scheme::PPipe),
            "np" => Ok(Scheme::NoPartitioning),
            "dart-r" => Ok(Scheme::DartR),
            "every-block" => Ok(Scheme::EveryBlock),
            other => Err(PlanError::Input(format!("scheme `{other}`: say `ppipe`, `np`, `dart-r` or `every-block`"))),
        }
    }

    /// Its name in specs and output.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::PPipe => "ppipe",
            Scheme::NoPartitioning => "np",
            Scheme::DartR => "dart-r",
            Scheme::EveryBlock => "every-block",
        }
    }
}

impl PpipeProblem {
    /// Read a PPipe spec (`[ppipe]`, above) and the files it names, relative to it.
    pub fn from_spec_file(path: &Path) -> Result<PpipeProblem, PlanError> {
        let at = |what: &str| format!("{}: {what}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| PlanError::Input(at(&e.to_string())))?;
        let spec: PpipeSpec = toml::from_str(&text).map_err(|e| PlanError::Input(at(&e.to_string())))?;
        let t = spec.ppipe;
        let dir = path.parent().unwrap_or(Path::new("."));
        let (mut blocks, mut output_bytes) = (t.blocks, t.output_bytes);
        if let Some(json) = &t.blocks_json {
            let file = dir.join(json);
            let text = std::fs::read_to_string(&file).map_err(|e| {
                PlanError::Input(format!("{}: {e}; cut the model with partition_model.py", file.display()))
            })?;
            #[derive(Deserialize)]
            struct Blocks {
                blocks: Vec<Block>,
            }
            #[derive(Deserialize)]
            struct Block {
                output_bytes_per_row: u64,
            }
            let read: Blocks =
                serde_json::from_str(&text).map_err(|e| PlanError::Input(format!("{}: {e}", file.display())))?;
            output_bytes = read.blocks.iter().map(|b| b.output_bytes_per_row).collect();
            if blocks.is_empty() {
                blocks = (0..output_bytes.len()).map(|i| format!("block{i}")).collect();
            }
        }
        if blocks.len() != output_bytes.len() {
            return Err(PlanError::Input(at(&format!(
                "{} blocks but {} output sizes: give one `output_bytes` per block, or `blocks_json`",
                blocks.len(),
                output_bytes.len()
            ))));
        }
        let table = dir.join(&t.profiles);
        let rows = crate::profile::read(&table, "the blocks")?;
        let mut classes = Vec::new();
        let mut latency_ms = HashMap::new();
        for (k, class) in t.classes.iter().enumerate() {
            let mut shares = Vec::new();
            for (share, segment) in &class.segments {
                let v: u32 = share.parse().ok().filter(|&v| v >= 1).ok_or_else(|| {
                    PlanError::Input(at(&format!("class `{}`: share `{share}` is not a whole number ≥ 1", class.name)))
                })?;
                shares.push(v);
                for (block, slot) in blocks.iter().enumerate() {
                    let mut found = false;
                    for row in rows.iter().filter(|r| &r.slot == slot && &r.segment == segment) {
                        latency_ms.insert((k, v, row.batch, block), row.p95_ms);
                        found = true;
                    }
                    if !found {
                        return Err(PlanError::Input(format!(
                            "{}: no row of block `{slot}` on segment `{segment}` (class `{}`, share 1/{v}); profile it                              there",
                            table.display(),
                            class.name
                        )));
                    }
                }
            }
            shares.sort_unstable();
            classes.push(Class { name: class.name.clone(), units: class.units, shares });
        }
        let mut batches = t.batches;
        if batches.is_empty() {
            batches = latency_ms.keys().map(|&(_, _, b, _)| b).collect();
            batches.sort_unstable();
            batches.dedup();
        }
        Ok(PpipeProblem {
            model: BlockedModel { name: t.model, blocks: blocks.len(), latency_ms, output_bytes },
            classes,
            slo_ms: t.slo_ms,
            margin: t.margin.unwrap_or(0.4),
            batches,
            max_partitions: t.max_partitions.unwrap_or(3),
            bandwidth_bytes_per_s: t.bandwidth_gbps.unwrap_or(10.0) * 1e9 / 8.0,
            scheme: t.scheme.as_deref().map(Scheme::parse).transpose()?.unwrap_or_default(),
        })
    }

    /// Whether the TOML at `path` is a PPipe spec (has a `[ppipe]` table).
    pub fn is_spec(path: &Path) -> bool {
        crate::spec::has_table(path, "ppipe")
    }
}

impl PpipePlan {
    /// The plan as `jig plan` prints it.
    pub fn to_text(&self, problem: &PpipeProblem) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "model {}: {} plan, {:.1} req/s within {:.0} ms less {:.0}% ({}, {:.2} s)",
            problem.model.name,
            problem.scheme.name(),
            self.throughput_rps,
            problem.slo_ms,
            problem.margin * 100.0,
            if self.optimal { "optimal" } else { "time limit" },
            self.seconds
        );
        for (k, class) in problem.classes.iter().enumerate() {
            let _ = writeln!(out, "  {}: {:.2} of {} units", class.name, self.units_used[k], class.units);
        }
        for p in &self.pipelines {
            let parts: Vec<String> = p
                .partitions
                .iter()
                .map(|q| {
                    let share = if q.share == 1 { String::new() } else { format!(" 1/{}", q.share) };
                    let (a, b) = (q.blocks.start, q.blocks.end - 1);
                    format!("blocks {a}–{b} on {} × {}{share}", q.count, problem.classes[q.class].name)
                })
                .collect();
            let _ = writeln!(
                out,
                "  batch {}: {} ({:.1} ms, {:.1} req/s)",
                p.batch,
                parts.join(" → "),
                p.latency_ms,
                p.throughput_rps
            );
        }
        out
    }
}

/// One partition of a planned pipeline: its blocks, served by `count` shares of `1/share` of a unit of `class`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    /// Index into [`PpipeProblem::classes`].
    pub class: usize,
    /// `v`: each member of the pool is 1/v of a unit.
    pub share: u32,
    /// Pool size: virtual GPUs serving this partition.
    pub count: u32,
    /// The blocks it runs.
    pub blocks: Range<usize>,
    /// Its latency at the pipeline's batch size, ms.
    pub latency_ms: f64,
}

/// A planned pooled pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pipeline {
    /// Its partitions, in order.
    pub partitions: Vec<Partition>,
    /// The batch size every partition runs.
    pub batch: u32,
    /// End to end at that batch: partitions and transfers, ms.
    pub latency_ms: f64,
    /// Requests per second it serves: its slowest pool's.
    pub throughput_rps: f64,
}

/// PPipe's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PpipePlan {
    /// The pipelines that run.
    pub pipelines: Vec<Pipeline>,
    /// Their throughput together, req/s.
    pub throughput_rps: f64,
    /// Units of each class the plan uses (shares add up to units).
    pub units_used: Vec<f64>,
    /// False when the time limit cut the search short.
    pub optimal: bool,
    /// Wall-clock time of the solve, seconds.
    pub seconds: f64,
}

/// One choice for one partition of a candidate pipeline.
#[derive(Debug, Clone)]
struct Choice {
    share: u32,
    batch: u32,
    blocks: Range<usize>,
    /// The partition's latency, and the transfer after it (none after the last), ms.
    latency_ms: f64,
    transfer_ms: f64,
}

/// A candidate pipeline: its partitions' classes, and each partition's choices.
#[derive(Debug, Clone)]
struct Candidate {
    classes: Vec<usize>,
    choices: Vec<Vec<Choice>>,
}

impl PpipeProblem {
    /// The SLO the plan keeps to: the SLO less its margin, ms.
    pub fn budget_ms(&self) -> f64 {
        self.slo_ms * (1.0 - self.margin)
    }

    fn check(&self) -> Result<(), PlanError> {
        let model = &self.model.name;
        let bad = |what: String| Err(PlanError::Input(format!("model `{model}`: {what}")));
        if self.model.blocks == 0 {
            return bad("it has no blocks; cut it with scripts/partition_model.py".into());
        }
        if self.model.output_bytes.len() != self.model.blocks {
            return bad(format!(
                "{} output sizes for {} blocks: give each block's output bytes per row",
                self.model.output_bytes.len(),
                self.model.blocks
            ));
        }
        if !(self.slo_ms > 0.0 && (0.0..1.0).contains(&self.margin)) {
            return bad(format!(
                "an SLO of {} ms with a margin of {}: give a positive SLO and a margin in [0, 1)",
                self.slo_ms, self.margin
            ));
        }
        if self.batches.is_empty() || self.batches.contains(&0) || self.max_partitions == 0 {
            return bad("give batch sizes of at least 1 and at least one partition".into());
        }
        if self.bandwidth_bytes_per_s.is_nan() || self.bandwidth_bytes_per_s <= 0.0 {
            return bad("the bandwidth between partitions must be positive".into());
        }
        for class in &self.classes {
            if class.shares.is_empty() || class.shares.contains(&0) {
                return bad(format!("class `{}` offers no share sizes: give `v` ≥ 1 (1 is a whole unit)", class.name));
            }
        }
        Ok(())
    }

    /// Latency of `blocks` at `batch` on a `1/share` share of `class`, when every block is profiled there.
    pub fn latency(&self, class: usize, share: u32, batch: u32, blocks: &Range<usize>) -> Option<f64> {
        blocks.clone().map(|b| self.model.latency_ms.get(&(class, share, batch, b)).copied()).sum()
    }

    /// The transfer of block `block`'s output at `batch`, ms.
    pub fn transfer_ms(&self, block: usize, batch: u32) -> f64 {
        f64::from(batch) * self.model.output_bytes[block] as f64 / self.bandwidth_bytes_per_s * 1e3
    }

    /// The candidate pipelines the scheme allows, with every choice of each partition that fits the budget alone.
    fn candidates(&self) -> Vec<Candidate> {
        let (k, m) = (self.classes.len(), self.model.blocks);
        let (fewest, most) = match self.scheme {
            Scheme::PPipe => (1, self.max_partitions.min(m)),
            Scheme::NoPartitioning => (1, 1),
            Scheme::DartR => (1, 2.min(m)),
            Scheme::EveryBlock => (m, m),
        };
        let mut out = Vec::new();
        for parts in fewest..=most {
            for code in 0..k.pow(parts as u32) {
                let classes: Vec<usize> = (0..parts).map(|d| code / k.pow(d as u32) % k).collect();
                if self.scheme == Scheme::DartR && parts == 2 && classes[0] == classes[1] {
                    continue;
                }
                let choices: Vec<Vec<Choice>> = (0..parts)
                    .map(|d| {
                        let mut here = Vec::new();
                        // Partition d starts at block d or later and leaves a block for each partition after it.
                        let starts = if d == 0 { 0..1 } else { d..m - (parts - 1 - d) };
                        for i in starts {
                            let ends = if d == parts - 1 { m..m + 1 } else { i + 1..m - (parts - 1 - d) + 1 };
                            for j in ends {
                                for &share in self.shares(classes[d], parts) {
                                    for &batch in &self.batches {
                                        let Some(latency_ms) = self.latency(classes[d], share, batch, &(i..j)) else {
                                            continue;
                                        };
                                        let transfer_ms =
                                            if d + 1 < parts { self.transfer_ms(j - 1, batch) } else { 0.0 };
                                        if latency_ms + transfer_ms <= self.budget_ms() {
                                            here.push(Choice { share, batch, blocks: i..j, latency_ms, transfer_ms });
                                        }
                                    }
                                }
                            }
                        }
                        here
                    })
                    .collect();
                if choices.iter().all(|c| !c.is_empty()) {
                    out.push(Candidate { classes, choices });
                }
            }
        }
        out
    }

    /// The share sizes a partition of a pipeline of `parts` partitions may use on `class`: DART's chains hold
    /// whole units.
    fn shares(&self, class: usize, parts: usize) -> &[u32] {
        match (self.scheme, parts) {
            (Scheme::DartR, 2) => &[1],
            _ => &self.classes[class].shares,
        }
    }
}

/// The least common multiple of the shares offered: units counted in its parts make every share a whole number
/// of parts (a 1/v share is lcm/v of them).
pub(crate) fn lcm_of_shares(classes: &[Class]) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    classes.iter().flat_map(|c| c.shares.iter().copied()).fold(1, |l, v| l / gcd(l, v) * v)
}

/// One way to run a candidate pipeline: a choice per partition, contiguous, at one batch size, within the
/// budget end to end.
#[derive(Debug, Clone)]
struct Config<'a> {
    choices: Vec<&'a Choice>,
    latency_ms: f64,
}

impl Config<'_> {
    /// Requests per second one virtual GPU of partition `d` serves.
    fn rate(&self, d: usize) -> f64 {
        f64::from(self.choices[d].batch) * 1e3 / self.choices[d].latency_ms
    }

    /// Units of each of `classes` classes one request per second takes, pools sized exactly.
    fn cost(&self, classes: &[usize], count: usize) -> Vec<f64> {
        let mut cost = vec![0.0; count];
        for (d, c) in self.choices.iter().enumerate() {
            cost[classes[d]] += 1.0 / (f64::from(c.share) * self.rate(d));
        }
        cost
    }
}

/// A candidate with more configurations than this keeps only those no other makes cheaper in every class
/// (see [`solve`]).
const PARETO_ABOVE: usize = 64;

/// Every configuration of `cand` within `budget_ms`.
fn configs(cand: &Candidate, budget_ms: f64) -> Vec<Config<'_>> {
    let mut out = Vec::new();
    let mut stack: Vec<&Choice> = Vec::new();
    fn walk<'a>(cand: &'a Candidate, budget: f64, stack: &mut Vec<&'a Choice>, out: &mut Vec<Config<'a>>) {
        let d = stack.len();
        let spent: f64 = stack.iter().map(|c| c.latency_ms + c.transfer_ms).sum();
        if d == cand.choices.len() {
            out.push(Config { choices: stack.clone(), latency_ms: spent });
            return;
        }
        for c in &cand.choices[d] {
            let follows = stack.last().is_none_or(|p| p.blocks.end == c.blocks.start && p.batch == c.batch);
            if follows && spent + c.latency_ms + c.transfer_ms <= budget {
                stack.push(c);
                walk(cand, budget, stack, out);
                stack.pop();
            }
        }
    }
    walk(cand, budget_ms, &mut stack, &mut out);
    out
}

/// The configurations of `all` that no other takes less of every class for (and less of one).
fn pareto<'a>(mut all: Vec<(Config<'a>, Vec<f64>)>) -> Vec<(Config<'a>, Vec<f64>)> {
    all.sort_by(|a, b| a.1.iter().sum::<f64>().total_cmp(&b.1.iter().sum::<f64>()));
    let mut front: Vec<(Config<'a>, Vec<f64>)> = Vec::new();
    for (config, cost) in all {
        let dominated = front.iter().any(|(_, f)| f.iter().zip(&cost).all(|(a, b)| a <= b));
        if !dominated {
            front.push((config, cost));
        }
    }
    front
}

/// Plan `problem` as PPipe's MILP does (or its baseline, by [`PpipeProblem::scheme`]).
///
/// The program is A.2's over whole configurations of each candidate pipeline (its cut points, batch size and
/// shares, within the budget end to end) rather than over each partition's choice apart, which is the same set
/// of plans: a configuration's latency is then checked before the solve, and the relaxation cannot average a
/// pipeline's latency over fractional choices (with per-partition choices its bound was four times the plans'
/// at the paper's size). A candidate with more than `PARETO_ABOVE` (64) configurations keeps those no other makes
/// cheaper in units of every class per request per second: exact where pools may be any size, and near it where
/// they are tens of units.
pub fn solve(problem: &PpipeProblem, options: &SolveOptions) -> Result<PpipePlan, PlanError> {
    solve_pruned(problem, options, PARETO_ABOVE)
}

/// [`solve`], keeping every configuration of a candidate that has at most `pareto_above` of them.
fn solve_pruned(problem: &PpipeProblem, options: &SolveOptions, pareto_above: usize) -> Result<PpipePlan, PlanError> {
    let started = Instant::now();
    problem.check()?;
    let nothing_fits = || {
        PlanError::Infeasible(format!(
            "model `{}`: no pipeline of the classes {} meets the {:.1} ms SLO less its {:.0}% margin ({:.1} ms) at any \
             profiled batch size within their units; profile faster classes or smaller batches, or loosen the SLO",
            problem.model.name,
            problem.classes.iter().map(|c| format!("`{}`", c.name)).collect::<Vec<_>>().join(", "),
            problem.slo_ms,
            problem.margin * 100.0,
            problem.budget_ms()
        ))
    };
    let candidates = problem.candidates();
    let per_candidate: Vec<Vec<Config>> = candidates
        .iter()
        .map(|cand| {
            let all = configs(cand, problem.budget_ms());
            if all.len() <= pareto_above {
                return all;
            }
            let costed = all.into_iter().map(|c| {
                let cost = c.cost(&cand.classes, problem.classes.len());
                (c, cost)
            });
            pareto(costed.collect()).into_iter().map(|(c, _)| c).collect()
        })
        .collect();
    if per_candidate.iter().all(Vec::is_empty) {
        return Err(nothing_fits());
    }
    let lcm = f64::from(lcm_of_shares(&problem.classes));
    let mut vars = ProblemVariables::new();
    let mut rows = Vec::new();
    let mut objective = Expression::default();
    let mut units: Vec<Expression> = problem.classes.iter().map(|_| Expression::default()).collect();
    // Per configuration: whether it runs, its pool sizes, its throughput.
    let mut chosen: Vec<Vec<(good_lp::Variable, Vec<good_lp::Variable>)>> = Vec::new();
    for (cand, configs) in candidates.iter().zip(&per_candidate) {
        let mut one = Expression::default();
        let mut here = Vec::new();
        for config in configs {
            let on = vars.add(variable().binary());
            one += on;
            let throughput = vars.add(variable().min(0));
            objective += throughput;
            let mut pools = Vec::new();
            for (d, c) in config.choices.iter().enumerate() {
                let k = cand.classes[d];
                let most = f64::from(problem.classes[k].units * c.share);
                let g = vars.add(variable().integer().min(0).max(most));
                rows.push(constraint!(g <= most * on));
                rows.push(constraint!(g >= on));
                rows.push(constraint!(throughput <= config.rate(d) * g));
                units[k].add_mul(lcm / f64::from(c.share), g);
                pools.push(g);
            }
            if problem.scheme == Scheme::DartR && pools.len() == 2 {
                // Replicated chains: as many units of the one class as of the other.
                rows.push(constraint!(pools[0] == pools[1]));
            }
            here.push((on, pools));
        }
        rows.push(constraint!(one <= 1));
        chosen.push(here);
    }
    // Ties go to the plan with fewer units: a unit is worth a millionth of a request per second.
    let mut used = Expression::default();
    for (k, class) in problem.classes.iter().enumerate() {
        rows.push(constraint!(units[k].clone() <= f64::from(class.units) * lcm));
        used += units[k].clone();
    }
    let mut model = vars
        .maximise(objective - 1e-6 * used)
        .using(|p| highs_with(highs(p), options))
        .set_mip_rel_gap(options.mip_rel_gap as f32)
        .map_err(|e| PlanError::Solver(e.to_string()))?;
    for row in rows {
        model.add_constraint(row);
    }
    let solution = match model.solve() {
        Ok(s) => s,
        Err(ResolutionError::Infeasible) => return Err(nothing_fits()),
        Err(ResolutionError::Other("NoSolutionFound")) => return Err(PlanError::TimeLimit(options.time_limit_s)),
        Err(e) => return Err(PlanError::Solver(e.to_string())),
    };
    let optimal = !matches!(solution.status(), SolutionStatus::TimeLimit);
    let mut pipelines = Vec::new();
    let mut units_used = vec![0.0; problem.classes.len()];
    for ((cand, configs), vars) in candidates.iter().zip(&per_candidate).zip(&chosen) {
        for (config, (on, pools)) in configs.iter().zip(vars) {
            if solution.value(*on) < 0.5 {
                continue;
            }
            let partitions: Vec<Partition> = config
                .choices
                .iter()
                .zip(pools)
                .enumerate()
                .map(|(d, (c, &g))| Partition {
                    class: cand.classes[d],
                    share: c.share,
                    count: solution.value(g).round() as u32,
                    blocks: c.blocks.clone(),
                    latency_ms: c.latency_ms,
                })
                .collect();
            for p in &partitions {
                units_used[p.class] += f64::from(p.count) / f64::from(p.share);
            }
            let throughput_rps = (0..partitions.len())
                .map(|d| f64::from(partitions[d].count) * config.rate(d))
                .fold(f64::INFINITY, f64::min);
            pipelines.push(Pipeline {
                batch: config.choices[0].batch,
                latency_ms: config.latency_ms,
                throughput_rps,
                partitions,
            });
        }
    }
    if pipelines.is_empty() {
        return Err(nothing_fits());
    }
    Ok(PpipePlan {
        throughput_rps: pipelines.iter().map(|p| p.throughput_rps).sum(),
        pipelines,
        units_used,
        optimal,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two classes, the second slower on later blocks, with whole units and halves.
    fn medium(units: [u32; 2]) -> PpipeProblem {
        let mut latency_ms = HashMap::new();
        for k in 0..2 {
            for v in [1u32, 2] {
                for b in [1u32, 2, 4] {
                    for block in 0..4 {
                        let base = if k == 0 { 1.0 } else { 1.2 + 0.6 * block as f64 };
                        latency_ms.insert((k, v, b, block), base * f64::from(v).powf(0.8) * f64::from(b).powf(0.7));
                    }
                }
            }
        }
        PpipeProblem {
            model: BlockedModel { name: "m".into(), blocks: 4, latency_ms, output_bytes: vec![100_000; 4] },
            classes: (0..2).map(|k| Class { name: format!("c{k}"), units: units[k], shares: vec![1, 2] }).collect(),
            slo_ms: 50.0,
            margin: 0.4,
            batches: vec![1, 2, 4],
            max_partitions: 3,
            bandwidth_bytes_per_s: 1.25e9,
            scheme: Scheme::PPipe,
        }
    }

    #[test]
    fn keeping_the_cheapest_configurations_loses_little() {
        let options = SolveOptions::default();
        for (units, within) in [([1, 3], 0.05), ([4, 12], 0.02)] {
            let p = medium(units);
            let most = p.candidates().iter().map(|c| configs(c, p.budget_ms()).len()).max().unwrap();
            assert!(most > PARETO_ABOVE, "the case prunes: {most} configurations");
            let (pruned, all) = (solve(&p, &options).unwrap(), solve_pruned(&p, &options, usize::MAX).unwrap());
            assert!(pruned.throughput_rps <= all.throughput_rps + 1e-6);
            assert!(
                pruned.throughput_rps >= (1.0 - within) * all.throughput_rps,
                "{units:?}: {} against {}",
                pruned.throughput_rps,
                all.throughput_rps
            );
        }
    }

    #[test]
    fn a_configuration_cheaper_in_every_class_hides_the_other() {
        let choice = Choice { share: 1, batch: 1, blocks: 0..1, latency_ms: 1.0, transfer_ms: 0.0 };
        let config = || Config { choices: vec![&choice], latency_ms: 1.0 };
        let front = pareto(vec![
            (config(), vec![2.0, 1.0]),
            (config(), vec![1.0, 2.0]),
            (config(), vec![2.0, 2.0]), // dominated by both
            (config(), vec![0.5, 3.0]),
        ]);
        let mut costs: Vec<Vec<f64>> = front.into_iter().map(|(_, c)| c).collect();
        costs.sort_by(|a, b| a[0].total_cmp(&b[0]));
        assert_eq!(costs, [vec![0.5, 3.0], vec![1.0, 2.0], vec![2.0, 1.0]]);
    }
}
