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
//! half of its GPU (none before that half is allocated), as [`InterferenceModel`] predicts it (the paper's
//! `interference_factor`, read as the fractional growth of the latency). A newcomer is placed beside a half only
//! if that half's models still hold their SLOs slowed by it: the paper checks the newcomer's batch, but both are
//! slowed, and both are served slowed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::error::PlanError;

pub mod app;
mod ideal;
pub use ideal::{IDEAL_GPUS, ideal};

/// A model to serve.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuletModel {
    /// Its name.
    pub name: String,
    /// Requests per second.
    pub rate_rps: f64,
    /// Its latency SLO, ms.
    pub slo_ms: f64,
    /// Batch latency, ms, by (gpu-let size in percent of a GPU, batch size).
    pub latency_ms: BTreeMap<(u32, u32), f64>,
}

/// What gpu-lets plans: models on `gpus` GPUs, each whole or split into `(p, 100 − p)` for `p` in `splits`.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuletProblem {
    /// The models.
    pub models: Vec<GpuletModel>,
    /// GPUs.
    pub gpus: u32,
    /// The smaller halves a GPU may be split into, percent (the paper: 20, 40, 50, 60, 80 as pairs).
    pub splits: Vec<u32>,
    /// Measured interference, which `gpulet+int` and `ideal` plan with (none: `gpulet+int` cannot plan).
    pub interference: Option<MeasuredInterference>,
}

/// One model's load on a gpu-let.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// Index into [`GpuletProblem::models`].
    pub model: usize,
    /// Requests per second it serves here.
    pub rate_rps: f64,
    /// Its batch per duty cycle.
    pub batch: u32,
}

/// A gpu-let and what it serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpulet {
    /// The GPU it is part of.
    pub gpu: u32,
    /// Its size, percent of the GPU.
    pub size: u32,
    /// The models it serves, temporally shared when several.
    pub loads: Vec<Load>,
    /// Its duty cycle, ms.
    pub duty_ms: f64,
}

/// A schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuletPlan {
    /// The gpu-lets with models.
    pub gpulets: Vec<Gpulet>,
    /// GPUs holding at least one of them.
    pub gpus_used: u32,
}

/// The fractional slowdown of `model` on a gpu-let of `size` percent beside `neighbour` (model and size) on the
/// same GPU; `None` when the other half is free.
pub type Interference<'a> = &'a dyn Fn(usize, u32, Option<(usize, u32)>) -> f64;

/// No interference: the paper's `gpulet` row.
pub fn no_interference(_: usize, _: u32, _: Option<(usize, u32)>) -> f64 {
    0.0
}

impl GpuletModel {
    /// Latency of batch `b` on `size`: the profiled batch, else the next larger one's.
    pub fn latency(&self, size: u32, b: u32) -> Option<f64> {
        self.latency_ms.range((size, b)..=(size, u32::MAX)).next().map(|(_, &ms)| ms)
    }

    /// The largest batch profiled on `size`.
    pub fn largest_batch(&self, size: u32) -> u32 {
        self.latency_ms.range((size, 0)..=(size, u32::MAX)).next_back().map_or(0, |(&(_, b), _)| b)
    }

    /// What a gpu-let of `size` serves of this model alone, slowed by `slowdown`: the best rate over the batches
    /// whose latency is within half the SLO, and that batch.
    fn capacity(&self, size: u32, slowdown: f64) -> Option<(f64, u32)> {
        self.latency_ms
            .range((size, 0)..=(size, u32::MAX))
            .map(|(&(_, b), &ms)| (b, ms * (1.0 + slowdown)))
            .filter(|&(_, ms)| ms <= self.slo_ms / 2.0)
            .map(|(b, ms)| (f64::from(b) * 1e3 / ms, b))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// The duty cycle on which `loads` (model, rate) share a gpu-let of `size`, and each one's batch: the longest
/// cycle that holds, from a grid of 256 lengths up to the tightest SLO (Nexus's choice: the most time to batch).
fn duty_cycle(p: &GpuletProblem, size: u32, loads: &[(usize, f64)], slowdown: &[f64]) -> Option<(f64, Vec<u32>)> {
    let rows: Vec<_> = loads.iter().map(|&(m, _)| rows_on(p, size, m)).collect();
    cycle_lengths(p, loads.iter().map(|&(m, _)| m)).find_map(|duty| {
        let (busy, batches) = batches_at(p, duty, loads, slowdown, &rows)?;
        (busy <= duty).then_some((duty, batches))
    })
}

/// The largest rate of model `m`, slowed by `slowdown_m`, that joins `loads` on a gpu-let of `size` with a duty
/// cycle of [`duty_cycle`]'s grid still holding (0: none).
fn most_joining(
    p: &GpuletProblem,
    size: u32,
    loads: &[(usize, f64)],
    slowdown: &[f64],
    m: usize,
    slowdown_m: f64,
) -> f64 {
    let rows: Vec<_> = loads.iter().map(|&(n, _)| rows_on(p, size, n)).collect();
    let mine = rows_on(p, size, m);
    cycle_lengths(p, loads.iter().map(|&(n, _)| n).chain([m]))
        .filter_map(|duty| {
            let (busy, _) = batches_at(p, duty, loads, slowdown, &rows)?;
            let room = (duty - busy).min(p.models[m].slo_ms - duty);
            let b = mine.iter().filter(|&&(_, ms)| ms * (1.0 + slowdown_m) <= room).map(|&(b, _)| b).max()?;
            // Just under b a cycle, so that the batch rounds up to b.
            Some(f64::from(b) * 1e3 / duty * (1.0 - 1e-9))
        })
        .fold(0.0, f64::max)
}

/// Model `m`'s (batch, latency) rows on `size`, ascending.
fn rows_on(p: &GpuletProblem, size: u32, m: usize) -> Vec<(u32, f64)> {
    p.models[m].latency_ms.range((size, 0)..=(size, u32::MAX)).map(|(&(_, b), &ms)| (b, ms)).collect()
}

/// The duty cycles tried for these models, longest first: 256 steps up to their tightest SLO.
fn cycle_lengths(p: &GpuletProblem, models: impl Iterator<Item = usize>) -> impl Iterator<Item = f64> {
    let tightest = models.map(|m| p.models[m].slo_ms).fold(f64::INFINITY, f64::min);
    (1..=256).rev().map(move |k| tightest * f64::from(k) / 256.0)
}

/// Each load's batch on a cycle of `duty` ms (the requests one cycle brings) and the time they take together,
/// if every one is profiled and meets its SLO after waiting for the cycle; `rows` are the loads' [`rows_on`].
fn batches_at(
    p: &GpuletProblem,
    duty: f64,
    loads: &[(usize, f64)],
    slowdown: &[f64],
    rows: &[Vec<(u32, f64)>],
) -> Option<(f64, Vec<u32>)> {
    let mut busy = 0.0;
    let mut batches = Vec::with_capacity(loads.len());
    for ((&(m, rate), &slowdown), rows) in loads.iter().zip(slowdown).zip(rows) {
        let b = ((rate * duty / 1e3).ceil() as u32).max(1);
        // The profiled batch, else the next larger one's latency; none larger: this cycle batches too many.
        let &(_, ms) = rows.iter().find(|&&(profiled, _)| profiled >= b)?;
        let ms = ms * (1.0 + slowdown);
        if duty + ms > p.models[m].slo_ms {
            return None;
        }
        busy += ms;
        batches.push(b);
    }
    Some((busy, batches))
}

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

/// Every gpu-let size: the split sizes, their complements, and the whole GPU, ascending.
fn sizes(p: &GpuletProblem) -> Vec<u32> {
    let mut all: Vec<u32> = p.splits.iter().flat_map(|&s| [s, 100 - s]).chain([100]).filter(|&s| s > 0).collect();
    all.sort_unstable();
    all.dedup();
    all
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

fn plan_of(gpulets: Vec<Gpulet>) -> GpuletPlan {
    let mut gpus: Vec<u32> = gpulets.iter().map(|g| g.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    GpuletPlan { gpus_used: gpus.len() as u32, gpulets }
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

/// A model's solo utilisation on a gpu-let of some size, as Nsight Compute reports it: the paper's features.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Utilisation {
    /// L2 cache utilisation, a fraction.
    pub l2: f64,
    /// DRAM bandwidth utilisation, a fraction.
    pub dram: f64,
}

/// One measured co-location: a model's and its neighbour's solo utilisations, and how much slower the model ran
/// beside the neighbour than alone (co-run latency over solo latency, less 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The model's.
    pub this: Utilisation,
    /// Its neighbour's.
    pub other: Utilisation,
    /// Its slowdown.
    pub slowdown: f64,
}

/// gpu-lets' interference model (§4.4): `slowdown = c1·l2 + c2·l2' + c3·dram + c4·dram' + c5`, the model's
/// solo L2 and DRAM utilisations and its neighbour's, fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterferenceModel {
    /// c1 … c5.
    pub coefficients: [f64; 5],
}

impl InterferenceModel {
    /// Fit to `samples` (at least 5, not all alike), by least squares.
    pub fn fit(samples: &[Sample]) -> Result<InterferenceModel, PlanError> {
        let features = |s: &Sample| [s.this.l2, s.other.l2, s.this.dram, s.other.dram, 1.0];
        // The normal equations XᵀX c = Xᵀy, by Gaussian elimination with partial pivoting.
        let mut a = [[0.0f64; 6]; 5];
        for s in samples {
            let x = features(s);
            for i in 0..5 {
                for j in 0..5 {
                    a[i][j] += x[i] * x[j];
                }
                a[i][5] += x[i] * s.slowdown;
            }
        }
        for col in 0..5 {
            let pivot = (col..5).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).expect("rows");
            if a[pivot][col].abs() < 1e-12 {
                return Err(PlanError::Input(format!(
                    "{} co-location samples do not determine the interference model: measure pairs whose L2 and DRAM \
                     utilisations vary",
                    samples.len()
                )));
            }
            a.swap(col, pivot);
            let pivot_row = a[col];
            for (_, r) in a.iter_mut().enumerate().filter(|(row, _)| *row != col) {
                let f = r[col] / pivot_row[col];
                for (x, p) in r[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= f * p;
                }
            }
        }
        Ok(InterferenceModel { coefficients: std::array::from_fn(|i| a[i][5] / a[i][i]) })
    }

    /// The slowdown of a model of utilisation `this` beside one of `other` (never below 0).
    pub fn predict(&self, this: Utilisation, other: Utilisation) -> f64 {
        let c = self.coefficients;
        (c[0] * this.l2 + c[1] * other.l2 + c[2] * this.dram + c[3] * other.dram + c[4]).max(0.0)
    }
}

/// Interference as measured: the model fitted to co-run samples, each model's solo utilisation (in the problem's
/// model order), and how well the fit reproduces its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredInterference {
    /// The fitted model.
    pub model: InterferenceModel,
    /// Each model's solo utilisation.
    pub utilisation: Vec<Utilisation>,
    /// Mean absolute difference between the fit's and the measured slowdowns, over the samples.
    pub fit_error: f64,
    /// Samples fitted.
    pub samples: usize,
}

impl MeasuredInterference {
    /// Model `m`'s slowdown beside `neighbour` (none: the other half of the GPU is free).
    pub fn slowdown(&self, m: usize, neighbour: Option<(usize, u32)>) -> f64 {
        neighbour.map_or(0.0, |(n, _)| self.model.predict(self.utilisation[m], self.utilisation[n]))
    }

    /// Read a utilisation table (`model,batch,l2,dram`) and a co-run table (`model,neighbour,…,slowdown`), as
    /// `scripts/gpulet_interference.py` writes them, for `models` (their names in the tables), and fit.
    pub fn read(utilisation: &Path, pairs: &Path, models: &[&str]) -> Result<MeasuredInterference, PlanError> {
        let util = read_table(utilisation, &["model", "l2", "dram"])?;
        let by_name: BTreeMap<&str, Utilisation> = util
            .iter()
            .map(|r| {
                (
                    r[0].as_str(),
                    Utilisation { l2: r[1].parse().unwrap_or(f64::NAN), dram: r[2].parse().unwrap_or(f64::NAN) },
                )
            })
            .collect();
        let of = |name: &str, file: &Path| {
            by_name.get(name).copied().filter(|u| u.l2.is_finite() && u.dram.is_finite()).ok_or_else(|| {
                PlanError::Input(format!(
                    "{}: no utilisation of model `{name}` (named in {}): measure it with `scripts/gpulet_interference.py util`",
                    utilisation.display(),
                    file.display()
                ))
            })
        };
        let mut samples = Vec::new();
        for r in read_table(pairs, &["model", "neighbour", "slowdown"])? {
            let slowdown = r[2].parse::<f64>().map_err(|_| {
                PlanError::Input(format!(
                    "{}: slowdown `{}` of `{}` beside `{}` is not a number",
                    pairs.display(),
                    r[2],
                    r[0],
                    r[1]
                ))
            })?;
            samples.push(Sample { this: of(&r[0], pairs)?, other: of(&r[1], pairs)?, slowdown });
        }
        let model = InterferenceModel::fit(&samples).map_err(|e| match e {
            PlanError::Input(why) => PlanError::Input(format!("{}: {why}", pairs.display())),
            e => e,
        })?;
        let fit_error = samples.iter().map(|s| (model.predict(s.this, s.other) - s.slowdown).abs()).sum::<f64>()
            / samples.len() as f64;
        let utilisation = models.iter().map(|m| of(m, Path::new("the spec"))).collect::<Result<_, _>>()?;
        Ok(MeasuredInterference { model, utilisation, fit_error, samples: samples.len() })
    }
}

/// The rows of a CSV table with a header (lines starting `#` are comments), as the named columns.
fn read_table(path: &Path, columns: &[&str]) -> Result<Vec<Vec<String>>, PlanError> {
    let at = |what: String| PlanError::Input(format!("{}: {what}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let header: Vec<&str> = lines.next().ok_or_else(|| at("empty table".into()))?.split(',').map(str::trim).collect();
    let index: Vec<usize> = columns
        .iter()
        .map(|c| header.iter().position(|h| h == c).ok_or_else(|| at(format!("no column `{c}` in the header"))))
        .collect::<Result<_, _>>()?;
    lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            index
                .iter()
                .map(|&i| f.get(i).map(|v| v.to_string()).ok_or_else(|| at(format!("short line `{line}`"))))
                .collect()
        })
        .collect()
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
