//! gpu-lets' schedules served on simulated time (the paper's §6 check that a schedulable rate holds its SLOs):
//! requests of each model arrive as Poisson processes and go to the model's gpu-lets in proportion to the rate
//! each was given; every gpu-let runs its duty cycle, each cycle one batch per model it serves, of the
//! requests waiting for it, one model after the other: the largest batch (up to the largest profiled) that still
//! meets the oldest request's deadline, as jig's batcher takes one, so that a burst is not left for the next
//! cycle. A batch takes its profiled
//! latency at its size (the next larger profiled batch's), slowed as `slowdown` says; a request is late when it
//! finishes after its SLO, and dropped (counted as a violation, as the paper counts them) when it can no longer
//! finish in time.

use std::collections::VecDeque;
use std::time::Duration;

use jig_planner::gpulet::{GpuletPlan, GpuletProblem};

use crate::simulate::Rng;

/// What became of one model's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Served {
    /// Arrived.
    pub arrived: u64,
    /// Finished within the SLO.
    pub in_time: u64,
    /// Finished late, or dropped.
    pub violated: u64,
}

impl Served {
    /// Violations over arrivals (0 with none).
    pub fn violation_rate(&self) -> f64 {
        if self.arrived == 0 { 0.0 } else { self.violated as f64 / self.arrived as f64 }
    }
}

/// Serve `plan` for `seconds` of Poisson arrivals at the problem's rates (seeded by `seed`), each gpu-let's
/// batches slowed by `slowdown(gpu-let index)`; per model, what became of its requests.
pub fn serve(
    problem: &GpuletProblem,
    plan: &GpuletPlan,
    seconds: f64,
    seed: u64,
    slowdown: impl Fn(usize) -> f64,
) -> Vec<Served> {
    let mut rng = Rng(seed);
    let end = Duration::from_secs_f64(seconds);
    let slo: Vec<Duration> = problem.models.iter().map(|m| Duration::from_secs_f64(m.slo_ms / 1e3)).collect();
    // Each model's gpu-let loads, and their rates: where its requests go.
    let routes: Vec<Vec<(usize, usize, f64)>> = (0..problem.models.len())
        .map(|m| {
            plan.gpulets
                .iter()
                .enumerate()
                .flat_map(|(g, gl)| {
                    gl.loads.iter().enumerate().filter(|(_, l)| l.model == m).map(move |(i, l)| (g, i, l.rate_rps))
                })
                .collect()
        })
        .collect();
    // Arrivals of every model, in time order, sent to a gpu-let load by its share of the model's rate.
    let mut arrivals: Vec<(Duration, usize, usize, usize)> = Vec::new();
    for (m, model) in problem.models.iter().enumerate() {
        let total: f64 = routes[m].iter().map(|r| r.2).sum();
        if model.rate_rps <= 0.0 || total <= 0.0 {
            continue;
        }
        let mut at = 0.0;
        loop {
            at += rng.exponential(1.0 / model.rate_rps);
            if at >= seconds {
                break;
            }
            let mut pick = rng.uniform() * total;
            let &(g, i, _) = routes[m]
                .iter()
                .find(|r| {
                    pick -= r.2;
                    pick <= 0.0
                })
                .unwrap_or(routes[m].last().expect("a routed model"));
            arrivals.push((Duration::from_secs_f64(at), m, g, i));
        }
    }
    arrivals.sort_by_key(|a| a.0);
    let mut served = vec![Served::default(); problem.models.len()];
    for a in &arrivals {
        served[a.1].arrived += 1;
    }
    // Each gpu-let's queues, one per load, and its cycles.
    for (g, gl) in plan.gpulets.iter().enumerate() {
        let slow = 1.0 + slowdown(g);
        let duty = Duration::from_secs_f64(gl.duty_ms.max(1e-3) / 1e3);
        let mut queues: Vec<VecDeque<Duration>> = gl.loads.iter().map(|_| VecDeque::new()).collect();
        let mut mine = arrivals.iter().filter(|a| a.2 == g).peekable();
        let mut cycle = Duration::ZERO;
        let mut busy_until = Duration::ZERO;
        while cycle < end + duty || queues.iter().any(|q| !q.is_empty()) {
            while let Some(a) = mine.next_if(|a| a.0 <= cycle) {
                queues[a.3].push_back(a.0);
            }
            // The cycle's batches, one per load, back to back from when the gpu-let is free.
            let mut at = cycle.max(busy_until);
            for (i, load) in gl.loads.iter().enumerate() {
                let model = &problem.models[load.model];
                let q = &mut queues[i];
                // The largest batch of what is waiting (up to the largest profiled) that still makes the oldest
                // request's deadline; the oldest is dropped when not even it alone can.
                let largest = model.largest_batch(gl.size);
                let took = |n: usize| Some(Duration::from_secs_f64(model.latency(gl.size, n as u32)? * slow / 1e3));
                let mut n = 0;
                let mut ms = Duration::ZERO;
                while let Some(&oldest) = q.front() {
                    let fits = (1..=q.len().min(largest as usize))
                        .rev()
                        .find_map(|k| took(k).filter(|&d| at + d <= oldest + slo[load.model]).map(|d| (k, d)));
                    match fits {
                        Some((k, d)) => {
                            (n, ms) = (k, d);
                            break;
                        }
                        None => {
                            q.pop_front();
                            served[load.model].violated += 1;
                        }
                    }
                }
                if n == 0 {
                    continue;
                }
                let done = at + ms;
                for arrived in q.drain(..n) {
                    if done <= arrived + slo[load.model] {
                        served[load.model].in_time += 1;
                    } else {
                        served[load.model].violated += 1;
                    }
                }
                at = done;
            }
            busy_until = at;
            cycle += duty;
        }
    }
    served
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use jig_planner::gpulet::{GpuletModel, elastic, max_scale, no_interference};

    use super::*;

    fn model(name: &str, rate: f64, fixed: f64, per_item: f64) -> GpuletModel {
        let mut latency_ms = BTreeMap::new();
        for size in [20u32, 40, 50, 60, 80, 100] {
            for b in [1u32, 2, 4, 8, 16, 32] {
                latency_ms.insert((size, b), fixed + per_item * f64::from(b) * 100.0 / f64::from(size));
            }
        }
        let slo_ms = 2.0 * latency_ms[&(100, 32)];
        GpuletModel { name: name.into(), rate_rps: rate, slo_ms, latency_ms }
    }

    fn scaled(p: &GpuletProblem, k: f64) -> GpuletProblem {
        GpuletProblem {
            models: p.models.iter().map(|m| GpuletModel { rate_rps: m.rate_rps * k, ..m.clone() }).collect(),
            ..p.clone()
        }
    }

    #[test]
    fn a_schedule_holds_its_slos_below_its_rates_and_breaks_beyond_them() {
        let p = GpuletProblem {
            models: vec![model("le", 100.0, 1.5, 0.01), model("res", 100.0, 4.0, 0.5), model("vgg", 50.0, 6.0, 0.9)],
            gpus: 2,
            splits: vec![20, 40, 50],
        };
        let k = max_scale(&p, |q| elastic(q, &no_interference));
        let planned = scaled(&p, k);
        let plan = elastic(&planned, &no_interference).unwrap();
        // Half the rates it was planned for: every gpu-let half busy.
        let served = serve(&scaled(&planned, 0.5), &plan, 20.0, 5, |_| 0.0);
        for (m, s) in planned.models.iter().zip(&served) {
            assert!(s.arrived > 100, "{}: {s:?}", m.name);
            assert_eq!(s.in_time + s.violated, s.arrived, "{}: every request is accounted for", m.name);
            assert!(s.violation_rate() < 0.01, "{}: {s:?} at half its planned rate", m.name);
        }
        // Twice them, or its batches a third slower, and it misses.
        let over = serve(&scaled(&planned, 2.0), &plan, 20.0, 5, |_| 0.0);
        assert!(over.iter().any(|s| s.violation_rate() > 0.05), "{over:?}");
        let slowed = serve(&scaled(&planned, 0.5), &plan, 20.0, 5, |_| 0.35);
        assert!(slowed.iter().any(|s| s.violation_rate() > 0.01), "{slowed:?}");
    }
}
