//! How an app's model slots are served: which variants, on which segments, with which batch sizes, how many
//! instances, and where each runs — chosen by the planner from the bundle's profile table, the app's demand
//! and the machine's [`Capacity`].
//!
//! The planner sees the app's graph through its model tasks: every task that names a `slot` in the manifest
//! is a planner task with that slot's variants, and an edge joins two model tasks when glue-only tasks (crop,
//! select) lead from one to the other; a slot no task names (glue calls it) gets a default instance on a core of
//! its own, taken out of the capacity before the tasks are planned on the rest. Segments are the profiled ones
//! this machine offers: `cpu:N` up to its free cores, `mps:PERCENT` shares of GPUs without MIG, `mig:PROFILE:K`
//! where a free MIG instance of the profile exists (jig never creates MIG instances). Cores and GPU slices are
//! budgeted separately, and the planner's cost counts a core like a GPU slice. Each planned instance is then
//! given its own cores, GPU share or MIG instance, so that no two apps hold the same. Without a profile table,
//! or when the planner finds no plan, each slot gets one unpinned instance of its most accurate variant, and the
//! deployment says why. A deploy of a bundle whose profile table measures only GPU segments this machine does
//! not offer is refused instead, naming them ([`plan_for_deploy`]).
//!
//! A running app's observations refine what the next plan assumes (JigsawServe §3.1): the multiplicative
//! factor of each edge once its upstream task ran [`MIN_FACTOR_SAMPLES`] times, each planned group's batch
//! latency once it ran [`MIN_LATENCY_SAMPLES`] batches of one size (see [`refine`]), and the CPU time a
//! request costs outside the planned instances once the app ran [`MIN_FACTOR_SAMPLES`] requests (see
//! [`unplanned_cpu_ms`]): the plan keeps the instances' time on cores and that work within the cores.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub use jig_api::{
    ClassRoute, ClassRoutes, Deployment, InstancePlace, ObservedFactor, ObservedGlue, ObservedLatency, PipelinePool,
    PlannedFactor, PlannedInstances, PooledPipeline, RouteStep,
};

use jig_model_host::device::Devices;
use jig_model_host::segment::MigProfile;
use jig_planner::evaluate::Assignment;
use jig_planner::gpulet::MeasuredInterference;
use jig_planner::mig_parted::{config_name, mig_parted_config, missing_instances};
use jig_planner::plan::{PlanEntry, TaskPlan};
use jig_planner::profile::ProfileRow;
use jig_planner::spec::{
    AppSpec, ClassSpec, DemandSpec, EdgeSpec, IpaSpec, IpaVariants, Objective, Resources, SegmentKind, SegmentSpec,
    TaskSpec, VariantSpec,
};
use jig_planner::{Features, PlanError, PlanSpec, Problem, SolveOptions, Strategy};
use jig_policy::mig::{GPU_80GB, GpuModel};

use jig_manifest::{Bundle, IpaSettings, Variant};

/// The planner's time limit when deploying: the best plan found by then is used.
const PLAN_TIME_LIMIT_S: f64 = 10.0;

/// Deploys and re-plans stop within 1% of the best objective, as `jig simulate`'s re-plans do: proving the last
/// 1% takes most of a large solve (traffic analysis on 840 slices: 0.03 s against the 30 s time limit, median
/// warm re-plan, `cargo bench -p jig-sim --bench solve`), while 1% of α·A − β·S is worth a tenth of a slice
/// on 28 slices and a few of 840.
const PLAN_GAP: f64 = 0.01;

/// How deploys and re-plans solve: within [`PLAN_TIME_LIMIT_S`] and [`PLAN_GAP`].
fn plan_options() -> SolveOptions {
    SolveOptions { time_limit_s: PLAN_TIME_LIMIT_S, mip_rel_gap: PLAN_GAP, ..SolveOptions::default() }
}

/// Invocations of an edge's upstream task before its observed factor replaces the manifest's.
pub const MIN_FACTOR_SAMPLES: u64 = 20;

/// Batches of one size a planned group must run before its observed latency refines its profile rows.
pub const MIN_LATENCY_SAMPLES: u64 = 20;

/// How far refinement may move a profile row from what `jig profile` measured: at most this factor either
/// way, so that a few slow batches (a noisy neighbour, a cold cache) cannot make a plan forget its profile.
pub const MAX_REFINEMENT: f64 = 2.0;

/// What a running app observed, for its next plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    /// The factor on each edge between model tasks.
    pub factors: Vec<ObservedFactor>,
    /// Each planned group's batch latency; those of earlier deployments where this one has too few batches.
    pub latencies: Vec<ObservedLatency>,
    /// Each task's glue time per invocation.
    pub glue: Vec<ObservedGlue>,
    /// The CPU time of model instances running unpinned on the cores planned instances hold, ms in all.
    pub unpinned_ms: f64,
    /// Requests whose graph ran to its end.
    pub answered: u64,
    /// The deployment running now: a re-plan's search starts from it (`jig_planner::solve_from`).
    pub current: Option<Deployment>,
}

impl Observations {
    /// What a deployed app had observed when `status` (its `jig status --json`) was taken: what its controller
    /// would re-plan with then (see `App::observations`), without the running deployment to start from.
    pub fn from_status(status: &jig_api::AppStatus) -> Self {
        Observations {
            factors: status.observed_factors.clone(),
            latencies: latest_latencies(&status.deployment.refined, &status.observed_latencies),
            glue: status.observed_glue.clone(),
            unpinned_ms: status.observed_unpinned_ms,
            answered: status.answered,
            current: None,
        }
    }
}

/// The CPU time a request cost outside the planned instances, as observed, ms: every task's `glue` and the
/// `unpinned_ms` of instances running unpinned, over the requests `answered`; once [`MIN_FACTOR_SAMPLES`]
/// were. Work on requests still running or dropped counts against those answered: under overload a request
/// answered costs what the ones given up cost too.
pub fn observed_cpu_ms(answered: u64, glue: &[ObservedGlue], unpinned_ms: f64) -> Option<f64> {
    let spent: f64 = glue.iter().map(|g| g.mean_ms * g.invocations as f64).sum();
    (answered >= MIN_FACTOR_SAMPLES).then(|| (spent + unpinned_ms) / answered as f64)
}

/// The CPU time a request at the entry costs on the cores outside the planned instances, ms, and what it rests
/// on. Observed ([`observed_cpu_ms`]) once the app answered [`MIN_FACTOR_SAMPLES`] requests. Before that,
/// declared: each task's `cpu_ms` times the invocations a request makes of it (by the manifest's factors, 1 where
/// none is declared).
pub fn unplanned_cpu_ms(bundle: &Bundle, observed: &Observations) -> (f64, &'static str) {
    let m = &bundle.manifest;
    if let Some(ms) = observed_cpu_ms(observed.answered, &observed.glue, observed.unpinned_ms) {
        return (ms, "observed");
    }
    // Invocations per request: 1 at the entry, and along each edge its upstream task's times the factor its
    // first variant declares for the downstream one.
    fn invocations(bundle: &Bundle, task: &str, depth: usize) -> f64 {
        let m = &bundle.manifest;
        let into = m.edges.iter().filter(|e| e.to == task).filter_map(|e| e.source()).collect::<Vec<_>>();
        if into.is_empty() || depth > m.tasks.len() {
            return 1.0;
        }
        into.iter()
            .map(|&(from, _)| {
                let slot = m.tasks.iter().find(|t| t.name == from).and_then(|t| t.slot.as_deref());
                let variant = slot.and_then(|slot| m.variants.iter().find(|v| v.slot == slot));
                let factor = variant.and_then(|v| v.factors.get(task).copied()).unwrap_or(1.0);
                invocations(bundle, from, depth + 1) * factor
            })
            .sum()
    }
    let declared = m.tasks.iter().map(|t| t.cpu_ms.unwrap_or(0.0) * invocations(bundle, &t.name, 0)).sum();
    (declared, "declared")
}

/// How an observation scales its variant's profile rows on its segment: the median (and so the throughput) by
/// observed over profiled p50, the tail by observed over profiled p95 — a busy machine stretches the tail more
/// than the median. Each within [`MAX_REFINEMENT`] either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refinement {
    /// The scale of p50 latencies; throughputs are divided by it.
    pub p50: f64,
    /// The scale of p95 latencies.
    pub p95: f64,
}

/// The [`Refinement`] of `observed`; `None` before [`MIN_LATENCY_SAMPLES`] batches or without a profile row.
/// An observation without a p50 (from an older gateway) scales the median as its p95.
pub fn refinement(observed: &ObservedLatency) -> Option<Refinement> {
    let profiled = observed.profiled_ms.filter(|&p| p > 0.0)?;
    if observed.batches < MIN_LATENCY_SAMPLES || observed.p95_ms <= 0.0 {
        return None;
    }
    let bounded = |scale: f64| scale.clamp(1.0 / MAX_REFINEMENT, MAX_REFINEMENT);
    let p95 = bounded(observed.p95_ms / profiled);
    let p50 = match observed.profiled_p50_ms.filter(|&p| p > 0.0) {
        Some(profiled) if observed.p50_ms > 0.0 => bounded(observed.p50_ms / profiled),
        _ => p95,
    };
    Some(Refinement { p50, p95 })
}

/// Refine profile `rows` with `observed` latencies: every row of an observed variant on its segment, at every
/// batch size, is scaled by the observation's [`refinement`]. Returns the observations used.
pub fn refine(rows: &mut [ProfileRow], observed: &[ObservedLatency]) -> Vec<ObservedLatency> {
    let mut used = Vec::new();
    for o in observed {
        let Some(scale) = refinement(o) else { continue };
        let mut matched = false;
        for row in rows.iter_mut().filter(|r| r.slot == o.slot && r.variant == o.variant && r.segment == o.segment) {
            row.p50_ms *= scale.p50;
            row.p95_ms = (row.p95_ms * scale.p95).max(row.p50_ms);
            row.throughput_rps /= scale.p50;
            matched = true;
        }
        if matched {
            used.push(o.clone());
        }
    }
    used
}

/// The latencies to plan with: each of `fresh` that is enough to refine with, else the one `previous` (the
/// running deployment's [`Deployment::refined`]) used for the same variant and segment.
pub fn latest_latencies(previous: &[ObservedLatency], fresh: &[ObservedLatency]) -> Vec<ObservedLatency> {
    let same = |a: &ObservedLatency, b: &ObservedLatency| {
        (&a.slot, &a.variant, &a.segment) == (&b.slot, &b.variant, &b.segment)
    };
    let mut latest: Vec<ObservedLatency> = fresh.iter().filter(|o| refinement(o).is_some()).cloned().collect();
    for p in previous {
        if !latest.iter().any(|o| same(o, p)) {
            latest.push(p.clone());
        }
    }
    latest
}

/// Whether a `fresh` observation refines its rows by more than `threshold` (relative) beyond what the last
/// plan `refined` them with (1 where it refined nothing): a reason to re-plan.
pub fn latencies_drifted(refined: &[ObservedLatency], fresh: &[ObservedLatency], threshold: f64) -> bool {
    fresh.iter().any(|o| {
        let Some(scale) = refinement(o) else { return false };
        let planned = refined
            .iter()
            .find(|r| (&r.slot, &r.variant, &r.segment) == (&o.slot, &o.variant, &o.segment))
            .and_then(refinement)
            .unwrap_or(Refinement { p50: 1.0, p95: 1.0 });
        (scale.p50 / planned.p50 - 1.0).abs() > threshold || (scale.p95 / planned.p95 - 1.0).abs() > threshold
    })
}

/// Why a bundle could not be planned; a deployment then falls back to [`fallback`] and says why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanningError {
    /// The profile table cannot be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The profile table.
        path: PathBuf,
        /// The system's answer.
        source: std::io::Error,
    },
    /// The profile table is malformed.
    #[error("{}: {source}", .path.display())]
    Profiles {
        /// The profile table.
        path: PathBuf,
        /// The line and field at fault.
        source: jig_planner::ParseError,
    },
    /// The manifest states no latency objective.
    #[error("the manifest has no [slo] to plan for; add `slo.latency_ms`")]
    NoSlo,
    /// No task runs a model.
    #[error("no task names a `slot`; give each task that runs a model its slot")]
    NoModelTasks,
    /// The profile table measured no segment this machine offers.
    #[error("profiles.csv measures no segment this machine offers (free: {free}); {hint}")]
    NoSegments {
        /// What the machine has free.
        free: String,
        /// The segments the table measures for the app's model slots, none of which the machine offers.
        measured: Vec<SegmentKind>,
        /// What to do: profile a segment it offers, or create the MIG instances the table measures.
        hint: String,
    },
    /// The plan needs more of a segment than the machine has free (a GPU share that does not fit, MIG
    /// instances that do not exist).
    #[error("the plan needs {needed} instance(s) on `{segment}`, but this machine has room for {placed}{hint}")]
    DoesNotFit {
        /// The segment type.
        segment: String,
        /// Instances the plan asks for.
        needed: u32,
        /// Instances that found a place.
        placed: u32,
        /// What would make room, if anything.
        hint: String,
    },
    /// The planner found no plan.
    #[error(transparent)]
    Planner(#[from] PlanError),
}

/// What a deployment may use: the cores and GPUs the gateway is given (its own machine's, or its nodes'), less
/// what other apps hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// The machines instances may run on: the gateway's own, or each `jig node` it was given.
    pub machines: Vec<Machine>,
}

/// What is free on one machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Machine {
    /// The `jig node` it is, by address (`IP:PORT`); `None` for the gateway's own machine.
    pub node: Option<String>,
    /// Free CPU cores, as the machine numbers them.
    pub cores: Vec<u32>,
    /// GPUs with what is free on each.
    pub gpus: Vec<GpuCapacity>,
}

/// What is free on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuCapacity {
    /// The GPU's index, as `nvidia-smi` numbers it.
    pub index: u32,
    /// Its product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Its `GPU-…` UUID, which an `mps:` share placed on it is bound to.
    pub uuid: String,
    /// Percent of its SMs free for `mps:` shares; 0 on a GPU in MIG mode, whose MIG instances serve instead.
    pub mps_percent: u32,
    /// Whether the GPU is in MIG mode (then only its MIG instances serve).
    pub mig_mode: bool,
    /// Its existing MIG instances that no app holds, in `nvidia-smi -L`'s order: the profile and the
    /// instance's `MIG-…` UUID, which an instance placed on it is bound to.
    pub mig: Vec<(MigProfile, String)>,
    /// Whether a plan may give it any MIG layout (its seven slices, whatever instances exist now): what
    /// `jig plan BUNDLE --mig-config FILE` plans with, to write the layout that would serve the plan.
    pub any_layout: bool,
    /// Whether an app holds part of it (an MPS share or a MIG instance): its layout is not for a new plan to
    /// change.
    pub held: bool,
}

impl Machine {
    /// The first `cores` of `devices`' CPU cores and the GPUs listed in `gpus` (all of them when `None`).
    pub fn of(devices: &Devices, cores: u32, gpus: Option<&[u32]>) -> Machine {
        let gpus = devices
            .gpus
            .iter()
            .filter(|g| gpus.is_none_or(|allowed| allowed.contains(&g.index)))
            .map(|g| {
                let mig =
                    g.mig_instances.iter().filter_map(|m| Some((m.profile_on(&g.name)?, m.uuid.clone()))).collect();
                GpuCapacity {
                    index: g.index,
                    name: g.name.clone(),
                    uuid: g.uuid.clone(),
                    mps_percent: if g.mig_enabled { 0 } else { 100 },
                    mig_mode: g.mig_enabled,
                    mig,
                    any_layout: false,
                    held: false,
                }
            })
            .collect();
        Machine { node: None, cores: devices.cpu_cores.iter().take(cores as usize).map(|&c| c as u32).collect(), gpus }
    }

    /// Hold room for one instance of `segment` here: the first free cores, the first GPU with the share free,
    /// the first free MIG instance of the profile.
    fn take(&mut self, segment: &SegmentKind) -> Option<InstancePlace> {
        let here = InstancePlace { node: self.node.clone(), ..InstancePlace::default() };
        match *segment {
            SegmentKind::Cpu { cores } => {
                let cores = cores as usize;
                (self.cores.len() >= cores)
                    .then(|| InstancePlace { cores: self.cores.drain(..cores).collect(), ..here })
            }
            SegmentKind::Mps { percent } => {
                let gpu = self.gpus.iter_mut().find(|g| g.mps_percent >= u32::from(percent))?;
                gpu.mps_percent -= u32::from(percent);
                Some(InstancePlace { gpu: Some(gpu.index), device: Some(gpu.uuid.clone()), ..here })
            }
            SegmentKind::Mig { profile, .. } => self.gpus.iter_mut().find_map(|g| {
                if g.any_layout {
                    return Some(InstancePlace { gpu: Some(g.index), ..here.clone() });
                }
                let i = g.mig.iter().position(|&(p, _)| p == profile)?;
                let (_, uuid) = g.mig.remove(i);
                Some(InstancePlace { gpu: Some(g.index), device: Some(uuid), ..here.clone() })
            }),
        }
    }
}

impl Capacity {
    /// The gateway's own machine: [`Machine::of`].
    pub fn of(devices: &Devices, cores: u32, gpus: Option<&[u32]>) -> Capacity {
        Capacity { machines: vec![Machine::of(devices, cores, gpus)] }
    }

    /// The nodes a gateway found (`jig_node::discover`): each node's cores and GPUs.
    pub fn of_nodes<'a>(nodes: impl IntoIterator<Item = (&'a str, &'a Devices)>) -> Capacity {
        let machines = nodes
            .into_iter()
            .map(|(addr, devices)| Machine {
                node: Some(addr.to_string()),
                ..Machine::of(devices, devices.cpu_cores.len() as u32, None)
            })
            .collect();
        Capacity { machines }
    }

    /// This capacity with each GPU of a model whose MIG layouts jig knows, and of which no app holds part,
    /// free to take any of them, as if MIG instances could be created at will: for a plan whose layout is to be
    /// written (`--mig-config`), not for a deployment, which serves only on instances that exist.
    pub fn with_any_mig_layout(mut self) -> Capacity {
        let gpus = self.machines.iter_mut().flat_map(|m| &mut m.gpus);
        for gpu in gpus.filter(|g| !g.held && jig_policy::mig::has_layouts(&g.name)) {
            gpu.any_layout = true;
        }
        self
    }

    /// Cores `0..cores` of the gateway's machine and no GPU.
    pub fn cpu_only(cores: u32) -> Capacity {
        Capacity { machines: vec![Machine { cores: (0..cores).collect(), ..Machine::default() }] }
    }

    /// Free cores on all machines.
    pub fn cores(&self) -> u32 {
        self.machines.iter().map(|m| m.cores.len() as u32).sum()
    }

    /// The most free cores on one machine: the largest `cpu:` segment an instance can have.
    pub fn cores_per_machine(&self) -> u32 {
        self.machines.iter().map(|m| m.cores.len() as u32).max().unwrap_or(0)
    }

    /// Every machine's GPUs.
    pub fn gpus(&self) -> impl Iterator<Item = &GpuCapacity> {
        self.machines.iter().flat_map(|m| &m.gpus)
    }

    /// What is left once `deployment`'s placed instances hold their cores, GPU shares and MIG instances.
    pub fn without(mut self, deployment: &Deployment) -> Capacity {
        for planned in &deployment.instances {
            let kind = SegmentKind::parse(&planned.segment).ok();
            for place in &planned.places {
                let Some(machine) = self.machines.iter_mut().find(|m| m.node == place.node) else { continue };
                machine.cores.retain(|c| !place.cores.contains(c));
                let Some(gpu) = machine.gpus.iter_mut().find(|g| Some(g.index) == place.gpu) else { continue };
                gpu.held = true;
                match kind {
                    Some(SegmentKind::Mps { percent }) => {
                        gpu.mps_percent = gpu.mps_percent.saturating_sub(percent.into());
                    }
                    Some(SegmentKind::Mig { profile, .. }) => {
                        gpu.mig.retain(|(p, uuid)| (*p, Some(uuid)) != (profile, place.device.as_ref()));
                    }
                    _ => {}
                }
            }
        }
        self
    }

    /// Whether an instance of `segment` would find room.
    fn offers(&self, segment: &SegmentKind) -> bool {
        self.clone().take(segment).is_some()
    }

    /// The free MIG instances by profile, which a plan may use no more of; `None` when a GPU may take any
    /// layout ([`Capacity::with_any_mig_layout`]).
    pub fn mig_instances(&self) -> Option<BTreeMap<String, u32>> {
        if self.gpus().any(|g| g.any_layout) {
            return None;
        }
        let mut counts = BTreeMap::new();
        for (profile, _) in self.gpus().flat_map(|g| &g.mig) {
            *counts.entry(profile.to_string()).or_insert(0) += 1;
        }
        Some(counts)
    }

    /// GPU slices free in all: an MPS share's part of seven, rounded up as a share's cost is (the half of a GPU
    /// another app left takes an `mps:50`, which costs 4), and the slices of free MIG instances. Placing the
    /// plan checks the percentages themselves.
    fn gpu_slices(&self) -> u32 {
        let mig = |g: &GpuCapacity| g.mig.iter().map(|(p, _)| p.effective_slices()).sum::<u32>();
        self.gpus().map(|g| if g.any_layout { 7 } else { (g.mps_percent * 7).div_ceil(100) + mig(g) }).sum()
    }

    /// Hold room for one instance of `segment` on the first machine that has it.
    fn take(&mut self, segment: &SegmentKind) -> Option<InstancePlace> {
        self.machines.iter_mut().find_map(|m| m.take(segment))
    }

    /// Places for `shares` (`mps:` segments) all on one GPU: the first with room for them together.
    fn take_together(&mut self, shares: &[SegmentKind]) -> Option<Vec<InstancePlace>> {
        let percents = shares.iter().map(|kind| match kind {
            SegmentKind::Mps { percent } => Some(u32::from(*percent)),
            _ => None,
        });
        let total: u32 = percents.collect::<Option<Vec<u32>>>()?.iter().sum();
        self.machines.iter_mut().find_map(|m| {
            let gpu = m.gpus.iter_mut().find(|g| g.mps_percent >= total)?;
            gpu.mps_percent -= total;
            let place = InstancePlace {
                node: m.node.clone(),
                gpu: Some(gpu.index),
                device: Some(gpu.uuid.clone()),
                ..Default::default()
            };
            Some(vec![place; shares.len()])
        })
    }

    /// Hold one core on the machine with the most free cores, as [`Capacity::fallback_place`] chooses it.
    fn take_core(&mut self) -> Option<InstancePlace> {
        self.machines.iter_mut().max_by_key(|m| m.cores.len())?.take(&SegmentKind::Cpu { cores: 1 })
    }

    /// Where an unplanned instance runs: unpinned on the gateway's machine, or on the node with the most free
    /// cores.
    fn fallback_place(&self) -> Option<InstancePlace> {
        let machine = self.machines.iter().max_by_key(|m| m.cores.len())?;
        machine.node.clone().map(|node| InstancePlace { node: Some(node), ..InstancePlace::default() })
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(node) = &self.node {
            write!(f, "node {node}: ")?;
        }
        write!(f, "{} cores", self.cores.len())?;
        for g in &self.gpus {
            write!(f, ", GPU {}: ", g.index)?;
            if g.any_layout {
                write!(f, "any MIG layout")?;
            } else if g.mig_mode && g.mig.is_empty() {
                write!(f, "MIG mode, no free MIG instance")?;
            } else if g.mig.is_empty() {
                write!(f, "{}% for MPS shares", g.mps_percent)?;
            } else {
                let mig: Vec<String> = g.mig.iter().map(|(p, _)| p.to_string()).collect();
                write!(f, "MIG {}", mig.join(" "))?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.machines.is_empty() {
            return f.write_str("no machine");
        }
        let machines: Vec<String> = self.machines.iter().map(Machine::to_string).collect();
        f.write_str(&machines.join("; "))
    }
}

/// Plan `bundle` for `demand_windows` (recent req/s at the entry, oldest first) within `capacity`, refined by
/// what the running app `observed`; without a profile table, or when the planner finds no plan, each slot's
/// [`fallback`]. Re-plans use it: a running app is never refused. A deploy uses [`plan_for_deploy`].
pub fn plan(bundle: &Bundle, demand_windows: &[f64], capacity: &Capacity, observed: &Observations) -> Deployment {
    planned_or_refused(bundle, demand_windows, capacity, observed).unwrap_or_else(|refused| {
        tracing::warn!(app = %bundle.manifest.name, "planning failed: {}", refused.reason);
        fallback(bundle, capacity, &format!("default: the planner found no plan: {}", refused.reason))
    })
}

/// [`plan`] for a deploy (or a gateway's restart), which refuses a bundle this machine cannot serve as
/// profiled: one whose profile table measures GPU segments only (`mps:`, `mig:`), none of which the machine
/// offers (no GPU, not the MIG instances, or none free). The default deployment would run it unplanned on
/// cores it was never measured on. A bundle without a profile table still gets the default deployment. A bundle
/// measured on MIG instances the machine lacks is told which its plan would use, and the config that makes them.
pub fn plan_for_deploy(
    bundle: &Bundle,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<Deployment, Refused> {
    planned_or_refused(bundle, demand_windows, capacity, observed).map_err(|mut refused| {
        let mig = matches!(&*refused.reason, PlanningError::NoSegments { measured, .. }
            if measured.iter().any(|kind| matches!(kind, SegmentKind::Mig { .. })));
        if let (true, Some(profiles)) = (mig, bundle.profiles_path()) {
            let config = mig_instances_to_create(bundle, &profiles, demand_windows, capacity, observed);
            refused.mig_config = config.unwrap_or_default();
        }
        refused
    })
}

/// [`plan_for_deploy`] without the MIG config of a refusal, which a re-plan would throw away.
fn planned_or_refused(
    bundle: &Bundle,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<Deployment, Refused> {
    if bundle.manifest.variants.is_empty() {
        // Glue alone: the cores serve as many requests as its CPU time a request leaves them.
        let mut glue_only = fallback(bundle, capacity, "no model slots");
        let (cpu_ms, from) = unplanned_cpu_ms(bundle, observed);
        if cpu_ms > 0.0 && capacity.cores() > 0 {
            glue_only.capacity_rps =
                Some(jig_planner::SHARED_CORES_BUSY * f64::from(capacity.cores()) * 1000.0 / cpu_ms);
            glue_only.unplanned_cpu_ms = Some(cpu_ms);
            glue_only.source = format!("no model slots: glue of {cpu_ms:.1} ms of CPU a request ({from})");
        }
        return Ok(glue_only);
    }
    let Some(profiles) = bundle.profiles_path() else {
        return Ok(fallback(bundle, capacity, "default: no profiles.csv in the bundle (run `jig profile`)"));
    };
    match plan_with_profiles(bundle, &profiles, demand_windows, capacity, observed) {
        Ok(deployment) => Ok(deployment),
        Err(reason @ PlanningError::NoSegments { .. }) if reason.needs_gpu_segments() => {
            let (app, reason) = (bundle.manifest.name.clone(), Box::new(reason));
            Err(Refused { app, reason, mig_config: String::new() })
        }
        Err(e) => {
            tracing::warn!(app = %bundle.manifest.name, "planning failed: {e}");
            Ok(fallback(bundle, capacity, &format!("default: the planner found no plan: {e}")))
        }
    }
}

impl PlanningError {
    /// Whether the profile table measures GPU segments only, none of which the machine offers.
    fn needs_gpu_segments(&self) -> bool {
        match self {
            PlanningError::NoSegments { measured, .. } => {
                !measured.is_empty() && measured.iter().all(|kind| !matches!(kind, SegmentKind::Cpu { .. }))
            }
            _ => false,
        }
    }
}

/// A deploy refused by [`plan_for_deploy`]: the bundle's profile table measures only GPU segments this machine
/// does not offer. The message names the app, its slots and the segments each is measured on, what the machine
/// has free and what to do: for MIG instances, which ones and the `nvidia-mig-parted` config that creates them.
#[derive(Debug, thiserror::Error)]
#[error(
    "app `{app}` cannot be deployed on this machine: {reason}. To serve it here, profile it on this machine's \
     CPU cores (`jig profile BUNDLE` measures cpu:1, cpu:2, … up to its cores) and deploy it again; or deploy it \
     on a machine with the GPU segments it measures{mig_config}"
)]
pub struct Refused {
    /// The app.
    pub app: String,
    /// Why: [`PlanningError::NoSegments`] (boxed: an error that stays small to pass around).
    pub reason: Box<PlanningError>,
    /// For a bundle measured on MIG instances the machine lacks, the instances its plan would need here and the
    /// config that creates them (see [`mig_instances_to_create`]); empty otherwise.
    pub mig_config: String,
}

/// A refused deploy is the bundle's fault on this machine: the gateway answers 400 (`invalid_bundle`) with the
/// message, and stores nothing; the app's previous deployment, if any, serves on.
impl From<Refused> for crate::StartError {
    fn from(refused: Refused) -> Self {
        crate::StartError::Bundle(jig_manifest::InvalidBundle(refused.to_string()))
    }
}

/// Each slot's most accurate variant (the first declared among equals), one instance on the free cores
/// (at least one), unpinned and holding none of them, batching up to 8 requests that arrive while it is busy.
pub fn fallback(bundle: &Bundle, capacity: &Capacity, why: &str) -> Deployment {
    let mut best: Vec<&Variant> = Vec::new();
    for v in &bundle.manifest.variants {
        match best.iter_mut().find(|b| b.slot == v.slot) {
            Some(b) if v.accuracy.unwrap_or(0.0) > b.accuracy.unwrap_or(0.0) => *b = v,
            Some(_) => {}
            None => best.push(v),
        }
    }
    let cores = capacity.cores_per_machine().max(1);
    let place = capacity.fallback_place();
    Deployment {
        source: why.into(),
        demand_rps: None,
        accuracy: None,
        capacity_rps: None,
        factors: Vec::new(),
        refined: Vec::new(),
        glue: Vec::new(),
        unplanned_cpu_ms: None,
        classes: Vec::new(),
        pipelines: Vec::new(),
        instances: best
            .into_iter()
            .map(|v| PlannedInstances {
                slot: v.slot.clone(),
                variant: v.name.clone(),
                segment: format!("cpu:{cores}"),
                max_batch: 8,
                count: 1,
                rate_rps: 1.0,
                latency_ms: 0.0,
                wait_ms: 0.0,
                drop_budget_ms: 0.0,
                stale_ms: 0.0,
                places: place.iter().cloned().collect(),
            })
            .collect(),
    }
}

/// The model tasks of a bundle: (task, slot) for every task that names a slot.
fn model_tasks(bundle: &Bundle) -> Vec<(&str, &str)> {
    bundle.manifest.tasks.iter().filter_map(|t| Some((t.name.as_str(), t.slot.as_deref()?))).collect()
}

/// The factor of each edge between model tasks that planning uses: the observed one when it rests on enough
/// invocations, else the largest the upstream task's variants declare (1 when none does).
pub fn planned_factors(bundle: &Bundle, observed: &[ObservedFactor]) -> Vec<PlannedFactor> {
    let m = &bundle.manifest;
    model_edges(bundle)
        .into_iter()
        .map(|e| {
            let seen = observed.iter().find(|o| o.from == e.from && o.to == e.to && o.samples >= MIN_FACTOR_SAMPLES);
            let declared = || {
                let slot = m.tasks.iter().find(|t| t.name == e.from).and_then(|t| t.slot.as_deref());
                let variants = m.variants.iter().filter(|v| Some(v.slot.as_str()) == slot);
                variants.filter_map(|v| v.factors.get(&e.to).copied()).reduce(f64::max).unwrap_or(1.0)
            };
            let factor = seen.and_then(|o| o.factor).unwrap_or_else(declared);
            PlannedFactor { from: e.from, to: e.to, factor }
        })
        .collect()
}

/// The profile table at `path`.
pub fn read_profiles(path: &Path) -> Result<Vec<ProfileRow>, PlanningError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanningError::Read { path: path.to_owned(), source })?;
    jig_planner::profile::from_csv(&text).map_err(|source| PlanningError::Profiles { path: path.to_owned(), source })
}

/// The planning problem of `bundle` with its profile table, for `demand_windows` within `capacity`, refined by
/// what the running app `observed`. Returns what it refined the rows with.
pub fn problem(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<(Problem, Refinements), PlanningError> {
    let m = &bundle.manifest;
    let mut rows = read_profiles(profiles)?;
    let refined = refine(&mut rows, &observed.latencies);
    let glue: Vec<ObservedGlue> =
        observed.glue.iter().filter(|g| g.invocations >= MIN_FACTOR_SAMPLES && g.mean_ms > 0.0).cloned().collect();
    let (unplanned_cpu_ms, unplanned_from) = unplanned_cpu_ms(bundle, observed);
    let slo = m.slo.ok_or(PlanningError::NoSlo)?;

    let model_tasks = model_tasks(bundle);
    if model_tasks.is_empty() {
        return Err(PlanningError::NoModelTasks);
    }
    let tasks = model_tasks
        .iter()
        .map(|&(task, slot)| TaskSpec {
            name: task.into(),
            slot: Some(slot.into()),
            variants: m
                .variants
                .iter()
                .filter(|v| v.slot == slot)
                .map(|v| {
                    // The planner's graph has the model tasks only; a factor for a glue-only task counts the
                    // CPU it costs (`unplanned_cpu_ms`).
                    let mut factors = v.factors.clone();
                    factors.retain(|to, _| model_tasks.iter().any(|&(t, _)| t == to));
                    for o in observed.factors.iter().filter(|o| o.from == task && o.samples >= MIN_FACTOR_SAMPLES) {
                        if let Some(f) = o.factor {
                            factors.insert(o.to.clone(), f);
                        }
                    }
                    VariantSpec { name: v.name.clone(), accuracy: v.accuracy.unwrap_or(1.0), factors }
                })
                .collect(),
        })
        .collect();
    let (segments, missing): (Vec<SegmentKind>, Vec<SegmentKind>) = rows
        .iter()
        .filter(|r| model_tasks.iter().any(|&(_, slot)| slot == r.slot))
        .filter_map(|r| SegmentKind::parse(&r.segment).ok())
        .partition(|kind| capacity.offers(kind));
    let mut segments: Vec<String> = segments.iter().map(SegmentKind::name).collect();
    segments.sort();
    segments.dedup();
    if segments.is_empty() {
        let mut measured = missing;
        measured.sort_by_key(SegmentKind::name);
        measured.dedup();
        let mig = measured.iter().any(|kind| matches!(kind, SegmentKind::Mig { .. }));
        let gpu_only = measured.iter().all(|kind| !matches!(kind, SegmentKind::Cpu { .. }));
        // Each slot with the segments it is measured on: `slot `detect` on mig:2g.20gb:1, mps:50`.
        let names = model_tasks
            .iter()
            .map(|&(_, slot)| {
                let mut kinds: Vec<String> = rows
                    .iter()
                    .filter(|r| r.slot == slot)
                    .filter_map(|r| SegmentKind::parse(&r.segment).ok())
                    .map(|kind| kind.name())
                    .collect();
                kinds.sort();
                kinds.dedup();
                let kinds = if kinds.is_empty() { "no segment".to_string() } else { kinds.join(", ") };
                format!("slot `{slot}` on {kinds}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        let hint = if measured.is_empty() {
            "profile one with `jig profile --segment`".to_string()
        } else if gpu_only && capacity.gpus().next().is_none() {
            format!(
                "it measures {names}; the gateway has no GPU (none on this machine, or none given to `jig up --gpus`)"
            )
        } else if mig {
            let create = unknown_mig_gpu(capacity).unwrap_or_else(|| {
                "create them with nvidia-mig-parted (`jig plan BUNDLE --mig-config FILE` writes a layout)".into()
            });
            format!("it measures {names}; MIG instances must exist before they serve: {create}")
        } else {
            format!("it measures {names}; give the gateway those devices (`jig up --cores`, `--gpus`) or free them")
        };
        return Err(PlanningError::NoSegments { free: capacity.to_string(), measured, hint });
    }
    let demand = if demand_windows.is_empty() { vec![m.demand.rps] } else { demand_windows.to_vec() };
    let cores = capacity.cores();
    let gpu_slices = capacity.gpu_slices();
    let planner = match &m.planner {
        Some(name) => {
            name.parse().map_err(|e: String| PlanError::Input(format!("app `{}`, jig.toml `planner`: {e}", m.name)))?
        }
        None => Default::default(),
    };
    let spec = PlanSpec {
        app: AppSpec {
            name: m.name.clone(),
            slo_latency_ms: slo.latency_ms as f64,
            slo_accuracy: slo.accuracy.unwrap_or(0.9),
            tasks,
            edges: model_edges(bundle),
            paths: None,
            planner,
            classes: m
                .classes
                .iter()
                .map(|c| ClassSpec {
                    name: c.name.clone(),
                    slo_latency_ms: c.latency_ms as f64,
                    slo_accuracy: c.accuracy,
                    share: c.share,
                })
                .collect(),
        },
        segments: segments.into_iter().map(|name| SegmentSpec { name, slices: None }).collect(),
        resources: Resources {
            slices: cores + gpu_slices,
            cores_per_host: Some(capacity.cores_per_machine().max(1)),
            cpu_cores: Some(cores),
            gpu_slices: Some(gpu_slices),
            mig_instances: capacity.mig_instances(),
        },
        demand: DemandSpec { windows: demand, slack: None },
        objective: Objective::default(),
        ipa: ipa_spec(m.ipa.as_ref().cloned().unwrap_or_default()),
        compass: Default::default(),
        batch_sizes: None,
    };
    let mut source = profiles.display().to_string();
    if !refined.is_empty() {
        source += &format!(", {} refined by observed latencies", refined.len());
    }
    if unplanned_cpu_ms > 0.0 {
        source += &format!(", {unplanned_cpu_ms:.1} ms of CPU a request outside the instances ({unplanned_from})");
    }
    let mut problem = Problem::new(&spec, &rows, &source)?;
    problem.unplanned_cpu_ms = unplanned_cpu_ms;
    if planner == Strategy::Gpulet {
        problem.interference = gpulet_interference(bundle, &model_tasks)?.map(std::sync::Arc::new);
        if problem.interference.is_some() {
            problem.profile_source += "; interference fitted to util.csv and pairs.csv";
        }
    }
    Ok((problem, Refinements { latencies: refined, glue }))
}

/// gpu-lets' interference between the model tasks' slots, fitted to the bundle's `util.csv` (`jig profile
/// --counters`) and `pairs.csv` (`jig profile --pairs`); `None` when it has neither.
fn gpulet_interference(
    bundle: &Bundle,
    model_tasks: &[(&str, &str)],
) -> Result<Option<MeasuredInterference>, PlanningError> {
    let (util, pairs) = (bundle.dir.join("util.csv"), bundle.dir.join("pairs.csv"));
    match (util.is_file(), pairs.is_file()) {
        (false, false) => Ok(None),
        (true, true) => {
            let slots: Vec<&str> = model_tasks.iter().map(|&(_, slot)| slot).collect();
            Ok(Some(MeasuredInterference::read(&util, &pairs, &slots)?))
        }
        (has_util, _) => Err(PlanError::Input(format!(
            "app `{}`: planner `gpulet` fits interference to util.csv and pairs.csv together, and the bundle has only \
             {}; measure the other with `jig profile BUNDLE {}`, or remove it to plan without interference",
            bundle.manifest.name,
            if has_util { "util.csv" } else { "pairs.csv" },
            if has_util { "--pairs --segment mps:0:50" } else { "--counters" },
        ))
        .into()),
    }
}

/// Places from `free` for each `(kind, count)` of `wanted`, in its order (fewer than `count` where `free` runs
/// out). MPS shares are taken largest first, so that shares that fill a GPU together (gpu-lets' 20/80 and 40/60
/// splits, PPipe's halves and quarters) find each other: first fit in the plan's order can strand them.
fn take_places(free: &mut Capacity, wanted: &[(SegmentKind, u32)]) -> Vec<Vec<InstancePlace>> {
    let share = |kind: &SegmentKind| if let SegmentKind::Mps { percent } = kind { *percent } else { 0 };
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(share(&wanted[i].0)));
    let mut taken = vec![Vec::new(); wanted.len()];
    for i in order {
        let (kind, count) = &wanted[i];
        taken[i] = (0..*count).map_while(|_| free.take(kind)).collect();
    }
    taken
}

/// IPA's settings from a bundle's `[ipa]`, each absent key at the planner's default.
fn ipa_spec(settings: IpaSettings) -> IpaSpec {
    let default = IpaSpec::default();
    IpaSpec {
        alpha: settings.alpha.unwrap_or(default.alpha),
        beta: settings.beta.unwrap_or(default.beta),
        delta: settings.delta.unwrap_or(default.delta),
        threshold_rps: settings.threshold_rps.unwrap_or(default.threshold_rps),
        variants: match settings.variants.as_deref() {
            Some("lightest") => IpaVariants::Lightest,
            Some("heaviest") => IpaVariants::Heaviest,
            _ => IpaVariants::Switch,
        },
        replicas: settings.replicas.unwrap_or(default.replicas),
    }
}

/// What a plan's profile rows were refined with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Refinements {
    /// Observed batch latencies ([`refine`]).
    pub latencies: Vec<ObservedLatency>,
    /// Observed glue times, of tasks that ran [`MIN_FACTOR_SAMPLES`] times: a pooled pipeline's stages count
    /// them.
    pub glue: Vec<ObservedGlue>,
}

/// The plan of `bundle`'s model tasks, with a default instance for each slot no task names (the planner does not
/// see them; glue calls them). Each such instance first takes a core of its own out of `capacity`, pinned there
/// on `cpu:1`, and the tasks are planned on the rest ([`pin_untasked_slots`]), so that the deployment holds no
/// more cores than `capacity` has and the plan's demand and capacity are what its own cores serve. When no plan
/// is found on the rest (two cores for three model slots), or no core is left for it, a default instance runs
/// unpinned beside the planned ones, holding none, as [`fallback`]'s do, and the deployment says so.
fn plan_with_profiles(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Result<Deployment, PlanningError> {
    let untasked = untasked_slots(bundle);
    let (rest, pinned) = pin_untasked_slots(bundle, capacity);
    let held = pinned.len();
    if held > 0 {
        match plan_within(bundle, profiles, demand_windows, &rest, observed, pinned) {
            Ok(mut deployment) => {
                if held < untasked.len() {
                    deployment.source += &unpinned_note(&untasked[held..], "no core is left for it");
                }
                return Ok(deployment);
            }
            Err(e) => tracing::info!(
                app = %bundle.manifest.name,
                "no plan with a core held for each slot no task names ({e}); planning on all {} cores",
                capacity.cores()
            ),
        }
    }
    let mut deployment = plan_within(bundle, profiles, demand_windows, capacity, observed, Vec::new())?;
    if !untasked.is_empty() {
        let why = if held > 0 {
            format!("no plan of the tasks leaves it a core of the {} this app may use", capacity.cores())
        } else {
            "no core is left for it".to_string()
        };
        deployment.source += &unpinned_note(&untasked, &why);
    }
    Ok(deployment)
}

/// The slots of `bundle`'s variants that no task names, in the order they are declared.
fn untasked_slots(bundle: &Bundle) -> Vec<&str> {
    let tasked: Vec<&str> = model_tasks(bundle).into_iter().map(|(_, slot)| slot).collect();
    let mut slots: Vec<&str> = Vec::new();
    for v in &bundle.manifest.variants {
        if !tasked.contains(&v.slot.as_str()) && !slots.contains(&v.slot.as_str()) {
            slots.push(&v.slot);
        }
    }
    slots
}

/// The default instance ([`fallback`]'s variant) of each slot no task names, in [`untasked_slots`]' order, pinned
/// to a core of its own on `cpu:1`, and what `capacity` has left once they hold them; as many as `capacity` has
/// cores for. Slots whose task the plan gives no instance (no demand reaches it) are not among them: the plan
/// may give their task instances, and a core held for each up front would be taken from the tasks the demand
/// does reach; their default instances hold none and serve only glue's stray calls.
fn pin_untasked_slots(bundle: &Bundle, capacity: &Capacity) -> (Capacity, Vec<PlannedInstances>) {
    let untasked = untasked_slots(bundle);
    let mut rest = capacity.clone();
    let mut pinned = Vec::new();
    // `fallback` keeps the variants' order of slots, as `untasked_slots` does.
    for mut instance in fallback(bundle, capacity, "").instances.into_iter().filter(|i| untasked.contains(&&*i.slot)) {
        let Some(place) = rest.take_core() else { break };
        instance.segment = "cpu:1".into();
        instance.places = vec![place];
        pinned.push(instance);
    }
    (rest, pinned)
}

/// What a deployment says of the slots no task names whose default instances run unpinned, holding no core.
fn unpinned_note(slots: &[&str], why: &str) -> String {
    let named: Vec<String> = slots.iter().map(|s| format!("`{s}`")).collect();
    let (slot, runs) = if slots.len() == 1 { ("slot", "runs") } else { ("slots", "run") };
    format!(
        "; {slot} {}, which no task names, {runs} unpinned on the planned instances' cores ({why}): the plan counts \
         {} with the CPU a request costs outside the instances",
        named.join(", "),
        if slots.len() == 1 { "its time" } else { "their time" }
    )
}

/// [`plan_with_profiles`] within `capacity`, which `pinned` (default instances of slots no task names) are
/// served beside.
fn plan_within(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
    pinned: Vec<PlannedInstances>,
) -> Result<Deployment, PlanningError> {
    let (problem, refined) = problem(bundle, profiles, demand_windows, capacity, observed)?;
    let model_tasks = model_tasks(bundle);
    let options = plan_options();
    let previous = observed.current.as_ref().map(|d| assignments(&problem, &model_tasks, d)).unwrap_or_default();
    // When nothing serves the demand, serve the most the machine can, as the paper's baselines (§5) and
    // `jig simulate` do, and say so.
    let (plan, short) = match jig_planner::plan_from(&problem, Features::ALL, &options, &previous) {
        Ok(plan) => (plan, None),
        Err(e @ (PlanError::Infeasible(_) | PlanError::TimeLimit(_))) => {
            let max = jig_planner::max_demand::max_demand(&problem, Features::ALL, 0.01, PLAN_TIME_LIMIT_S)?;
            if max.demand_rps <= 0.0 {
                return Err(e.into());
            }
            let at_max = problem.clone().with_demand(max.demand_rps, problem.slices);
            let plan = jig_planner::plan_from(&at_max, Features::ALL, &options, &previous)?;
            (plan, Some((problem.demand_rps, e)))
        }
        Err(e) => return Err(e.into()),
    };

    let slot_of: HashMap<&str, &str> = model_tasks.iter().copied().collect();
    let mut free = capacity.clone();
    let mut entries = Vec::new();
    for task in &plan.tasks {
        for e in &task.entries {
            entries.push((task, e, SegmentKind::parse(&e.segment).map_err(PlanError::from)?));
        }
    }
    // gpu-lets planned with interference: each split GPU's gpu-lets go onto one GPU, beside the neighbours whose
    // slowdown the plan counted on.
    let mut together: HashMap<(&str, &str, &str, u32), Vec<InstancePlace>> = HashMap::new();
    for on_gpu in &plan.colocated {
        let kinds = on_gpu.iter().map(|s| SegmentKind::parse(&s.segment)).collect::<Result<Vec<_>, _>>();
        let places = free.take_together(&kinds.map_err(PlanError::from)?).ok_or_else(|| PlanningError::DoesNotFit {
            segment: on_gpu.iter().map(|s| s.segment.as_str()).collect::<Vec<_>>().join(" + "),
            needed: on_gpu.len() as u32,
            placed: 0,
            hint: "; gpu-lets planned these shares beside each other: they need one GPU with room for all of them"
                .into(),
        })?;
        for (s, place) in on_gpu.iter().zip(places) {
            together.entry((&s.task, &s.variant, &s.segment, s.batch)).or_default().push(place);
        }
    }
    fn key<'a>(task: &'a TaskPlan, e: &'a PlanEntry) -> (&'a str, &'a str, &'a str, u32) {
        (&task.task, &e.variant, &e.segment, e.batch)
    }
    let wanted: Vec<(SegmentKind, u32)> = entries
        .iter()
        .map(|&(task, e, kind)| {
            (kind, e.instances.saturating_sub(together.get(&key(task, e)).map_or(0, Vec::len) as u32))
        })
        .collect();
    let taken = take_places(&mut free, &wanted);
    let mut instances = Vec::new();
    for ((task, e, kind), taken) in entries.into_iter().zip(taken) {
        let mut places = together.remove(&key(task, e)).unwrap_or_default();
        places.extend(taken);
        if places.len() < e.instances as usize {
            let hint = match kind {
                SegmentKind::Mig { .. } => mig_layout_hint(&bundle.manifest.name, &plan, capacity),
                _ => String::new(),
            };
            return Err(PlanningError::DoesNotFit {
                segment: e.segment.clone(),
                needed: e.instances,
                placed: places.len() as u32,
                hint,
            });
        }
        instances.push(PlannedInstances {
            slot: slot_of[task.task.as_str()].to_string(),
            variant: e.variant.clone(),
            segment: e.segment.clone(),
            max_batch: e.batch,
            count: e.instances,
            rate_rps: e.rate_rps / e.instances.max(1) as f64,
            latency_ms: e.latency_ms,
            wait_ms: task.policy.wait_ms,
            drop_budget_ms: task.policy.drop_budget_ms,
            stale_ms: task.policy.stale_ms,
            places,
        });
    }
    // Slots no planned instance serves are served as by default: no task names them (on the core `pinned` holds
    // for each, where there was one), or no demand reaches their task (an observed factor of 0, an idle app),
    // and glue may still call them.
    let served: Vec<String> = instances.iter().map(|i: &PlannedInstances| i.slot.clone()).collect();
    let rest = fallback(bundle, &free, "");
    instances.extend(rest.instances.into_iter().filter(|i| !served.contains(&i.slot)).map(|i| {
        match pinned.iter().find(|p| p.slot == i.slot) {
            Some(p) => p.clone(),
            None => i,
        }
    }));
    Ok(Deployment {
        source: match short {
            None => format!(
                "planned from profiles.csv by {} ({}, {:.2} s)",
                plan.planner, plan.solve.status, plan.solve.seconds
            ),
            Some((wanted, why)) => format!(
                "planned from profiles.csv by {} for {:.1} req/s, the most this machine serves, short of the \
                 {wanted:.1} req/s predicted ({why}){}",
                plan.planner,
                plan.demand_rps,
                mig_shortfall(bundle, profiles, demand_windows, capacity, observed).unwrap_or_default()
            ),
        },
        demand_rps: Some(plan.demand_rps),
        accuracy: Some(plan.accuracy),
        capacity_rps: Some(capacity_rps(&plan, capacity.cores(), problem.unplanned_cpu_ms)),
        factors: planned_factors(bundle, &observed.factors),
        refined: refined.latencies,
        glue: refined.glue,
        unplanned_cpu_ms: (problem.unplanned_cpu_ms > 0.0).then_some(problem.unplanned_cpu_ms),
        classes: plan
            .classes
            .iter()
            .map(|c| ClassRoutes {
                class: c.class.clone(),
                latency_ms: c.slo_latency_ms,
                demand_rps: c.demand_rps,
                served_rps: c.served_rps,
                routes: c
                    .routes
                    .iter()
                    .map(|r| ClassRoute {
                        rate_rps: r.rate_rps,
                        steps: r
                            .steps
                            .iter()
                            .map(|s| RouteStep {
                                slot: slot_of[s.task.as_str()].to_string(),
                                variant: s.variant.clone(),
                                segment: s.segment.clone(),
                                max_batch: s.batch,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
        pipelines: plan
            .pipelines
            .iter()
            .map(|p| PooledPipeline {
                rate_rps: p.rate_rps,
                batch: p.batch,
                pools: p
                    .pools
                    .iter()
                    .map(|q| PipelinePool {
                        slot: slot_of[q.task.as_str()].to_string(),
                        variant: q.variant.clone(),
                        segment: q.segment.clone(),
                        max_batch: p.batch,
                        members: q.members,
                    })
                    .collect(),
            })
            .collect(),
        instances,
    })
}

/// `deployment`'s planned instances as assignments of `problem` (whose tasks are `model_tasks`), leaving out
/// any it does not know (a variant or segment since removed, a default instance).
fn assignments(problem: &Problem, model_tasks: &[(&str, &str)], deployment: &Deployment) -> Vec<Assignment> {
    deployment
        .instances
        .iter()
        .filter_map(|i| {
            let (task_name, _) = model_tasks.iter().find(|(_, slot)| *slot == i.slot)?;
            let task = problem.tasks.iter().position(|t| t.name == *task_name)?;
            let variant = problem.tasks[task].variants.iter().position(|v| v.name == i.variant)?;
            let segment = problem.segments.iter().position(|s| s.name == i.segment)?;
            Some(Assignment {
                task,
                variant,
                segment,
                batch: i.max_batch,
                instances: i.count,
                rate_rps: i.rate_rps * f64::from(i.count),
            })
        })
        .collect()
}

/// The entry rate the plan serves at most: the planned demand scaled by the task with the least head-room (its
/// instances' profiled throughput over its planned demand), and no more than `cores` keep up with: each request
/// keeps them busy for its rows on `cpu:N` instances (N/H each) and the CPU it costs outside them, and shared
/// cores are busy [`SHARED_CORES_BUSY`](jig_planner::SHARED_CORES_BUSY) of the time at most.
fn capacity_rps(plan: &jig_planner::Plan, cores: u32, unplanned_cpu_ms: f64) -> f64 {
    let headroom = plan
        .tasks
        .iter()
        .filter(|t| t.demand_rps > 0.0)
        .map(|t| t.entries.iter().map(|e| e.throughput_rps * f64::from(e.instances)).sum::<f64>() / t.demand_rps)
        .fold(f64::INFINITY, f64::min);
    let instances = if headroom.is_finite() { plan.demand_rps * headroom } else { 0.0 };
    if plan.demand_rps <= 0.0 {
        return instances;
    }
    let on_cores: f64 = (plan.tasks.iter().flat_map(|t| &t.entries))
        .filter(|e| e.throughput_rps > 0.0)
        .filter_map(|e| match SegmentKind::parse(&e.segment) {
            Ok(SegmentKind::Cpu { cores }) => Some(e.rate_rps / plan.demand_rps * f64::from(cores) / e.throughput_rps),
            _ => None,
        })
        .sum();
    let busy_s = on_cores + unplanned_cpu_ms / 1000.0;
    if unplanned_cpu_ms > 0.0 && cores > 0 {
        instances.min(jig_planner::SHARED_CORES_BUSY * f64::from(cores) / busy_s)
    } else {
        instances
    }
}

/// A GPU of the machine whose MIG profiles and layouts jig does not know, named, with what to do.
fn unknown_mig_gpu(capacity: &Capacity) -> Option<String> {
    let gpu = capacity.gpus().find(|g| !jig_policy::mig::has_layouts(&g.name))?;
    Some(format!(
        "GPU {} is an {}, whose MIG profiles jig does not know (it knows {}): create the instances with \
         `nvidia-smi mig -cgi` or the GPU operator, and profile them",
        gpu.index,
        gpu.name,
        jig_policy::mig::GPUS_WITH_LAYOUTS
    ))
}

/// Where the machine's MIG instances hold the plan short of its demand: the instances the plan for the whole
/// demand would add, were any layout of the GPUs allowed, and how to get them (`None` when MIG is not what it
/// lacks).
fn mig_shortfall(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Option<String> {
    capacity.mig_instances().filter(|existing| !existing.is_empty())?;
    let plan = any_layout_plan(bundle, profiles, demand_windows, capacity, observed)?;
    let missing = missing_mig(&plan, capacity);
    (!missing.is_empty()).then(|| {
        format!(
            "; with more MIG instances it would serve it: {} (`jig plan BUNDLE --mig-config FILE` writes the \
             nvidia-mig-parted config that provides them)",
            missing.join("; ")
        )
    })
}

/// The plan of `bundle` were any MIG layout of `capacity`'s GPUs allowed, as `jig plan BUNDLE --mig-config FILE`
/// plans, with its GPUs numbered as the machine's ([`on_these_gpus`]); `None` when none is found.
fn any_layout_plan(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Option<jig_planner::Plan> {
    let any = capacity.clone().with_any_mig_layout();
    let (problem, _) = problem(bundle, profiles, demand_windows, &any, observed).ok()?;
    let mut plan = jig_planner::plan(&problem, Features::ALL, &plan_options()).ok()?;
    on_these_gpus(&mut plan.placement, &any);
    Some(plan)
}

/// Number `placement`'s GPUs as the machine does: the packing's GPU k (from 0, in the order it opened them) is
/// the k-th GPU `capacity` offers (GPU 1 on a gateway given `--gpus 1`), those free to take any layout first,
/// so that a layout to create lands on a GPU no app holds part of.
fn on_these_gpus(placement: &mut jig_planner::placement::Placement, capacity: &Capacity) {
    use jig_planner::placement::Device;
    let (free, rest): (Vec<&GpuCapacity>, Vec<&GpuCapacity>) = capacity.gpus().partition(|g| g.any_layout);
    let indices: Vec<u32> = free.iter().chain(&rest).map(|g| g.index).collect();
    for placed in &mut placement.instances {
        if let Device::Gpu { gpu, .. } | Device::GpuShare { gpu, .. } = &mut placed.device
            && let Some(&index) = indices.get(*gpu as usize)
        {
            *gpu = index;
        }
    }
}

/// The GPU model MIG profiles are named after: `capacity`'s first GPU's (a machine of mixed models is said in
/// its first GPU's names), or the 80 GB H100's.
fn gpu_model(capacity: &Capacity) -> &'static GpuModel {
    capacity.gpus().next().and_then(|g| GpuModel::of(&g.name)).unwrap_or(&GPU_80GB)
}

/// The MIG instances `plan`'s placement (its GPUs numbered as the machine's) needs beyond the free ones of
/// `capacity`, each said in the machine's own names (an H200's 3g.71gb for jig's 3g.40gb).
fn missing_mig(plan: &jig_planner::Plan, capacity: &Capacity) -> Vec<String> {
    let present: Vec<(u32, String)> =
        capacity.gpus().flat_map(|g| g.mig.iter().map(move |(p, _)| (g.index, p.to_string()))).collect();
    missing_instances(&plan.placement, &present, gpu_model(capacity)).iter().map(|m| m.to_string()).collect()
}

/// For a bundle refused for want of MIG instances: the instances its plan would place here, were any layout of
/// the machine's GPUs allowed, and the `nvidia-mig-parted` config that creates them (its header says how to
/// apply it). `None` when no GPU here takes a layout jig knows, or no such plan needs a new instance.
fn mig_instances_to_create(
    bundle: &Bundle,
    profiles: &Path,
    demand_windows: &[f64],
    capacity: &Capacity,
    observed: &Observations,
) -> Option<String> {
    if unknown_mig_gpu(capacity).is_some() {
        return None;
    }
    let plan = any_layout_plan(bundle, profiles, demand_windows, capacity, observed)?;
    let missing = missing_mig(&plan, capacity);
    if missing.is_empty() {
        return None;
    }
    let yaml = mig_parted_config(&plan.placement, &config_name(&bundle.manifest.name), gpu_model(capacity)).ok()?;
    Some(format!(
        "; or create the MIG instances it would be planned on here ({}) with this nvidia-mig-parted config:\n{yaml}",
        missing.join("; ")
    ))
}

/// Which MIG instances `plan` needs that the machine lacks, and the `nvidia-mig-parted` config that would
/// provide them (the plan's GPUs numbered as the machine's).
fn mig_layout_hint(app: &str, plan: &jig_planner::Plan, capacity: &Capacity) -> String {
    let mut plan = plan.clone();
    on_these_gpus(&mut plan.placement, capacity);
    let missing = missing_mig(&plan, capacity);
    if let Some(unknown) = unknown_mig_gpu(capacity) {
        return format!("; {}. {unknown}", missing.join("; "));
    }
    match mig_parted_config(&plan.placement, &config_name(app), gpu_model(capacity)) {
        Ok(yaml) => format!(
            "; {}. This nvidia-mig-parted config provides the layout (`jig plan --mig-config` writes it):\n{yaml}",
            missing.join("; ")
        ),
        Err(_) => format!("; {}", missing.join("; ")),
    }
}

/// Edges between model tasks: `a → b` when a path of glue edges leads from `a` to `b` through tasks without a
/// slot only.
pub(crate) fn model_edges(bundle: &Bundle) -> Vec<EdgeSpec> {
    let m = &bundle.manifest;
    let slotted: HashMap<&str, bool> = m.tasks.iter().map(|t| (t.name.as_str(), t.slot.is_some())).collect();
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in &m.edges {
        if let Some((from, _)) = e.source() {
            next.entry(from).or_default().push(&e.to);
        }
    }
    let mut edges = Vec::new();
    for t in m.tasks.iter().filter(|t| t.slot.is_some()) {
        let mut stack: Vec<&str> = next.get(t.name.as_str()).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        while let Some(task) = stack.pop() {
            if !seen.insert(task) {
                continue;
            }
            if slotted.get(task).copied().unwrap_or(false) {
                edges.push(EdgeSpec { from: t.name.clone(), to: task.into() });
            } else {
                stack.extend(next.get(task).cloned().unwrap_or_default());
            }
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two H100s as `nvidia-smi` lists them: GPU 0 in MIG mode with two 3g.40gb instances and a 1g.10gb, GPU 1
    /// whole; and 8 cores.
    fn machine() -> Devices {
        Devices::from_nvidia_smi(
            (0..8).collect(),
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Enabled\n1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, Disabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n  MIG 3g.40gb Device 0: (UUID: MIG-0)\n  \
             MIG 3g.40gb Device 1: (UUID: MIG-1)\n  MIG 1g.10gb Device 2: (UUID: MIG-2)\n\
             GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n",
        )
    }

    /// A one-task bundle whose slot `det` has variant `det` profiled on `rows` (segment, batch, p95, req/s).
    fn bundle(dir: &Path, rows: &[(&str, u32, f64, f64)]) -> Bundle {
        std::fs::write(
            dir.join("jig.toml"),
            "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 30\n\
             [[tasks]]\nname = \"detect\"\nglue = \"d.wasm\"\nslot = \"det\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"det.onnx\"\naccuracy = 1.0\n",
        )
        .unwrap();
        std::fs::write(dir.join("d.wasm"), b"").unwrap();
        std::fs::write(dir.join("det.onnx"), b"").unwrap();
        let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
        for (segment, batch, p95, rps) in rows {
            csv.push_str(&format!("det,det,{segment},{batch},{p95},{p95},{rps},test\n"));
        }
        std::fs::write(dir.join("profiles.csv"), csv).unwrap();
        Bundle::open(dir).unwrap()
    }

    fn places(d: &Deployment) -> Vec<(String, InstancePlace)> {
        d.instances.iter().flat_map(|i| i.places.iter().map(|p| (i.segment.clone(), p.clone()))).collect()
    }

    #[test]
    fn capacity_offers_cores_whole_gpus_and_existing_mig_instances() {
        let capacity = Capacity::of(&machine(), 6, None);
        assert_eq!(capacity.machines[0].cores, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(capacity.to_string(), "6 cores, GPU 0: MIG 3g.40gb 3g.40gb 1g.10gb, GPU 1: 100% for MPS shares");
        assert!(capacity.offers(&SegmentKind::parse("mps:0:60").unwrap()));
        assert!(capacity.offers(&SegmentKind::parse("mig:0:3g.40gb:2").unwrap()));
        assert!(!capacity.offers(&SegmentKind::parse("mig:0:2g.20gb:1").unwrap()), "no such instance exists");
        assert!(!capacity.offers(&SegmentKind::parse("cpu:7").unwrap()));
        // 7 slices of GPU 1, and 4 + 4 + 2 of GPU 0's instances (1g.10gb blocks two memory slots).
        assert_eq!(capacity.gpu_slices(), 7 + 4 + 4 + 1);
        let only_gpu_1 = Capacity::of(&machine(), 6, Some(&[1]));
        assert_eq!(only_gpu_1.gpus().count(), 1);
        assert!(Capacity::of(&machine(), 6, Some(&[])).gpus().next().is_none());
        // Each place names its device by UUID: the second 3g.40gb instance is `MIG-1`, not "the 3g.40gb #1".
        let (mut free, mig) = (capacity.clone(), SegmentKind::parse("mig:0:3g.40gb:1").unwrap());
        let taken: Vec<Option<String>> = (0..3).map(|_| free.take(&mig).and_then(|p| p.device)).collect();
        assert_eq!(taken, [Some("MIG-0".into()), Some("MIG-1".into()), None]);
        let mps = free.take(&SegmentKind::parse("mps:0:50").unwrap()).unwrap();
        assert_eq!((mps.gpu, mps.device.as_deref()), (Some(1), Some("GPU-bbbb")));
    }

    #[test]
    fn gpu_rows_are_planned_and_placed_on_the_gpu_that_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0), ("mps:0:50", 4, 40.0, 100.0)]);
        let d = plan(&bundle, &[], &Capacity::of(&machine(), 8, None), &Observations::default());
        assert!(d.source.starts_with("planned"), "{}", d.source);
        let placed = places(&d);
        assert_eq!(placed.len(), 1, "{d:?}");
        assert_eq!(placed[0].0, "mps:50");
        assert_eq!(placed[0].1.gpu, Some(1), "GPU 0 is in MIG mode");
        assert_eq!(placed[0].1.segment(&placed[0].0), "mps:1:50");
    }

    #[test]
    fn shares_are_placed_largest_first_so_that_splits_fill_their_gpus() {
        let two = Devices::from_nvidia_smi(
            Vec::new(),
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Disabled\n1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, Disabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n",
        );
        // 20/80 and 40/60 in a plan's order: first fit would put 20 and 60 on GPU 0 and find no room for the 40.
        let wanted: Vec<(SegmentKind, u32)> =
            ["mps:20", "mps:60", "mps:80", "mps:40"].iter().map(|s| (SegmentKind::parse(s).unwrap(), 1)).collect();
        let taken = take_places(&mut Capacity::of(&two, 0, None), &wanted);
        let gpus: Vec<Option<u32>> = taken.iter().map(|places| places.first().and_then(|p| p.gpu)).collect();
        assert_eq!(gpus, [Some(0), Some(1), Some(0), Some(1)], "{taken:?}");
    }

    #[test]
    fn a_gpulet_app_is_planned_on_a_share_sized_by_gpu_lets() {
        let dir = tempfile::tempdir().unwrap();
        let rows = [("cpu:2", 1, 50.0, 10.0), ("mps:0:20", 4, 40.0, 100.0), ("mps:0:80", 4, 20.0, 200.0)];
        let bundle = bundle(dir.path(), &rows);
        let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
        std::fs::write(dir.path().join("jig.toml"), format!("planner = \"gpulet\"\n{manifest}")).unwrap();
        let bundle = Bundle::open(&bundle.dir).unwrap();
        let d = plan(&bundle, &[], &Capacity::of(&machine(), 8, None), &Observations::default());
        assert!(d.source.starts_with("planned from profiles.csv by gpulet"), "{}", d.source);
        // 31.5 req/s: the smallest share that serves them, on the whole GPU (GPU 0 is in MIG mode).
        let placed = places(&d);
        assert_eq!(placed.len(), 1, "{d:?}");
        assert_eq!(placed[0].1.segment(&placed[0].0), "mps:1:20");
        // On cores alone, gpu-lets has nothing to plan: the deploy says why and serves by default.
        let d = plan(&bundle, &[], &Capacity::cpu_only(8), &Observations::default());
        assert!(d.source.contains("planner `gpulet` plans MPS shares"), "{}", d.source);
    }

    #[test]
    fn a_gpulet_app_with_measured_interference_keeps_each_split_gpu_together() {
        // `detect → read`, each half a GPU's worth at 80 req/s: gpu-lets splits one GPU between them.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("jig.toml"),
            "name = \"signs\"\nplanner = \"gpulet\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 80\n\
             [[tasks]]\nname = \"detect\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
             [[tasks]]\nname = \"read\"\nglue = \"g.wasm\"\nslot = \"rec\"\n\
             [[edges]]\nfrom = \"detect.out\"\nto = \"read\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"rec\"\nname = \"rec\"\nmodel = \"m.onnx\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
        for slot in ["det", "rec"] {
            for (percent, ms) in [(25, 80.0), (50, 40.0), (100, 36.0)] {
                csv += &format!("{slot},{slot},mps:0:{percent},4,{ms},{ms},{},test\n", 4000.0 / ms);
            }
        }
        std::fs::write(dir.path().join("profiles.csv"), csv).unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        // Two GPUs; another app holds 40% of GPU 0.
        let two = Devices::from_nvidia_smi(
            Vec::new(),
            "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, Disabled\n1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, Disabled\n",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n",
        );
        let mut capacity = Capacity::of(&two, 2, None);
        capacity.machines[0].gpus[0].mps_percent = 60;
        let gpus = |d: &Deployment| -> Vec<Option<u32>> {
            places(d).iter().filter(|(segment, _)| segment.starts_with("mps:")).map(|(_, p)| p.gpu).collect()
        };
        // Without measured interference, shares go by size: the second half lands in GPU 0's 60%.
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        assert!(d.source.starts_with("planned from profiles.csv by gpulet"), "{}", d.source);
        assert_eq!(gpus(&d), [Some(0), Some(1)], "{d:?}");
        // The tables `jig profile --counters` and `--pairs` write (the slots and two other models measured with
        // them): planned with each other's slowdown, the split GPU is placed whole, on GPU 1.
        let util = "model,batch,l2,dram\ndet,8,0.2,0.2\nrec,8,0.1,0.3\na,8,0.3,0.1\nb,8,0.4,0.4\n";
        std::fs::write(dir.path().join("util.csv"), util).unwrap();
        let mut pairs = String::from("model,neighbour,segment,batch,solo_ms,corun_ms,slowdown\n");
        for (model, neighbour, slowdown) in [
            ("det", "rec", 0.1),
            ("rec", "det", 0.08),
            ("a", "b", 0.05),
            ("b", "det", 0.15),
            ("rec", "a", 0.2),
            ("a", "b", 0.12),
        ] {
            pairs += &format!("{model},{neighbour},mps:0:50,8,10,11,{slowdown}\n");
        }
        std::fs::write(dir.path().join("pairs.csv"), pairs).unwrap();
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        assert!(d.source.starts_with("planned from profiles.csv by gpulet"), "{}", d.source);
        assert_eq!(gpus(&d), [Some(1), Some(1)], "{d:?}");
        // With one table of the two, the deploy says what is missing.
        std::fs::remove_file(dir.path().join("pairs.csv")).unwrap();
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        assert!(d.source.contains("the bundle has only util.csv") && d.source.contains("--pairs"), "{}", d.source);
    }

    #[test]
    fn instances_are_planned_across_nodes_each_on_one_node() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0)]);
        let node = |cores: usize| Devices { cpu_cores: (0..cores).collect(), gpus: Vec::new() };
        let (a, b) = (node(3), node(2));
        let capacity = Capacity::of_nodes([("10.0.0.1:7070", &a), ("10.0.0.2:7070", &b)]);
        assert_eq!(capacity.to_string(), "node 10.0.0.1:7070: 3 cores; node 10.0.0.2:7070: 2 cores");
        assert!(!capacity.offers(&SegmentKind::parse("cpu:4").unwrap()), "no node has four cores");
        // 31.5 req/s at 10 req/s an instance wants four; five cores in all hold two, one on each node.
        let d = plan(&bundle, &[], &capacity, &Observations::default());
        let mut nodes: Vec<Option<String>> = places(&d).into_iter().map(|(_, p)| p.node).collect();
        nodes.sort();
        assert_eq!(nodes, [Some("10.0.0.1:7070".into()), Some("10.0.0.2:7070".into())], "{d:?}");
        // What they hold is held on their own node.
        let left = capacity.clone().without(&d);
        assert_eq!((left.machines[0].cores.len(), left.machines[1].cores.len()), (1, 0));
        // The default deployment runs on the node with the most free cores.
        let unplanned = fallback(&bundle, &left, "test");
        assert_eq!(unplanned.instances[0].places[0].node.as_deref(), Some("10.0.0.1:7070"));
        assert_eq!(unplanned.instances[0].segment, "cpu:1");
    }

    #[test]
    fn without_a_gpu_the_same_bundle_plans_on_cores() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0), ("mps:0:50", 4, 40.0, 100.0)]);
        let d = plan(&bundle, &[], &Capacity::cpu_only(8), &Observations::default());
        let placed = places(&d);
        assert_eq!(placed.len(), 4, "31.5 req/s at 10 req/s an instance: {d:?}");
        assert_eq!(d.capacity_rps, Some(40.0), "four instances of 10 req/s");
        let mut cores: Vec<u32> = placed.iter().flat_map(|(_, p)| p.cores.clone()).collect();
        cores.sort();
        assert_eq!(cores, (0..8).collect::<Vec<_>>(), "each instance has cores of its own");
    }

    #[test]
    fn a_demand_beyond_the_machine_is_planned_at_the_most_it_serves_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0)]);
        // 4 cores hold two instances of 10 req/s; 31.5 req/s (30 and the 5% slack) is beyond them.
        let d = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert_eq!(d.instances.iter().map(|i| i.count).sum::<u32>(), 2, "{d:?}");
        let demand = d.demand_rps.expect("a plan, not the default");
        assert!((19.0..=20.0).contains(&demand), "planned for {demand}");
        assert!(d.source.contains("the most this machine serves") && d.source.contains("31.5"), "{}", d.source);
    }

    #[test]
    fn a_bundle_may_ask_for_ipa_and_a_planner_jig_lacks_is_named() {
        let dir = tempfile::tempdir().unwrap();
        // Batches of 4 take 250 ms: beyond JigsawServe's 2·L within the 400 ms SLO, but within IPA's L plus the
        // wait for a full batch at 31.5 req/s (95 ms).
        bundle(dir.path(), &[("cpu:1", 1, 50.0, 10.0), ("cpu:1", 4, 250.0, 30.0)]);
        let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
        let batches_with = |planner: &str, ipa: &str| {
            let text = format!("planner = \"{planner}\"\n{manifest}\n{ipa}");
            std::fs::write(dir.path().join("jig.toml"), text).unwrap();
            let bundle = Bundle::open(dir.path()).unwrap();
            plan_for_deploy(&bundle, &[], &Capacity::cpu_only(8), &Observations::default())
                .map(|d| (d.source.clone(), d.instances.iter().map(|i| (i.max_batch, i.count)).collect::<Vec<_>>()))
        };
        let batches = |planner: &str| batches_with(planner, "");
        let (source, ipa) = batches("ipa").unwrap();
        assert!(source.contains("by ipa"), "{source}");
        assert_eq!(ipa, [(4, 2)], "two replicas of batch 4 serve 31.5 req/s on two cores");
        let (source, jigsaw) = batches("jigsaw").unwrap();
        assert!(source.contains("by jigsaw"), "{source}");
        assert!(jigsaw.iter().all(|&(b, _)| b == 1), "{jigsaw:?}");
        // `[ipa]` reaches the planner: RIM's fixed replicas.
        let (_, rim) = batches_with("ipa", "[ipa]\nreplicas = 3\n").unwrap();
        assert_eq!(rim.iter().map(|&(_, n)| n).sum::<u32>(), 3, "{rim:?}");
        // The manifest refuses a planner jig lacks, and Compass without query classes; each it takes is a
        // strategy.
        assert!(jig_manifest::PLANNERS.iter().all(|p| p.parse::<jig_planner::Strategy>().is_ok()));
        for (planner, says) in [("simple", "jig's planners are jigsaw, ipa, compass"), ("compass", "declare them")] {
            std::fs::write(dir.path().join("jig.toml"), format!("planner = \"{planner}\"\n{manifest}")).unwrap();
            let refused = Bundle::open(dir.path()).unwrap_err().to_string();
            assert!(refused.contains("jig.toml") && refused.contains(says), "{refused}");
        }
    }

    #[test]
    fn a_bundle_profiled_only_on_gpus_says_what_the_machine_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("mps:0:50", 4, 40.0, 100.0)]);
        let error =
            problem(&bundle, &bundle.profiles_path().unwrap(), &[], &Capacity::cpu_only(4), &Observations::default())
                .unwrap_err();
        assert!(matches!(&error, PlanningError::NoSegments { measured, .. } if measured.len() == 1), "{error:?}");
        assert!(error.to_string().contains("measures no segment this machine offers (free: 4 cores)"), "{error}");
        assert!(error.to_string().contains("it measures slot `det` on mps:50; the gateway has no GPU"), "{error}");

        // A deploy is refused, naming the app, the segment, what the machine offers and what to do.
        let refused = plan_for_deploy(&bundle, &[], &Capacity::cpu_only(4), &Observations::default()).unwrap_err();
        let text = refused.to_string();
        assert!(text.starts_with("app `signs` cannot be deployed on this machine: profiles.csv"), "{text}");
        assert!(text.contains("it measures slot `det` on mps:50;") && text.contains("(free: 4 cores)"), "{text}");
        assert!(text.contains("`jig profile BUNDLE`") && text.contains("on a machine with the GPU"), "{text}");
        let start = crate::StartError::from(refused);
        assert!(start.is_bundle_fault(), "a 400 that keeps the previous deployment serving");
        assert!(start.to_string().contains("app `signs` cannot be deployed"), "{start}");

        // A running app's re-plan is never refused: it falls back to the default deployment and says why.
        let d = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert!(d.source.contains("measures no segment"), "{}", d.source);
        assert!(d.instances[0].places.is_empty() && d.instances[0].segment == "cpu:4", "{d:?}");

        // A GPU the gateway has but other apps hold: refused, and told to free it.
        let mut held = Capacity::of(&machine(), 8, Some(&[1]));
        held.machines[0].gpus[0].mps_percent = 40;
        let text = plan_for_deploy(&bundle, &[], &held, &Observations::default()).unwrap_err().to_string();
        assert!(text.contains("GPU 1: 40% for MPS shares); it measures slot `det` on mps:50; give the"), "{text}");

        // MIG instances on a machine without a GPU: there is none to make them on.
        let mig = self::bundle(dir.path(), &[("mig:0:2g.20gb:1", 4, 40.0, 100.0)]);
        let error = problem(&mig, &mig.profiles_path().unwrap(), &[], &Capacity::cpu_only(4), &Observations::default())
            .unwrap_err();
        assert!(error.to_string().contains("on mig:2g.20gb:1; the gateway has no GPU"), "{error}");
        let text =
            plan_for_deploy(&mig, &[], &Capacity::cpu_only(4), &Observations::default()).unwrap_err().to_string();
        assert!(!text.contains("nvidia-mig-parted config"), "{text}");
        // On a GPU in MIG mode without that profile's instances: which to make, and the config that makes them.
        let gpu0 = Capacity::of(&machine(), 8, Some(&[0]));
        let text = plan_for_deploy(&mig, &[], &gpu0, &Observations::default()).unwrap_err().to_string();
        for says in [
            "GPU 0: MIG 3g.40gb 3g.40gb 1g.10gb); it measures slot `det` on mig:2g.20gb:1; MIG instances must exist",
            "2g.20gb on GPU 0; this machine has none) with this nvidia-mig-parted config",
            "mig-enabled: true",
        ] {
            assert!(text.contains(says), "{says}: {text}");
        }
        // A gateway given GPU 1 alone: the instances and the config are for GPU 1, as nvidia-smi numbers it.
        let gpu1 = Capacity::of(&machine(), 8, Some(&[1]));
        let text = plan_for_deploy(&mig, &[], &gpu1, &Observations::default()).unwrap_err().to_string();
        assert!(text.contains("GPU 1: 100% for MPS shares"), "{text}");
        assert!(text.contains("2g.20gb on GPU 1; this machine has none") && text.contains("devices: [1]"), "{text}");
        assert!(!text.contains("GPU 0"), "{text}");
        // A re-plan falls back without planning the config it would not show.
        assert!(!plan(&mig, &[], &gpu1, &Observations::default()).source.contains("mig-configs:"));
    }

    #[test]
    fn a_deploy_without_gpu_only_rows_is_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = Capacity::cpu_only(4);
        // CPU rows that need more cores than are free: the default deployment, as before.
        let bundle = bundle(dir.path(), &[("cpu:8", 1, 50.0, 10.0), ("mps:0:50", 4, 40.0, 100.0)]);
        let d = plan_for_deploy(&bundle, &[], &cpu, &Observations::default()).expect("not refused");
        assert!(d.source.starts_with("default: the planner found no plan") && d.demand_rps.is_none(), "{d:?}");
        assert!(d.source.contains("it measures slot `det` on cpu:8, mps:50; give the gateway"), "{}", d.source);
        // No profile table at all: the default deployment.
        std::fs::remove_file(dir.path().join("profiles.csv")).unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let d = plan_for_deploy(&bundle, &[], &cpu, &Observations::default()).expect("not refused");
        assert!(d.source.contains("no profiles.csv"), "{}", d.source);
        assert_eq!(d.instances.len(), 1);
    }

    #[test]
    fn a_plan_within_the_mig_instances_that_exist_says_which_would_serve_the_demand() {
        let dir = tempfile::tempdir().unwrap();
        // 31.5 req/s at 20 req/s an instance: two 1g.10gb instances, where GPU 0 has one. The plan holds the one
        // there is, serves what it can, and says what would serve the rest.
        let bundle = bundle(dir.path(), &[("mig:0:1g.10gb:1", 4, 40.0, 20.0)]);
        let capacity = Capacity::of(&machine(), 8, Some(&[0]));
        let existing = BTreeMap::from([("1g.10gb".to_string(), 1), ("3g.40gb".to_string(), 2)]);
        assert_eq!(capacity.mig_instances(), Some(existing));
        assert_eq!(capacity.clone().with_any_mig_layout().mig_instances(), None);
        let d = plan_with_profiles(&bundle, &bundle.profiles_path().unwrap(), &[], &capacity, &Observations::default())
            .unwrap();
        assert_eq!(d.instances.iter().filter(|i| i.segment.starts_with("mig:")).map(|i| i.count).sum::<u32>(), 1);
        assert!(d.source.contains("the most this machine serves, short of the 31.5 req/s"), "{}", d.source);
        assert!(d.source.contains("the plan needs 2× 1g.10gb on GPU 0; this machine has only 1"), "{}", d.source);
        assert!(d.source.contains("--mig-config"), "{}", d.source);
    }

    #[test]
    fn a_plan_for_a_mig_config_may_take_any_layout_of_the_gpus() {
        let dir = tempfile::tempdir().unwrap();
        // 31.5 req/s at 20 req/s an instance: two 2g.20gb instances, a profile GPU 0 has none of.
        let bundle = bundle(dir.path(), &[("mig:0:2g.20gb:1", 4, 40.0, 20.0)]);
        let (profiles, observed) = (bundle.profiles_path().unwrap(), Observations::default());
        let capacity = Capacity::of(&machine(), 0, Some(&[0]));
        let error = problem(&bundle, &profiles, &[], &capacity, &observed).unwrap_err();
        assert!(error.to_string().contains("`jig plan BUNDLE --mig-config FILE` writes a layout"), "{error}");

        let any = capacity.with_any_mig_layout();
        assert_eq!(any.to_string(), "0 cores, GPU 0: any MIG layout");
        let (problem, _) = problem(&bundle, &profiles, &[], &any, &observed).unwrap();
        assert_eq!(problem.gpu_slices, Some(7), "one whole GPU, whatever its instances now");
        let plan = jig_planner::plan(&problem, Features::ALL, &SolveOptions::default()).unwrap();
        assert_eq!(plan.slices_used, 4, "two 2g.20gb instances: {}", plan.to_text());
    }

    #[test]
    fn a_gpu_without_a_layout_table_is_named_with_the_ones_jig_knows() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("mig:0:1g.10gb:1", 4, 40.0, 20.0)]);
        let a30 = Devices::from_nvidia_smi(
            (0..8).collect(),
            "0, NVIDIA A30, GPU-cccc, 24576, Enabled\n",
            "GPU 0: NVIDIA A30 (UUID: GPU-cccc)\n",
        );
        let capacity = Capacity::of(&a30, 8, None);
        let error =
            plan_with_profiles(&bundle, &bundle.profiles_path().unwrap(), &[], &capacity, &Observations::default())
                .unwrap_err()
                .to_string();
        assert!(error.contains("GPU 0 is an NVIDIA A30, whose MIG profiles jig does not know"), "{error}");
        assert!(error.contains("the A100 40GB, the H100 NVL (94 GB) and the H200"), "{error}");
        assert!(!error.contains("--mig-config"), "{error}");
    }

    #[test]
    fn other_models_offer_their_instances_by_shape_and_are_told_what_to_create_in_their_names() {
        let dir = tempfile::tempdir().unwrap();
        // An A100 40GB's 1g.10gb is the shape jig calls 1g.20gb (two memory slots); an H200's 3g.71gb is 3g.40gb.
        let a100_40 = Devices::from_nvidia_smi(
            (0..8).collect(),
            "0, NVIDIA A100-SXM4-40GB, GPU-cccc, 40960, Enabled\n1, NVIDIA H200, GPU-dddd, 143771, Enabled\n",
            "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-cccc)\n  MIG 1g.10gb Device 0: (UUID: MIG-5)\n\
             GPU 1: NVIDIA H200 (UUID: GPU-dddd)\n  MIG 3g.71gb Device 0: (UUID: MIG-6)\n",
        );
        let capacity = Capacity::of(&a100_40, 8, None);
        assert!(capacity.offers(&SegmentKind::parse("mig:1g.20gb:1").unwrap()));
        assert!(capacity.offers(&SegmentKind::parse("mig:3g.40gb:1").unwrap()));
        assert!(!capacity.offers(&SegmentKind::parse("mig:1g.10gb:1").unwrap()), "no one-slot instance exists");
        // 31.5 req/s at 20 req/s an instance needs two 1g.20gb-shaped instances; the A100 40GB has one.
        let bundle = bundle(dir.path(), &[("mig:0:1g.20gb:1", 4, 40.0, 20.0)]);
        let d = plan_with_profiles(&bundle, &bundle.profiles_path().unwrap(), &[], &capacity, &Observations::default())
            .unwrap();
        assert!(d.source.contains("the plan needs 2× 1g.10gb on GPU 0; this machine has only 1"), "{}", d.source);
        assert!(!d.source.contains("1g.20gb"), "A100 40GB names: {}", d.source);
    }

    fn observed(p95_ms: f64, batches: u64) -> ObservedLatency {
        ObservedLatency {
            slot: "det".into(),
            variant: "det".into(),
            segment: "cpu:2".into(),
            batch: 1,
            batches,
            p95_ms,
            profiled_ms: Some(50.0),
            p50_ms: 0.0,
            profiled_p50_ms: None,
        }
    }

    #[test]
    fn observed_latencies_scale_every_row_of_their_variant_and_segment_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let bundle =
            bundle(dir.path(), &[("cpu:2", 1, 50.0, 20.0), ("cpu:2", 4, 120.0, 33.0), ("cpu:1", 1, 90.0, 11.0)]);
        let rows = || read_profiles(&bundle.profiles_path().unwrap()).unwrap();
        let p95 = |rows: &[ProfileRow], segment: &str, batch: u32| {
            rows.iter().find(|r| r.segment == segment && r.batch == batch).map(|r| (r.p95_ms, r.throughput_rps))
        };

        let mut slower = rows();
        assert_eq!(refine(&mut slower, &[observed(75.0, MIN_LATENCY_SAMPLES)]).len(), 1);
        assert_eq!(p95(&slower, "cpu:2", 1), Some((75.0, 20.0 / 1.5)));
        assert_eq!(p95(&slower, "cpu:2", 4), Some((180.0, 22.0)), "every batch size of the segment");
        assert_eq!(p95(&slower, "cpu:1", 1), Some((90.0, 11.0)), "other segments keep their rows");

        let mut bounded = rows();
        refine(&mut bounded, &[observed(1000.0, 100)]);
        assert_eq!(p95(&bounded, "cpu:2", 1), Some((100.0, 10.0)), "at most twice the profile");

        // With its median observed too, an observation scales the median and throughput by the median's ratio
        // and the tail by the tail's.
        let mut split = rows();
        refine(&mut split, &[ObservedLatency { p50_ms: 55.0, profiled_p50_ms: Some(50.0), ..observed(100.0, 40) }]);
        let row = split.iter().find(|r| r.segment == "cpu:2" && r.batch == 1).unwrap();
        assert!((row.p50_ms - 55.0).abs() < 1e-9 && (row.p95_ms - 100.0).abs() < 1e-9, "{row:?}");
        assert!((row.throughput_rps - 20.0 / 1.1).abs() < 1e-9, "{row:?}");

        let mut unchanged = rows();
        assert!(refine(&mut unchanged, &[observed(75.0, MIN_LATENCY_SAMPLES - 1)]).is_empty(), "too few batches");
        assert_eq!(unchanged, rows());

        // A slower segment than profiled buys more instances for the same demand.
        let planned = |latencies: Vec<ObservedLatency>| {
            let observations = Observations { latencies, ..Observations::default() };
            let d = plan(&bundle, &[], &Capacity::cpu_only(8), &observations);
            (d.instances.iter().map(|i| i.count).sum::<u32>(), d.refined.len(), d.source)
        };
        let (before, _, _) = planned(Vec::new());
        let (after, refined, source) = planned(vec![observed(100.0, 40)]);
        assert!(after > before, "{before} instances before, {after} after");
        assert_eq!(refined, 1);
        assert!(source.starts_with("planned"), "{source}");
    }

    /// `detect` (slot `det`, one row a request, 1.5 `speak`s) → `speak` (glue only), with `cpu_ms` declared as
    /// given; `det` profiled at 50 ms a row on one core.
    fn glue_bundle(dir: &Path, cpu_ms: (f64, f64)) -> Bundle {
        std::fs::write(
            dir.join("jig.toml"),
            format!(
                "name = \"signs\"\n[slo]\nlatency_ms = 1000\n[demand]\nrps = 30\n\
                 [[tasks]]\nname = \"detect\"\nglue = \"g.wasm\"\nslot = \"det\"\ncpu_ms = {}\n\
                 [[tasks]]\nname = \"speak\"\nglue = \"g.wasm\"\ncpu_ms = {}\n\
                 [[edges]]\nfrom = \"detect.lines\"\nto = \"speak\"\n\
                 [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"det.onnx\"\nfactors = {{ speak = 1.5 }}\n",
                cpu_ms.0, cpu_ms.1
            ),
        )
        .unwrap();
        std::fs::write(dir.join("g.wasm"), b"").unwrap();
        std::fs::write(dir.join("det.onnx"), b"").unwrap();
        let csv = "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\ndet,det,cpu:1,1,50,50,20,test\n";
        std::fs::write(dir.join("profiles.csv"), csv).unwrap();
        Bundle::open(dir).unwrap()
    }

    #[test]
    fn the_cpu_a_request_costs_outside_the_instances_is_declared_until_observed() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = glue_bundle(dir.path(), (10.0, 20.0));
        let glue = |requests: u64| {
            vec![
                ObservedGlue { task: "detect".into(), invocations: requests, mean_ms: 12.0 },
                ObservedGlue { task: "speak".into(), invocations: requests * 3 / 2, mean_ms: 18.0 },
            ]
        };
        let observed = |requests, answered| Observations {
            glue: glue(requests),
            unpinned_ms: 400.0,
            answered,
            ..Default::default()
        };
        // 10 ms at the entry, and 1.5 invocations of speak at 20 ms each.
        assert_eq!(unplanned_cpu_ms(&bundle, &Observations::default()), (40.0, "declared"));
        assert_eq!(unplanned_cpu_ms(&bundle, &observed(40, MIN_FACTOR_SAMPLES - 1)), (40.0, "declared"));
        // 40 requests answered: 40 × 12 ms and 60 × 18 ms of glue, and 400 ms on unpinned instances.
        assert_eq!(unplanned_cpu_ms(&bundle, &observed(40, 40)), ((480.0 + 1080.0 + 400.0) / 40.0, "observed"));
        // Work on requests given up counts against those answered.
        assert_eq!(unplanned_cpu_ms(&bundle, &observed(40, 20)), ((480.0 + 1080.0 + 400.0) / 20.0, "observed"));
    }

    #[test]
    fn glue_alone_serves_what_its_cpu_a_request_leaves_the_cores() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = "name = \"crops\"\n[slo]\nlatency_ms = 1000\n\
                        [[tasks]]\nname = \"crop\"\nglue = \"g.wasm\"\ncpu_ms = 5\n";
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let d = plan(&bundle, &[], &Capacity::cpu_only(2), &Observations::default());
        let busy = jig_planner::SHARED_CORES_BUSY;
        assert_eq!((d.capacity_rps, d.unplanned_cpu_ms), (Some(busy * 400.0), Some(5.0)), "{}", d.source);
        let seen = vec![ObservedGlue { task: "crop".into(), invocations: 100, mean_ms: 8.0 }];
        let observed = Observations { glue: seen, answered: 100, ..Default::default() };
        let d = plan(&bundle, &[], &Capacity::cpu_only(2), &observed);
        assert_eq!(d.capacity_rps, Some(busy * 250.0), "{}", d.source);
    }

    #[test]
    fn the_plan_keeps_the_instances_and_the_cpu_outside_them_within_the_cores() {
        let dir = tempfile::tempdir().unwrap();
        let deployed =
            |cpu_ms| plan(&glue_bundle(dir.path(), cpu_ms), &[], &Capacity::cpu_only(4), &Default::default());
        // Nothing outside: two instances of 20 req/s serve the 30 req/s, and could serve 40.
        let d = deployed((0.0, 0.0));
        assert_eq!((d.capacity_rps, d.unplanned_cpu_ms), (Some(40.0), None), "{}", d.source);
        // 100 ms outside, 50 ms on an instance: 0.15 s of a core a request, and 4 cores, busy 87% of the time
        // at most, serve 23.2 req/s.
        let d = deployed((40.0, 40.0));
        assert_eq!(d.unplanned_cpu_ms, Some(100.0));
        let most = jig_planner::SHARED_CORES_BUSY * 4.0 / 0.15;
        let capacity = d.capacity_rps.unwrap();
        assert!((capacity - most).abs() < 0.5, "serves up to {capacity}, not {most}: {}", d.source);
        assert!(d.source.contains("the most this machine serves"), "{}", d.source);
        assert!(d.demand_rps.unwrap() <= most + 0.5, "planned for {:?}", d.demand_rps);
    }

    #[test]
    fn latencies_carry_over_re_plans_and_drift_counts_beyond_the_last_refinement() {
        let fresh_enough = [observed(75.0, 30)];
        let too_few = [observed(500.0, 3)];
        let earlier = [observed(60.0, 50)];
        assert_eq!(latest_latencies(&[], &fresh_enough), fresh_enough);
        assert_eq!(latest_latencies(&earlier, &too_few), earlier, "kept until enough");
        assert_eq!(latest_latencies(&earlier, &fresh_enough), fresh_enough);

        assert!(latencies_drifted(&[], &fresh_enough, 0.2), "1.5× the profile, planned with 1×");
        assert!(!latencies_drifted(&[observed(70.0, 20)], &fresh_enough, 0.2), "1.5 against 1.4");
        assert!(!latencies_drifted(&[], &too_few, 0.2), "too few batches to tell");
        let clamped = observed(400.0, 30);
        assert!(!latencies_drifted(&[observed(300.0, 30)], &[clamped], 0.2), "both at the bound: nothing to gain");
    }

    #[test]
    fn an_observed_factor_replaces_the_declared_one_once_it_rests_on_enough_invocations() {
        let dir = tempfile::tempdir().unwrap();
        // det → crop (glue only) → rec: one edge between model tasks.
        let manifest = r#"
name = "signs"
[[tasks]]
name = "det"
glue = "g.wasm"
slot = "det"
[[tasks]]
name = "crop"
glue = "g.wasm"
[[tasks]]
name = "rec"
glue = "g.wasm"
slot = "rec"
[[edges]]
from = "det.boxes"
to = "crop"
[[edges]]
from = "crop.lines"
to = "rec"
[[variants]]
slot = "det"
name = "det"
model = "m.onnx"
factors = { rec = 2.0 }
[[variants]]
slot = "rec"
name = "rec"
model = "m.onnx"
"#;
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let seen = |samples| vec![ObservedFactor { from: "det".into(), to: "rec".into(), factor: Some(3.5), samples }];
        let factor = |observed: &[ObservedFactor]| planned_factors(&bundle, observed)[0].factor;
        assert_eq!(factor(&[]), 2.0, "declared: through the glue-only crop task");
        assert_eq!(factor(&seen(MIN_FACTOR_SAMPLES - 1)), 2.0, "too few invocations");
        assert_eq!(factor(&seen(MIN_FACTOR_SAMPLES)), 3.5);
    }

    #[test]
    fn a_slot_no_demand_reaches_keeps_an_instance_for_the_glue_that_may_still_call_it() {
        // Found in a re-plan: recognitions that found no text gave rec → speak an observed factor of 0, the plan
        // gave speak no instance, and the swapped-in copy answered "no model slot voice" to the next line read.
        let dir = tempfile::tempdir().unwrap();
        let manifest = "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 30\n\
            [[tasks]]\nname = \"det\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
            [[tasks]]\nname = \"rec\"\nglue = \"g.wasm\"\nslot = \"rec\"\n\
            [[edges]]\nfrom = \"det.boxes\"\nto = \"rec\"\n\
            [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
            [[variants]]\nslot = \"rec\"\nname = \"rec\"\nmodel = \"m.onnx\"\n";
        std::fs::write(dir.path().join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        std::fs::write(
            dir.path().join("profiles.csv"),
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n\
             det,det,cpu:1,1,20,20,50,test\nrec,rec,cpu:1,1,20,20,50,test\n",
        )
        .unwrap();
        let bundle = Bundle::open(dir.path()).unwrap();
        let none_reach = ObservedFactor { from: "det".into(), to: "rec".into(), factor: Some(0.0), samples: 100 };
        let observed = Observations { factors: vec![none_reach], ..Observations::default() };
        let d = plan(&bundle, &[30.0], &Capacity::cpu_only(8), &observed);
        assert!(d.source.starts_with("planned"), "{}", d.source);
        for slot in ["det", "rec"] {
            assert!(d.instances.iter().any(|i| i.slot == slot && i.count > 0), "{slot}: {:?}", d.instances);
        }
        // An idle app (demand 0) likewise keeps every slot served.
        let idle = plan(&bundle, &[0.0], &Capacity::cpu_only(8), &Observations::default());
        for slot in ["det", "rec"] {
            assert!(idle.instances.iter().any(|i| i.slot == slot && i.count > 0), "{slot}: {:?}", idle.instances);
        }
    }

    /// Tasks `det` → `rec` → `speak`, where `speak`'s glue calls slot `voice`, which no task names; `det` and
    /// `rec` profiled on `cpu:1` (50 req/s) and `cpu:2` (80 req/s), the demand `rps`.
    fn untasked_voice(dir: &Path, rps: f64) -> Bundle {
        let manifest = format!(
            "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = {rps}\n\
             [[tasks]]\nname = \"det\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
             [[tasks]]\nname = \"rec\"\nglue = \"g.wasm\"\nslot = \"rec\"\n\
             [[tasks]]\nname = \"speak\"\nglue = \"g.wasm\"\n\
             [[edges]]\nfrom = \"det.boxes\"\nto = \"rec\"\n\
             [[edges]]\nfrom = \"rec.speech\"\nto = \"speak\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"rec\"\nname = \"rec\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"voice\"\nname = \"voice-int8\"\nmodel = \"m.onnx\"\naccuracy = 0.9\n\
             [[variants]]\nslot = \"voice\"\nname = \"voice\"\nmodel = \"m.onnx\"\naccuracy = 0.95\n"
        );
        std::fs::write(dir.join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.join("g.wasm"), b"").unwrap();
        std::fs::write(dir.join("m.onnx"), b"").unwrap();
        let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
        for slot in ["det", "rec", "voice"] {
            csv += &format!("{slot},{slot},cpu:1,1,20,20,50,test\n{slot},{slot},cpu:2,1,12,12,80,test\n");
        }
        std::fs::write(dir.join("profiles.csv"), csv).unwrap();
        Bundle::open(dir).unwrap()
    }

    /// The cores each slot's instances hold.
    fn cores_of(d: &Deployment, slot: &str) -> Vec<u32> {
        d.instances
            .iter()
            .filter(|i| i.slot == slot)
            .flat_map(|i| i.places.iter().flat_map(|p| p.cores.clone()))
            .collect()
    }

    #[test]
    fn a_slot_no_task_names_holds_a_core_of_its_own_taken_before_planning() {
        // Found serving the sign reader: the voice ran unpinned on the two cores det and rec were planned on,
        // and `jig deploy` promised 26.7 req/s where 12.1 were served.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 30.0);
        let d = plan_for_deploy(&bundle, &[], &Capacity::cpu_only(3), &Observations::default()).unwrap();
        assert!(d.source.starts_with("planned") && !d.source.contains("unpinned"), "{}", d.source);
        let voice: Vec<&PlannedInstances> = d.instances.iter().filter(|i| i.slot == "voice").collect();
        assert_eq!(voice.len(), 1, "{:?}", d.instances);
        assert_eq!((voice[0].variant.as_str(), voice[0].segment.as_str(), voice[0].count), ("voice", "cpu:1", 1));
        let held = cores_of(&d, "voice");
        assert_eq!(held.len(), 1, "pinned to one core: {voice:?}");
        let planned: Vec<u32> = ["det", "rec"].iter().flat_map(|slot| cores_of(&d, slot)).collect();
        assert!(!planned.is_empty() && !planned.contains(&held[0]), "{:?}", d.instances);
        assert!(planned.len() + held.len() <= 3, "more cores than the gateway has: {:?}", d.instances);
        // Another app finds the voice's core held.
        assert_eq!(Capacity::cpu_only(3).without(&d).cores(), 3 - planned.len() as u32 - 1);
    }

    #[test]
    fn a_demand_beyond_the_cores_left_by_a_slot_no_task_names_is_planned_at_what_they_serve() {
        // 120 req/s is more than det and rec serve on the 3 cores the voice leaves (50 req/s at most: one of them
        // on cpu:1); on all 4 they would be planned for 100.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 120.0);
        let d = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert!(d.source.contains("the most this machine serves"), "{}", d.source);
        let voice = cores_of(&d, "voice");
        let planned: Vec<u32> = ["det", "rec"].iter().flat_map(|slot| cores_of(&d, slot)).collect();
        assert_eq!(voice.len(), 1, "{:?}", d.instances);
        assert!(planned.len() <= 3 && !planned.contains(&voice[0]), "{:?}", d.instances);
        // What the deployment says it serves is what det and rec serve on their three cores: no more than one
        // of them on cpu:2 and the other on cpu:1.
        let (demand, capacity) = (d.demand_rps.unwrap(), d.capacity_rps.unwrap());
        assert!(demand < 120.0 && capacity <= 50.0 + 1e-6 && demand <= capacity + 1e-6, "{demand} {capacity}");
    }

    #[test]
    fn without_a_core_to_spare_a_slot_no_task_names_runs_unpinned_and_the_deployment_says_so() {
        // Two cores for three model slots: det and rec cannot be planned on one, so they keep both and the voice
        // runs beside them, holding none.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 30.0);
        let d = plan_for_deploy(&bundle, &[], &Capacity::cpu_only(2), &Observations::default()).unwrap();
        assert!(d.source.starts_with("planned"), "{}", d.source);
        assert!(
            d.source.contains("slot `voice`, which no task names, runs unpinned on the planned instances' cores"),
            "{}",
            d.source
        );
        let held: Vec<u32> = ["det", "rec", "voice"].iter().flat_map(|slot| cores_of(&d, slot)).collect();
        assert!(held.len() <= 2, "more cores than the gateway has: {:?}", d.instances);
        assert!(cores_of(&d, "voice").is_empty() && d.instances.iter().any(|i| i.slot == "voice"), "{d:?}");
        // One core: det alone, and the voice beside it.
        let one = tempfile::tempdir().unwrap();
        std::fs::write(
            one.path().join("jig.toml"),
            "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 10\n\
             [[tasks]]\nname = \"det\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"voice\"\nname = \"voice\"\nmodel = \"m.onnx\"\n",
        )
        .unwrap();
        for file in ["g.wasm", "m.onnx"] {
            std::fs::write(one.path().join(file), b"").unwrap();
        }
        std::fs::write(
            one.path().join("profiles.csv"),
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\ndet,det,cpu:1,1,20,20,50,test\n",
        )
        .unwrap();
        let d =
            plan_for_deploy(&Bundle::open(one.path()).unwrap(), &[], &Capacity::cpu_only(1), &Observations::default())
                .unwrap();
        assert!(d.source.starts_with("planned") && d.source.contains("`voice`"), "{}", d.source);
        assert_eq!((cores_of(&d, "det"), cores_of(&d, "voice")), (vec![0], vec![]), "{d:?}");
    }

    #[test]
    fn a_second_app_plans_within_what_the_first_left_free() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("cpu:2", 1, 50.0, 10.0), ("mig:0:3g.40gb:1", 4, 40.0, 40.0)]);
        let all = Capacity::of(&machine(), 8, Some(&[0]));
        let first = plan(&bundle, &[], &all, &Observations::default());
        let free = all.clone().without(&first);
        let second = plan(&bundle, &[], &free, &Observations::default());
        let (a, b) = (places(&first), places(&second));
        assert!(!a.is_empty() && !b.is_empty(), "{first:?}\n{second:?}");
        for (_, p) in &a {
            for (_, q) in &b {
                assert!(p.cores.iter().all(|c| !q.cores.contains(c)), "core handed out twice: {p:?} {q:?}");
                if p.device.as_ref().is_some_and(|d| d.starts_with("MIG-")) {
                    assert_ne!(p.device, q.device, "MIG instance handed out twice");
                }
            }
        }
        // Both 3g.40gb instances are taken between them, or cores make up the rest.
        let left = free.without(&second);
        let held = |c: &Capacity| c.cores() as usize + c.machines[0].gpus[0].mig.len();
        assert!(held(&left) < held(&all));
    }

    #[test]
    fn a_printed_mig_layout_never_relays_a_gpu_another_app_holds_part_of() {
        let (first_dir, second_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let on_mps = bundle(first_dir.path(), &[("mps:0:50", 4, 40.0, 100.0)]);
        let all = Capacity::of(&machine(), 8, None);
        let first = plan_for_deploy(&on_mps, &[], &all, &Observations::default()).unwrap();
        let free = all.clone().without(&first);
        assert!(free.machines[0].gpus[1].held && !free.machines[0].gpus[0].held, "{free:?}");
        // GPU 0 (in MIG mode, without 2g.20gb instances) is the one to lay out; GPU 1 serves the first app.
        let on_mig = bundle(second_dir.path(), &[("mig:0:2g.20gb:1", 4, 40.0, 100.0)]);
        let text = plan_for_deploy(&on_mig, &[], &free, &Observations::default()).unwrap_err().to_string();
        assert!(text.contains("on GPU 0; this machine has none") && text.contains("devices: [0]"), "{text}");
        assert!(!text.contains("devices: [1]") && !text.contains("[0, 1]"), "{text}");
        // Given GPU 1 alone, there is no GPU to lay out: no config.
        let gpu1 = Capacity::of(&machine(), 8, Some(&[1])).without(&first);
        let text = plan_for_deploy(&on_mig, &[], &gpu1, &Observations::default()).unwrap_err().to_string();
        assert!(!text.contains("mig-configs:"), "{text}");
    }

    #[test]
    fn mps_shares_of_a_gpu_are_never_handed_out_twice() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = bundle(dir.path(), &[("mps:0:50", 4, 40.0, 100.0)]);
        let share = |d: &Deployment| -> u32 {
            assert!(d.instances.iter().all(|i| i.segment == "mps:50" || i.segment == "mps:0:50"), "{d:?}");
            d.instances.iter().map(|i| i.places.iter().filter(|p| p.gpu == Some(1)).count() as u32 * 50).sum()
        };
        let gpu = |c: &Capacity| c.machines[0].gpus[0].mps_percent;
        let all = Capacity::of(&machine(), 8, Some(&[1]));
        let first = plan_for_deploy(&bundle, &[], &all, &Observations::default()).unwrap();
        let free = all.clone().without(&first);
        assert_eq!((share(&first), gpu(&free)), (50, 50), "{first:?}");
        let second = plan_for_deploy(&bundle, &[], &free, &Observations::default()).unwrap();
        let left = free.without(&second);
        assert_eq!((share(&second), gpu(&left)), (50, 0), "{second:?}");
        // A third finds none of the GPU left, and is refused rather than given a share twice.
        let third = plan_for_deploy(&bundle, &[], &left, &Observations::default()).unwrap_err().to_string();
        assert!(third.contains("GPU 1: 0% for MPS shares") && third.contains("or free them"), "{third}");
    }
}
