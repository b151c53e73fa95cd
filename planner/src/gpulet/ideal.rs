//! The paper's "ideal" scheduler (§6.2, Figures 15 and 16), the reference Algorithm 1 is measured against: every
//! way of cutting the GPUs into gpu-lets from the sizes Algorithm 1 uses (each GPU whole or split `(p, 100 − p)`
//! for `p` in `splits`: the paper's four cases per GPU), and for each an exhaustive search of which gpu-lets
//! serve which models; the first viable schedule wins, as in the paper.
//!
//! What the paper leaves open, decided here:
//! - Symmetries are searched once: GPUs are alike, so layouts are multisets (35 instead of 4⁴ = 256 on four
//!   GPUs), tried with the most whole GPUs first; so are the halves of GPUs nothing runs on yet, and models alike
//!   in all but their name (the paper's game has six LeNets), which start in the order they are placed.
//! - A model's rate is poured into a sequence of gpu-lets, each taking as much of what is left as some duty
//!   cycle of the grid still holds beside what it already serves. The search tries every sequence, for every
//!   model, largest rate first, but never a smaller portion than a gpu-let can take (a gpu-let filled by one
//!   model may leave another less room than a smaller portion would have).
//! - Interference is the caller's, as for [`super::elastic`]: a model placed first on a half slows the other
//!   half's models too, and both halves must still hold.
//! - A branch stops when the rates left need more of the GPUs than is free, counted at each model's best rate
//!   per percent of a GPU (what a duty cycle never beats).

use super::problem::{Gpulet, GpuletPlan, GpuletProblem, Interference, Load, duty_cycle, most_joining, plan_of, sizes};
use crate::error::PlanError;

/// Pours tried before the search gives up: far more than four GPUs need (the paper's size); about 10 s.
const BUDGET: u64 = 2_000_000;

/// The most GPUs [`super::Scheduler::all`] runs the search on: on the measured H200 scenarios, a search that
/// finds nothing takes up to 8 s on six GPUs and runs past `BUDGET` on eight.
pub const IDEAL_GPUS: u32 = 6;

/// The exhaustive scheduler, with interference `intf`.
pub fn ideal(p: &GpuletProblem, intf: Interference<'_>) -> Result<GpuletPlan, PlanError> {
    let sizes = sizes(p);
    // Each model's best rate per percent of a GPU: the bound a branch is cut by.
    let mut efficiency = Vec::with_capacity(p.models.len());
    for model in &p.models {
        let best = sizes
            .iter()
            .filter_map(|&s| model.capacity(s, 0.0).map(|(rate, _)| rate / f64::from(s)))
            .fold(0.0, f64::max);
        if best <= 0.0 && model.rate_rps > 0.0 {
            return Err(PlanError::Infeasible(format!(
                "model `{}`: no batch runs within half its {} ms SLO on any gpu-let",
                model.name, model.slo_ms
            )));
        }
        efficiency.push(best);
    }
    let mut order: Vec<usize> = (0..p.models.len()).filter(|&m| p.models[m].rate_rps > 0.0).collect();
    order.sort_by(|&a, &b| p.models[b].rate_rps.total_cmp(&p.models[a].rate_rps));
    let twin: Vec<bool> = (0..order.len()).map(|k| k > 0 && alike(p, intf, &sizes, order[k - 1], order[k])).collect();
    // Per GPU: whole, or one of the splits.
    let mut cases: Vec<u32> = vec![100];
    cases.extend(p.splits.iter().map(|&s| s.min(100 - s)).filter(|&s| s > 0 && s < 100));
    cases.sort_unstable();
    cases.dedup();
    let mut steps = 0;
    // Whole GPUs first (`cases` ends with 100): the layouts with the fewest gpu-lets search fastest.
    for layout in multisets(cases.len(), p.gpus as usize).into_iter().rev() {
        let mut slots = Vec::new();
        for (gpu, &case) in layout.iter().enumerate() {
            let small = cases[case];
            let halves = if small == 100 { vec![100] } else { vec![small, 100 - small] };
            slots.extend(halves.into_iter().map(|size| Slot { gpu: gpu as u32, size, loads: Vec::new() }));
        }
        let first = vec![0; order.len()];
        let mut search = Search { p, intf, slots, order: &order, efficiency: &efficiency, twin: &twin, first, steps };
        let first = order.first().map_or(0.0, |&m| p.models[m].rate_rps);
        let found = search.place(0, first, 0);
        steps = search.steps;
        match found {
            Some(true) => return Ok(search.plan()),
            Some(false) => {}
            None => {
                return Err(PlanError::Infeasible(format!(
                    "ideal: no schedule found in {BUDGET} steps of the exhaustive search on {} GPUs; it is meant for \
                     a few (the paper: 4)",
                    p.gpus
                )));
            }
        }
    }
    Err(PlanError::Infeasible(format!(
        "ideal: no way of cutting {} GPUs into gpu-lets of {:?}% serves the {} models' rates within their SLOs",
        p.gpus,
        cases,
        order.len()
    )))
}

/// Whether models `a` and `b` are interchangeable in a schedule: the same rate, SLO and latencies, slowed alike
/// beside every neighbour and slowing every neighbour alike.
fn alike(p: &GpuletProblem, intf: Interference<'_>, sizes: &[u32], a: usize, b: usize) -> bool {
    let (ma, mb) = (&p.models[a], &p.models[b]);
    if ma.rate_rps != mb.rate_rps || ma.slo_ms != mb.slo_ms || ma.latency_ms != mb.latency_ms {
        return false;
    }
    let neighbours: Vec<Option<(usize, u32)>> = std::iter::once(None)
        .chain((0..p.models.len()).flat_map(|n| sizes.iter().map(move |&s| Some((n, s)))))
        .collect();
    sizes.iter().all(|&size| {
        neighbours.iter().all(|&beside| intf(a, size, beside) == intf(b, size, beside))
            && (0..p.models.len())
                .all(|n| sizes.iter().all(|&s| intf(n, size, Some((a, s))) == intf(n, size, Some((b, s)))))
    })
}

/// Every multiset of `len` items from `0..kinds`, as non-decreasing sequences.
fn multisets(kinds: usize, len: usize) -> Vec<Vec<usize>> {
    let mut all = vec![Vec::new()];
    for _ in 0..len {
        all = all
            .into_iter()
            .flat_map(|prefix: Vec<usize>| {
                let from = prefix.last().copied().unwrap_or(0);
                (from..kinds).map(move |k| prefix.iter().copied().chain([k]).collect())
            })
            .collect();
    }
    all
}

/// A gpu-let of a layout and the (model, rate) loads the search gave it.
#[derive(Debug, Clone)]
struct Slot {
    gpu: u32,
    size: u32,
    loads: Vec<(usize, f64)>,
}

struct Search<'a> {
    p: &'a GpuletProblem,
    intf: Interference<'a>,
    slots: Vec<Slot>,
    /// Models with a rate, largest first: the order they are placed in.
    order: &'a [usize],
    efficiency: &'a [f64],
    /// Per position in `order`: whether the model is alike to the one before it (same rate, SLO, latencies and
    /// interference), and the first slot each model was placed on.
    twin: &'a [bool],
    first: Vec<usize>,
    steps: u64,
}

impl Search<'_> {
    /// Place `left` of the `k`th model onward, this model on slots from `from` on: whether a schedule was found
    /// (`None`: the budget ran out).
    fn place(&mut self, k: usize, left: f64, from: usize) -> Option<bool> {
        let Some(&m) = self.order.get(k) else { return Some(true) };
        let rate = self.p.models[m].rate_rps;
        if left <= 1e-9 * rate {
            let next = self.order.get(k + 1).map_or(0.0, |&n| self.p.models[n].rate_rps);
            // A model alike to the one before it starts no earlier than that one did: the other order is the
            // same schedule with the two swapped.
            let start = if self.twin.get(k + 1) == Some(&true) { self.first[k] } else { 0 };
            return self.place(k + 1, next, start);
        }
        if self.needs_more_than_free(k, left) {
            return Some(false);
        }
        // Halves of GPUs with nothing on them yet are alike when their sizes are: try one of each.
        let mut tried_empty: Vec<(u32, u32)> = Vec::new();
        for i in from..self.slots.len() {
            if let Some(other) = self.other_half(i).map(|j| &self.slots[j]) {
                if self.slots[i].loads.is_empty() && other.loads.is_empty() {
                    let kind = (self.slots[i].size, other.size);
                    if tried_empty.contains(&kind) {
                        continue;
                    }
                    tried_empty.push(kind);
                }
            } else if self.slots[i].loads.is_empty() {
                if tried_empty.contains(&(100, 0)) {
                    continue;
                }
                tried_empty.push((100, 0));
            }
            self.steps += 1;
            if self.steps > BUDGET {
                return None;
            }
            let portion = self.most(i, m, left);
            if portion <= 1e-6 * rate {
                continue;
            }
            if left == rate {
                self.first[k] = i;
            }
            self.slots[i].loads.push((m, portion));
            let found = self.place(k, left - portion, i + 1);
            if found != Some(false) {
                return found; // the slots keep the schedule found
            }
            self.slots[i].loads.pop();
        }
        Some(false)
    }

    /// Whether the rates left (`left` of the `k`th model, all of the later ones) need more percent of a GPU than
    /// the slots have free, each at its model's best rate per percent.
    fn needs_more_than_free(&self, k: usize, left: f64) -> bool {
        let need = left / self.efficiency[self.order[k]]
            + self.order[k + 1..].iter().map(|&m| self.p.models[m].rate_rps / self.efficiency[m]).sum::<f64>();
        let free: f64 = self
            .slots
            .iter()
            .map(|s| {
                let used: f64 = s.loads.iter().map(|&(m, r)| r / self.efficiency[m]).sum();
                (f64::from(s.size) - used).max(0.0)
            })
            .sum();
        need > free * (1.0 + 1e-9)
    }

    /// The other half of slot `i`'s GPU, if it is split.
    fn other_half(&self, i: usize) -> Option<usize> {
        let gpu = self.slots[i].gpu;
        (0..self.slots.len()).find(|&j| j != i && self.slots[j].gpu == gpu)
    }

    /// The first model of the other half of slot `j`'s GPU, and that half's size: what slows slot `j`.
    fn beside(&self, j: usize) -> Option<(usize, u32)> {
        self.other_half(j).and_then(|o| self.slots[o].loads.first().map(|&(n, _)| (n, self.slots[o].size)))
    }

    /// The most of `left` that slot `i` serves of model `m` beside what it serves already (0: none, or the other
    /// half of its GPU would no longer hold beside it).
    fn most(&self, i: usize, m: usize, left: f64) -> f64 {
        let slot = &self.slots[i];
        let beside = self.beside(i);
        // Placed first on its slot, m becomes the other half's neighbour, whatever its rate.
        if slot.loads.is_empty()
            && let Some(o) = self.other_half(i)
            && self.cycle(o, Some((m, slot.size))).is_none()
        {
            return 0.0;
        }
        let slowdown: Vec<f64> = slot.loads.iter().map(|&(n, _)| (self.intf)(n, slot.size, beside)).collect();
        let joining = most_joining(self.p, slot.size, &slot.loads, &slowdown, m, (self.intf)(m, slot.size, beside));
        left.min(joining)
    }

    /// Slot `j`'s duty cycle and batches, slowed by `beside` (model, size) on the other half of its GPU.
    fn cycle(&self, j: usize, beside: Option<(usize, u32)>) -> Option<(f64, Vec<u32>)> {
        let slot = &self.slots[j];
        if slot.loads.is_empty() {
            return Some((0.0, Vec::new()));
        }
        let slowdown: Vec<f64> = slot.loads.iter().map(|&(n, _)| (self.intf)(n, slot.size, beside)).collect();
        duty_cycle(self.p, slot.size, &slot.loads, &slowdown)
    }

    /// The schedule the slots hold now.
    fn plan(&self) -> GpuletPlan {
        let gpulets = (0..self.slots.len())
            .filter(|&j| !self.slots[j].loads.is_empty())
            .map(|j| {
                let slot = &self.slots[j];
                let (duty_ms, batches) = self.cycle(j, self.beside(j)).expect("a found schedule holds");
                let loads = slot
                    .loads
                    .iter()
                    .zip(batches)
                    .map(|(&(model, rate_rps), batch)| Load { model, rate_rps, batch })
                    .collect();
                Gpulet { gpu: slot.gpu, size: slot.size, loads, duty_ms }
            })
            .collect();
        plan_of(gpulets)
    }
}
