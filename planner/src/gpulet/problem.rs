//! What gpu-lets plans (models and their profiled latencies on gpu-let sizes), the schedules it makes, and the
//! duty cycle on which a gpu-let serves its models, which every scheduler here (Algorithm 1, squishy bin packing,
//! the ideal search) checks its gpu-lets with.

use std::collections::BTreeMap;

use crate::interference::MeasuredInterference;

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
    pub(super) fn capacity(&self, size: u32, slowdown: f64) -> Option<(f64, u32)> {
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
pub(super) fn duty_cycle(
    p: &GpuletProblem,
    size: u32,
    loads: &[(usize, f64)],
    slowdown: &[f64],
) -> Option<(f64, Vec<u32>)> {
    let rows: Vec<_> = loads.iter().map(|&(m, _)| rows_on(p, size, m)).collect();
    cycle_lengths(p, loads.iter().map(|&(m, _)| m)).find_map(|duty| {
        let (busy, batches) = batches_at(p, duty, loads, slowdown, &rows)?;
        (busy <= duty).then_some((duty, batches))
    })
}

/// The largest rate of model `m`, slowed by `slowdown_m`, that joins `loads` on a gpu-let of `size` with a duty
/// cycle of [`duty_cycle`]'s grid still holding (0: none).
pub(super) fn most_joining(
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

/// Every gpu-let size: the split sizes, their complements, and the whole GPU, ascending.
pub(super) fn sizes(p: &GpuletProblem) -> Vec<u32> {
    let mut all: Vec<u32> = p.splits.iter().flat_map(|&s| [s, 100 - s]).chain([100]).filter(|&s| s > 0).collect();
    all.sort_unstable();
    all.dedup();
    all
}

pub(super) fn plan_of(gpulets: Vec<Gpulet>) -> GpuletPlan {
    let mut gpus: Vec<u32> = gpulets.iter().map(|g| g.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    GpuletPlan { gpus_used: gpus.len() as u32, gpulets }
}
