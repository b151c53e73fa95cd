//! gpu-lets (Choi et al., "Serving Heterogeneous Machine Learning Models on Multi-GPU Servers with
//! Spatio-Temporal Sharing", USENIX ATC 2022): several models on a few GPUs, each GPU whole or split in two
//! *gpu-lets* (MPS shares such as 20/80, 40/60, 50/50), each gpu-let serving one model or, temporally shared,
//! several in a duty cycle. [`elastic`] is the paper's Algorithm 1; [`squishy`], Nexus's squishy bin packing
//! (whole GPUs, temporal sharing only), its baseline; [`ideal`], the exhaustive search it is measured against;
//! [`max_scale`], the paper's metric: the largest multiple of the request rates a scheduler fits on the GPUs.
//!
//! Serving a gpu-let follows Nexus's duty cycle, which both share: every cycle of `D` ms each model on the
//! gpu-let runs one batch of the requests that arrived during the last cycle (`b = ⌈rate · D⌉`), one after the
//! other; it holds when the batches fit the cycle (`Σ L(b) ≤ D`) and a request's wait for its batch plus the
//! batch meets its SLO (`D + L(b) ≤ SLO`). A model alone on a gpu-let at its largest batch within `SLO / 2`
//! serves `b / L(b)`. Batch sizes the profile lacks take the next larger one's latency.
//!
//! Decisions the paper leaves open: the knee ([`knee`]) is the largest discrete curvature of the normalised
//! rate-against-size curve; `p_ideal` is rounded up to a split size the GPU offers; a model's share of its rate
//! is what the gpu-let serves of what is left of it; "temporally sharable" is the duty cycle above; a gpu-let's
//! interference is a slowdown, `L · (1 + intf(model, size, neighbour))`, neighbour being what runs on the other
//! half of its GPU (none before that half is allocated), as [`InterferenceModel`](crate::interference::InterferenceModel) predicts it (the paper's
//! `interference_factor`, read as the fractional growth of the latency). A newcomer is placed beside a half only
//! if that half's models still hold their SLOs slowed by it: the paper checks the newcomer's batch, but both are
//! slowed, and both are served slowed.
//!
//! **Files.** `problem.rs`: what gpu-lets plans, its schedules, and the duty cycle every scheduler checks
//! gpu-lets with; this file: Algorithm 1, squishy bin packing, [`max_scale`] and the `[gpulet]` spec;
//! `ideal.rs`: the exhaustive search; `app.rs`: an app's problem as the `gpulet` strategy plans it. The
//! interference model is [`crate::interference`]'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::error::PlanError;

pub mod app;
mod ideal;
mod problem;
// Kept while `jig-sim` still names them here; their home is `crate::interference`.
use crate::interference::MeasuredInterference;
pub use ideal::{IDEAL_GPUS, ideal};
pub use problem::{Gpulet, GpuletModel, GpuletPlan, GpuletProblem, Interference, Load, no_interference};
use problem::{duty_cycle, plan_of, sizes};

/// The gpu-let size where serving `model` is most cost-effective: the knee of its rate against size, where the
/// discrete curvature of the normalised curve is largest (the whole GPU without an interior point).
pub fn knee(p: &GpuletProblem, model: usize) -> u32 {
    let sizes = sizes(p);
    let points: Vec<(f64, f64)> = sizes
        .iter()
        .filter_map(|&s| p.models[model].capacity(s, 0.0).map(|(rate, _)| (f64::from(s) / 100.0, rate)))
        .collect();
    let top = points.iter().map(|&(_, y)| y).fold(0.0, f64::max);
    if points.len() < 3 || top <= 0.0 {
        return 100;
    }
    let y: Vec<f64> = points.iter().map(|&(_, y)| y / top).collect();
    let x: Vec<f64> = points.iter().map(|&(x, _)| x).collect();
    (1..points.len() - 1)
        .map(|i| {
            let slope = (y[i + 1] - y[i - 1]) / (x[i + 1] - x[i - 1]);
            let bend = 2.0 * ((y[i + 1] - y[i]) / (x[i + 1] - x[i]) - (y[i] - y[i - 1]) / (x[i] - x[i - 1]))
                / (x[i + 1] - x[i - 1]);
            (bend.abs() / (1.0 + slope * slope).powf(1.5), (x[i] * 100.0).round() as u32)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(100, |(_, size)| size)
}

/// The paper's Algorithm 1 (`ELASTICPARTITIONING`), with interference `intf`.
pub fn elastic(p: &GpuletProblem, intf: Interference<'_>) -> Result<GpuletPlan, PlanError> {
    partition(p, intf, true)
}

/// Algorithm 1 without temporal sharing: every gpu-let serves one model, as a jig instance holds its segment
/// alone ([`app`], the `gpulet` strategy of deployments).
pub fn elastic_spatial(p: &GpuletProblem, intf: Interference<'_>) -> Result<GpuletPlan, PlanError> {
    partition(p, intf, false)
}

/// Algorithm 1; `temporal`: a model's share may join an allocated gpu-let's duty cycle.
fn partition(p: &GpuletProblem, intf: Interference<'_>, temporal: bool) -> Result<GpuletPlan, PlanError> {
    let sizes = sizes(p);
    // Free gpu-lets: (gpu, size); every GPU starts whole.
    let mut remain: Vec<(u32, u32)> = (0..p.gpus).map(|g| (g, 100)).collect();
    let mut alloc: Vec<Gpulet> = Vec::new();
    let mut order: Vec<usize> = (0..p.models.len()).collect();
    order.sort_by(|&a, &b| p.models[b].rate_rps.total_cmp(&p.models[a].rate_rps));
    for m in order {
        let model = &p.models[m];
        let mut assigned = 0.0;
        while model.rate_rps - assigned > 1e-9 {
            let left = model.rate_rps - assigned;
            let p_req =
                sizes.iter().copied().find(|&s| model.capacity(s, 0.0).is_some_and(|(r, _)| r >= left)).unwrap_or(100);
            let p_ideal = knee(p, m).min(p_req);
            // FINDBESTFIT: the smallest free gpu-let that holds p_ideal and serves the model within its SLO; a
            // whole GPU is split to the smallest split size that holds p_ideal.
            remain.sort_by_key(|&(gpu, size)| (size, gpu));
            let mut found = None;
            for (i, &(gpu, size)) in remain.iter().enumerate() {
                if size < p_ideal {
                    continue;
                }
                let size =
                    if size == 100 { sizes.iter().copied().find(|&s| s >= p_ideal).unwrap_or(100) } else { size };
                let slowdown = intf(m, size, neighbour(&alloc, gpu, size, None));
                // The other half's models must still hold their SLOs beside this one.
                let beside_holds = alloc.iter().filter(|a| a.gpu == gpu && a.size == 100 - size).all(|a| {
                    let loads: Vec<(usize, f64)> = a.loads.iter().map(|l| (l.model, l.rate_rps)).collect();
                    let slowdown: Vec<f64> = loads.iter().map(|&(n, _)| intf(n, a.size, Some((m, size)))).collect();
                    duty_cycle(p, a.size, &loads, &slowdown).is_some()
                });
                if !beside_holds {
                    continue;
                }
                if let Some((rate, batch)) = model.capacity(size, slowdown) {
                    found = Some((i, gpu, size, rate.min(left), batch));
                    break;
                }
            }
            let Some((i, gpu, size, portion, batch)) = found else {
                return Err(PlanError::Infeasible(format!(
                    "model `{}`: {left:.1} of its {:.1} req/s find no free gpu-let that serves them within its {} ms \
                     SLO on {} GPUs",
                    model.name,
                    model.rate_rps,
                    (model.slo_ms * 10.0).round() / 10.0,
                    p.gpus
                )));
            };
            // Temporal sharing: an allocated gpu-let that can take this share too saves the new one.
            let beside: Vec<_> =
                alloc.iter().enumerate().map(|(j, a)| neighbour(&alloc, a.gpu, a.size, Some(j))).collect();
            let merged = temporal
                && alloc.iter_mut().zip(beside).any(|(a, nb)| a.share(p, m, portion, &|n, size, _| intf(n, size, nb)));
            if !merged {
                let (_, whole) = remain.remove(i);
                if whole == 100 && size < 100 {
                    remain.push((gpu, 100 - size));
                }
                let duty = model.latency(size, batch).unwrap_or(0.0);
                alloc.push(Gpulet {
                    gpu,
                    size,
                    loads: vec![Load { model: m, rate_rps: portion, batch }],
                    duty_ms: duty,
                });
            }
            assigned += portion;
        }
    }
    Ok(plan_of(alloc))
}

/// What slows a gpu-let of `size` on `gpu`: the first model of the other half of the GPU among `gpulets`, and
/// that half's size; `except` is the gpu-let's own index when it is among them (on a GPU split 50/50 it is a
/// half of that size too).
fn neighbour(gpulets: &[Gpulet], gpu: u32, size: u32, except: Option<usize>) -> Option<(usize, u32)> {
    gpulets
        .iter()
        .enumerate()
        .find(|&(k, o)| Some(k) != except && o.gpu == gpu && o.size == 100 - size)
        .and_then(|(_, o)| o.loads.first())
        .map(|l| (l.model, 100 - size))
}

/// Nexus's squishy bin packing: whole GPUs, temporal sharing only. Each model fills as many GPUs as its rate
/// saturates at its best batch; the rest of its rate goes, largest first, onto the first GPU whose duty cycle
/// still holds with it, else a new one.
pub fn squishy(p: &GpuletProblem) -> Result<GpuletPlan, PlanError> {
    let mut alloc: Vec<Gpulet> = Vec::new();
    let mut residual: Vec<(usize, f64)> = Vec::new();
    let mut next_gpu = 0;
    for (m, model) in p.models.iter().enumerate() {
        let Some((full, batch)) = model.capacity(100, 0.0) else {
            return Err(PlanError::Infeasible(format!(
                "model `{}`: no batch runs within half its {} ms SLO on a whole GPU",
                model.name, model.slo_ms
            )));
        };
        let whole = (model.rate_rps / full - 1e-9).floor().max(0.0);
        for _ in 0..whole as u32 {
            let duty = model.latency(100, batch).unwrap_or(0.0);
            alloc.push(Gpulet {
                gpu: next_gpu,
                size: 100,
                loads: vec![Load { model: m, rate_rps: full, batch }],
                duty_ms: duty,
            });
            next_gpu += 1;
        }
        let rest = model.rate_rps - whole * full;
        if rest > 1e-9 {
            residual.push((m, rest));
        }
    }
    residual.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut shared: Vec<Gpulet> = Vec::new();
    for (m, rate) in residual {
        let fits = shared.iter_mut().any(|g| g.share(p, m, rate, &no_interference));
        if !fits {
            let (duty, batches) = duty_cycle(p, 100, &[(m, rate)], &[0.0]).ok_or_else(|| {
                PlanError::Infeasible(format!("model `{}`: {rate:.1} req/s do not fit a whole GPU", p.models[m].name))
            })?;
            let load = Load { model: m, rate_rps: rate, batch: batches[0] };
            shared.push(Gpulet { gpu: next_gpu, size: 100, loads: vec![load], duty_ms: duty });
            next_gpu += 1;
        }
    }
    alloc.extend(shared);
    Ok(plan_of(alloc))
}

impl Gpulet {
    /// Take on `rate` of model `m` too, in the duty cycle, if one holds all of its loads; whether it did.
    fn share(&mut self, p: &GpuletProblem, m: usize, rate: f64, intf: Interference<'_>) -> bool {
        let loads: Vec<(usize, f64)> = self.loads.iter().map(|l| (l.model, l.rate_rps)).chain([(m, rate)]).collect();
        let slowdown: Vec<f64> = loads.iter().map(|&(model, _)| intf(model, self.size, None)).collect();
        let Some((duty, batches)) = duty_cycle(p, self.size, &loads, &slowdown) else { return false };
        self.loads.push(Load { model: m, rate_rps: rate, batch: 0 });
        for (load, b) in self.loads.iter_mut().zip(batches) {
            load.batch = b;
        }
        self.duty_ms = duty;
        true
    }
}

/// The largest multiple of the models' rates (to 0.1%) that `schedule` fits on the problem's GPUs.
pub fn max_scale(p: &GpuletProblem, schedule: impl Fn(&GpuletProblem) -> Result<GpuletPlan, PlanError>) -> f64 {
    let fits = |k: f64| schedule(&p.scaled(k)).is_ok_and(|plan| plan.gpus_used <= p.gpus);
    let mut high = 1.0;
    while fits(high) && high < 1e6 {
        high *= 2.0;
    }
    let mut low = 0.0;
    // Down to a billionth of the rates, for a problem that no multiple of them fits.
    while high - low > 1e-3 * high.max(1e-6) {
        let mid = (low + high) / 2.0;
        if fits(mid) { low = mid } else { high = mid }
    }
    low
}

/// A gpu-lets planning spec: a TOML file with a `[gpulet]` table, which `jig plan SPEC` and `jig simulate SPEC`
/// read (docs/src/guides/planners.md, "gpu-lets").
///
/// ```toml
/// [gpulet]
/// profiles = "profiles.csv"        # `jig profile`'s table, rows on `mps:GPU:PERCENT` segments
/// gpus = 4
/// splits = [20, 40, 50]            # default: the paper's pairs 20/80, 40/60, 50/50
/// gpu = 0                          # the GPU the rows were measured on (default 0)
/// scheduler = "gpulet"             # or "gpulet+int" (needs the two tables below), "sbp", "ideal"
/// utilisation = "util.csv"         # solo L2/DRAM utilisations, scripts/gpulet_interference.py util
/// interference = "pairs.csv"       # co-run slowdowns, scripts/gpulet_interference.py pairs
/// models = [                       # slot in the table; SLO default: twice the whole GPU's largest batch
///   { name = "res", slot = "res", rate_rps = 100, slo_ms = 95 },
/// ]
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuletSpec {
    /// The `[gpulet]` table.
    pub gpulet: GpuletTable,
}

/// The `[gpulet]` table of a [`GpuletSpec`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuletTable {
    /// The profile table, relative to the spec.
    pub profiles: String,
    /// GPUs.
    pub gpus: u32,
    /// Split sizes (default 20, 40, 50).
    pub splits: Option<Vec<u32>>,
    /// The GPU index of the table's `mps:` segments (default 0).
    pub gpu: Option<u32>,
    /// `gpulet`, `gpulet+int`, `sbp` or `ideal` (default `gpulet`).
    pub scheduler: Option<String>,
    /// The solo utilisation table, relative to the spec.
    pub utilisation: Option<String>,
    /// The co-run table, relative to the spec.
    pub interference: Option<String>,
    /// The models.
    pub models: Vec<ModelSpec>,
}

/// A model of a [`GpuletTable`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Its name.
    pub name: String,
    /// Its slot in the profile table (default: its name).
    pub slot: Option<String>,
    /// Requests per second.
    pub rate_rps: f64,
    /// Its SLO, ms (default: twice the whole GPU's latency at its largest profiled batch).
    pub slo_ms: Option<f64>,
}

/// Which scheduler plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// The paper's Algorithm 1.
    Gpulet,
    /// The paper's Algorithm 1 with its interference model (`gpulet+int`).
    GpuletInt,
    /// Nexus's squishy bin packing.
    Sbp,
    /// The exhaustive search ([`ideal`]), with the measured interference when the spec has it.
    Ideal,
}

impl Scheduler {
    /// Its name in specs and output.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Gpulet => "gpulet",
            Scheduler::GpuletInt => "gpulet+int",
            Scheduler::Sbp => "sbp",
            Scheduler::Ideal => "ideal",
        }
    }

    /// Schedule `p`.
    pub fn schedule(self, p: &GpuletProblem) -> Result<GpuletPlan, PlanError> {
        match (self, &p.interference) {
            (Scheduler::Gpulet, _) => elastic(p, &no_interference),
            (Scheduler::GpuletInt, Some(i)) => elastic(p, &|m, _, neighbour| i.slowdown(m, neighbour)),
            (Scheduler::GpuletInt, None) => Err(PlanError::Input(
                "gpulet+int plans with measured interference: give the spec `utilisation` and `interference` tables"
                    .into(),
            )),
            (Scheduler::Sbp, _) => squishy(p),
            (Scheduler::Ideal, Some(i)) => ideal(p, &|m, _, neighbour| i.slowdown(m, neighbour)),
            (Scheduler::Ideal, None) => ideal(p, &no_interference),
        }
    }

    /// The schedulers `p` can run: `gpulet+int` only with measured interference, `ideal` on at most
    /// [`IDEAL_GPUS`] GPUs.
    pub fn all(p: &GpuletProblem) -> Vec<Scheduler> {
        let int = p.interference.is_some().then_some(Scheduler::GpuletInt);
        let ideal = (p.gpus <= IDEAL_GPUS).then_some(Scheduler::Ideal);
        [Some(Scheduler::Gpulet), int, Some(Scheduler::Sbp), ideal].into_iter().flatten().collect()
    }
}

impl GpuletProblem {
    /// The same problem with every model's rate times `k`.
    pub fn scaled(&self, k: f64) -> GpuletProblem {
        self.with_rates(&self.models.iter().map(|m| m.rate_rps * k).collect::<Vec<_>>())
    }

    /// The same problem with these rates, one per model in order.
    pub fn with_rates(&self, rates: &[f64]) -> GpuletProblem {
        GpuletProblem {
            models: self.models.iter().zip(rates).map(|(m, &r)| GpuletModel { rate_rps: r, ..m.clone() }).collect(),
            ..self.clone()
        }
    }

    /// Read a gpu-lets spec and the profile table it names, and the scheduler it asks for.
    pub fn from_spec_file(path: &Path) -> Result<(GpuletProblem, Scheduler), PlanError> {
        let at = |what: &str| PlanError::Input(format!("{}: {what}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| at(&e.to_string()))?;
        let t = toml::from_str::<GpuletSpec>(&text).map_err(|e| at(&e.to_string()))?.gpulet;
        let scheduler = match t.scheduler.as_deref().unwrap_or("gpulet") {
            "gpulet" => Scheduler::Gpulet,
            "gpulet+int" => Scheduler::GpuletInt,
            "sbp" => Scheduler::Sbp,
            "ideal" => Scheduler::Ideal,
            other => return Err(at(&format!("scheduler `{other}`: say `gpulet`, `gpulet+int`, `sbp` or `ideal`"))),
        };
        let table = path.parent().unwrap_or(Path::new(".")).join(&t.profiles);
        let rows = crate::profile::read(&table, "the models")?;
        let prefix = format!("mps:{}:", t.gpu.unwrap_or(0));
        let mut models = Vec::new();
        for m in &t.models {
            let slot = m.slot.as_deref().unwrap_or(&m.name);
            let mut latency_ms = BTreeMap::new();
            for row in rows.iter().filter(|r| r.slot == slot) {
                if let Some(share) = row.segment.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok()) {
                    latency_ms.entry((share, row.batch)).or_insert(row.p95_ms);
                }
            }
            let Some(whole) = latency_ms.range((100, 0)..=(100, u32::MAX)).next_back().map(|(_, &ms)| ms) else {
                return Err(PlanError::Input(format!(
                    "{}: model `{}`: no row of slot `{slot}` on `{prefix}100`; profile it on the whole GPU and its shares",
                    table.display(),
                    m.name
                )));
            };
            models.push(GpuletModel {
                name: m.name.clone(),
                rate_rps: m.rate_rps,
                slo_ms: m.slo_ms.unwrap_or(2.0 * whole),
                latency_ms,
            });
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let interference = match (&t.utilisation, &t.interference) {
            (Some(u), Some(i)) => {
                let slots: Vec<&str> = t.models.iter().map(|m| m.slot.as_deref().unwrap_or(&m.name)).collect();
                Some(MeasuredInterference::read(&dir.join(u), &dir.join(i), &slots)?)
            }
            (None, None) => None,
            _ => return Err(at("give both `utilisation` and `interference`, or neither")),
        };
        if scheduler == Scheduler::GpuletInt && interference.is_none() {
            return Err(at("scheduler `gpulet+int` needs the `utilisation` and `interference` tables"));
        }
        let splits = t.splits.unwrap_or_else(|| vec![20, 40, 50]);
        Ok((GpuletProblem { models, gpus: t.gpus, splits, interference }, scheduler))
    }

    /// Whether the TOML at `path` is a gpu-lets spec (has a `[gpulet]` table).
    pub fn is_spec(path: &Path) -> bool {
        crate::spec::has_table(path, "gpulet")
    }
}

impl GpuletPlan {
    /// Each gpu-let's slowdown as measured interference predicts it (0 without): the most any of its models is
    /// slowed by the first model of the other half of its GPU.
    pub fn slowdowns(&self, p: &GpuletProblem) -> Vec<f64> {
        let Some(i) = &p.interference else { return vec![0.0; self.gpulets.len()] };
        self.gpulets
            .iter()
            .enumerate()
            .map(|(j, g)| {
                let beside = neighbour(&self.gpulets, g.gpu, g.size, Some(j));
                g.loads.iter().map(|l| i.slowdown(l.model, beside)).fold(0.0, f64::max)
            })
            .collect()
    }

    /// The schedule as `jig plan` prints it.
    pub fn to_text(&self, p: &GpuletProblem, scheduler: Scheduler) -> String {
        let total: f64 = p.models.iter().map(|m| m.rate_rps).sum();
        let mut out = format!(
            "{} schedule: {:.1} req/s of {} models on {} of {} GPUs\n",
            scheduler.name(),
            total,
            p.models.len(),
            self.gpus_used,
            p.gpus
        );
        let mut gpulets: Vec<&Gpulet> = self.gpulets.iter().collect();
        gpulets.sort_by_key(|g| (g.gpu, std::cmp::Reverse(g.size)));
        for g in gpulets {
            let loads: Vec<String> = g
                .loads
                .iter()
                .map(|l| format!("{} {:.1} req/s (batch {})", p.models[l.model].name, l.rate_rps, l.batch))
                .collect();
            let _ =
                writeln!(out, "  GPU {} {:>3}%: {} (duty cycle {:.2} ms)", g.gpu, g.size, loads.join(", "), g.duty_ms);
        }
        out
    }
}
